//! The per-instance run cache: each run's folded state behind an async
//! lock, so one instance's calls on a run take turns, and at most
//! `capacity` runs kept, the least used out first.

use std::convert::Infallible;
use std::sync::Arc;

use super::ObjectStoreRuntimeStore;
use super::folded::Folded;
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::runtime_store::state::RunState;

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

/// What the cache holds for a run: its slot and what the slot weighed when
/// it was last filled (quick_cache needs a value's weight to stay fixed, so
/// a slot that grows is put back with its new weight).
#[derive(Debug, Clone)]
struct Cached {
    slot: Slot,
    bytes: u64,
}

/// What a run held in memory costs beyond its payloads, and what an empty
/// slot weighs (never 0: quick_cache never evicts a weightless item).
const RUN_OVERHEAD_BYTES: u64 = 512;

/// How many runs a cache bounded in bytes expects to hold, which sets how
/// many shards split its budget: at most 4, so a run of up to a quarter of
/// the budget is kept.
const ESTIMATED_RUNS: usize = 128;

/// What the cache is bounded by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bound {
    /// The bytes of the runs' folded states (approximately).
    Bytes(u64),
    /// The number of runs, whatever their size.
    Runs(usize),
}

#[derive(Debug, Clone)]
struct RunWeighter {
    by_bytes: bool,
}

impl quick_cache::Weighter<RunId, Cached> for RunWeighter {
    fn weight(&self, _: &RunId, cached: &Cached) -> u64 {
        if self.by_bytes { cached.bytes } else { 1 }
    }
}

/// The folded runs of one instance, evicted by use (quick_cache's
/// CLOCK-Pro policy: a run read or written again is kept over one that was
/// only loaded once), so a process that keeps working on a few runs while
/// it reads many others keeps its working set.
#[derive(Debug)]
pub(super) struct Cache {
    runs: quick_cache::sync::Cache<RunId, Cached, RunWeighter>,
}

impl Cache {
    /// An empty cache within `bound` (at least 1 run, or one empty slot's
    /// bytes).
    pub(super) fn new(bound: Bound) -> Cache {
        let runs = match bound {
            Bound::Bytes(bytes) => quick_cache::sync::Cache::with_weighter(
                ESTIMATED_RUNS,
                bytes.max(RUN_OVERHEAD_BYTES),
                RunWeighter { by_bytes: true },
            ),
            Bound::Runs(runs) => {
                let runs = runs.max(1);
                quick_cache::sync::Cache::with_weighter(
                    runs,
                    runs as u64,
                    RunWeighter { by_bytes: false },
                )
            }
        };
        Cache { runs }
    }
}

impl ObjectStoreRuntimeStore {
    /// The slot of `run_id`: the cached one, or a new empty one (which the
    /// caller fills while holding its lock).
    pub(super) fn slot(&self, run_id: &RunId) -> Slot {
        let found = self.cache.runs.get_or_insert_with(run_id, || {
            Ok::<_, Infallible>(Cached {
                slot: Slot::default(),
                bytes: RUN_OVERHEAD_BYTES,
            })
        });
        match found {
            Ok(cached) => cached.slot,
        }
    }

    /// Weighs `slot` again after it changed (its lock held, `folded` its
    /// content), so the cache's byte bound counts the run as it is now. A
    /// run the cache dropped meanwhile, or another slot of it, is left as
    /// it is.
    pub(super) fn reweigh(&self, run_id: &RunId, slot: &Slot, folded: Option<&Folded>) {
        let bytes =
            RUN_OVERHEAD_BYTES.saturating_add(folded.map_or(0, |f| f.state.approximate_bytes()));
        let runs = &self.cache.runs;
        let held = runs.peek(run_id);
        if held.is_some_and(|h| Arc::ptr_eq(&h.slot, slot) && h.bytes != bytes) {
            let cached = Cached {
                slot: slot.clone(),
                bytes,
            };
            // Soft: a re-weighing is not a use.
            let _ = runs.replace(run_id.clone(), cached, true);
        }
    }

    pub(super) fn forget(&self, run_id: &RunId) {
        self.cache.runs.remove(run_id);
    }

    /// Makes `slot` hold the run as storage has it: folded from storage if
    /// it is not cached, caught up if it is.
    ///
    /// A cached run reads the pointer first, and catches up only if it still
    /// names the cached incarnation. Deleting a run frees its log positions,
    /// and a deletion that stopped part-way leaves some of its entries (and
    /// checkpoints) behind, so neither an empty nor a found next position
    /// proves anything: only the pointer tells whether the incarnation is
    /// current. Read first, it also keeps the cost of a cached read within a
    /// fresh load's, whatever happened since the run was cached: a cached
    /// incarnation that was deleted is never caught up on (its leftovers may
    /// be a whole log), and the pointer read is the one a fresh load starts
    /// with, so a run deleted, or deleted and created again, is loaded from
    /// it at exactly a fresh load's cost. A read that catches up costs a
    /// fresh load's requests plus the one `GET` of the next log position.
    ///
    /// What the catch-up then reads is the incarnation's own log, as a fresh
    /// load reads it after its own pointer read: if a deletion starts
    /// meanwhile, both answer with the run as it was at some moment of the
    /// read (a prefix of its log), and a catch-up that finds entries or
    /// checkpoints gone under it counts as corrupt only if the pointer still
    /// names the incarnation.
    pub(super) async fn refresh(
        &self,
        run_id: &RunId,
        slot: &mut Option<Folded>,
    ) -> Result<Refreshed> {
        self.refresh_known(run_id, slot, false).await
    }

    /// [`refresh`](Self::refresh), where `moved` says the cached run is
    /// known to have more log entries than it folded (a commit found its
    /// position taken), so the read of its next position is skipped.
    pub(super) async fn refresh_known(
        &self,
        run_id: &RunId,
        slot: &mut Option<Folded>,
        moved: bool,
    ) -> Result<Refreshed> {
        let Some(folded) = slot.as_mut() else {
            *slot = self.fold_from_storage(run_id).await?;
            return Ok(Self::refreshed(slot));
        };
        let Some(mut current) = self.read_creation(run_id).await? else {
            *slot = None;
            return Ok(Refreshed::Missing);
        };
        if current.incarnation == folded.incarnation {
            // Nothing follows a terminal change, so a terminal run has
            // nothing to catch up on.
            if folded.state.record().status.is_terminal() {
                return Ok(Refreshed::Unchanged);
            }
            let caught_up = if moved {
                self.fold_newer(run_id, folded).await.map(|()| true)
            } else {
                self.catch_up(run_id, folded).await
            };
            match caught_up {
                Ok(true) => return Ok(Refreshed::Changed),
                Ok(false) => return Ok(Refreshed::Unchanged),
                // A deletion removes the pointer first: checkpoints and
                // entries that vanished under the catch-up are of a run that
                // is gone, not a corrupt one.
                Err(e @ Error::Corrupt { .. }) => {
                    let Some(now) = self.read_creation(run_id).await? else {
                        *slot = None;
                        return Ok(Refreshed::Missing);
                    };
                    if now.incarnation == folded.incarnation {
                        return Err(e);
                    }
                    current = now;
                }
                Err(e) => return Err(e),
            }
        }
        *slot = self.fold_current(run_id, current).await?;
        Ok(Self::refreshed(slot))
    }

    fn refreshed(slot: &Option<Folded>) -> Refreshed {
        if slot.is_some() {
            Refreshed::Changed
        } else {
            Refreshed::Missing
        }
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
        self.reweigh(run_id, &slot, guard.as_ref());
        Ok(guard.as_ref().map(|folded| answer(&folded.state)))
    }
}
