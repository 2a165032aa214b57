//! Recording an attempt's entry in its run's cost ledger
//! ([`AttemptCost`]): what the attempt's meter counted, written once when
//! the attempt ends or suspends.

use super::Runtime;
use crate::meter::Meter;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::AttemptCost;

impl Runtime {
    /// Records what attempt `attempt` of the run has cost so far, as the
    /// task's meter counted it (its own write not included). Best effort: a
    /// ledger that cannot be written is logged, and never stops the attempt
    /// or changes its outcome.
    ///
    /// Called before the terminal marker of a run that ended, and before
    /// the lease's release of an attempt that did not end it. A stale
    /// attempt (paused past its lease while another ended the run and a
    /// deletion removed it) records after the deletion: the object runtime
    /// store then takes the record back, as it finds the incarnation gone.
    pub(super) async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        attempt: u32,
    ) {
        let Some(meter) = Meter::current().filter(|_| self.shared.cost_ledger) else {
            return;
        };
        let cost = AttemptCost::of_reading(attempt, self.shared.clock.now_ms(), meter.reading());
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
