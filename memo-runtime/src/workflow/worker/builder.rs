//! [`WorkerBuilder`]: which workflows a [`Worker`] drives, and how.

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use super::{
    DEFAULT_POLL_BATCH, DEFAULT_POLL_INTERVAL, DEFAULT_SWEEP_INTERVAL, DEFAULT_WORKER_CONCURRENCY,
    Drive, Driven, Driving, Registry, Worker, WorkerHandle, WorkerInner,
};
use crate::error::Error;
use crate::runtime_store::RunRecord;
use crate::workflow::{Context, Runtime, Workflow};

impl Worker {
    /// A builder over `runtime`: register workflows with
    /// [`WorkerBuilder::workflow`].
    pub fn builder(runtime: Runtime) -> WorkerBuilder {
        WorkerBuilder {
            runtime,
            workflows: HashMap::new(),
            concurrency: DEFAULT_WORKER_CONCURRENCY,
            poll_interval: DEFAULT_POLL_INTERVAL,
            idle_poll_interval: None,
            poll_batch: DEFAULT_POLL_BATCH,
            sweep_interval: Some(DEFAULT_SWEEP_INTERVAL),
            ordered_listings: true,
        }
    }
}

/// Builds a [`Worker`]; see [`Worker::builder`].
#[must_use]
pub struct WorkerBuilder {
    runtime: Runtime,
    workflows: Registry,
    concurrency: usize,
    poll_interval: Duration,
    idle_poll_interval: Option<Duration>,
    poll_batch: usize,
    sweep_interval: Option<Duration>,
    ordered_listings: bool,
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
    /// in [`WakeReport::unknown`](super::WakeReport::unknown) and skipped,
    /// with the reason, by [`Worker::recover`]. Registering a version again
    /// replaces it.
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
            async move {
                run(ctx.clone(), input)
                    .await
                    .map_err(|e| match ctx.stopped_by() {
                        // The runtime stopped the attempt and the run stays
                        // open: its reason, for the worker's report, rather
                        // than the workflow's rendering of it.
                        Some(stop) => Driving::Runtime(stop.into_error(ctx.run_id())),
                        None => Driving::Workflow(e),
                    })
            }
        });
        wrapped.version = workflow.version.clone();
        let drive: Drive = Arc::new(move |runtime: Runtime, record: RunRecord, superseded| {
            let wrapped = wrapped.clone();
            async move {
                match runtime
                    .drive_metered::<I, _>(record, &wrapped, Arc::default(), superseded)
                    .await
                {
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
    /// of it, so that workers started together do not poll together. A run
    /// [submitted](Worker::submit) to this worker starts as soon as one of
    /// its places is free, without a poll, and a signal sent through its
    /// runtime makes it poll as soon as one is.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Lets a spawned worker poll less often while it finds nothing to do:
    /// after each listing of the due-run index that takes no entry, the
    /// wait before the next one doubles, from the
    /// [`poll_interval`](Self::poll_interval) up to `max` (each wait with a
    /// random jitter of up to a quarter of it, which spreads workers
    /// started together); a listing that takes an entry, a run
    /// [submitted](Worker::submit) to the worker, a signal sent through its
    /// runtime, or the end of a run's waking brings it back to the poll
    /// interval. By default, and for a `max` no longer than the poll
    /// interval, a worker lists every poll interval, idle or not.
    ///
    /// What it saves: the one request an idle worker makes, a listing a
    /// poll (billed as a PUT on S3: a worker that lists every second makes
    /// about 2.3 million a month, about $12 at S3 Standard's list price;
    /// BENCHMARKS.md, "An idle fleet", counts them).
    ///
    /// What it costs: an entry another process writes due now while the
    /// worker waits (a signal sent from another process, a run submitted
    /// to a worker that is not spawned, a timer of a run another worker
    /// suspended since, the lease entry of an attempt that died, once it
    /// lapses) is found by the worker's next
    /// listing, up to `max` and its jitter away. Entries the last listing
    /// saw due later are not delayed: the wait never runs past the
    /// earliest of them by more than a poll interval's jitter (nor ends
    /// sooner than a poll interval), so a timer known to the worker fires
    /// as it does without backing off.
    /// Several workers on one store each find such an entry at their next
    /// listing: the first of them to list wakes it.
    pub fn idle_poll_interval(mut self, max: Duration) -> Self {
        self.idle_poll_interval = Some(max);
        self
    }

    /// How many due entries one poll takes at most (default
    /// [`DEFAULT_POLL_BATCH`]; at least 1); a full batch is followed by
    /// another poll at once, which goes on after the last entry taken, so
    /// every due entry gets its turn, whatever the entries before it.
    pub fn poll_batch(mut self, entries: usize) -> Self {
        self.poll_batch = entries.max(1);
        self
    }

    /// Declares that the store does **not** list objects in lexical order
    /// of their paths from an offset, so that a poll reads the due-run
    /// index an hour folder at a time, whole, and sorts each hour itself.
    ///
    /// By default a worker reads the index in the order the store lists it
    /// (from the poll's cursor, up to the first entry not yet due), which
    /// is right for every store memo opens: S3, GCS and Azure list in
    /// order, and so do the [`LocalFolder`](crate::store::LocalFolder) a
    /// `file://` URL opens (from an offset) and `InMemory`. Call this for
    /// a custom [`ObjectStore`](object_store::ObjectStore) whose
    /// `list_with_offset` does not promise that order (`ObjectStore` does
    /// not require it; `object_store`'s own `LocalFileSystem` lists a
    /// folder in the order the file system returns its names): there, an
    /// ordered poll would stop at an entry not yet due and miss the due
    /// ones the store happened to list after it. The cost of a poll
    /// either way is on [`Worker`](super::Worker).
    pub fn unordered_listings(mut self) -> Self {
        self.ordered_listings = false;
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
                idle_poll_interval: self.idle_poll_interval,
                poll_batch: self.poll_batch,
                sweep_interval: self.sweep_interval,
                ordered_listings: self.ordered_listings,
                submitted: Notify::new(),
                loops: AtomicUsize::new(0),
                local: Mutex::new(Vec::new()),
                records: Mutex::new(HashMap::new()),
                cursor: Mutex::new(None),
                waking: Mutex::new(HashSet::new()),
                proved: AtomicBool::new(false),
            }),
        }
    }

    /// The worker, polling in a Tokio task: see [`Worker::spawn`].
    pub fn spawn(self) -> WorkerHandle {
        self.build().spawn()
    }
}
