//! A worker loop: starts submitted runs, wakes due runs from the due-run
//! index, takes over runs whose attempt crashed once its lease expired, and
//! sweeps, with no server: several workers on one store share the work, and
//! the runs' leases decide which of them drives a run.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, watch};

use super::due::{self, DueRun};
use super::recovery::{Pick, Recovery};
use super::{Context, Runtime, Workflow};
use crate::codec;
use crate::error::{Error, Result};
use crate::retention::SweeperHandle;
use crate::run_id::{Incarnation, RunId};
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
type Drive = Arc<dyn Fn(Runtime, RunRecord) -> BoxFuture<'static, Driven> + Send + Sync>;

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
/// A poll ([`wake_due`](Worker::wake_due)) lists the due-run index up to
/// now: one delimiter listing of its hour folders (a request per 1,000
/// hours that hold entries), a listing of each hour that holds due entries
/// and of the current hour (a request per 1,000 entries), then, for each
/// due run (at most [`poll_batch`](WorkerBuilder::poll_batch) entries per
/// poll), a load of its record and what waking it costs: nothing more for a
/// run that ended or is not due (the entry is deleted), a create and a
/// delete for a run another attempt holds (its entry moves to the lease's
/// expiry), and an attempt for a run that is due. With no run due, a poll
/// costs one listing request (plus one per hour of the current hour's
/// entries), whatever the number of runs stored.
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
    poll_batch: usize,
    sweep_interval: Option<Duration>,
    /// Wakes the spawned loop at once (a run was submitted).
    submitted: Notify,
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

/// Builds a [`Worker`]; see [`Worker::builder`].
#[must_use]
pub struct WorkerBuilder {
    runtime: Runtime,
    workflows: Registry,
    concurrency: usize,
    poll_interval: Duration,
    poll_batch: usize,
    sweep_interval: Option<Duration>,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("workflows", &self.workflows.len())
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// Runs of `workflow` are this worker's to start, wake and recover. A
    /// run of a workflow no worker registered is left alone (its due
    /// entries stay for a worker that knows it; each poll loads it again).
    ///
    /// Register each [version](Workflow::with_version) of a workflow that
    /// still has open runs: each run is driven by the version it started
    /// on, and a run whose version is not registered is left open, counted
    /// in [`WakeReport::unknown`] and skipped, with the reason, by
    /// [`Worker::recover`]. Registering a version again replaces it.
    pub fn workflow<I, O, E, F, Fut>(mut self, workflow: &Workflow<F>) -> Self
    where
        I: Serialize + DeserializeOwned + Send + 'static,
        O: Serialize + DeserializeOwned + Send + 'static,
        E: From<Error> + Display + Send + 'static,
        F: Fn(Context, I) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        let run = workflow.run.clone();
        let mut wrapped = Workflow::new(workflow.name.clone(), move |ctx: Context, input: I| {
            let run = run.clone();
            async move { run(ctx, input).await.map_err(Driving::Workflow) }
        });
        wrapped.version = workflow.version.clone();
        let drive: Drive = Arc::new(move |runtime: Runtime, record: RunRecord| {
            let wrapped = wrapped.clone();
            async move {
                match runtime.drive::<I, _>(record, &wrapped).await {
                    Ok(_) | Err(Driving::Workflow(_)) => Driven::Ran,
                    Err(Driving::Runtime(e)) => Driven::Runtime(e),
                }
            }
            .boxed()
        });
        self.workflows
            .entry(workflow.name.to_string())
            .or_default()
            .insert(workflow.version().map(str::to_string), drive);
        self
    }

    /// How many runs the worker drives at once (default
    /// [`DEFAULT_WORKER_CONCURRENCY`]; at least 1).
    pub fn concurrency(mut self, runs: usize) -> Self {
        self.concurrency = runs.max(1);
        self
    }

    /// How often a spawned worker polls the due-run index (default
    /// [`DEFAULT_POLL_INTERVAL`]), plus a random jitter of up to a quarter
    /// of it, so that workers started together do not poll together. A
    /// [`submit`](Worker::submit) to this worker polls at once.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// How many due entries one poll takes at most (default
    /// [`DEFAULT_POLL_BATCH`]; at least 1); a full batch is followed by
    /// another poll at once.
    pub fn poll_batch(mut self, entries: usize) -> Self {
        self.poll_batch = entries.max(1);
        self
    }

    /// How often a spawned worker runs the runtime's retention sweeper
    /// ([`Runtime::retention_sweeper`]); `None` runs none (default
    /// [`DEFAULT_SWEEP_INTERVAL`]).
    pub fn sweep_interval(mut self, interval: Option<Duration>) -> Self {
        self.sweep_interval = interval;
        self
    }

    /// The worker, not yet polling: call [`Worker::wake_due`] yourself, or
    /// [`Worker::spawn`].
    pub fn build(self) -> Worker {
        Worker {
            inner: Arc::new(WorkerInner {
                runtime: self.runtime,
                workflows: self.workflows,
                concurrency: self.concurrency,
                poll_interval: self.poll_interval,
                poll_batch: self.poll_batch,
                sweep_interval: self.sweep_interval,
                submitted: Notify::new(),
            }),
        }
    }

    /// The worker, polling in a Tokio task: see [`Worker::spawn`].
    pub fn spawn(self) -> WorkerHandle {
        self.build().spawn()
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
    /// Runs another attempt holds: their entry moved to the lease's expiry.
    pub busy: usize,
    /// Runs of workflows (or versions of a workflow) this worker does not
    /// register: left open, for a worker that does.
    pub unknown: usize,
    /// Runs that could not be woken now (a store error), with the error;
    /// their entries stay, so the next poll tries again.
    pub failed: Vec<(RunId, Error)>,
}

impl WakeReport {
    fn add(&mut self, other: WakeReport) {
        self.entries += other.entries;
        self.resumed += other.resumed;
        self.waiting += other.waiting;
        self.stale += other.stale;
        self.busy += other.busy;
        self.unknown += other.unknown;
        self.failed.extend(other.failed);
    }
}

/// How waking one run went.
enum Woke {
    Resumed,
    Waiting,
    Stale,
    Busy,
    Unknown,
    Failed(RunId, Error),
}

impl Worker {
    /// A builder over `runtime`: register workflows with
    /// [`WorkerBuilder::workflow`].
    pub fn builder(runtime: Runtime) -> WorkerBuilder {
        WorkerBuilder {
            runtime,
            workflows: HashMap::new(),
            concurrency: DEFAULT_WORKER_CONCURRENCY,
            poll_interval: DEFAULT_POLL_INTERVAL,
            poll_batch: DEFAULT_POLL_BATCH,
            sweep_interval: Some(DEFAULT_SWEEP_INTERVAL),
        }
    }

    /// The runtime the worker drives runs with.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// Creates run `run_id` of `workflow` with `input` (or finds it created
    /// before with the same input) and makes it due now, for whichever
    /// worker on the store polls first; a spawned worker of this process
    /// polls at once.
    ///
    /// Durable once it returns: if this process dies, another worker starts
    /// the run. Submitting again is harmless, so a caller that saw this fail
    /// submits again.
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
            let entry = DueRun {
                due_at_ms: shared.clock.now_ms(),
                run_id: run_id.clone(),
                incarnation: record.incarnation,
            };
            due::write(&shared.memo, &entry).await?;
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
                match drive(runtime.clone(), record).await {
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
        let mut registered: Vec<_> = versions
            .keys()
            .map(|v| super::describe_version(v.as_deref()))
            .collect();
        registered.sort();
        Err(Pick::Unregistered(Error::Conflict {
            what: format!("run {}", record.run_id),
            reason: format!(
                "it started on {} of workflow {:?}, which this worker does not register \
                 (it registers {}); a worker that registers that version continues it",
                super::describe_version(record.workflow_version.as_deref()),
                record.workflow,
                registered.join(", ")
            ),
        }))
    }

    /// Wakes the runs due now by the runtime's clock (at most a
    /// [`poll_batch`](WorkerBuilder::poll_batch) of entries, at most
    /// [`concurrency`](WorkerBuilder::concurrency) runs at once) and waits
    /// for their attempts: what one poll of a spawned worker does. See
    /// [`Worker`] for what it costs.
    ///
    /// A run with a live lease is not driven (its entry moves to the lease's
    /// expiry); a run that is not due after all (ended, its timer not yet
    /// due, its signal not there) is left as it is, writing nothing to it;
    /// every other due run gets one attempt, which continues it past what
    /// it waited for, or takes over a crashed attempt's run.
    ///
    /// # Errors
    ///
    /// A failed listing of the index; each run's own outcome is in the
    /// report.
    pub async fn wake_due(&self) -> Result<WakeReport> {
        let runtime = &self.inner.runtime;
        let now = runtime.shared.clock.now_ms();
        let entries: Vec<DueRun> = due::due_at(&runtime.shared.memo, now)
            .take(self.inner.poll_batch)
            .try_collect()
            .await?;
        let mut report = WakeReport {
            entries: entries.len(),
            ..WakeReport::default()
        };
        // A run due for several reasons is woken once.
        let mut runs: BTreeMap<(RunId, Incarnation), Vec<DueRun>> = BTreeMap::new();
        for entry in entries {
            let key = (entry.run_id.clone(), entry.incarnation);
            runs.entry(key).or_default().push(entry);
        }
        let woken: Vec<Woke> = futures::stream::iter(runs.into_values())
            .map(|entries| self.wake_run(entries))
            .buffer_unordered(self.inner.concurrency)
            .collect()
            .await;
        for woke in woken {
            match woke {
                Woke::Resumed => report.resumed += 1,
                Woke::Waiting => report.waiting += 1,
                Woke::Stale => report.stale += 1,
                Woke::Busy => report.busy += 1,
                Woke::Unknown => report.unknown += 1,
                Woke::Failed(run_id, e) => report.failed.push((run_id, e)),
            }
        }
        Ok(report)
    }

    /// Wakes the run that `entries` (all of one run incarnation) name, and
    /// deletes them once the run moved on.
    async fn wake_run(&self, entries: Vec<DueRun>) -> Woke {
        let runtime = &self.inner.runtime;
        let shared = &runtime.shared;
        let first = entries[0].clone();
        let record = match shared.store.load_run(&first.run_id).await {
            Ok(record) => record,
            Err(e) => return Woke::Failed(first.run_id, e),
        };
        let Some(record) =
            record.filter(|r| r.incarnation == first.incarnation && !r.status.is_terminal())
        else {
            self.forget(&entries).await;
            return Woke::Stale;
        };
        let drive = match self.registered(&record) {
            Ok(drive) => drive,
            Err(Pick::Unregistered(why)) => {
                tracing::warn!(run_id = %record.run_id, reason = %why, "due run not woken");
                return Woke::Unknown;
            }
            Err(_) => return Woke::Unknown,
        };
        let now = shared.clock.now_ms();
        if let Some(lease) = record.lease.as_ref().filter(|l| l.is_live_at(now)) {
            let later = DueRun {
                due_at_ms: lease.until_ms,
                ..first.clone()
            };
            if let Err(e) = due::write(&shared.memo, &later).await {
                return Woke::Failed(first.run_id, e);
            }
            self.forget(&entries).await;
            return Woke::Busy;
        }
        let woke = match drive(runtime.clone(), record).await {
            Driven::Ran => Woke::Resumed,
            // Not woken: the entries stay for the next poll.
            Driven::Runtime(e @ Error::Store { .. }) => return Woke::Failed(first.run_id, e),
            Driven::Runtime(Error::Suspended { until_ms, .. }) => {
                if let Some(due_at_ms) = until_ms {
                    // Written by the attempt that suspended, unless it
                    // crashed first: written again, create-once.
                    let timer = DueRun {
                        due_at_ms,
                        ..first.clone()
                    };
                    if let Err(e) = due::write(&shared.memo, &timer).await {
                        return Woke::Failed(first.run_id, e);
                    }
                    // By another clock, the timer may be an entry woken now.
                    let others: Vec<_> = entries.into_iter().filter(|e| *e != timer).collect();
                    self.forget(&others).await;
                    return Woke::Waiting;
                }
                Woke::Waiting
            }
            Driven::Runtime(Error::LeaseHeld { .. }) => Woke::Busy,
            Driven::Runtime(e) => {
                tracing::debug!(run_id = %first.run_id, error = %e, "a due run ended its attempt");
                Woke::Resumed
            }
        };
        self.forget(&entries).await;
        woke
    }

    /// Deletes `entries`, best effort: an entry left behind is woken again,
    /// harmlessly.
    async fn forget(&self, entries: &[DueRun]) {
        for entry in entries {
            if let Err(e) = due::delete(&self.inner.runtime.shared.memo, entry).await {
                tracing::debug!(run_id = %entry.run_id, error = %e, "due-run entry not deleted");
            }
        }
    }

    /// Polls in a Tokio task until [`WorkerHandle::shutdown`]: wakes the
    /// due runs every [`poll_interval`](WorkerBuilder::poll_interval) (with
    /// jitter), at once after a [`submit`](Worker::submit), and runs the
    /// retention sweeper every
    /// [`sweep_interval`](WorkerBuilder::sweep_interval).
    ///
    /// Dropping the handle detaches the task: it polls until the Tokio
    /// runtime shuts down.
    pub fn spawn(&self) -> WorkerHandle {
        let (stop, stop_rx) = watch::channel(false);
        let sweeper = self
            .inner
            .sweep_interval
            .map(|interval| self.inner.runtime.retention_sweeper().spawn(interval));
        let detached = stop.clone();
        let worker = self.clone();
        let task = tokio::spawn(async move {
            let report = worker.poll_until_stopped(stop_rx).await;
            drop(detached);
            report
        });
        WorkerHandle {
            worker: self.clone(),
            stop,
            task,
            sweeper,
        }
    }

    async fn poll_until_stopped(&self, mut stop: watch::Receiver<bool>) -> WakeReport {
        let mut total = WakeReport::default();
        while !*stop.borrow_and_update() {
            let full = match self.wake_due().await {
                Ok(report) => {
                    let full = report.entries >= self.inner.poll_batch;
                    for (run_id, e) in &report.failed {
                        tracing::warn!(%run_id, error = %e, "due run not woken; the next poll tries again");
                    }
                    total.add(report);
                    full
                }
                Err(e) => {
                    tracing::warn!(error = %e, "due-run index not listed");
                    false
                }
            };
            if full {
                continue;
            }
            let interval = self.inner.poll_interval;
            let jitter = interval.mul_f64((crate::run_id::unique_token() % 1024) as f64 / 4096.0);
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                () = self.inner.submitted.notified() => {}
                () = tokio::time::sleep(interval + jitter) => {}
            }
        }
        total
    }
}

/// A spawned [`Worker`]; stop it with [`shutdown`](WorkerHandle::shutdown).
#[derive(Debug)]
pub struct WorkerHandle {
    worker: Worker,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<WakeReport>,
    sweeper: Option<SweeperHandle>,
}

impl WorkerHandle {
    /// The worker, to [`submit`](Worker::submit) runs to.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// Stops the worker gracefully: it takes no more work, and the
    /// attempts it is running stop at their next step boundary or wait
    /// (their runs stay open, their leases released, their due entries in
    /// the index), within `deadline`. An attempt still running then is
    /// dropped where it is, as if its process had died: its lease expires
    /// and another worker takes its run over. Returns what the worker's
    /// polls did.
    ///
    /// While it stops, every attempt of the worker's
    /// [`Runtime`] (and of its clones) stops at its next step boundary:
    /// give a worker a runtime of its own.
    pub async fn shutdown(mut self, deadline: Duration) -> WakeReport {
        let _ = self.stop.send(true);
        let shared = &self.worker.inner.runtime.shared;
        shared.draining.store(true, Ordering::Release);
        let report = match tokio::time::timeout(deadline, &mut self.task).await {
            Ok(Ok(report)) => report,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "the worker's task failed");
                WakeReport::default()
            }
            Err(_) => {
                self.task.abort();
                tracing::warn!(
                    "the worker did not stop within its deadline; its attempts were dropped"
                );
                WakeReport::default()
            }
        };
        if let Some(sweeper) = self.sweeper.take() {
            sweeper.shutdown().await;
        }
        shared.draining.store(false, Ordering::Release);
        report
    }
}
