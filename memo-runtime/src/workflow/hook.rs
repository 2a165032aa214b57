//! The attempt hook: what the memo of a workflow step asks of its attempt
//! (a live lease before a body runs) and tells it (a transient error that
//! stops it), through the one [`AttemptHook`] a [`Memo`](crate::Memo)
//! carries.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;

use super::Shared;
use super::lease::HeldLease;
use crate::error::{Error, ErrorKind, Result};
use crate::memo::AttemptHook;
use crate::run_id::{Incarnation, RunId};

/// The first transient error of a workflow attempt (its interruption),
/// shared by the attempt's [`Context`](super::Context) and the memos of its
/// steps: once set, the attempt is over and the run stays open.
#[derive(Debug, Clone, Default)]
pub(super) struct AttemptInterruption(Arc<Mutex<Option<Stop>>>);

/// Why the runtime stopped an attempt: the message of the error that did,
/// and that error's kind (`None` where no runtime error did, as for a
/// worker shutting down). [`Error`] is not `Clone`, so the attempt keeps
/// this and gives each caller an [`Error::Aborted`] of it.
#[derive(Debug, Clone)]
pub(super) struct Stop {
    pub(super) reason: String,
    pub(super) cause: Option<ErrorKind>,
}

impl Stop {
    /// The stop `error` makes: an abort passes its own cause on.
    pub(super) fn of(error: &Error) -> Stop {
        let cause = match error {
            Error::Aborted { cause, .. } => *cause,
            other => Some(other.kind()),
        };
        Stop {
            reason: error.to_string(),
            cause,
        }
    }

    /// The abort of run `run_id` that this stop makes.
    pub(super) fn into_error(self, run_id: &RunId) -> Error {
        Error::Aborted {
            run_id: run_id.to_string(),
            reason: self.reason,
            cause: self.cause,
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl AttemptInterruption {
    /// Records `error` if it does not fail the run ([`Error::fails_run`])
    /// and no interruption was recorded before; the others are the caller's
    /// to handle.
    pub(super) fn record(&self, error: &Error) {
        if !error.fails_run() {
            self.slot().get_or_insert_with(|| Stop::of(error));
        }
    }

    /// Whether an interruption is recorded.
    pub(super) fn is_set(&self) -> bool {
        self.slot().is_some()
    }

    /// Takes the recorded interruption, leaving none.
    pub(super) fn take(&self) -> Option<Stop> {
        self.slot().take()
    }

    /// The recorded interruption, left in place.
    pub(super) fn peek(&self) -> Option<Stop> {
        self.slot().clone()
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Stop>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A step's attempt as its memo sees it: the attempt's lease, checked before
/// a memoized call runs its body, and its interruption, told of the memo's
/// transient errors.
pub(super) struct StepAttempt {
    pub(super) shared: Arc<Shared>,
    pub(super) run_id: RunId,
    pub(super) lease: Arc<HeldLease>,
    pub(super) interruption: AttemptInterruption,
    /// The keys of the entries this attempt wrote (or tried to) in the
    /// step's folder: every try of the step shares them.
    pub(super) written: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for StepAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepAttempt")
            .field("run_id", &self.run_id)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl AttemptHook for StepAttempt {
    fn ensure_lease(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.lease.ensure_live(&self.shared, &self.run_id))
    }

    fn is_current(&self, incarnation: Incarnation) -> BoxFuture<'_, Result<bool>> {
        Box::pin(async move {
            let run = self.shared.store.load_run(&self.run_id).await?;
            Ok(run.is_some_and(|run| run.incarnation == incarnation))
        })
    }

    fn report(&self, error: &Error) {
        self.interruption.record(error);
    }

    fn lease_is_live(&self) -> bool {
        self.lease.is_live(&self.shared)
    }

    fn attempt(&self) -> u32 {
        self.lease.fence().attempt
    }

    fn unread_is_absent(&self, key: &str) -> bool {
        self.lease.fence().attempt == 1
            && self.lease.outlasts_clock_skew(&self.shared)
            && !self
                .written
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(key)
    }

    fn writing(&self, key: &str) {
        // Only a first attempt ever skips a read: a later one keeps no set.
        if self.lease.fence().attempt != 1 {
            return;
        }
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> Error {
        Error::LeaseLost {
            run_id: "r".into(),
            attempt: 1,
            reason: "taken over".into(),
        }
    }

    #[test]
    fn an_interruption_keeps_the_first_error_that_leaves_the_run_open() {
        let interruption = AttemptInterruption::default();
        let fails_run = Error::InvalidWrite {
            run_id: "r".into(),
            reason: "bad".into(),
        };
        interruption.record(&fails_run);
        assert!(
            !interruption.is_set(),
            "an error that fails the run is the caller's"
        );
        interruption.record(&lost());
        interruption.record(&Error::RunNotFound { run_id: "r".into() });
        let kept = interruption.take().expect("the lost lease");
        assert_eq!(
            (kept.reason, kept.cause),
            (lost().to_string(), Some(ErrorKind::Lease))
        );
        assert!(!interruption.is_set());
    }

    #[test]
    fn a_stop_keeps_the_kind_of_its_error_and_an_abort_passes_its_own_on() {
        assert_eq!(Stop::of(&lost()).cause, Some(ErrorKind::Lease));
        let shutting_down = Error::Aborted {
            run_id: "r".into(),
            reason: "the worker is shutting down".into(),
            cause: None,
        };
        assert_eq!(Stop::of(&shutting_down).cause, None);
        let run_id = RunId::new("r").unwrap();
        let again = Stop::of(&lost()).into_error(&run_id);
        assert_eq!(Stop::of(&again).cause, Some(ErrorKind::Lease));
        assert!(matches!(
            again,
            Error::Aborted { cause: Some(ErrorKind::Lease), ref reason, .. } if *reason == lost().to_string()
        ));
    }
}
