//! A deploy in the middle of a simulated history
//! ([`Simulation::deploy_at`]): at a chosen poll every worker stops where it
//! is, as a deploy's restart kills a process, and starts again with the new
//! code, then recovers its runs; [`Ledger::deployed`] tells the workflow
//! which code it is. The history's invariants are the usual ones: a deploy
//! that patches its workflow correctly ([`Context::patched`]) leaves every
//! run to end, with no non-determinism and no side effect run twice.
//!
//! [`Context::patched`]: crate::workflow::Context::patched

use std::sync::atomic::Ordering;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::World;
use crate::testing::sim::{Event, Ledger, Simulation};
use crate::workflow::WorkflowFn;

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
        self
    }
}

impl Ledger {
    /// Whether the history's deploy ([`Simulation::deploy_at`]) has
    /// happened: the workers run the new code. Always `false` without one.
    pub fn deployed(&self) -> bool {
        self.deployed.load(Ordering::Acquire)
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
    /// concurrent deliveries are simulated).
    pub(super) fn deploy_when_due(&mut self) {
        let due = self.config.deploy_at.is_some_and(|at| self.polls >= at);
        if !due || self.deployed.load(Ordering::Acquire) {
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
            let started = self.start_worker(self.config.has(Event::StoreFault));
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
}
