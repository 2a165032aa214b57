//! The run context a workflow receives: its run's identity, and what its
//! durable steps ([`step`]), signal waits ([`signal`]) and timers
//! ([`timer`]) share: the attempt's receipts, its step cursor, its
//! interruption and its cancellation.

mod patch;
mod replay;
mod select;
mod signal;
mod step;
mod timer;

use std::sync::Arc;

use bytes::Bytes;
use serde::de::DeserializeOwned;

pub(super) use replay::ReplayProbe;
pub use select::Selected;
pub(super) use select::recorded as select_recorded;
pub use step::{BoxError, Step};

use super::Shared;
use super::hook::{AttemptInterruption, Stop};
use super::lease::HeldLease;
use crate::codec;
use crate::error::Error;
use crate::memo::MemoStore;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{Commit, StepReceipt};

#[cfg(doc)]
use crate::memo::Memo;

/// What a workflow function receives: its run's identity and the means to
/// take durable steps.
///
/// Steps are numbered in the order they are called, from 0. A step that
/// committed in an earlier attempt is not run again: its recorded output is
/// returned. Steps of one run execute one at a time; concurrent calls wait for
/// their turn, in the order they were first polled.
///
/// Cheap to clone; clones share the run's step cursor.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    run_id: RunId,
    incarnation: Incarnation,
    /// The attempt's lease: its fence, which its commits carry to prove the
    /// attempt still holds the run, and its last known expiry.
    lease: Arc<HeldLease>,
    history: Vec<StepReceipt>,
    cursor: tokio::sync::Mutex<u64>,
    /// The first transient error of this attempt (its interruption), shared with the memos of its
    /// steps: once set, the attempt is over and the run stays open.
    interruption: AttemptInterruption,
    /// The cancellation reason, once the attempt has observed the run's
    /// cancellation (at a step boundary, in a wait, or when asked): no step
    /// runs after it, and the attempt ends the run cancelled.
    cancelled: std::sync::Mutex<Option<String>>,
    /// Set only for the replay check: the context replays and stops at the
    /// end of the history (see the `replay` module).
    probe: Option<Arc<ReplayProbe>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("run_id", &self.inner.run_id)
            .field("attempt", &self.inner.lease.fence().attempt)
            .field("recorded_steps", &self.inner.history.len())
            .finish_non_exhaustive()
    }
}

impl Context {
    pub(super) fn new(
        shared: Arc<Shared>,
        run_id: RunId,
        incarnation: Incarnation,
        lease: Arc<HeldLease>,
        history: Vec<StepReceipt>,
    ) -> Context {
        Context {
            inner: Arc::new(Inner {
                shared,
                run_id,
                incarnation,
                lease,
                history,
                cursor: tokio::sync::Mutex::new(0),
                interruption: AttemptInterruption::default(),
                cancelled: std::sync::Mutex::new(None),
                probe: None,
            }),
        }
    }

    /// The run this context belongs to.
    pub fn run_id(&self) -> &RunId {
        &self.inner.run_id
    }

    /// Which use of the run id this run is (see [`Incarnation`]).
    pub fn incarnation(&self) -> Incarnation {
        self.inner.incarnation
    }

    /// Which attempt of the run this is, from 1.
    pub fn attempt(&self) -> u32 {
        self.inner.lease.fence().attempt
    }

    /// The memo store the steps' memos live in.
    pub fn memo_store(&self) -> &MemoStore {
        &self.inner.shared.memo
    }

    /// Whether the run has been cancelled ([`Runtime::cancel`]), asked of
    /// the store now (one read of the run's inputs).
    ///
    /// Once this returns `true`, the cancellation is observed: the attempt
    /// runs no further step (each returns [`Error::RunCancelled`]), and the
    /// run ends `Cancelled` when the workflow returns, whatever it returns.
    /// A step body that may run long can ask between its own pieces of
    /// work, and stop early.
    ///
    /// Without asking, an attempt observes a cancellation at its next step
    /// boundary or wait after it learns of it (see [`Runtime::cancel`]).
    ///
    /// # Errors
    ///
    /// A store error reading the run's inputs; it interrupts the attempt,
    /// as a step's would, so a workflow that returns it does not fail the
    /// run.
    ///
    /// [`Runtime::cancel`]: crate::workflow::Runtime::cancel
    pub async fn is_cancelled(&self) -> Result<bool, Error> {
        if self.observed_cancel().is_some() {
            return Ok(true);
        }
        let inputs = self
            .inner
            .shared
            .store
            .load_inputs(&self.inner.run_id)
            .await
            // A store fault interrupts the attempt: the run must not fail
            // for it when the workflow passes it on with `?`.
            .map_err(|e| self.interrupt::<Error>(e))?;
        self.inner.lease.note_cancel(&inputs);
        Ok(self.check_cancelled::<Error>().is_err())
    }

    /// The cancellation reason, if this attempt observed the run's
    /// cancellation.
    pub(super) fn observed_cancel(&self) -> Option<String> {
        self.inner
            .cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Refuses to go on once the attempt knows the run was cancelled, and
    /// marks the cancellation observed.
    pub(super) fn check_cancelled<E: From<Error>>(&self) -> Result<(), E> {
        let reason = match self.observed_cancel() {
            Some(reason) => reason,
            None => match self.inner.lease.cancel_requested() {
                Some(reason) => {
                    *self
                        .inner
                        .cancelled
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
                    reason
                }
                None => return Ok(()),
            },
        };
        Err(E::from(Error::RunCancelled {
            run_id: self.inner.run_id.to_string(),
            reason: Some(reason),
        }))
    }

    /// The runtime error that stopped this attempt, if any.
    pub(super) fn take_interruption(&self) -> Option<Stop> {
        self.inner.interruption.take()
    }

    /// Why the runtime stopped this attempt, leaving its run open, if a
    /// runtime error did (a non-determinism, a store fault in a step, a
    /// lost lease): that error's message and kind. `None` for an attempt
    /// that suspended in a wait, which is the run's to make, not a stop.
    pub(in crate::workflow) fn stopped_by(&self) -> Option<Stop> {
        if self.inner.lease.suspended().is_some() {
            return None;
        }
        self.inner.interruption.peek()
    }

    /// Records a runtime-side failure, if it is transient (the run must not
    /// be failed for it), and converts it for the workflow.
    pub(super) fn interrupt<E: From<Error>>(&self, error: Error) -> E {
        self.note_problem(&error);
        if let Error::Suspended {
            until_ms, signal, ..
        } = &error
        {
            self.inner.lease.note_suspended(*until_ms, signal);
        }
        self.inner.interruption.record(&error);
        E::from(error)
    }

    /// Refuses to start a step once a transient error interrupted the attempt: the
    /// workflow may have handled that error, but nothing more of this
    /// attempt may be recorded.
    pub(super) fn check_not_stopped<E: From<Error>>(&self) -> Result<(), E> {
        if let Some(reason) = self.observed_cancel() {
            return Err(E::from(Error::RunCancelled {
                run_id: self.inner.run_id.to_string(),
                reason: Some(reason),
            }));
        }
        if (self.inner.shared.draining).load(std::sync::atomic::Ordering::Acquire) {
            let stopping = Error::Aborted {
                run_id: self.inner.run_id.to_string(),
                reason: "the worker is shutting down; the run stays open".into(),
                cause: None,
            };
            return Err(self.interrupt(stopping));
        }
        if let Some(earlier) = self.inner.interruption.peek() {
            return Err(E::from(Error::Aborted {
                run_id: self.inner.run_id.to_string(),
                reason: "a transient error interrupted this attempt earlier; no further step runs"
                    .into(),
                cause: earlier.cause,
            }));
        }
        Ok(())
    }

    /// What a replayed receipt returns: its output, or its recorded failure.
    pub(super) fn replayed<T: DeserializeOwned, E: From<Error>>(
        &self,
        receipt: &StepReceipt,
    ) -> Result<T, E> {
        match &receipt.error {
            Some(message) => Err(E::from(Error::StepFailed {
                run_id: self.inner.run_id.to_string(),
                sequence: receipt.sequence,
                step: receipt.step.clone(),
                message: message.clone(),
            })),
            None => self.decode_output(receipt.sequence, &receipt.step, &receipt.output),
        }
    }

    /// The receipt recorded at `sequence`, whatever its step.
    pub(super) fn history_at(&self, sequence: u64) -> Option<&StepReceipt> {
        usize::try_from(sequence)
            .ok()
            .and_then(|i| self.inner.history.get(i))
    }

    /// The start of every durable call (a step, a signal wait, a timer):
    /// the attempt's step cursor, held until the call has committed, so the
    /// calls of one attempt take their positions one at a time. Refused
    /// once the attempt was stopped or cancelled.
    pub(super) async fn take_cursor<E: From<Error>>(&self) -> Result<Cursor<'_>, E> {
        let cursor = Cursor(self.inner.cursor.lock().await);
        self.check_not_stopped()?;
        Ok(cursor)
    }

    /// The replay of the call at the cursor, if the history recorded one
    /// there: `step`'s recorded output or failure, the cursor moved past it;
    /// [`Error::NonDeterminism`] if another step was recorded there. `None`
    /// if the run has not been here before: the caller runs the call and
    /// commits it at [`Cursor::sequence`].
    pub(super) fn replay_at<T: DeserializeOwned, E: From<Error>>(
        &self,
        cursor: &mut Cursor<'_>,
        step: &str,
    ) -> Option<Result<T, E>> {
        let sequence = cursor.sequence();
        let Some(receipt) = self.history_at(sequence) else {
            // A replay-only context stops here; an attempt runs the call.
            return self.end_of_history::<E>().err().map(Err);
        };
        if receipt.step != step {
            return Some(Err(self.interrupt(Error::NonDeterminism {
                run_id: self.inner.run_id.to_string(),
                sequence,
                recorded: receipt.step.clone(),
                called: step.to_string(),
            })));
        }
        tracing::debug!(run_id = %self.inner.run_id, sequence, step, "replayed from receipt");
        cursor.advance();
        Some(self.replayed(receipt))
    }

    pub(super) fn decode_output<T: DeserializeOwned, E: From<Error>>(
        &self,
        sequence: u64,
        step: &str,
        bytes: &[u8],
    ) -> Result<T, E> {
        let what = format!("the output of step {step:?}");
        let location = format!("run {} receipt {sequence}", self.inner.run_id);
        codec::decode_value(&what, &location, bytes).map_err(|e| self.interrupt(e))
    }

    pub(super) fn receipt(
        &self,
        sequence: u64,
        step: String,
        outcome: Result<Bytes, String>,
    ) -> StepReceipt {
        let (output, error) = match outcome {
            Ok(output) => (output, None),
            Err(message) => (Bytes::new(), Some(message)),
        };
        StepReceipt {
            run_id: self.inner.run_id.clone(),
            sequence,
            step,
            output,
            recorded_at_ms: self.inner.shared.clock.now_ms(),
            error,
            // A step's body sets what its retries were (see `run_step`).
            retries: 0,
            last_retried_error: None,
        }
    }

    /// Commits `commit` as this attempt: refused once another attempt took
    /// the run over.
    pub(super) async fn commit<E: From<Error>>(&self, commit: Commit) -> Result<(), E> {
        let commit = commit.with_fence(self.inner.lease.fence());
        self.inner
            .shared
            .store
            .atomic_apply(&self.inner.run_id, commit)
            .await
            .map(drop)
            .map_err(|e| self.interrupt(e))
    }
}

/// An attempt's step cursor, held by one durable call at a time (see
/// [`Context::take_cursor`]): the position its next receipt takes.
pub(super) struct Cursor<'a>(tokio::sync::MutexGuard<'a, u64>);

impl Cursor<'_> {
    /// The sequence number of the position at the cursor.
    pub(super) fn sequence(&self) -> u64 {
        *self.0
    }

    /// Moves past the position at the cursor, once its call has replayed
    /// or committed.
    pub(super) fn advance(&mut self) {
        *self.0 += 1;
    }
}

/// The name of the step that records a timer's wake time.
pub(super) const SLEEP_STEP: &str = "memo.sleep";

/// The prefix of the step that marks a run suspended in
/// [`Context::wait_for_signal`] (`memo.wait:<name>`, empty output).
pub(super) const WAIT_STEP_PREFIX: &str = "memo.wait:";

/// The prefix of the step that records that a run took the branch of a
/// patch ([`Context::patched`], `memo.patch:<name>`, empty output).
pub(super) const PATCH_STEP_PREFIX: &str = "memo.patch:";

/// The prefix of the step that records a signal wait's deadline.
pub(super) const DEADLINE_STEP_PREFIX: &str = "memo.signal-deadline:";

/// The prefix of the step that records a signal wait's timeout.
pub(super) const TIMEOUT_STEP_PREFIX: &str = "memo.signal-timeout:";
