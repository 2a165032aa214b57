//! A deploy in the middle of a simulated history: at a chosen poll every
//! worker stops where it is, as a deploy's restart kills a process, and
//! starts again with the new code, then recovers its runs
//! ([`Simulation::deploy_at`]); or the workers restart one after another,
//! the old code and the new one driving runs side by side meanwhile, as a
//! rolling deploy does ([`Simulation::rolling_deploy_at`]).
//! [`Ledger::deployed`] tells the workflow which code it is. The history's
//! invariants are the usual ones: a deploy that patches its workflow
//! correctly ([`Context::patched`]) leaves every run to end, with no side
//! effect run twice and no non-determinism but the old code's, in a rolling
//! deploy, meeting a run the new code took down its patched branch (that
//! attempt stops and leaves the run open, for a worker on the new code).
//!
//! [`Context::patched`]: crate::workflow::Context::patched

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::World;
use crate::memo::Memo;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::RunRecord;
use crate::testing::sim::loops::NEW_VERSION;
use crate::testing::sim::{Event, Ledger, Simulation};
use crate::workflow::{Workflow, WorkflowFn};

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// Deploys new code at poll `poll` of each history (before the faults
    /// stop): every worker is stopped where it is (its attempts dropped,
    /// as a crash drops them) and restarted, and from then on
    /// [`Ledger::deployed`] is `true`. Write the workflow with both codes,
    /// the new one where `ledger.deployed()` (the change under test: a
    /// step behind [`Context::patched`], a step retired with
    /// [`Context::deprecate_patch`]): runs in flight continue on the new
    /// code, and the history checks that they all still end, with every
    /// invariant kept.
    ///
    /// [`Context::patched`]: crate::workflow::Context::patched
    /// [`Context::deprecate_patch`]: crate::workflow::Context::deprecate_patch
    #[must_use]
    pub fn deploy_at(mut self, poll: u64) -> Self {
        self.config.deploy_at = Some(poll);
        self.config.roll_every = None;
        self
    }

    /// Deploys new code as a rolling deploy does: at poll `poll` worker 0
    /// is stopped where it is and restarted with the new code, `every`
    /// polls later worker 1, and so on (all of them before the faults
    /// stop). Meanwhile the workers not restarted yet drive runs with the
    /// old code, beside those on the new one, on the same store: each
    /// worker's workflow is made with a [`Ledger`] whose
    /// [`deployed`](Ledger::deployed) says which code it runs.
    ///
    /// A worker on the old code that meets a history the new code wrote (a
    /// patch's marker where it calls a step) stops its attempt with
    /// [`Error::NonDeterminism`](crate::Error::NonDeterminism), and the run
    /// stays open: that is what a rolling deploy meets, and it is counted
    /// ([`History::old_code_conflicts`](super::History::old_code_conflicts)),
    /// not taken for a broken invariant. A non-determinism of the new code
    /// still is one, and every run must still end, with every other
    /// invariant kept.
    ///
    /// With [`worker_loops`](Self::worker_loops), the workflow factory is
    /// called once per code: each worker's loop registers its own.
    #[must_use]
    pub fn rolling_deploy_at(mut self, poll: u64, every: u64) -> Self {
        self.config.deploy_at = Some(poll);
        self.config.roll_every = Some(every);
        self
    }

    /// Makes a [rolling deploy](Self::rolling_deploy_at) the guide's
    /// deploy of a change too large for a patch: the old code is version
    /// `"1"` of the workflow and the new code version `"2"`
    /// ([`Workflow::with_version`]), and a worker on the new code runs
    /// both. With [worker loops](Self::worker_loops), a loop on the new
    /// code registers both and submits new runs on `"2"`, and a loop on the
    /// old code registers `"1"` alone, its polls leaving the runs of `"2"`
    /// open ([`WakeReport::unknown`]). With deliveries, a worker on the new
    /// code delivers each run to the version it started on (its
    /// [`status`](crate::workflow::Runtime::status) first: none, or
    /// `"2"`, is the new code's) and recovers both, and one on the old code
    /// refuses the runs of `"2"`
    /// ([`Error::VersionNotRegistered`](crate::Error::VersionNotRegistered)).
    /// Both are counted in
    /// [`History::other_version_skips`](super::History::other_version_skips).
    /// Each run so continues on the code it started on, however far the
    /// new code departs from the old: no non-determinism is excused, not
    /// even the old code's, and every run must still end. Panics at the
    /// first history without `rolling_deploy_at`.
    ///
    /// [`WakeReport::unknown`]: crate::workflow::WakeReport::unknown
    #[must_use]
    pub fn versioned_deploy(mut self, on: bool) -> Self {
        self.config.versioned = on;
        self
    }
}

/// Per run incarnation, whether the old code and the new one ran step
/// bodies of it: `[old, new]`.
type Codes = HashMap<(RunId, Incarnation), [bool; 2]>;

/// Which code ran the step bodies of each run incarnation in a
/// [versioned deploy](Simulation::versioned_deploy).
#[derive(Debug, Clone, Default)]
pub(in crate::testing::sim) struct CodesRun(Arc<Mutex<Codes>>);

impl CodesRun {
    /// A step body of `memo`'s run starts on the new code or the old one.
    pub(in crate::testing::sim) fn ran(&self, memo: &Memo, new_code: bool) {
        let key = (memo.run_id().clone(), memo.incarnation());
        let mut codes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        codes.entry(key).or_default()[usize::from(new_code)] = true;
    }

    /// Which codes ran step bodies of the run `record` is.
    fn of(&self, record: &RunRecord) -> [bool; 2] {
        let codes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (record.run_id.clone(), record.incarnation);
        codes.get(&key).copied().unwrap_or_default()
    }
}

impl Ledger {
    /// Whether the code this ledger was handed to is the new code of the
    /// history's deploy: after [`Simulation::deploy_at`]'s deploy, every
    /// workflow's; in a [`Simulation::rolling_deploy_at`], the workflow of
    /// a worker restarted by the deploy. Always `false` without a deploy.
    pub fn deployed(&self) -> bool {
        self.deployed.load(Ordering::Acquire)
    }

    /// This ledger as the old code's, for a worker on the new code of a
    /// [versioned deploy](Simulation::versioned_deploy), which registers
    /// both.
    pub(in crate::testing::sim) fn old_code(&self) -> Ledger {
        Ledger {
            deployed: std::sync::Arc::new(false.into()),
            ..self.clone()
        }
    }
}

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> crate::workflow::Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// The deploy, once its poll has come: every worker stops and starts
    /// again on the new code, and recovers its runs (one worker, unless
    /// concurrent deliveries are simulated); in a rolling deploy, the next
    /// worker whose turn has come.
    pub(super) fn deploy_when_due(&mut self) {
        let Some(at) = self.config.deploy_at else {
            return;
        };
        if let Some(every) = self.config.roll_every {
            let turn = at.saturating_add(every.saturating_mul(self.rolled as u64));
            if self.polls >= turn {
                self.roll_next();
            }
            return;
        }
        if self.polls < at || self.deployed.load(Ordering::Acquire) {
            return;
        }
        for worker in 0..self.workers.len() {
            if self.workers[worker].is_some() {
                self.crash(worker);
            }
        }
        // No attempt of the old code is left: the flag switches every
        // attempt from here on to the new code.
        self.deployed.store(true, Ordering::Release);
        self.checker
            .event("deploy: every worker restarts with the new code".into());
        for worker in 0..self.workers.len() {
            let started = self.start_worker(worker, self.config.has(Event::StoreFault));
            self.workers[worker] = Some(started);
            self.checker.event(format!("worker {worker} restarts"));
        }
        let recovering = if self.config.has(Event::ConcurrentDelivery) {
            self.workers.len()
        } else {
            1
        };
        for worker in 0..recovering {
            self.recover(worker);
        }
    }

    /// The rest of a rolling deploy, at once: before the faults stop, every
    /// worker runs the new code.
    pub(super) fn finish_rolling_deploy(&mut self) {
        if self.config.roll_every.is_some() {
            while self.rolled < self.workers.len() {
                self.roll_next();
            }
        }
    }

    /// The next worker of a rolling deploy stops where it is and restarts
    /// on the new code, and recovers its runs as a worker's start-up does
    /// (with worker loops, the loops' polls take them over instead).
    fn roll_next(&mut self) {
        let worker = self.rolled;
        if worker >= self.workers.len() {
            return;
        }
        self.rolled += 1;
        self.restart_for(
            worker,
            format!("rolling deploy: worker {worker} restarts with the new code"),
        );
    }

    /// In a versioned deploy, a violation if code other than that of the
    /// version the run `record` is recorded with ran a step body of it.
    pub(super) fn check_version_code(&self, record: &RunRecord) {
        let [old, new] = self.codes.of(record);
        let version = record.workflow_version.as_deref();
        let other = match version {
            Some(NEW_VERSION) => old.then_some("old"),
            _ => new.then_some("new"),
        };
        if let Some(other) = other {
            self.checker.violation(
                "a run continues only on the version it started on",
                format!(
                    "run {} of version {version:?}: the {other} code ran a step body of it",
                    record.run_id
                ),
            );
        }
    }

    /// Whether worker `worker` runs the new code of a rolling deploy.
    pub(super) fn on_new_code(&self, worker: usize) -> bool {
        worker < self.rolled
    }

    /// Whether worker `worker` still runs the old code while a rolling
    /// deploy has put the new code on some other worker.
    pub(super) fn on_old_code_beside_new(&self, worker: usize) -> bool {
        self.rolled > 0 && worker < self.workers.len() && !self.on_new_code(worker)
    }

    /// The old code's version, which a worker on the new code of a
    /// versioned deploy runs too (for the runs that started on it); `None`
    /// for any other worker.
    pub(super) fn older_version_of(&self, worker: usize) -> Option<&'w Workflow<F>> {
        (self.config.versioned && self.on_new_code(worker)).then_some(self.workflow)
    }

    /// The workflow worker `worker` runs.
    pub(super) fn workflow_of(&self, worker: usize) -> &'w Workflow<F> {
        match self.new_workflow {
            Some(new) if self.on_new_code(worker) => new,
            _ => self.workflow,
        }
    }
}
