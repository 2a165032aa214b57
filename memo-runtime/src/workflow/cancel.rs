//! [`Runtime::cancel`]: ending a run on request, at once or at its
//! attempt's next step boundary.

use super::lease::{AttemptLease, cancel_reason};
use super::{CANCEL_SIGNAL, Runtime};
use crate::codec;
use crate::error::{Error, Result};
use crate::retention::TerminalMarker;
use crate::run_id::RunId;
use crate::runtime_store::{Commit, Lease, RunRecord, StatusChange};

#[cfg(doc)]
use super::Context;

/// What [`Runtime::cancel`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancellation {
    /// No attempt was running the run: it is now `Cancelled`, its terminal
    /// marker written.
    Cancelled,
    /// An attempt holds the run's lease: the cancellation is recorded, and
    /// that attempt ends the run `Cancelled` at its next step boundary or
    /// wait (or, if it crashes, the next attempt does, before any step).
    Requested {
        /// The live attempt's lease.
        lease: Lease,
    },
}

impl Runtime {
    /// Cancels run `run_id`, recording `reason`.
    ///
    /// The request is recorded durably first (as the run's input
    /// [`CANCEL_SIGNAL`]). If no attempt holds the run's lease, the run ends
    /// `Cancelled` at once (this call takes the lease, so no attempt can
    /// start meanwhile) and its terminal marker is written, so the sweeper
    /// clears it after the retention like any other ended run. If an attempt
    /// is running it, that attempt observes the cancellation at its next
    /// step boundary or wait, never in the middle of a step body: a step
    /// already running finishes (its receipt is committed), no new step body
    /// starts, and the attempt ends the run `Cancelled`. A live attempt
    /// learns of the request at its lease renewals (every third of the
    /// lease), at each poll of a signal wait, and when the workflow asks
    /// ([`Context::is_cancelled`]). Calling `cancel` again is harmless; the
    /// first reason is kept.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`]; [`Error::Conflict`] if the run has already
    /// ended (completed, failed or cancelled); a store error.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{Error, MemoStore, RunId, runtime_store::InMemoryRuntimeStore};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::runtime_store::RunStatus;
    /// use memo_runtime::workflow::{Cancellation, Context, Runtime, Workflow};
    ///
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .build()?;
    /// let order = Workflow::new("order", |ctx: Context, _: ()| async move {
    ///     let paid: bool = ctx.wait_for_signal("paid").await?;
    ///     Ok::<_, Error>(paid)
    /// });
    /// let run = RunId::new("order-1")?;
    /// assert!(runtime.run(&run, &(), &order).await.is_err()); // waits for "paid"
    ///
    /// assert_eq!(runtime.cancel(&run, "customer left").await?, Cancellation::Cancelled);
    /// let record = runtime.status(&run).await?.expect("the run");
    /// assert_eq!(record.status, RunStatus::Cancelled);
    /// assert!(matches!(runtime.run(&run, &(), &order).await, Err(Error::RunCancelled { .. })));
    /// // An ended run cannot be cancelled.
    /// assert!(matches!(runtime.cancel(&run, "again").await, Err(Error::Conflict { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, run_id: &RunId, reason: impl Into<String>) -> Result<Cancellation> {
        self.check_conditional_create().await?;
        let store = &self.shared.store;
        let ended = |record: &RunRecord| Error::Conflict {
            what: format!("run {run_id}"),
            reason: format!(
                "the run has already ended ({}); only an open run can be cancelled",
                record.status
            ),
        };
        let not_found = || Error::RunNotFound {
            run_id: run_id.to_string(),
        };
        let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
        if record.status.is_terminal() {
            return Err(ended(&record));
        }
        let payload = codec::encode_value("the cancellation reason", &reason.into())?;
        let id = CANCEL_SIGNAL.to_string();
        if let Err(e) = self.append_signal(run_id, id, CANCEL_SIGNAL, payload).await {
            // Ended meanwhile, or cancelled before (with another reason).
            let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
            if record.status.is_terminal() {
                return Err(ended(&record));
            }
            if !matches!(e, Error::Conflict { .. }) {
                return Err(e);
            }
        }
        let reason = cancel_reason(&store.load_inputs(run_id).await?);
        let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
        let attempt = record.attempts.saturating_add(1);
        let started =
            super::due::start_attempt(&self.shared, run_id, record.incarnation, attempt, &[]).await;
        let (lease, due_entry, _) = match started {
            Ok(started) => started,
            Err(Error::LeaseHeld {
                attempt,
                owner,
                until_ms,
                ..
            }) => {
                let lease = Lease {
                    attempt,
                    owner,
                    until_ms,
                };
                return Ok(Cancellation::Requested { lease });
            }
            Err(e) => {
                // Another worker started an attempt first: it will see the
                // request when it starts; or the run ended meanwhile.
                let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
                if record.status.is_terminal() {
                    return Err(ended(&record));
                }
                return match record.lease {
                    Some(lease) if matches!(e, Error::Conflict { .. }) => {
                        Ok(Cancellation::Requested { lease })
                    }
                    _ => Err(e),
                };
            }
        };
        self.end_cancelled(run_id, record.incarnation, &lease, reason)
            .await?;
        super::due::settle(&self.shared, lease.held(), true, &due_entry).await;
        Ok(Cancellation::Cancelled)
    }

    /// Commits the run's cancellation under `lease` and writes its marker.
    async fn end_cancelled(
        &self,
        run_id: &RunId,
        incarnation: crate::run_id::Incarnation,
        lease: &AttemptLease<'_>,
        reason: Option<String>,
    ) -> Result<()> {
        let terminal_at_ms = self.shared.clock.now_ms();
        let change = StatusChange::Cancelled { reason };
        let commit = Commit::status(change, terminal_at_ms).with_fence(lease.held().fence());
        if let Err(e) = self.shared.store.atomic_apply(run_id, commit).await {
            lease.release().await;
            return Err(e);
        }
        let marker = TerminalMarker {
            run_id: run_id.clone(),
            terminal_at_ms,
            incarnation,
        };
        self.mark_terminal(&marker, lease.held()).await;
        Ok(())
    }
}
