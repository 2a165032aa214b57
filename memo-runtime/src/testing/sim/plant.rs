//! Foreign objects another writer of the shared store plants, with
//! [`Simulation::foreign_objects`](super::Simulation::foreign_objects): a
//! huge object, a value nested deeper than memo reads, a forged checkpoint,
//! each in place of an object memo wrote, for a while.
//!
//! [`Foreign`] is the shared store as the workers see it: a planted object
//! replaces what the store holds at its path until a worker overwrites or
//! deletes the path, or the world removes the plant (which restores what
//! the store holds there). The checker's own fresh views read the store
//! under it, so that they keep seeing what was committed.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result as StoreResult,
};

use super::stores::Shared;
use crate::envelope;
use crate::forward::forward_object_store;
use crate::seal::PLAIN;
use crate::testing::HugeObjects;

/// The size of a planted huge object: 1 TiB, as a sparse file costs its
/// writer nothing.
pub(super) const HUGE: u64 = 1 << 40;

/// What is planted at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A 1 TiB object.
    Huge,
    /// A well-framed value nested deeper than [`MAX_NESTING_DEPTH`](crate::limits::MAX_NESTING_DEPTH) (in a
    /// record, as a field it does not know).
    Nested,
    /// A well-framed checkpoint whose receipts lack their digests (or,
    /// with no receipts, whose position is `u64::MAX`).
    Forged,
}

/// The shared store with planted objects in place of some of its own.
pub(super) struct Foreign {
    inner: HugeObjects<Shared>,
    /// Planted bytes by path (huge objects are planted in `inner`).
    bytes: Arc<Mutex<BTreeMap<Path, Bytes>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Foreign {
    pub(super) fn new(shared: Shared) -> Foreign {
        Foreign {
            inner: HugeObjects::new(shared),
            bytes: Arc::default(),
        }
    }

    /// Plants a huge object at `path`.
    pub(super) fn plant_huge(&self, path: Path) {
        lock(&self.bytes).remove(&path);
        self.inner.plant(path, HUGE);
    }

    /// Plants `bytes` at `path`.
    pub(super) fn plant_bytes(&self, path: Path, bytes: Bytes) {
        self.inner.remove(&path);
        lock(&self.bytes).insert(path, bytes);
    }

    /// Removes what is planted at `path`: reads see the store's own object
    /// there again.
    pub(super) fn remove(&self, path: &Path) {
        self.inner.remove(path);
        lock(&self.bytes).remove(path);
    }

    fn planted(&self, path: &Path) -> Option<Bytes> {
        lock(&self.bytes).get(path).cloned()
    }
}

/// How deep a planted value nests: past [`MAX_NESTING_DEPTH`](crate::limits::MAX_NESTING_DEPTH), and deep
/// enough (with rmp-serde's own limit of 1,024 above it) that a reader
/// without memo's limit overflows its stack in a debug build.
const NESTED_DEPTH: usize = 1_000;

/// A value nested [`NESTED_DEPTH`] arrays deep.
fn deep_value() -> Vec<u8> {
    let mut value = vec![0x91; NESTED_DEPTH]; // a one-item array
    value.push(0xc0); // nil
    value
}

/// A foreign object framed as memo frames every object: the record
/// `original` (a log entry, a map with named fields) with one more field
/// holding a value nested deeper than [`MAX_NESTING_DEPTH`](crate::limits::MAX_NESTING_DEPTH) (a reader skips
/// a field it does not know, value and all), or else that value alone.
pub(super) fn nested(path: &Path, original: Option<Bytes>) -> Bytes {
    let record = original.and_then(|framed| envelope::open(path, framed, &PLAIN, u64::MAX).ok());
    let payload = match record.as_deref() {
        // A map of up to 14 fields (a fixmap): one field more.
        Some([first @ 0x80..=0x8e, fields @ ..]) => {
            let mut payload = vec![first + 1];
            payload.extend_from_slice(fields);
            payload.extend_from_slice(b"\xa7foreign");
            payload.extend_from_slice(&deep_value());
            payload
        }
        _ => deep_value(),
    };
    envelope::seal(path, &payload, &PLAIN)
}

/// The checkpoint `framed` (a base or a delta, as memo wrote it), forged:
/// its receipts without their digests if it holds some, or else naming
/// `u64::MAX` as the position it holds the run up to; `None` if it is not
/// a framed checkpoint.
pub(super) fn forged(path: &Path, framed: Bytes) -> Option<Bytes> {
    let payload = envelope::open(path, framed, &PLAIN, u64::MAX).ok()?;
    let without_digests = replace_value(&payload, b"commit_digests", &[0x90])
        .filter(|forged| forged.len() < payload.len());
    let forged = match without_digests {
        Some(forged) => forged,
        None => {
            let mut last = vec![0xcf];
            last.extend_from_slice(&u64::MAX.to_be_bytes());
            replace_value(&payload, b"next", &last)?
        }
    };
    Some(envelope::seal(path, &forged, &PLAIN))
}

/// `payload` (a record: maps with named fields) with the value of the
/// first field named `key` replaced by the encoded value `value`.
fn replace_value(payload: &[u8], key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    use serde::Deserialize;
    // A field name up to 31 bytes is a fixstr.
    let mut name = vec![0xa0 | u8::try_from(key.len()).ok().filter(|&n| n < 32)?];
    name.extend_from_slice(key);
    let at = payload.windows(name.len()).position(|w| w == name)? + name.len();
    let rest = payload.get(at..)?;
    let mut decoder = rmp_serde::Deserializer::new(std::io::Cursor::new(rest));
    serde::de::IgnoredAny::deserialize(&mut decoder).ok()?;
    let len = usize::try_from(decoder.position()).ok()?;
    let mut out = payload[..at].to_vec();
    out.extend_from_slice(value);
    out.extend_from_slice(rest.get(len..)?);
    Some(out)
}

/// What kinds of object can be planted at `path` (a memo path, under the
/// simulator's prefix).
pub(super) fn kinds_for(path: &Path) -> Vec<Kind> {
    let parts: Vec<_> = path.parts().map(|p| p.as_ref().to_string()).collect();
    let has = |name: &str| parts.iter().any(|p| p == name);
    let mut kinds = vec![Kind::Huge];
    if has("memos") || has("log") {
        kinds.push(Kind::Nested);
    }
    if has("checkpoint") || has("delta") {
        kinds.push(Kind::Forged);
    }
    kinds
}

impl fmt::Debug for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Foreign")
            .field("huge", &self.inner.planted())
            .field("bytes", &lock(&self.bytes).keys().collect::<Vec<_>>())
            .finish()
    }
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Foreign")
    }
}

fn planted_get(location: &Path, bytes: Bytes, options: &GetOptions) -> StoreResult<GetResult> {
    let size = bytes.len() as u64;
    let meta = ObjectMeta {
        location: location.clone(),
        last_modified: std::time::SystemTime::UNIX_EPOCH.into(),
        size,
        e_tag: Some(format!("\"planted-{:08x}\"", crc32fast::hash(&bytes))),
        version: None,
    };
    options.check_preconditions(&meta)?;
    let range = match &options.range {
        Some(range) => range
            .as_range(size)
            .map_err(|e| object_store::Error::Generic {
                store: "Foreign",
                source: Box::new(e),
            })?,
        None => 0..size,
    };
    let body = bytes.slice(range.start as usize..range.end as usize);
    Ok(GetResult {
        payload: GetResultPayload::Stream(stream::once(async move { Ok(body) }).boxed()),
        attributes: Attributes::default(),
        range,
        meta,
        extensions: Default::default(),
    })
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Foreign {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> StoreResult<PutResult> {
        if self.planted(location).is_some() {
            if opts.mode == PutMode::Create {
                return Err(object_store::Error::AlreadyExists {
                    path: location.to_string(),
                    source: "a foreign object is planted here".into(),
                });
            }
            lock(&self.bytes).remove(location);
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> StoreResult<Box<dyn MultipartUpload>> {
        lock(&self.bytes).remove(location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> StoreResult<GetResult> {
        match self.planted(location) {
            Some(bytes) => planted_get(location, bytes, &options),
            None => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> StoreResult<Vec<Bytes>> {
        match self.planted(location) {
            Some(bytes) => Ok(ranges
                .iter()
                .map(|r| {
                    let end = (r.end as usize).min(bytes.len());
                    bytes.slice((r.start as usize).min(end)..end)
                })
                .collect()),
            None => self.inner.get_ranges(location, ranges).await,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, StoreResult<Path>>,
    ) -> BoxStream<'static, StoreResult<Path>> {
        let planted = Arc::clone(&self.bytes);
        let unplanted = locations
            .inspect(move |location| {
                if let Ok(location) = location {
                    lock(&planted).remove(location);
                }
            })
            .boxed();
        self.inner.delete_stream(unplanted)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> StoreResult<()> {
        lock(&self.bytes).remove(to);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> StoreResult<()> {
        lock(&self.bytes).remove(to);
        self.inner.rename_opts(from, to, options).await
    }

    forward_object_store!(self.inner => list, list_with_offset, list_with_delimiter);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forged_checkpoint_loses_its_digests_or_names_the_last_position_and_stays_well_framed() {
        let path = Path::from("sim/runs/r/0/checkpoint/00000000000000000040");
        let record = crate::codec::encode(&ForgeMe {
            incarnation: 7,
            next: 40,
            state: "s".into(),
        })
        .unwrap();
        let forged =
            forged(&path, envelope::seal(&path, &record, &PLAIN)).expect("a checkpoint to forge");
        let payload = envelope::open(&path, forged, &PLAIN, u64::MAX).unwrap();
        let read: ForgeMe = crate::codec::decode(&payload).unwrap();
        assert_eq!((read.incarnation, read.next), (7, u64::MAX));
        assert_eq!(read.state, "s");

        let with_digests = crate::codec::encode(&WithDigests {
            next: 3,
            commit_digests: vec![[7; 32]],
            receipts: vec![1],
        })
        .unwrap();
        let forged = super::forged(&path, envelope::seal(&path, &with_digests, &PLAIN))
            .expect("a checkpoint to forge");
        let read: WithDigests =
            crate::codec::decode(&envelope::open(&path, forged, &PLAIN, u64::MAX).unwrap())
                .unwrap();
        assert_eq!(read.next, 3);
        assert!(read.commit_digests.is_empty());
        assert_eq!(read.receipts, [1]);
    }

    #[test]
    fn a_corrupt_read_counts_unless_it_names_a_standing_plant() {
        use super::super::checker::{CORRUPT_READ, Checker};
        let objects: Shared = Arc::new(object_store::memory::InMemory::new());
        let clock = Arc::new(crate::clock::ManualClock::new(0));
        let checker = Checker::new(objects, clock, 0, 1, 1, false);
        let planted = "sim/runs/r/0/log/00000000000000000001";
        let read = |path: &str| format!("load_run: corrupt object at {path}: does not decode");
        checker.set_planted(planted, true);
        checker.violation(CORRUPT_READ, read(planted));
        assert!(checker.violations().is_empty(), "a read meeting a plant");
        // Another object, even one whose path begins with the planted one.
        checker.violation(CORRUPT_READ, read(&format!("{planted}0")));
        checker.violation(CORRUPT_READ, read("sim/runs/r/0/log/00000000000000000002"));
        // Another invariant that names the planted path (a wrong value).
        checker.violation("every caller of a key sees one value", read(planted));
        checker.set_planted(planted, false);
        checker.violation(CORRUPT_READ, read(planted));
        assert_eq!(checker.violations().len(), 4);
    }

    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    struct WithDigests {
        next: u64,
        commit_digests: Vec<[u8; 32]>,
        receipts: Vec<u32>,
    }

    #[test]
    fn a_nested_plant_is_deeper_than_memo_reads() {
        let path = Path::from("p");
        let record = envelope::seal(
            &path,
            &crate::codec::encode(&WithDigests {
                next: 3,
                commit_digests: Vec::new(),
                receipts: vec![1],
            })
            .unwrap(),
            &PLAIN,
        );
        for original in [None, Some(record)] {
            let payload = envelope::open(&path, nested(&path, original), &PLAIN, u64::MAX).unwrap();
            let read = crate::codec::decode::<serde::de::IgnoredAny>(&payload);
            assert!(matches!(
                read,
                Err(crate::codec::DecodeError::DepthLimitExceeded)
            ));
        }
    }

    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    struct ForgeMe {
        incarnation: u64,
        next: u64,
        state: String,
    }
}
