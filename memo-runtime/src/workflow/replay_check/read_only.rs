//! The read-only view of a runtime store the replay check replays over.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunIdPage, RunPage, RunRecord, RunStatus,
    RunSummary, RuntimeStore, StepReceipt,
};

/// A view of a runtime store that reads through and refuses every write.
#[derive(Debug)]
pub(super) struct ReadOnlyView {
    pub(super) inner: Arc<dyn RuntimeStore>,
}

impl ReadOnlyView {
    fn refuse<T>(run_id: &RunId) -> Result<T> {
        Err(Error::InvalidWrite {
            run_id: run_id.to_string(),
            reason: "the replay check reads the store and never writes to it".into(),
        })
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl RuntimeStore for ReadOnlyView {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        Self::refuse(&run.run_id)
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.inner.load_run(run_id).await
    }

    async fn atomic_apply(&self, run_id: &RunId, _commit: Commit) -> Result<RunRecord> {
        Self::refuse(run_id)
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        self.inner.load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        self.inner.load_snapshot(run_id).await
    }

    async fn append_input(&self, run_id: &RunId, _input: NewInput) -> Result<InputRecord> {
        Self::refuse(run_id)
    }

    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        _input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>)> {
        Self::refuse(run_id)
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        self.inner.load_inputs(run_id).await
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        self.inner.load_receipts_and_inputs(run_id).await
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        _commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        Self::refuse(run_id)
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        self.inner.list_runs(status).await
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        self.inner.list_run_ids(status).await
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        self.inner.list_run_ids_page(status, after, limit).await
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        self.inner.list_runs_page(status, after, limit).await
    }

    async fn delete_run(&self, run_id: &RunId, _incarnation: Incarnation) -> Result<bool> {
        Self::refuse(run_id)
    }

    async fn delete_run_at(
        &self,
        run_id: &RunId,
        _incarnation: Incarnation,
        _at_ms: u64,
    ) -> Result<crate::runtime_store::RunDeletion> {
        Self::refuse(run_id)
    }

    async fn holds_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.inner.holds_remains(run_id, incarnation).await
    }

    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<bool>> {
        self.inner.holds_deletion(run_id, incarnation).await
    }

    async fn forget_deleted(&self, run_id: &RunId, _incarnation: Incarnation) -> Result<()> {
        Self::refuse(run_id)
    }

    async fn clear_remains(&self, run_id: &RunId, _incarnation: Incarnation) -> Result<bool> {
        Self::refuse(run_id)
    }

    async fn forget_deleted_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<()>> {
        deleted
            .iter()
            .map(|(run_id, _)| Self::refuse(run_id))
            .collect()
    }

    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        _at_ms: u64,
    ) -> Vec<Result<()>> {
        deleted
            .iter()
            .map(|(run_id, _)| Self::refuse(run_id))
            .collect()
    }

    /// Ignored: the view commits nothing, and the store under it keeps
    /// the clock of the runtime it serves.
    fn use_clock(&self, clock: std::sync::Arc<dyn crate::clock::Clock>) {
        let _ = clock;
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        _incarnation: Incarnation,
        _cost: &AttemptCost,
    ) -> Result<()> {
        Self::refuse(run_id)
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        self.inner.load_attempt_costs(run_id, incarnation).await
    }
}
