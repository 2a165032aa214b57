//! One memoized call, from its key to the committed value: read, run the
//! body on a miss, commit write-once, return what was committed.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

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
///
/// This function is instantiated once per memoized function (each `body` is
/// a type of its own), so it only sequences the steps: the work is in
/// [`Call`]'s methods, compiled once in this crate, and in [`encode_output`]
/// and [`finish`], instantiated once per return type. Its future holds no
/// `dyn` reference across an await, so it is `Send` exactly when `body` is.
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
    let mut call = Call::new(memo, function);
    let mut step = call.look_up(key).await;
    let mut ran = None;
    if let Step::Run = step {
        let mut body = pin!(body);
        let output = poll_fn(|cx| call.poll_body(body.as_mut(), cx)).await;
        step = match encode_output(&call, &codec, output, &mut ran) {
            Ok(encoded) => call.commit(encoded).await,
            Err(step) => step,
        };
    }
    finish(&call, &codec, step, ran)
}

/// Splits the body's return value: an `Ok` value is kept in `ran` and
/// returned encoded, for the commit; an `Err` is kept in `ran` and ends the
/// call.
fn encode_output<R, T, E>(
    call: &Call<'_>,
    codec: &Codec<R, T, E>,
    output: R,
    ran: &mut Option<core::result::Result<T, E>>,
) -> core::result::Result<Vec<u8>, Step> {
    match (codec.split)(output) {
        Ok(value) => match (codec.encode)(&value) {
            Ok(encoded) => {
                *ran = Some(Ok(value));
                Ok(encoded)
            }
            Err(e) => Err(Step::Failed(call.unencodable(e))),
        },
        Err(e) => {
            *ran = Some(Err(e));
            Err(Step::Ran(Outcome::Error))
        }
    }
}

/// The call's return value, from where its steps ended.
fn finish<R, T, E>(
    call: &Call<'_>,
    codec: &Codec<R, T, E>,
    step: Step,
    ran: Option<core::result::Result<T, E>>,
) -> R {
    let error = match step {
        Step::Ran(outcome) => {
            call.ended(outcome, None);
            return (codec.join)(ran.expect("the body's value is kept when it ran"));
        }
        Step::Committed(committed, outcome) => match (codec.decode)(&committed) {
            Ok(value) => {
                call.returned(&committed);
                call.ended(outcome, None);
                return (codec.join)(Ok(value));
            }
            Err(e) => call.undecodable(e),
        },
        Step::Failed(error) => error,
        Step::Run => unreachable!("a call that must run its body runs it"),
    };
    call.ended(Outcome::Error, Some(&error));
    (codec.join)(Err((codec.from_memo_error)(error)))
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

/// Where a call stands after each of its steps.
enum Step {
    /// No value is committed: the body must run.
    Run,
    /// The body ran; its return value, kept by [`memoize`], is the call's
    /// (a committed `Ok` value, [`Outcome::Miss`], or an `Err`,
    /// [`Outcome::Error`]).
    Ran(Outcome),
    /// A committed value is the call's, once decoded.
    Committed(Bytes, Outcome),
    /// The memo failed: storage, encoding or decoding.
    Failed(Error),
}

/// One memoized call in progress: everything about it that does not depend
/// on the function's types, so it is compiled once.
struct Call<'a> {
    memo: &'a Memo,
    function: &'static str,
    /// Disabled unless someone may see it ([`span_may_be_seen`]).
    span: tracing::Span,
    /// The call's key, once derived.
    key: Option<HexDigest>,
    /// Held from the re-read after a miss to the commit: whoever holds the
    /// flight for an entry runs the body.
    flight: Option<Flight>,
}

impl<'a> Call<'a> {
    fn new(memo: &'a Memo, function: &'static str) -> Call<'a> {
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
        Call {
            memo,
            function,
            span,
            key: None,
            flight: None,
        }
    }

    /// Reads the committed value, under the flight if there is none yet.
    async fn look_up(&mut self, key: Result<HexDigest>) -> Step {
        // As `#[tracing::instrument]` does, a span nobody listens to is not
        // entered: entering it does nothing, but the wrapper's extra poll
        // layer and drop glue cost every hit some 3%.
        let found = if self.span.is_disabled() {
            self.find(key).await
        } else {
            let span = self.span.clone();
            self.find(key).instrument(span).await
        };
        found.unwrap_or_else(Step::Failed)
    }

    async fn find(&mut self, key: Result<HexDigest>) -> Result<Step> {
        let key = key.map_err(|e| self.key_error(e))?;
        self.key = Some(key);
        let key = key.as_str();
        if let Some(committed) = self.memo.get(key).await? {
            return Ok(Step::Committed(committed, Outcome::Hit));
        }
        // Whoever holds the flight for this entry runs the body; the others
        // wait and then find its committed value on the re-read, so
        // identical calls in one process run the body once.
        self.flight = Some(Flight::enter(self.memo.flight_key(key)).await);
        if let Some(committed) = self.memo.get(key).await? {
            return Ok(Step::Committed(committed, Outcome::Hit));
        }
        // The step checked its lease before it began, but this call has
        // awaited reads since: a pause or a clock jump there may have let
        // the lease expire and another attempt take the run over. Check it
        // again, with no await between the check and the body's start.
        self.memo.ensure_lease().await.inspect_err(|e| {
            self.memo.report_transient(e);
        })?;
        Ok(Step::Run)
    }

    /// Polls the body, inside the call's span. The body is `dyn` only for
    /// the length of one poll, so this is compiled once per return type, and
    /// the caller's future stays `Send` when the body is.
    fn poll_body<R>(
        &self,
        body: Pin<&mut dyn Future<Output = R>>,
        cx: &mut Context<'_>,
    ) -> Poll<R> {
        let _entered = (!self.span.is_disabled()).then(|| self.span.enter());
        // Only a simulation in progress on this thread pays for telling the
        // body which call it runs in (a clone of the memo and the key).
        #[cfg(any(test, feature = "testing"))]
        if crate::testing::sim::simulating() {
            let call = CurrentCall {
                memo: self.memo.clone(),
                key: self.key_str().to_owned(),
            };
            return CURRENT_CALL.sync_scope(call, || body.poll(cx));
        }
        body.poll(cx)
    }

    /// Commits the body's encoded `Ok` value; the committed value may be
    /// another attempt's.
    async fn commit(&mut self, encoded: Vec<u8>) -> Step {
        let step = if self.span.is_disabled() {
            self.put(encoded).await
        } else {
            self.put(encoded).instrument(self.span.clone()).await
        };
        self.flight = None;
        step
    }

    async fn put(&self, encoded: Vec<u8>) -> Step {
        let key = self.key_str();
        match self.memo.put(key, &encoded).await {
            Err(e) => Step::Failed(e),
            Ok(committed) if committed == encoded => {
                #[cfg(any(test, feature = "testing"))]
                crate::testing::sim::memoized_returned(self.memo, key, &committed);
                Step::Ran(Outcome::Miss)
            }
            // Another attempt (another process, a lost acknowledgement)
            // committed first: every caller must see one value, so ours is
            // dropped.
            Ok(committed) => Step::Committed(committed, Outcome::CommittedByOther),
        }
    }

    fn key_str(&self) -> &str {
        self.key
            .as_ref()
            .expect("the key is derived before the body runs")
            .as_str()
    }

    /// A committed value decoded and is returned.
    fn returned(&self, committed: &Bytes) {
        #[cfg(any(test, feature = "testing"))]
        crate::testing::sim::memoized_returned(self.memo, self.key_str(), committed);
        #[cfg(not(any(test, feature = "testing")))]
        let _ = committed;
    }

    /// Records how the call ended on its span, and the memo's error if it
    /// failed.
    fn ended(&self, outcome: Outcome, error: Option<&Error>) {
        // A disabled span still looks the field up by name: skip it on the
        // hot path when nothing listens.
        if self.span.is_disabled() {
            return;
        }
        self.span.record("outcome", outcome.as_str());
        if let Some(e) = error {
            self.span
                .in_scope(|| tracing::warn!(error = %e, "memoized call failed"));
        }
    }

    /// The body's `Ok` value did not encode.
    fn unencodable(&self, error: EncodeError) -> Error {
        Error::serialization(format!("the value returned by {}", self.describe()), error)
    }

    /// The one path for a committed value that does not decode as the `Ok`
    /// type (the type changed incompatibly, or a foreign value sits under
    /// the key): the call fails with [`Error::Decode`] and the body is not
    /// run, because its side effect has already happened once. Reporting
    /// such an error anywhere else belongs here.
    fn undecodable(&self, error: DecodeError) -> Error {
        let error = Error::decode(self.describe(), self.memo.entry_path(self.key_str()), error);
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
