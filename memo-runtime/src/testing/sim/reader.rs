//! A long-lived reader beside the workers: its runtime-store instance reads
//! runs now and then through the history, so its cache falls behind, and
//! each of its reads is compared, at the same moment, with a fresh
//! instance's: both must read the same, and the cached read may cost no
//! more requests than the costliest fresh read (a bound whatever happened
//! since the cache was filled).

use std::sync::Arc;

use futures::FutureExt;

use super::checker::Checker;
use super::compat::PREFIX;
use super::stores::Shared;
use crate::run_id::RunId;
use crate::runtime_store::{ObjectStoreRuntimeStore, RunRecord, RuntimeStore};
use crate::testing::{CountingStore, RequestCounts};

/// How many more requests a cached read may make than the costliest fresh
/// read so far: a cached instance may first ask what changed.
const SLACK: u64 = 1;

/// A long-lived runtime-store instance over the shared objects, counting its
/// requests.
pub(super) struct CachedReader {
    objects: Arc<CountingStore<Shared>>,
    store: ObjectStoreRuntimeStore,
    /// The most requests a fresh instance's read has taken in this history:
    /// the bound a read's cost must stay within, whatever the history.
    fresh_bound: std::cell::Cell<u64>,
}

impl CachedReader {
    pub(super) fn new(shared: &Shared) -> CachedReader {
        let objects = Arc::new(CountingStore::new(Arc::clone(shared)));
        let store = ObjectStoreRuntimeStore::new(Arc::clone(&objects) as _, PREFIX);
        CachedReader {
            objects,
            store,
            fresh_bound: std::cell::Cell::new(0),
        }
    }

    /// Reads `run_id` with this instance and with a fresh one, at once, and
    /// checks both reads against each other and the cost of the cached one.
    pub(super) fn read(&self, checker: &Checker, run_id: &RunId) {
        let fresh_objects = Arc::new(CountingStore::new(Arc::clone(checker.objects())));
        let fresh = ObjectStoreRuntimeStore::new(Arc::clone(&fresh_objects) as _, PREFIX);
        let (fresh_read, fresh_cost) = read_counted(&fresh, &fresh_objects, run_id);
        let (cached_read, cached_cost) = read_counted(&self.store, &self.objects, run_id);
        let (Some(fresh_read), Some(cached_read)) = (fresh_read, cached_read) else {
            return;
        };
        let same = match (&fresh_read, &cached_read) {
            (Ok(fresh), Ok(cached)) => fresh == cached,
            // An error is checked where it matters (a corrupt read); two
            // reads that both fail agree.
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            checker.violation(
                "a cached instance reads a run as a fresh one does",
                format!(
                    "run {run_id}: a fresh instance reads {}, a long-lived one {}",
                    describe(&fresh_read),
                    describe(&cached_read)
                ),
            );
        }
        let bound = self.fresh_bound.get().max(fresh_cost);
        self.fresh_bound.set(bound);
        if cached_cost > bound + SLACK {
            checker.violation(
                "a cached read costs no more than a fresh instance's",
                format!(
                    "run {run_id}: a long-lived instance made {cached_cost} requests to read it, a fresh one {fresh_cost} (at most {bound} so far)"
                ),
            );
        }
    }
}

type Read = crate::Result<(Option<RunRecord>, usize)>;

/// The run and how many receipts it has, and how many requests reading
/// them took; `None` if the read did not complete at once.
fn read_counted(
    store: &ObjectStoreRuntimeStore,
    objects: &CountingStore<Shared>,
    run_id: &RunId,
) -> (Option<Read>, u64) {
    let before = requests(objects.counts());
    let read = async {
        let run = store.load_run(run_id).await?;
        let receipts = match &run {
            Some(_) => store.load_receipts(run_id, None).await?.len(),
            None => 0,
        };
        Ok((run, receipts))
    }
    .now_or_never();
    (read, requests(objects.counts()) - before)
}

fn requests(counts: RequestCounts) -> u64 {
    counts.puts
        + counts.creates
        + counts.multipart_uploads
        + counts.gets
        + counts.get_ranges
        + counts.heads
        + counts.delete_streams
        + counts.lists
        + counts.lists_with_offset
        + counts.lists_with_delimiter
        + counts.copies
        + counts.renames
}

fn describe(read: &Read) -> String {
    match read {
        Ok((Some(run), receipts)) => format!(
            "incarnation {} {} attempt {} with {receipts} receipt(s)",
            run.incarnation, run.status, run.attempts
        ),
        Ok((None, _)) => "no run".into(),
        Err(error) => format!("an error: {error}"),
    }
}
