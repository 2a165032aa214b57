//! The records of a run as a store keeps and lists it: its status, the run
//! itself and its summary, pages of run ids, the attempt's lease and fence.

use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::{RuntimeStore, StatusChange};

use crate::run_id::{Incarnation, RunId};

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

/// What [`RuntimeStore::delete_run_at`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunDeletion {
    /// Whether the run was that incarnation, as
    /// [`RuntimeStore::delete_run`] answers: `false` if it was already
    /// deleted (this call finished what was left), another incarnation,
    /// or never stored here.
    pub existed: bool,
    /// When the deletion of the incarnation began.
    pub began: DeletionBegan,
}

impl RunDeletion {
    /// What a deletion did: see the fields.
    pub fn new(existed: bool, began: DeletionBegan) -> RunDeletion {
        RunDeletion { existed, began }
    }
}

/// When a deletion of a run incarnation began, as
/// [`RuntimeStore::delete_run_at`] answers it: what a retention pass dates
/// the deletion's recheck from (see
/// [`RetentionSweeperBuilder::recheck_after`](crate::retention::RetentionSweeperBuilder::recheck_after)),
/// alike in every sweep that deletes the run, however many at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeletionBegan {
    /// At this time (milliseconds since the Unix epoch): the time its
    /// first deleter recorded, in a store that records it; the caller's own
    /// in one that does not.
    At(u64),
    /// Before this call, by a deleter that recorded no time
    /// ([`RuntimeStore::delete_run`], or a release before deletions were
    /// dated): a retention pass dates the recheck from the time the run's
    /// terminal marker expired, which every pass reads alike.
    Unrecorded,
    /// So long ago that the deletion's recheck has run and forgotten it
    /// ([`RuntimeStore::forget_deleted`]): the store holds no trace of it,
    /// and a retention pass leaves no recheck marker for it again.
    Forgotten,
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

/// One page of a listing of run summaries by status, from
/// [`RuntimeStore::list_runs_page`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunPage {
    /// The page's runs still in the status listed, in the listing's order.
    pub runs: Vec<RunSummary>,
    /// The cursor of the next page (the last id the listing gave for this
    /// one, whether or not its run is in `runs`), or `None` if the listing
    /// found nothing after this page.
    pub next: Option<RunId>,
}

impl RunPage {
    /// A page of `runs` whose next page starts after `next` (`None`: the
    /// last page), for a backend's
    /// [`list_runs_page`](RuntimeStore::list_runs_page).
    pub fn new(runs: Vec<RunSummary>, next: Option<RunId>) -> RunPage {
        RunPage { runs, next }
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
