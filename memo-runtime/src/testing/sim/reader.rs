//! A long-lived reader beside the workers: its runtime-store instance reads
//! runs now and then through the history, so its cache falls behind, and
//! each of its reads is compared, at the same moment, with a fresh
//! instance's: both must read the same, and the cached read may cost no
//! more requests than the costliest fresh read (a bound whatever happened
//! since the cache was filled).

use std::sync::Arc;

use futures::FutureExt;

use super::checker::Checker;
use super::compat;
use super::sealed::{self, KeyFile};
use super::stores::Shared;
use crate::run_id::RunId;
use crate::runtime_store::{ObjectStoreRuntimeStore, RunRecord, RuntimeStore};
use crate::testing::{CountingStore, RequestCounts};

/// How many more requests a cached read may make than the costliest fresh
/// read so far: the `GET` of the next log position, by which a cached
/// instance learns whether the run moved on. Everything else a cached read
/// makes, a fresh load makes too: the pointer read first (which also sends
/// a deleted, or deleted and re-created, run straight to a fresh load, never
/// through the deleted incarnation's leftovers), then, if the run moved, the
/// delta listing, the delta and its base (not read where the cache holds
/// the base's receipts), the log listing and the entries after the delta or
/// the cached position, whichever is later.
const SLACK: u64 = 1;

/// A long-lived runtime-store instance over the shared objects, counting its
/// requests.
pub(super) struct CachedReader {
    objects: Arc<CountingStore<Shared>>,
    store: ObjectStoreRuntimeStore,
    /// The key file it read at its start, in a sealed history.
    key_file: Option<KeyFile>,
    /// The most requests a fresh instance's read has taken in this history:
    /// the bound a read's cost must stay within, whatever the history.
    fresh_bound: std::cell::Cell<u64>,
}

impl CachedReader {
    pub(super) fn new(shared: &Shared) -> CachedReader {
        let objects = Arc::new(CountingStore::new(Arc::clone(shared)));
        let store = compat::open_stores(Arc::clone(&objects) as _).1;
        CachedReader {
            objects,
            store,
            key_file: sealed::key_file(),
            fresh_bound: std::cell::Cell::new(0),
        }
    }

    /// The reader's process restarts (onto the key file as it is now, in a
    /// history whose key rotates): a new instance, its cache empty. The
    /// bound on a read's cost is the history's, and carries over.
    pub(super) fn restart(&mut self) {
        self.store = compat::open_stores(Arc::clone(&self.objects) as _).1;
        self.key_file = sealed::key_file();
    }

    /// The key file it read at its start.
    pub(super) fn key_file(&self) -> Option<KeyFile> {
        self.key_file
    }

    /// Reads `run_id` with this instance and with a fresh one, at once, and
    /// checks both reads against each other and the cost of the cached one.
    pub(super) fn read(&self, checker: &Checker, run_id: &RunId) {
        let fresh_objects = Arc::new(CountingStore::new(Arc::clone(checker.objects())));
        let fresh = compat::open_stores(Arc::clone(&fresh_objects) as _).1;
        let (fresh_read, fresh_kinds) = read_counted(&fresh, &fresh_objects, run_id);
        let (cached_read, cached_kinds) = read_counted(&self.store, &self.objects, run_id);
        let (fresh_cost, cached_cost) = (requests(&fresh_kinds), requests(&cached_kinds));
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
                    "run {run_id}: a long-lived instance made {cached_cost} requests to read it ({}), a fresh one {fresh_cost} ({}; at most {bound} so far)",
                    kinds(&cached_kinds),
                    kinds(&fresh_kinds)
                ),
            );
        }
    }
}

type Read = crate::Result<(Option<RunRecord>, usize)>;

/// The run and how many receipts it has, and the requests reading them
/// took, by kind; `None` if the read did not complete at once.
fn read_counted(
    store: &ObjectStoreRuntimeStore,
    objects: &CountingStore<Shared>,
    run_id: &RunId,
) -> (Option<Read>, Vec<(&'static str, u64)>) {
    let before = by_kind(objects.counts());
    let read = async {
        let run = store.load_run(run_id).await?;
        let receipts = match &run {
            Some(_) => store.load_receipts(run_id, None).await?.len(),
            None => 0,
        };
        Ok((run, receipts))
    }
    .now_or_never();
    let after = by_kind(objects.counts());
    let made = (after.iter().zip(before))
        .map(|(&(kind, after), (_, before))| (kind, after - before))
        .collect();
    (read, made)
}

/// The requests in `counts`, by kind (each a request, unlike the counts of
/// bytes and objects).
fn by_kind(counts: RequestCounts) -> Vec<(&'static str, u64)> {
    vec![
        ("put", counts.puts),
        ("create", counts.creates),
        ("multipart upload", counts.multipart_uploads),
        ("get", counts.gets),
        ("get ranges", counts.get_ranges),
        ("head", counts.heads),
        ("delete", counts.delete_streams),
        ("list", counts.lists),
        ("list with offset", counts.lists_with_offset),
        ("list with delimiter", counts.lists_with_delimiter),
        ("copy", counts.copies),
        ("rename", counts.renames),
    ]
}

fn requests(kinds: &[(&'static str, u64)]) -> u64 {
    kinds.iter().map(|(_, n)| n).sum()
}

/// The kinds of requests made, for a violation's message: "2 get, 1 list".
fn kinds(kinds: &[(&'static str, u64)]) -> String {
    let made: Vec<String> = (kinds.iter().filter(|(_, n)| *n > 0))
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    made.join(", ")
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
