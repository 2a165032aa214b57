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

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::key::{content_key, sha256_digest};
use crate::layout::{Layout, MEMOS, STEP_OUTPUTS};
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::seal::Seal;
use crate::write_once::{self, Created};

use entry_cache::EntryCache;

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

    /// The committed payload at `path`, if any: from `cache`, else read
    /// (and checked) and kept there.
    async fn read(&self, path: &Path, cache: Option<&EntryCache>) -> Result<Option<Bytes>> {
        let Some(cache) = cache else {
            return write_once::read(self.store(), path, self.entry_limit(), self.seal()).await;
        };
        if let Some(hit) = cache.get(path) {
            return Ok(Some(hit));
        }
        let start = EntryCache::read_start();
        let read = write_once::read(self.store(), path, self.entry_limit(), self.seal()).await?;
        if let Some(payload) = &read {
            cache.insert(path.clone(), payload.clone(), start);
        }
        Ok(read)
    }

    /// Creates `path` with `value` unless it exists, after the size check;
    /// `key` names the entry in a `TooLarge` error. A committed payload in
    /// `cache` answers without a request.
    async fn create(
        &self,
        path: &Path,
        value: &[u8],
        cache: Option<&EntryCache>,
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
            return write_once::create_once(
                self.store(),
                path,
                value,
                self.entry_limit(),
                self.seal(),
            )
            .await;
        };
        if let Some(committed) = cache.get(path) {
            return Ok(Created::of_committed(value, committed));
        }
        let start = EntryCache::read_start();
        let created =
            write_once::create_once(self.store(), path, value, self.entry_limit(), self.seal())
                .await?;
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

/// The memo of one step of one run incarnation: a write-once key-value map
/// whose entries survive crashes, retries and other processes.
///
/// Every caller of a key sees one value: [`put`](Memo::put) creates the
/// entry only if it is absent and otherwise returns what is committed.
#[derive(Clone)]
pub struct Memo {
    store: MemoStore,
    run_id: RunId,
    incarnation: Incarnation,
    step_number: u32,
    /// `<prefix>/memos/<run>/<inc>/<step>`, built once: every key's path
    /// is this plus one segment.
    memo_folder: Path,
    /// The workflow attempt this memo's step belongs to: checked before a
    /// memoized call runs its body, and told of the memo's transient errors;
    /// `None` for a standalone memo.
    attempt: Option<Arc<dyn AttemptHook>>,
}

/// What a workflow step's memo asks of the attempt it belongs to: the one
/// hook between the memo layer and the workflow runtime.
pub(crate) trait AttemptHook: Send + Sync + std::fmt::Debug {
    /// Makes sure the attempt holds its run's lease by the local clock now,
    /// renewing it (and checking each renewal again) if it expired: the one
    /// lease check before every body of a workflow attempt, a step's or a
    /// memoized call's.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] (or a conflict) if another attempt took the run
    /// over or the lease keeps expiring while it is renewed; a store error if
    /// a renewal failed.
    fn ensure_lease(&self) -> futures::future::BoxFuture<'_, Result<()>>;

    /// Tells the attempt of a memo-layer error met in its step: one that
    /// does not fail the run ([`Error::fails_run`]) stops the attempt and
    /// leaves the run open, whatever the step's code does with the error.
    fn report(&self, error: &Error);

    /// The attempt's number (the simulator's audit of step bodies asks).
    #[cfg(feature = "testing")]
    fn attempt(&self) -> u32;
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("run_id", &self.run_id)
            .field("incarnation", &self.incarnation)
            .field("step_number", &self.step_number)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Memo {
    /// The run this memo belongs to.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The incarnation of the run this memo belongs to
    /// ([`Incarnation::STANDALONE`] outside a workflow).
    pub fn incarnation(&self) -> Incarnation {
        self.incarnation
    }

    /// The step this memo belongs to.
    pub fn step_number(&self) -> u32 {
        self.step_number
    }

    /// A stable idempotency key for the outside call described by `call`
    /// (for example `("charge", order_id, cents)`): the same in every
    /// attempt and on every worker that makes this call in this step of
    /// this run incarnation, and different for another incarnation, step or
    /// `call`. Pass it to APIs that deduplicate requests (payments, e-mail,
    /// LLM gateways), so a call that runs again after its attempt lost its
    /// lease mid-call is not carried out twice. 64 lower-case hex digits.
    ///
    /// # Errors
    ///
    /// [`Error::Serialization`] if `call` cannot be encoded.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "");
    /// let memo = store.new_memo(&RunId::new("order-7")?, 2);
    /// let key = memo.idempotency_key(&("charge", 1_999))?;
    /// assert_eq!(key, store.new_memo(&RunId::new("order-7")?, 2).idempotency_key(&("charge", 1_999))?);
    /// assert_ne!(key, store.new_memo(&RunId::new("order-7")?, 3).idempotency_key(&("charge", 1_999))?);
    /// # Ok::<(), memo_runtime::Error>(())
    /// ```
    pub fn idempotency_key<T: Serialize + ?Sized>(&self, call: &T) -> Result<String> {
        content_key(&(
            "memo.idempotency-key",
            self.run_id.as_str(),
            self.incarnation.as_u64(),
            self.step_number,
            call,
        ))
    }

    /// The store this memo writes to.
    pub fn memo_store(&self) -> &MemoStore {
        &self.store
    }

    /// This memo, as the memo of a step of the workflow attempt `attempt`.
    pub(crate) fn for_attempt(mut self, attempt: Arc<dyn AttemptHook>) -> Memo {
        self.attempt = Some(attempt);
        self
    }

    /// The attempt of the workflow run this memo's lease belongs to; `None`
    /// for a standalone memo.
    #[cfg(feature = "testing")]
    pub(crate) fn lease_attempt(&self) -> Option<u32> {
        self.attempt.as_ref().map(|attempt| attempt.attempt())
    }

    /// Makes sure the workflow attempt this memo belongs to holds its run's
    /// lease, renewing it if it expired; the caller runs a body only if this
    /// succeeds, with no await in between, so that a pause or a clock jump
    /// since the step began cannot let an attempt that lost its lease start
    /// a side effect. A standalone memo has no lease: always `Ok`.
    ///
    /// # Errors
    ///
    /// As [`AttemptHook::ensure_lease`].
    pub(crate) async fn ensure_lease(&self) -> Result<()> {
        match &self.attempt {
            Some(attempt) => attempt.ensure_lease().await,
            None => Ok(()),
        }
    }

    /// Reports a memo-layer failure met while using this memo (such as a
    /// committed value that does not decode) to the workflow attempt the
    /// memo belongs to, if any: a transient one stops the attempt and leaves
    /// the run open, whatever the step's code does with the error.
    pub(crate) fn report_transient(&self, error: &Error) {
        if let Some(attempt) = &self.attempt {
            attempt.report(error);
        }
    }

    /// The store's entry cache, if this memo's entries may be kept in it.
    ///
    /// A standalone memo's are not: every standalone run of an id shares
    /// [`Incarnation::STANDALONE`], so after another process clears the run
    /// and a third commits a new value for a key, a value cached here would
    /// be the old one. A workflow run's entries cannot go stale that way: a
    /// run is cleared only once it ended, and a run created again under its
    /// id is another incarnation, at other paths.
    fn cached(&self) -> Option<&EntryCache> {
        (self.incarnation != Incarnation::STANDALONE)
            .then_some(self.store.inner.cache.as_deref())
            .flatten()
    }

    /// The committed value of `key`, if any. The returned bytes share the
    /// buffer read from the store (no copy).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the read fails; [`Error::Corrupt`] naming the path
    /// if the entry is damaged (never reported as a miss).
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        self.store
            .read(&self.key_path(key), self.cached())
            .await
            .inspect_err(|e| self.report_transient(e))
    }

    /// Commits `value` under `key` unless a value is committed already, and
    /// returns the committed value: `value` if this call (or an earlier
    /// attempt of it) won, another writer's value if it won first.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] naming the key, before anything is written;
    /// [`Error::ConditionalPutUnsupported`] if the backend cannot create
    /// conditionally (memo never overwrites); [`Error::Store`] if the store
    /// keeps failing; [`Error::Corrupt`] if the committed entry is damaged.
    pub async fn put(&self, key: &str, value: impl AsRef<[u8]>) -> Result<Bytes> {
        let describe = || {
            format!(
                "{key:?} (run {} incarnation {}, step {})",
                self.run_id, self.incarnation, self.step_number
            )
        };
        let created = self
            .store
            .create(&self.key_path(key), value.as_ref(), self.cached(), describe)
            .await
            .inspect_err(|e| self.report_transient(e))?;
        if let Created::Theirs(_) = created {
            tracing::debug!(run_id = %self.run_id, step = self.step_number, key, "another writer committed first");
        }
        Ok(created.into_payload())
    }

    /// [`get`](Memo::get) under the [`content_key`] of `input`.
    ///
    /// # Errors
    ///
    /// [`Error::Serialization`] if `input` cannot be encoded, else as
    /// [`get`](Memo::get).
    pub async fn content_get<T: Serialize + ?Sized>(&self, input: &T) -> Result<Option<Bytes>> {
        self.get(&content_key(input)?).await
    }

    /// [`put`](Memo::put) under the [`content_key`] of `input`.
    ///
    /// # Errors
    ///
    /// [`Error::Serialization`] if `input` cannot be encoded, else as
    /// [`put`](Memo::put).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let memo = MemoStore::new(Arc::new(InMemory::new()), "").new_memo(&RunId::new("r")?, 3);
    /// let input = ("summarize", "ticket-42");
    /// if memo.content_get(&input).await?.is_none() {
    ///     let summary = b"customer wants a refund"; // the expensive call
    ///     memo.content_put(&input, summary).await?;
    /// }
    /// assert!(memo.content_get(&input).await?.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn content_put<T: Serialize + ?Sized>(
        &self,
        input: &T,
        value: impl AsRef<[u8]>,
    ) -> Result<Bytes> {
        self.put(&content_key(input)?, value).await
    }

    /// The object path of `key`'s entry.
    pub(crate) fn key_path(&self, key: &str) -> Path {
        self.memo_folder
            .clone()
            .join(sha256_digest(key.as_bytes()).as_str())
    }

    /// The object path of `key`'s entry, for error messages.
    pub(crate) fn entry_path(&self, key: &str) -> String {
        self.key_path(key).to_string()
    }

    /// A string naming (store instance, entry path) for `key`, unique in the
    /// process, so concurrent identical calls can be coalesced.
    pub(crate) fn flight_key(&self, key: &str) -> String {
        let instance = Arc::as_ptr(&self.store.inner.store) as *const () as usize;
        format!("{instance:x}:{}", self.key_path(key))
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use crate::key::sha256_hex;

    use super::*;

    #[test]
    fn a_key_path_is_the_pinned_layout_entry_of_the_key_digest() {
        let store = MemoStore::new(Arc::new(InMemory::new()), "p/q");
        let run = RunId::new("Run-A").unwrap();
        let incarnation = Incarnation::from_u64(9);
        let memo = store.memo_for(&run, incarnation, 4);
        for key in ["k", "", "a/b", "snow ☃"] {
            let digest = sha256_hex(key.as_bytes());
            let entry = store.layout().entry(MEMOS, &run, incarnation, 4, &digest);
            assert_eq!(memo.key_path(key), entry, "{key:?}");
        }
    }
}
