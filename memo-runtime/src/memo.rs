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
//! - `terminals/...`: terminal markers (see
//!   [`TerminalMarker`](crate::retention::TerminalMarker)).
//!
//! `<run>` is a checked [`RunId`] written as one lower-case segment (see
//! [`RunId`]), so one run's folder never contains another's, even on a
//! case-insensitive folder; `<incarnation>` keeps a run apart from an earlier
//! run of the same id (see [`Incarnation`]). Every object is framed with a
//! checksum; a damaged one is [`Error::Corrupt`], never a miss.

mod entries;
mod entry_cache;
pub(crate) mod flight;
pub mod shared;
mod step;

use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::layout::{Layout, MEMOS};
use crate::meter::Metered;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::seal::Seal;
use crate::write_once::{self, Created};
use flight::Flights;
use shared::SharedScope;

pub(crate) use entries::EntryFolders;
pub use entries::{EntryInfo, EntryKind};
use entry_cache::EntryCache;
pub(crate) use step::AttemptHook;
pub use step::Memo;

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

#[derive(Clone)]
struct Inner {
    /// The store given, counting a workflow attempt's requests for its
    /// cost ledger.
    store: Arc<Metered>,
    layout: Layout,
    max_value_size: usize,
    /// `None` when turned off.
    cache: Option<Arc<EntryCache>>,
    /// The scope of `#[memoized(scope = shared)]` calls ([`Memo::shared`]).
    shared_scope: Arc<SharedScope>,
    seal: Seal,
    /// The single flights of this store's memoized calls, kept by every
    /// store derived from it (see `flight`).
    flights: Arc<Flights>,
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
                store: Metered::new(store),
                layout: Layout::new(prefix),
                max_value_size: DEFAULT_MAX_VALUE_SIZE,
                cache: Some(EntryCache::new(DEFAULT_ENTRY_CACHE_BYTES)),
                shared_scope: Arc::default(),
                seal: Seal::default(),
                flights: Arc::default(),
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
        self.rebuilt(|inner| inner.max_value_size = bytes)
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
        self.rebuilt(|inner| inner.cache = (bytes > 0).then(|| EntryCache::new(bytes)))
    }

    /// The same store as seen by simulated process `process`: its
    /// committed-entry cache (a new one, of the same size) is reached only by
    /// the clears of stores of the same process. The simulator's processes
    /// share one OS process, where every clear reaches every cache; real
    /// processes see none of each other's clears.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn in_simulated_process(self, process: u64) -> MemoStore {
        self.rebuilt(|inner| {
            inner.cache = (inner.cache.as_ref())
                .map(|cache| EntryCache::in_process(cache.capacity(), process));
        })
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
        self.rebuilt(|inner| inner.seal = seal)
    }

    /// The same store with one setting changed by `change`; the others (and
    /// the committed-entry cache, unless `change` replaces it) are kept.
    fn rebuilt(self, change: impl FnOnce(&mut Inner)) -> MemoStore {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        change(&mut inner);
        MemoStore {
            inner: Arc::new(inner),
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
        self.inner.store.inner()
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
    ///
    /// Every use of a standalone run id shares its entries, across clears:
    /// a run cleared ([`clear_memos_for_run`](Self::clear_memos_for_run),
    /// a sweep of its [marker](crate::retention::Markers::write_standalone))
    /// while another process uses it may lose the entries that use writes
    /// meanwhile (they read as misses, and are computed again). With
    /// per-run data keys ([`DataKeys`](crate::seal::DataKeys)), a clear
    /// that forgets the run's key does the same and no more: the key has a
    /// generation, a write seals with the one the key store holds, and an
    /// entry sealed with a forgotten one reads as a miss (and the next put
    /// replaces it), never as corrupt; see `DataKeys`, *Standalone runs*.
    /// That costs each put of a standalone entry one `GET` of its key.
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

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        self.inner.store.as_ref()
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// Deletes `paths` in one `delete_stream`, with an answer for each
    /// ([`deletes::delete_each`](crate::deletes::delete_each)).
    pub(crate) async fn delete_each(&self, paths: Vec<Path>) -> Vec<Result<bool>> {
        crate::deletes::delete_each(self.store(), paths).await
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
                .await
                .inspect(crate::meter::entry_created);
        };
        if let Some(committed) = cache.get(path) {
            return Ok(Created::of_committed(value, committed));
        }
        let start = EntryCache::read_start();
        let created = write_once::create_once(self.store(), path, value, self.entry_limit(), seal)
            .await
            .inspect(crate::meter::entry_created)?;
        // Whoever won, the payload is the committed one: ours only if our
        // create succeeded, else what was read back from the store.
        cache.insert(path.clone(), created.payload().clone(), start);
        Ok(created)
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
        self.rebuilt(|inner| inner.shared_scope = scope)
    }
}
