//! The attempt driver: one attempt of a run that exists, under its lease,
//! from the decision to start it to the commit of its outcome.

use std::fmt::Display;
use std::sync::Arc;

use backon::Retryable;
use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context;
use super::due::DueRun;
use super::hook::Stop;
use super::lease::cancel_reason;
use super::lease::{AttemptLease, HeldLease, History};
use super::{Context, Runtime, Workflow, WorkflowFn};
use crate::codec;
use crate::error::{Error, ErrorKind, Result};
use crate::meter::Meter;
use crate::retention::TerminalMarker;
use crate::run_id::RunId;
use crate::runtime_store::{Commit, InputPhase, RunRecord, RunStatus, StatusChange};

impl Runtime {
    /// One attempt of a run that exists.
    pub(super) async fn drive<I, W>(
        &self,
        record: RunRecord,
        workflow: &Workflow<W>,
    ) -> Result<W::Output, W::Error>
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
    {
        self.drive_metered(record, workflow, Arc::default(), Vec::new())
            .await
    }

    /// [`drive`](Self::drive), its requests counted into `meter` for the
    /// attempt's cost ledger (`meter` may hold what the caller did first,
    /// such as creating the run). The run's due entries `superseded` (a
    /// submit's, due a lease after it) are the attempt's to replace: one not
    /// yet due is its lease entry (see `due::start_attempt`), or else, once
    /// its own lease entry is written, it deletes each that is not that very
    /// entry, so the run is never without one; kept if no attempt starts.
    pub(super) async fn drive_metered<I, W>(
        &self,
        record: RunRecord,
        workflow: &Workflow<W>,
        meter: Arc<Meter>,
        superseded: Vec<DueRun>,
    ) -> Result<W::Output, W::Error>
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
    {
        let drive = self.drive_once(record, workflow, superseded);
        Meter::scope(meter, drive).await
    }

    async fn drive_once<I, W>(
        &self,
        record: RunRecord,
        workflow: &Workflow<W>,
        superseded: Vec<DueRun>,
    ) -> Result<W::Output, W::Error>
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
    {
        let run_id = record.run_id.clone();
        if record.workflow != workflow.name {
            return Err(Error::Conflict {
                what: format!("run {run_id}"),
                reason: format!(
                    "it runs workflow {:?}, not {:?}",
                    record.workflow, workflow.name
                ),
            }
            .into());
        }
        if let Some(done) = finished(&record) {
            return done.map_err(W::Error::from);
        }
        if !workflow.drives_version(record.workflow_version.as_deref()) {
            return Err(super::other_version(&record, workflow.version()).into());
        }
        let input: I = codec::decode_value(
            "the workflow input",
            &format!("run {run_id}"),
            &record.input,
        )?;
        if let Some(waiting) = self.still_waiting(&record).await? {
            // Nothing it waits for is there: no attempt, no write.
            return Err(waiting.into());
        }
        let attempt = record.attempts + 1;
        let (lease, due_entry, history) = match super::due::start_attempt(
            &self.shared,
            &run_id,
            record.incarnation,
            attempt,
            &superseded,
        )
        .await
        {
            Ok(started) => started,
            Err(conflict @ Error::Conflict { .. }) => {
                return self
                    .ended_meanwhile(&record, conflict)
                    .await
                    .map_err(W::Error::from);
            }
            Err(e) => return Err(e.into()),
        };
        let replaced: Vec<_> = superseded.into_iter().filter(|e| *e != due_entry).collect();
        super::due::forget(&self.shared, &replaced).await;
        let body =
            std::panic::AssertUnwindSafe(self.attempt(&record, input, history, &lease, workflow));
        let (result, ended) = settle(&run_id, lease.hold(body.catch_unwind()).await);
        super::due::settle(&self.shared, lease.held(), ended, &due_entry).await;
        if !ended {
            // Under the lease still, so that no other attempt can end the
            // run (and a sweep delete it) before the record is written.
            self.record_attempt_cost(&run_id, record.incarnation, attempt)
                .await;
            let awaits_signal = lease.held().awaits_signal();
            // However the attempt stopped, the next one need not wait.
            lease.release().await;
            if awaits_signal {
                let counted = RunRecord {
                    attempts: attempt,
                    ..record
                };
                super::due::after_signal_wait(self, &counted).await;
            }
        }
        result
    }

    /// The answer to a delivery whose attempt's start met `conflict`: the
    /// run may have ended between the delivery's read and its start
    /// (another delivery, or a worker that took the run over, ran it to its
    /// end), and then the run's outcome is the answer, as it is to a
    /// delivery that reads the run ended. Otherwise the conflict (another
    /// attempt started first), a conflict that says the run was deleted
    /// since, or the error of the read. Costs a read of the run, on this
    /// path only.
    async fn ended_meanwhile<O: DeserializeOwned>(
        &self,
        record: &RunRecord,
        conflict: Error,
    ) -> Result<O> {
        match self.shared.store.load_run(&record.run_id).await? {
            Some(now) if now.incarnation == record.incarnation => {
                finished(&now).unwrap_or(Err(conflict))
            }
            _ => Err(Error::Conflict {
                what: format!("run {}", record.run_id),
                reason: "the run ended and was deleted before this delivery's attempt started"
                    .into(),
            }),
        }
    }

    /// [`Error::Suspended`] if the run's last attempt suspended in a wait
    /// that would suspend again now: a timer not yet due (beyond the timer
    /// wait), or a signal wait (with no in-process signal wait configured)
    /// whose signal has not come and whose deadline, if any, has not passed.
    /// Costs one read of the run's receipts and inputs for a run that has
    /// had an attempt; none for a new run.
    pub(super) async fn still_waiting(&self, record: &RunRecord) -> Result<Option<Error>> {
        if record.attempts == 0 {
            return Ok(None);
        }
        let store = &self.shared.store;
        let (history, inputs) = store.load_receipts_and_inputs(&record.run_id).await?;
        let Some(last) = history.last().filter(|r| r.error.is_none()) else {
            return Ok(None);
        };
        let now = self.shared.clock.now_ms();
        let far = |at: u64| at > now && at - now > self.shared.timer_wait_ms();
        let suspended = |signal: &str, until_ms| Error::Suspended {
            run_id: record.run_id.to_string(),
            signal: signal.to_string(),
            until_ms,
        };
        if last.step == context::SLEEP_STEP {
            let wake = codec::decode::<u64>(&last.output).ok();
            return Ok(wake.filter(|&at| far(at)).map(|at| suspended("", Some(at))));
        }
        let (names, deadline) =
            if let Some(name) = last.step.strip_prefix(context::WAIT_STEP_PREFIX) {
                (vec![name.to_string()], None)
            } else if let Some(name) = last.step.strip_prefix(context::DEADLINE_STEP_PREFIX) {
                let Ok(at) = codec::decode::<u64>(&last.output) else {
                    return Ok(None);
                };
                if !far(at) {
                    return Ok(None);
                }
                (vec![name.to_string()], Some(at))
            } else if let Some((at, names)) = context::select_recorded(last) {
                let at = (at != u64::MAX).then_some(at);
                if at.is_some_and(|at| !far(at)) {
                    return Ok(None);
                }
                (names, at)
            } else {
                return Ok(None);
            };
        let name = &names.join(",");
        if !self.shared.signal_wait.is_zero() {
            return Ok(None);
        }
        let arrived = inputs.iter().any(|input| {
            names.contains(&input.name)
                && input.accepted_at_ms <= deadline.unwrap_or(u64::MAX)
                && matches!(input.phase, InputPhase::Accepted | InputPhase::Queued)
        });
        if arrived || cancel_reason(&inputs).is_some() {
            return Ok(None);
        }
        Ok(Some(suspended(name, deadline)))
    }

    /// The body of one attempt, under its lease: replays the history (the
    /// run's receipts and inputs as the start left them), runs the workflow
    /// and commits its outcome. `true` with the result if the
    /// run ended (its terminal status committed); an error for a transient
    /// error that interrupted the attempt before the workflow ran or after it.
    async fn attempt<I, W>(
        &self,
        record: &RunRecord,
        input: I,
        (history, inputs): History,
        lease: &AttemptLease<'_>,
        workflow: &Workflow<W>,
    ) -> Result<Ended<W::Output, W::Error>>
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
    {
        let run_id = record.run_id.clone();
        let attempt = lease.held().fence().attempt;
        let store = &self.shared.store;
        lease.held().note_cancel(&inputs);
        tracing::info!(attempt, recorded_steps = history.len(), "attempt started");
        let ctx = Context::new(
            Arc::clone(&self.shared),
            run_id.clone(),
            record.incarnation,
            Arc::clone(lease.held()),
            history,
        );
        let result = workflow.run.call(ctx.clone(), input).await;
        if let Some(reason) = ctx.observed_cancel() {
            // The attempt observed the cancellation: whatever the workflow
            // returned, the run ends cancelled.
            tracing::info!(%run_id, "run cancelled");
            let commit = Commit::status(
                StatusChange::Cancelled {
                    reason: Some(reason.clone()),
                },
                self.shared.clock.now_ms(),
            );
            let terminal_at_ms = commit.at_ms;
            let commit = commit.with_fence(lease.held().fence());
            let commit = self.with_attempt_cost(commit, attempt);
            lease
                .held()
                .end_run(store.atomic_apply(&run_id, commit))
                .await?;
            let marker = TerminalMarker {
                run_id: run_id.clone(),
                terminal_at_ms,
                incarnation: record.incarnation,
            };
            self.mark_terminal(&marker, lease.held()).await;
            let cancelled = Error::RunCancelled {
                run_id: run_id.to_string(),
                reason: Some(reason),
            };
            return Ok((Err(cancelled.into()), true));
        }
        if let Some(interruption) = ctx.take_interruption() {
            // The runtime, not the workflow, stopped this attempt (or the run
            // waits for a signal or a timer): leave the run open so that it
            // can be resumed. A stop's cause is a field of its own, for an
            // alert on a deploy's non-determinism (`CodeChanged`) apart from
            // lost leases; a wait is no stop, and no warning.
            let cause = interruption.cause;
            if cause == Some(ErrorKind::Suspended) {
                tracing::info!(%interruption, "attempt suspended; the run waits");
            } else {
                tracing::warn!(%interruption, ?cause, "attempt stopped; the run stays open");
            }
            return Ok((stopped(&run_id, result, interruption), false));
        }
        let (change, result) = terminal_change(result);
        let terminal_at_ms = self.shared.clock.now_ms();
        let commit = Commit::status(change, terminal_at_ms).with_fence(lease.held().fence());
        let commit = self.with_attempt_cost(commit, attempt);
        lease
            .held()
            .end_run(store.atomic_apply(&run_id, commit))
            .await?;
        let marker = TerminalMarker {
            run_id: run_id.clone(),
            terminal_at_ms,
            incarnation: record.incarnation,
        };
        self.mark_terminal(&marker, lease.held()).await;
        Ok((result, true))
    }

    /// Writes the terminal marker, retrying. A marker that still fails is
    /// noted on the attempt's lease (`held`), so that the attempt keeps its
    /// due-run entry: whoever wakes that entry (a worker, a sweep,
    /// [`Runtime::recover`]) writes the marker.
    pub(super) async fn mark_terminal(&self, marker: &TerminalMarker, held: &HeldLease) {
        let markers = self.shared.memo.markers();
        let write = || markers.write(marker);
        let written = write
            .retry(self.shared.marker_retry.backoff())
            .sleep(tokio::time::sleep)
            .await;
        if let Err(e) = written {
            held.note_unmarked();
            tracing::warn!(run_id = %marker.run_id, error = %e, "terminal marker not written; recover() or a worker will write it");
        }
    }
}

/// What an attempt returns, and whether the run ended with it (its terminal
/// status committed).
type Ended<O, E> = (Result<O, E>, bool);

/// How an attempt held under its lease ended, as its result and whether the
/// run ended (its terminal status committed): the attempt's own outcome if
/// it came to one; else the error that stopped it (a transient error before
/// or after the workflow ran, a panic as [`Error::Aborted`], a lost lease),
/// the run left open.
fn settle<O, E: From<Error>>(
    run_id: &RunId,
    held: Result<std::thread::Result<Result<Ended<O, E>>>>,
) -> Ended<O, E> {
    match held {
        Ok(Ok(Ok(done))) => done,
        Ok(Ok(Err(interruption))) => (Err(E::from(interruption)), false),
        Ok(Err(panic)) => {
            let message = panic_message(panic.as_ref());
            tracing::error!(%run_id, panic = %message, "the workflow panicked; the run stays open");
            let aborted = Error::Aborted {
                run_id: run_id.to_string(),
                reason: format!("the workflow panicked: {message}"),
                cause: None,
            };
            (Err(E::from(aborted)), false)
        }
        Err(lost) => (Err(E::from(lost)), false),
    }
}

/// What an attempt that a runtime error interrupted returns, the run left
/// open: the workflow's error, or [`Error::Aborted`] with the interruption
/// if the workflow handled the error and returned a value anyway.
fn stopped<O, E: From<Error>>(
    run_id: &RunId,
    result: Result<O, E>,
    interruption: Stop,
) -> Result<O, E> {
    result.and_then(|_| Err(E::from(interruption.into_error(run_id))))
}

/// The terminal status a workflow's result commits, and what the attempt
/// returns: `Completed` with the encoded output, or `Failed` with the
/// error's message (an output that cannot be encoded fails the run too:
/// retrying could only fail again).
fn terminal_change<O: Serialize, E: From<Error> + Display>(
    result: Result<O, E>,
) -> (StatusChange, Result<O, E>) {
    match result {
        Ok(output) => match codec::encode_value("the workflow output", &output) {
            Ok(encoded) => (StatusChange::Completed { output: encoded }, Ok(output)),
            Err(e) => (
                StatusChange::Failed {
                    error: e.to_string(),
                },
                Err(E::from(e)),
            ),
        },
        Err(e) => (
            StatusChange::Failed {
                error: e.to_string(),
            },
            Err(e),
        ),
    }
}

/// The stored result of a terminal run; `None` for a run still open.
fn finished<O: DeserializeOwned>(record: &RunRecord) -> Option<Result<O>> {
    let run_id = record.run_id.to_string();
    match record.status {
        RunStatus::Pending | RunStatus::Running => None,
        RunStatus::Completed => {
            let output = record.output.clone().unwrap_or_default();
            Some(codec::decode_value(
                "the workflow output",
                &format!("run {run_id}"),
                &output,
            ))
        }
        RunStatus::Failed => Some(Err(Error::RunFailed {
            run_id,
            message: record.error.clone().unwrap_or_default(),
        })),
        RunStatus::Cancelled => Some(Err(Error::RunCancelled {
            run_id,
            reason: record.error.clone(),
        })),
    }
}

/// What a panic said, if it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod tests {
    use serde::ser::Error as _;

    use super::*;

    fn run_id() -> RunId {
        RunId::new("r").unwrap()
    }

    fn lost() -> Error {
        Error::LeaseLost {
            run_id: "r".into(),
            attempt: 2,
            reason: "taken over".into(),
        }
    }

    #[test]
    fn an_attempt_that_came_to_an_outcome_returns_it() {
        let done: (Result<u8, Error>, bool) = settle(&run_id(), Ok(Ok(Ok((Ok(7), true)))));
        assert!(matches!(done, (Ok(7), true)));
    }

    #[test]
    fn an_interrupted_a_panicked_or_a_taken_over_attempt_leaves_the_run_open() {
        let interrupted = settle::<u8, Error>(&run_id(), Ok(Ok(Err(lost()))));
        assert!(matches!(interrupted, (Err(Error::LeaseLost { .. }), false)));
        let panic: Box<dyn std::any::Any + Send> = Box::new("boom");
        let panicked = settle::<u8, Error>(&run_id(), Ok(Err(panic)));
        assert!(
            matches!(&panicked, (Err(Error::Aborted { reason, cause: None, .. }), false) if reason.ends_with("panicked: boom")),
            "{panicked:?}"
        );
        let taken_over = settle::<u8, Error>(&run_id(), Err(lost()));
        assert!(matches!(taken_over, (Err(Error::LeaseLost { .. }), false)));
    }

    #[test]
    fn a_value_returned_past_an_interruption_is_an_abort() {
        let down = Stop {
            reason: "store down".into(),
            cause: Some(ErrorKind::Unavailable),
        };
        let handled = stopped::<u8, Error>(&run_id(), Ok(1), down.clone());
        assert!(
            matches!(&handled, Err(Error::Aborted { reason, cause: Some(ErrorKind::Unavailable), .. }) if reason == "store down"),
            "{handled:?}"
        );
        let passed_on = stopped::<u8, Error>(&run_id(), Err(lost()), down);
        assert!(matches!(passed_on, Err(Error::LeaseLost { .. })));
    }

    struct Unencodable;

    impl Serialize for Unencodable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> std::result::Result<S::Ok, S::Error> {
            Err(S::Error::custom("not encodable"))
        }
    }

    #[test]
    fn a_result_commits_completed_or_failed() {
        let (change, result) = terminal_change::<u8, Error>(Ok(3));
        assert!(matches!(change, StatusChange::Completed { .. }));
        assert!(matches!(result, Ok(3)));
        let (change, result) =
            terminal_change::<u8, Error>(Err(Error::RunNotFound { run_id: "x".into() }));
        assert!(matches!(change, StatusChange::Failed { error } if error.contains("x")));
        assert!(result.is_err());
        let (change, result) = terminal_change::<_, Error>(Ok(Unencodable));
        assert!(
            matches!(change, StatusChange::Failed { error } if error.contains("not encodable"))
        );
        assert!(
            matches!(result, Err(Error::Serialization { .. })),
            "{:?}",
            result.err()
        );
    }
}
