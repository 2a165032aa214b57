//! The replay probe: what a [`Context`] made for the
//! [replay check](crate::workflow::replay_check) notes while it replays a
//! run's recorded history, and where it stops (at the end of the history,
//! before any step body, wait or commit).

use std::sync::{Arc, Mutex, PoisonError};

use super::{Context, Inner};
use crate::error::Error;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{Fence, StepReceipt};
use crate::workflow::Shared;
use crate::workflow::hook::AttemptInterruption;
use crate::workflow::lease::HeldLease;

/// What a replay-only context saw.
#[derive(Debug, Default)]
pub(in crate::workflow) struct ReplayProbe {
    state: Mutex<ProbeState>,
}

#[derive(Debug, Default)]
pub(in crate::workflow) struct ProbeState {
    /// Whether the workflow asked for more than the history holds (or
    /// suspended in a wait the history has not passed).
    pub(in crate::workflow) end_reached: bool,
    /// The first runtime error of the replay (a non-determinism, an output
    /// that does not decode), unless the end was reached first.
    pub(in crate::workflow) problem: Option<Error>,
    /// Each patch asked about: its name, whether the run has its marker,
    /// and whether the call was a [`Context::deprecate_patch`].
    pub(in crate::workflow) patches: Vec<(String, bool, bool)>,
}

impl ReplayProbe {
    pub(in crate::workflow) fn take(&self) -> ProbeState {
        std::mem::take(&mut *self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn with<R>(&self, f: impl FnOnce(&mut ProbeState) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Why a replay-only attempt stops at the end of its history.
const END_OF_HISTORY: &str = "the replay check reached the end of the recorded history";

impl Context {
    /// A context that replays `history` and stops where it ends: no step
    /// body runs, nothing is waited for, nothing is committed. It says it is
    /// `attempt`, the attempt that would resume the run.
    pub(in crate::workflow) fn replay_only(
        shared: Arc<Shared>,
        run_id: RunId,
        incarnation: Incarnation,
        attempt: u32,
        history: Vec<StepReceipt>,
        probe: Arc<ReplayProbe>,
    ) -> Context {
        let fence = Fence { attempt, token: 0 };
        Context {
            inner: Arc::new(Inner {
                shared,
                run_id,
                incarnation,
                lease: Arc::new(HeldLease::detached(fence)),
                history,
                cursor: tokio::sync::Mutex::new(0),
                interruption: AttemptInterruption::default(),
                cancelled: std::sync::Mutex::new(None),
                probe: Some(probe),
            }),
        }
    }

    /// How many receipts the replay has consumed so far.
    pub(in crate::workflow) async fn replayed_steps(&self) -> u64 {
        *self.inner.cursor.lock().await
    }

    /// The receipt at `sequence`, for a report.
    pub(in crate::workflow) fn recorded_at(&self, sequence: u64) -> Option<&StepReceipt> {
        self.history_at(sequence)
    }

    /// Called where the workflow asks for a position the history holds no
    /// receipt for: a replay-only attempt stops here
    /// (the run's own attempt would run, wait or record from here on).
    pub(super) fn end_of_history<E: From<Error>>(&self) -> Result<(), E> {
        let Some(probe) = &self.inner.probe else {
            return Ok(());
        };
        probe.with(|state| state.end_reached |= state.problem.is_none());
        Err(self.interrupt(Error::Aborted {
            run_id: self.inner.run_id.to_string(),
            reason: END_OF_HISTORY.into(),
            cause: None,
        }))
    }

    /// Keeps the first runtime error of a replay-only attempt.
    pub(super) fn note_problem(&self, error: &Error) {
        let Some(probe) = &self.inner.probe else {
            return;
        };
        probe.with(|state| {
            if state.end_reached || state.problem.is_some() {
                return;
            }
            match error {
                Error::Aborted { reason, .. } if reason == END_OF_HISTORY => {}
                // A timer not yet due: the run's next attempt resumes here.
                Error::Suspended { .. } => state.end_reached = true,
                _ => state.problem = Some(clone_problem(error)),
            }
        });
    }

    /// Notes a patch asked about, for the replay check's report.
    pub(super) fn note_patch(&self, name: &str, marked: bool, deprecated: bool) {
        if let Some(probe) = &self.inner.probe {
            probe.with(|state| {
                state.patches.push((name.to_string(), marked, deprecated));
            });
        }
    }
}

/// A copy of the errors a replay reports (the error type is not `Clone`:
/// a decode error's source is kept as its message).
fn clone_problem(error: &Error) -> Error {
    match error {
        Error::NonDeterminism {
            run_id,
            sequence,
            recorded,
            called,
        } => Error::NonDeterminism {
            run_id: run_id.clone(),
            sequence: *sequence,
            recorded: recorded.clone(),
            called: called.clone(),
        },
        Error::Decode { what, path, source } => Error::Decode {
            what: what.clone(),
            path: path.clone(),
            source: source.to_string().into(),
        },
        other => Error::Aborted {
            run_id: String::new(),
            reason: other.to_string(),
            cause: Some(other.kind()),
        },
    }
}
