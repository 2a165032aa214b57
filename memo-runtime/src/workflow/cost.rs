//! The attempt's entry in its run's cost ledger ([`AttemptCost`]): what
//! the attempt's meter counted, carried by the commit that ends the run, or
//! written once when the attempt suspends or stops.

use super::Runtime;
use crate::meter::Meter;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{AttemptCost, Commit};

impl Runtime {
    /// What attempt `attempt` of the run has cost so far, as the task's
    /// meter counted it; `None` with the ledger off (or outside a metered
    /// attempt).
    fn attempt_cost(&self, attempt: u32) -> Option<AttemptCost> {
        let meter = Meter::current().filter(|_| self.shared.cost_ledger)?;
        let now = self.shared.clock.now_ms();
        Some(AttemptCost::of_reading(attempt, now, meter.reading()))
    }

    /// `commit`, the one that ends the run, carrying attempt `attempt`'s
    /// entry in the ledger: what the attempt cost up to this commit (the
    /// commit's own requests, and what follows it, not included). Kept with
    /// the run's end, it costs no request of its own, and it is deleted
    /// with the run as its log is.
    pub(super) fn with_attempt_cost(&self, commit: Commit, attempt: u32) -> Commit {
        match self.attempt_cost(attempt) {
            Some(cost) => commit.with_cost(cost),
            None => commit,
        }
    }

    /// Records what attempt `attempt` of the run has cost so far, as the
    /// task's meter counted it (its own write not included), for an
    /// attempt that did not end the run. Best effort: a ledger that cannot
    /// be written is logged, and never stops the attempt or changes its
    /// outcome.
    ///
    /// Called before the lease's release, under the lease still, so that
    /// no other attempt can end the run (and a sweep delete it) before the
    /// record is written. A stale attempt (paused past its lease while
    /// another ended the run and a deletion removed it) records after the
    /// deletion: the object runtime store then takes the record back, as it
    /// finds the incarnation gone.
    pub(super) async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        attempt: u32,
    ) {
        let Some(cost) = self.attempt_cost(attempt) else {
            return;
        };
        let recorded = self
            .shared
            .store
            .record_attempt_cost(run_id, incarnation, &cost)
            .await;
        if let Err(e) = recorded {
            tracing::warn!(%run_id, attempt, error = %e, "the attempt's cost was not recorded");
        }
    }
}
