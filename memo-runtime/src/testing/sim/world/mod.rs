//! One simulated history: the workers, the scheduler that polls their tasks
//! in a seed-chosen order, the random events, and the final checks.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Duration;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::checker::{self, Checker, TaskKind, as_task};
use super::compat::fresh_run;
use super::folder::Folder;
use super::loops::{Loops, NEW_VERSION, OLD_VERSION, ObservedCancels};
use super::plant::Foreign;
use super::reader::CachedReader;
use super::sealed::{self, KeyFile, Sealing};
use super::stores::Shared;
use super::{Config, Event, History, Ledger, Simulation, Violation};
use crate::clock::ManualClock;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::RunRecord;
use crate::testing::FaultInjectingStore;
use crate::workflow::{Runtime, Workflow, WorkflowFn};
pub(super) use deploy::CodesRun;
use ids::wide_run_ids;
use misprefix::WRONG_PREFIX_SHARE;
use shared::SHARED_SHARE;
use standalone::STANDALONE_SHARE;

mod checks;
mod deploy;
mod events;
mod ids;
mod misprefix;
mod outcomes;
mod plants;
mod rotation;
mod shared;
mod slow;
mod standalone;
mod visits;
mod workers;

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
    let sealing = Sealing::for_seed(sim.config.sealed_share, seed, sim.config.key_rotation);
    let _sealed = sealed::install(sealing.clone());
    let folder = if in_local_folder(&sim.config, seed) {
        match Folder::new(seed) {
            Ok(folder) => Some(Arc::new(folder)),
            Err(error) => panic!("simulation seed {seed}: no local folder: {error}"),
        }
    } else if in_sqlite_file(&sim.config, seed) {
        Some(sqlite_file(seed))
    } else {
        None
    };
    let objects: Shared = match &folder {
        Some(folder) => Arc::clone(folder) as _,
        None => Arc::new(InMemory::new()),
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
    if config.wide_run_ids {
        checker.set_folds_case();
    }
    checker.set_clock_skew(config.clock_skew_ms);
    if config.power_loss > 0.0 {
        checker.remember_unsynced_deletes();
    }
    if let Some(sealing) = &sealing {
        checker.event(format!("the stores are {}", sealing.describe()));
    }
    let deployed = Arc::default();
    let codes = CodesRun::default();
    assert!(
        !config.versioned || config.roll_every.is_some(),
        "a versioned deploy is a rolling deploy: set Simulation::rolling_deploy_at"
    );
    let ledger = Ledger {
        checker: checker.clone(),
        deployed: Arc::clone(&deployed),
        versioned: config.versioned,
        codes: codes.clone(),
        cancels: ObservedCancels::default(),
    };
    // A rolling deploy's new code, beside the old: made with a ledger of
    // its own that says it is deployed (the old code's never does).
    let new_ledger = config.roll_every.map(|_| Ledger {
        deployed: Arc::new(true.into()),
        ..ledger.clone()
    });
    let workflow = (sim.make_workflow)(ledger.clone());
    let new_workflow = new_ledger.clone().map(&sim.make_workflow);
    // In a versioned deploy the two codes are two versions of the workflow
    // (the worker loops make theirs alike).
    let (workflow, new_workflow) = if config.versioned {
        (
            workflow.with_version(OLD_VERSION),
            new_workflow.map(|new| new.with_version(NEW_VERSION)),
        )
    } else {
        (workflow, new_workflow)
    };
    let loops = sim.loops.as_ref().map(|make| make(ledger));
    let new_loops = (sim.loops.as_ref()).and_then(|make| new_ledger.map(|ledger| make(ledger)));
    // `InMemory`, memo's local folder and a SQLite file list in order; a
    // case-folding store does not.
    let ordered = !config.wide_run_ids;
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
            unanswered: Vec::new(),
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
        new_workflow: new_workflow.as_ref(),
        rolled: 0,
        old_code_conflicts: 0,
        other_version_skips: Arc::default(),
        shared_calls: Arc::default(),
        codes,
        workers: Vec::new(),
        operator: None,
        misconfigured: None,
        next_process: 0,
        reader: config.cached_reader.then(|| CachedReader::new(&objects)),
        paused_until: vec![0; config.workers],
        tasks: Vec::new(),
        runs,
        next_task: 0,
        polls: 0,
        faults: 0,
        crashes: 0,
        undone_deletes: 0,
        sends: 0,
        jump: None,
        deleted_alone: Arc::default(),
        rechecked_elsewhere: Arc::default(),
        unfinished_deletes: Arc::default(),
        foreign,
        folder,
        plants: Vec::new(),
        removed_plants: Vec::new(),
        deployed,
        loops,
        new_loops,
        ordered,
        stalled: Arc::default(),
        sealing: sealing.clone(),
        rotation: rotation::Rotation::default(),
    };
    let checker = world.checker.clone();
    checker::while_active(&checker, || runtime.block_on(world.run()));
    if let Some(left) = sealing.as_ref().and_then(Sealing::keys_left) {
        checker.event(format!("{left} data key(s) left in the key store"));
    }
    let rotated_to =
        |file: KeyFile| (sealing.as_ref()).is_some_and(|s| s.rotates() && s.key_file() >= file);
    let violations = world.checker.violations();
    if violations.is_empty() {
        Ok(History {
            seed,
            events: world.checker.events(),
            polls: world.polls,
            faults: world.faults + world.live_faults(),
            crashes: world.crashes,
            undone_deletes: world.undone_deletes,
            old_code_conflicts: world.old_code_conflicts,
            other_version_skips: (world.other_version_skips)
                .load(std::sync::atomic::Ordering::Relaxed),
            shared_rewrites: world.shared_calls.rewrites(),
            keys_promoted: u64::from(rotated_to(KeyFile::Promoted)),
            keys_retired: u64::from(rotated_to(KeyFile::Retired)),
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

/// Whether the history of `seed` runs on a SQLite file rather than
/// `InMemory` (a seeded share of them, with `Simulation::sqlite_share`).
fn in_sqlite_file(config: &Config, seed: u64) -> bool {
    config.sqlite_share > 0.0
        && StdRng::seed_from_u64(seed ^ 0x5017_17e5).random_bool(config.sqlite_share)
}

/// A fresh SQLite file for the history of `seed`.
#[cfg(feature = "sqlite")]
fn sqlite_file(seed: u64) -> Arc<Folder> {
    match Folder::sqlite(seed) {
        Ok(file) => Arc::new(file),
        Err(error) => panic!("simulation seed {seed}: no SQLite file: {error}"),
    }
}

/// Without the `sqlite` feature no share of seeds is drawn for one.
#[cfg(not(feature = "sqlite"))]
fn sqlite_file(_seed: u64) -> Arc<Folder> {
    unreachable!("a share of seeds on SQLite is set with the `sqlite` feature only")
}

/// Whether foreign objects are planted in the history of `seed` (a seeded
/// share of them, with [`Simulation::foreign_objects`]).
fn with_foreign_objects(config: &Config, seed: u64) -> bool {
    config.foreign_objects > 0.0
        && StdRng::seed_from_u64(seed ^ 0xf0_4e19_0b1e).random_bool(config.foreign_objects)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

struct SimRun<I> {
    run_id: RunId,
    input: I,
    delivered: bool,
    /// The submissions to a worker loop that got no answer yet (neither
    /// `Ok` nor the refusal of a run of the id with another input), as
    /// their task and the content key of the input they delivered: each
    /// one's caller submits its input again.
    unanswered: Vec<(u64, String)>,
    last_error: Option<String>,
}

struct Worker {
    runtime: Runtime,
    faults: Arc<FaultInjectingStore<Arc<dyn ObjectStore>>>,
    /// Its worker loop, with [`Simulation::worker_loops`].
    looped: Option<crate::workflow::Worker>,
    /// Held while its loop counts as spawned ([`Simulation::spawned_loops`]):
    /// dropped with the process.
    spawned: Option<crate::workflow::Polling>,
    /// Set by its store when a memo entry it wrote landed in a deleted or
    /// ended incarnation (with [`Simulation::pauses`]).
    late_write: Arc<std::sync::atomic::AtomicBool>,
    /// Its retention sweeper, made at its first sweep and kept for the
    /// process's life, as a worker's is (what a pass proved of its store,
    /// and the recheck markers it left for its next pass, carry over).
    sweeper: Option<crate::retention::RetentionSweeper>,
    /// The key file it read at its start, in a sealed history.
    key_file: Option<KeyFile>,
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
    /// A submission to a worker loop ended: the run, its result, and the
    /// content key of the input it delivered (as for `Run`).
    Submitted(usize, Result<(), String>, Option<String>),
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
    /// The workflow, of the old code if a rolling deploy comes.
    workflow: &'w Workflow<F>,
    /// A rolling deploy's new code ([`Simulation::rolling_deploy_at`](super::Simulation::rolling_deploy_at)).
    new_workflow: Option<&'w Workflow<F>>,
    /// How many workers a rolling deploy has restarted on the new code:
    /// the first `rolled`.
    rolled: usize,
    /// Attempts of the old code that met a history the new code wrote.
    old_code_conflicts: u64,
    /// Due runs a worker's poll left for a worker that registers their
    /// version ([`Simulation::versioned_deploy`](super::Simulation::versioned_deploy)).
    other_version_skips: Arc<std::sync::atomic::AtomicU64>,
    /// What the calls of shared keys got ([`Simulation::shared_memos`](super::Simulation::shared_memos)).
    shared_calls: Arc<shared::Calls>,
    /// Which code ran the step bodies of each run, in a versioned deploy.
    codes: CodesRun,
    workers: Vec<Option<Worker>>,
    /// The operator process beside the workers, with
    /// [`Simulation::operator`].
    operator: Option<Worker>,
    /// The operator's process with the wrong runtime-store prefix, with
    /// [`Simulation::wrong_prefix_operator`].
    misconfigured: Option<Worker>,
    /// The processes started so far: each has its own entry cache.
    next_process: u64,
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
    /// Objects power losses brought back ([`Simulation::power_loss`](super::Simulation::power_loss)).
    undone_deletes: u64,
    sends: u64,
    /// A clock jump drawn and not made yet: with
    /// [`Simulation::check_signal_latency`](super::Simulation::check_signal_latency),
    /// each jump waits for the check that comes before it.
    jump: Option<u64>,
    /// The incarnations deleted with `RuntimeStore::delete_run` alone: their
    /// memo entries and markers are left on purpose (see [`Self::reuse_random`]).
    deleted_alone: Arc<Mutex<Vec<(RunId, Incarnation)>>>,
    /// The incarnations whose recheck marker the misconfigured operator
    /// deleted: their tombstones are left on purpose (see `misprefix.rs`).
    rechecked_elsewhere: Arc<Mutex<Vec<(RunId, Incarnation)>>>,
    /// Runtime-store deletions that have not returned `Ok` (yet).
    unfinished_deletes: Arc<Mutex<Vec<(RunId, Incarnation)>>>,
    /// The shared store as workers see it, with foreign objects planted in
    /// it ([`Simulation::foreign_objects`], in this seed).
    foreign: Option<Arc<Foreign>>,
    /// The local folder or SQLite file the history runs on, if it does:
    /// each process opens an instance of its own over it (see
    /// [`backend`](Self::backend)).
    folder: Option<Arc<Folder>>,
    /// The foreign objects standing, with the poll count they stand until.
    plants: Vec<(Path, u64)>,
    /// The foreign objects removed while tasks that may have read them still
    /// run, with the first task id started after the removal.
    removed_plants: Vec<(Path, u64)>,
    /// Whether the workers run the new code ([`Simulation::deploy_at`]).
    deployed: Arc<std::sync::atomic::AtomicBool>,
    /// The worker loops, with [`Simulation::worker_loops`] (of the old
    /// code if a rolling deploy comes).
    loops: Option<Loops<I>>,
    /// The worker loops of a rolling deploy's new code.
    new_loops: Option<Loops<I>>,
    /// Whether the shared store lists in order (for the worker loops).
    ordered: bool,
    /// The run-pointer deletes every process has in flight, with slow
    /// deletes (`slow.rs`).
    stalled: slow::Stalled,
    /// How the history's processes seal what they store, if they do (and
    /// the key file, if its key rotates).
    sealing: Option<Sealing>,
    /// A key rotation under way ([`Simulation::key_rotation`](super::Simulation::key_rotation)).
    rotation: rotation::Rotation,
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
            let worker = self.start_worker(w, self.config.has(Event::StoreFault));
            self.workers.push(Some(worker));
            self.checker.event(format!("worker {w} started"));
        }
        if self.config.operator {
            self.operator = Some(self.start_operator(self.config.has(Event::StoreFault)));
            self.checker.event("operator started".into());
        }
        if self.config.wrong_prefix_operator {
            self.misconfigured = Some(self.start_misconfigured());
        }
        // Idle workers make no history: events come until some task runs.
        while self.polls < self.config.polls {
            self.deploy_when_due();
            // Drawn only with key rotation, so that the other worlds'
            // histories stay what they were.
            if self.config.key_rotation && self.rng.random_bool(rotation::ROLLOUT_RATE) {
                self.key_rollout_step();
            }
            if self.tasks.is_empty() || self.rng.random_bool(self.config.event_rate) {
                // Only a world with an operator draws for it, so that the
                // default world's histories stay what they were.
                let config = self.config;
                if config.operator && self.rng.random_bool(OPERATOR_SHARE) {
                    self.operator_visit();
                } else if config.standalone_memos && self.rng.random_bool(STANDALONE_SHARE) {
                    self.standalone_event();
                } else if config.shared_memos && self.rng.random_bool(SHARED_SHARE) {
                    self.shared_event();
                } else if config.wrong_prefix_operator && self.rng.random_bool(WRONG_PREFIX_SHARE) {
                    self.wrong_prefix_sweep();
                } else {
                    self.random_event();
                }
            }
            if let Some(ms) = self.jump.take() {
                self.check_signalled_runs_woken().await;
                self.make_jump(ms);
            }
            if self.config.has(Event::Crash) && self.rng.random_bool(self.config.crash_rate) {
                // Only a world with power losses draws for one, so that the
                // other worlds' histories stay what they were.
                let power_loss = self.config.power_loss;
                if power_loss > 0.0 && self.rng.random_bool(power_loss) {
                    self.power_loss().await;
                } else {
                    self.crash_random_worker();
                }
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
            if self.config.pauses {
                self.kill_late_writers();
            }
        }
        self.settle().await;
        for run in 0..self.runs.len() {
            self.cached_read(Some(run));
        }
        self.final_checks();
        self.check_sealed_store().await;
        if self.config.shared_memos {
            self.check_long_values_kept().await;
        }
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

    /// Faults stop, crashed workers restart, time moves on, and every open
    /// run is redelivered (with every signal) until it is terminal.
    async fn settle(&mut self) {
        self.finish_rolling_deploy();
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
                    let restarted = self.start_worker(worker, false);
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
}
