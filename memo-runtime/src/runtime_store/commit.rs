//! The changes a commit applies to a run: a step's receipt, a status change,
//! input updates, and the [`Commit`] that carries them all-or-nothing.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::Lease;
use super::{AttemptCost, Fence, InputPhase, InputUpdate, RunStatus};
use crate::run_id::RunId;

/// The durable record that a step of a run completed, and with what output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepReceipt {
    /// The run the step belongs to.
    pub run_id: RunId,
    /// The step's position in the run's call order, dense from 0.
    pub sequence: u64,
    /// The step's name, checked on replay against the step the code calls.
    pub step: String,
    /// The step's committed output, as encoded by the caller (empty for a
    /// failed step).
    pub output: Bytes,
    /// When the step completed (ms since the Unix epoch).
    pub recorded_at_ms: u64,
    /// Why the step failed, if it did: a failed step keeps its position, so
    /// a replay returns the same failure and the workflow's later steps keep
    /// their positions. Absent in receipts stored before this field existed
    /// (they decode as successes; stored receipts that still carry the
    /// former `input_digest` field decode too, the field is ignored).
    #[serde(default)]
    pub error: Option<String>,
    /// How many tries of the step's body failed and were retried (under its
    /// [`RetryPolicy`](crate::workflow::RetryPolicy)) before the outcome
    /// recorded here, in the attempt that committed it: the body ran
    /// `retries + 1` times there. Tries in attempts that stopped before
    /// committing the step (a crash, a lost lease, a store fault) left no
    /// record and are not counted. 0 in receipts stored before this field
    /// existed. Stored only when not 0, so a receipt of a step that took one
    /// try is stored as before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The error of the last try that was retried (its `Display`), if any:
    /// why the step needed its retries. Stored only when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_retried_error: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A change of a run's status, part of a [`Commit`]. The commit's `at_ms` is
/// the time of the change (the terminal time, for a terminal status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StatusChange {
    /// Starts attempt number `attempt` (from 1), which must be one more than
    /// the attempts started so far; the status becomes `Running`. Build it
    /// with [`StatusChange::start_attempt`].
    Running {
        /// The attempt being started.
        attempt: u32,
        /// Tells this start from any other start of the same attempt: a
        /// retry of this commit (same token) is an idempotent success, a
        /// start by another worker (another token) a conflict.
        token: u64,
        /// Who starts it (for operators; see [`Lease::owner`]).
        #[serde(default)]
        owner: String,
        /// Until when the attempt holds the run's lease (0: no lease; any
        /// other attempt may take over at once).
        #[serde(default)]
        lease_until_ms: u64,
    },
    /// Renews (or, with `until_ms` at or before the commit's time, releases)
    /// the lease of the running attempt `attempt`, which must still hold the
    /// run.
    Lease {
        /// The attempt whose lease it is.
        attempt: u32,
        /// The token of the attempt's start.
        token: u64,
        /// The lease's new expiry (ms since the Unix epoch).
        until_ms: u64,
    },
    /// Finishes the run with its output.
    Completed {
        /// The run's output, as encoded by the caller.
        output: Bytes,
    },
    /// Finishes the run with an error.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// Stops the run.
    Cancelled {
        /// Why, if known.
        reason: Option<String>,
    },
}

impl StatusChange {
    /// Starts attempt `attempt` under a fresh, unique token. Keep the value
    /// (or the [`Commit`] holding it) to retry the start after an unknown
    /// outcome.
    ///
    /// # Example
    ///
    /// ```
    /// use memo_runtime::runtime_store::StatusChange;
    ///
    /// let first = StatusChange::start_attempt(1);
    /// let rival = StatusChange::start_attempt(1);
    /// assert_ne!(first, rival, "each start has its own token");
    /// ```
    pub fn start_attempt(attempt: u32) -> StatusChange {
        StatusChange::start_leased(attempt, String::new(), 0)
    }

    /// Starts attempt `attempt` for `owner`, holding the run's lease until
    /// `lease_until_ms`, under a fresh, unique token. The start is refused
    /// with [`Error::LeaseHeld`](crate::Error::LeaseHeld) while another
    /// attempt's lease is live at the commit's time.
    pub fn start_leased(
        attempt: u32,
        owner: impl Into<String>,
        lease_until_ms: u64,
    ) -> StatusChange {
        StatusChange::Running {
            attempt,
            token: crate::run_id::unique_token(),
            owner: owner.into(),
            lease_until_ms,
        }
    }

    /// The fence of a start ([`StatusChange::Running`]): what the started
    /// attempt's commits carry.
    pub fn fence(&self) -> Option<Fence> {
        match *self {
            StatusChange::Running { attempt, token, .. } => Some(Fence { attempt, token }),
            _ => None,
        }
    }

    /// The status the change leads to.
    pub fn status(&self) -> RunStatus {
        match self {
            StatusChange::Running { .. } | StatusChange::Lease { .. } => RunStatus::Running,
            StatusChange::Completed { .. } => RunStatus::Completed,
            StatusChange::Failed { .. } => RunStatus::Failed,
            StatusChange::Cancelled { .. } => RunStatus::Cancelled,
        }
    }
}

/// One all-or-nothing change to a run: a step boundary (with a receipt) or a
/// change of status or inputs between steps.
///
/// A commit with a receipt may also carry a snapshot, input updates and a
/// status change; a commit without one must carry a status change or input
/// updates, and no snapshot.
///
/// # Example
///
/// ```
/// use memo_runtime::runtime_store::{Commit, InputPhase, StatusChange, StepReceipt};
/// use memo_runtime::{Bytes, RunId};
///
/// let run_id = RunId::new("order-7")?;
/// let receipt = StepReceipt {
///     run_id: run_id.clone(),
///     sequence: 0,
///     step: "charge".into(),
///     output: Bytes::from_static(b"ok"),
///     recorded_at_ms: 1_000,
///     error: None,
///     retries: 0,
///     last_retried_error: None,
/// };
/// let step = Commit::step(receipt, 1_000)
///     .with_snapshot(Bytes::from_static(b"state after charge"))
///     .with_input_update("approval-1", InputPhase::Consumed);
/// let done = Commit::status(StatusChange::Completed { output: Bytes::from_static(b"42") }, 1_500);
/// assert!(step.receipt.is_some() && done.receipt.is_none());
/// # Ok::<(), memo_runtime::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// When the commit was made (ms since the Unix epoch): the run's new
    /// `updated_at_ms`, and its terminal time if `status` is terminal.
    pub at_ms: u64,
    /// The receipt of the step this commit completes, if any.
    pub receipt: Option<StepReceipt>,
    /// A new opaque snapshot of the run (only with a receipt).
    pub snapshot: Option<Bytes>,
    /// Input phase changes, applied in order.
    pub input_updates: Vec<InputUpdate>,
    /// A status change, applied after the receipt.
    pub status: Option<StatusChange>,
    /// The attempt making the commit, if it is made by one: the commit
    /// applies only while that attempt holds the run.
    #[serde(default)]
    pub fence: Option<Fence>,
    /// The cost ledger's entry of the attempt that ends the run with this
    /// commit (only with a terminal status change): the run keeps it with
    /// its end, where [`RuntimeStore::load_attempt_costs`] reads it, rather
    /// than in a record of its own. Left out of the stored commit when
    /// absent, so a commit without one is stored as before it existed.
    ///
    /// [`RuntimeStore::load_attempt_costs`]: super::RuntimeStore::load_attempt_costs
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<AttemptCost>,
}

impl Commit {
    /// A step boundary: `receipt` committed at `at_ms`.
    pub fn step(receipt: StepReceipt, at_ms: u64) -> Commit {
        Commit {
            at_ms,
            receipt: Some(receipt),
            snapshot: None,
            input_updates: Vec::new(),
            status: None,
            fence: None,
            cost: None,
        }
    }

    /// A status change between steps, at `at_ms`.
    pub fn status(change: StatusChange, at_ms: u64) -> Commit {
        Commit {
            at_ms,
            receipt: None,
            snapshot: None,
            input_updates: Vec::new(),
            status: Some(change),
            fence: None,
            cost: None,
        }
    }

    /// Input phase changes between steps, at `at_ms`.
    pub fn inputs(updates: Vec<InputUpdate>, at_ms: u64) -> Commit {
        Commit {
            at_ms,
            receipt: None,
            snapshot: None,
            input_updates: updates,
            status: None,
            fence: None,
            cost: None,
        }
    }

    /// Adds a snapshot.
    pub fn with_snapshot(mut self, snapshot: Bytes) -> Commit {
        self.snapshot = Some(snapshot);
        self
    }

    /// Adds a phase change of input `input_id`.
    pub fn with_input_update(mut self, input_id: impl Into<String>, phase: InputPhase) -> Commit {
        self.input_updates.push(InputUpdate {
            input_id: input_id.into(),
            phase,
        });
        self
    }

    /// Adds a status change.
    pub fn with_status(mut self, change: StatusChange) -> Commit {
        self.status = Some(change);
        self
    }

    /// Makes the commit apply only while the attempt `fence` names holds the
    /// run.
    pub fn with_fence(mut self, fence: Fence) -> Commit {
        self.fence = Some(fence);
        self
    }

    /// Carries `cost`, the cost ledger's entry of the attempt whose
    /// terminal commit this is (see [`Commit::cost`]). A commit without a
    /// terminal status change that carries one is refused.
    pub fn with_cost(mut self, cost: AttemptCost) -> Commit {
        self.cost = Some(cost);
        self
    }
}
