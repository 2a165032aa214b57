//! `RunId`: the checked identifier that keeps run namespaces apart.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The longest run id accepted, in bytes.
pub const MAX_RUN_ID_LEN: usize = 128;

/// A checked run identifier: 1 to 128 bytes of `[A-Za-z0-9_-]`.
///
/// A run id becomes one path segment in object storage
/// (`<prefix>/memos/<run>/...`). The alphabet leaves no way to write an
/// empty segment, a `/`, `.`/`..` or a percent-encoded byte, so no run id can
/// name a folder that overlaps another run's: clearing `run` can never reach
/// `run-suffix` or `run/x`. Ids are case-sensitive, and the segment keeps
/// them apart on case-insensitive folders too: each upper-case letter is
/// written as `=` and the letter in lower case (`Order-1` is `=order-1`), so
/// `Order-1` and `order-1` never share an object. An id whose escaped form
/// would exceed 196 bytes (it has more than 68 capitals) is written in lower
/// case followed by a mask of its capitals instead, so that every valid id, up to 128 capitals, fits every backend's
/// name limits (255-byte file names on a local folder, 1,024-byte keys).
///
/// # Example
///
/// ```
/// use memo_runtime::RunId;
///
/// let run: RunId = "order-1234".parse()?;
/// assert_eq!(run.as_str(), "order-1234");
/// assert!(RunId::new("a/b").is_err());
/// # Ok::<(), memo_runtime::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(String);

impl RunId {
    /// Checks `id` and wraps it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRunId`] if `id` is empty, longer than
    /// [`MAX_RUN_ID_LEN`] bytes, or has a byte outside `[A-Za-z0-9_-]`.
    pub fn new(id: impl Into<String>) -> Result<RunId> {
        let id = id.into();
        match check(&id) {
            Ok(()) => Ok(RunId(id)),
            Err(reason) => Err(Error::InvalidRunId { input: id, reason }),
        }
    }

    /// The run id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One use of a run id: what tells a run from an earlier, deleted run that
/// had the same id.
///
/// Every run a runtime store creates draws a fresh random incarnation, and
/// everything the run stores (memo entries, step outputs, runtime records,
/// its terminal marker) is kept under it, so a run id used again after its
/// run was deleted is a new run that shares nothing with the earlier one.
/// Memos made outside a workflow ([`MemoStore::new_memo`]) use
/// [`Incarnation::STANDALONE`].
///
/// Written in paths as 16 lower-case hex digits.
///
/// [`MemoStore::new_memo`]: crate::MemoStore::new_memo
///
/// # Example
///
/// ```
/// use memo_runtime::Incarnation;
///
/// let a = Incarnation::random();
/// assert_ne!(a, Incarnation::random());
/// assert_ne!(a, Incarnation::STANDALONE);
/// assert_eq!(Incarnation::from_u64(255).to_string(), "00000000000000ff");
/// ```
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Incarnation(u64);

impl Incarnation {
    /// The incarnation of memos used outside a workflow run: `0`, never
    /// drawn by [`Incarnation::random`].
    pub const STANDALONE: Incarnation = Incarnation(0);

    /// A fresh incarnation: random, never [`STANDALONE`](Self::STANDALONE).
    pub fn random() -> Incarnation {
        loop {
            let n = unique_token();
            if n != 0 {
                return Incarnation(n);
            }
        }
    }

    /// The incarnation with number `n`.
    pub const fn from_u64(n: u64) -> Incarnation {
        Incarnation(n)
    }

    /// Its number.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Parses the 16-hex-digit form written in paths.
    pub(crate) fn parse_hex(s: &str) -> Option<Incarnation> {
        let well_formed =
            s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        well_formed
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
            .map(Incarnation)
    }
}

impl fmt::Display for Incarnation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl fmt::Debug for Incarnation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Incarnation({self})")
    }
}

fn check(id: &str) -> Result<(), &'static str> {
    if id.is_empty() {
        return Err("a run id cannot be empty");
    }
    if id.len() > MAX_RUN_ID_LEN {
        return Err("a run id is at most 128 bytes");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err("a run id may only contain ASCII letters, digits, '-' and '_'");
    }
    Ok(())
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunId({:?})", self.0)
    }
}

impl FromStr for RunId {
    type Err = Error;

    fn from_str(s: &str) -> Result<RunId> {
        RunId::new(s)
    }
}

impl TryFrom<&str> for RunId {
    type Error = Error;

    fn try_from(s: &str) -> Result<RunId> {
        RunId::new(s)
    }
}

impl TryFrom<String> for RunId {
    type Error = Error;

    fn try_from(s: String) -> Result<RunId> {
        RunId::new(s)
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for RunId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for RunId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RunId, D::Error> {
        let s = String::deserialize(deserializer)?;
        RunId::new(s).map_err(serde::de::Error::custom)
    }
}

/// A number no other call returns: std's randomly keyed hasher (seeded from
/// the operating system) over the time, the process id and a counter.
///
/// While a [`with_token_source`] call runs on this thread (the `testing`
/// simulator's histories), its source draws it instead, so that a seed
/// replays exactly.
pub(crate) fn unique_token() -> u64 {
    #[cfg(any(test, feature = "testing"))]
    if let Some(token) = seeded::next() {
        return token;
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// Runs `body` with every [`unique_token`] of this thread drawn from
/// `source`: how the `testing` simulator makes a seed replay exactly, its
/// incarnations, attempt tokens and worker ids included. The thread's
/// previous source is back when `body` returns or panics.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn with_token_source<R>(
    source: impl FnMut() -> u64 + 'static,
    body: impl FnOnce() -> R,
) -> R {
    let _restore = seeded::install(Box::new(source));
    body()
}

/// The next token of the [`with_token_source`] call running on this
/// thread, if one is: how the simulator draws key material from its seed
/// (see [`crate::seal::fill_random`]).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn seeded_token() -> Option<u64> {
    seeded::next()
}

#[cfg(any(test, feature = "testing"))]
mod seeded {
    use std::cell::RefCell;

    type Source = Box<dyn FnMut() -> u64>;

    thread_local! {
        /// The token source of [`with_token_source`](super::with_token_source).
        static SOURCE: RefCell<Option<Source>> = const { RefCell::new(None) };
    }

    pub(super) fn next() -> Option<u64> {
        SOURCE.with(|source| source.borrow_mut().as_mut().map(|draw| draw()))
    }

    /// Puts back the source that was installed before, when dropped.
    pub(super) struct Restore(Option<Source>);

    pub(super) fn install(source: Source) -> Restore {
        Restore(SOURCE.with(|slot| slot.borrow_mut().replace(source)))
    }

    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            SOURCE.with(|slot| *slot.borrow_mut() = previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_whole_alphabet_and_the_length_bounds() {
        for ok in [
            "a",
            "Z",
            "0",
            "-",
            "_",
            "run_01-Ab",
            &"x".repeat(MAX_RUN_ID_LEN),
        ] {
            assert_eq!(RunId::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn rejects_empty_long_and_path_like_ids_with_the_input_named() {
        let long = "x".repeat(MAX_RUN_ID_LEN + 1);
        for bad in [
            "", "a/b", "/", ".", "..", "a%2Fb", "a b", "é", "a\nb", "a.b", &long,
        ] {
            match RunId::new(bad) {
                Err(Error::InvalidRunId { input, .. }) => assert_eq!(input, bad),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn conversions_agree() {
        let a: RunId = "r-1".parse().unwrap();
        let b = RunId::try_from("r-1").unwrap();
        let c = RunId::try_from(String::from("r-1")).unwrap();
        assert_eq!(a, b);
        assert_eq!(b, c);
        assert_eq!(a.to_string(), "r-1");
        assert_eq!(format!("{a:?}"), "RunId(\"r-1\")");
    }

    #[test]
    fn serializes_as_its_string_and_refuses_invalid_strings() {
        let run = RunId::new("r_9").unwrap();
        let bytes = rmp_serde::to_vec(&run).unwrap();
        assert_eq!(bytes, rmp_serde::to_vec("r_9").unwrap());
        assert_eq!(rmp_serde::from_slice::<RunId>(&bytes).unwrap(), run);
        let bad = rmp_serde::to_vec("a/b").unwrap();
        let err = rmp_serde::from_slice::<RunId>(&bad).unwrap_err();
        assert!(err.to_string().contains("invalid run id"), "{err}");
    }
}
