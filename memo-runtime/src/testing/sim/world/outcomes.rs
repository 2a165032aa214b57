//! How a finished task's outcome is checked and recorded.

use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::testing::sim::checker;
use crate::testing::sim::compat::{ErrorKind, classify, fresh_run};
use crate::testing::sim::{Event, Ledger};
use crate::workflow::{Workflow, WorkflowFn};

use super::{Outcome, Task, World};

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    pub(super) fn finished(&mut self, task: &Task<'w>, outcome: Outcome) {
        match outcome {
            Outcome::Run(run, result, delivered) => {
                let label = result
                    .as_ref()
                    .map_or_else(|e| format!("error: {e}"), |()| "ok".into());
                self.checker.event(format!(
                    "task {} (run {}) on worker {} ends: {label}",
                    task.id, self.runs[run].run_id, task.worker
                ));
                self.attempt_ended(task.worker, run, result, delivered.as_deref());
            }
            Outcome::Recover(Ok(resumed)) => {
                self.checker.event(format!(
                    "recover on worker {} ends: {} run(s) resumed",
                    task.worker,
                    resumed.len()
                ));
                for (run_id, result) in resumed {
                    if let Some(run) = self.runs.iter().position(|r| r.run_id == run_id) {
                        self.attempt_ended(task.worker, run, result, None);
                    }
                }
            }
            Outcome::Recover(Err(error)) => {
                self.checker
                    .event(format!("recover on worker {} fails: {error}", task.worker));
                self.check_error(task.worker, None, &error);
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
                    self.check_error(task.worker, None, error);
                }
            }
            Outcome::Submitted(run, result, delivered) => {
                self.checker.event(format!(
                    "submission of {} ends: {result:?}",
                    self.runs[run].run_id
                ));
                // `Ok`, or a run of the id with another input: an answer.
                let answered = result
                    .as_ref()
                    .map_or_else(|e| classify(e) == ErrorKind::InputConflict, |()| true);
                if answered {
                    self.runs[run].unanswered.retain(|(id, _)| *id != task.id);
                }
                match result {
                    Ok(()) => {
                        // A spawned loop is woken by the submission.
                        let spawned = self.workers[task.worker]
                            .as_ref()
                            .is_some_and(|w| w.spawned.is_some());
                        if spawned {
                            self.poll(task.worker);
                        }
                    }
                    Err(error) => {
                        self.attempt_ended(task.worker, run, Err(error), delivered.as_deref());
                    }
                }
            }
        }
    }

    /// A deleted run's id gets one of the inputs at random for its next use.
    pub(super) fn reuse(&mut self, run: usize) {
        let gone = matches!(
            fresh_run(self.checker.objects(), &self.runs[run].run_id),
            Some(Ok(None))
        );
        if gone && !self.sim.inputs.is_empty() {
            let input = self.rng.random_range(0..self.sim.inputs.len());
            self.runs[run].input = self.sim.inputs[input].clone();
        }
        // With slow deletes, the id is used again at once, and (with
        // concurrent deliveries) delivered twice, as a queue that
        // redelivers does: a creation of the new run, and another after
        // it, while a slower deletion of the old one may still be landing.
        let concurrent = self.config.has(Event::ConcurrentDelivery);
        if gone && self.config.slow_deletes > 0.0 && (concurrent || !self.busy(run)) {
            for _ in 0..if concurrent { 2 } else { 1 } {
                if let Some(worker) = self.random_live_worker() {
                    self.deliver(worker, run);
                }
            }
        }
    }

    /// An attempt of `run` on `worker` ended. `delivered`: the content key
    /// of the input a delivery gave (`None` for a recovery, which runs the
    /// stored input).
    pub(super) fn attempt_ended(
        &mut self,
        worker: usize,
        run: usize,
        result: Result<(), String>,
        delivered: Option<&str>,
    ) {
        if let Err(error) = result {
            self.check_error(worker, Some((run, delivered)), &error);
            self.runs[run].last_error = Some(error);
        }
    }

    /// Errors that break an invariant wherever they come from (a task of
    /// `worker`).
    pub(super) fn check_error(
        &mut self,
        worker: usize,
        run: Option<(usize, Option<&str>)>,
        error: &str,
    ) {
        match classify(error) {
            // What a rolling deploy meets: the old code, on a run the new
            // code took down a branch the old one does not have. The
            // attempt stops and the run stays open for the new code. (Not
            // in a versioned deploy: the old code never drives a run of
            // the new version.)
            ErrorKind::NonDeterminism
                if self.on_old_code_beside_new(worker) && !self.config.versioned =>
            {
                self.old_code_conflicts += 1;
                self.checker.event(format!(
                    "worker {worker}, on the old code, meets a history the new code wrote: {error}"
                ));
            }
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
            // A delivery whose start lost the race with its run's end
            // answers with the run's outcome, as one that read it ended.
            ErrorKind::EndedRunConflict => self.checker.violation(
                "a delivery of a run that ended answers with its outcome",
                error.to_string(),
            ),
            // A delivery of a run to a version it did not start on (a
            // worker on the old code of a versioned deploy given a run of
            // the new version): the run stays open for the other code.
            ErrorKind::OtherVersion => {
                (self.other_version_skips).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            ErrorKind::InjectedFault | ErrorKind::Other => {}
        }
    }

    /// A run refused its own input: a violation if the stored input equals
    /// the delivered one (the slot's input, unless `delivered` names it: a
    /// delivery made before the run was deleted and its id reused with
    /// another input is refused rightly).
    pub(super) fn check_input_conflict(
        &mut self,
        run: usize,
        delivered: Option<&str>,
        error: &str,
    ) {
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
}
