//! One memoized call, from its key to the committed value: read, run the
//! body on a miss, commit write-once, return what was committed.

use std::future::Future;

use bytes::Bytes;
use tracing::Instrument;

use crate::codec::{self, DecodeError, EncodeError};
use crate::key::HexDigest;
use crate::{Error, Memo, Result};

use super::bounds::{FromMemoError, MemoResult, StoredValue};
use super::flight::Flight;

#[cfg(any(test, feature = "testing"))]
tokio::task_local! {
    /// The memoized call whose body is being polled, while a simulation
    /// runs on this thread: how the `testing` simulator's ledger learns a
    /// side effect's key from the call itself instead of the user restating
    /// it (a restated key silently misses for a generic function, a method
    /// or a renamed one).
    static CURRENT_CALL: CurrentCall;
}

/// A memoized call whose body is running: its memo and its key.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Clone)]
pub(crate) struct CurrentCall {
    /// The memo the call commits to.
    pub(crate) memo: Memo,
    /// The key it commits under (the memo-level key, a hex digest).
    pub(crate) key: String,
}

/// The innermost memoized call whose body the current task is running, if
/// any.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn current_call() -> Option<CurrentCall> {
    CURRENT_CALL.try_with(Clone::clone).ok()
}

/// What a memoized call needs to know about its return type `R`, as plain
/// function pointers: splitting `R` into its `Ok` type `T` and error `E`,
/// encoding and decoding `T`, carrying memo's errors as `E`.
///
/// [`codec()`] checks every bound once, at the return type; [`memoize`] then
/// needs none, so a return type that does not qualify is one error there
/// instead of one per use.
pub struct Codec<R, T, E> {
    split: fn(R) -> core::result::Result<T, E>,
    join: fn(core::result::Result<T, E>) -> R,
    encode: fn(&T) -> core::result::Result<Vec<u8>, EncodeError>,
    decode: fn(&[u8]) -> core::result::Result<T, DecodeError>,
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
        encode: |value| codec::encode(value),
        decode: |bytes| codec::decode(bytes),
        from_memo_error: R::Err::from,
    }
}

/// Runs one memoized call: returns the committed value for `key` if there
/// is one, else runs `body` and commits its `Ok` value.
pub async fn memoize<R, T, E, F>(
    memo: &Memo,
    function: &'static str,
    key: Result<HexDigest>,
    codec: Codec<R, T, E>,
    body: F,
) -> R
where
    F: Future<Output = R>,
{
    let span = if span_may_be_seen() {
        tracing::info_span!(
            "memoized",
            function,
            run = %memo.run_id(),
            step = memo.step_number(),
            outcome = tracing::field::Empty,
        )
    } else {
        tracing::Span::none()
    };
    let call = Call {
        memo,
        function,
        codec: &codec,
    };
    // As `#[tracing::instrument]` does, a span nobody listens to is not
    // entered: entering it does nothing, but the wrapper's extra poll layer
    // and drop glue cost every hit some 3%. Each branch builds its future
    // where it is awaited: built once before the `if`, the ~2 KB future
    // was copied into place on every call (callgrind: 170 instructions).
    let result = if span.is_disabled() {
        call.run(key, body).await
    } else {
        call.run(key, body).instrument(span.clone()).await
    };
    let outcome = match &result {
        Ok((_, outcome)) => *outcome,
        Err(_) => Outcome::Error,
    };
    // A disabled span still looks the field up by name: skip it on the hot
    // path when nothing listens.
    if !span.is_disabled() {
        span.record("outcome", outcome.as_str());
    }
    match result {
        Ok((value, _)) => (codec.join)(Ok(value)),
        Err(Failure::Body(e)) => (codec.join)(Err(e)),
        Err(Failure::Memo(e)) => {
            span.in_scope(|| tracing::warn!(error = %e, "memoized call failed"));
            (codec.join)(Err((codec.from_memo_error)(e)))
        }
    }
}

/// Whether anyone could see a `memoized` span: a `tracing` subscriber
/// that takes INFO spans, or a `log` logger at INFO (through `tracing`'s
/// `log` feature, when some crate turns it on). When neither can, the span
/// is not built at all: with the `log` feature on, even a disabled one
/// costs every hit its field set, a `record_all` and a drop, about 180
/// instructions (callgrind), some 3% of an in-memory hit.
fn span_may_be_seen() -> bool {
    // The level check `info_span!` itself starts with, so no span a
    // subscriber would take is skipped.
    let tracing_may = tracing::Level::INFO <= tracing::level_filters::STATIC_MAX_LEVEL
        && tracing::Level::INFO <= tracing::level_filters::LevelFilter::current();
    // Every log record of a span (its creation at INFO, its lifecycle at
    // TRACE) is emitted only when `log`'s maximum level admits INFO.
    tracing_may || log::Level::Info <= log::max_level()
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
    async fn run<F>(&self, key: Result<HexDigest>, body: F) -> Result<(T, Outcome), Failure<E>>
    where
        F: Future<Output = R>,
    {
        let key = key.map_err(|e| Failure::Memo(self.key_error(e)))?;
        let key = key.as_str();
        if let Some(committed) = self.memo.get(key).await.map_err(Failure::Memo)? {
            return Ok((self.returned(key, &committed)?, Outcome::Hit));
        }
        // Whoever holds the flight for this entry runs the body; the others
        // wait and then find its committed value on the re-read, so
        // identical calls in one process run the body once.
        let _flight = Flight::enter(self.memo.flight_key(key)).await;
        if let Some(committed) = self.memo.get(key).await.map_err(Failure::Memo)? {
            return Ok((self.returned(key, &committed)?, Outcome::Hit));
        }
        // The step checked its lease before it began, but this call has
        // awaited reads since: a pause or a clock jump there may have let
        // the lease expire and another attempt take the run over. Check it
        // again, with no await between the check and the body's start.
        self.memo.ensure_lease().await.map_err(|e| {
            self.memo.report_transient(&e);
            Failure::Memo(e)
        })?;
        // Only a simulation in progress on this thread pays for telling the
        // body which call it runs in (a clone of the memo and the key).
        #[cfg(any(test, feature = "testing"))]
        let body = if crate::testing::sim::simulating() {
            futures::future::Either::Left(CURRENT_CALL.scope(
                CurrentCall {
                    memo: self.memo.clone(),
                    key: key.to_string(),
                },
                body,
            ))
        } else {
            futures::future::Either::Right(body)
        };
        let value = (self.codec.split)(body.await).map_err(Failure::Body)?;
        let encoded = (self.codec.encode)(&value).map_err(|e| {
            Failure::Memo(Error::serialization(
                format!("the value returned by {}", self.describe()),
                e,
            ))
        })?;
        let committed = self.memo.put(key, &encoded).await.map_err(Failure::Memo)?;
        if committed == encoded {
            #[cfg(any(test, feature = "testing"))]
            crate::testing::sim::memoized_returned(self.memo, key, &committed);
            Ok((value, Outcome::Miss))
        } else {
            // Another attempt (another process, a lost acknowledgement)
            // committed first: every caller must see one value, so ours is
            // dropped.
            Ok((self.returned(key, &committed)?, Outcome::CommittedByOther))
        }
    }

    /// The committed value the call returns, decoded.
    fn returned(&self, key: &str, committed: &Bytes) -> Result<T, Failure<E>> {
        let value = self.decode(key, committed)?;
        #[cfg(any(test, feature = "testing"))]
        crate::testing::sim::memoized_returned(self.memo, key, committed);
        Ok(value)
    }

    fn decode(&self, key: &str, committed: &Bytes) -> Result<T, Failure<E>> {
        (self.codec.decode)(committed).map_err(|e| Failure::Memo(self.undecodable(key, e)))
    }

    /// The one path for a committed value that does not decode as the `Ok`
    /// type (the type changed incompatibly, or a foreign value sits under
    /// the key): the call fails with [`Error::Decode`] and the body is not
    /// run, because its side effect has already happened once. Reporting
    /// such an error anywhere else belongs here.
    fn undecodable(&self, key: &str, error: DecodeError) -> Error {
        let error = Error::decode(self.describe(), self.memo.entry_path(key), error);
        // A code fix can read the value: in a workflow, the attempt stops and
        // the run stays open, whatever the caller does with the error.
        self.memo.report_transient(&error);
        error
    }

    /// Names the call in an error deriving its key: `content_key` alone
    /// cannot say whose arguments failed to serialize.
    fn key_error(&self, error: Error) -> Error {
        match error {
            Error::Serialization { source, .. } => Error::Serialization {
                what: format!("the arguments of {}", self.describe()),
                source,
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

#[cfg(test)]
mod tests {
    use super::*;

    // No unit test of this crate installs a `tracing` subscriber, so here
    // only `log` can make a span visible.
    #[test]
    fn a_span_is_built_only_when_a_subscriber_or_a_log_logger_may_see_it() {
        assert!(!span_may_be_seen(), "nothing listens");
        log::set_max_level(log::LevelFilter::Info);
        let seen_through_log = span_may_be_seen();
        log::set_max_level(log::LevelFilter::Off);
        assert!(seen_through_log, "a `log` logger at INFO");
    }
}
