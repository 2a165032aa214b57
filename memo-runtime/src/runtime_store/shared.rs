//! `Arc<T>` of a runtime store is a runtime store: every method forwarded.

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunDeletion, RunIdPage, RunPage, RunRecord,
    RunStatus, RunSummary, RuntimeStore, StepReceipt,
};
use crate::error::Result;
use crate::run_id::{Incarnation, RunId};

/// A shared store is a store: `Arc<dyn RuntimeStore>` can go wherever a
/// `RuntimeStore` is expected.
#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: RuntimeStore + ?Sized> RuntimeStore for std::sync::Arc<T> {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        (**self).create_run(run).await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        (**self).load_run(run_id).await
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        (**self).atomic_apply(run_id, commit).await
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        (**self).load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        (**self).load_snapshot(run_id).await
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        (**self).append_input(run_id, input).await
    }

    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>)> {
        (**self).append_input_and_load(run_id, input).await
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        (**self).load_inputs(run_id).await
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        (**self).load_receipts_and_inputs(run_id).await
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        (**self).atomic_apply_and_load(run_id, commit).await
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        (**self).list_runs(status).await
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        (**self).list_run_ids(status).await
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        (**self).list_run_ids_page(status, after, limit).await
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        (**self).list_runs_page(status, after, limit).await
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        (**self).delete_run(run_id, incarnation).await
    }

    async fn delete_run_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> Result<RunDeletion> {
        (**self).delete_run_at(run_id, incarnation, at_ms).await
    }

    async fn holds_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        (**self).holds_remains(run_id, incarnation).await
    }

    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<bool>> {
        (**self).holds_deletion(run_id, incarnation).await
    }

    async fn forget_deleted(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        (**self).forget_deleted(run_id, incarnation).await
    }

    async fn clear_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        (**self).clear_remains(run_id, incarnation).await
    }

    async fn forget_deleted_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<()>> {
        (**self).forget_deleted_all(deleted).await
    }

    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: u64,
    ) -> Vec<Result<()>> {
        (**self).forget_deleted_all_at(deleted, at_ms).await
    }

    fn use_clock(&self, clock: std::sync::Arc<dyn crate::clock::Clock>) {
        (**self).use_clock(clock);
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> Result<()> {
        (**self)
            .record_attempt_cost(run_id, incarnation, cost)
            .await
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        (**self).load_attempt_costs(run_id, incarnation).await
    }
}
