//! `MemoStore` and `Memo`: write-once memo entries over any
//! [`ObjectStore`].
//!
//! # Layout
//!
//! Under the store's prefix:
//!
//! - `memos/<run>/<incarnation>/<step>/<sha256(key)>`: memo entries
//!   ([`Memo::put`]).
//! - `step-outputs/<run>/<incarnation>/<step>/<sha256(payload)>`: step-output
//!   entries, written by earlier versions only (step receipts in the runtime
//!   store replaced them); clears and sweeps still delete them.
//! - `terminals/...`: terminal markers (see [`TerminalMarker`]).
//!
//! `<run>` is a checked [`RunId`] written as one lower-case segment (see
//! [`RunId`]), so one run's folder never contains another's, even on a
//! case-insensitive folder; `<incarnation>` keeps a run apart from an earlier
//! run of the same id (see [`Incarnation`]). Every object is framed with a
//! checksum; a damaged one is [`Error::Corrupt`], never a miss.

mod entry_cache;
mod step;

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::layout::{Layout, MEMOS, STEP_OUTPUTS};
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::seal::Seal;
use crate::shared::SharedScope;
use crate::write_once::{self, Created};

use entry_cache::EntryCache;
pub(crate) use step::AttemptHook;
pub use step::Memo;

#[cfg(doc)]
use crate::retention::TerminalMarker;

/// The default largest value a memo or step-output entry may hold: 16 MiB.
pub const DEFAULT_MAX_VALUE_SIZE: usize = 16 * 1024 * 1024;

/// The default size of a [`MemoStore`]'s committed-entry cache: 64 MiB of
/// entry paths and payloads (see [`MemoStore::with_entry_cache`]).
pub const DEFAULT_ENTRY_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// Durable, write-once memo entries for many runs, over one object store and
/// a path prefix.
///
/// Cheap to clone: clones share the store and its committed-entry cache.
///
/// # The committed-entry cache
///
/// Entries are write-once, so a value this store has read or committed is
/// kept in process memory and served again without a request: a hit on a
/// folder or a bucket becomes a memory read. The cache holds up to
/// [`DEFAULT_ENTRY_CACHE_BYTES`], least recently and least frequently used
/// entries going first; resize or turn it off with
/// [`with_entry_cache`](Self::with_entry_cache). Only committed values are
/// kept, never misses, so a value another process commits is seen at the
/// next read. A cached value was checked (its frame and checksum) when it
/// was read or written; damage done to the stored object afterwards is found
/// by the next process that reads it cold. Clearing a run or an incarnation
/// ([`clear_memos_for_run`](Self::clear_memos_for_run),
/// [`clear_incarnation`](Self::clear_incarnation), a retention sweep)
/// through any `MemoStore` of the process drops its entries from every
/// cache in the process, so a cleared entry is never served again.
///
/// Only the entries of workflow runs are cached (memos of a
/// [`Context`](crate::workflow::Context) step, or made with
/// [`memo_for`](Self::memo_for) and an incarnation), and those a clear in
/// another process cannot make stale: a run is cleared only once it ended,
/// and a run created again under its id is a new incarnation, stored
/// elsewhere. Standalone memos ([`new_memo`](Self::new_memo)) are read from
/// the store every time: all standalone runs of an id share one
/// incarnation, so a value cached in one process could outlive a clear by
/// another process and a new value committed after it.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// use std::sync::Arc;
/// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
///
/// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
/// let memo = store.new_memo(&RunId::new("run-1")?, 0);
/// assert_eq!(memo.get("greeting").await?, None);
/// let committed = memo.put("greeting", b"hello").await?;
/// assert_eq!(&committed[..], b"hello");
/// // Write-once: a second put returns the committed value, not the new one.
/// assert_eq!(&memo.put("greeting", b"bonjour").await?[..], b"hello");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MemoStore {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn ObjectStore>,
    layout: Layout,
    max_value_size: usize,
    /// `None` when turned off.
    cache: Option<Arc<EntryCache>>,
    /// The scope of `#[memoized(scope = shared)]` calls ([`Memo::shared`]).
    shared_scope: Arc<SharedScope>,
    seal: Seal,
}

impl std::fmt::Debug for MemoStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoStore")
            .field("prefix", &self.inner.layout.prefix().as_ref())
            .field("max_value_size", &self.inner.max_value_size)
            .field("entry_cache_bytes", &self.entry_cache_bytes())
            .finish_non_exhaustive()
    }
}

impl MemoStore {
    /// A memo store over `store`, keeping everything under `prefix`
    /// (`""` for the store's root; `/`-separated segments, empty ones
    /// dropped), with a committed-entry cache of
    /// [`DEFAULT_ENTRY_CACHE_BYTES`].
    pub fn new(store: Arc<dyn ObjectStore>, prefix: impl Into<String>) -> MemoStore {
        MemoStore {
            inner: Arc::new(Inner {
                store,
                layout: Layout::new(prefix),
                max_value_size: DEFAULT_MAX_VALUE_SIZE,
                cache: Some(EntryCache::new(DEFAULT_ENTRY_CACHE_BYTES)),
                shared_scope: Arc::default(),
                seal: Seal::default(),
            }),
        }
    }

    /// The same store with another maximum value size in bytes (default
    /// [`DEFAULT_MAX_VALUE_SIZE`]). A larger value is refused with
    /// [`Error::TooLarge`] before anything is written. A stored entry larger
    /// than the limit and its frame is refused as [`Error::Corrupt`] before
    /// its body is read, so give every process that shares a store the same
    /// limit. The committed-entry cache is kept.
    pub fn with_max_value_size(self, bytes: usize) -> MemoStore {
        MemoStore {
            inner: Arc::new(Inner {
                store: Arc::clone(&self.inner.store),
                layout: self.inner.layout.clone(),
                max_value_size: bytes,
                cache: self.inner.cache.clone(),
                shared_scope: Arc::clone(&self.inner.shared_scope),
                seal: self.inner.seal.clone(),
            }),
        }
    }

    /// The same store with a new committed-entry cache of about `bytes`
    /// bytes (entry paths and payloads), or none if `bytes` is 0. A value
    /// larger than a slice of the cache (it is split in shards, one per few
    /// cores) is not cached.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use memo_runtime::{MemoStore, object_store::memory::InMemory};
    ///
    /// let uncached = MemoStore::new(Arc::new(InMemory::new()), "memo").with_entry_cache(0);
    /// assert_eq!(uncached.entry_cache_bytes(), 0);
    /// ```
    pub fn with_entry_cache(self, bytes: u64) -> MemoStore {
        MemoStore {
            inner: Arc::new(Inner {
                store: Arc::clone(&self.inner.store),
                layout: self.inner.layout.clone(),
                max_value_size: self.inner.max_value_size,
                cache: (bytes > 0).then(|| EntryCache::new(bytes)),
                shared_scope: Arc::clone(&self.inner.shared_scope),
                seal: self.inner.seal.clone(),
            }),
        }
    }

    /// The same store sealing every value it writes with `seal` (default
    /// [`Seal::default`]: compressed above a size, not encrypted), and
    /// reading only what `seal` accepts. The committed-entry cache is kept.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use memo_runtime::{MemoStore, object_store::memory::InMemory};
    /// use memo_runtime::seal::{Keyring, Seal};
    ///
    /// let keys = Keyring::new(1, [7; 32])?;
    /// let sealed = MemoStore::new(Arc::new(InMemory::new()), "memo")
    ///     .with_seal(Seal::default().with_encryption(keys));
    /// assert!(sealed.seal().is_encrypted());
    /// # Ok::<(), memo_runtime::Error>(())
    /// ```
    pub fn with_seal(self, seal: Seal) -> MemoStore {
        MemoStore {
            inner: Arc::new(Inner {
                store: Arc::clone(&self.inner.store),
                layout: self.inner.layout.clone(),
                max_value_size: self.inner.max_value_size,
                cache: self.inner.cache.clone(),
                shared_scope: Arc::clone(&self.inner.shared_scope),
                seal,
            }),
        }
    }

    /// How the values of this store are sealed.
    pub fn seal(&self) -> &Seal {
        &self.inner.seal
    }

    /// The size of the committed-entry cache in bytes; 0 if it is off.
    pub fn entry_cache_bytes(&self) -> u64 {
        self.inner
            .cache
            .as_ref()
            .map_or(0, |cache| cache.capacity())
    }

    /// The largest value an entry may hold, in bytes.
    pub fn max_value_size(&self) -> usize {
        self.inner.max_value_size
    }

    /// The underlying object store.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }

    /// The path prefix everything is kept under.
    pub fn prefix(&self) -> &Path {
        self.inner.layout.prefix()
    }

    /// A standalone [`Memo`] for step `step_number` of run `run_id`: one
    /// used outside a workflow, under [`Incarnation::STANDALONE`].
    ///
    /// Workflow steps get theirs from the workflow runtime, bound to the
    /// run's incarnation ([`memo_for`](Self::memo_for)).
    pub fn new_memo(&self, run_id: &RunId, step_number: u32) -> Memo {
        self.memo_for(run_id, Incarnation::STANDALONE, step_number)
    }

    /// A [`Memo`] for step `step_number` of incarnation `incarnation` of run
    /// `run_id`: its entries are apart from every other incarnation's.
    pub fn memo_for(&self, run_id: &RunId, incarnation: Incarnation, step_number: u32) -> Memo {
        Memo {
            memo_folder: self
                .layout()
                .step_folder(MEMOS, run_id, incarnation, step_number),
            store: self.clone(),
            run_id: run_id.clone(),
            incarnation,
            step_number,
            attempt: None,
            shared: None,
        }
    }

    /// Deletes every memo entry and step-output entry of `run_id`, of every
    /// incarnation, and returns how many were deleted. To clear one
    /// incarnation and nothing else, use
    /// [`clear_incarnation`](Self::clear_incarnation).
    ///
    /// Deletes go through [`ObjectStore::delete_stream`] (batched on S3, with
    /// the backend's bounded concurrency). A failed delete does not stop the
    /// others; the call then returns an error, so a retention sweep keeps the
    /// run's marker and tries again. Entries already gone count as deleted by
    /// someone else and are not counted.
    ///
    /// # Errors
    ///
    /// [`Error::ClearIncomplete`] if listing or any delete failed.
    pub async fn clear_memos_for_run(&self, run_id: &RunId) -> Result<usize> {
        let layout = &self.inner.layout;
        let folders = [MEMOS, STEP_OUTPUTS].map(|folder| layout.run_folder(folder, run_id));
        self.clear_folders(run_id, folders).await
    }

    /// Deletes every memo entry and step-output entry of one incarnation of
    /// `run_id`, and returns how many were deleted; other incarnations of the
    /// id are not touched. This is what a retention sweep does.
    ///
    /// # Errors
    ///
    /// As [`clear_memos_for_run`](Self::clear_memos_for_run).
    pub async fn clear_incarnation(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<usize> {
        let layout = &self.inner.layout;
        let folders = [MEMOS, STEP_OUTPUTS]
            .map(|folder| layout.incarnation_folder(folder, run_id, incarnation));
        self.clear_folders(run_id, folders).await
    }

    /// The committed entries of one incarnation of `run_id`, by step and
    /// digest, with their stored sizes: what an operator's tool shows of a
    /// run, without building any stored path itself. Entries written under
    /// the step-output folders of the previous layout are listed too, as
    /// [`EntryKind::LegacyStepOutput`]; objects in the run's folders that are
    /// not entries are skipped with a warning. One listing per folder; the
    /// whole answer is held in memory (a run's entries, not the store's).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if a listing fails.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{Incarnation, MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    /// let run = RunId::new("order-7")?;
    /// store.new_memo(&run, 3).put("charge", b"ch_1").await?;
    /// let entries = store.list_entries(&run, Incarnation::STANDALONE).await?;
    /// assert_eq!(entries.len(), 1);
    /// assert_eq!((entries[0].step, entries[0].size > 4), (3, true));
    /// # Ok(()) }
    /// ```
    pub async fn list_entries(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<EntryInfo>> {
        let layout = &self.inner.layout;
        let mut entries = Vec::new();
        for (kind, folder) in [
            (EntryKind::Memo, MEMOS),
            (EntryKind::LegacyStepOutput, STEP_OUTPUTS),
        ] {
            let prefix = layout.incarnation_folder(folder, run_id, incarnation);
            let metas: Vec<_> = self
                .store()
                .list(Some(&prefix))
                .try_collect()
                .await
                .map_err(|e| Error::store(&prefix, e))?;
            for meta in metas {
                let parts: Vec<_> = meta
                    .location
                    .prefix_match(&prefix)
                    .into_iter()
                    .flatten()
                    .collect();
                let step = match parts.as_slice() {
                    [step, digest] => step
                        .as_ref()
                        .parse::<u32>()
                        .ok()
                        .map(|step| (step, digest.as_ref().to_string())),
                    _ => None,
                };
                match step {
                    Some((step, digest)) => entries.push(EntryInfo {
                        kind,
                        step,
                        digest,
                        size: meta.size,
                    }),
                    None => {
                        tracing::warn!(path = %meta.location, "skipping an object that is not a memo entry");
                    }
                }
            }
        }
        // LocalFileSystem lists in no particular order.
        entries.sort_by(|a, b| (a.kind, a.step, &a.digest).cmp(&(b.kind, b.step, &b.digest)));
        Ok(entries)
    }

    /// The paths of the objects that [`list_entries`](Self::list_entries)
    /// lists (every memo and legacy step-output entry of incarnation
    /// `incarnation` of `run_id`), for a tool that copies a run's entries
    /// whole to another store (`memoctl export`).
    ///
    /// # Errors
    ///
    /// A store error listing the run's folders.
    pub async fn list_entry_paths(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<Path>> {
        let layout = &self.inner.layout;
        let mut paths = Vec::new();
        for folder in [MEMOS, STEP_OUTPUTS] {
            let prefix = layout.incarnation_folder(folder, run_id, incarnation);
            let listed: Vec<Path> = self
                .store()
                .list(Some(&prefix))
                .map_ok(|meta| meta.location)
                .try_collect()
                .await
                .map_err(|e| Error::store(&prefix, e))?;
            paths.extend(listed);
        }
        paths.sort();
        Ok(paths)
    }

    async fn clear_folders(&self, run_id: &RunId, folders: [Path; 2]) -> Result<usize> {
        // Dropped after the deletes, however they end (an error, a
        // cancelled call): any entry under the folders may be gone.
        let _forget = entry_cache::ForgetOnDrop(&folders);
        self.delete_folders(run_id, &folders).await
    }

    async fn delete_folders(&self, run_id: &RunId, folders: &[Path; 2]) -> Result<usize> {
        let mut deleted = 0;
        let mut failed = 0;
        let mut first_error = None;
        for prefix in folders {
            let locations = self
                .store()
                .list(Some(prefix))
                .map_ok(|meta| meta.location)
                .boxed();
            let mut results = self.store().delete_stream(locations);
            while let Some(result) = results.next().await {
                match result {
                    Ok(_) => deleted += 1,
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => {
                        tracing::warn!(run_id = %run_id, prefix = %prefix, error = %e, "delete failed");
                        failed += 1;
                        first_error.get_or_insert(Error::store(prefix, e));
                    }
                }
            }
        }
        match first_error {
            None => Ok(deleted),
            Some(first) => Err(Error::ClearIncomplete {
                run_id: run_id.to_string(),
                deleted,
                failed,
                source: Box::new(first),
            }),
        }
    }

    /// How many memo and step-output entries `run_id` has: what
    /// [`clear_memos_for_run`](Self::clear_memos_for_run) would delete now.
    pub(crate) async fn count_incarnation_entries(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<usize> {
        let mut count = 0;
        for folder in [MEMOS, STEP_OUTPUTS] {
            let prefix = self
                .inner
                .layout
                .incarnation_folder(folder, run_id, incarnation);
            count += self
                .store()
                .list(Some(&prefix))
                .try_fold(0, |n, _| futures::future::ready(Ok(n + 1)))
                .await
                .map_err(|e| Error::store(&prefix, e))?;
        }
        Ok(count)
    }

    /// Whether incarnation `incarnation` of the run has any memo or
    /// step-output entry; stops at the first one found.
    pub(crate) async fn has_incarnation_entries(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<bool> {
        for folder in [MEMOS, STEP_OUTPUTS] {
            let prefix = self
                .inner
                .layout
                .incarnation_folder(folder, run_id, incarnation);
            let first = self
                .store()
                .list(Some(&prefix))
                .try_next()
                .await
                .map_err(|e| Error::store(&prefix, e))?;
            if first.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        self.inner.store.as_ref()
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// The most an entry of this store may take in the store: a larger one
    /// is refused before it is read.
    fn entry_limit(&self) -> Limit {
        Limit::memo_entry(self.inner.max_value_size)
    }

    /// The committed payload at `path`, if any, sealed by `seal` (this
    /// store's, for the entry's run): from `cache`, else read (and checked)
    /// and kept there.
    async fn read(
        &self,
        path: &Path,
        cache: Option<&EntryCache>,
        seal: &Seal,
    ) -> Result<Option<Bytes>> {
        let Some(cache) = cache else {
            return write_once::read(self.store(), path, self.entry_limit(), seal).await;
        };
        if let Some(hit) = cache.get(path) {
            return Ok(Some(hit));
        }
        let start = EntryCache::read_start();
        let read = write_once::read(self.store(), path, self.entry_limit(), seal).await?;
        if let Some(payload) = &read {
            cache.insert(path.clone(), payload.clone(), start);
        }
        Ok(read)
    }

    /// Creates `path` with `value` (sealed by `seal`, this store's for the
    /// entry's run) unless it exists, after the size check; `key` names the
    /// entry in a `TooLarge` error. A committed payload in `cache` answers
    /// without a request.
    pub(crate) async fn create(
        &self,
        path: &Path,
        value: &[u8],
        cache: Option<&EntryCache>,
        seal: &Seal,
        key: impl FnOnce() -> String,
    ) -> Result<Created> {
        if value.len() > self.inner.max_value_size {
            return Err(Error::TooLarge {
                key: key(),
                size: value.len(),
                limit: self.inner.max_value_size,
            });
        }
        let Some(cache) = cache else {
            return write_once::create_once(self.store(), path, value, self.entry_limit(), seal)
                .await;
        };
        if let Some(committed) = cache.get(path) {
            return Ok(Created::of_committed(value, committed));
        }
        let start = EntryCache::read_start();
        let created =
            write_once::create_once(self.store(), path, value, self.entry_limit(), seal).await?;
        // Whoever won, the payload is the committed one: ours only if our
        // create succeeded, else what was read back from the store.
        cache.insert(path.clone(), created.payload().clone(), start);
        Ok(created)
    }
}

/// One committed entry of a run, as [`MemoStore::list_entries`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// Where the entry is stored.
    pub kind: EntryKind,
    /// The step number of the [`Memo`] that committed it.
    pub step: u32,
    /// The entry's name: the SHA-256 of its key, in hex.
    pub digest: String,
    /// Its stored size in bytes (frame included).
    pub size: u64,
}

/// Which folder a [`EntryInfo`] was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKind {
    /// A memo entry ([`Memo::put`], `#[memoized]`, step receipts' memos).
    Memo,
    /// A step-output entry of the previous layout (no longer written; still
    /// listed and swept).
    LegacyStepOutput,
}

impl EntryKind {
    /// A short name for tools: `memo` or `step-output`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Memo => "memo",
            EntryKind::LegacyStepOutput => "step-output",
        }
    }
}

/// What the shared scope (`crate::shared`) needs of a store and a memo.
impl MemoStore {
    /// The scope of this store's `#[memoized(scope = shared)]` calls.
    pub(crate) fn shared_scope_arc(&self) -> &Arc<SharedScope> {
        &self.inner.shared_scope
    }

    /// The same store whose shared calls are in `scope`.
    pub(crate) fn with_shared_scope_arc(self, scope: Arc<SharedScope>) -> MemoStore {
        MemoStore {
            inner: Arc::new(Inner {
                store: Arc::clone(&self.inner.store),
                layout: self.inner.layout.clone(),
                max_value_size: self.inner.max_value_size,
                cache: self.inner.cache.clone(),
                shared_scope: scope,
                seal: self.inner.seal.clone(),
            }),
        }
    }
}
