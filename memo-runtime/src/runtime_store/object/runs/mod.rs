//! `Runs`: the runtime store proper. It owns the components (the run
//! pointer, the log, the checkpointer, the status-hint index, the run
//! cache) and takes each call through them:
//!
//! - reading a run: its cache slot, locked, then [`refresh`](Runs::refresh):
//!   the pointer, and the run folded from its newest checkpoint and the log
//!   after it (or, if it is cached, caught up from the next log position);
//! - committing a change ([`change`](Runs::change)): checked against the
//!   folded run, its status hint written, appended to the log, the pointer
//!   checked, then the hint it left dropped and a checkpoint written if one
//!   is due;
//! - creating a run ([`create`](Runs::create)): its `Pending` hint, then
//!   its pointer and record, then its slot filled;
//! - listing by status through the hints, and deleting a run: its pointer,
//!   then its folder and hints.
//!
//! [`ObjectStoreRuntimeStore`](super::ObjectStoreRuntimeStore) builds it
//! and passes every call to it. Here: the type and the calls; `read`,
//! `commit` and `create` the three walks the calls share.

mod commit;
mod create;
mod read;
mod unchecked;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

use super::cache::RunCache;
use super::checkpoint::Checkpointer;
use super::client::{CONCURRENCY, Client};
use super::hints::HintIndex;
use super::log::RunLog;
use super::pointer::RunPointer;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, RunState};
use crate::runtime_store::{
    Commit, DeletionBegan, InputRecord, NewInput, NewRun, RunDeletion, RunIdPage, RunLimits,
    RunPage, RunRecord, RunStatus, RunSummary, RuntimeStore, StepReceipt,
};

/// The runs of one store: its components, and the limits a new run or
/// change is held to.
pub(super) struct Runs {
    client: Arc<Client>,
    pointer: RunPointer,
    log: RunLog,
    checkpoints: Checkpointer,
    hints: HintIndex,
    cache: RunCache,
    limits: RunLimits,
    /// The clock the runtime reads leases by, once a runtime was built
    /// with this store: step commits are then acknowledged on their lease
    /// (`unchecked`).
    clock: OnceLock<Arc<dyn Clock>>,
    /// Per run, the commits acknowledged on their lease since its pointer
    /// was last read.
    unchecked: Mutex<HashMap<RunId, unchecked::Unchecked>>,
}

/// Names its limits only: the client's `Debug` may print credentials (the
/// store names its own settings).
impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Runs {
    /// The runs over these components (`hints` over this `pointer`).
    pub(super) fn new(
        client: Arc<Client>,
        pointer: RunPointer,
        log: RunLog,
        checkpoints: Checkpointer,
        hints: HintIndex,
        cache: RunCache,
        limits: RunLimits,
    ) -> Runs {
        Runs {
            client,
            pointer,
            log,
            checkpoints,
            hints,
            cache,
            limits,
            clock: OnceLock::new(),
            unchecked: Mutex::new(HashMap::new()),
        }
    }

    /// Takes the runtime's clock (the first given stays).
    pub(super) fn use_clock(&self, clock: Arc<dyn Clock>) {
        let _ = self.clock.set(clock);
    }

    /// `delete_run`, and when the incarnation's deletion began: `at_ms` if
    /// this call wrote its tombstone, what another deleter wrote there if
    /// one did (a `GET`, also made for a run found gone, but only when
    /// `at_ms` is given: a caller without a clock asks nothing, and is
    /// answered `Unrecorded`).
    async fn delete_dated(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: Option<u64>,
    ) -> Result<RunDeletion> {
        // The run, and the version of its pointer the load read, which the
        // deletion's update vacates unless it changed since.
        let loaded = self
            .read_folded(run_id, |folded| {
                let record = folded.state.record().clone();
                (record, folded.pointer_version.clone())
            })
            .await?;
        let (existed, read) = match loaded {
            Some((record, _)) if record.incarnation != incarnation => (false, None),
            Some((record, _)) if !record.status.is_terminal() => {
                return Err(Error::Conflict {
                    what: format!("run {run_id}"),
                    reason: format!(
                        "the run is {}; only terminal runs can be deleted",
                        record.status
                    ),
                });
            }
            Some((_, version)) => (true, version),
            None => (false, None),
        };
        let began = if existed {
            // The tombstone, then the record and the pointer: from then on
            // the run does not exist for any reader, whatever is left of its
            // log if this call stops early, and a record of it that a late
            // writer puts back is never restored. See the `pointer` module
            // for why this cannot remove a later run of the id.
            let began = self.pointer.bury(run_id, incarnation, at_ms).await?;
            self.cache.forget(run_id);
            self.pointer.remove(run_id, incarnation, read).await?;
            began
        } else if at_ms.is_some() {
            self.pointer.buried_at(run_id, incarnation).await?
        } else {
            DeletionBegan::Unrecorded
        };
        self.delete_incarnation(run_id, incarnation).await?;
        Ok(RunDeletion::new(existed, began))
    }

    /// The tombstones of `deleted`, in one `delete_stream`; then the
    /// vacated pointers of those whose tombstone went, marked swept (with
    /// `at_ms` in the mark) and deleted in a second one
    /// (`RunPointer::sweep_vacated`).
    async fn forget_dated(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: Option<u64>,
    ) -> Vec<Result<()>> {
        let unburied = self.pointer.unbury_all(deleted).await;
        let forgotten: Vec<(RunId, Incarnation)> = (deleted.iter().zip(&unburied))
            .filter(|(_, unburied)| unburied.is_ok())
            .map(|(deleted, _)| deleted.clone())
            .collect();
        let swept = self.pointer.sweep_vacated(&forgotten, at_ms).await;
        let mut swept = swept.into_iter();
        unburied
            .into_iter()
            .map(|unburied| unburied.and_then(|()| swept.next().expect("a result per run")))
            .collect()
    }

    /// Deletes what the folder of incarnation `incarnation` holds (one
    /// listing) and the incarnation's status hints, in one `delete_stream`;
    /// answers how many objects the folder held. Only this incarnation's
    /// own folder and hints: a later run of the id (another incarnation) is
    /// never touched.
    async fn delete_incarnation(&self, run_id: &RunId, incarnation: Incarnation) -> Result<usize> {
        let layout = self.client.layout();
        let folder = layout.incarnation_records(run_id, incarnation);
        let listed = self.client.list(&folder).await?;
        let found = listed.len();
        let leftovers = listed.into_iter().map(|meta| meta.location);
        let hints = RunStatus::ALL
            .iter()
            .map(|&status| layout.status_hint(status.path_segment(), run_id, incarnation));
        self.client
            .delete_all(leftovers.chain(hints).collect())
            .await?;
        Ok(found)
    }

    /// Whether the run's current incarnation is `incarnation` (its pointer,
    /// restored from a record if missing): one `GET`. What a writer of an
    /// incarnation's object asks after its write, to take the object back
    /// if the incarnation was deleted under it.
    pub(super) async fn is_current(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<bool> {
        self.pointer.is_current(run_id, incarnation).await
    }
}

#[async_trait]
impl RuntimeStore for Runs {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        self.limits.admit_run(&run)?;
        self.create(run).await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.read(run_id, |state| state.record().clone()).await
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        self.change(run_id, Change::Commit(Box::new(commit)), |state| {
            state.record().clone()
        })
        .await
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        Ok(self
            .read(run_id, |state| state.receipts_after(after))
            .await?
            .unwrap_or_default())
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        Ok(self.read(run_id, RunState::snapshot).await?.flatten())
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        Ok(self.append_input_and_load(run_id, input).await?.0)
    }

    /// The run as the append left it: folded up to the entry it created
    /// and confirmed by the pointer read after it, as a load would read it
    /// then, with no request more.
    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>)> {
        let input_id = input.input_id.clone();
        self.change(run_id, Change::Input(input), |state| {
            state.appended(&input_id)
        })
        .await
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        Ok(self
            .read(run_id, RunState::inputs)
            .await?
            .unwrap_or_default())
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        Ok(self
            .read(run_id, RunState::history)
            .await?
            .unwrap_or_default())
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        // The run as the commit left it: folded up to the entry it created
        // (a create at a position proves none after it) and confirmed by
        // the pointer read after it, as a load would read it then.
        self.change(run_id, Change::Commit(Box::new(commit)), RunState::applied)
            .await
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        let hints = self.hints.list(status).await?;
        let records: Vec<Option<RunSummary>> = futures::stream::iter(hints)
            .map(|(run_id, incarnation)| async move {
                let record = self.read(&run_id, RunState::summary).await?;
                let current = record.filter(|r| r.incarnation == incarnation);
                let stale = match &current {
                    Some(record) => HintIndex::is_stale(status, record.status),
                    // A hint of a deleted incarnation, or of one not (yet)
                    // created.
                    None => true,
                };
                if stale {
                    let unborn = current.is_none();
                    self.hints
                        .tidy(status, &run_id, incarnation, unborn)
                        .await?;
                }
                Ok::<_, Error>(current.filter(|r| r.status == status))
            })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        let mut records: Vec<RunSummary> = records.into_iter().flatten().collect();
        records.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        Ok(records)
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        let mut hints = self.hints.list(status).await?;
        if status == RunStatus::Pending {
            hints = self.hints.live_pending(hints).await?;
        }
        let mut run_ids: Vec<RunId> = hints.into_iter().map(|(run_id, _)| run_id).collect();
        run_ids.sort();
        run_ids.dedup();
        Ok(run_ids)
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        self.hints.page(status, after, limit).await
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        // The page's hints, then one summary per listed run (a cached run
        // costs nothing): never a run the page does not show.
        let page = self.hints.page(status, after, limit).await?;
        let summaries: Vec<Option<RunSummary>> = futures::stream::iter(page.ids)
            .map(|run_id| async move { self.read(&run_id, RunState::summary).await })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        let runs = summaries
            .into_iter()
            .flatten()
            .filter(|run| run.status == status)
            .collect();
        Ok(RunPage::new(runs, page.next))
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        Ok(self.delete_dated(run_id, incarnation, None).await?.existed)
    }

    /// The tombstone holds `at_ms` if this call writes it; a deletion that
    /// finds the run gone reads the time of the tombstone it left (a
    /// `GET`), as does one whose tombstone another deleter wrote first.
    async fn delete_run_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> Result<RunDeletion> {
        self.delete_dated(run_id, incarnation, Some(at_ms)).await
    }

    /// One `DELETE`, the tombstone `delete_run` left; then a read of the
    /// pointer (none if this store's `clear_remains` just read it
    /// vacated), and if the deletion's vacated pointer is still there, an
    /// update marking it swept and its `DELETE`
    /// (`RunPointer::sweep_vacated`).
    async fn forget_deleted(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        self.pointer.unbury(run_id, incarnation).await?;
        let deleted = [(run_id.clone(), incarnation)];
        let mut swept = self.pointer.sweep_vacated(&deleted, None).await;
        swept.pop().expect("one result")
    }

    /// The tombstones `delete_run` left, in one `delete_stream`; then the
    /// vacated pointers of those whose tombstone went, as
    /// `forget_deleted` sweeps them, their deletes in a second one.
    async fn forget_deleted_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<()>> {
        self.forget_dated(deleted, None).await
    }

    /// `forget_deleted_all`, the marks dated `at_ms`.
    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: u64,
    ) -> Vec<Result<()>> {
        self.forget_dated(deleted, Some(at_ms)).await
    }

    /// A read of the pointer, which must not name the incarnation (and
    /// whose version, if the incarnation's deletion vacated it, the
    /// recheck's `forget_deleted` then updates), a listing of the
    /// incarnation's folder, and one `delete_stream` of what it holds and
    /// of the incarnation's status hints, found or not (`holds_remains`
    /// sends a `HEAD` for each, and restores a missing pointer first, a
    /// listing of the id's folder).
    ///
    /// The pointer as stored, not restored: the incarnation was deleted, so
    /// a missing pointer could be restored to it only from a record of it
    /// put back since, which is in the folder this deletes; a restorer that
    /// races the deletion removes the pointer it restored once it finds
    /// that record gone, as it does racing `delete_run` (the `pointer`
    /// module).
    async fn clear_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        if self.pointer.names(run_id, incarnation).await? {
            return Ok(false);
        }
        Ok(self.delete_incarnation(run_id, incarnation).await? > 0)
    }

    /// A `HEAD` of the incarnation's tombstone.
    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<bool>> {
        Ok(Some(self.pointer.is_buried(run_id, incarnation).await?))
    }

    /// A listing of the incarnation's folder, then (if it is empty) a
    /// `HEAD` of each status hint the incarnation may have left, until one
    /// is found; and a read of the pointer, which must not name it.
    async fn holds_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        if self.pointer.is_current(run_id, incarnation).await? {
            return Ok(false);
        }
        let layout = self.client.layout();
        let folder = layout.incarnation_records(run_id, incarnation);
        if !self.client.list(&folder).await?.is_empty() {
            return Ok(true);
        }
        for status in RunStatus::ALL {
            let hint = layout.status_hint(status.path_segment(), run_id, incarnation);
            match self.client.store().head(&hint).await {
                Ok(_) => return Ok(true),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(Error::store(&hint, e)),
            }
        }
        Ok(false)
    }
}
