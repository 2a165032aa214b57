//! What a replay check reports: per run, whether it replays, and the
//! patches its history uses.

use std::fmt;

use crate::error::Error;
use crate::run_id::RunId;
use crate::runtime_store::RunStatus;
use crate::workflow::context::{PATCH_STEP_PREFIX, WAIT_STEP_PREFIX};

#[cfg(doc)]
use super::ReplayCheck;
#[cfg(doc)]
use crate::workflow::{Context, Workflow};

/// What a [`ReplayCheck`] found.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    pub(super) workflow: String,
    pub(super) runs: Vec<RunReplay>,
    pub(super) other_workflows: usize,
}

impl ReplayReport {
    /// Each checked run, in the order the store listed them.
    pub fn runs(&self) -> &[RunReplay] {
        &self.runs
    }

    /// The checked runs that do not replay.
    pub fn problems(&self) -> impl Iterator<Item = &RunReplay> {
        self.runs.iter().filter(|run| !run.outcome.replays())
    }

    /// Whether every checked run replays: what a CI job fails on.
    pub fn is_clean(&self) -> bool {
        self.problems().next().is_none()
    }

    /// How many listed runs belong to other workflows (not checked).
    pub fn other_workflows(&self) -> usize {
        self.other_workflows
    }

    /// The open runs on the old branch of the patch `name`: their history
    /// passed [`Context::patched`]`(name)` without the patch. While there is
    /// one, the old branch must stay; with none, the patch can become a
    /// [`Context::deprecate_patch`].
    pub fn open_runs_on_old_branch(&self, patch: &str) -> Vec<&RunId> {
        self.open_runs_where(patch, |used| !used.marked && !used.deprecated)
    }

    /// The open runs whose history has the marker of the patch `name`.
    /// With none (and none on the old branch), the call to
    /// [`Context::patched`] or [`Context::deprecate_patch`] can go.
    pub fn open_runs_with_marker(&self, patch: &str) -> Vec<&RunId> {
        self.open_runs_where(patch, |used| used.marked)
    }

    fn open_runs_where(&self, patch: &str, pick: impl Fn(&PatchUse) -> bool) -> Vec<&RunId> {
        self.runs
            .iter()
            .filter(|run| !run.status.is_terminal())
            .filter(|run| {
                run.patches
                    .iter()
                    .any(|used| used.name == patch && pick(used))
            })
            .map(|run| &run.run_id)
            .collect()
    }
}

/// A summary line, then one line per run that does not replay.
impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problems = self.problems().count();
        writeln!(
            f,
            "replay check of workflow {}: {} runs checked, {} replay, {} do not",
            self.workflow,
            self.runs.len(),
            self.runs.len() - problems,
            problems
        )?;
        for run in self.problems() {
            writeln!(f, "  run {} ({}): {}", run.run_id, run.status, run.outcome)?;
        }
        Ok(())
    }
}

/// How one stored run replays against the new code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunReplay {
    /// The run.
    pub run_id: RunId,
    /// Its status in the store.
    pub status: RunStatus,
    /// The version of the workflow it started on, if it has one.
    pub version: Option<String>,
    /// How many receipts its history holds.
    pub recorded_steps: u64,
    /// Whether it replays, or why not.
    pub outcome: ReplayOutcome,
    /// The patches the replay asked about, in call order.
    pub patches: Vec<PatchUse>,
}

/// A patch a run's replay asked about ([`Context::patched`] or
/// [`Context::deprecate_patch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PatchUse {
    /// The patch's name.
    pub name: String,
    /// Whether the run's history has the patch's marker there (it took the
    /// patched branch); `false` for a run on the old branch.
    pub marked: bool,
    /// Whether the code called [`Context::deprecate_patch`] (which accepts
    /// both) rather than [`Context::patched`].
    pub deprecated: bool,
}

/// Whether a run replays against the new code, or the first reason it does
/// not.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayOutcome {
    /// The new code replays the run's history: its next attempt continues
    /// it.
    Replays {
        /// How many receipts the replay consumed.
        steps: u64,
    },
    /// The code calls another step than the one recorded at `sequence`
    /// (a step renamed, inserted or reordered).
    NonDeterminism {
        /// The position, from 0.
        sequence: u64,
        /// The step recorded there.
        recorded: String,
        /// The step the new code calls there.
        called: String,
    },
    /// The run took the branch of the patch `patch` at `sequence`, and the
    /// new code no longer asks about it (removed too early).
    PatchRemoved {
        /// The position of the patch's marker.
        sequence: u64,
        /// The patch.
        patch: String,
        /// The step the new code calls there.
        called: String,
    },
    /// The run waits (or waited) for the signal `signal` at `sequence`, and
    /// the new code no longer reads it there.
    SignalNotRead {
        /// The position of the recorded wait.
        sequence: u64,
        /// The signal.
        signal: String,
        /// The step the new code calls there.
        called: String,
    },
    /// The new code returns before the step recorded at `sequence` (a step
    /// removed).
    UncalledStep {
        /// The first position the code does not reach.
        sequence: u64,
        /// The step recorded there.
        recorded: String,
    },
    /// The run's recorded input does not decode as the workflow's input
    /// type.
    UndecodableInput {
        /// The decoder's message.
        message: String,
    },
    /// A recorded value (a step's output, a signal's payload, the run's
    /// output) does not decode as the type the new code expects.
    UndecodableOutput {
        /// What did not decode.
        what: String,
        /// The decoder's message, with the run and position.
        message: String,
    },
    /// The replay stopped for another reason (the workflow panicked, or a
    /// runtime error).
    Interrupted {
        /// Why.
        message: String,
    },
    /// The run started on a [version](Workflow::with_version) of its
    /// workflow that the checked code does not register: no worker of the
    /// deploy would continue it (it would stay open, reported, until a
    /// worker registers its version again).
    VersionNotRegistered {
        /// The run's version (`None`: the unversioned workflow).
        version: Option<String>,
        /// The versions the checked code registers.
        registered: Vec<Option<String>>,
    },
}

impl ReplayOutcome {
    /// Whether the run replays.
    pub fn replays(&self) -> bool {
        matches!(self, ReplayOutcome::Replays { .. })
    }

    pub(super) fn from_problem(problem: Error) -> ReplayOutcome {
        match problem {
            Error::NonDeterminism {
                sequence,
                recorded,
                called,
                ..
            } => {
                if let Some(patch) = recorded.strip_prefix(PATCH_STEP_PREFIX) {
                    ReplayOutcome::PatchRemoved {
                        sequence,
                        patch: patch.to_string(),
                        called,
                    }
                } else if let Some(signal) = recorded
                    .strip_prefix(WAIT_STEP_PREFIX)
                    .or_else(|| recorded.strip_prefix("signal:"))
                {
                    ReplayOutcome::SignalNotRead {
                        sequence,
                        signal: signal.to_string(),
                        called,
                    }
                } else {
                    ReplayOutcome::NonDeterminism {
                        sequence,
                        recorded,
                        called,
                    }
                }
            }
            Error::Decode { ref what, .. } => ReplayOutcome::UndecodableOutput {
                what: what.clone(),
                message: problem.to_string(),
            },
            other => ReplayOutcome::Interrupted {
                message: other.to_string(),
            },
        }
    }
}

impl fmt::Display for ReplayOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayOutcome::Replays { steps } => write!(f, "replays ({steps} steps)"),
            ReplayOutcome::NonDeterminism {
                sequence,
                recorded,
                called,
            } => write!(
                f,
                "non-determinism at step {sequence}: recorded {recorded:?}, the code calls {called:?}"
            ),
            ReplayOutcome::PatchRemoved {
                sequence,
                patch,
                called,
            } => write!(
                f,
                "patch {patch:?} removed too early: the run took it at step {sequence}, the code calls {called:?} there"
            ),
            ReplayOutcome::SignalNotRead {
                sequence,
                signal,
                called,
            } => write!(
                f,
                "signal {signal:?} no longer read: the run waits for it at step {sequence}, the code calls {called:?} there"
            ),
            ReplayOutcome::UncalledStep { sequence, recorded } => write!(
                f,
                "step {recorded:?} recorded at {sequence} is no longer called (the code returns first)"
            ),
            ReplayOutcome::UndecodableInput { message } => {
                write!(f, "the recorded input does not decode: {message}")
            }
            ReplayOutcome::UndecodableOutput { message, .. } => {
                write!(f, "a recorded value does not decode: {message}")
            }
            ReplayOutcome::Interrupted { message } => write!(f, "replay stopped: {message}"),
            ReplayOutcome::VersionNotRegistered {
                version,
                registered,
            } => write!(
                f,
                "the run started on {}, which the code does not register (it registers {})",
                crate::error::describe_version(version.as_deref()),
                crate::error::describe_versions(registered)
            ),
        }
    }
}
