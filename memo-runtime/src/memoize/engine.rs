//! One memoized call, from its key to the committed value: read, run the
//! body on a miss, commit write-once, return what was committed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tracing::Instrument;

use crate::codec::{self, DecodeError, EncodeError};
use crate::key::HexDigest;
use crate::{Error, Memo, Result};

use super::bounds::{FromMemoError, MemoResult, StoredValue};
use crate::memo::flight::Flight;

/// How many times a memoized call checks its lease under its flight, a
/// lapsed one renewed and the entry read again after it, before it gives
/// the attempt up (see `Call::find`).
const LEASED_READS: u32 = 3;

#[cfg(any(test, feature = "testing"))]
tokio::task_local! {
    /// The memoized call whose body is being polled, while calls are
    /// observed on this thread ([`observing_calls`]): how the `testing`
    /// simulator's ledger learns a side effect's key from the call itself
    /// instead of the user restating it (a restated key silently misses for
    /// a generic function, a method or a renamed one).
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

/// What is told of every memoized call that returns on this thread: the
/// memo, the key and the committed value the caller gets.
#[cfg(any(test, feature = "testing"))]
type CallObserver = std::rc::Rc<dyn Fn(&Memo, &str, &[u8])>;

#[cfg(any(test, feature = "testing"))]
thread_local! {
    /// The observer of [`observing_calls`].
    static OBSERVER: std::cell::RefCell<Option<CallObserver>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `body` with `observer` told of every memoized call that returns on
/// this thread, and [`current_call`] answering in the calls' bodies: how the
/// `testing` simulator's ledger learns which caller saw which committed
/// value, and the key of a side effect from the call itself. The thread's
/// previous observer is back when `body` returns or panics.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn observing_calls<R>(
    observer: impl Fn(&Memo, &str, &[u8]) + 'static,
    body: impl FnOnce() -> R,
) -> R {
    struct Restore(Option<CallObserver>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            OBSERVER.with(|slot| *slot.borrow_mut() = previous);
        }
    }
    let observer: CallObserver = std::rc::Rc::new(observer);
    let _restore = Restore(OBSERVER.with(|slot| slot.borrow_mut().replace(observer)));
    body()
}

/// The observer of [`observing_calls`] on this thread, if any.
#[cfg(any(test, feature = "testing"))]
fn observer() -> Option<CallObserver> {
    OBSERVER.with(|slot| slot.borrow().clone())
}

/// What a memoized call needs to know about its return type `R`, as plain
/// function pointers: splitting `R` into its `Ok` type `T` and error `E`,
/// encoding and decoding `T`, carrying memo's errors as `E`; and the steps
/// of a call that depend on those types.
///
/// [`codec()`] checks every bound once, at the return type; the methods
/// then need none, so a return type that does not qualify is one error
/// there instead of one per use.
///
/// # How a call runs, and why in these pieces
///
/// The expansion of `#[memoized]` sequences one call:
///
/// ```text
/// let codec = codec::<R>();
/// let mut call = Call::new(memo, name, key);
/// let mut value = None;
/// if call.look_up().await {                         // no committed value
///     let mut body = pin!(async { <the body> });
///     let output = poll_fn(|cx| codec.poll_body(&call, body.as_mut(), cx)).await;
///     if let Some(failed) = codec.ran(&mut call, output, &mut value) {
///         return failed;                              // the body's `Err`
///     }
///     call.commit().await;
/// }
/// codec.finish(call, value)
/// ```
///
/// Every memoized function compiles that much of its own in the user's
/// crate (each body is a type of its own). The work is elsewhere: in
/// [`Call`], compiled once in this crate, and in `Codec`'s methods,
/// compiled once per return type. Nothing generic is an async fn, so no
/// future is built per function besides the function's own and its body's
/// (issue 28 measured what they cost a user's build). The body is `dyn`
/// only for the length of one poll, so the function's future is `Send`
/// exactly when its body is, and the body's `Err` is never held across an
/// await.
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

impl<R, T, E> Codec<R, T, E> {
    /// Polls the body once, inside the call's span.
    pub fn poll_body(
        &self,
        call: &Call<'_>,
        body: Pin<&mut dyn Future<Output = R>>,
        cx: &mut Context<'_>,
    ) -> Poll<R> {
        let _entered = call.enter();
        // Only a simulation in progress on this thread pays for telling the
        // body which call it runs in (a clone of the memo and the key).
        #[cfg(any(test, feature = "testing"))]
        if let Some(current) = call.current() {
            return CURRENT_CALL.sync_scope(current, || body.poll(cx));
        }
        body.poll(cx)
    }

    /// Takes the body's return value: an `Ok` value is kept in `value` and
    /// its encoding readied for [`Call::commit`]; anything else is the
    /// call's return value, returned at once (an `Err` is never committed).
    pub fn ran(&self, call: &mut Call<'_>, output: R, value: &mut Option<T>) -> Option<R> {
        let error = match (self.split)(output) {
            Ok(ok) => match (self.encode)(&ok) {
                Ok(encoded) => {
                    // The body ran and produced a value: whatever is
                    // committed, its cost was paid.
                    crate::meter::call_run(call.cost);
                    *value = Some(ok);
                    call.step = Step::Commit(encoded);
                    return None;
                }
                Err(e) => call.unencodable(e),
            },
            Err(e) => {
                call.ended(Outcome::Error, None);
                return Some((self.join)(Err(e)));
            }
        };
        call.ended(Outcome::Error, Some(&error));
        Some((self.join)(Err((self.from_memo_error)(error))))
    }

    /// The call's return value, from where it ended: the body's value it
    /// committed, a committed value decoded, or the memo's error.
    pub fn finish(&self, mut call: Call<'_>, value: Option<T>) -> R {
        let error = match std::mem::replace(&mut call.step, Step::Run) {
            Step::Committed(committed, outcome) => match (self.decode)(&committed) {
                Ok(value) => {
                    if outcome == Outcome::Hit {
                        crate::meter::call_reused(call.cost);
                    }
                    call.returned(&committed);
                    call.ended(outcome, None);
                    return (self.join)(Ok(value));
                }
                Err(e) => call.undecodable(e),
            },
            Step::Miss => {
                call.ended(Outcome::Miss, None);
                let value = value.expect("a committed body's value is kept");
                return (self.join)(Ok(value));
            }
            Step::Failed(error) => error,
            Step::Run | Step::Commit(_) => unreachable!("a call finishes once it committed"),
        };
        call.ended(Outcome::Error, Some(&error));
        (self.join)(Err((self.from_memo_error)(error)))
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

/// Where a call stands.
enum Step {
    /// Not looked up yet, or no value is committed: the body must run.
    Run,
    /// The body's `Ok` value, encoded, to commit.
    Commit(Vec<u8>),
    /// The body's value is committed; the caller kept it.
    Miss,
    /// A committed value is the call's, once decoded.
    Committed(Bytes, Outcome),
    /// The memo failed: deriving the key, storage, encoding.
    Failed(Error),
}

/// One memoized call in progress: every part of it that does not depend on
/// the function's types, compiled once, in this crate (see [`Codec`] for
/// how a call runs).
pub struct Call<'a> {
    memo: &'a Memo,
    function: &'static str,
    /// Disabled unless someone may see it ([`span_may_be_seen`]).
    span: tracing::Span,
    /// The call's key, if it could be derived.
    key: Option<HexDigest>,
    step: Step,
    /// Held from the miss to the commit: whoever holds the flight for an
    /// entry runs the body.
    flight: Option<Flight>,
    /// What one run of the body costs, as declared, in billionths of a
    /// dollar (0 if undeclared).
    cost: u64,
}

impl<'a> Call<'a> {
    /// Starts a call of `function` on `memo` under `key`.
    pub fn new(memo: &'a Memo, function: &'static str, key: Result<HexDigest>) -> Call<'a> {
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
        let mut call = Call {
            memo,
            function,
            span,
            key: None,
            step: Step::Run,
            flight: None,
            cost: 0,
        };
        match key {
            Ok(key) => call.key = Some(key),
            Err(e) => call.step = Step::Failed(call.key_error(e)),
        }
        call
    }

    /// The call with its declared cost, `#[memoized(cost = ..)]`: what one
    /// run of the body costs, in dollars, counted in the workflow attempt's
    /// cost ledger as paid when the body runs and as saved when a committed
    /// value answers instead. A negative or not-a-number cost counts as
    /// none.
    #[must_use]
    pub fn with_cost(mut self, dollars: f64) -> Call<'a> {
        self.cost = crate::meter::nanodollars(dollars);
        self
    }

    /// Reads the committed value, under the call's flight if there is none
    /// yet; true if the body must run.
    pub async fn look_up(&mut self) -> bool {
        let Some(key) = self.key else {
            return false;
        };
        // As `#[tracing::instrument]` does, a span nobody listens to is not
        // entered: entering it does nothing, but the wrapper's extra poll
        // layer and drop glue cost every hit some 3%.
        let found = if self.span.is_disabled() {
            self.find(&key).await
        } else {
            let span = self.span.clone();
            self.find(&key).instrument(span).await
        };
        self.step = found.unwrap_or_else(Step::Failed);
        matches!(self.step, Step::Run)
    }

    async fn find(&mut self, key: &HexDigest) -> Result<Step> {
        let key = key.as_str();
        let looked = self.memo.before_read(key);
        // In its run's first attempt, under a lease with more left than the
        // clock skew allowed, a call whose key the attempt has not written
        // reads nothing: no other attempt can have committed an entry yet
        // (one starts only once this lease expired), so the read would
        // miss. Its body then runs under the flight as after a miss, and
        // its commit is write-once as ever.
        let unread = self.memo.unread_is_absent(key);
        if !unread && let Some(committed) = self.memo.get(key).await? {
            return Ok(Step::Committed(committed, Outcome::Hit));
        }
        // Whoever holds the flight for this entry runs the body; the others
        // wait and then find its committed value on a read under the
        // flight, so identical calls in one process run the body once. With
        // no flight of the entry's stripe ended since the read above,
        // nothing the store committed through a flight can have been
        // missed: that read stands, and no second one is made.
        self.flight = Some(self.memo.enter_flight(key).await);
        // Read after all if the wait for the flight took the lease down to
        // the skew, or the key was written meanwhile.
        let mut read =
            self.memo.flight_ended_since(&looked) || (unread && !self.memo.unread_is_absent(key));
        // The step checked its lease before it began, but this call has
        // awaited reads since: a pause or a clock jump there may have let
        // the lease expire and another attempt take the run over. So the
        // body starts only when a read found no entry and the lease is live
        // by the local clock after it (a lease live then was live during
        // the read). A lapsed lease is renewed and the entry read again:
        // the renewal awaits a commit, and meanwhile the value of an
        // attempt that lost the run while its body ran (the one this
        // attempt took over) may land, and a committed value's body never
        // runs again.
        for _ in 0..LEASED_READS {
            if read && let Some(committed) = self.memo.get(key).await? {
                return Ok(Step::Committed(committed, Outcome::Hit));
            }
            if self.memo.lease_is_live() {
                return Ok(Step::Run);
            }
            self.memo
                .ensure_lease()
                .await
                .inspect_err(|e| self.memo.report_transient(e))?;
            read = true;
        }
        let lapsed = Error::LeaseLost {
            run_id: self.memo.run_id().to_string(),
            attempt: self.memo.lease_attempt().unwrap_or_default(),
            reason: format!(
                "the lease lapsed again during each of {LEASED_READS} reads of the memoized call's entry"
            ),
        };
        self.memo.report_transient(&lapsed);
        Err(lapsed)
    }

    /// Commits the body's encoded `Ok` value ([`Codec::ran`]); the value
    /// committed may be another attempt's.
    pub async fn commit(&mut self) {
        let Step::Commit(encoded) = std::mem::replace(&mut self.step, Step::Run) else {
            unreachable!("a call commits what its body returned")
        };
        self.step = if self.span.is_disabled() {
            self.put(encoded).await
        } else {
            self.put(encoded).instrument(self.span.clone()).await
        };
        self.flight = None;
    }

    async fn put(&self, encoded: Vec<u8>) -> Step {
        let key = self.key_str();
        match self.memo.put(key, &encoded).await {
            Err(e) => Step::Failed(e),
            Ok(committed) if committed == encoded => {
                // Ours is the entry now, but if the lease lapsed while the
                // body ran or the commit was in flight, another attempt may
                // have taken the run over, committed its own value, ended
                // the run, and a sweep deleted the run and its entries
                // before ours landed: ours is then a value no other caller
                // of the key ever sees. Checked by the local clock while the
                // lease is live (no request); a lapsed lease is renewed,
                // which fails once the run was taken over or is gone. If
                // it is gone, ours is the entry of a deleted run, which no
                // sweep lists again: taken back.
                if let Err(e) = self.memo.ensure_lease().await {
                    self.memo.take_back_if_deleted(key).await;
                    self.memo.report_transient(&e);
                    return Step::Failed(e);
                }
                #[cfg(any(test, feature = "testing"))]
                if let Some(observer) = observer() {
                    observer(self.memo, key, &committed);
                }
                Step::Miss
            }
            // Another attempt (another process, a lost acknowledgement)
            // committed first: every caller must see one value, so ours is
            // dropped.
            Ok(committed) => Step::Committed(committed, Outcome::CommittedByOther),
        }
    }

    /// The call's span, entered for a poll of the body if anyone may see it.
    fn enter(&self) -> Option<tracing::span::Entered<'_>> {
        (!self.span.is_disabled()).then(|| self.span.enter())
    }

    /// The call, for the body it runs while [`observing_calls`] runs on this
    /// thread.
    #[cfg(any(test, feature = "testing"))]
    fn current(&self) -> Option<CurrentCall> {
        observer().is_some().then(|| CurrentCall {
            memo: self.memo.clone(),
            key: self.key_str().to_owned(),
        })
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
        if let Some(observer) = observer() {
            observer(self.memo, self.key_str(), committed);
        }
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
