//! The durable record of workflow runs: each run's status, input and
//! attempts, the receipts of its committed steps, an optional opaque
//! snapshot, and the inputs (signals) delivered to it.
//!
//! [`RuntimeStore`] is the contract; [`InMemoryRuntimeStore`] keeps it in
//! memory (tests, ephemeral use) and [`ObjectStoreRuntimeStore`] in object
//! storage (durable use, many processes and machines). A workflow
//! [`Runtime`](crate::workflow::Runtime) needs one, and most code only
//! builds it and hands it over; `memoctl` reads it to show runs. A new
//! backend implements the trait and passes the same conformance suite as
//! these two (`testing::runtime_store::run_suite`, feature `testing`).
//!
//! # Model
//!
//! A run is created once ([`RuntimeStore::create_run`]); after that, every
//! change is a [`Commit`] applied all-or-nothing by
//! [`RuntimeStore::atomic_apply`], or an input appended by
//! [`RuntimeStore::append_input`]. A commit may carry a [`StepReceipt`] (a
//! step boundary), a snapshot, [`InputUpdate`]s and a [`StatusChange`].
//!
//! The changes of one run are totally ordered, and each is checked against
//! the run as it stands just before it, so every store agrees on the rules:
//!
//! - Step receipts are numbered densely from 0. The receipt for sequence `n`
//!   is accepted only when receipts `0..n` exist; once committed it never
//!   changes. Committing the *same* [`Commit`] again is an idempotent success
//!   (a retry after a lost acknowledgement); a different commit for a
//!   committed sequence is [`Error::Conflict`](crate::Error::Conflict).
//! - Status moves forward only: `Pending → Running → Running … → Completed |
//!   Failed | Cancelled`. [`StatusChange::start_leased`] starts the next
//!   attempt under a fresh token, so two workers recovering a run cannot both
//!   start the same attempt, even in the same millisecond, while a retry of
//!   the same start (same token) is recognised. A terminal status is final: it
//!   records the terminal time and the run's output or error, and any later
//!   different change (inputs included) is a conflict.
//! - Leases and fencing: a started attempt holds the run's [`Lease`] until
//!   its expiry (renewed and released with [`StatusChange::Lease`]); no other
//!   attempt starts while it is live at the new start's `at_ms`
//!   ([`Error::LeaseHeld`](crate::Error::LeaseHeld)). A commit carrying a
//!   [`Fence`] applies only while its attempt is the run's current one and
//!   the run is running ([`Error::LeaseLost`](crate::Error::LeaseLost)
//!   otherwise), so an attempt that was taken over commits nothing more.
//! - Input phases move forward only: `Accepted → Queued → Consumed |
//!   Abandoned`; a consumed input names the step sequence that consumed it.
//!
//! A rejected commit changes nothing. Timestamps are supplied by the caller
//! (milliseconds since the Unix epoch) so that a store never reads a clock
//! and a retried commit is byte-for-byte the same commit.

mod limits;
mod memory;
mod object;
mod state;

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::run_id::{Incarnation, RunId};

pub use limits::{DEFAULT_MAX_PENDING_INPUTS, RunLimits};
pub use memory::InMemoryRuntimeStore;
pub use object::{DEFAULT_RUN_CACHE_BYTES, ObjectStoreRuntimeStore};

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RunStatus {
    /// Created, no attempt started yet.
    Pending,
    /// An attempt has started and the run has not finished.
    Running,
    /// Finished with an output (terminal).
    Completed,
    /// Finished with an error (terminal).
    Failed,
    /// Stopped before finishing (terminal).
    Cancelled,
}

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    /// Whether the status is final (`Completed`, `Failed` or `Cancelled`).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// The status's folder name in the status-hint index: part of the
    /// stored layout (see `layout.rs`), so spelled out here rather than
    /// derived from the variant's name.
    pub(crate) fn path_segment(self) -> &'static str {
        match self {
            RunStatus::Pending => "Pending",
            RunStatus::Running => "Running",
            RunStatus::Completed => "Completed",
            RunStatus::Failed => "Failed",
            RunStatus::Cancelled => "Cancelled",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What [`RuntimeStore::create_run`] records for a new run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRun {
    /// The run's id.
    pub run_id: RunId,
    /// The name of the workflow the run executes.
    pub workflow: String,
    /// The workflow's input, as encoded by the caller.
    pub input: Bytes,
    /// When the run was created (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// The version of the workflow the run started on
    /// ([`Workflow::with_version`](crate::workflow::Workflow::with_version)),
    /// if it has one: the run continues on that version only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_version: Option<String>,
}

/// A run as the store holds it.
///
/// `terminal_at_ms` is set exactly when `status` is terminal; `output` only
/// for `Completed`, `error` for `Failed` (and for `Cancelled` when a reason
/// was given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRecord {
    /// The run's id.
    pub run_id: RunId,
    /// Which use of the run id this run is: drawn at random when the run is
    /// created, so a run created again after a deletion is another run.
    pub incarnation: Incarnation,
    /// The name of the workflow the run executes.
    pub workflow: String,
    /// The workflow's input, as given at creation.
    pub input: Bytes,
    /// Where the run stands.
    pub status: RunStatus,
    /// How many attempts have started (0 while `Pending`).
    pub attempts: u32,
    /// When the run was created (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// When the run last changed: the latest of its creation and its
    /// commits' `at_ms` (ms since the Unix epoch).
    pub updated_at_ms: u64,
    /// When the run reached its terminal status, if it has.
    pub terminal_at_ms: Option<u64>,
    /// The output of a `Completed` run.
    pub output: Option<Bytes>,
    /// The error of a `Failed` run, or the reason a run was `Cancelled`.
    pub error: Option<String>,
    /// The lease of the current attempt, while the run is `Running`.
    pub lease: Option<Lease>,
    /// The version of the workflow the run started on, if it has one (see
    /// [`NewRun::workflow_version`]); `None` for runs stored before versions
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_version: Option<String>,
}

/// A run as [`RuntimeStore::list_runs`] lists it: its record without the
/// caller's payloads (input, output, error), which a listing of many runs
/// need not hold in memory, and how many steps it committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunSummary {
    /// The run's id.
    pub run_id: RunId,
    /// Which use of the run id this run is (see [`RunRecord::incarnation`]).
    pub incarnation: Incarnation,
    /// The name of the workflow the run executes.
    pub workflow: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// How many attempts have started.
    pub attempts: u32,
    /// How many step receipts are committed.
    pub steps: u64,
    /// When the run was created (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// When the run last changed (ms since the Unix epoch).
    pub updated_at_ms: u64,
    /// When the run reached its terminal status, if it has.
    pub terminal_at_ms: Option<u64>,
    /// The lease of the current attempt, while the run is `Running`.
    pub lease: Option<Lease>,
    /// The version of the workflow the run started on, if it has one.
    pub workflow_version: Option<String>,
}

/// One page of a listing of run ids by status, from
/// [`RuntimeStore::list_run_ids_page`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunIdPage {
    /// The page's run ids, in the listing's order, each once.
    pub ids: Vec<RunId>,
    /// The cursor of the next page (the last id of this one), or `None` if
    /// the listing found nothing after this page.
    pub next: Option<RunId>,
}

impl RunIdPage {
    /// A page of `ids` whose next page starts after `next` (`None`: the
    /// last page), for a backend's
    /// [`list_run_ids_page`](RuntimeStore::list_run_ids_page).
    pub fn new(ids: Vec<RunId>, next: Option<RunId>) -> RunIdPage {
        RunIdPage { ids, next }
    }
}

impl RunSummary {
    /// The summary of `record`, a run that committed `steps` step receipts.
    pub fn new(record: &RunRecord, steps: u64) -> RunSummary {
        RunSummary {
            run_id: record.run_id.clone(),
            incarnation: record.incarnation,
            workflow: record.workflow.clone(),
            status: record.status,
            attempts: record.attempts,
            steps,
            created_at_ms: record.created_at_ms,
            updated_at_ms: record.updated_at_ms,
            terminal_at_ms: record.terminal_at_ms,
            lease: record.lease.clone(),
            workflow_version: record.workflow_version.clone(),
        }
    }
}

/// The lease an attempt holds on a running run: no other attempt may start
/// before `until_ms` (unless the holder releases it first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The attempt holding the lease.
    pub attempt: u32,
    /// Who holds it (the worker's id, for operators).
    pub owner: String,
    /// When it expires (ms since the Unix epoch, on the writers' clocks).
    pub until_ms: u64,
}

impl Lease {
    /// Whether the lease is live at `now_ms`: until it expires, and for
    /// ever once its expiry saturated at `u64::MAX` (a lease of
    /// `Duration::MAX`, or any lease renewed at the clock's limit).
    pub fn is_live_at(&self, now_ms: u64) -> bool {
        lease_is_live(self.until_ms, now_ms)
    }
}

/// [`Lease::is_live_at`] for an expiry alone: the one rule every check of a
/// lease (the store's, the attempt's own, recovery's) follows.
pub(crate) fn lease_is_live(until_ms: u64, now_ms: u64) -> bool {
    now_ms < until_ms || until_ms == u64::MAX
}

/// What a commit of an attempt carries to prove the attempt still holds the
/// run: the attempt number and the token of its start. A commit with a fence
/// is refused with [`Error::LeaseLost`](crate::Error::LeaseLost) once
/// another attempt has started or the run has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fence {
    /// The attempt.
    pub attempt: u32,
    /// The token of the attempt's start ([`StatusChange::Running`]).
    pub token: u64,
}

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
}

/// Where an input delivered to a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InputPhase {
    /// Recorded by [`RuntimeStore::append_input`].
    Accepted,
    /// Seen by the run and waiting to be consumed.
    Queued,
    /// Consumed by a step (terminal); the record names its sequence.
    Consumed,
    /// Dropped without being consumed (terminal): the workflow runtime
    /// refuses so a signal whose payload does not decode as what the run
    /// waits for (see [`Context::wait_for_signal`]).
    ///
    /// [`Context::wait_for_signal`]: crate::workflow::Context::wait_for_signal
    Abandoned,
}

impl InputPhase {
    /// The phase's place in the forward-only order; equal ranks are
    /// alternatives (`Consumed` or `Abandoned`).
    pub(crate) fn rank(self) -> u8 {
        match self {
            InputPhase::Accepted => 0,
            InputPhase::Queued => 1,
            InputPhase::Consumed | InputPhase::Abandoned => 2,
        }
    }
}

/// What [`RuntimeStore::append_input`] records: something delivered to a run
/// after it started, such as a signal or an approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewInput {
    /// The caller's id for the input, unique within the run (an idempotency
    /// key: appending the same id again with the same name and payload is a
    /// no-op).
    pub input_id: String,
    /// What kind of input it is (the signal's name).
    pub name: String,
    /// The input's payload, as encoded by the caller.
    pub payload: Bytes,
    /// When the input was accepted (ms since the Unix epoch).
    pub accepted_at_ms: u64,
}

/// An input delivered to a run, with where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InputRecord {
    /// The caller's id for the input, unique within the run.
    pub input_id: String,
    /// What kind of input it is (the signal's name).
    pub name: String,
    /// The input's payload.
    pub payload: Bytes,
    /// Where the input stands.
    pub phase: InputPhase,
    /// The sequence of the step that consumed it, once `Consumed`.
    pub consumed_by: Option<u64>,
    /// When the input was accepted (ms since the Unix epoch).
    pub accepted_at_ms: u64,
}

/// A phase change of one input, part of a [`Commit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputUpdate {
    /// The input to move.
    pub input_id: String,
    /// Its new phase. `Consumed` needs a commit with a receipt: the receipt's
    /// sequence is recorded as the consumer.
    pub phase: InputPhase,
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
}

/// The durable record of workflow runs.
///
/// # Contract
///
/// Every implementation keeps these promises, and the conformance suite in
/// `memo_runtime::testing::runtime_store` checks them:
///
/// - **All or nothing.** A commit is applied whole or not at all. A call that
///   returns an error other than an unknown outcome ([`Error::Store`]) has
///   changed nothing; a call whose outcome is unknown (a timeout, a lost
///   acknowledgement) has either applied the whole commit or nothing, and
///   readers never see a part of it.
/// - **Idempotent retries.** Sending the same run, input or commit again
///   after any outcome is safe: if it was applied, the retry succeeds
///   without applying it twice.
/// - **One winner.** Of concurrent commits of one step sequence (or one
///   attempt, or one terminal status), at most one is applied; every other
///   caller gets [`Error::Conflict`], or success if its commit is identical
///   to the one applied.
/// - **Durability.** Once a call returns `Ok`, every later call, on this
///   instance or on a fresh one over the same storage, sees its effect.
/// - **No silent loss.** Stored records that fail their checks are
///   [`Error::Corrupt`] naming the run and the record; they are never
///   skipped or read as absent.
///
/// # Errors
///
/// Besides each method's own: [`Error::Store`] when the backend fails
/// (outcome unknown for writes), [`Error::Corrupt`] for damaged records,
/// [`Error::RunNotFound`] when writing to a run that does not exist,
/// [`Error::InvalidWrite`] for a write that can never be valid (a gap in
/// the receipt sequence, a receipt of another run, a snapshot without a
/// receipt, an unknown input), and [`Error::Conflict`] for a write that
/// contradicts what is committed.
///
/// [`Error::Store`]: crate::Error::Store
/// [`Error::Corrupt`]: crate::Error::Corrupt
/// [`Error::Conflict`]: crate::Error::Conflict
/// [`Error::RunNotFound`]: crate::Error::RunNotFound
/// [`Error::InvalidWrite`]: crate::Error::InvalidWrite
///
/// # Example
///
/// ```
/// use memo_runtime::runtime_store::{
///     Commit, InMemoryRuntimeStore, NewRun, RunStatus, RuntimeStore, StatusChange, StepReceipt,
/// };
/// use memo_runtime::{Bytes, Error, RunId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> memo_runtime::Result<()> {
/// let store = InMemoryRuntimeStore::new();
/// let run_id = RunId::new("order-7")?;
/// store
///     .create_run(NewRun {
///         run_id: run_id.clone(),
///         workflow: "checkout".into(),
///         input: Bytes::from_static(b"{}"),
///         created_at_ms: 1_000,
///         workflow_version: None,
///     })
///     .await?;
/// store.atomic_apply(&run_id, Commit::status(StatusChange::start_attempt(1), 1_001)).await?;
///
/// let receipt = StepReceipt {
///     run_id: run_id.clone(),
///     sequence: 0,
///     step: "charge".into(),
///     output: Bytes::from_static(b"paid"),
///     recorded_at_ms: 1_002,
///     error: None,
/// };
/// let commit = Commit::step(receipt.clone(), 1_002);
/// store.atomic_apply(&run_id, commit.clone()).await?;
/// // A retry after a lost acknowledgement is an idempotent success...
/// store.atomic_apply(&run_id, commit).await?;
/// // ...but a different receipt for the same sequence is refused.
/// let other = StepReceipt { output: Bytes::from_static(b"refunded"), ..receipt };
/// let refused = store.atomic_apply(&run_id, Commit::step(other, 1_003)).await;
/// assert!(matches!(refused, Err(Error::Conflict { .. })));
///
/// let done = Commit::status(StatusChange::Completed { output: Bytes::from_static(b"42") }, 1_004);
/// let run = store.atomic_apply(&run_id, done).await?;
/// assert_eq!(run.status, RunStatus::Completed);
/// assert_eq!(run.output.as_deref(), Some(&b"42"[..]));
/// assert_eq!(store.load_receipts(&run_id, None).await?.len(), 1);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait RuntimeStore: Send + Sync + fmt::Debug {
    /// Creates a run in status `Pending`, and returns it.
    ///
    /// Creating a run that exists with the same workflow and input is an
    /// idempotent success that returns the run as it stands (the first
    /// `created_at_ms` wins).
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`](crate::Error::Conflict) if the run exists with a
    /// different workflow or input.
    async fn create_run(&self, run: NewRun) -> Result<RunRecord>;

    /// Loads a run; `None` if it does not exist.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>>;

    /// Applies `commit` to the run all-or-nothing, and returns the run as it
    /// stands after it.
    ///
    /// A commit that is already applied (the same receipt commit, or a
    /// receipt-less commit whose every change is already in effect) is an
    /// idempotent success and is not applied again.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`](crate::Error::Conflict) if the commit contradicts
    /// the run (a different commit for a committed sequence, an attempt that
    /// already started, a change to a terminal run, an input moving
    /// backwards); [`Error::InvalidWrite`](crate::Error::InvalidWrite) if it
    /// can never apply; [`Error::RunNotFound`](crate::Error::RunNotFound).
    /// Nothing is applied in any of these cases.
    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord>;

    /// Loads the run's receipts in sequence order: all of them, or those
    /// with a sequence greater than `after`. Empty for an unknown run.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>>;

    /// Loads the run's latest snapshot; `None` if no commit carried one.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>>;

    /// Records an input delivered to the run in phase `Accepted`, and
    /// returns it as it stands.
    ///
    /// Appending an input id that exists with the same name and payload is
    /// an idempotent success that returns the input as it stands.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`](crate::Error::Conflict) if the id exists with a
    /// different name or payload, or the run is terminal;
    /// [`Error::InvalidWrite`](crate::Error::InvalidWrite) for an empty id;
    /// [`Error::RunNotFound`](crate::Error::RunNotFound).
    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord>;

    /// Loads the run's inputs in the order they were appended. Empty for an
    /// unknown run.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>>;

    /// Lists the runs whose status is `status`, in run-id order, as
    /// summaries (without their input, output or error bytes): for
    /// operators' listings and retention. Each backend documents what a
    /// listing costs.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>>;

    /// Lists the ids of the runs whose status is `status`, in run-id order,
    /// without loading the runs: the cheap listing for a caller that loads
    /// each run on its own (such as [`Runtime::recover`], which must resume
    /// the other runs when one of them is damaged).
    ///
    /// Every run in `status` is listed. A backend that lists from an index
    /// may also list a run that has just left `status`, or one whose records
    /// are damaged or half-deleted: load each run and check its status.
    ///
    /// [`Runtime::recover`]: crate::workflow::Runtime::recover
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors). The default
    /// implementation lists the runs with [`list_runs`](Self::list_runs),
    /// so one damaged run fails it: backends override it.
    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        let runs = self.list_runs(status).await?;
        Ok(runs.into_iter().map(|run| run.run_id).collect())
    }

    /// One page of [`list_run_ids`](Self::list_run_ids): at most `limit`
    /// ids (a `limit` of 0 is taken as 1) of the runs whose status is
    /// `status`, those that come after the cursor `after` (the `next` of
    /// the page before; `None` for the first page).
    ///
    /// Ids come in an order fixed by the backend, the same for every page:
    /// run-id order for [`InMemoryRuntimeStore`] and this default, the
    /// order of the status hints' names for [`ObjectStoreRuntimeStore`]
    /// (run-id order, except that a capital sorts as `=` and its lower case
    /// and an id continued by `-` before the id itself; see
    /// [`with_ordered_listings`](ObjectStoreRuntimeStore::with_ordered_listings)
    /// for what a page costs there). Paging through to a page
    /// whose `next` is `None` lists every run that stayed in `status`
    /// throughout, each once; a run that entered or left `status` meanwhile
    /// may or may not be listed, and, as with `list_run_ids`, a listed run
    /// may have left `status` by the time it is read: load each run and
    /// check its status. A page may be empty while its cursor was not
    /// `None` (the runs after the cursor left `status`).
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors). The default
    /// implementation lists every id with [`list_run_ids`](Self::list_run_ids)
    /// and returns one page of them, which is correct but costs the whole
    /// listing per page: backends override it to list only the page.
    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        let mut ids = self.list_run_ids(status).await?;
        ids.sort();
        ids.dedup();
        let start = after.map_or(0, |after| ids.partition_point(|id| id <= after));
        Ok(page_of(ids.into_iter().skip(start), limit))
    }

    /// Deletes every record of incarnation `incarnation` of a terminal run;
    /// `false` if the run does not exist or is another incarnation, which is
    /// then not touched (a later run of the same id is another run).
    ///
    /// Only the runtime store's records: the run's memo entries and its
    /// terminal marker are kept, and a retention sweep then keeps them too
    /// (it cannot tell a run deleted here from a run it looks for in the
    /// wrong runtime store). To delete a whole run, use
    /// [`RetentionSweeper::delete_run`](crate::retention::RetentionSweeper::delete_run).
    ///
    /// Only terminal runs can be deleted, so no worker can be writing to a
    /// run while it disappears. Deleting is idempotent, and concurrent
    /// deletions of one run (a sweeper in every worker) are safe: nothing of
    /// another incarnation is ever removed, whatever runs between a
    /// deletion's check and its deletes, including a new run of the same id
    /// created meanwhile.
    ///
    /// # After an error
    ///
    /// A deletion that returns an error part-way leaves the run in one of
    /// two states, both safe to act on:
    ///
    /// - not deleted: the run exists and reads as it was (terminal), and a
    ///   `create_run` of its id answers with it;
    /// - deleted: the run does not exist for any reader (every read returns
    ///   `None`, also from an instance that cached it, and `list_runs`
    ///   skips it; `list_run_ids` may still list its id, as it may list any
    ///   run that left a status), and a `create_run` of its id creates a new
    ///   incarnation that inherits nothing of it. Objects of the deleted
    ///   incarnation may be left behind, unreachable to every reader.
    ///
    /// In both, calling `delete_run` again with the same incarnation
    /// finishes the deletion and removes what was left (it returns `false`
    /// if the run was already gone), also after the id was used again.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`](crate::Error::Conflict) if the run is that
    /// incarnation and not terminal.
    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool>;
}

/// A shared store is a store: `Arc<dyn RuntimeStore>` can go wherever a
/// `RuntimeStore` is expected.
#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: RuntimeStore + ?Sized> RuntimeStore for std::sync::Arc<T> {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        (**self).create_run(run).await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        (**self).load_run(run_id).await
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        (**self).atomic_apply(run_id, commit).await
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        (**self).load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        (**self).load_snapshot(run_id).await
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        (**self).append_input(run_id, input).await
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        (**self).load_inputs(run_id).await
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        (**self).list_runs(status).await
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        (**self).list_run_ids(status).await
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        (**self).list_run_ids_page(status, after, limit).await
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        (**self).delete_run(run_id, incarnation).await
    }
}

/// The first `limit` (at least 1) distinct ids of `ids` (distinct ids of
/// one run come together), with the last of them as the cursor if another
/// id follows: reads at most one id past the page.
pub(crate) fn page_of(ids: impl IntoIterator<Item = RunId>, limit: usize) -> RunIdPage {
    let limit = limit.max(1);
    let mut page = RunIdPage::default();
    for id in ids {
        if page.ids.last() == Some(&id) {
            continue;
        }
        if page.ids.len() == limit {
            page.next = page.ids.last().cloned();
            break;
        }
        page.ids.push(id);
    }
    page
}
