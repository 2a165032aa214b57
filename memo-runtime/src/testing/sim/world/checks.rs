//! The end of a history: the sweep of every run and the final checks.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::Clock;
use crate::runtime_store::RunStatus;
use crate::testing::sim::compat::{self, ErrorKind, classify, fresh_run};
use crate::testing::sim::{Ledger, RunOutcome};
use crate::workflow::{Runtime, Workflow, WorkflowFn};

use super::{World, millis};

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// After the history, every run is swept with no retention by a
    /// fault-free process (after its `recover()` marks what needs marking):
    /// then nothing of any run may be left in the store, or some object
    /// was left unreachable, for ever.
    pub(super) async fn sweep_everything(&mut self) {
        // Through the backend the workers wrote through: a process that
        // bypassed its case folding would miss every object whose name the
        // backend folded (the status-hint folders, `Completed` stored as
        // `completed`), which no real process of the deployment could.
        let objects = self.backend();
        let (memo, runs) = compat::open_stores(objects);
        let store: Arc<dyn crate::runtime_store::RuntimeStore> = Arc::new(runs);
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
        // A user of standalone memos marks each standalone run finished
        // when done with it, for the sweep to clear.
        if self.config.standalone_memos {
            for run_id in super::standalone::standalone_runs() {
                if let Err(error) = memo
                    .markers()
                    .write_standalone(&run_id, self.clock.now_ms())
                    .await
                {
                    self.checker
                        .event(format!("marking standalone run {run_id} fails: {error}"));
                }
            }
        }
        // Every worker runs the new code of a rolling deploy by now (in a
        // versioned deploy, its loop registers both versions).
        let workflow = self.new_workflow.unwrap_or(self.workflow);
        let recovered = match (&self.new_loops, self.config.versioned) {
            (Some(loops), true) => {
                let worker = (loops.worker)(runtime.clone(), self.ordered);
                worker.recover().await.map(drop)
            }
            (None, true) => match runtime.recover(self.workflow).await {
                Ok(_) => runtime.recover(workflow).await.map(drop),
                Err(error) => Err(error),
            },
            _ => runtime.recover(workflow).await.map(drop),
        };
        if let Err(error) = recovered {
            self.checker
                .event(format!("the last recover fails: {error}"));
        }
        // Past the rechecks the workers' sweeps left (two leases after each
        // sweep): their second clear of what a stale attempt wrote after the
        // sweep and died before taking back. The last sweeper's own come due
        // at once.
        self.clock
            .advance_ms(millis(self.config.lease.saturating_mul(2)) + 1);
        if self.config.shared_memos {
            // Past every shared entry's expiry, by the clock of any
            // process that wrote one.
            self.clock.advance_ms(
                millis(super::shared::LONG_TTL) + self.config.clock_skew_ms.saturating_mul(2),
            );
        }
        let sweeper = crate::retention::RetentionSweeper::builder(memo, Duration::ZERO)
            .runtime_store(Arc::clone(&store))
            .recheck_after(Duration::ZERO)
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
        // A user of `RuntimeStore::delete_run` removes the tombstones of the
        // incarnations it deleted once no writer of them can be left, as
        // the rustdoc of `forget_deleted` asks: here, at the end (a
        // retention pass's recheck removes those of the runs it deleted).
        for (run_id, incarnation) in &deleted_alone {
            if let Err(error) = store.forget_deleted(run_id, *incarnation).await {
                self.checker.violation(
                    "no object is left unreachable after every run is swept",
                    format!("forgetting the deleted {run_id} fails: {error}"),
                );
            }
        }
        let rechecked = self.rechecked_elsewhere.lock().expect("not poisoned");
        let layout = crate::layout::Layout::new(compat::PREFIX);
        // Its tombstone, and the id's pointer as the deletion vacated it
        // (a later run's deletion and recheck would have removed a
        // pointer of its own).
        let left_by_misprefix_recheck = |path: &object_store::path::Path| {
            rechecked.iter().any(|(run_id, inc)| {
                *path == layout.incarnation_tombstone(run_id, *inc)
                    || *path == layout.run_pointer(run_id)
            })
        };
        let left: Vec<_> = compat::objects_of_runs(self.checker.objects())
            .into_iter()
            .filter(|path| !compat::left_by_records_only_delete(path, &deleted_alone))
            .filter(|path| !left_by_misprefix_recheck(path))
            .filter(|path| !self.checker.is_late_tombstone(path))
            .filter(|path| !self.checker.is_left_after_recheck(path))
            .collect();
        drop(rechecked);
        if !left.is_empty() {
            self.checker.violation(
                "no object is left unreachable after every run is swept",
                format!(
                    "{} object(s) of runs or of the shared scope are left, such as {}",
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

    pub(super) fn final_checks(&mut self) {
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
            if self.config.versioned {
                self.check_version_code(&record);
            }
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
