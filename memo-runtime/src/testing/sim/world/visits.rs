//! The operator's visits to the store and the long-lived reader's reads.

use std::pin::Pin;

use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::run_id::RunId;
use crate::runtime_store::RunStatus;
use crate::testing::sim::Ledger;
use crate::testing::sim::checker::TaskKind;
use crate::testing::sim::operator::{self, Visit};
use crate::workflow::{Workflow, WorkflowFn};

use super::{OPERATOR, Outcome, World};

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// The long-lived reader and a fresh instance read `run` (a random
    /// one if `None`).
    pub(super) fn cached_read(&mut self, run: Option<usize>) {
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
    pub(super) fn operator_visit(&mut self) {
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
    pub(super) fn send_wrong_signal(&mut self, run: usize, signal: usize) {
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
}
