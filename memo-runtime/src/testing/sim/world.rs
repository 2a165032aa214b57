//! One simulated history: the workers, the scheduler that polls their tasks
//! in a seed-chosen order, the random events, and the final checks.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::checker::{self, Checker, TaskKind, as_task};
use super::compat::{self, ErrorKind, PREFIX, classify, fresh_run};
use super::folder::Folder;
use super::loops::{self, Loops, ObservedCancels};
use super::operator::{self, Visit};
use super::plant::{self, Foreign, Kind};
use super::reader::CachedReader;
use super::stores::Shared;
use super::stores::{Audited, Preemptible};
use super::{Config, Event, History, Ledger, RunOutcome, Simulation, Violation};
use crate::clock::{Clock, ManualClock};
use crate::memo::MemoStore;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{ObjectStoreRuntimeStore, RunRecord, RunStatus};
use crate::testing::{
    CaseFoldingStore, FaultInjectingStore, FaultRule, NameLimitedStore, RequestKind,
};
use crate::workflow::{RetryPolicy, Runtime, Workflow, WorkflowFn};

#[path = "deploy.rs"]
mod deploy;

/// How far tokio's paused clock moves per scheduler step (for the
/// runtime's own waits: retry backoffs, marker retries, signal polling).
const TOKIO_STEP: Duration = Duration::from_millis(5);

/// The simulated wall clock starts on 2026-01-01.
const EPOCH_MS: u64 = 1_767_225_600_000;

/// The worker index of the operator's tasks.
const OPERATOR: usize = usize::MAX;

/// How many scheduler steps the end of a history may take before the tasks
/// still running count as hung.
const DRAIN_STEPS: u64 = 50_000;

type Violations = (Vec<Violation>, Vec<String>);

/// Runs the history of `seed` on a fresh paused current-thread runtime.
pub(super) fn run_history<I, O, Mk, F>(
    sim: &Simulation<I, O, Mk>,
    seed: u64,
) -> Result<History, Violations>
where
    I: Serialize + DeserializeOwned + Clone,
    O: Serialize + DeserializeOwned,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread tokio runtime");
    let objects: Shared = if in_local_folder(&sim.config, seed) {
        match Folder::new(seed) {
            Ok(folder) => Arc::new(folder),
            Err(error) => panic!("simulation seed {seed}: no local folder: {error}"),
        }
    } else {
        Arc::new(InMemory::new())
    };
    let clock = Arc::new(ManualClock::new(EPOCH_MS));
    let config = &sim.config;
    let foreign =
        with_foreign_objects(config, seed).then(|| Arc::new(Foreign::new(Arc::clone(&objects))));
    let checker = Checker::new(
        Arc::clone(&objects),
        Arc::clone(&clock),
        seed,
        millis(config.retention),
        millis(config.lease),
        config.check_bodies,
    );
    let deployed = Arc::default();
    let ledger = Ledger {
        checker: checker.clone(),
        deployed: Arc::clone(&deployed),
        cancels: ObservedCancels::default(),
    };
    let workflow = (sim.make_workflow)(ledger.clone());
    let loops = sim.loops.as_ref().map(|make| make(ledger));
    // `InMemory` lists in order; a local folder and a case-folding store
    // do not.
    let ordered = !config.wide_run_ids && !in_local_folder(config, seed);
    let run_ids = if config.wide_run_ids {
        wide_run_ids(sim.inputs.len(), seed)
    } else {
        (0..sim.inputs.len())
            .map(|i| RunId::new(format!("sim-{i}")).expect("a valid run id"))
            .collect()
    };
    let runs = sim
        .inputs
        .iter()
        .zip(run_ids)
        .map(|(input, run_id)| SimRun {
            run_id,
            input: input.clone(),
            delivered: false,
            unacknowledged: false,
            last_error: None,
        })
        .collect();
    let mut world = World {
        sim,
        config,
        rng: StdRng::seed_from_u64(seed),
        checker,
        clock,
        workflow: &workflow,
        workers: Vec::new(),
        operator: None,
        reader: config.cached_reader.then(|| CachedReader::new(&objects)),
        paused_until: vec![0; config.workers],
        tasks: Vec::new(),
        runs,
        next_task: 0,
        polls: 0,
        faults: 0,
        crashes: 0,
        sends: 0,
        deleted_alone: Arc::default(),
        unfinished_deletes: Arc::default(),
        foreign,
        plants: Vec::new(),
        removed_plants: Vec::new(),
        deployed,
        loops,
        ordered,
    };
    let checker = world.checker.clone();
    checker::while_active(&checker, || runtime.block_on(world.run()));
    let violations = world.checker.violations();
    if violations.is_empty() {
        Ok(History {
            seed,
            events: world.checker.events(),
            polls: world.polls,
            faults: world.faults + world.live_faults(),
            crashes: world.crashes,
        })
    } else {
        Err((violations, world.checker.trace()))
    }
}

/// The share of random events that are a worker loop's poll or a
/// cancellation, with worker loops.
const LOOP_EVENT_SHARE: f64 = 0.4;

/// The chance, per scheduler step, that a worker pauses, with pauses.
const PAUSE_RATE: f64 = 0.003;

/// The chance, per scheduler step, that the long-lived reader reads a run,
/// with one.
const READ_RATE: f64 = 0.01;

/// The share of random events that are an operator's visits, with one.
const OPERATOR_SHARE: f64 = 0.2;

/// The chance, per scheduler step, that a foreign object is planted, with
/// [`Simulation::foreign_objects`] (at most [`MAX_PLANTS`] stand at once).
const PLANT_RATE: f64 = 0.01;

/// How many foreign objects may stand at once.
const MAX_PLANTS: usize = 2;

/// How many scheduler steps a foreign object stands at most.
const PLANT_POLLS: u64 = 400;

fn process_name(worker: usize) -> String {
    if worker == OPERATOR {
        "the operator".into()
    } else {
        format!("worker {worker}")
    }
}

/// Whether the history of `seed` runs on a local folder rather than
/// `InMemory` (a seeded share of them, with
/// [`Simulation::local_folder_share`]).
fn in_local_folder(config: &Config, seed: u64) -> bool {
    config.local_folder_share > 0.0
        && StdRng::seed_from_u64(seed ^ 0xf01d_e125).random_bool(config.local_folder_share)
}

/// Whether foreign objects are planted in the history of `seed` (a seeded
/// share of them, with [`Simulation::foreign_objects`]).
fn with_foreign_objects(config: &Config, seed: u64) -> bool {
    config.foreign_objects > 0.0
        && StdRng::seed_from_u64(seed ^ 0xf0_4e19_0b1e).random_bool(config.foreign_objects)
}

/// `n` distinct run ids drawn from the whole valid alphabet and length
/// range, weighted towards the edges: every other one 100 to 128 bytes
/// long, each with a share of capitals drawn from none, half and all (a
/// capital takes two bytes in a path), and every fourth the case variant
/// of the one before.
fn wide_run_ids(n: usize, seed: u64) -> Vec<RunId> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    let mut rng = StdRng::seed_from_u64(seed ^ 0x1d5_a1fa_be75);
    let mut ids: Vec<RunId> = Vec::with_capacity(n);
    while ids.len() < n {
        let previous = ids.last().map(|id| id.as_str().to_string());
        let id = match previous {
            Some(previous)
                if ids.len() % 4 == 3 && previous.bytes().any(|b| b.is_ascii_alphabetic()) =>
            {
                previous
                    .chars()
                    .map(|c| {
                        if c.is_ascii_uppercase() {
                            c.to_ascii_lowercase()
                        } else {
                            c.to_ascii_uppercase()
                        }
                    })
                    .collect()
            }
            _ => {
                let len = if rng.random_bool(0.5) {
                    rng.random_range(100..=128)
                } else {
                    rng.random_range(1..=128)
                };
                let capitals = [0.0, 0.5, 1.0][rng.random_range(0..3)];
                (0..len)
                    .map(|_| {
                        let c = ALPHABET[rng.random_range(0..ALPHABET.len())] as char;
                        if c.is_ascii_alphabetic() && rng.random_bool(capitals) {
                            c.to_ascii_uppercase()
                        } else {
                            c.to_ascii_lowercase()
                        }
                    })
                    .collect::<String>()
            }
        };
        let id = RunId::new(id).expect("drawn from the valid alphabet and lengths");
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

struct SimRun<I> {
    run_id: RunId,
    input: I,
    delivered: bool,
    /// A submission to a worker loop has not returned `Ok` (its caller
    /// submits again).
    unacknowledged: bool,
    last_error: Option<String>,
}

struct Worker {
    runtime: Runtime,
    faults: Arc<FaultInjectingStore<Arc<dyn ObjectStore>>>,
    /// Its worker loop, with [`Simulation::worker_loops`].
    looped: Option<crate::workflow::Worker>,
}

/// A run `recover()` resumed, and how its attempt ended.
type Resumed = (RunId, Result<(), String>);

/// How a task ended; errors as their messages.
enum Outcome {
    /// A delivery ended: the run, its result, and the content key of the
    /// input it delivered (the run's input then, which a deletion and a
    /// reuse of the id may have changed since).
    Run(usize, Result<(), String>, Option<String>),
    Recover(Result<Vec<Resumed>, String>),
    Deleted(usize, Result<bool, String>),
    Done(Result<(), String>),
    /// A submission to a worker loop ended.
    Submitted(usize, Result<(), String>),
}

struct Task<'w> {
    id: u64,
    worker: usize,
    kind: TaskKind,
    run: Option<usize>,
    future: Pin<Box<dyn Future<Output = Outcome> + 'w>>,
}

struct World<'w, I, O, Mk, F> {
    sim: &'w Simulation<I, O, Mk>,
    config: &'w Config,
    rng: StdRng,
    checker: Checker,
    clock: Arc<ManualClock>,
    workflow: &'w Workflow<F>,
    workers: Vec<Option<Worker>>,
    /// The operator process beside the workers, with
    /// [`Simulation::operator`].
    operator: Option<Worker>,
    /// A long-lived reader, with [`Simulation::cached_reader`].
    reader: Option<CachedReader>,
    /// Per worker, the poll count until which its tasks are not polled
    /// (with [`Simulation::pauses`]).
    paused_until: Vec<u64>,
    tasks: Vec<Task<'w>>,
    runs: Vec<SimRun<I>>,
    next_task: u64,
    polls: u64,
    faults: u64,
    crashes: u64,
    sends: u64,
    /// The incarnations deleted with `RuntimeStore::delete_run` alone: their
    /// memo entries and markers are left on purpose (see [`Self::reuse_random`]).
    deleted_alone: Arc<Mutex<Vec<(RunId, Incarnation)>>>,
    /// Runtime-store deletions that have not returned `Ok` (yet).
    unfinished_deletes: Arc<Mutex<Vec<(RunId, Incarnation)>>>,
    /// The shared store as workers see it, with foreign objects planted in
    /// it ([`Simulation::foreign_objects`], in this seed).
    foreign: Option<Arc<Foreign>>,
    /// The foreign objects standing, with the poll count they stand until.
    plants: Vec<(Path, u64)>,
    /// The foreign objects removed while tasks that may have read them still
    /// run, with the first task id started after the removal.
    removed_plants: Vec<(Path, u64)>,
    /// Whether the workers run the new code ([`Simulation::deploy_at`]).
    deployed: Arc<std::sync::atomic::AtomicBool>,
    /// The worker loops, with [`Simulation::worker_loops`].
    loops: Option<Loops<I>>,
    /// Whether the shared store lists in order (for the worker loops).
    ordered: bool,
}

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    async fn run(&mut self) {
        for w in 0..self.config.workers {
            let worker = self.start_worker(self.config.has(Event::StoreFault));
            self.workers.push(Some(worker));
            self.checker.event(format!("worker {w} started"));
        }
        if self.config.operator {
            self.operator = Some(self.start_worker(self.config.has(Event::StoreFault)));
            self.checker.event("operator started".into());
        }
        // Idle workers make no history: events come until some task runs.
        while self.polls < self.config.polls {
            self.deploy_when_due();
            if self.tasks.is_empty() || self.rng.random_bool(self.config.event_rate) {
                // Only a world with an operator draws for it, so that the
                // default world's histories stay what they were.
                if self.config.operator && self.rng.random_bool(OPERATOR_SHARE) {
                    self.operator_visit();
                } else {
                    self.random_event();
                }
            }
            if self.config.has(Event::Crash) && self.rng.random_bool(self.config.crash_rate) {
                self.crash_random_worker();
            }
            if self.reader.is_some() && self.rng.random_bool(READ_RATE) {
                self.cached_read(None);
            }
            if self.config.pauses && self.rng.random_bool(PAUSE_RATE) {
                self.pause_random_worker();
            }
            if self.foreign.is_some() {
                self.tend_plants();
            }
            self.step().await;
        }
        self.settle().await;
        for run in 0..self.runs.len() {
            self.cached_read(Some(run));
        }
        self.final_checks();
        if self.config.sweep_all_at_end {
            self.sweep_everything().await;
        }
    }

    /// Polls one task, chosen at random among those of workers not paused,
    /// and moves tokio's clock on.
    async fn step(&mut self) {
        let runnable: Vec<usize> = if self.config.pauses {
            (0..self.tasks.len())
                .filter(|&i| !self.is_paused(self.tasks[i].worker))
                .collect()
        } else {
            Vec::new()
        };
        if self.config.pauses && runnable.is_empty() && !self.tasks.is_empty() {
            // Every task waits for a paused worker: time passes.
            self.polls += 1;
        } else if !self.tasks.is_empty() {
            let index = if self.config.pauses {
                runnable[self.rng.random_range(0..runnable.len())]
            } else {
                self.rng.random_range(0..self.tasks.len())
            };
            let task = &mut self.tasks[index];
            let mut cx = TaskContext::from_waker(Waker::noop());
            let polled = as_task(task.id, || task.future.as_mut().poll(&mut cx));
            self.polls += 1;
            if let Poll::Ready(outcome) = polled {
                let task = self.tasks.swap_remove(index);
                self.checker.task_ended(task.id);
                self.finished(&task, outcome);
            }
            if !self.removed_plants.is_empty() {
                self.forget_removed_plants();
            }
        }
        tokio::time::advance(TOKIO_STEP).await;
    }

    fn is_paused(&self, worker: usize) -> bool {
        self.paused_until
            .get(worker)
            .is_some_and(|&until| until > self.polls)
    }

    /// A worker stops being polled for a while, wherever its tasks are
    /// waiting (a stop-the-world pause, a swapped-out process), and the
    /// clock moves past a lease meanwhile: when it resumes, its tasks carry
    /// on with what they knew before, their leases expired and maybe taken
    /// over.
    fn pause_random_worker(&mut self) {
        let Some(worker) = self.random_live_worker() else {
            return;
        };
        let polls = self.rng.random_range(10..300);
        self.paused_until[worker] = self.polls + polls;
        let jump = millis(self.config.lease) + self.rng.random_range(1..60_000);
        self.clock.advance_ms(jump);
        self.checker.event(format!(
            "worker {worker} pauses for {polls} polls; the clock jumps {jump} ms"
        ));
    }

    /// The shared objects as every process sees them through the backend:
    /// with wide run ids, as a backend with name limits and
    /// case-insensitive names would show them; with foreign objects, with
    /// those planted in it.
    fn backend(&self) -> Arc<dyn ObjectStore> {
        let shared: Arc<dyn ObjectStore> = match &self.foreign {
            Some(foreign) => Arc::clone(foreign) as _,
            None => Arc::clone(self.checker.objects()),
        };
        if self.config.wide_run_ids {
            Arc::new(CaseFoldingStore::new(NameLimitedStore::new(shared)))
        } else {
            shared
        }
    }

    /// A worker process: its own store instances over the shared objects.
    fn start_worker(&mut self, faulty: bool) -> Worker {
        let shared = self.backend();
        let faults = Arc::new(FaultInjectingStore::new(shared).with_seed(self.rng.random()));
        if faulty && self.config.fault_rate > 0.0 {
            let half = self.config.fault_rate / 2.0;
            for kind in RequestKind::ALL {
                faults.inject(FaultRule::fail_before(kind).with_probability(half));
                faults.inject(FaultRule::fail_after(kind).with_probability(half));
            }
        }
        let objects: Arc<dyn ObjectStore> = Arc::new(Preemptible {
            inner: Arc::clone(&faults),
            checker: self.checker.clone(),
        });
        let store = Audited {
            inner: ObjectStoreRuntimeStore::new(Arc::clone(&objects), PREFIX),
            checker: self.checker.clone(),
        };
        let builder = Runtime::builder()
            .memo_store(MemoStore::new(objects, PREFIX))
            .runtime_store(Arc::new(store))
            .clock(Arc::clone(&self.clock) as _)
            .retention(self.config.retention)
            // The default holds the process id: the seed's own, to replay.
            .worker_id(format!("sim-{:08x}", crate::run_id::unique_token() as u32))
            .marker_retry(
                RetryPolicy::attempts(3)
                    .with_min_delay(Duration::from_millis(20))
                    .without_jitter(),
            );
        let builder = compat::configure(builder, self.config.lease);
        // With worker loops, an attempt suspends at every timer, for a
        // worker's poll to wake it.
        let builder = match &self.loops {
            Some(_) => builder.timer_wait(Duration::ZERO),
            None => builder,
        };
        let runtime = builder
            .build()
            .expect("a memo store and a runtime store are set");
        let looped = self
            .loops
            .as_ref()
            .map(|loops| (loops.worker)(runtime.clone(), self.ordered));
        Worker {
            runtime,
            faults,
            looped,
        }
    }

    fn live_faults(&self) -> u64 {
        self.workers
            .iter()
            .flatten()
            .chain(&self.operator)
            .map(|w| w.faults.faults_injected())
            .sum()
    }

    /// The runtime of worker `worker` (or of the operator, [`OPERATOR`]).
    fn runtime_of(&self, worker: usize) -> Runtime {
        let process = if worker == OPERATOR {
            self.operator.as_ref()
        } else {
            self.workers[worker].as_ref()
        };
        process.expect("a live worker").runtime.clone()
    }

    /// The long-lived reader and a fresh instance read `run` (a random
    /// one if `None`).
    fn cached_read(&mut self, run: Option<usize>) {
        let Some(reader) = &self.reader else {
            return;
        };
        let Some(run) = run
            .or_else(|| (!self.runs.is_empty()).then(|| self.rng.random_range(0..self.runs.len())))
        else {
            return;
        };
        reader.read(&self.checker, &self.runs[run].run_id);
    }

    /// The operator visits the store: lists, reads, signals or sweeps.
    fn operator_visit(&mut self) {
        let Some(operator) = &self.operator else {
            return;
        };
        if self.tasks.iter().filter(|t| t.worker == OPERATOR).count() >= 2 {
            return;
        }
        let runtime = operator.runtime.clone();
        let checker = self.checker.clone();
        let run_ids: Vec<RunId> = self.runs.iter().map(|r| r.run_id.clone()).collect();
        let visit = match self.rng.random_range(0..10u32) {
            0..3 => Visit::List(RunStatus::ALL[self.rng.random_range(0..RunStatus::ALL.len())]),
            3..7 => Visit::Read,
            7 => Visit::Markers,
            8 => {
                if !self.sim.signals.is_empty() && !self.runs.is_empty() {
                    let run = self.rng.random_range(0..self.runs.len());
                    let signal = self.rng.random_range(0..self.sim.signals.len());
                    if self.rng.random_bool(0.5) {
                        self.send_signal(OPERATOR, run, signal);
                    } else {
                        self.send_wrong_signal(run, signal);
                    }
                }
                return;
            }
            _ => {
                self.sweep_on(OPERATOR);
                return;
            }
        };
        let future: Pin<Box<dyn Future<Output = crate::Result<()>> + 'w>> = match visit {
            Visit::List(status) => Box::pin(operator::list(checker, runtime, run_ids, status)),
            Visit::Read => {
                let run = self.rng.random_range(0..run_ids.len().max(1));
                let Some(run_id) = run_ids.get(run).cloned() else {
                    return;
                };
                Box::pin(operator::read(checker, runtime, run_id))
            }
            Visit::Markers => Box::pin(operator::markers(runtime)),
        };
        self.checker.event(format!("operator: {visit:?}"));
        let future = async move { Outcome::Done(future.await.map_err(|e| e.to_string())) };
        self.spawn(OPERATOR, TaskKind::Operator, None, Box::pin(future));
    }

    /// The operator sends signal `signal` to `run` with a payload of
    /// another type than the workflow waits for (`memoctl signal` takes any
    /// JSON): it may be refused, or recorded as refused, but it must never
    /// keep the run from ending once the right signal comes.
    fn send_wrong_signal(&mut self, run: usize, signal: usize) {
        let runtime = self.runtime_of(OPERATOR);
        let run_id = self.runs[run].run_id.clone();
        let name = self.sim.signals[signal].0.clone();
        self.sends += 1;
        let id = format!("sim-signal-{}", self.sends);
        self.checker.event(format!(
            "signal {name} ({id}) of the wrong type to {run_id} via the operator"
        ));
        let future = async move {
            let payload =
                std::collections::BTreeMap::from([("memo-sim", "a payload of the wrong type")]);
            let sent = runtime.signal_with_id(&run_id, &id, &name, &payload).await;
            Outcome::Done(sent.map_err(|e| e.to_string()))
        };
        self.spawn(OPERATOR, TaskKind::Signal, None, Box::pin(future));
    }

    /// After the history, every run is swept with no retention by a
    /// fault-free process (after its `recover()` marks what needs marking):
    /// then nothing of any run may be left in the store, or some object
    /// was left unreachable, for ever.
    async fn sweep_everything(&mut self) {
        // Through the backend the workers wrote through: a process that
        // bypassed its case folding would miss every object whose name the
        // backend folded (the status-hint folders, `Completed` stored as
        // `completed`), which no real process of the deployment could.
        let objects = self.backend();
        let store: Arc<dyn crate::runtime_store::RuntimeStore> =
            Arc::new(ObjectStoreRuntimeStore::new(Arc::clone(&objects), PREFIX));
        let memo = MemoStore::new(Arc::clone(&objects), PREFIX);
        let builder = Runtime::builder()
            .memo_store(memo.clone())
            .runtime_store(Arc::clone(&store))
            .clock(Arc::clone(&self.clock) as _)
            .retention(self.config.retention);
        let runtime = compat::configure(builder, self.config.lease)
            .build()
            .expect("a memo store and a runtime store are set");
        self.checker
            .event("every run is swept, with no retention".into());
        // A user whose `RuntimeStore::delete_run` failed (or whose process
        // died in it) calls it again, as its rustdoc says: a deletion
        // stopped part way, with the run's pointer and record already gone,
        // leaves the rest where only a second call (or a sweep of a marker
        // the run may not have) reaches it.
        let unfinished = self
            .unfinished_deletes
            .lock()
            .expect("not poisoned")
            .clone();
        for (run_id, incarnation) in unfinished {
            self.checker.event(format!(
                "the failed deletion of {run_id} incarnation {incarnation} is called again"
            ));
            if let Err(error) = store.delete_run(&run_id, incarnation).await {
                self.checker.violation(
                    "no object is left unreachable after every run is swept",
                    format!("a deletion called again after it failed fails: {error}"),
                );
            }
        }
        if let Err(error) = runtime.recover(self.workflow).await {
            self.checker
                .event(format!("the last recover fails: {error}"));
        }
        self.clock.advance_ms(1);
        let sweeper = crate::retention::RetentionSweeper::builder(memo, Duration::ZERO)
            .runtime_store(store)
            .build();
        // Passes until one clears nothing (at most 4), as a deployment's
        // sweepers keep passing: a pass that sweeps the marker of an earlier
        // run of an id marks the id's later finished run, which the next
        // pass sweeps.
        for _ in 0..4 {
            let report = match sweeper.sweep_once(self.clock.now_ms()).await {
                Ok(report) => report,
                Err(error) => {
                    self.checker.violation(
                        "no object is left unreachable after every run is swept",
                        format!("the last sweep fails: {error}"),
                    );
                    return;
                }
            };
            for failure in &report.failures {
                self.checker
                    .event(format!("the last sweep keeps a marker: {failure:?}"));
            }
            if report.runs_cleared == 0 {
                break;
            }
        }
        let deleted_alone = self.deleted_alone.lock().expect("not poisoned").clone();
        let left: Vec<_> = compat::objects_of_runs(self.checker.objects())
            .into_iter()
            .filter(|path| !compat::left_by_records_only_delete(path, &deleted_alone))
            .collect();
        if !left.is_empty() {
            self.checker.violation(
                "no object is left unreachable after every run is swept",
                format!(
                    "{} object(s) of runs are left, such as {}",
                    left.len(),
                    left.iter()
                        .take(4)
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }

    fn random_event(&mut self) {
        if self.loops.is_some() && self.rng.random_bool(LOOP_EVENT_SHARE) {
            return self.loop_event();
        }
        let roll = self.rng.random_range(0..100u32);
        let has = |event| self.config.has(event);
        match roll {
            0..50 => self.deliver_random(),
            50..62 if has(Event::Signal) => self.signal_random(),
            62..72 if has(Event::ClockJump) => self.jump_clock(false),
            72..75 if has(Event::ClockJump) => self.jump_clock(true),
            75..83 if has(Event::Sweep) => self.sweep_random(),
            83..90 if has(Event::RunIdReuse) => self.reuse_random(),
            90..100 => self.restart_random(),
            _ => {}
        }
    }

    fn random_live_worker(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..self.workers.len())
            .filter(|&w| self.workers[w].is_some())
            .collect();
        (!live.is_empty()).then(|| live[self.rng.random_range(0..live.len())])
    }

    fn busy(&self, run: usize) -> bool {
        self.tasks
            .iter()
            .any(|t| t.run == Some(run) || t.kind == TaskKind::Recover)
    }

    fn deliver_random(&mut self) {
        if self.runs.is_empty() || self.tasks.len() >= 4 * self.workers.len() {
            return;
        }
        let run = self.rng.random_range(0..self.runs.len());
        if !self.config.has(Event::ConcurrentDelivery) && self.busy(run) {
            return;
        }
        if let Some(worker) = self.random_live_worker() {
            self.deliver(worker, run);
        }
    }

    fn deliver(&mut self, worker: usize, run: usize) {
        if self.loops.is_some() {
            return self.submit(worker, run);
        }
        let runtime = self.workers[worker]
            .as_ref()
            .expect("a live worker")
            .runtime
            .clone();
        let slot = &mut self.runs[run];
        slot.delivered = true;
        let input = match &self.sim.redeliver {
            Some(redeliver) => redeliver(&slot.input, self.rng.random()),
            None => slot.input.clone(),
        };
        let run_id = slot.run_id.clone();
        self.checker
            .event(format!("deliver {run_id} to worker {worker}"));
        let workflow = self.workflow;
        let delivered = crate::content_key(&input).ok();
        let future = async move {
            let result = runtime.run(&run_id, &input, workflow).await;
            Outcome::Run(run, result.map(drop).map_err(|e| e.to_string()), delivered)
        };
        self.spawn(worker, TaskKind::Run, Some(run), Box::pin(future));
    }

    /// With worker loops: a worker polls, or a run is cancelled.
    fn loop_event(&mut self) {
        if self.config.has(Event::Cancel) && self.rng.random_bool(0.2) {
            if !self.runs.is_empty() {
                let run = self.rng.random_range(0..self.runs.len());
                if let Some(worker) = self.random_live_worker() {
                    self.cancel(worker, run);
                }
            }
        } else if let Some(worker) = self.random_live_worker() {
            self.poll(worker);
        }
    }

    /// Submits `run` to `worker`'s loop, as a caller that saw no `Ok` yet
    /// does again.
    fn submit(&mut self, worker: usize, run: usize) {
        let Some(loops) = &self.loops else {
            return;
        };
        let looped = self.workers[worker]
            .as_ref()
            .and_then(|w| w.looped.clone())
            .expect("a live worker with a loop");
        let slot = &mut self.runs[run];
        slot.delivered = true;
        slot.unacknowledged = true;
        let submitted = (loops.submit)(looped, slot.run_id.clone(), slot.input.clone());
        self.checker
            .event(format!("submit {} to worker {worker}", slot.run_id));
        let future =
            async move { Outcome::Submitted(run, submitted.await.map_err(|e| e.to_string())) };
        self.spawn(worker, TaskKind::Run, Some(run), Box::pin(future));
    }

    /// `worker`'s loop polls the due-run index once, unless it is polling.
    fn poll(&mut self, worker: usize) {
        let polling = self
            .tasks
            .iter()
            .any(|t| t.kind == TaskKind::Poll && t.worker == worker);
        let Some(looped) = self.workers[worker].as_ref().and_then(|w| w.looped.clone()) else {
            return;
        };
        if polling {
            return;
        }
        self.checker.event(format!("worker {worker} polls"));
        let future = async move {
            let errors = loops::poll(looped).await;
            Outcome::Done(if errors.is_empty() {
                Ok(())
            } else {
                Err(errors.join("; "))
            })
        };
        self.spawn(worker, TaskKind::Poll, None, Box::pin(future));
    }

    /// Cancels `run` through `worker`'s runtime.
    fn cancel(&mut self, worker: usize, run: usize) {
        let runtime = self.runtime_of(worker);
        let run_id = self.runs[run].run_id.clone();
        self.checker
            .event(format!("cancel {run_id} via worker {worker}"));
        let future = async move { Outcome::Done(loops::cancel(runtime, run_id).await) };
        self.spawn(worker, TaskKind::Cancel, Some(run), Box::pin(future));
    }

    /// With worker loops, the end of a history: faults stop, crashed
    /// workers restart, and then, while the clock moves on a day at a
    /// time, only the workers' polls drive runs; a submission that never
    /// returned `Ok` is made again, and every open run gets every signal,
    /// as callers would.
    async fn settle_with_loops(&mut self) {
        self.checker.event("faults stop".into());
        for worker in 0..self.workers.len() {
            match &self.workers[worker] {
                Some(live) => live.faults.set_enabled(false),
                None => {
                    let restarted = self.start_worker(false);
                    self.workers[worker] = Some(restarted);
                    self.checker.event(format!("worker {worker} restarts"));
                }
            }
        }
        self.drain().await;
        for _ in 0..self.config.liveness_rounds {
            self.clock
                .advance_ms(millis(self.config.lease) + loops::SETTLE_JUMP_MS);
            let open: Vec<usize> = (0..self.runs.len())
                .filter(|&run| self.runs[run].delivered && !self.is_terminal(run))
                .collect();
            if open.is_empty() {
                break;
            }
            for run in open {
                let worker = self.rng.random_range(0..self.workers.len());
                let created = matches!(
                    fresh_run(self.checker.objects(), &self.runs[run].run_id),
                    Some(Ok(Some(_)))
                );
                if self.runs[run].unacknowledged || !created {
                    self.submit(worker, run);
                }
                for signal in 0..self.sim.signals.len() {
                    self.send_signal(worker, run, signal);
                }
            }
            self.drain().await;
            for _ in 0..loops::SETTLE_POLLS {
                for worker in 0..self.workers.len() {
                    self.poll(worker);
                }
                self.drain().await;
            }
        }
    }

    fn spawn(
        &mut self,
        worker: usize,
        kind: TaskKind,
        run: Option<usize>,
        future: Pin<Box<dyn Future<Output = Outcome> + 'w>>,
    ) {
        let id = self.next_task;
        self.next_task += 1;
        self.checker.task_started(id, kind);
        self.tasks.push(Task {
            id,
            worker,
            kind,
            run,
            future,
        });
    }

    fn signal_random(&mut self) {
        if self.sim.signals.is_empty() || self.runs.is_empty() {
            return;
        }
        let run = self.rng.random_range(0..self.runs.len());
        let signal = self.rng.random_range(0..self.sim.signals.len());
        if let Some(worker) = self.random_live_worker() {
            self.send_signal(worker, run, signal);
        }
    }

    fn send_signal(&mut self, worker: usize, run: usize, signal: usize) {
        let runtime = self.runtime_of(worker);
        let run_id = self.runs[run].run_id.clone();
        let (name, send) = &self.sim.signals[signal];
        let send = Arc::clone(send);
        self.sends += 1;
        let id = format!("sim-signal-{}", self.sends);
        self.checker.event(format!(
            "signal {name} ({id}) to {run_id} via {}",
            process_name(worker)
        ));
        let future = async move {
            let sent = send(runtime, run_id, id).await;
            Outcome::Done(sent.map_err(|e| e.to_string()))
        };
        self.spawn(worker, TaskKind::Signal, None, Box::pin(future));
    }

    fn jump_clock(&mut self, past_retention: bool) {
        let ms = if past_retention {
            millis(self.config.retention) + self.rng.random_range(1..3 * 24 * 3_600_000)
        } else {
            self.rng.random_range(1_000..20 * 60_000)
        };
        self.clock.advance_ms(ms);
        self.checker.event(format!("clock jumps {ms} ms"));
    }

    fn sweep_random(&mut self) {
        if self.config.sweeper_per_worker {
            // Every worker's sweeper wakes on its own timer; after the same
            // clock jump, they all find the same expired runs at once.
            for worker in 0..self.workers.len() {
                if self.workers[worker].is_some() {
                    self.sweep_on(worker);
                }
            }
            return;
        }
        if self.tasks.iter().any(|t| t.kind == TaskKind::Sweep) {
            return;
        }
        let Some(worker) = self.random_live_worker() else {
            return;
        };
        self.sweep_on(worker);
    }

    /// A sweep on `worker` (or the operator), unless one runs there: with a
    /// sweeper in every worker, sweeps of the same runs overlap.
    fn sweep_on(&mut self, worker: usize) {
        let busy = self
            .tasks
            .iter()
            .any(|t| t.kind == TaskKind::Sweep && t.worker == worker);
        if busy {
            return;
        }
        let sweeper = self.runtime_of(worker).retention_sweeper();
        self.checker
            .event(format!("sweep on {}", process_name(worker)));
        let future = async move {
            let swept = sweeper.sweep_now().await;
            Outcome::Done(swept.map(drop).map_err(|e| e.to_string()))
        };
        self.spawn(worker, TaskKind::Sweep, None, Box::pin(future));
    }

    /// Deletes a terminal run, so that its id can be used again.
    fn reuse_random(&mut self) {
        if self.runs.is_empty() {
            return;
        }
        let run = self.rng.random_range(0..self.runs.len());
        let terminal = matches!(
            fresh_run(self.checker.objects(), &self.runs[run].run_id),
            Some(Ok(Some(RunRecord { status, .. }))) if status.is_terminal()
        );
        if !terminal || self.busy(run) && !self.config.has(Event::ConcurrentDelivery) {
            return;
        }
        let Some(worker) = self.random_live_worker() else {
            return;
        };
        let runtime = self.workers[worker]
            .as_ref()
            .expect("a live worker")
            .runtime
            .clone();
        let run_id = self.runs[run].run_id.clone();
        // Half the deletions delete the whole run; the others delete only its
        // runtime records, as a user calling `RuntimeStore::delete_run`
        // would, and leave its memo entries for the next run of the id to
        // (never) inherit. No sweep may clear those (it cannot tell them
        // from a run that its runtime store, the wrong one, does not hold),
        // so the last sweep leaves them, and only them.
        let whole = self.rng.random_bool(0.5);
        let how = if whole {
            "RetentionSweeper::delete_run"
        } else {
            "RuntimeStore::delete_run"
        };
        self.checker.event(format!(
            "delete {run_id} on worker {worker} with {how}, to reuse its id"
        ));
        let deleted_alone = Arc::clone(&self.deleted_alone);
        let unfinished = Arc::clone(&self.unfinished_deletes);
        let future = async move {
            let deleted = if whole {
                runtime.retention_sweeper().delete_run(&run_id).await
            } else {
                let store = runtime.runtime_store().as_ref();
                compat::delete_records(store, &run_id, &deleted_alone, &unfinished).await
            };
            Outcome::Deleted(run, deleted.map_err(|e| e.to_string()))
        };
        self.spawn(worker, TaskKind::Delete, Some(run), Box::pin(future));
    }

    fn crash_random_worker(&mut self) {
        if let Some(worker) = self.random_live_worker() {
            self.crash(worker);
        }
    }

    fn crash(&mut self, worker: usize) {
        if let Some(dead) = self.workers[worker].take() {
            self.faults += dead.faults.faults_injected();
        }
        self.crashes += 1;
        let mut dropped = 0;
        self.tasks.retain(|task| {
            let dies = task.worker == worker;
            if dies {
                dropped += 1;
                self.checker.task_ended(task.id);
            }
            !dies
        });
        self.checker.event(format!(
            "worker {worker} crashes, dropping {dropped} task(s)"
        ));
    }

    /// Restarts a crashed worker, which then recovers its workflow's runs.
    fn restart_random(&mut self) {
        let Some(worker) = self.workers.iter().position(Option::is_none) else {
            return;
        };
        let started = self.start_worker(self.config.has(Event::StoreFault));
        self.workers[worker] = Some(started);
        self.checker.event(format!("worker {worker} restarts"));
        let quiet = !self
            .tasks
            .iter()
            .any(|t| matches!(t.kind, TaskKind::Run | TaskKind::Recover));
        // A worker loop takes over the crashed worker's runs by itself.
        if self.loops.is_none() && (self.config.has(Event::ConcurrentDelivery) || quiet) {
            self.recover(worker);
        }
    }

    fn recover(&mut self, worker: usize) {
        let runtime = self.workers[worker]
            .as_ref()
            .expect("a live worker")
            .runtime
            .clone();
        let workflow = self.workflow;
        self.checker.event(format!("recover on worker {worker}"));
        let future = async move {
            let recovered = runtime.recover(workflow).await;
            Outcome::Recover(
                recovered
                    .map(|recovery| {
                        recovery
                            .resumed
                            .into_iter()
                            .map(|(run_id, result)| {
                                (run_id, result.map(drop).map_err(|e| e.to_string()))
                            })
                            .collect()
                    })
                    .map_err(|e| e.to_string()),
            )
        };
        self.spawn(worker, TaskKind::Recover, None, Box::pin(future));
    }

    fn finished(&mut self, task: &Task<'w>, outcome: Outcome) {
        match outcome {
            Outcome::Run(run, result, delivered) => {
                let label = result
                    .as_ref()
                    .map_or_else(|e| format!("error: {e}"), |()| "ok".into());
                self.checker.event(format!(
                    "task {} (run {}) on worker {} ends: {label}",
                    task.id, self.runs[run].run_id, task.worker
                ));
                self.attempt_ended(run, result, delivered.as_deref());
            }
            Outcome::Recover(Ok(resumed)) => {
                self.checker.event(format!(
                    "recover on worker {} ends: {} run(s) resumed",
                    task.worker,
                    resumed.len()
                ));
                for (run_id, result) in resumed {
                    if let Some(run) = self.runs.iter().position(|r| r.run_id == run_id) {
                        self.attempt_ended(run, result, None);
                    }
                }
            }
            Outcome::Recover(Err(error)) => {
                self.checker
                    .event(format!("recover on worker {} fails: {error}", task.worker));
                self.check_error(None, &error);
            }
            Outcome::Deleted(run, result) => {
                self.checker.event(format!(
                    "delete of {} ends: {result:?}",
                    self.runs[run].run_id
                ));
                self.reuse(run);
            }
            Outcome::Done(result) => {
                self.checker
                    .event(format!("{:?} task {} ends: {result:?}", task.kind, task.id));
                if let Err(error) = &result {
                    self.check_error(None, error);
                }
            }
            Outcome::Submitted(run, result) => {
                self.checker.event(format!(
                    "submission of {} ends: {result:?}",
                    self.runs[run].run_id
                ));
                match result {
                    Ok(()) => self.runs[run].unacknowledged = false,
                    Err(error) => self.attempt_ended(run, Err(error), None),
                }
            }
        }
    }

    /// A deleted run's id gets one of the inputs at random for its next use.
    fn reuse(&mut self, run: usize) {
        let gone = matches!(
            fresh_run(self.checker.objects(), &self.runs[run].run_id),
            Some(Ok(None))
        );
        if gone && !self.sim.inputs.is_empty() {
            let input = self.rng.random_range(0..self.sim.inputs.len());
            self.runs[run].input = self.sim.inputs[input].clone();
        }
    }

    /// `delivered`: the content key of the input a delivery gave (`None`
    /// for a recovery, which runs the stored input).
    fn attempt_ended(&mut self, run: usize, result: Result<(), String>, delivered: Option<&str>) {
        if let Err(error) = result {
            self.check_error(Some((run, delivered)), &error);
            self.runs[run].last_error = Some(error);
        }
    }

    /// Errors that break an invariant wherever they come from.
    fn check_error(&mut self, run: Option<(usize, Option<&str>)>, error: &str) {
        match classify(error) {
            // Not one if a foreign object stood at the path it names when
            // the task could have read it (the checker knows).
            ErrorKind::Corrupt => self
                .checker
                .violation(checker::CORRUPT_READ, error.to_string()),
            ErrorKind::NonDeterminism => self.checker.violation(
                "a deterministic workflow replays its history",
                error.to_string(),
            ),
            ErrorKind::InputConflict => {
                if let Some((run, delivered)) = run {
                    self.check_input_conflict(run, delivered, error);
                }
            }
            ErrorKind::InjectedFault | ErrorKind::Other => {}
        }
    }

    /// A run refused its own input: a violation if the stored input equals
    /// the delivered one (the slot's input, unless `delivered` names it: a
    /// delivery made before the run was deleted and its id reused with
    /// another input is refused rightly).
    fn check_input_conflict(&mut self, run: usize, delivered: Option<&str>, error: &str) {
        let slot = &self.runs[run];
        let delivered = match delivered {
            Some(key) => Ok(key.to_string()),
            None => crate::content_key(&slot.input),
        };
        let Some(Ok(Some(record))) = fresh_run(self.checker.objects(), &slot.run_id) else {
            return;
        };
        let stored: Option<I> = crate::codec::decode(&record.input).ok();
        let equal = stored.is_some_and(|stored| {
            matches!(
                (crate::content_key(&stored), &delivered),
                (Ok(a), Ok(b)) if a == *b
            )
        });
        if equal && record.workflow == self.workflow.name() {
            self.checker.violation(
                "redelivering an equal input is never refused",
                format!("run {}: {error}", slot.run_id),
            );
        }
    }

    /// Removes the foreign objects whose time is up, and plants another
    /// now and then.
    fn tend_plants(&mut self) {
        let polls = self.polls;
        let (due, standing) = std::mem::take(&mut self.plants)
            .into_iter()
            .partition(|&(_, until)| until <= polls);
        self.plants = standing;
        for (path, _) in due {
            self.unplant(&path);
        }
        if self.plants.len() < MAX_PLANTS && self.rng.random_bool(PLANT_RATE) {
            self.plant_random();
        }
    }

    /// Another writer of the shared store plants a foreign object in place
    /// of one memo wrote, taken from a listing: a huge one anywhere, a
    /// nested value in a memo or log entry, a forged checkpoint.
    fn plant_random(&mut self) {
        let Some(foreign) = self.foreign.clone() else {
            return;
        };
        let listed: Vec<Path> = compat::objects_of_runs(self.checker.objects())
            .into_iter()
            .filter(|path| !self.plants.iter().any(|(p, _)| p == path))
            .collect();
        if listed.is_empty() {
            return;
        }
        // The kind first, so that the rarer objects it fits (checkpoints)
        // get their share; a huge object fits anywhere.
        let mut kind = [Kind::Huge, Kind::Nested, Kind::Forged][self.rng.random_range(0..3)];
        let fits: Vec<&Path> = listed
            .iter()
            .filter(|path| plant::kinds_for(path).contains(&kind))
            .collect();
        let path = if fits.is_empty() {
            kind = Kind::Huge;
            listed[self.rng.random_range(0..listed.len())].clone()
        } else {
            fits[self.rng.random_range(0..fits.len())].clone()
        };
        let original = self
            .checker
            .objects()
            .get(&path)
            .now_or_never()
            .and_then(Result::ok)
            .and_then(|got| got.bytes().now_or_never())
            .and_then(Result::ok);
        let bytes = match (kind, original) {
            (Kind::Forged, Some(original)) => plant::forged(&path, original),
            (Kind::Nested, original) => Some(plant::nested(&path, original)),
            _ => None,
        };
        match bytes {
            Some(bytes) => foreign.plant_bytes(path.clone(), bytes),
            None => {
                kind = Kind::Huge;
                foreign.plant_huge(path.clone());
            }
        }
        let polls = self.rng.random_range(1..PLANT_POLLS);
        self.checker.set_planted(path.as_ref(), true);
        self.checker.event(format!(
            "a foreign object ({kind:?}) is planted at {path} for {polls} polls"
        ));
        self.plants.push((path, self.polls + polls));
    }

    /// Forgets the foreign objects removed before every task still running
    /// started: an error naming one of them now is a corrupt read.
    fn forget_removed_plants(&mut self) {
        let oldest = self.tasks.iter().map(|t| t.id).min().unwrap_or(u64::MAX);
        let checker = &self.checker;
        self.removed_plants.retain(|(path, next_task)| {
            let read_it = oldest < *next_task;
            if !read_it && !self.plants.iter().any(|(p, _)| p == path) {
                checker.set_planted(path.as_ref(), false);
            }
            read_it
        });
    }

    /// Removes the foreign object at `path`: reads see what memo wrote
    /// there again.
    fn unplant(&mut self, path: &Path) {
        if let Some(foreign) = &self.foreign {
            foreign.remove(path);
        }
        // A task that read it may report what it read after the removal.
        self.removed_plants.push((path.clone(), self.next_task));
        self.checker
            .event(format!("the foreign object at {path} is removed"));
    }

    /// Faults stop, crashed workers restart, time moves on, and every open
    /// run is redelivered (with every signal) until it is terminal.
    async fn settle(&mut self) {
        if self.loops.is_some() {
            return self.settle_with_loops().await;
        }
        for (path, _) in std::mem::take(&mut self.plants) {
            self.unplant(&path);
        }
        self.checker.event("faults stop".into());
        self.paused_until.fill(0);
        for worker in 0..self.workers.len() {
            match &self.workers[worker] {
                Some(live) => live.faults.set_enabled(false),
                None => {
                    let restarted = self.start_worker(false);
                    self.workers[worker] = Some(restarted);
                    self.checker.event(format!("worker {worker} restarts"));
                }
            }
        }
        self.drain().await;
        for worker in 0..self.workers.len() {
            self.recover(worker);
            if !self.config.has(Event::ConcurrentDelivery) {
                self.drain().await;
            }
        }
        self.drain().await;
        for _ in 0..self.config.liveness_rounds {
            self.clock.advance_ms(millis(self.config.lease) + 1_000);
            let open: Vec<usize> = (0..self.runs.len())
                .filter(|&run| !self.is_terminal(run))
                .collect();
            if open.is_empty() {
                break;
            }
            for run in open {
                let worker = self.rng.random_range(0..self.workers.len());
                for signal in 0..self.sim.signals.len() {
                    self.send_signal(worker, run, signal);
                }
                self.drain().await;
                self.deliver(worker, run);
                self.drain().await;
                // A run the queue no longer delivers (a late redelivery of
                // an earlier order under a reused id created it) is resumed
                // by recovery, as a worker's start-up does.
                if !self.is_terminal(run) {
                    self.recover(worker);
                    self.drain().await;
                }
            }
        }
    }

    /// Runs every task to its end.
    async fn drain(&mut self) {
        let mut steps = 0;
        while !self.tasks.is_empty() && steps < DRAIN_STEPS {
            self.step().await;
            steps += 1;
        }
        if !self.tasks.is_empty() {
            let hung: Vec<String> = self
                .tasks
                .iter()
                .map(|t| format!("{:?} task {} on worker {}", t.kind, t.id, t.worker))
                .collect();
            self.checker.violation(
                "every attempt ends once faults stop",
                format!(
                    "still running after {DRAIN_STEPS} steps: {}",
                    hung.join(", ")
                ),
            );
            for task in std::mem::take(&mut self.tasks) {
                self.checker.task_ended(task.id);
            }
        }
    }

    fn is_terminal(&self, run: usize) -> bool {
        matches!(
            fresh_run(self.checker.objects(), &self.runs[run].run_id),
            Some(Ok(Some(RunRecord { status, .. }))) if status.is_terminal()
        )
    }

    fn final_checks(&mut self) {
        self.checker.check_effects_matched();
        for run in 0..self.runs.len() {
            let slot = &self.runs[run];
            let record = match fresh_run(self.checker.objects(), &slot.run_id) {
                Some(Ok(Some(record))) => record,
                Some(Ok(None)) if !slot.delivered => continue,
                other => {
                    self.checker.violation(
                        "every run reaches a terminal state",
                        format!("run {} reads as {other:?}", slot.run_id),
                    );
                    continue;
                }
            };
            let outcome = match record.status {
                RunStatus::Pending | RunStatus::Running => {
                    self.checker.violation(
                        "every run reaches a terminal state",
                        format!(
                            "run {} is still {} after faults stopped; its last error: {}",
                            slot.run_id,
                            record.status,
                            slot.last_error.as_deref().unwrap_or("none")
                        ),
                    );
                    continue;
                }
                RunStatus::Completed => match compat::decode_output::<O>(&record) {
                    Ok(output) => RunOutcome::Completed(output),
                    Err(error) => {
                        self.checker.violation(
                            "no read returns a corrupt value",
                            format!("run {}: {error}", slot.run_id),
                        );
                        continue;
                    }
                },
                RunStatus::Failed => RunOutcome::Failed(record.error.clone().unwrap_or_default()),
                RunStatus::Cancelled => RunOutcome::Cancelled,
            };
            if let RunOutcome::Failed(message) = &outcome
                && classify(message) != ErrorKind::Other
            {
                self.checker.violation(
                    "only the workflow's own errors fail a run",
                    format!("run {} failed: {message}", slot.run_id),
                );
            }
            // The run's own input: a delivery made before a deletion may
            // have created the run again with the input of the earlier one.
            let Ok(input) = crate::codec::decode::<I>(&record.input) else {
                self.checker.violation(
                    "no read returns a corrupt value",
                    format!("run {}: its input does not decode", slot.run_id),
                );
                continue;
            };
            if let Some(check) = &self.sim.check
                && let Err(reason) = check(&input, &outcome)
            {
                self.checker.violation(
                    "the run's outcome is right for its input",
                    format!("run {}: {reason}", slot.run_id),
                );
            }
        }
    }
}
