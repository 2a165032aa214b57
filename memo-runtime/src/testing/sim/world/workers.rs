//! The workers' processes: their stores, starting, crashing, restarting
//! and recovering them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use object_store::ObjectStore;
use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::{Clock, ManualClock};
use crate::testing::sim::checker::TaskKind;
use crate::testing::sim::compat;
use crate::testing::sim::stores::{Audited, Preemptible};
use crate::testing::sim::{Event, Ledger};
use crate::testing::{
    CaseFoldingStore, FaultInjectingStore, FaultRule, NameLimitedStore, RequestKind,
};
use crate::workflow::{Recovery, RetryPolicy, Runtime, Workflow, WorkflowFn};

use super::slow::SlowDeletes;
use super::{OPERATOR, Outcome, Worker, World};

/// How long a delete a local folder made without a sync may be undone by
/// a power loss: ext4 commits its journal every 5 s by default (and at any
/// process's sync sooner), so an older delete has reached the disk.
pub(super) const JOURNAL_COMMIT_MS: u64 = 5_000;

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// The shared objects as a new process sees them through the backend:
    /// on a local folder or a SQLite file, through an instance of its own
    /// (unless foreign objects are planted); with wide run ids, as a
    /// backend with name limits and case-insensitive names would show
    /// them; with foreign objects, with those planted in it.
    pub(super) fn backend(&self) -> Arc<dyn ObjectStore> {
        let shared: Arc<dyn ObjectStore> = match (&self.foreign, &self.folder) {
            // Planted in through one instance, which every process shares.
            (Some(foreign), _) => Arc::clone(foreign) as _,
            // A process opens the folder or file itself, as a deployment's
            // processes do: nothing one instance keeps in memory is shared.
            (None, Some(folder)) => match folder.another() {
                Ok(instance) => Arc::new(instance),
                Err(error) => panic!("a process could not open {folder}: {error}"),
            },
            (None, None) => Arc::clone(self.checker.objects()),
        };
        if self.config.wide_run_ids {
            Arc::new(CaseFoldingStore::new(NameLimitedStore::new(shared)))
        } else {
            shared
        }
    }

    /// A new process's clock: the shared one, or, with
    /// [`Simulation::clock_skew`](crate::testing::sim::Simulation::clock_skew),
    /// the shared one off by an offset drawn now (drawn only then, so that
    /// other worlds' histories stay what they were).
    fn process_clock(&mut self) -> Arc<dyn Clock> {
        let max = i64::try_from(self.config.clock_skew_ms).unwrap_or(i64::MAX);
        if max == 0 {
            return Arc::clone(&self.clock) as _;
        }
        let offset_ms = self.rng.random_range(-max..=max);
        self.checker.event(format!(
            "process {} runs {offset_ms:+} ms off the shared clock",
            self.next_process
        ));
        Arc::new(OffsetClock {
            shared: Arc::clone(&self.clock),
            offset_ms,
        })
    }

    /// Starts worker `worker`'s process: its own store instances over the
    /// shared objects, on the code its slot runs (the new one once a
    /// rolling deploy restarted it).
    pub(super) fn start_worker(&mut self, worker: usize, faulty: bool) -> Worker {
        let new_code = self.on_new_code(worker);
        self.start_process(faulty, false, new_code)
    }

    /// The operator's process: a worker's, but for its runtime store, which
    /// `memoctl`'s is (`memo-cli`'s `store.rs`): its listings delete no
    /// stale hint, and they stop at the page on a store that lists in
    /// order.
    pub(super) fn start_operator(&mut self, faulty: bool) -> Worker {
        self.start_process(faulty, true, false)
    }

    fn start_process(&mut self, faulty: bool, operator: bool, new_code: bool) -> Worker {
        let shared = self.backend();
        let faults = Arc::new(FaultInjectingStore::new(shared).with_seed(self.rng.random()));
        if faulty && self.config.fault_rate > 0.0 {
            let half = self.config.fault_rate / 2.0;
            for kind in RequestKind::ALL {
                faults.inject(FaultRule::fail_before(kind).with_probability(half));
                faults.inject(FaultRule::fail_after(kind).with_probability(half));
            }
        }
        // Drawn only with slow deletes, so that other worlds' histories
        // stay what they were.
        let share = self.config.slow_deletes;
        let seed = if share > 0.0 { self.rng.random() } else { 0 };
        let mut slow =
            SlowDeletes::new(Arc::clone(&faults), share, seed, Arc::clone(&self.stalled));
        if share > 0.0 && self.config.early_pointer_deletes {
            slow = slow.landing_before_creates(self.rng.random());
        }
        let late_write = Arc::new(AtomicBool::new(false));
        let objects: Arc<dyn ObjectStore> = Arc::new(Preemptible {
            inner: slow,
            checker: self.checker.clone(),
            late_write: self.config.pauses.then(|| Arc::clone(&late_write)),
        });
        let (memo, mut runs) = compat::open_process_stores(objects);
        if operator {
            runs = runs.with_read_only_listings();
            if self.ordered {
                runs = runs.with_ordered_listings();
            }
        }
        let store = Audited {
            inner: runs,
            checker: self.checker.clone(),
        };
        // A process of its own: its entry cache sees only its own clears.
        self.next_process += 1;
        let memo = memo.in_simulated_process(self.next_process);
        let builder = Runtime::builder()
            .memo_store(memo)
            .runtime_store(Arc::new(store))
            .clock(self.process_clock())
            .retention(self.config.retention)
            // The default holds the process id: the seed's own, to replay.
            .worker_id(format!("sim-{:08x}", crate::run_id::unique_token() as u32))
            .marker_retry(
                RetryPolicy::attempts(3)
                    .with_min_delay(Duration::from_millis(20))
                    .without_jitter(),
            );
        let builder = compat::configure(builder, self.config.lease);
        // Told the clocks' skew: two processes' clocks, each off the shared
        // one by up to the world's skew either way, disagree by up to twice
        // it. (Without skew, the runtime's default: half the lease.)
        let builder = match self.config.clock_skew_ms {
            0 => builder,
            skew => builder.max_clock_skew(Duration::from_millis(skew.saturating_mul(2))),
        };
        // With worker loops, an attempt suspends at every timer, for a
        // worker's poll to wake it.
        let builder = match &self.loops {
            Some(_) => builder.timer_wait(Duration::ZERO),
            None => builder,
        };
        let runtime = builder
            .build()
            .expect("a memo store and a runtime store are set");
        let loops = if new_code {
            self.new_loops.as_ref()
        } else {
            self.loops.as_ref()
        };
        let looped = loops.map(|loops| (loops.worker)(runtime.clone(), self.ordered));
        // Drawn only with spawned loops, so that other worlds' histories
        // stay what they were.
        let share = self.config.spawned_loops;
        let spawned = match &looped {
            Some(looped) if share > 0.0 && self.rng.random_bool(share) => {
                Some(crate::workflow::Polling::start(looped))
            }
            _ => None,
        };
        if spawned.is_some() {
            self.checker.event(format!(
                "process {}'s worker loop counts as spawned",
                self.next_process
            ));
        }
        Worker {
            runtime,
            faults,
            looped,
            spawned,
            late_write,
            sweeper: None,
            key_file: crate::testing::sim::sealed::key_file(),
        }
    }

    /// With pauses, a worker whose memo entry just landed in an
    /// incarnation deleted or ended meanwhile (a stale attempt's late
    /// write) dies there half the time, before its check after the write
    /// can take the entry back: only a recheck of the swept run reaches it
    /// then if a sweep had cleared the run's entries before it landed (in
    /// an ended run that no sweep is deleting, the sweep to come clears it).
    /// Until session 41 only a write into a deleted incarnation was fatal,
    /// and one that landed while a sweep deleted the run, between its clear
    /// and the records' deletion, met a crash only by chance.
    pub(super) fn kill_late_writers(&mut self) {
        for worker in 0..self.workers.len() {
            let wrote_late = self.workers[worker]
                .as_ref()
                .is_some_and(|w| w.late_write.swap(false, Ordering::AcqRel));
            if wrote_late && self.rng.random_bool(0.5) {
                self.checker.event(format!(
                    "worker {worker} dies right after a late write into an ended or deleted incarnation"
                ));
                self.crash(worker);
            }
        }
    }

    pub(super) fn live_faults(&self) -> u64 {
        self.workers
            .iter()
            .flatten()
            .chain(&self.operator)
            .map(|w| w.faults.faults_injected())
            .sum()
    }

    /// The runtime of worker `worker` (or of the operator, [`OPERATOR`]).
    pub(super) fn runtime_of(&self, worker: usize) -> Runtime {
        let process = if worker == OPERATOR {
            self.operator.as_ref()
        } else {
            self.workers[worker].as_ref()
        };
        process.expect("a live worker").runtime.clone()
    }

    pub(super) fn crash_random_worker(&mut self) {
        if let Some(worker) = self.random_live_worker() {
            self.crash(worker);
        }
    }

    pub(super) fn crash(&mut self, worker: usize) {
        if let Some(dead) = self.workers[worker].take() {
            self.faults += dead.faults.faults_injected();
        }
        self.crashes += 1;
        let dropped = self.drop_tasks_of(worker);
        self.checker.event(format!(
            "worker {worker} crashes, dropping {dropped} task(s)"
        ));
    }

    /// Drops every task of `worker` (a worker's index, or [`OPERATOR`]),
    /// as its process's death does: how many.
    pub(super) fn drop_tasks_of(&mut self, worker: usize) -> usize {
        let mut dropped = 0;
        self.tasks.retain(|task| {
            let dies = task.worker == worker;
            if dies {
                dropped += 1;
                self.checker.task_died(task.id);
                self.checker.task_ended(task.id);
            }
            !dies
        });
        dropped
    }

    /// Worker `worker` restarts as a deploy restarts it: stopped where it
    /// is (if it runs), `why` recorded, started again, and it recovers its
    /// runs as a worker's start-up does (with worker loops, the loops'
    /// polls take them over instead).
    pub(super) fn restart_for(&mut self, worker: usize, why: String) {
        if self.workers[worker].is_some() {
            self.crash(worker);
        }
        self.checker.event(why);
        let started = self.start_worker(worker, self.config.has(Event::StoreFault));
        self.workers[worker] = Some(started);
        if self.loops.is_none() {
            self.recover(worker);
        }
    }

    /// The power fails ([`Simulation::power_loss`]): every worker process
    /// dies, and the status hints and due-run entries deleted in the last
    /// [`JOURNAL_COMMIT_MS`] come back as they were.
    ///
    /// [`Simulation::power_loss`]: crate::testing::sim::Simulation::power_loss
    pub(super) async fn power_loss(&mut self) {
        for worker in 0..self.workers.len() {
            if self.workers[worker].is_some() {
                self.crash(worker);
            }
        }
        let back = self.checker.take_unsynced(JOURNAL_COMMIT_MS);
        self.undone_deletes += back.len() as u64;
        for (path, bytes) in &back {
            let objects = self.checker.objects();
            let put =
                object_store::ObjectStoreExt::put(objects.as_ref(), path, bytes.clone().into())
                    .await;
            if let Err(e) = put {
                panic!("a power loss could not put {path} back: {e}");
            }
        }
        self.checker.event(format!(
            "power loss: every worker dies; {} hint(s) and due entries deleted in the last 5 s come back",
            back.len()
        ));
    }

    /// Restarts a crashed worker, which then recovers its workflow's runs.
    pub(super) fn restart_random(&mut self) {
        let Some(worker) = self.workers.iter().position(Option::is_none) else {
            return;
        };
        let started = self.start_worker(worker, self.config.has(Event::StoreFault));
        self.workers[worker] = Some(started);
        self.checker.event(format!("worker {worker} restarts"));
        let quiet = !self
            .tasks
            .iter()
            .any(|t| matches!(t.kind, TaskKind::Run | TaskKind::Recover));
        // With worker loops, the loops take over the crashed worker's runs;
        // with spawned ones, half the restarted processes also recover at
        // start-up, as the guide's deployment does (`Worker::recover`), and
        // half stand for a process that never came back, replaced by one
        // that only polls: the other workers' polls alone must then start
        // what the dead one had accepted. (The restarts of the end of a
        // history do not recover either.)
        if self.loops.is_some() {
            if self.config.spawned_loops > 0.0 && self.rng.random_bool(0.5) {
                self.recover_with_loop(worker);
            }
        } else if self.config.has(Event::ConcurrentDelivery) || quiet {
            self.recover(worker);
        }
    }

    /// `worker`'s loop resumes every open run ([`Worker::recover`]).
    ///
    /// [`Worker::recover`]: crate::workflow::Worker::recover
    fn recover_with_loop(&mut self, worker: usize) {
        let looped = self.workers[worker]
            .as_ref()
            .and_then(|w| w.looped.clone())
            .expect("a live worker with a loop");
        self.checker
            .event(format!("worker {worker}'s loop recovers"));
        let future = async move { recovered(looped.recover().await) };
        self.spawn(worker, TaskKind::Recover, None, Box::pin(future));
    }

    pub(super) fn recover(&mut self, worker: usize) {
        let runtime = self.workers[worker]
            .as_ref()
            .expect("a live worker")
            .runtime
            .clone();
        let workflow = self.workflow_of(worker);
        let older = self.older_version_of(worker);
        self.checker.event(format!("recover on worker {worker}"));
        let future = async move {
            let recovery = recovered(runtime.recover(workflow).await);
            // A worker on the new code of a versioned deploy recovers the
            // old version's runs too.
            match older {
                Some(older) => both(recovery, recovered(runtime.recover(older).await)),
                None => recovery,
            }
        };
        self.spawn(worker, TaskKind::Recover, None, Box::pin(future));
    }
}

/// How a recovery ended, with each resumed run's result, as messages.
fn recovered<O, E: std::fmt::Display>(recovery: crate::Result<Recovery<O, E>>) -> Outcome {
    Outcome::Recover(
        recovery
            .map(|recovery| {
                recovery
                    .resumed
                    .into_iter()
                    .map(|(run_id, result)| (run_id, result.map(drop).map_err(|e| e.to_string())))
                    .collect()
            })
            .map_err(|e| e.to_string()),
    )
}

/// Two recoveries of one worker, as one: their resumed runs, or the first
/// error.
fn both(first: Outcome, second: Outcome) -> Outcome {
    match (first, second) {
        (Outcome::Recover(Ok(mut resumed)), Outcome::Recover(Ok(more))) => {
            resumed.extend(more);
            Outcome::Recover(Ok(resumed))
        }
        (Outcome::Recover(Err(error)), _) | (_, Outcome::Recover(Err(error))) => {
            Outcome::Recover(Err(error))
        }
        (first, _) => first,
    }
}

/// A process's clock off the shared one by `offset_ms`
/// ([`Simulation::clock_skew`](crate::testing::sim::Simulation::clock_skew)).
#[derive(Debug)]
struct OffsetClock {
    shared: Arc<ManualClock>,
    offset_ms: i64,
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> u64 {
        self.shared.now_ms().saturating_add_signed(self.offset_ms)
    }
}
