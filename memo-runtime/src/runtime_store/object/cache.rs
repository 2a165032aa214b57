//! The per-instance run cache: each run's folded state behind an async
//! lock, so one instance's calls on a run take turns, and at most
//! `capacity` runs kept, oldest out first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, MutexGuard, PoisonError};

use super::ObjectStoreRuntimeStore;
use crate::error::Result;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::RunState;

/// A run folded up to (not including) log position `next`.
#[derive(Debug)]
pub(super) struct Folded {
    pub(super) state: RunState,
    pub(super) next: u64,
    pub(super) incarnation: Incarnation,
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

#[derive(Debug)]
pub(super) struct Cache {
    slots: HashMap<RunId, Slot>,
    /// Insertion order, oldest first, for eviction.
    order: VecDeque<RunId>,
    capacity: usize,
}

impl Cache {
    /// An empty cache of at most `capacity` runs (at least 1).
    pub(super) fn new(capacity: usize) -> Cache {
        Cache {
            slots: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Keeps at most `capacity` runs (at least 1) from the next insertion on.
    pub(super) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
    }
}

impl ObjectStoreRuntimeStore {
    pub(super) fn lock_cache(&self) -> MutexGuard<'_, Cache> {
        // The cache only maps run ids to slots; it is consistent after any panic.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn slot(&self, run_id: &RunId) -> Slot {
        let mut cache = self.lock_cache();
        if let Some(slot) = cache.slots.get(run_id) {
            return Arc::clone(slot);
        }
        while cache.slots.len() >= cache.capacity {
            let Some(oldest) = cache.order.pop_front() else {
                break;
            };
            cache.slots.remove(&oldest);
        }
        let slot = Slot::default();
        cache.slots.insert(run_id.clone(), Arc::clone(&slot));
        cache.order.push_back(run_id.clone());
        slot
    }

    pub(super) fn forget(&self, run_id: &RunId) {
        let mut cache = self.lock_cache();
        if cache.slots.remove(run_id).is_some() {
            cache.order.retain(|id| id != run_id);
        }
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
            if !terminal && self.catch_up(run_id, folded).await? {
                return Ok(Refreshed::Changed);
            }
            // Deleting a run frees its log positions, so an empty next
            // position proves nothing: the incarnation is current only if the
            // pointer still names it.
            if self.is_current(run_id, folded.incarnation).await? {
                return Ok(Refreshed::Unchanged);
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
