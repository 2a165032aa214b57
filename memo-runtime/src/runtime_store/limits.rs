//! What a runtime store accepts from its callers: how large each value may
//! be, and how many inputs a run may hold before its workflow takes them.
//! Checked where a change comes in, never where a committed one is folded,
//! so lowering a limit makes no stored run unreadable.

use super::state::{Change, RunState};
use super::{Commit, InputPhase, NewInput, NewRun, StatusChange};
use crate::error::{Error, Result};
use crate::memo::DEFAULT_MAX_VALUE_SIZE;

/// The default most inputs (signals) a run holds accepted or queued, not
/// yet consumed or abandoned: [`RunLimits::max_pending_inputs`].
pub const DEFAULT_MAX_PENDING_INPUTS: usize = 1_000;

/// What a runtime store accepts from its callers (see
/// [`ObjectStoreRuntimeStore::with_limits`](super::ObjectStoreRuntimeStore::with_limits)
/// and [`InMemoryRuntimeStore::with_limits`](super::InMemoryRuntimeStore::with_limits)).
///
/// A refused value or input changes nothing. Values already committed are
/// never checked again, so a lower limit leaves every stored run readable.
///
/// # Example
///
/// ```
/// use memo_runtime::runtime_store::RunLimits;
///
/// let limits = RunLimits::default().with_max_value_size(1 << 20).with_max_pending_inputs(64);
/// assert_eq!((limits.max_value_size(), limits.max_pending_inputs()), (1 << 20, 64));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    max_value_size: usize,
    max_pending_inputs: usize,
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            max_value_size: DEFAULT_MAX_VALUE_SIZE,
            max_pending_inputs: DEFAULT_MAX_PENDING_INPUTS,
        }
    }
}

impl RunLimits {
    /// The largest value in bytes a run takes (default
    /// [`DEFAULT_MAX_VALUE_SIZE`](crate::limits::DEFAULT_MAX_VALUE_SIZE), as for memo
    /// values): a run's input, an input's (signal's) payload, a step's
    /// output, a snapshot, a run's output, error or cancellation reason. A
    /// larger one is refused with [`Error::TooLarge`] naming it, as an
    /// oversize memo value is.
    #[must_use]
    pub fn with_max_value_size(mut self, bytes: usize) -> RunLimits {
        self.max_value_size = bytes;
        self
    }

    /// The most inputs a run holds pending (accepted or queued: delivered,
    /// not yet consumed or abandoned; default
    /// [`DEFAULT_MAX_PENDING_INPUTS`]). One more is refused with
    /// [`Error::Conflict`] saying so, until the workflow takes some.
    #[must_use]
    pub fn with_max_pending_inputs(mut self, inputs: usize) -> RunLimits {
        self.max_pending_inputs = inputs;
        self
    }

    /// The largest value in bytes a run takes.
    pub fn max_value_size(&self) -> usize {
        self.max_value_size
    }

    /// The most inputs a run holds pending.
    pub fn max_pending_inputs(&self) -> usize {
        self.max_pending_inputs
    }

    /// Refuses a new run whose input is over the limit.
    pub(crate) fn admit_run(&self, run: &NewRun) -> Result<()> {
        self.fit(|| format!("run {} input", run.run_id), run.input.len())
    }

    /// Refuses `change`, which `run` would apply, if a value in it is over
    /// the limit or it is one input too many.
    pub(crate) fn admit(&self, run: &RunState, change: &Change) -> Result<()> {
        match change {
            Change::Commit(commit) => self.admit_commit(run, commit),
            Change::Input(input) => self.admit_input(run, input),
        }
    }

    fn admit_commit(&self, run: &RunState, commit: &Commit) -> Result<()> {
        let run_id = &run.record().run_id;
        if let Some(receipt) = &commit.receipt {
            let n = receipt.sequence;
            self.fit(
                || format!("run {run_id} step {n} output"),
                receipt.output.len(),
            )?;
            let error = receipt.error.as_ref().map_or(0, String::len);
            self.fit(|| format!("run {run_id} step {n} error"), error)?;
        }
        if let Some(snapshot) = &commit.snapshot {
            self.fit(|| format!("run {run_id} snapshot"), snapshot.len())?;
        }
        let (what, size) = match &commit.status {
            Some(StatusChange::Completed { output }) => ("output", output.len()),
            Some(StatusChange::Failed { error }) => ("error", error.len()),
            Some(StatusChange::Cancelled { reason }) => {
                ("error", reason.as_ref().map_or(0, String::len))
            }
            _ => return Ok(()),
        };
        self.fit(|| format!("run {run_id} {what}"), size)
    }

    fn admit_input(&self, run: &RunState, input: &NewInput) -> Result<()> {
        let run_id = &run.record().run_id;
        let id = &input.input_id;
        // The id and name are stored with the payload.
        let size = input.payload.len() + input.name.len() + id.len();
        self.fit(|| format!("run {run_id} input {id:?}"), size)?;
        let pending =
            run.inputs_in(|phase| matches!(phase, InputPhase::Accepted | InputPhase::Queued));
        if pending >= self.max_pending_inputs {
            return Err(Error::Conflict {
                what: format!("run {run_id} input {id:?}"),
                reason: format!(
                    "the run holds {pending} pending inputs, the most it takes \
                     (RunLimits::max_pending_inputs); send it again once the workflow has taken some"
                ),
            });
        }
        Ok(())
    }

    fn fit(&self, key: impl FnOnce() -> String, size: usize) -> Result<()> {
        if size > self.max_value_size {
            return Err(Error::TooLarge {
                key: key(),
                size,
                limit: self.max_value_size,
            });
        }
        Ok(())
    }
}
