//! `ObjectStoreRuntimeStore`: the runtime store in object storage, atomic
//! without transactions because every change is one write-once object.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};

use super::state::{Change, RunState, Verdict};
use super::{
    Commit, InputRecord, NewInput, NewRun, RunRecord, RunStatus, RuntimeStore, StepReceipt,
};
use crate::codec;
use crate::error::{Error, Result};
use crate::layout::{self, Layout};
use crate::run_id::{Incarnation, RunId};
use crate::write_once::{self, Created};

/// How many runs an instance keeps folded in memory.
const DEFAULT_CACHED_RUNS: usize = 256;

/// How many objects are read or deleted at once.
const CONCURRENCY: usize = 8;

/// The runtime store in object storage, for durable use by many processes
/// and machines sharing one bucket or folder.
///
/// Instances are independent: two instances (or processes) over the same
/// objects see each other's acknowledged changes, and a fresh instance sees
/// every one.
///
/// # Layout
///
/// Under the store's prefix (`<run>` is the run id's path segment, `<inc>`
/// the run's [`Incarnation`]):
///
/// - `runs/<run>/run`: the run pointer: the run as created ([`NewRun`]),
///   with the random incarnation that tells it from an earlier, deleted run
///   of the same id. At most one exists per run id; it is what makes a run
///   exist.
/// - `runs/<run>/<inc>/log/<position>`: the incarnation's changes after
///   creation, one object per change (a [`Commit`] or an appended input,
///   with the incarnation), at dense positions from 0 written as 20
///   zero-padded digits so they list in order. Each incarnation has its own
///   log folder, so a deleted run's leftovers never mix with a new run's.
/// - `runs-by-status/<status>/<run>.<inc>`: a hint that the incarnation is,
///   or was about to be, in `<status>`, so listing by status reads only
///   those runs.
///
/// # How a change commits
///
/// A change is checked against the run folded from its log up to position
/// `p`, then created at `log/<p>` with `PutMode::Create`. The create *is* the
/// commit: if it succeeds, the change was checked against exactly the state
/// before it; if another writer created `p` first, its change is folded in
/// and ours is checked again for `p + 1`. A receipt for step `n`, the start of
/// attempt `k`, and the terminal status can each be committed only once, so
/// of concurrent writers exactly one wins and the others see its change and
/// get a conflict (or success, for an identical change). An unknown outcome
/// is settled by reading back (see `write_once`); a retried change that
/// finds itself committed is an idempotent success. No backend feature
/// beyond `PutMode::Create` is used, so LocalFileSystem (which lacks
/// `PutMode::Update`) works.
///
/// Deleting a run removes its pointer first and its log after, and a writer
/// checks the pointer after every log entry it creates: a worker that cached
/// an incarnation that was deleted meanwhile (its log positions freed again)
/// learns that its change is void instead of writing into a dead run.
///
/// Objects are named by log position rather than by step sequence because
/// changes made between steps, often by other processes (a cancellation, a
/// signal, a failed attempt), must be ordered with the steps: with one log,
/// "no step after a terminal status" and "one start per attempt" are
/// decided by the same create that commits the change.
///
/// # Costs
///
/// Each instance keeps the folded state of up to 256 runs in memory
/// ([`with_cached_runs`](Self::with_cached_runs)), oldest first out. In
/// requests:
///
/// - a commit or input to a cached run: one create and a `GET` of the run
///   pointer, plus a `GET` per change another writer made first; a change of
///   status adds the new status's hint (one create) and deletes the old one;
/// - a read of a cached run: at most two `GET`s (the next log position, to
///   catch up, and the run pointer, to check the incarnation still exists;
///   only the pointer if the run is terminal);
/// - any call on a run not in the cache first reads its pointer, lists its
///   log once and reads each log entry;
/// - creating a run: a `GET` of its pointer and two creates (the hint and
///   the pointer);
/// - listing run ids by status: one listing of that status's hints (a run
///   that left the status may still be listed until a `list_runs` tidies
///   its hint);
/// - listing runs by status: one listing of that status's hints, then a read per
///   hinted run. A run's hint is deleted when it leaves the status, and a
///   listing deletes the hints it finds out of date, so the cost follows the
///   runs in that status, not every run ever stored;
/// - deleting a run: its reads, one listing, and a delete per object; only
///   the objects of the incarnation named are touched.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use memo_runtime::object_store::memory::InMemory;
/// use memo_runtime::runtime_store::{NewRun, ObjectStoreRuntimeStore, RuntimeStore};
/// use memo_runtime::{Bytes, RunId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> memo_runtime::Result<()> {
/// let objects = Arc::new(InMemory::new());
/// let store = ObjectStoreRuntimeStore::new(objects.clone(), "memo");
/// let run_id = RunId::new("order-7")?;
/// let run = NewRun {
///     run_id: run_id.clone(),
///     workflow: "checkout".into(),
///     input: Bytes::from_static(b"{}"),
///     created_at_ms: 0,
/// };
/// store.create_run(run).await?;
///
/// // Another process, over the same objects, sees the run.
/// let elsewhere = ObjectStoreRuntimeStore::new(objects, "memo");
/// assert!(elsewhere.load_run(&run_id).await?.is_some());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ObjectStoreRuntimeStore {
    store: Arc<dyn ObjectStore>,
    layout: Layout,
    cache: Mutex<Cache>,
}

/// A run folded up to (not including) log position `next`.
#[derive(Debug)]
struct Folded {
    state: RunState,
    next: u64,
    incarnation: Incarnation,
}

/// The stored run pointer. `incarnation` is drawn at random for each
/// creation, so that an instance that cached a run which was then deleted
/// and created again under the same id can tell the new run from the old.
#[derive(Debug, Serialize, Deserialize)]
struct Creation {
    run: NewRun,
    incarnation: Incarnation,
}

/// A stored log entry: a change and the incarnation of the run it is for.
#[derive(Debug, Serialize, Deserialize)]
struct Entry<C> {
    incarnation: Incarnation,
    change: C,
}

/// What [`ObjectStoreRuntimeStore::refresh`] found.
#[derive(Debug, PartialEq, Eq)]
enum Refreshed {
    /// The run does not exist.
    Missing,
    /// Nothing changed since the run was cached.
    Unchanged,
    /// The run was loaded, or changed since it was cached.
    Changed,
}

/// One run's place in the cache. The async lock serializes this instance's
/// calls on one run, so they do not race each other for log positions.
type Slot = Arc<tokio::sync::Mutex<Option<Folded>>>;

#[derive(Debug)]
struct Cache {
    slots: HashMap<RunId, Slot>,
    /// Insertion order, oldest first, for eviction.
    order: VecDeque<RunId>,
    capacity: usize,
}

impl ObjectStoreRuntimeStore {
    /// A runtime store over `store`, keeping everything under `prefix`.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: impl Into<String>) -> ObjectStoreRuntimeStore {
        ObjectStoreRuntimeStore {
            store,
            layout: Layout::new(prefix),
            cache: Mutex::new(Cache {
                slots: HashMap::new(),
                order: VecDeque::new(),
                capacity: DEFAULT_CACHED_RUNS,
            }),
        }
    }

    /// Keeps at most `runs` runs folded in memory (default 256; at least 1).
    #[must_use]
    pub fn with_cached_runs(self, runs: usize) -> ObjectStoreRuntimeStore {
        self.lock_cache().capacity = runs.max(1);
        self
    }

    /// The object store the records live in.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The path prefix everything is kept under.
    pub fn prefix(&self) -> &Path {
        self.layout.prefix()
    }

    /// `<prefix>/runs/<run>`: every runtime record of a run id, of every
    /// incarnation.
    pub fn run_folder(&self, run_id: &RunId) -> Path {
        self.layout.runs_folder(run_id)
    }

    fn run_path(&self, run_id: &RunId) -> Path {
        self.layout.run_pointer(run_id)
    }

    fn log_path(&self, run_id: &RunId, incarnation: Incarnation, position: u64) -> Path {
        self.layout.log_entry(run_id, incarnation, position)
    }

    fn lock_cache(&self) -> MutexGuard<'_, Cache> {
        // The cache only maps run ids to slots; it is consistent after any panic.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, run_id: &RunId) -> Slot {
        let mut cache = self.lock_cache();
        if let Some(slot) = cache.slots.get(run_id) {
            return Arc::clone(slot);
        }
        while cache.slots.len() >= cache.capacity {
            let Some(oldest) = cache.order.pop_front() else {
                break;
            };
            cache.slots.remove(&oldest);
        }
        let slot = Slot::default();
        cache.slots.insert(run_id.clone(), Arc::clone(&slot));
        cache.order.push_back(run_id.clone());
        slot
    }

    fn forget(&self, run_id: &RunId) {
        let mut cache = self.lock_cache();
        if cache.slots.remove(run_id).is_some() {
            cache.order.retain(|id| id != run_id);
        }
    }

    /// Makes `slot` hold the run as storage has it: folded from storage if
    /// it is not cached, caught up if it is.
    async fn refresh(&self, run_id: &RunId, slot: &mut Option<Folded>) -> Result<Refreshed> {
        if let Some(folded) = slot.as_mut() {
            // Nothing follows a terminal change, so a terminal run has nothing
            // to catch up on.
            let grew = if folded.state.record().status.is_terminal() {
                Some(false)
            } else {
                self.catch_up(run_id, folded).await?
            };
            match grew {
                Some(true) => return Ok(Refreshed::Changed),
                // Deleting a run frees its log positions, so an empty next
                // position proves nothing: the incarnation is current only if
                // the pointer still names it.
                Some(false) if self.is_current(run_id, folded.incarnation).await? => {
                    return Ok(Refreshed::Unchanged);
                }
                _ => {}
            }
        }
        *slot = self.fold_from_storage(run_id).await?;
        Ok(if slot.is_some() {
            Refreshed::Changed
        } else {
            Refreshed::Missing
        })
    }

    /// Whether the run pointer names `incarnation`.
    async fn is_current(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let current = self.read_creation(run_id).await?;
        Ok(current.is_some_and(|c| c.incarnation == incarnation))
    }

    /// Reads the run pointer; `None` if the run does not exist.
    async fn read_creation(&self, run_id: &RunId) -> Result<Option<Creation>> {
        let run_path = self.run_path(run_id);
        let Some(bytes) = write_once::read(self.store.as_ref(), &run_path).await? else {
            return Ok(None);
        };
        let creation: Creation = codec::decode_record("the run's creation", &run_path, &bytes)?;
        if creation.run.run_id != *run_id {
            return Err(Error::corrupt(
                &run_path,
                format!(
                    "the creation record of run {run_id} names run {}",
                    creation.run.run_id
                ),
            ));
        }
        Ok(Some(creation))
    }

    /// Reads the run's creation and its whole log, and folds them.
    async fn fold_from_storage(&self, run_id: &RunId) -> Result<Option<Folded>> {
        let Some(creation) = self.read_creation(run_id).await? else {
            return Ok(None);
        };
        let incarnation = creation.incarnation;
        let positions = self.log_positions(run_id, incarnation).await?;
        let mut folded = Folded {
            state: RunState::new(creation.run, incarnation),
            next: 0,
            incarnation,
        };
        let mut entries = futures::stream::iter(positions)
            .map(|position| async move {
                let bytes = self.read_entry(run_id, incarnation, position).await?;
                Ok::<_, Error>((position, bytes))
            })
            .buffered(CONCURRENCY);
        while let Some((position, bytes)) = entries.try_next().await? {
            let Some(bytes) = bytes else {
                return Err(self.missing_entry(run_id, incarnation, position));
            };
            self.fold_entry(run_id, &mut folded, &bytes)?;
        }
        Ok(Some(folded))
    }

    /// The positions in the run's log folder, checked to be dense from 0.
    async fn log_positions(&self, run_id: &RunId, incarnation: Incarnation) -> Result<Vec<u64>> {
        let folder = self.layout.log_folder(run_id, incarnation);
        let metas: Vec<_> = self
            .store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let mut positions = Vec::with_capacity(metas.len());
        for meta in metas {
            let position = layout::parse_log_position(&meta.location).ok_or_else(|| {
                Error::corrupt(
                    &meta.location,
                    format!("run {run_id}: not a log entry name (20 digits expected)"),
                )
            })?;
            positions.push(position);
        }
        // LocalFileSystem lists in no particular order.
        positions.sort_unstable();
        if let Some((expected, _)) = positions.iter().enumerate().find(|&(i, &p)| i as u64 != p) {
            return Err(self.missing_entry(run_id, incarnation, expected as u64));
        }
        Ok(positions)
    }

    /// Reads the log entry at `position`, naming the run and the position
    /// if it is corrupt.
    async fn read_entry(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
    ) -> Result<Option<Bytes>> {
        let path = self.log_path(run_id, incarnation, position);
        write_once::read(self.store.as_ref(), &path)
            .await
            .map_err(|e| match e {
                Error::Corrupt { path, reason } => Error::Corrupt {
                    path,
                    reason: format!("run {run_id} log entry {position}: {reason}"),
                },
                e => e,
            })
    }

    fn missing_entry(&self, run_id: &RunId, incarnation: Incarnation, position: u64) -> Error {
        Error::corrupt(
            self.log_path(run_id, incarnation, position),
            format!("run {run_id} log entry {position} is missing but later entries exist"),
        )
    }

    /// Folds the changes written after `folded.next`: `Some(true)` if there
    /// were any.
    async fn catch_up(&self, run_id: &RunId, folded: &mut Folded) -> Result<Option<bool>> {
        let mut grew = false;
        while let Some(bytes) = self
            .read_entry(run_id, folded.incarnation, folded.next)
            .await?
        {
            self.fold_entry(run_id, folded, &bytes)?;
            grew = true;
        }
        Ok(Some(grew))
    }

    /// Folds the log entry at `folded.next`, which every writer checked
    /// against the entries before it: one that does not apply, or names
    /// another incarnation than its folder, is corrupt.
    fn fold_entry(&self, run_id: &RunId, folded: &mut Folded, bytes: &[u8]) -> Result<()> {
        let position = folded.next;
        let path = self.log_path(run_id, folded.incarnation, position);
        let what = format!("run {run_id} log entry {position}");
        let entry: Entry<Change> = codec::decode_record(&what, &path, bytes)?;
        if entry.incarnation != folded.incarnation {
            return Err(Error::corrupt(
                &path,
                format!(
                    "{what} names incarnation {} in the folder of incarnation {}",
                    entry.incarnation, folded.incarnation
                ),
            ));
        }
        match folded.state.check(&entry.change) {
            Ok(Verdict::Apply(plan)) => folded.state.apply(entry.change, plan),
            Ok(Verdict::AlreadyApplied) => {
                return Err(Error::corrupt(
                    &path,
                    format!("{what} repeats an earlier change"),
                ));
            }
            Err(e) => {
                return Err(Error::corrupt(
                    &path,
                    format!("{what} does not follow from the entries before it: {e}"),
                ));
            }
        }
        folded.next += 1;
        Ok(())
    }

    /// Commits `change` to the run, and returns what `answer` reads from the
    /// run after it.
    async fn change<T>(
        &self,
        run_id: &RunId,
        change: Change,
        answer: impl Fn(&RunState) -> T,
    ) -> Result<T> {
        let slot = self.slot(run_id);
        let mut guard = slot.lock().await;
        if guard.is_none() {
            self.refresh(run_id, &mut guard).await?;
        }
        loop {
            let Some(folded) = guard.as_mut() else {
                return Err(Error::RunNotFound {
                    run_id: run_id.to_string(),
                });
            };
            let plan = match folded.state.check(&change) {
                Ok(Verdict::AlreadyApplied) => return Ok(answer(&folded.state)),
                Ok(Verdict::Apply(plan)) => plan,
                // The cache may be behind: judge only against the latest log.
                Err(e) => match self.refresh(run_id, &mut guard).await? {
                    Refreshed::Unchanged => return Err(e),
                    Refreshed::Changed | Refreshed::Missing => continue,
                },
            };
            self.write_status_hint(run_id, &folded.state, &change)
                .await?;
            let entry = Entry {
                incarnation: folded.incarnation,
                change: &change,
            };
            let encoded = codec::encode_value("a runtime-store change", &entry)?;
            let path = self.log_path(run_id, folded.incarnation, folded.next);
            match write_once::create_once(self.store.as_ref(), &path, &encoded).await? {
                // At position `next` either way: an identical change there
                // is this change, applied once.
                created @ (Created::Ours(_) | Created::Same(_)) => {
                    if !self.is_current(run_id, folded.incarnation).await? {
                        // The incarnation was deleted and its log freed under
                        // us: the change went into a dead run.
                        if let Created::Ours(_) = created {
                            let _ = self.delete_all(vec![path]).await;
                        }
                        *guard = None;
                        return Err(Error::Conflict {
                            what: format!("run {run_id}"),
                            reason: "the run was deleted while the change was written; \
                                     nothing was applied"
                                .into(),
                        });
                    }
                    let before = folded.state.record().status;
                    folded.state.apply(change, plan);
                    folded.next += 1;
                    if folded.state.record().status != before {
                        self.drop_stale_hint(before, run_id, folded.incarnation)
                            .await;
                    }
                    return Ok(answer(&folded.state));
                }
                Created::Theirs(bytes) => self.fold_entry(run_id, folded, &bytes)?,
            }
        }
    }

    /// Before a change moves the run into a status, records the hint that
    /// lets [`RuntimeStore::list_runs`] find it there. A hint without the
    /// change (a crash or a conflict in between) is only a wasted read later.
    async fn write_status_hint(
        &self,
        run_id: &RunId,
        state: &RunState,
        change: &Change,
    ) -> Result<()> {
        let Change::Commit(Commit {
            status: Some(status),
            ..
        }) = change
        else {
            return Ok(());
        };
        let status = status.status();
        let record = state.record();
        if record.status == status {
            return Ok(());
        }
        self.write_hint(status, run_id, record.incarnation).await
    }

    async fn write_hint(
        &self,
        status: RunStatus,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<()> {
        let path = self.layout.status_hint(status, run_id, incarnation);
        write_once::create_once(self.store.as_ref(), &path, run_id.as_str().as_bytes()).await?;
        Ok(())
    }

    /// An idempotent [`create_run`](RuntimeStore::create_run) of a run whose
    /// creation record `committed` exists.
    async fn recreate(&self, run: &NewRun, run_path: &Path, committed: &[u8]) -> Result<RunRecord> {
        let existing: Creation = codec::decode_record("the run's creation", run_path, committed)?;
        RunState::new(existing.run, existing.incarnation).check_same_run(run)?;
        let run_id = &run.run_id;
        self.read(run_id, |state| state.record().clone())
            .await?
            .ok_or_else(|| Error::Conflict {
                what: format!("run {run_id}"),
                reason: "the run was deleted while it was being created".into(),
            })
    }

    /// Deletes the hint of a status the run has left for good (statuses
    /// only move forward). Best effort: the change is committed whatever
    /// happens here, and a hint left behind only costs a later listing a
    /// read, after which that listing deletes it.
    async fn drop_stale_hint(&self, left: RunStatus, run_id: &RunId, incarnation: Incarnation) {
        let hint = self.layout.status_hint(left, run_id, incarnation);
        if let Err(e) = self.delete_all(vec![hint]).await {
            tracing::debug!(run_id = %run_id, status = %left, error = %e, "stale status hint kept");
        }
    }

    /// Loads the run (caught up) and returns what `answer` reads from it;
    /// `None` if it does not exist.
    async fn read<T>(&self, run_id: &RunId, answer: impl Fn(&RunState) -> T) -> Result<Option<T>> {
        let slot = self.slot(run_id);
        let mut guard = slot.lock().await;
        if self.refresh(run_id, &mut guard).await? == Refreshed::Missing {
            drop(guard);
            self.forget(run_id);
            return Ok(None);
        }
        Ok(guard.as_ref().map(|folded| answer(&folded.state)))
    }

    /// The runs (and incarnations) hinted to be in `status`. Objects that
    /// are not hints are skipped with a warning.
    async fn status_hints(&self, status: RunStatus) -> Result<Vec<(RunId, Incarnation)>> {
        let folder = self.layout.status_folder(status);
        let hints: Vec<_> = self
            .store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        Ok(hints
            .iter()
            .filter_map(|hint| {
                let parsed = layout::parse_status_hint(&hint.location);
                if parsed.is_none() {
                    tracing::warn!(path = %hint.location, "not a run status hint; skipped");
                }
                parsed
            })
            .collect())
    }

    /// Whether a hint of `hinted` can never again be true of a run in `actual`
    /// (statuses only move forward).
    fn hint_is_stale(hinted: RunStatus, actual: RunStatus) -> bool {
        hinted != actual && (actual.is_terminal() || hinted == RunStatus::Pending)
    }

    async fn delete_all(&self, paths: Vec<Path>) -> Result<()> {
        futures::stream::iter(paths)
            .map(|path| async move {
                match self.store.delete(&path).await {
                    // LocalFileSystem reports deleting a missing object.
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(Error::store(&path, e)),
                }
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await
    }
}

#[async_trait]
impl RuntimeStore for ObjectStoreRuntimeStore {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        let run_id = run.run_id.clone();
        let run_path = self.run_path(&run_id);
        if let Some(bytes) = write_once::read(self.store.as_ref(), &run_path).await? {
            return self.recreate(&run, &run_path, &bytes).await;
        }
        // A new incarnation gets its own log folder: whatever a deletion that
        // stopped part-way left of an earlier run of this id is never read.
        let creation = Creation {
            run,
            incarnation: Incarnation::random(),
        };
        self.write_hint(RunStatus::Pending, &run_id, creation.incarnation)
            .await?;
        let encoded = codec::encode_value("a run", &creation)?;
        match write_once::create_once(self.store.as_ref(), &run_path, &encoded).await? {
            Created::Ours(_) => {
                let state = RunState::new(creation.run, creation.incarnation);
                let record = state.record().clone();
                let slot = self.slot(&run_id);
                // Whatever was cached is of an earlier run of this id.
                *slot.lock().await = Some(Folded {
                    state,
                    next: 0,
                    incarnation: creation.incarnation,
                });
                Ok(record)
            }
            // Created meanwhile, or our acknowledgement was lost: the run may
            // have moved on since its creation, so answer with its state now.
            Created::Same(bytes) | Created::Theirs(bytes) => {
                self.recreate(&creation.run, &run_path, &bytes).await
            }
        }
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.read(run_id, |state| state.record().clone()).await
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        self.change(run_id, Change::Commit(commit), |state| {
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
        let input_id = input.input_id.clone();
        self.change(run_id, Change::Input(input), |state| {
            state
                .input(&input_id)
                .cloned()
                .expect("an accepted input is recorded")
        })
        .await
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        Ok(self
            .read(run_id, RunState::inputs)
            .await?
            .unwrap_or_default())
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunRecord>> {
        let hints = self.status_hints(status).await?;
        let records: Vec<Option<RunRecord>> = futures::stream::iter(hints)
            .map(|(run_id, incarnation)| async move {
                let record = self.load_run(&run_id).await?;
                let current = record.filter(|r| r.incarnation == incarnation);
                let stale = match &current {
                    Some(record) => Self::hint_is_stale(status, record.status),
                    // A hint of a deleted incarnation.
                    None => true,
                };
                if stale {
                    let hint = self.layout.status_hint(status, &run_id, incarnation);
                    self.delete_all(vec![hint]).await?;
                }
                Ok::<_, Error>(current.filter(|r| r.status == status))
            })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        let mut records: Vec<RunRecord> = records.into_iter().flatten().collect();
        records.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        Ok(records)
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        let mut run_ids: Vec<RunId> = self
            .status_hints(status)
            .await?
            .into_iter()
            .map(|(run_id, _)| run_id)
            .collect();
        run_ids.sort();
        run_ids.dedup();
        Ok(run_ids)
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let existed = match self.load_run(run_id).await? {
            Some(record) if record.incarnation != incarnation => false,
            Some(record) if !record.status.is_terminal() => {
                return Err(Error::Conflict {
                    what: format!("run {run_id}"),
                    reason: format!(
                        "the run is {}; only terminal runs can be deleted",
                        record.status
                    ),
                });
            }
            Some(_) => true,
            None => false,
        };
        if existed {
            // The pointer goes first: from then on the run does not exist for
            // any reader, whatever is left of its log if this call stops early.
            self.delete_all(vec![self.run_path(run_id)]).await?;
            self.forget(run_id);
        }
        // Only this incarnation's own folder and hints: a later run of the
        // id (another incarnation) is never touched.
        let folder = self.layout.incarnation_records(run_id, incarnation);
        let leftovers: Vec<Path> = self
            .store
            .list(Some(&folder))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let hints = RunStatus::ALL
            .iter()
            .map(|&status| self.layout.status_hint(status, run_id, incarnation));
        self.delete_all(leftovers.into_iter().chain(hints).collect())
            .await?;
        Ok(existed)
    }
}
