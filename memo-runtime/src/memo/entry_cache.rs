//! The committed-entry cache: payloads of memo and step-output entries this
//! process has read or committed, so a repeated read costs no request.
//!
//! Entries are write-once, so a committed payload never goes stale while
//! its object exists; the one way it can go is a clear (a retention sweep, a
//! cleared standalone run). Every clear in the process therefore drops the
//! cleared folders from every cache in the process ([`forget_folders`]),
//! whichever `MemoStore` instance did the clear, and a read that raced the
//! clear is not kept (see [`EntryCache::insert`]). Misses are never cached:
//! another process may commit at any moment.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use bytes::Bytes;
use object_store::path::Path;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

/// Bytes counted per entry besides its path and payload: the cache's own
/// bookkeeping, so that many tiny entries are bounded too.
const ENTRY_OVERHEAD: u64 = 64;

/// How many entries of an average 1 KiB a cache of `bytes` is sized for up
/// front; it grows past that as needed, within its byte bound.
const ASSUMED_ENTRY_BYTES: u64 = 1024;

/// How many recent clears [`CLEARS`] remembers. A read that spans more
/// clears than this is not kept (it may have raced any of them).
const REMEMBERED_CLEARS: usize = 256;

/// The clears of this process that have finished deleting, most recent
/// last, numbered in order. A read that started before a clear finished
/// may have seen an entry the clear deleted: it is kept only if no clear
/// since its start covers its path.
static CLEARS: LazyLock<Mutex<Clears>> = LazyLock::new(Mutex::default);

#[derive(Default)]
struct Clears {
    /// The number the next clear gets.
    next: u64,
    /// `(number, process, folders)` of the last [`REMEMBERED_CLEARS`]
    /// clears.
    recent: VecDeque<(u64, u64, Vec<Path>)>,
}

impl Clears {
    fn record(&mut self, process: u64, folders: &[Path]) {
        self.recent
            .push_back((self.next, process, folders.to_vec()));
        self.next += 1;
        if self.recent.len() > REMEMBERED_CLEARS {
            self.recent.pop_front();
        }
    }

    /// Whether a clear of `process` numbered `since` or later may have
    /// covered `path`.
    fn covered_since(&self, since: u64, process: u64, path: &Path) -> bool {
        if since >= self.next {
            return false;
        }
        let forgotten = self
            .recent
            .front()
            .is_none_or(|(first, _, _)| since < *first);
        forgotten
            || self
                .recent
                .iter()
                .filter(|(number, by, _)| *number >= since && *by == process)
                .any(|(_, _, folders)| folders.iter().any(|f| path.prefix_matches(f)))
    }
}

fn clears() -> std::sync::MutexGuard<'static, Clears> {
    // Consistent after every statement; see `registry`.
    CLEARS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every live cache in the process, so a clear through one `MemoStore`
/// reaches the caches of all others (two instances over one folder).
static CACHES: LazyLock<Mutex<Vec<Weak<EntryCache>>>> = LazyLock::new(Mutex::default);

/// A bounded map from entry path to committed payload, weighed in bytes.
pub(crate) struct EntryCache {
    entries: Cache<Path, Bytes, ByteWeighter>,
    /// The paths inserted, in order, so that a clear finds the entries of
    /// its folders without walking the whole cache. It may still name
    /// entries the cache evicted since; it is rebuilt from the cache when
    /// those outnumber the live ones, so it holds at most about twice the
    /// cache's paths.
    index: Mutex<BTreeMap<String, Path>>,
    /// The process the cache belongs to, whose clears reach it: 0, but for
    /// the simulator's processes, which share one OS process and must not
    /// share their clears ([`EntryCache::in_process`]).
    process: u64,
}

/// Where a read stood relative to clears when it started: pass it back to
/// [`EntryCache::insert`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadStart(u64);

#[derive(Clone)]
struct ByteWeighter;

impl Weighter<Path, Bytes> for ByteWeighter {
    fn weight(&self, path: &Path, payload: &Bytes) -> u64 {
        (path.as_ref().len() + payload.len()) as u64 + ENTRY_OVERHEAD
    }
}

impl EntryCache {
    /// A cache holding at most about `bytes` bytes of paths and payloads,
    /// registered so that clears anywhere in the process reach it.
    pub(crate) fn new(bytes: u64) -> Arc<EntryCache> {
        EntryCache::in_process(bytes, 0)
    }

    /// [`new`](Self::new), for simulated process `process`: only the
    /// clears of a `MemoStore` whose cache belongs to the same process reach
    /// it, as only a real process's own clears reach its caches.
    pub(crate) fn in_process(bytes: u64, process: u64) -> Arc<EntryCache> {
        let items = (bytes / ASSUMED_ENTRY_BYTES).max(16) as usize;
        let cache = Arc::new(EntryCache {
            entries: Cache::with_weighter(items, bytes, ByteWeighter),
            index: Mutex::default(),
            process,
        });
        let mut caches = registry();
        caches.retain(|weak| weak.strong_count() > 0);
        caches.push(Arc::downgrade(&cache));
        cache
    }

    /// The process the cache belongs to (see [`in_process`](Self::in_process)).
    pub(crate) fn process(&self) -> u64 {
        self.process
    }

    /// The byte bound this cache was made with.
    pub(crate) fn capacity(&self) -> u64 {
        self.entries.capacity()
    }

    /// The committed payload at `path`, if cached.
    pub(crate) fn get(&self, path: &Path) -> Option<Bytes> {
        self.entries.get(path)
    }

    /// Call before the request whose answer may be inserted.
    pub(crate) fn read_start() -> ReadStart {
        ReadStart(clears().next)
    }

    /// Keeps `payload`, known committed at `path` by a request made after
    /// `start`.
    ///
    /// A clear of a folder holding `path` that finished deleting after
    /// `start` may have deleted the entry after the request saw it, and may
    /// already have swept the caches: then the entry is dropped again here.
    /// The order makes it safe: a clear deletes, then records itself in
    /// [`CLEARS`], then sweeps; so either its sweep comes after this insert,
    /// or its record is seen by the check after it.
    pub(crate) fn insert(&self, path: Path, payload: Bytes, start: ReadStart) {
        if clears().covered_since(start.0, self.process, &path) {
            return;
        }
        self.entries.insert(path.clone(), payload);
        self.indexed(&path);
        // After the index holds the path: a clear that swept the index
        // before it is recorded by then.
        if clears().covered_since(start.0, self.process, &path) {
            self.entries.remove(&path);
        }
    }

    fn indexed(&self, path: &Path) {
        let mut index = self.index();
        index.insert(path.to_string(), path.clone());
        if index.len() > 2 * self.entries.len() + 1024 {
            *index = (self.entries.iter())
                .map(|(path, _)| (path.to_string(), path))
                .collect();
        }
    }

    /// Drops the entries under `folders`: a lookup per folder in the index,
    /// not a walk of the cache, so a sweep clearing many runs costs each
    /// cache in the process only what it holds of those runs.
    fn forget_under(&self, folders: &[Path]) {
        let mut index = self.index();
        for folder in folders {
            let under = format!("{folder}/");
            let keys: Vec<String> = index
                .range(under.clone()..)
                .take_while(|(key, _)| key.starts_with(&under))
                .map(|(key, _)| key.clone())
                .collect();
            for key in keys {
                if let Some(path) = index.remove(&key) {
                    self.entries.remove(&path);
                }
            }
        }
    }

    fn index(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Path>> {
        // Consistent after every statement; see `registry`.
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Drops every cached entry under `folders` from every cache in the
/// process, at a cost per cache of one index lookup per folder plus the
/// entries it drops (never a walk of the cache), whatever the cache holds
/// of other runs. Call after the folders' objects were deleted (or their deletes
/// were tried), never before: a read between the sweep and the deletes
/// would put an entry back.
pub(crate) fn forget_folders(process: u64, folders: &[Path]) {
    clears().record(process, folders);
    let caches: Vec<Arc<EntryCache>> = registry().iter().filter_map(Weak::upgrade).collect();
    for cache in caches.iter().filter(|cache| cache.process == process) {
        cache.forget_under(folders);
    }
}

/// Calls [`forget_folders`] when dropped: hold it across a clear's deletes,
/// so the caches are swept however the clear ends, cancelled included.
/// The first field is the clearing store's process (0 outside the
/// simulator).
pub(crate) struct ForgetOnDrop<'a>(pub(crate) u64, pub(crate) &'a [Path]);

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        forget_folders(self.0, self.1);
    }
}

fn registry() -> std::sync::MutexGuard<'static, Vec<Weak<EntryCache>>> {
    // The list is consistent after every statement: a panic elsewhere while
    // it was locked leaves nothing to repair.
    CACHES.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Path {
        Path::from(p)
    }

    #[test]
    fn a_read_that_raced_a_clear_of_its_folder_is_not_kept() {
        let cache = EntryCache::new(1 << 20);
        let start = EntryCache::read_start();
        // The clear deleted the entry after the read saw it, and swept the
        // caches before the read's answer arrived.
        forget_folders(0, &[path("test-race/memos/run-a")]);
        cache.insert(path("test-race/memos/run-a/0/0/k"), Bytes::from("v"), start);
        assert_eq!(cache.get(&path("test-race/memos/run-a/0/0/k")), None);
    }

    #[test]
    fn a_read_that_raced_a_clear_of_another_folder_is_kept() {
        let cache = EntryCache::new(1 << 20);
        let start = EntryCache::read_start();
        forget_folders(0, &[path("test-other/memos/run-b")]);
        cache.insert(
            path("test-other/memos/run-a/0/0/k"),
            Bytes::from("v"),
            start,
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_clear_drops_its_folders_from_every_cache_and_nothing_else() {
        let (one, two) = (EntryCache::new(1 << 20), EntryCache::new(1 << 20));
        for cache in [&one, &two] {
            let start = EntryCache::read_start();
            for p in ["test-drop/memos/a/1/0/k", "test-drop/memos/a/2/0/k"] {
                cache.insert(path(p), Bytes::from("v"), start);
            }
        }
        forget_folders(0, &[path("test-drop/memos/a/1")]);
        for cache in [&one, &two] {
            assert_eq!(cache.get(&path("test-drop/memos/a/1/0/k")), None);
            assert!(cache.get(&path("test-drop/memos/a/2/0/k")).is_some());
        }
    }

    #[test]
    fn a_clear_in_another_simulated_process_reaches_none_of_this_ones_caches() {
        let here = EntryCache::in_process(1 << 20, 7_000_001);
        let start = EntryCache::read_start();
        here.insert(path("test-process/memos/a/0/0/k"), Bytes::from("v"), start);
        forget_folders(7_000_002, &[path("test-process/memos/a")]);
        assert!(here.get(&path("test-process/memos/a/0/0/k")).is_some());
        // And a read that raced it is kept: the clear was another process's.
        let raced = EntryCache::read_start();
        forget_folders(7_000_002, &[path("test-process/memos/b")]);
        here.insert(path("test-process/memos/b/0/0/k"), Bytes::from("v"), raced);
        assert!(here.get(&path("test-process/memos/b/0/0/k")).is_some());
        forget_folders(7_000_001, &[path("test-process/memos/a")]);
        assert_eq!(here.get(&path("test-process/memos/a/0/0/k")), None);
    }

    #[test]
    fn a_read_spanning_more_clears_than_remembered_counts_as_raced() {
        // A log of its own: other tests clear concurrently.
        let mut clears = Clears::default();
        let start = clears.next;
        let entry = path("memos/a/0/0/k");
        clears.record(0, &[path("elsewhere")]);
        assert!(!clears.covered_since(start, 0, &entry));
        for _ in 0..REMEMBERED_CLEARS {
            clears.record(0, &[path("elsewhere")]);
        }
        assert!(clears.covered_since(start, 0, &entry));
        assert!(!clears.covered_since(clears.next, 0, &entry));
    }
}
