//! Attempt leases: an attempt renews its run's lease while it runs and
//! releases it however it ends, so another worker takes a run over only
//! after its holder crashed or hung for a whole lease.

use std::future::Future;
use std::time::Duration;

use super::Shared;
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::runtime_store::{Commit, Fence, StatusChange};

/// The lease of one attempt of one run.
pub(super) struct AttemptLease<'a> {
    shared: &'a Shared,
    run_id: &'a RunId,
    fence: Fence,
}

impl<'a> AttemptLease<'a> {
    /// Starts attempt `attempt` of the run under a lease held until a lease
    /// length from now.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseHeld`] while another attempt's lease is live;
    /// [`Error::Conflict`] if another worker started this attempt first.
    pub(super) async fn start(
        shared: &'a Shared,
        run_id: &'a RunId,
        attempt: u32,
    ) -> Result<AttemptLease<'a>> {
        let now = shared.clock.now_ms();
        let start = StatusChange::start_leased(attempt, &shared.worker_id, now + shared.lease_ms());
        let fence = start.fence().expect("an attempt start has a fence");
        shared
            .store
            .atomic_apply(run_id, Commit::status(start, now))
            .await?;
        Ok(AttemptLease {
            shared,
            run_id,
            fence,
        })
    }

    /// What the attempt's commits carry.
    pub(super) fn fence(&self) -> Fence {
        self.fence
    }

    /// Runs `work` while renewing the lease every third of its length. If
    /// a renewal finds the lease lost (another attempt took the run over, or
    /// the run ended), `work` is dropped at its next await point and the
    /// loss is returned: the attempt must do nothing more.
    pub(super) async fn hold<F: Future>(&self, work: F) -> Result<F::Output> {
        let period = (self.shared.lease / 3).max(Duration::from_millis(1));
        let renewals = async {
            loop {
                tokio::time::sleep(period).await;
                match self.renew().await {
                    Ok(()) => {}
                    // The attempt's fence was refused: someone else holds the run.
                    Err(lost @ (Error::LeaseLost { .. } | Error::Conflict { .. })) => {
                        return lost;
                    }
                    // A store fault: try again at the next tick; if the lease
                    // runs out meanwhile, the next renewal says so.
                    Err(e) => {
                        tracing::warn!(run_id = %self.run_id, error = %e, "lease renewal failed");
                    }
                }
            }
        };
        tokio::select! {
            biased;
            output = work => Ok(output),
            lost = renewals => {
                tracing::warn!(run_id = %self.run_id, error = %lost, "lease lost; the attempt stops");
                Err(lost)
            }
        }
    }

    async fn renew(&self) -> Result<()> {
        let now = self.shared.clock.now_ms();
        self.set_expiry(now, now + self.shared.lease_ms()).await
    }

    /// Gives the run up at once, so the next attempt need not wait for the
    /// lease to expire. Best effort: a lease that cannot be released
    /// expires.
    pub(super) async fn release(&self) {
        let now = self.shared.clock.now_ms();
        if let Err(e) = self.set_expiry(now, now).await {
            tracing::debug!(run_id = %self.run_id, error = %e, "lease not released; it will expire");
        }
    }

    async fn set_expiry(&self, now: u64, until_ms: u64) -> Result<()> {
        let change = StatusChange::Lease {
            attempt: self.fence.attempt,
            token: self.fence.token,
            until_ms,
        };
        self.shared
            .store
            .atomic_apply(self.run_id, Commit::status(change, now))
            .await
            .map(drop)
    }
}
