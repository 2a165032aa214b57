//! A worker loop: starts submitted runs, wakes due runs from the due-run
//! index, takes over runs whose attempt crashed once its lease expired, and
//! sweeps, with no server: several workers on one store share the work, and
//! the runs' leases decide which of them drives a run.

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use object_store::path::Path;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

mod builder;
mod handle;
mod spawned;
mod wake;

pub use builder::WorkerBuilder;
#[cfg(any(test, feature = "testing"))]
pub(crate) use handle::Polling;
pub use handle::WorkerHandle;

use super::due::{self, DueRun};
use super::recovery::{Pick, Recovery};
use super::{Context, Runtime, Workflow};
use crate::codec;
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::runtime_store::{NewRun, RunRecord};

/// How often a spawned [`Worker`] polls the due-run index, by default: 1 s.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How many due-run entries one poll takes at most, by default.
pub const DEFAULT_POLL_BATCH: usize = 256;

/// How many runs a worker drives at once, by default.
pub const DEFAULT_WORKER_CONCURRENCY: usize = 8;

/// How often a spawned worker's retention sweeper runs, by default: 1 hour.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// Drives one run of a registered workflow: what the worker keeps of it,
/// its types erased.
/// The entries it gets are those a submit to the spawned loop wrote, which
/// the attempt replaces (see `Runtime::drive_metered`).
type Drive =
    Arc<dyn Fn(Runtime, RunRecord, Vec<DueRun>) -> BoxFuture<'static, Driven> + Send + Sync>;

/// The registered workflows: by name, then by version (`None`: the
/// unversioned workflow).
type Registry = HashMap<String, HashMap<Option<String>, Drive>>;

/// How driving a run ended, as the index needs to know it.
enum Driven {
    /// An attempt ran (the workflow's own error, if it returned one).
    Ran,
    /// The runtime stopped before or after the workflow ran.
    Runtime(Error),
}

/// A workflow's error or the runtime's, kept apart so that a worker tells a
/// store fault before an attempt (the run must be woken again) from the
/// workflow's own outcome.
enum Driving<E> {
    Runtime(Error),
    Workflow(E),
}

impl<E> From<Error> for Driving<E> {
    fn from(e: Error) -> Self {
        Driving::Runtime(e)
    }
}

impl<E: Display> Display for Driving<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Driving::Runtime(e) => e.fmt(f),
            Driving::Workflow(e) => e.fmt(f),
        }
    }
}

/// Starts, wakes and recovers the runs of its workflows; see
/// [`Worker::builder`].
///
/// Cheap to clone. Build one per process (or several: they share the work
/// as separate processes do), [`spawn`](WorkerBuilder::spawn) it, hand it
/// runs with [`submit`](Worker::submit), and stop it with
/// [`WorkerHandle::shutdown`].
///
/// # What a poll costs
///
/// A poll ([`wake_due`](Worker::wake_due)) first takes the runs submitted
/// to this worker's spawned loop (no request: see [`submit`](Worker::submit)),
/// then lists the due-run index up to
/// now, from where the last full poll stopped, and takes at most
/// [`poll_batch`](WorkerBuilder::poll_batch) entries. By default it reads
/// the index in the store's order and stops at the first entry not yet
/// due: **one listing request per 1,000 due entries read** (one request
/// when none is due; one more when it wraps from its cursor to the
/// earliest entries), whatever the number of runs stored or waiting for
/// later, in this hour or any other. That needs a store that lists in
/// lexical order from an offset, as every store memo opens does (S3, GCS,
/// Azure, a [`LocalFolder`](crate::store::LocalFolder), `InMemory`); on a
/// custom store that does not, declare it with
/// [`unordered_listings`](WorkerBuilder::unordered_listings), and a poll
/// is one delimiter listing of the index's hour folders (a request per
/// 1,000 hours that hold entries) and a listing of each hour that holds
/// due entries and of the current hour, whose entries not yet due are
/// listed too (a request per 1,000 of them). Then, for each due run, a
/// load of its record (none for a run submitted to this loop and due for
/// nothing else: it is driven on the record its submit's creation
/// returned, as [`Runtime::run`] drives a run) and what waking it costs:
/// a create of its terminal marker (found there, as a rule) and a delete
/// of the entry for a run that ended, nothing more for a run that is not
/// due, a create and a delete for a run another attempt holds (its entry
/// moves to the lease's expiry), and an attempt for a run that is due.
///
/// So a spawned worker with nothing to do makes one request a
/// [`poll_interval`](WorkerBuilder::poll_interval), its listing;
/// [`idle_poll_interval`](WorkerBuilder::idle_poll_interval) lets it list
/// less often while it stays idle.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use memo_runtime::{Error, MemoStore, RunId, clock::ManualClock, runtime_store::InMemoryRuntimeStore};
/// use memo_runtime::object_store::memory::InMemory;
/// use memo_runtime::runtime_store::RunStatus;
/// use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
///
/// let clock = Arc::new(ManualClock::new(0));
/// let runtime = Runtime::builder()
///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
///     .clock(clock.clone())
///     .build()?;
/// let remind = Workflow::new("remind", |ctx: Context, who: String| async move {
///     ctx.sleep(Duration::from_secs(24 * 3600)).await?;
///     Ok::<_, Error>(format!("reminded {who}"))
/// });
/// let worker = Worker::builder(runtime.clone()).workflow(&remind).build();
/// let run = RunId::new("remind-ada")?;
/// worker.submit(&remind, &run, &"ada".to_string()).await?;
///
/// worker.wake_due().await?; // starts the run, which sleeps for a day
/// assert_eq!(runtime.status(&run).await?.unwrap().status, RunStatus::Running);
/// clock.advance_ms(24 * 3600 * 1000);
/// let report = worker.wake_due().await?; // the timer is due: the run goes on
/// assert_eq!(report.resumed, 1);
/// assert_eq!(runtime.status(&run).await?.unwrap().status, RunStatus::Completed);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Worker {
    inner: Arc<WorkerInner>,
}

struct WorkerInner {
    runtime: Runtime,
    workflows: Registry,
    concurrency: usize,
    poll_interval: Duration,
    /// How long an idle spawned loop waits between listings at most
    /// ([`WorkerBuilder::idle_poll_interval`]); `None`: the poll interval.
    idle_poll_interval: Option<Duration>,
    poll_batch: usize,
    sweep_interval: Option<Duration>,
    ordered_listings: bool,
    /// Wakes the spawned loop at once (a run was submitted).
    submitted: Notify,
    /// How many loops of this worker are spawned and polling: while one
    /// is, a run submitted is this worker's to start ([`Worker::submit`]).
    loops: AtomicUsize,
    /// The entries of the runs submitted to the spawned loop and not yet
    /// taken by a poll: it wakes them without reading the index, where
    /// they are due only once a lease has run from their submit.
    local: Mutex<Vec<DueRun>>,
    /// The record each of those runs' creation returned to its submit,
    /// until a poll takes it: a run due for nothing else is driven on it,
    /// as [`Runtime::run`] drives the run it created, without a load
    /// (`wake::Worker::wake_run`).
    records: Mutex<HashMap<wake::RunKey, RunRecord>>,
    /// The key of the last entry the last full poll took: the next poll
    /// goes on after it, so that entries this worker cannot wake (a
    /// workflow it does not know, a run that fails to load) never keep it
    /// from the ones after them. `None` starts at the earliest due entry.
    cursor: Mutex<Option<Path>>,
    /// The runs a poll of this worker (or its spawned loop) has taken and
    /// not yet woken to the end: other polls skip them (`wake::Claim`).
    waking: Mutex<HashSet<wake::RunKey>>,
    /// Whether the runtime store is proved to be the one the due runs
    /// were created in: it held a woken run with its entry's incarnation
    /// (incarnations are drawn at random, so a store at another prefix
    /// holds none). Until then an entry whose run the store does not hold
    /// is kept, never deleted (the retention sweeper keeps the same rule:
    /// `retention/sweeper/proof.rs`).
    proved: AtomicBool,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.inner.workflows.keys().collect();
        names.sort();
        f.debug_struct("Worker")
            .field("workflows", &names)
            .field("concurrency", &self.inner.concurrency)
            .field("poll_interval", &self.inner.poll_interval)
            .finish_non_exhaustive()
    }
}

/// What one [`Worker::wake_due`] did, by due run.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct WakeReport {
    /// Due entries read from the index.
    pub entries: usize,
    /// Runs an attempt was started for (or that ended at once).
    pub resumed: usize,
    /// Runs still waiting (a timer not yet due, a signal not yet sent).
    pub waiting: usize,
    /// Entries of runs that ended, were deleted or are another incarnation.
    pub stale: usize,
    /// Runs whose runtime store holds no run of their id, their entries
    /// kept: the store is not proved to be the one the runs were created
    /// in (no run this worker woke was found there with its entry's
    /// incarnation), as a worker's store at a mistyped runtime-store
    /// prefix never is. Once it is proved, such entries count as
    /// [`stale`](Self::stale) and are deleted.
    pub not_held: usize,
    /// Runs another attempt holds: their entry moved to the lease's expiry.
    pub busy: usize,
    /// Runs of workflows (or versions of a workflow) this worker does not
    /// register: left open, for a worker that does.
    pub unknown: usize,
    /// Runs that could not be woken now (a store error), with the error;
    /// their entries stay, so the next poll tries again.
    pub failed: Vec<(RunId, Error)>,
    /// Of the runs [`resumed`](Self::resumed), those whose attempt stopped
    /// on a runtime error that leaves the run open (a non-determinism, as
    /// a worker still on the old code meets in a rolling deploy; a lost
    /// lease; a panic in the workflow), with the error: an
    /// [`Error::Aborted`] whose `cause` is the kind of the runtime error
    /// that stopped the attempt ([`ErrorKind::CodeChanged`](crate::ErrorKind::CodeChanged)
    /// for a non-determinism; `None` for a panic). Its wake-up at that
    /// attempt's lease expiry stays, so the run is tried again then.
    pub stopped: Vec<(RunId, Error)>,
}

impl Worker {
    /// The runtime the worker drives runs with.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// Creates run `run_id` of `workflow` with `input` (or finds it created
    /// before with the same input) and makes it due.
    ///
    /// Submitted to a [spawned](Worker::spawn) worker, the run is that
    /// worker's to start: its loop wakes it at once, without reading the
    /// index, and the run's entry in the index is due for the other workers
    /// on the store only once the runtime's lease has run from now (as if
    /// this worker's attempt had started and crashed at once); the attempt
    /// keeps it as its own lease entry (it starts before the entry is due,
    /// as a rule), or deletes it once its own is written. So the other workers
    /// do not each load the run, find it held and move its entry while it
    /// runs (with N workers polling, that was O(N) requests a run).
    /// Submitted to a worker that is not spawned (a process that only
    /// submits, or one that calls [`wake_due`](Worker::wake_due) itself),
    /// the run is due now, for whichever worker on the store polls first.
    ///
    /// Durable once it returns: if this process dies, another worker starts
    /// the run (within a lease, after a submit to a spawned worker).
    /// Submitting again is harmless, so a caller that saw this fail submits
    /// again.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] if the run exists with another workflow or
    /// input; a store error.
    pub async fn submit<I, O, E, F, Fut>(
        &self,
        workflow: &Workflow<F>,
        run_id: &RunId,
        input: &I,
    ) -> Result<()>
    where
        I: Serialize + DeserializeOwned,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        let runtime = &self.inner.runtime;
        runtime.check_conditional_create().await?;
        let shared = &runtime.shared;
        let new_run = NewRun {
            run_id: run_id.clone(),
            workflow: workflow.name.to_string(),
            input: codec::encode_value("the workflow input", input)?,
            created_at_ms: shared.clock.now_ms(),
            workflow_version: workflow.version().map(str::to_string),
        };
        let record = runtime.create_run(new_run, input).await?;
        if !record.status.is_terminal() {
            let spawned = self.inner.loops.load(Ordering::Acquire) > 0;
            let now = shared.clock.now_ms();
            let due_at_ms = if spawned {
                now.saturating_add(shared.lease_ms())
            } else {
                now
            };
            let entry = DueRun::new(due_at_ms, run_id.clone(), record.incarnation);
            due::write(&shared.memo, &entry).await?;
            if spawned {
                let key = (run_id.clone(), record.incarnation);
                self.records().insert(key, record);
                self.local().push(entry);
            }
        }
        self.inner.submitted.notify_one();
        Ok(())
    }

    /// Resumes every open run of the registered workflows, each on the
    /// version it started on, and writes the missing terminal markers:
    /// [`Runtime::recover`] for every registered workflow and version at
    /// once. Call it at start-up.
    ///
    /// A run of a registered workflow whose version this worker does not
    /// register is left open and reported in [`Recovery::skipped`], with
    /// an [`Error::Conflict`] that names its version. Each resumed run's
    /// entry in [`Recovery::resumed`] is `Ok(())` once an attempt ran
    /// (whatever the workflow returned: the run's record holds that), or
    /// the runtime's error that stopped it.
    ///
    /// # Errors
    ///
    /// A failed listing; each run's own outcome is in the [`Recovery`].
    pub async fn recover(&self) -> Result<Recovery<(), Error>> {
        let runtime = &self.inner.runtime;
        runtime.check_conditional_create().await?;
        let mut plan = runtime
            .plan_recovery(|record| match self.registered(record) {
                Ok(_) => Pick::Drive,
                Err(unregistered) => unregistered,
            })
            .await?;
        let runs = std::mem::take(&mut plan.open);
        let resumed = runtime
            .resume_each(runs, |record| async move {
                let run_id = record.run_id.clone();
                let Ok(drive) = self.registered(&record) else {
                    unreachable!("the plan holds registered runs only");
                };
                match drive(runtime.clone(), record, Vec::new()).await {
                    Driven::Ran => (run_id, Ok(())),
                    Driven::Runtime(e) => (run_id, Err(e)),
                }
            })
            .await;
        Ok(plan.into_recovery(resumed))
    }

    /// What drives `record`'s run here, or why nothing does: its workflow
    /// is not registered ([`Pick::Other`]), or not on its version.
    fn registered(&self, record: &RunRecord) -> std::result::Result<Drive, Pick> {
        let Some(versions) = self.inner.workflows.get(&record.workflow) else {
            return Err(Pick::Other);
        };
        if let Some(drive) = versions.get(&record.workflow_version) {
            return Ok(Arc::clone(drive));
        }
        let mut registered: Vec<_> = versions.keys().cloned().collect();
        registered.sort();
        Err(Pick::Unregistered(Error::VersionNotRegistered {
            run_id: record.run_id.to_string(),
            workflow: record.workflow.clone(),
            version: record.workflow_version.clone(),
            registered,
        }))
    }
}
