//! The per-instance run cache: each run's folded state in a slot behind an
//! async lock, so one instance's calls on a run take turns, and at most
//! `capacity` runs (or bytes) kept, the least used out first. It holds what
//! others fold and does no I/O of its own.

use std::convert::Infallible;
use std::sync::Arc;

use super::folded::Folded;
use crate::run_id::RunId;

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
pub(super) struct RunCache {
    runs: quick_cache::sync::Cache<RunId, Cached, RunWeighter>,
}

impl RunCache {
    /// An empty cache within `bound` (at least 1 run, or one empty slot's
    /// bytes).
    pub(super) fn new(bound: Bound) -> RunCache {
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
        RunCache { runs }
    }
}

impl RunCache {
    /// The slot of `run_id`: the cached one, or a new empty one (which the
    /// caller fills while holding its lock).
    pub(super) fn slot(&self, run_id: &RunId) -> Slot {
        let found = self.runs.get_or_insert_with(run_id, || {
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
        let runs = &self.runs;
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
        self.runs.remove(run_id);
    }
}
