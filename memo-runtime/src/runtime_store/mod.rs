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

mod commit;
mod cost;
mod input;
mod limits;
mod memory;
mod object;
mod run;
mod shared;
mod state;

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::Result;
use crate::run_id::{Incarnation, RunId};

pub use commit::{Commit, StatusChange, StepReceipt};
pub use cost::{AttemptCost, Usage};
pub use input::{InputPhase, InputRecord, InputUpdate, NewInput};
pub use limits::{DEFAULT_MAX_PENDING_INPUTS, RunLimits};
pub use memory::InMemoryRuntimeStore;
pub use object::{DEFAULT_RUN_CACHE_BYTES, ObjectStoreRuntimeStore};
pub use run::{
    DeletionBegan, Fence, Lease, NewRun, RunDeletion, RunIdPage, RunPage, RunRecord, RunStatus,
    RunSummary,
};
pub(crate) use run::{lease_is_live, page_of};

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
///     retries: 0,
///     last_retried_error: None,
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
    /// different workflow or input; and, from [`ObjectStoreRuntimeStore`],
    /// for an id whose deleted earlier run a retention pass's recheck is
    /// finishing at that moment (between its mark of the run's vacated
    /// pointer and that pointer's delete): nothing was created, and a call
    /// made again once the delete has landed creates the run.
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

    /// Records an input (as [`append_input`](Self::append_input)) and
    /// returns it with the run as it stood when the input was recorded:
    /// what a signaller reads to learn whether an attempt held the run's
    /// lease then (if one did, that attempt sees the signal before it lets
    /// the lease go, so no worker need wake the run for it). The run holds
    /// every change committed before the input; one committed after it may
    /// be there or not, as with a load made just after. For an input
    /// recorded before (appended again), the run as this call found it.
    /// `None` if the run could not be read after the append (deleted
    /// since).
    ///
    /// The default implementation appends, then loads;
    /// [`ObjectStoreRuntimeStore`] answers from the run it folded to
    /// append, where the load would read the pointer and the log's next
    /// position again.
    ///
    /// # Errors
    ///
    /// As [`append_input`](Self::append_input)'s, and the
    /// [trait-level errors](RuntimeStore#errors) of the load: as after any
    /// error of a write, the input may have been recorded.
    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>)> {
        let input = self.append_input(run_id, input).await?;
        let record = self.load_run(run_id).await?;
        Ok((input, record))
    }

    /// Loads the run's inputs in the order they were appended. Empty for an
    /// unknown run.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>>;

    /// Loads the run's receipts (all of them, as
    /// [`load_receipts`](Self::load_receipts) with no `after`) and its
    /// inputs (as [`load_inputs`](Self::load_inputs)) from one read of the
    /// run where the backend can: what an attempt reads before its workflow
    /// runs. Both empty for an unknown run.
    ///
    /// The default implementation makes the two loads, one after the other;
    /// [`ObjectStoreRuntimeStore`] reads the run once (its pointer and the
    /// log's newest entries), where the two loads read them twice.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        let receipts = self.load_receipts(run_id, None).await?;
        let inputs = self.load_inputs(run_id).await?;
        Ok((receipts, inputs))
    }

    /// Applies `commit` (as [`atomic_apply`](Self::atomic_apply)) and
    /// returns the run as it stands after it with its receipts and inputs
    /// (as [`load_receipts_and_inputs`](Self::load_receipts_and_inputs)):
    /// what an attempt's start commits and then reads before its workflow
    /// runs. The receipts and inputs hold every one committed before the
    /// commit; one committed after it may be there or not, as with a load
    /// made just after. The caller keeps the run from being deleted in
    /// between (an attempt holds its lease): the default's load reads the
    /// run the id names then.
    ///
    /// The default implementation applies, then loads;
    /// [`ObjectStoreRuntimeStore`] answers from the run it folded to apply
    /// the commit, confirmed by the pointer read that follows the commit's
    /// create, where the load would read the pointer and the log's next
    /// position again (two `GET`s an attempt).
    ///
    /// # Errors
    ///
    /// As [`atomic_apply`](Self::atomic_apply)'s, and the
    /// [trait-level errors](RuntimeStore#errors) of the load: as after any
    /// error of a write, the commit may have been applied.
    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        let record = self.atomic_apply(run_id, commit).await?;
        let (receipts, inputs) = self.load_receipts_and_inputs(run_id).await?;
        Ok((record, receipts, inputs))
    }

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

    /// One page of [`list_runs`](Self::list_runs): the summaries of the
    /// runs of one [`list_run_ids_page`](Self::list_run_ids_page) page
    /// (`status`, `after`, `limit` as there) that are still in `status`,
    /// loading only those runs. The page's `next` is the id page's, so a
    /// page may hold fewer than `limit` runs (or none) while its `next` is
    /// not `None`: the runs listed there left `status`.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors); a listed run that
    /// cannot be loaded fails the page (list its ids with
    /// `list_run_ids_page` and load them one by one to find which). The
    /// default implementation loads each listed run with
    /// [`load_run`](Self::load_run) and its receipts with
    /// [`load_receipts`](Self::load_receipts): backends with a cheaper
    /// summary override it.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use memo_runtime::{Bytes, RunId};
    /// use memo_runtime::runtime_store::{InMemoryRuntimeStore, NewRun, RunStatus, RuntimeStore};
    ///
    /// let store = InMemoryRuntimeStore::new();
    /// for id in ["a", "b", "c"] {
    ///     let run_id = RunId::new(id)?;
    ///     let workflow = "wf".into();
    ///     let (input, created_at_ms, workflow_version) = (Bytes::new(), 0, None);
    ///     let run = NewRun { run_id, workflow, input, created_at_ms, workflow_version };
    ///     store.create_run(run).await?;
    /// }
    /// let first = store.list_runs_page(RunStatus::Pending, None, 2).await?;
    /// assert_eq!(first.runs.len(), 2);
    /// let rest = store
    ///     .list_runs_page(RunStatus::Pending, first.next.as_ref(), 2)
    ///     .await?;
    /// assert_eq!(rest.runs[0].run_id.as_str(), "c");
    /// assert_eq!(rest.next, None);
    /// # Ok(()) }
    /// ```
    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        let page = self.list_run_ids_page(status, after, limit).await?;
        let mut runs = Vec::with_capacity(page.ids.len());
        for run_id in &page.ids {
            let Some(record) = self.load_run(run_id).await? else {
                continue;
            };
            if record.status != status {
                continue;
            }
            let steps = self.load_receipts(run_id, None).await?.len() as u64;
            runs.push(RunSummary::new(&record, steps));
        }
        Ok(RunPage::new(runs, page.next))
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
    /// Only terminal runs can be deleted, so no attempt can commit to a run
    /// while it disappears. The attempt that ended it may still be writing
    /// its last checkpoint, which its check after the write takes back if
    /// the run is gone; a writer that dies between the two (or any writer
    /// stalled past the deletion that dies before its check) leaves that
    /// one object behind, unreachable to every reader, which a retention
    /// pass's recheck clears if it lands before the recheck, and nothing
    /// clears after a deletion made here alone. Deleting is idempotent, and concurrent
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
    /// [`ObjectStoreRuntimeStore`] keeps two objects of a deleted
    /// incarnation, its tombstone and the run id's vacated pointer (unless
    /// a new run of the id took it), until
    /// [`forget_deleted`](Self::forget_deleted): a retention pass's
    /// recheck of the run removes them.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`](crate::Error::Conflict) if the run is that
    /// incarnation and not terminal.
    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool>;

    /// [`delete_run`](Self::delete_run), by a caller whose clock reads
    /// `at_ms`, answering also when the incarnation's deletion began
    /// ([`RunDeletion::began`]): `at_ms` if this call began it, else the
    /// time its first deleter recorded. Two retention sweeps that
    /// delete one run at once (a sweeper in every worker) so date its
    /// recheck alike, and leave one recheck marker between them, not one
    /// each (whose second, once the first recheck forgot the deletion,
    /// a sweeper not yet sure of its runtime store could not tell from a
    /// run it looks for at the wrong prefix).
    ///
    /// The default calls `delete_run` and answers `at_ms`: a store that
    /// records no time dates each deletion by its caller's clock.
    /// [`ObjectStoreRuntimeStore`] writes `at_ms` into the incarnation's
    /// tombstone when it creates it, and reads it from there (a `GET`)
    /// when another deleter created it, or when the run was gone already:
    /// a tombstone with no time in it is [`DeletionBegan::Unrecorded`], no
    /// tombstone (a recheck forgot the deletion) [`DeletionBegan::Forgotten`].
    ///
    /// # Errors
    ///
    /// As [`delete_run`](Self::delete_run).
    async fn delete_run_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> Result<RunDeletion> {
        let existed = self.delete_run(run_id, incarnation).await?;
        Ok(RunDeletion::new(existed, DeletionBegan::At(at_ms)))
    }

    /// Whether objects of incarnation `incarnation` of the run are stored
    /// here although the run is not that incarnation: what a
    /// [`delete_run`](Self::delete_run) that stopped part way leaves, and
    /// so stored proof that this store held the incarnation. A retention
    /// sweep asks it of a marker whose run it cannot find: a deletion that
    /// stopped part way is finished (its memo entries cleared first), a
    /// runtime store that never held the run (a mistyped prefix) touches
    /// nothing. Incarnations are drawn at random, so no other store holds
    /// one's objects.
    ///
    /// The default answers `false` (a store whose deletion never stops part
    /// way, as [`InMemoryRuntimeStore`]'s,
    /// leaves nothing).
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn holds_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let _ = (run_id, incarnation);
        Ok(false)
    }

    /// Whether this store holds the trace its
    /// [`delete_run`](Self::delete_run) of incarnation `incarnation` of the
    /// run keeps until [`forget_deleted`](Self::forget_deleted):
    /// `Some(true)` if it does; `Some(false)` if it holds none (it never
    /// deleted that incarnation, as a store at another prefix than the one
    /// the run was created in; or the deletion was forgotten); `None` for a
    /// store that keeps no such trace. A retention pass asks it before it
    /// rechecks a run it deleted, while it has not proved its runtime store
    /// the workers': a recheck through a store that never held the run
    /// clears nothing there, and must not drop the recheck marker that
    /// leads the workers' passes to what a late writer left.
    ///
    /// The default answers `None` (a store that keeps nothing, as
    /// [`InMemoryRuntimeStore`]). [`ObjectStoreRuntimeStore`] sends a
    /// `HEAD` of the incarnation's tombstone.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<bool>> {
        let _ = (run_id, incarnation);
        Ok(None)
    }

    /// Removes what [`delete_run`](Self::delete_run) keeps of incarnation
    /// `incarnation` so that no late write brings it back: a retention pass
    /// calls it when it rechecks a run it deleted, once it cleared what late
    /// writers left (see
    /// [`RetentionSweeperBuilder::recheck_after`](crate::retention::RetentionSweeperBuilder::recheck_after)).
    /// [`ObjectStoreRuntimeStore`] keeps a tombstone,
    /// `tombstones/<run>.<inc>`: an empty object by which a record of the
    /// incarnation that a writer puts back after the deletion (one that read
    /// the run as open before it, and stalled) is taken back rather than
    /// read as the run created again. And the run id's pointer, vacated
    /// (`vacant <inc>`) rather than deleted, so that a deletion that
    /// stalled cannot remove the pointer of a run created since: removed
    /// here if it is still the one this deletion left (a new run of the id
    /// replaces it, and is left alone). A caller of `delete_run` other
    /// than a retention pass calls this when no writer of the incarnation
    /// can be left. A pass whose runtime store is not the one that deleted
    /// the run (another prefix) calls it on the wrong store: the tombstone
    /// and the vacated pointer then stay (the id's next run replaces the
    /// pointer).
    ///
    /// The default does nothing (a store that keeps nothing, as
    /// [`InMemoryRuntimeStore`]).
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn forget_deleted(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        let _ = (run_id, incarnation);
        Ok(())
    }

    /// Deletes whatever this store holds of incarnation `incarnation` of
    /// the run, unless the run is that incarnation: what a
    /// [`delete_run`](Self::delete_run) that stopped part way left, or what
    /// a stale writer of the incarnation wrote after its deletion. A
    /// retention pass calls it when it rechecks a run it deleted. Answers
    /// whether it found anything of the incarnation; a store may delete
    /// objects it does not look for first and leave them out of that
    /// answer.
    ///
    /// The default asks [`holds_remains`](Self::holds_remains) and, if it
    /// answers yes, calls [`delete_run`](Self::delete_run).
    /// [`ObjectStoreRuntimeStore`] reads the run's pointer, lists the
    /// incarnation's folder and deletes what it holds together with every
    /// status hint the incarnation may have left, in one `delete_stream`
    /// (on S3 one request), without a `HEAD` of each hint: a hint is left
    /// out of the answer.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn clear_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        if !self.holds_remains(run_id, incarnation).await? {
            return Ok(false);
        }
        self.delete_run(run_id, incarnation).await?;
        Ok(true)
    }

    /// [`forget_deleted`](Self::forget_deleted) of each of `deleted`, with
    /// each one's result in their order: a retention pass forgets the
    /// deletions it rechecked together.
    ///
    /// The default calls `forget_deleted` for each, one after the other.
    /// [`ObjectStoreRuntimeStore`] deletes their tombstones in one
    /// `delete_stream` (on S3 one request per 1,000), reads each run id's
    /// pointer (unless its own `clear_remains` of the incarnation just read
    /// it vacated: it updates the version read then) and marks each
    /// vacated pointer still there swept (a conditional update, which one
    /// of two rechecks of a deletion wins), and deletes those in a second
    /// `delete_stream`.
    async fn forget_deleted_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<()>> {
        let mut results = Vec::with_capacity(deleted.len());
        for (run_id, incarnation) in deleted {
            results.push(self.forget_deleted(run_id, *incarnation).await);
        }
        results
    }

    /// [`forget_deleted_all`](Self::forget_deleted_all) by a caller whose
    /// clock reads `at_ms`, as a retention pass's recheck is. A result may
    /// be [`Error::Deferred`](crate::Error::Deferred): another recheck of
    /// the same deletion is finishing it, and the caller tries again later.
    ///
    /// The default calls `forget_deleted_all`. [`ObjectStoreRuntimeStore`]
    /// writes `at_ms` into its mark of each vacated pointer (`vacant <inc>
    /// swept <mark> at <ms>`), by which a creation of the id waits for the
    /// mark's delete rather than replace it (the delete, unconditional,
    /// would remove the new run's pointer), for a minute at most; and it
    /// deletes another recheck's mark once that is a minute old (that
    /// recheck stopped between its mark and its delete), deferring
    /// meanwhile.
    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: u64,
    ) -> Vec<Result<()>> {
        let _ = at_ms;
        self.forget_deleted_all(deleted).await
    }

    /// Tells the store the clock its callers read their leases by: the
    /// runtime's, given by [`RuntimeBuilder::build`](crate::workflow::RuntimeBuilder::build).
    /// A store may then acknowledge a step commit of an attempt whose lease
    /// is live by that clock once the commit is written, without reading
    /// the run again ([`ObjectStoreRuntimeStore`] does, see its
    /// documentation); the default ignores it.
    fn use_clock(&self, clock: std::sync::Arc<dyn crate::clock::Clock>) {
        let _ = clock;
    }

    /// Records what attempt `cost.attempt` of incarnation `incarnation` of
    /// the run cost: its entry in the run's [cost ledger](AttemptCost),
    /// kept with the incarnation and deleted with it by
    /// [`delete_run`](Self::delete_run). Recording an attempt again keeps
    /// the first record and succeeds. The workflow runtime calls it once
    /// per attempt that does not end the run, when the attempt suspends or
    /// stops (the attempt that ends the run hands its entry to the commit
    /// that ends it instead, [`Commit::cost`]). A stale attempt may
    /// call it after the incarnation was deleted: a store must then keep
    /// nothing of it (the object store takes its record back once it finds
    /// the incarnation gone, and answers with a conflict), since no
    /// deletion would reach the record.
    ///
    /// The default keeps nothing: a store without a cost ledger (its runs
    /// read as having none) needs no code for it.
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> Result<()> {
        let _ = (run_id, incarnation, cost);
        Ok(())
    }

    /// The cost ledger of incarnation `incarnation` of the run: what each of
    /// its attempts recorded, and the entry its terminal commit carried
    /// ([`Commit::cost`]), in attempt order. Empty for a run that has none
    /// (one from before the ledger, an unknown or deleted run, a store that
    /// keeps none, as the default).
    ///
    /// # Errors
    ///
    /// See the [trait-level errors](RuntimeStore#errors).
    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        let _ = (run_id, incarnation);
        Ok(Vec::new())
    }
}
