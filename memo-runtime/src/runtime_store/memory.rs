//! `InMemoryRuntimeStore`: the runtime store in process memory, for tests and
//! ephemeral runs.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;

use super::state::{Change, RunState, Verdict};
use super::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunIdPage, RunLimits, RunRecord, RunStatus,
    RunSummary, RuntimeStore, StepReceipt, page_of,
};
use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};

/// The runtime store in process memory: nothing survives the process.
///
/// Every call takes the lock once and checks a change completely before
/// touching anything, so a rejected change leaves no trace and no reader
/// sees half a commit. Clones share the same runs. Listing by status scans
/// every run held.
///
/// # Example
///
/// ```
/// use memo_runtime::runtime_store::{InMemoryRuntimeStore, NewRun, RunStatus, RuntimeStore};
/// use memo_runtime::{Bytes, RunId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> memo_runtime::Result<()> {
/// let store = InMemoryRuntimeStore::new();
/// let run_id = RunId::new("nightly-report")?;
/// let run = NewRun {
///     run_id: run_id.clone(),
///     workflow: "report".into(),
///     input: Bytes::new(),
///     created_at_ms: 0,
///     workflow_version: None,
/// };
/// store.create_run(run).await?;
/// assert_eq!(store.list_runs(RunStatus::Pending).await?.len(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct InMemoryRuntimeStore {
    runs: Arc<Mutex<BTreeMap<RunId, RunState>>>,
    /// The cost ledger of each run incarnation held.
    costs: Arc<Mutex<Ledgers>>,
    limits: RunLimits,
}

/// The cost ledger of each run incarnation.
type Ledgers = BTreeMap<(RunId, Incarnation), Vec<AttemptCost>>;

impl InMemoryRuntimeStore {
    /// An empty store.
    pub fn new() -> InMemoryRuntimeStore {
        InMemoryRuntimeStore::default()
    }

    /// The same store (its clones share the runs) taking what `limits`
    /// allow: values larger than its maximum are refused with
    /// [`Error::TooLarge`], inputs past its most pending with
    /// [`Error::Conflict`].
    #[must_use]
    pub fn with_limits(mut self, limits: RunLimits) -> InMemoryRuntimeStore {
        self.limits = limits;
        self
    }

    /// Locks the runs. A panic while the lock was held cannot have left a
    /// run half-changed (changes are checked, then applied infallibly), so
    /// poisoning is ignored.
    fn runs(&self) -> MutexGuard<'_, BTreeMap<RunId, RunState>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks `change` against the run and applies it, under one lock.
    fn change<T>(
        &self,
        run_id: &RunId,
        change: Change,
        answer: impl FnOnce(&RunState) -> T,
    ) -> Result<T> {
        let mut runs = self.runs();
        let run = runs.get_mut(run_id).ok_or_else(|| Error::RunNotFound {
            run_id: run_id.to_string(),
        })?;
        if let Verdict::Apply(plan) = run.check(&change)? {
            self.limits.admit(run, &change)?;
            run.apply(change, plan);
        }
        Ok(answer(run))
    }
}

#[async_trait]
impl RuntimeStore for InMemoryRuntimeStore {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        self.limits.admit_run(&run)?;
        let mut runs = self.runs();
        if let Some(existing) = runs.get(&run.run_id) {
            existing.check_same_run(&run)?;
            return Ok(existing.record().clone());
        }
        let state = RunState::new(run, Incarnation::random());
        let record = state.record().clone();
        runs.insert(record.run_id.clone(), state);
        Ok(record)
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        Ok(self.runs().get(run_id).map(|run| run.record().clone()))
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        self.change(run_id, Change::Commit(Box::new(commit)), |run| {
            run.record().clone()
        })
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        Ok(self
            .runs()
            .get(run_id)
            .map(|run| run.receipts_after(after))
            .unwrap_or_default())
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        Ok(self.runs().get(run_id).and_then(RunState::snapshot))
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        Ok(self.append_input_and_load(run_id, input).await?.0)
    }

    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>)> {
        let input_id = input.input_id.clone();
        self.change(run_id, Change::Input(input), |run| run.appended(&input_id))
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        Ok(self
            .runs()
            .get(run_id)
            .map(RunState::inputs)
            .unwrap_or_default())
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        Ok(self
            .runs()
            .get(run_id)
            .map(RunState::history)
            .unwrap_or_default())
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        self.change(run_id, Change::Commit(Box::new(commit)), RunState::applied)
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        Ok(self
            .runs()
            .values()
            .filter(|run| run.record().status == status)
            .map(RunState::summary)
            .collect())
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        Ok(self
            .runs()
            .iter()
            .filter(|(_, run)| run.record().status == status)
            .map(|(run_id, _)| run_id.clone())
            .collect())
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        let runs = self.runs();
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let ids = runs
            .range::<RunId, _>((from, Bound::Unbounded))
            .filter(|(_, run)| run.record().status == status)
            .map(|(run_id, _)| run_id.clone());
        Ok(page_of(ids, limit))
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let mut runs = self.runs();
        let Some(run) = runs
            .get(run_id)
            .filter(|run| run.record().incarnation == incarnation)
        else {
            return Ok(false);
        };
        let status = run.record().status;
        if !status.is_terminal() {
            return Err(Error::Conflict {
                what: format!("run {run_id}"),
                reason: format!("the run is {status}; only terminal runs can be deleted"),
            });
        }
        runs.remove(run_id);
        lock(&self.costs).remove(&(run_id.clone(), incarnation));
        Ok(true)
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> Result<()> {
        // Held under the runs' lock: a ledger never outlives its run.
        let runs = self.runs();
        if runs
            .get(run_id)
            .is_some_and(|run| run.record().incarnation == incarnation)
        {
            let mut costs = lock(&self.costs);
            let ledger = costs.entry((run_id.clone(), incarnation)).or_default();
            if !ledger.iter().any(|c| c.attempt == cost.attempt) {
                ledger.push(cost.clone());
                ledger.sort_by_key(|c| c.attempt);
            }
        }
        Ok(())
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        let runs = self.runs();
        let ending = (runs.get(run_id))
            .filter(|run| run.record().incarnation == incarnation)
            .and_then(RunState::ending_cost);
        let recorded = lock(&self.costs)
            .get(&(run_id.clone(), incarnation))
            .cloned()
            .unwrap_or_default();
        Ok(AttemptCost::ledger(recorded, ending))
    }
}

/// Locks `mutex`, ignoring poisoning as [`InMemoryRuntimeStore::runs`] does.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
