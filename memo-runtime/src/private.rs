//! The runtime half of `#[memoized]`: the only items the expansion names.
//!
//! Not public API. Everything here may change in any release; it is public
//! only because macro-generated code in the user's crate must reach it.
//!
//! The traits carry `#[diagnostic::on_unimplemented]` so that a misuse
//! caught by the type checker (an argument that is not `Serialize`, a return
//! type that is not a `Result`) is reported in `#[memoized]`'s own words at
//! the user's token.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::OwnedMutexGuard;
use tracing::Instrument;

use crate::{Error, Memo, Result, content_key};

/// A return type `#[memoized]` can work with: `Result<T, E>` under any
/// alias, with a storable `T` and an `E` that can carry memo's errors.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` needs a `Result` return type, found `{Self}`",
    label = "only `Ok` values are committed, so this must be a `Result`",
    note = "write `Result<T, E>` (or an alias such as `anyhow::Result<T>`) with \
            `T: Serialize + DeserializeOwned` and `E: From<memo_runtime::Error>`"
)]
pub trait MemoResult: Sized {
    /// The committed value.
    type Ok;
    /// The function's error, never committed.
    type Err;

    /// Splits into the standard `Result`.
    fn into_result(self) -> core::result::Result<Self::Ok, Self::Err>;

    /// Builds from the standard `Result`.
    fn from_result(result: core::result::Result<Self::Ok, Self::Err>) -> Self;
}

impl<T, E> MemoResult for core::result::Result<T, E> {
    type Ok = T;
    type Err = E;

    fn into_result(self) -> Self {
        self
    }

    fn from_result(result: Self) -> Self {
        result
    }
}

/// An `Ok` type that can be committed and read back.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` cannot store `{Self}`: the `Ok` type must implement \
               `Serialize` and `DeserializeOwned`",
    label = "the `Ok` type of this `Result` is committed to the memo",
    note = "derive `serde::Serialize` and `serde::Deserialize` for `{Self}`, and own \
            its data (no borrowed fields): it is read back from storage"
)]
pub trait StoredValue: Serialize + DeserializeOwned {}

impl<T: Serialize + DeserializeOwned> StoredValue for T {}

/// An error type that can carry memo's own errors.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` needs an error type that can carry `memo_runtime::Error`; \
               `{Self}` cannot",
    label = "the memo's own failures (storage, decoding) are returned as this error",
    note = "implement `From<memo_runtime::Error>` for `{Self}`, or use \
            `memo_runtime::Error`, `anyhow::Error` or `Box<dyn std::error::Error>`"
)]
pub trait FromMemoError: From<Error> {}

impl<E: From<Error>> FromMemoError for E {}

/// An argument that can be part of a key.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` cannot put `{Self}` in the key: it does not implement `Serialize`",
    label = "this argument is part of the key",
    note = "derive `serde::Serialize` for the argument's type, or leave the argument out \
            of the key with `#[memoized(skip(name))]`"
)]
pub trait KeyPart: Serialize {}

impl<T: Serialize + ?Sized> KeyPart for T {}

/// A receiver that can be part of a key.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` cannot put `self` in the key: `{Self}` does not implement `Serialize`",
    label = "`self` is part of the key unless skipped",
    note = "add `skip(self)` to the attribute: `#[memoized(skip(self))]`, or derive \
            `serde::Serialize` for `{Self}`"
)]
pub trait ReceiverKeyPart: Serialize {}

impl<T: Serialize + ?Sized> ReceiverKeyPart for T {}

/// Something that holds a [`Memo`]: what `memo = ...` may name.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` needs a `Memo`, found `{Self}`",
    label = "this must be a `Memo`, `&Memo` or `&mut Memo`",
    note = "point `memo = ...` at an expression of type `&Memo`, e.g. `memo = ctx.memo()`"
)]
pub trait MemoHandle {
    /// The memo.
    fn memo_handle(&self) -> &Memo;
}

impl MemoHandle for Memo {
    fn memo_handle(&self) -> &Memo {
        self
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for &H {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for &mut H {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for Arc<H> {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for Box<H> {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

/// The memo behind `handle`.
pub fn memo_of<H: MemoHandle + ?Sized>(handle: &H) -> &Memo {
    handle.memo_handle()
}

/// Checks that an argument can be part of the key, and erases its type.
///
/// The check happens here, in one generic bound, and the erased return type
/// does not depend on it: a failed check is one error, at the argument,
/// not a second one where the key is serialized.
pub fn key_part<T: KeyPart>(value: &T) -> &dyn erased_serde::Serialize {
    value
}

/// [`key_part`] for `self`, whose errors suggest `skip(self)`.
pub fn receiver_key_part<T: ReceiverKeyPart>(value: &T) -> &dyn erased_serde::Serialize {
    value
}

/// The key of a memoized call: [`content_key`] of `(name, version, args)`,
/// `args` being the arguments in the key, in order.
///
/// A slice and a tuple both encode as one MessagePack array, so for one or
/// more arguments this is `content_key(&(name, version, (arg1, arg2, ..)))`;
/// with none it is `content_key(&(name, version, [(); 0]))`.
///
/// # Errors
///
/// [`Error::Serialization`] if an argument fails to serialize.
pub fn key(name: &str, version: u32, args: &[&dyn erased_serde::Serialize]) -> Result<String> {
    content_key(&(name, version, args))
}

/// What a memoized call needs to know about its return type `R`, as plain
/// function pointers: splitting `R` into its `Ok` type `T` and error `E`,
/// encoding and decoding `T`, carrying memo's errors as `E`.
///
/// [`codec`] checks every bound once, at the return type; [`memoize`] then
/// needs none, so a return type that does not qualify is one error there
/// instead of one per use.
pub struct Codec<R, T, E> {
    split: fn(R) -> core::result::Result<T, E>,
    join: fn(core::result::Result<T, E>) -> R,
    encode: fn(&T) -> core::result::Result<Vec<u8>, rmp_serde::encode::Error>,
    decode: fn(&[u8]) -> core::result::Result<T, rmp_serde::decode::Error>,
    from_memo_error: fn(Error) -> E,
}

/// The [`Codec`] of the return type `R`.
pub fn codec<R>() -> Codec<R, R::Ok, R::Err>
where
    R: MemoResult,
    // Bounds on the parts, not on `R`'s impl, so that a failure names the
    // part (`Draft: StoredValue`) and is reported in this module's words.
    R::Ok: StoredValue,
    R::Err: FromMemoError,
{
    Codec {
        split: R::into_result,
        join: R::from_result,
        encode: |value| rmp_serde::to_vec_named(value),
        decode: |bytes| rmp_serde::from_slice(bytes),
        from_memo_error: R::Err::from,
    }
}

/// Runs one memoized call: returns the committed value for `key` if there
/// is one, else runs `body` and commits its `Ok` value.
pub async fn memoize<R, T, E, F>(
    memo: &Memo,
    function: &'static str,
    key: Result<String>,
    codec: Codec<R, T, E>,
    body: F,
) -> R
where
    F: Future<Output = R>,
{
    let span = tracing::info_span!(
        "memoized",
        function,
        run = %memo.run_id(),
        step = memo.step_number(),
        outcome = tracing::field::Empty,
    );
    let call = Call {
        memo,
        function,
        codec: &codec,
    };
    let result = async {
        match key {
            Ok(key) => call.run(&key, body).await,
            Err(e) => Err(Failure::Memo(call.key_error(e))),
        }
    }
    .instrument(span.clone())
    .await;
    let outcome = match &result {
        Ok((_, outcome)) => *outcome,
        Err(_) => Outcome::Error,
    };
    span.record("outcome", outcome.as_str());
    match result {
        Ok((value, _)) => (codec.join)(Ok(value)),
        Err(Failure::Body(e)) => (codec.join)(Err(e)),
        Err(Failure::Memo(e)) => {
            span.in_scope(|| tracing::warn!(error = %e, "memoized call failed"));
            (codec.join)(Err((codec.from_memo_error)(e)))
        }
    }
}

/// How a call was answered, as recorded on its span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A committed value was found; the body did not run.
    Hit,
    /// The body ran and its value is the one committed.
    Miss,
    /// The body ran, but another attempt committed first; its value is
    /// returned.
    CommittedByOther,
    /// The body or the memo failed; nothing was committed.
    Error,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Miss => "miss",
            Outcome::CommittedByOther => "committed-by-other",
            Outcome::Error => "error",
        }
    }
}

/// Why a call returned no value.
enum Failure<E> {
    /// The body returned `Err`; it is passed through, never committed.
    Body(E),
    /// The memo failed: storage, encoding or decoding.
    Memo(Error),
}

/// One memoized call in progress.
struct Call<'a, R, T, E> {
    memo: &'a Memo,
    function: &'static str,
    codec: &'a Codec<R, T, E>,
}

impl<R, T, E> Call<'_, R, T, E> {
    async fn run<F>(&self, key: &str, body: F) -> Result<(T, Outcome), Failure<E>>
    where
        F: Future<Output = R>,
    {
        if let Some(committed) = self.memo.get(key).await.map_err(Failure::Memo)? {
            return Ok((self.decode(key, &committed)?, Outcome::Hit));
        }
        // Whoever holds the flight for this entry runs the body; the others
        // wait and then find its committed value on the re-read, so
        // identical calls in one process run the body once.
        let _flight = Flight::enter(self.memo.flight_key(key)).await;
        if let Some(committed) = self.memo.get(key).await.map_err(Failure::Memo)? {
            return Ok((self.decode(key, &committed)?, Outcome::Hit));
        }
        let value = (self.codec.split)(body.await).map_err(Failure::Body)?;
        let encoded = (self.codec.encode)(&value).map_err(|e| {
            Failure::Memo(Error::Serialization {
                what: format!("the value returned by {}", self.describe()),
                message: e.to_string(),
            })
        })?;
        let committed = self.memo.put(key, &encoded).await.map_err(Failure::Memo)?;
        if committed == encoded {
            Ok((value, Outcome::Miss))
        } else {
            // Another attempt (another process, a lost acknowledgement)
            // committed first: every caller must see one value, so ours is
            // dropped.
            Ok((self.decode(key, &committed)?, Outcome::CommittedByOther))
        }
    }

    fn decode(&self, key: &str, committed: &Bytes) -> Result<T, Failure<E>> {
        (self.codec.decode)(committed).map_err(|e| {
            Failure::Memo(Error::Decode {
                what: self.describe(),
                path: self.memo.entry_path(key),
                message: e.to_string(),
            })
        })
    }

    /// Names the call in an error deriving its key: `content_key` alone
    /// cannot say whose arguments failed to serialize.
    fn key_error(&self, error: Error) -> Error {
        match error {
            Error::Serialization { message, .. } => Error::Serialization {
                what: format!("the arguments of {}", self.describe()),
                message,
            },
            other => other,
        }
    }

    fn describe(&self) -> String {
        format!(
            "memoized fn `{}` (run {}, step {})",
            self.function,
            self.memo.run_id(),
            self.memo.step_number()
        )
    }
}

/// The process-wide table of in-flight entries, keyed by
/// [`Memo::flight_key`]. Entries are weak so the table holds only flights
/// someone is in or waiting for.
static FLIGHTS: LazyLock<Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Mutex::default);

/// Holding a `Flight` means being the one caller in this process that may
/// run the body for its entry.
struct Flight {
    key: String,
    guard: OwnedMutexGuard<()>,
}

impl Flight {
    async fn enter(key: String) -> Flight {
        let lock = {
            let mut flights = FLIGHTS.lock().unwrap_or_else(PoisonError::into_inner);
            match flights.get(&key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(tokio::sync::Mutex::new(()));
                    flights.insert(key.clone(), Arc::downgrade(&lock));
                    lock
                }
            }
        };
        Flight {
            key,
            guard: lock.lock_owned().await,
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut flights = FLIGHTS.lock().unwrap_or_else(PoisonError::into_inner);
        let lock = OwnedMutexGuard::mutex(&self.guard);
        // Waiters hold strong references, and new ones are only made under
        // the table's lock, which we hold: a count of one means nobody else
        // is in or waiting for this flight.
        if Arc::strong_count(lock) == 1
            && flights
                .get(&self.key)
                .is_some_and(|entry| Weak::ptr_eq(entry, &Arc::downgrade(lock)))
        {
            flights.remove(&self.key);
        }
    }
}
