//! The per-instance run cache: each run's folded state behind an async
//! lock, so one instance's calls on a run take turns, and at most
//! `capacity` runs kept, the least used out first.

use std::convert::Infallible;
use std::sync::Arc;

use super::ObjectStoreRuntimeStore;
use super::checkpoint::Checkpoints;
use crate::error::Result;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::RunState;

/// A run folded up to (not including) log position `next`.
#[derive(Debug)]
pub(super) struct Folded {
    pub(super) state: RunState,
    pub(super) next: u64,
    pub(super) incarnation: Incarnation,
    /// What this instance knows of the run's checkpoints.
    pub(super) checkpoints: Checkpoints,
}

impl Folded {
    /// A run as created, before its first log entry.
    pub(super) fn created(state: RunState, incarnation: Incarnation) -> Folded {
        Folded {
            state,
            next: 0,
            incarnation,
            checkpoints: Checkpoints::default(),
        }
    }
}

/// What [`ObjectStoreRuntimeStore::refresh`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refreshed {
    /// The run does not exist.
    Missing,
    /// Nothing changed since the run was cached.
    Unchanged,
    /// The run was loaded, or changed since it was cached.
    Changed,
}

/// One run's place in the cache. The async lock serializes this instance's
/// calls on one run, so they do not race each other for log positions.
pub(super) type Slot = Arc<tokio::sync::Mutex<Option<Folded>>>;

/// The folded runs of one instance, evicted by use (quick_cache's
/// CLOCK-Pro policy: a run read or written again is kept over one that was
/// only loaded once), so a process that keeps working on a few runs while
/// it reads many others keeps its working set.
#[derive(Debug)]
pub(super) struct Cache {
    runs: quick_cache::sync::Cache<RunId, Slot>,
}

impl Cache {
    /// An empty cache of at most `capacity` runs (at least 1).
    pub(super) fn new(capacity: usize) -> Cache {
        Cache {
            runs: quick_cache::sync::Cache::new(capacity.max(1)),
        }
    }
}

impl ObjectStoreRuntimeStore {
    /// The slot of `run_id`: the cached one, or a new empty one (which the
    /// caller fills while holding its lock).
    pub(super) fn slot(&self, run_id: &RunId) -> Slot {
        let found = self
            .cache
            .runs
            .get_or_insert_with(run_id, || Ok::<_, Infallible>(Slot::default()));
        match found {
            Ok(slot) => slot,
        }
    }

    pub(super) fn forget(&self, run_id: &RunId) {
        self.cache.runs.remove(run_id);
    }

    /// Makes `slot` hold the run as storage has it: folded from storage if
    /// it is not cached, caught up if it is.
    pub(super) async fn refresh(
        &self,
        run_id: &RunId,
        slot: &mut Option<Folded>,
    ) -> Result<Refreshed> {
        if let Some(folded) = slot.as_mut() {
            // Nothing follows a terminal change, so a terminal run has nothing
            // to catch up on.
            let terminal = folded.state.record().status.is_terminal();
            let grew = !terminal && self.catch_up(run_id, folded).await?;
            // Deleting a run frees its log positions, and a deletion that
            // stopped part-way leaves some of its entries behind, so neither
            // an empty nor a found next position proves anything: the
            // incarnation is current only if the pointer still names it.
            if self.is_current(run_id, folded.incarnation).await? {
                return Ok(if grew {
                    Refreshed::Changed
                } else {
                    Refreshed::Unchanged
                });
            }
        }
        *slot = self.fold_from_storage(run_id).await?;
        Ok(if slot.is_some() {
            Refreshed::Changed
        } else {
            Refreshed::Missing
        })
    }

    /// Loads the run (caught up) and returns what `answer` reads from it;
    /// `None` if it does not exist.
    pub(super) async fn read<T>(
        &self,
        run_id: &RunId,
        answer: impl Fn(&RunState) -> T,
    ) -> Result<Option<T>> {
        let slot = self.slot(run_id);
        let mut guard = slot.lock().await;
        if self.refresh(run_id, &mut guard).await? == Refreshed::Missing {
            drop(guard);
            self.forget(run_id);
            return Ok(None);
        }
        Ok(guard.as_ref().map(|folded| answer(&folded.state)))
    }
}
