//! `ObjectStoreRuntimeStore`: the runtime store in object storage, atomic
//! without transactions because every change is one write-once object.
//!
//! Built as `object_store`'s `AmazonS3` is: a public type that holds its
//! settings and passes every call to the part that does the work, here
//! `runs` ([`runs::Runs`]), which owns one component per concern, each in
//! its own file and owning its state:
//!
//! - `client`: the object store, the layout and the seal, which every
//!   other component reads and writes through;
//! - `pointer`: the run pointer and its per-incarnation record;
//! - `log`: a run's log entries, listed, read, folded and appended;
//! - `checkpoint`: bases and deltas, loaded from and written after commits;
//! - `hints`: the status-hint index that listings by status read;
//! - `cache`: the folded runs of this instance, in slots, with no I/O;
//! - `folded`: the folded run the cache holds and the others fill (data).
//!
//! Every path comes from [`crate::layout`].

mod again;
mod cache;
mod checkpoint;
mod client;
mod cost;
mod folded;
mod hints;
mod log;
mod pointer;
#[cfg(test)]
mod records;
mod runs;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;

use super::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunIdPage, RunLimits, RunPage, RunRecord,
    RunStatus, RunSummary, RuntimeStore, StepReceipt,
};
use crate::error::Result;
use crate::layout::Layout;
use crate::meter::Metered;
use crate::run_id::{Incarnation, RunId};
use crate::seal::Seal;
use cache::{Bound, RunCache};
use checkpoint::Checkpointer;
use client::Client;
use hints::HintIndex;
use log::RunLog;
#[cfg(test)]
use pointer::Creation;
use pointer::RunPointer;
use runs::Runs;

/// How many bytes of folded runs an instance keeps in memory, by default:
/// 64 MiB.
pub const DEFAULT_RUN_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// How many log entries a run gets between checkpoint deltas, by default:
/// the largest interval at which a fresh instance reads an open run and its
/// history (`load_run`, then `load_receipts`) in at most 10 requests: the
/// fold's `interval + 4` (the pointer, the delta listing, the delta, its
/// base, the log listing and the `interval - 1` entries after the delta;
/// before the run has a base, its deltas name none and come one entry
/// later, so the fold reads `interval` entries in their place), then 2 to
/// check the cached run is current.
const DEFAULT_CHECKPOINT_INTERVAL: u64 = 4;

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
/// - `runs/<run>/<inc>/run`: the incarnation's record, a copy of its
///   pointer, from which a pointer that a stalled deletion removed is
///   restored.
/// - `runs/<run>/<inc>/log/<position>`: the incarnation's changes after
///   creation, one object per change (a [`Commit`] or an appended input,
///   with the incarnation), at dense positions from 0 written as 20
///   zero-padded digits so they list in order. Each incarnation has its own
///   log folder, so a deleted run's leftovers never mix with a new run's.
/// - `runs/<run>/<inc>/checkpoint/<position>`: a base: the incarnation
///   folded from its log entries before `<position>`, written when enough
///   receipts and inputs came since the previous base (every `2·√items`, at
///   least 32).
/// - `runs/<run>/<inc>/delta/v2/<position>`: a delta: the same, without the
///   receipts and inputs of the base it names, written every few entries
///   (`delta/<position>`, read still, holds every input); when the run
///   ends, one that names no base and holds the whole run. Loading a run
///   reads the newest delta, its base and the log entries after the delta.
///   The log stays complete and authoritative (see the `checkpoint`
///   module); superseded deltas and bases are deleted.
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
/// Deleting a run removes its record and pointer first and its log after,
/// and a writer
/// checks the pointer after every log entry it creates: a worker that cached
/// an incarnation that was deleted meanwhile (its log positions freed again)
/// learns that its change is void instead of writing into a dead run.
///
/// Object stores offer no conditional delete, so a deletion that checked
/// the pointer and then stalled may remove the pointer of a run of the same
/// id created after it checked (when another deletion of the same run
/// finished meanwhile). Such a pointer is never lost: each incarnation keeps
/// a copy of its pointer in its own folder (`runs/<run>/<inc>/run`, written
/// before its creation is acknowledged, deleted first by its deletion), and
/// a missing pointer is restored from it by whoever reads the run next; see
/// the `pointer` module for the argument.
///
/// Objects are named by log position rather than by step sequence because
/// changes made between steps, often by other processes (a cancellation, a
/// signal, a failed attempt), must be ordered with the steps: with one log,
/// "no step after a terminal status" and "one start per attempt" are
/// decided by the same create that commits the change.
///
/// # Costs
///
/// Each instance keeps up to 64 MiB of folded runs in memory
/// ([`with_run_cache_bytes`](Self::with_run_cache_bytes)), the least used
/// first out. In requests:
///
/// - a commit or input to a cached run: one create and a `GET` of the run
///   pointer, but for a step commit of the attempt holding the lease while
///   it is live by the runtime's clock (one create; every 16th reads the
///   pointer: `runs/unchecked.rs` says why); if another writer took the
///   position first, a `GET` of its entry and a catch-up as below, then the
///   create again; a change of status adds the new status's hint (one
///   create) and deletes the old one; every 4th entry
///   ([`with_checkpoint_interval`](Self::with_checkpoint_interval); every
///   5th while the run has no base) and the terminal change add a delta
///   (one create; deltas are kept until the run's deletion); every
///   `2·√items` receipts and inputs (at least 32) a base comes before it
///   (one create), and the base it supersedes is deleted;
/// - a read of a cached run: two `GET`s if it did not change (the next log
///   position, and the run pointer, to check the incarnation still exists;
///   only the pointer if the run is terminal). If it did, other writers may
///   have added one entry or thousands, so it is caught up as a fresh load
///   reads it: the delta listing, the newest delta if it is ahead of the
///   cache (and its base, unless the cache holds the base's receipts), the
///   log listing and the entries after it: at most 9 requests, whatever
///   happened since the run was cached;
/// - any call on a run not in the cache first reads its pointer, lists its
///   deltas (named newest first) and reads the newest and the base it names,
///   then lists the log from there (with an offset) and reads each entry
///   after it: 3 requests for a finished run, at most 8 for an open one,
///   whatever its length (with writers that checkpoint at the same
///   interval: a checkpoint whose write failed leaves a longer tail until
///   the next one). A run with no delta yet (younger than the interval, or
///   written before these deltas) lists its incarnation's folder instead of
///   reading a delta: if that holds no folder of checkpoints, the run is
///   its log; if it does (data written before these deltas), two more
///   listings, of the older deltas and of its bases;
/// - in bytes, a run of `n` steps uploads its log, plus about `n^1.5`
///   receipts' worth of checkpoints (deltas of up to `2·√n` receipts every
///   4 entries, and a whole-run base every `2·√n` receipts): for 1,000
///   steps of 256-byte outputs, 6.4 MB in all against 0.8 MB for its log
///   and one copy of the run;
/// - creating a run: a listing of the id's folder, which answers for a new
///   id (if it holds anything, a `GET` of its pointer and, if that is
///   missing, the listing again, for a pointer a stalled deletion removed
///   and the record it is restored from), three creates (the hint,
///   the pointer and the incarnation's record), a `GET` of the pointer
///   again and a `HEAD` of the hint (which a tidying listing may have taken
///   meanwhile); a `create_run` of an open run that exists: the listing,
///   a read and a `GET` of its record;
/// - listing run ids by status: one listing of that status's hints (a run
///   that left the status may still be listed until a `list_runs` tidies
///   its hint); for `Pending`, also a `GET` of each hinted run's pointer,
///   and the hints of incarnations that are not current (of a creation that
///   stopped before its pointer) are tidied as `list_runs` tidies them;
/// - listing one page of run ids by status
///   ([`list_run_ids_page`](RuntimeStore::list_run_ids_page)): on a store
///   that [lists in order](ObjectStoreRuntimeStore::with_ordered_listings),
///   one listing from the cursor, read as far as the page and one hint past
///   it, whatever the number of runs; on any other, the whole listing of
///   the status's hints after the cursor, of which only the page is kept.
///   For `Pending`, also a `GET` of each kept hint's pointer, tidied as
///   `list_run_ids` tidies them;
/// - listing runs by status: one listing of that status's hints, then a read per
///   hinted run. A run's hint is deleted when it leaves the status, and a
///   listing deletes the hints it finds out of date (unless listings are
///   [read-only](ObjectStoreRuntimeStore::with_read_only_listings)), so the
///   cost follows the runs in that status, not every run ever stored;
/// - reading a run that does not exist: a `GET` of its pointer and a
///   listing of the id's folder;
/// - deleting a run: its load (the pointer's read first), its tombstone
///   (one create), a delete of the incarnation's record, a conditional
///   update that vacates the pointer at the version the load read (read
///   again only if it changed since), the record's delete again (one
///   request each, in that order), one listing of the incarnation's
///   folder, and one
///   [`delete_stream`](object_store::ObjectStore::delete_stream) of all it
///   holds and the run's status hints (on S3 one `DeleteObjects` request
///   per 1,000 objects; a run of 1,000 steps holds about 1,250); only the
///   objects of the incarnation named are touched, and a later run's
///   pointer is never vacated (the update is refused);
///   [`delete_run_at`](RuntimeStore::delete_run_at), a retention pass's
///   deletion, writes its time in the tombstone, and adds a `GET` of the
///   tombstone's time where another deleter created it first, or the run
///   was deleted already;
/// - rechecking a deleted run ([`clear_remains`](RuntimeStore::clear_remains),
///   then [`forget_deleted`](RuntimeStore::forget_deleted) on the same
///   store): a read of the pointer, a listing of the incarnation's folder
///   and one `delete_stream` of what it holds; then the tombstone's delete
///   and, for the vacated pointer that read found, a conditional update at
///   the version read marking it swept, and its delete.
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
/// let store = ObjectStoreRuntimeStore::new(objects.clone(), "runtime");
/// let run_id = RunId::new("order-7")?;
/// let run = NewRun {
///     run_id: run_id.clone(),
///     workflow: "checkout".into(),
///     input: Bytes::from_static(b"{}"),
///     created_at_ms: 0,
///     workflow_version: None,
/// };
/// store.create_run(run).await?;
///
/// // Another process, over the same objects, sees the run.
/// let elsewhere = ObjectStoreRuntimeStore::new(objects, "runtime");
/// assert!(elsewhere.load_run(&run_id).await?.is_some());
/// # Ok(())
/// # }
/// ```
pub struct ObjectStoreRuntimeStore {
    /// Over the store given, counting a workflow attempt's requests for
    /// its cost ledger.
    client: Arc<Client>,
    /// The store it was built over, as [`object_store`](Self::object_store)
    /// hands it out: a store built over it counts each request once.
    given: Arc<dyn ObjectStore>,
    settings: Settings,
    runs: Runs,
}

/// What [`ObjectStoreRuntimeStore::new`] and its `with_*` methods set, from
/// which the components are built (again, at each `with_*`).
#[derive(Debug, Clone, Copy)]
struct Settings {
    cache: Bound,
    checkpoint_interval: u64,
    limits: RunLimits,
    /// Whether `list_runs` deletes the stale status hints it meets.
    tidy_hints: bool,
    /// Whether the store lists in lexical order (see `with_ordered_listings`).
    ordered_listings: bool,
}

/// Names the store by its `Display` (backend, bucket or account and
/// container), never by its `Debug`, which for some backends prints their
/// credentials (an Azure access key, a SAS token).
impl std::fmt::Debug for ObjectStoreRuntimeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStoreRuntimeStore")
            .field("store", &format_args!("{}", self.client.store()))
            .field("prefix", &self.client.layout().prefix().as_ref())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ObjectStoreRuntimeStore {
    /// A runtime store over `store`, keeping everything under `prefix`.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: impl Into<String>) -> ObjectStoreRuntimeStore {
        let client = Client::new(
            Metered::new(Arc::clone(&store)),
            Layout::new(prefix),
            Seal::default(),
        );
        let settings = Settings {
            cache: Bound::Bytes(DEFAULT_RUN_CACHE_BYTES),
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            limits: RunLimits::default(),
            tidy_hints: true,
            ordered_listings: false,
        };
        ObjectStoreRuntimeStore::assemble(client, store, settings)
    }

    /// The store over `client`: each component built from `settings`, with
    /// an empty cache.
    fn assemble(
        client: Client,
        given: Arc<dyn ObjectStore>,
        settings: Settings,
    ) -> ObjectStoreRuntimeStore {
        let client = Arc::new(client);
        let pointer = RunPointer::new(client.clone());
        let mut hints = HintIndex::new(client.clone(), pointer.clone());
        if !settings.tidy_hints {
            hints = hints.read_only();
        }
        if settings.ordered_listings {
            hints = hints.ordered();
        }
        let runs = Runs::new(
            client.clone(),
            pointer,
            RunLog::new(client.clone()),
            Checkpointer::new(client.clone(), settings.checkpoint_interval),
            hints,
            RunCache::new(settings.cache),
            settings.limits,
        );
        ObjectStoreRuntimeStore {
            client,
            given,
            settings,
            runs,
        }
    }

    /// The store with `settings`, over the same client.
    fn with_settings(self, settings: Settings) -> ObjectStoreRuntimeStore {
        ObjectStoreRuntimeStore::assemble(
            Client::clone(&self.client),
            Arc::clone(&self.given),
            settings,
        )
    }

    /// Seals every record and checkpoint it writes with `seal` (default
    /// [`Seal::default`]: compressed above a size, not encrypted), and
    /// reads only what `seal` accepts: give it the seal of the
    /// [`MemoStore`](crate::MemoStore) it runs beside.
    #[must_use]
    pub fn with_seal(self, seal: Seal) -> ObjectStoreRuntimeStore {
        let client = Client::clone(&self.client).sealed(seal);
        ObjectStoreRuntimeStore::assemble(client, Arc::clone(&self.given), self.settings)
    }

    /// Takes what `limits` allow (default [`RunLimits::default`]): values
    /// larger than its maximum are refused with
    /// [`Error::TooLarge`](crate::Error::TooLarge), inputs past its most
    /// pending with [`Error::Conflict`](crate::Error::Conflict), before
    /// anything is written. Runs already stored stay readable whatever the
    /// limits.
    #[must_use]
    pub fn with_limits(self, limits: RunLimits) -> ObjectStoreRuntimeStore {
        let settings = Settings {
            limits,
            ..self.settings
        };
        self.with_settings(settings)
    }

    /// Makes listings read-only: [`list_runs`](RuntimeStore::list_runs)
    /// skips a stale status hint (of a run that left the status, or of a
    /// deleted run) instead of deleting it, so it writes nothing. For an
    /// operator's tool, which must not change the store it inspects; a
    /// worker keeps the default, where a listing deletes the stale hints it
    /// reads so that later listings do not read them again.
    #[must_use]
    pub fn with_read_only_listings(self) -> ObjectStoreRuntimeStore {
        let settings = Settings {
            tidy_hints: false,
            ..self.settings
        };
        self.with_settings(settings)
    }

    /// Declares that the store lists objects in lexical order of their
    /// paths from an offset (`list_with_offset`), as S3, GCS, Azure,
    /// `InMemory` and [`LocalFolder`](crate::store::LocalFolder) do
    /// (`object_store`'s `LocalFileSystem` does not; `ObjectStore` does not
    /// promise it), so that a page of
    /// [`list_run_ids_page`](RuntimeStore::list_run_ids_page) stops its
    /// listing once it has the page and one hint past it: one listing
    /// request and `limit + 1` hints read (more only where one run has
    /// several hints, or `Pending` hints of unborn runs), whatever the
    /// number of runs.
    ///
    /// Without it (the default, right for every store), a page reads the
    /// whole listing of the status's hints after its cursor and keeps only
    /// the `limit + 1` first: memory follows the page, requests and time
    /// the number of hints. On a store that does not list in order, this
    /// declaration makes pages skip and repeat runs.
    #[must_use]
    pub fn with_ordered_listings(self) -> ObjectStoreRuntimeStore {
        let settings = Settings {
            ordered_listings: true,
            ..self.settings
        };
        self.with_settings(settings)
    }

    /// Writes a checkpoint delta of a run every `entries` log entries
    /// (default 4; at least 1), every `entries + 1` while the run has no
    /// base (until the first delta after it holds 32 steps and inputs: a
    /// delta that names no base leaves a load one object fewer to read),
    /// and when it ends.
    ///
    /// A fresh instance loads an open run with at most `entries + 4`
    /// requests, a finished one with 3, whatever their length. Each delta
    /// costs a create (deltas are kept until the run's deletion), and
    /// writes the run without the receipts and inputs of its base (so up
    /// to `2·√n` of a run of `n` steps and inputs, with its snapshot
    /// whole), so such a run writes about `n^1.5 / 2·entries` items' worth
    /// of deltas over its life, and as
    /// much again in bases. Raise it for runs of many thousands of steps
    /// or signals with large outputs or payloads.
    #[must_use]
    pub fn with_checkpoint_interval(self, entries: u64) -> ObjectStoreRuntimeStore {
        let settings = Settings {
            checkpoint_interval: entries.max(1),
            ..self.settings
        };
        self.with_settings(settings)
    }

    /// Keeps about `bytes` of folded runs in memory (default
    /// [`DEFAULT_RUN_CACHE_BYTES`], 64 MiB): each run weighs its payloads
    /// (input, receipts' outputs, inputs, snapshot, output) and a few
    /// hundred bytes more. The budget is split over up to 4 shards, so a
    /// run larger than a quarter of it is read from storage on each call
    /// rather than kept.
    #[must_use]
    pub fn with_run_cache_bytes(self, bytes: u64) -> ObjectStoreRuntimeStore {
        // A new cache rather than a new capacity: the cache sizes its
        // shards for the capacity it is built with.
        let settings = Settings {
            cache: Bound::Bytes(bytes),
            ..self.settings
        };
        self.with_settings(settings)
    }

    /// Keeps at most `runs` runs folded in memory, whatever their size (at
    /// least 1), instead of a budget in bytes
    /// ([`with_run_cache_bytes`](Self::with_run_cache_bytes)): for tests and
    /// for runs known to be small.
    #[must_use]
    pub fn with_cached_runs(self, runs: usize) -> ObjectStoreRuntimeStore {
        let settings = Settings {
            cache: Bound::Runs(runs),
            ..self.settings
        };
        self.with_settings(settings)
    }

    /// The object store the records live in.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.given
    }

    /// How its records and checkpoints are sealed.
    pub fn seal(&self) -> &Seal {
        self.client.seal()
    }

    /// The path prefix everything is kept under.
    pub fn prefix(&self) -> &Path {
        self.client.layout().prefix()
    }

    /// `<prefix>/runs/<run>`: every runtime record of a run id, of every
    /// incarnation.
    pub fn run_folder(&self, run_id: &RunId) -> Path {
        self.client.layout().runs_folder(run_id)
    }

    /// The objects that hold the run `record` is, as it stands: its run
    /// pointer, every object of its incarnation's folder (its record, log,
    /// checkpoints and deltas: its receipts, inputs and signals) and the
    /// status hint of its status. For a tool that copies runs whole to
    /// another store (`memoctl export`): copied under another prefix at the
    /// same relative paths, they read there as the same run. Listed in one
    /// pass: a run that commits meanwhile may be copied as it stood before
    /// its latest commits.
    ///
    /// # Errors
    ///
    /// A store error listing the incarnation's folder.
    pub async fn list_run_objects(&self, record: &RunRecord) -> Result<Vec<Path>> {
        let (run_id, incarnation) = (&record.run_id, record.incarnation);
        let folder = self
            .client
            .layout()
            .incarnation_records(run_id, incarnation);
        let listed = self.client.list(&folder).await?;
        let mut paths: Vec<Path> = listed.into_iter().map(|meta| meta.location).collect();
        paths.sort();
        paths.push(self.client.layout().run_pointer(run_id));
        let status = record.status.path_segment();
        paths.push(
            self.client
                .layout()
                .status_hint(status, run_id, incarnation),
        );
        Ok(paths)
    }
}

// Every call is the runs' (`Runs`, in `runs/`): this type builds them and
// adds the accessors, as `object_store`'s `AmazonS3` does over its client.
#[async_trait]
impl RuntimeStore for ObjectStoreRuntimeStore {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        self.runs.create_run(run).await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.runs.load_run(run_id).await
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        self.runs.atomic_apply(run_id, commit).await
    }

    fn use_clock(&self, clock: Arc<dyn crate::clock::Clock>) {
        self.runs.use_clock(clock);
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        self.runs.load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        self.runs.load_snapshot(run_id).await
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        self.runs.append_input(run_id, input).await
    }

    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>)> {
        self.runs.append_input_and_load(run_id, input).await
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        self.runs.load_inputs(run_id).await
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        self.runs.load_receipts_and_inputs(run_id).await
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        self.runs.atomic_apply_and_load(run_id, commit).await
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        self.runs.list_runs(status).await
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        self.runs.list_run_ids(status).await
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        self.runs.list_run_ids_page(status, after, limit).await
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        self.runs.list_runs_page(status, after, limit).await
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.runs.delete_run(run_id, incarnation).await
    }

    async fn delete_run_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> Result<super::RunDeletion> {
        self.runs.delete_run_at(run_id, incarnation, at_ms).await
    }

    async fn holds_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.runs.holds_remains(run_id, incarnation).await
    }

    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<bool>> {
        self.runs.holds_deletion(run_id, incarnation).await
    }

    async fn forget_deleted(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        self.runs.forget_deleted(run_id, incarnation).await
    }

    async fn clear_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.runs.clear_remains(run_id, incarnation).await
    }

    async fn forget_deleted_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<()>> {
        self.runs.forget_deleted_all(deleted).await
    }

    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: u64,
    ) -> Vec<Result<()>> {
        self.runs.forget_deleted_all_at(deleted, at_ms).await
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> Result<()> {
        self.write_attempt_cost(run_id, incarnation, cost).await
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        self.read_attempt_costs(run_id, incarnation).await
    }
}
