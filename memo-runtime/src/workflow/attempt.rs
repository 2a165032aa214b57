//! The attempt driver: one attempt of a run that exists, under its lease,
//! from the decision to start it to the commit of its outcome.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;

use backon::Retryable;
use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::cancel::cancel_reason;
use super::context;
use super::lease::AttemptLease;
use super::{Context, Runtime, Workflow};
use crate::codec;
use crate::error::{Error, Result};
use crate::retention::TerminalMarker;
use crate::runtime_store::{Commit, InputPhase, RunRecord, RunStatus, StatusChange};

impl Runtime {
    /// One attempt of a run that exists.
    pub(super) async fn drive<I, O, E, F, Fut>(
        &self,
        record: RunRecord,
        workflow: &Workflow<F>,
    ) -> Result<O, E>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
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
            return done.map_err(E::from);
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
        let (lease, due_entry) =
            super::due::start_attempt(&self.shared, &run_id, record.incarnation, attempt).await?;
        let body = std::panic::AssertUnwindSafe(self.attempt(&record, input, &lease, workflow));
        let outcome = lease.hold(body.catch_unwind()).await;
        let (result, ended) = match outcome {
            Ok(Ok(Ok(done))) => done,
            Ok(Ok(Err(interruption))) => (Err(E::from(interruption)), false),
            Ok(Err(panic)) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(%run_id, panic = %message, "the workflow panicked; the run stays open");
                let aborted = Error::Aborted {
                    run_id: run_id.to_string(),
                    reason: format!("the workflow panicked: {message}"),
                };
                (Err(E::from(aborted)), false)
            }
            Err(lost) => (Err(E::from(lost)), false),
        };
        super::due::settle(&self.shared, lease.held(), ended, &due_entry).await;
        if !ended {
            // However the attempt stopped, the next one need not wait.
            lease.release().await;
        }
        result
    }

    /// [`Error::Suspended`] if the run's last attempt suspended in a wait
    /// that would suspend again now: a timer not yet due (beyond the timer
    /// wait), or a signal wait (with no in-process signal wait configured)
    /// whose signal has not come and whose deadline, if any, has not passed.
    /// Costs a read of the run's receipts (and of its inputs, for a signal
    /// wait) for a run that has had an attempt; none for a new run.
    pub(super) async fn still_waiting(&self, record: &RunRecord) -> Result<Option<Error>> {
        if record.attempts == 0 {
            return Ok(None);
        }
        let store = &self.shared.store;
        let history = store.load_receipts(&record.run_id, None).await?;
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
        let inputs = store.load_inputs(&record.run_id).await?;
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

    /// The body of one attempt, under its lease: replays the history, runs
    /// the workflow and commits its outcome. `true` with the result if the
    /// run ended (its terminal status committed); an error for a transient
    /// error that interrupted the attempt before the workflow ran or after it.
    async fn attempt<I, O, E, F, Fut>(
        &self,
        record: &RunRecord,
        input: I,
        lease: &AttemptLease<'_>,
        workflow: &Workflow<F>,
    ) -> Result<(Result<O, E>, bool)>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        let run_id = record.run_id.clone();
        let attempt = lease.held().fence().attempt;
        let store = &self.shared.store;
        let history = store.load_receipts(&run_id, None).await?;
        lease.held().note_cancel(&store.load_inputs(&run_id).await?);
        tracing::info!(attempt, recorded_steps = history.len(), "attempt started");
        let ctx = Context::new(
            Arc::clone(&self.shared),
            run_id.clone(),
            record.incarnation,
            Arc::clone(lease.held()),
            history,
        );
        let result = (workflow.run)(ctx.clone(), input).await;
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
            store
                .atomic_apply(&run_id, commit.with_fence(lease.held().fence()))
                .await?;
            let marker = TerminalMarker {
                run_id: run_id.clone(),
                terminal_at_ms,
                incarnation: record.incarnation,
            };
            self.mark_terminal(&marker).await;
            let cancelled = Error::RunCancelled {
                run_id: run_id.to_string(),
                reason: Some(reason),
            };
            return Ok((Err(cancelled.into()), true));
        }
        if let Some(interruption) = ctx.take_interruption() {
            // The runtime, not the workflow, stopped this attempt: leave the run
            // open so that it can be resumed.
            tracing::warn!(%interruption, "attempt stopped; the run stays open");
            return Ok(match result {
                Err(e) => (Err(e), false),
                Ok(_) => {
                    let aborted = Error::Aborted {
                        run_id: run_id.to_string(),
                        reason: interruption,
                    };
                    (Err(aborted.into()), false)
                }
            });
        }
        let (change, result) = match result {
            Ok(output) => match codec::encode_value("the workflow output", &output) {
                Ok(encoded) => (StatusChange::Completed { output: encoded }, Ok(output)),
                // A permanent error: retrying the run could only fail again.
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
        };
        let terminal_at_ms = self.shared.clock.now_ms();
        let commit = Commit::status(change, terminal_at_ms).with_fence(lease.held().fence());
        store.atomic_apply(&run_id, commit).await?;
        let marker = TerminalMarker {
            run_id: run_id.clone(),
            terminal_at_ms,
            incarnation: record.incarnation,
        };
        self.mark_terminal(&marker).await;
        Ok((result, true))
    }

    /// Writes the terminal marker, retrying; a marker that still fails is
    /// written again by [`Runtime::recover`].
    pub(super) async fn mark_terminal(&self, marker: &TerminalMarker) {
        let markers = self.shared.memo.markers();
        let write = || markers.write(marker);
        let written = write
            .retry(self.shared.marker_retry.backoff())
            .sleep(tokio::time::sleep)
            .await;
        if let Err(e) = written {
            tracing::warn!(run_id = %marker.run_id, error = %e, "terminal marker not written; recover() will write it");
        }
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
