//! The shared scope: memo entries keyed by the call alone (function name,
//! version, arguments), shared by every run and every worker of a store, so
//! the same call (the same prompt to the same model) is paid for once across
//! runs, with a retention of their own (a time to live per namespace).
//!
//! Use it through `#[memoized(scope = shared)]`, or [`Memo::shared`] and
//! [`Memo::shared_in`] by hand; sweep expired entries with
//! [`SharedEntries::sweep`] (every pass of a
//! [`RetentionSweeper`](crate::retention::RetentionSweeper), and `memoctl
//! sweep`, do it too).
//!
//! # When not to use it
//!
//! A shared entry is returned to **every** run that makes the same call, on
//! every worker, until it expires. So keep out of it:
//!
//! - **per-customer or per-tenant data** whose arguments do not name the
//!   customer: two tenants asking the same question would share one answer
//!   (and a tenant's data could reach another). Put the tenant in the
//!   arguments, a namespace per tenant, or keep such calls in their run;
//! - **side effects that must happen once per run** (an e-mail to send, a
//!   charge to make, a ticket to open): in the shared scope the second run
//!   finds the first run's entry and does nothing. A run's own memo
//!   (`#[memoized]` without `scope`) is the one for those;
//! - **values that must not outlive their run**: a run's sweep does not
//!   delete shared entries; only their own expiry does.
//!
//! # Guarantees
//!
//! Entries are write-once, as a run's are: racing writers of one key (in
//! one process or many) converge on the first committed value, and every
//! caller that reads the entry while it lives sees that value. Identical
//! concurrent calls in one process run the body once; across processes
//! the body may run in each before one commits, as for a run's entries.
//! A call in a workflow step checks its attempt's lease before its body
//! runs, as any memoized call does.
//!
//! An entry lives at least its scope's time to live from when its write
//! began (by the writer's clock), and until a sweep after that: an entry is
//! never read as expired, it is deleted. A writer whose marker was written
//! half the time to live or more ago writes another, before its entry if
//! the marker's own write took that long, after it if the entry landed
//! that late, so that a marker swept meanwhile cannot leave the entry
//! without one (unless the entry's own create stalled that long and the
//! writer then died before its second marker). This assumes the writers'
//! and the sweepers' clocks agree to well within half the time to live.
//! An entry may go earlier in two cases, never with a wrong value (the body just runs again): a writer that
//! crashed after writing its expiry marker and before its entry leaves a
//! marker that, when it expires, deletes the entry another writer made of
//! that key; and a sweep that overlaps another may delete an entry written
//! again just after the other sweep deleted it.
//!
//! # Layout and cost
//!
//! `<prefix>/shared/entries/<ns>/<sha256(key)>` holds an entry;
//! `<prefix>/shared/expiry/<hour>/<u64::MAX - expires_ms>_<ns>.<sha256(key)>.<token>`
//! is written just before it (`<token>` is unique per write), in the hour folder of its expiry time (see
//! the stored-format page of the guide). A miss costs two creates (marker,
//! entry), and a delete of the marker if another writer won the race (or a
//! create and a delete more if the write took half the time to live); a hit
//! is one read. A sweep lists the hour folders (one delimiter listing), then
//! only the hours that expired (the one holding the cutoff from an offset),
//! and deletes the expired entries, then their markers, 1,000 at a time,
//! each thousand in one `delete_stream` (on S3 one `DeleteObjects` request,
//! on Azure a blob batch per 256; elsewhere a delete per object): its cost
//! grows with the number of expired entries, not with the number retained.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::hour_folders;
use crate::key::sha256_digest;
use crate::layout::{self, MAX_SHARED_NAMESPACE_LEN};
use crate::memo::{Memo, MemoStore};
use crate::read_limit::Limit;
use crate::run_id::unique_token;
use crate::write_once::{self, Created};

/// How many expired entries a sweep deletes in one `delete_stream` (and
/// then their markers in another): as many as one S3 `DeleteObjects`
/// request takes.
const SWEEP_BATCH: usize = 1_000;

/// A namespace of shared entries and their time to live: where
/// `#[memoized(scope = shared)]` calls keep their values.
///
/// Every store has one ([`MemoStore::shared_scope`], by default
/// [`SharedScope::default`]: namespace `default`, 7 days); give a store
/// another with [`MemoStore::with_shared_scope`], or use one for a few
/// calls with [`Memo::shared_in`]. Two scopes with one namespace share their
/// entries: the time to live applies to the entries each writes.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use memo_runtime::shared::SharedScope;
///
/// let scope = SharedScope::new("llm-gpt-5", Duration::from_secs(30 * 24 * 3600))?;
/// assert_eq!(scope.namespace(), "llm-gpt-5");
/// assert!(SharedScope::new("Has Spaces", Duration::from_secs(60)).is_err());
/// # Ok::<(), memo_runtime::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SharedScope {
    namespace: String,
    ttl: Duration,
    clock: Arc<dyn Clock>,
}

impl SharedScope {
    /// The namespace of [`SharedScope::default`].
    pub const DEFAULT_NAMESPACE: &'static str = "default";

    /// The time to live of [`SharedScope::default`]: 7 days.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

    /// The scope of namespace `namespace` whose entries live `ttl` (at
    /// least; see the [module documentation](self)), timed by the system
    /// clock.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] unless `namespace` is 1 to 64 bytes of
    /// `[a-z0-9_-]` (lower case, so that two namespaces never share a folder
    /// on a case-insensitive file system), or if `ttl` is zero.
    pub fn new(namespace: impl Into<String>, ttl: Duration) -> Result<SharedScope> {
        let namespace = namespace.into();
        let invalid = |reason: String| Error::InvalidConfig {
            what: "SharedScope".into(),
            reason,
        };
        if !layout::is_shared_namespace(&namespace) {
            return Err(invalid(format!(
                "namespace {namespace:?} must be 1 to {MAX_SHARED_NAMESPACE_LEN} bytes of \
                 lower-case letters, digits, `_` and `-`, such as \"llm-v2\""
            )));
        }
        if ttl.is_zero() {
            return Err(invalid(
                "the time to live must be more than zero".to_string(),
            ));
        }
        Ok(SharedScope {
            namespace,
            ttl,
            clock: Arc::new(SystemClock),
        })
    }

    /// The same scope, timing expiry with `clock` instead of the system
    /// clock (for tests).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> SharedScope {
        SharedScope { clock, ..self }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// How long an entry written in this scope lives, at least.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The time to live in ms.
    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

impl Default for SharedScope {
    /// Namespace [`DEFAULT_NAMESPACE`](Self::DEFAULT_NAMESPACE), time to
    /// live [`DEFAULT_TTL`](Self::DEFAULT_TTL), the system clock.
    fn default() -> SharedScope {
        SharedScope {
            namespace: Self::DEFAULT_NAMESPACE.to_owned(),
            ttl: Self::DEFAULT_TTL,
            clock: Arc::new(SystemClock),
        }
    }
}

impl MemoStore {
    /// The same store, with `scope` as the scope of its
    /// `#[memoized(scope = shared)]` calls and of [`Memo::shared`]. The
    /// committed-entry cache is kept.
    pub fn with_shared_scope(self, scope: SharedScope) -> MemoStore {
        self.with_shared_scope_arc(Arc::new(scope))
    }

    /// The scope of this store's `#[memoized(scope = shared)]` calls
    /// ([`SharedScope::default`] unless
    /// [`with_shared_scope`](Self::with_shared_scope) set another).
    pub fn shared_scope(&self) -> &SharedScope {
        self.shared_scope_arc()
    }

    /// This store's shared entries, for retention: see [`SharedEntries`].
    pub fn shared_entries(&self) -> SharedEntries {
        SharedEntries {
            store: self.clone(),
        }
    }
}

impl Memo {
    /// This memo's call, in its store's shared scope
    /// ([`MemoStore::shared_scope`]) instead of its run: a value committed
    /// under a key by any run of the store is returned to every other, until
    /// it expires. What `#[memoized(scope = shared)]` uses. Read the
    /// [module documentation](crate::shared) for when not to.
    ///
    /// The memo keeps its run, step and attempt: they name the call in
    /// spans and errors, and a workflow attempt's lease is checked before a
    /// memoized body runs, as in the run's own scope.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    /// let first = store.new_memo(&RunId::new("run-1")?, 0).shared();
    /// first.put("summarize:ticket-42", b"wants a refund").await?;
    /// // Another run, another step: the same entry.
    /// let second = store.new_memo(&RunId::new("run-2")?, 5).shared();
    /// assert_eq!(second.get("summarize:ticket-42").await?.as_deref(), Some(&b"wants a refund"[..]));
    /// // The runs' own memos do not see it.
    /// assert_eq!(store.new_memo(&RunId::new("run-2")?, 5).get("summarize:ticket-42").await?, None);
    /// # Ok(()) }
    /// ```
    pub fn shared(&self) -> Memo {
        let scope = Arc::clone(self.memo_store().shared_scope_arc());
        self.shared_with(scope)
    }

    /// This memo's call in the shared scope `scope` (its namespace and time
    /// to live) rather than its store's: see [`shared`](Self::shared).
    pub fn shared_in(&self, scope: &SharedScope) -> Memo {
        self.shared_with(Arc::new(scope.clone()))
    }

    /// The shared scope this memo's entries are in; `None` for a run's own
    /// entries.
    pub fn shared_scope(&self) -> Option<&SharedScope> {
        self.shared_scope_arc().map(|scope| &**scope)
    }

    fn shared_with(&self, scope: Arc<SharedScope>) -> Memo {
        let folder = self.memo_store().layout().shared_entries(scope.namespace());
        self.in_shared_folder(folder, scope)
    }
}

/// Commits `value` under `key` in `scope` unless a value is committed
/// already; [`Memo::put`] of a shared memo.
///
/// The expiry marker is written first, so that no entry is ever without
/// one (an entry without a marker would never expire). A writer that loses
/// the race deletes its marker: the winner wrote its own before its entry.
/// A marker may expire and be swept while its entry is still to come (a
/// writer stalled between the two), so a writer whose marker was written
/// half the time to live or more ago writes another ([`mark_again`]):
/// before its entry, if its marker's own write took that long, and after
/// it, if the entry landed that late.
pub(crate) async fn put(
    memo: &Memo,
    scope: &SharedScope,
    key: &str,
    value: &[u8],
) -> Result<Bytes> {
    let store = memo.memo_store();
    let describe = || {
        format!(
            "{key:?} (shared namespace {}, called in run {} step {})",
            scope.namespace(),
            memo.run_id(),
            memo.step_number()
        )
    };
    // Checked before the marker is written, so a refused value leaves
    // nothing behind.
    if value.len() > store.max_value_size() {
        return Err(Error::TooLarge {
            key: describe(),
            size: value.len(),
            limit: store.max_value_size(),
        });
    }
    let digest = sha256_digest(key.as_bytes());
    let mut written_ms = scope.clock.now_ms();
    let mut marker = write_marker(memo, scope, digest.as_str(), written_ms).await?;
    if half_ttl_since(scope, written_ms) {
        (marker, written_ms) = mark_again(memo, scope, digest.as_str(), &marker).await?;
    }
    // On an error the entry may or may not exist (an unknown outcome), so
    // the marker stays: at worst it deletes nothing when it expires.
    let created = store
        .create(&memo.key_path(key), value, None, &memo.seal(), describe)
        .await?;
    match created {
        Created::Theirs(_) => {
            tracing::debug!(
                namespace = scope.namespace(),
                key,
                "another writer committed the shared entry first"
            );
            delete_marker(memo, &marker, "the expiry marker of a lost race").await;
        }
        Created::Ours(_) | Created::Same(_) if half_ttl_since(scope, written_ms) => {
            if let Err(e) = mark_again(memo, scope, digest.as_str(), &marker).await {
                tracing::warn!(
                    namespace = scope.namespace(),
                    key,
                    error = %e,
                    "cannot mark a shared entry that landed late again; if its first marker \
                     was swept, the entry never expires"
                );
            }
        }
        Created::Ours(_) | Created::Same(_) => {}
    }
    Ok(created.into_payload())
}

/// Writes an expiry marker for entry `digest` of `scope`'s namespace,
/// expiring the time to live after `now_ms`; returns its path.
async fn write_marker(memo: &Memo, scope: &SharedScope, digest: &str, now_ms: u64) -> Result<Path> {
    let store = memo.memo_store();
    // A token of its own, so that two writers never share a marker: the
    // loser deletes its own, never the winner's.
    let marker = store.layout().shared_expiry(
        scope.namespace(),
        digest,
        now_ms.saturating_add(scope.ttl_ms()),
        unique_token(),
    );
    // Plain, as every marker: its meaning is in its name.
    write_once::create_marker(store.store(), &marker, &[], Limit::MARKER).await?;
    Ok(marker)
}

/// Whether half `scope`'s time to live or more has passed since `since_ms`
/// by its clock: a marker written then may have expired for a sweeper.
fn half_ttl_since(scope: &SharedScope, since_ms: u64) -> bool {
    scope.clock.now_ms().saturating_sub(since_ms) >= scope.ttl_ms() / 2
}

/// Marks entry `digest` again: `first` may have expired and been swept
/// (its entry deleted, none there yet, then the marker), which would leave
/// an entry that lands after it with no marker for ever. A marker written
/// now expires the time to live from now; then `first` goes, so that it
/// does not delete the entry earlier. Returns the new marker and when it
/// was written.
async fn mark_again(
    memo: &Memo,
    scope: &SharedScope,
    digest: &str,
    first: &Path,
) -> Result<(Path, u64)> {
    let now_ms = scope.clock.now_ms();
    let marker = write_marker(memo, scope, digest, now_ms).await?;
    delete_marker(memo, first, "an expiry marker written again").await;
    Ok((marker, now_ms))
}

/// Deletes `marker` (`what`), logging a failure: a marker left behind
/// deletes its entry early when it expires, at worst.
async fn delete_marker(memo: &Memo, marker: &Path, what: &str) {
    if let Err(e) = memo.memo_store().store().delete(marker).await {
        tracing::warn!(path = %marker, error = %e, "cannot delete {what}");
    }
}

/// A shared entry's expiry marker: the entry `digest` of namespace
/// `namespace` expires at `expires_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedExpiry {
    /// When the entry expires, in ms since the Unix epoch.
    pub expires_ms: u64,
    /// The entry's namespace.
    pub namespace: String,
    /// The entry's name: the SHA-256 of its key, in hex.
    pub digest: String,
    /// The token of the write that made the marker, unique per write.
    pub token: u64,
}

/// What a sweep of the shared scope did ([`SharedEntries::sweep`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedSweep {
    /// Entries expired strictly before this time were swept (ms since the
    /// Unix epoch).
    pub cutoff_ms: u64,
    /// Expiry markers found expired.
    pub markers_expired: usize,
    /// Entries deleted (an expired marker whose entry was already gone, or
    /// never written, deletes none).
    pub entries_deleted: usize,
    /// Expired markers whose entry or marker could not be deleted: they are
    /// kept, and the next sweep tries again.
    pub failures: usize,
}

/// The shared entries of one memo store, for retention: which have expired,
/// and the sweep that deletes them. Get one with
/// [`MemoStore::shared_entries`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct SharedEntries {
    store: MemoStore,
}

impl SharedEntries {
    /// Streams the expiry markers that expired strictly before `cutoff_ms`,
    /// hour by hour, oldest hour first. Hours after the cutoff are never
    /// listed, so the cost grows with the expired markers, not the retained.
    ///
    /// # Errors
    ///
    /// The stream yields [`Error::Store`] if a listing fails.
    pub fn expired(&self, cutoff_ms: u64) -> BoxStream<'static, Result<SharedExpiry>> {
        let this = self.clone();
        stream::once(async move {
            let hours = this.expired_hours(cutoff_ms).await?;
            let markers = stream::iter(hours)
                .map(move |(hour, path)| this.expired_in_hour(hour, path, cutoff_ms))
                .flatten();
            Ok::<_, Error>(markers)
        })
        .try_flatten()
        .boxed()
    }

    /// Deletes every shared entry (of any namespace) whose expiry marker
    /// expired strictly before `now_ms`, then the marker. A failed delete
    /// keeps the marker for the next sweep and is counted in
    /// [`SharedSweep::failures`]; the others go on. Safe to run in many
    /// workers at once.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if a listing fails (the expired markers it listed
    /// before are swept first).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use memo_runtime::clock::{Clock, ManualClock};
    /// use memo_runtime::shared::SharedScope;
    /// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let clock = Arc::new(ManualClock::new(1_000));
    /// let scope = SharedScope::new("llm", Duration::from_secs(60))?.with_clock(clock.clone());
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo").with_shared_scope(scope);
    /// let memo = store.new_memo(&RunId::new("run-1")?, 0).shared();
    /// memo.put("prompt", b"answer").await?;
    /// assert_eq!(store.shared_entries().sweep(clock.now_ms()).await?.entries_deleted, 0);
    /// clock.advance_ms(61_000);
    /// assert_eq!(store.shared_entries().sweep(clock.now_ms()).await?.entries_deleted, 1);
    /// assert_eq!(memo.get("prompt").await?, None);
    /// # Ok(()) }
    /// ```
    pub async fn sweep(&self, now_ms: u64) -> Result<SharedSweep> {
        let mut report = SharedSweep {
            cutoff_ms: now_ms,
            ..SharedSweep::default()
        };
        let mut batches = self.expired(now_ms).try_chunks(SWEEP_BATCH);
        loop {
            // A listing that fails part way: what it listed before is still
            // swept, then the error returned.
            let (batch, failed) = match batches.try_next().await {
                Ok(Some(batch)) => (batch, None),
                Ok(None) => return Ok(report),
                Err(stream::TryChunksError(listed, error)) => (listed, Some(error)),
            };
            let (deleted, failures) = self.delete_expired(&batch).await;
            report.markers_expired += batch.len();
            report.entries_deleted += deleted;
            report.failures += failures;
            if let Some(error) = failed {
                return Err(error);
            }
        }
    }

    /// Deletes the entries `batch` names, then the markers of those whose
    /// entry is gone, each in one `delete_stream`: (entries deleted,
    /// markers kept because a delete failed).
    async fn delete_expired(&self, batch: &[SharedExpiry]) -> (usize, usize) {
        let layout = self.store.layout();
        let entries = batch
            .iter()
            .map(|expiry| {
                layout
                    .shared_entries(&expiry.namespace)
                    .join(expiry.digest.as_str())
            })
            .collect();
        let mut deleted = 0;
        let mut gone = Vec::with_capacity(batch.len());
        for (expiry, result) in batch.iter().zip(self.store.delete_each(entries).await) {
            match result {
                Ok(found) => {
                    deleted += usize::from(found);
                    gone.push(expiry);
                }
                Err(e) => {
                    tracing::warn!(namespace = %expiry.namespace, digest = %expiry.digest, error = %e,
                        "cannot delete an expired shared entry; its marker is kept");
                }
            }
        }
        let markers = gone
            .iter()
            .map(|expiry| {
                layout.shared_expiry(
                    &expiry.namespace,
                    &expiry.digest,
                    expiry.expires_ms,
                    expiry.token,
                )
            })
            .collect();
        let mut failed = batch.len() - gone.len();
        for (expiry, result) in gone.iter().zip(self.store.delete_each(markers).await) {
            if let Err(e) = result {
                tracing::warn!(namespace = %expiry.namespace, digest = %expiry.digest, error = %e,
                    "cannot delete an expired shared marker");
                failed += 1;
            }
        }
        (deleted, failed)
    }

    /// The hour folders that hold markers expired before `cutoff_ms`,
    /// oldest first: one delimiter listing.
    async fn expired_hours(&self, cutoff_ms: u64) -> Result<Vec<(u64, Path)>> {
        let folder = self.store.layout().shared_expiry_folder();
        hour_folders::hours_before(self.store.store(), &folder, cutoff_ms, "shared expiry").await
    }

    /// The markers expired before `cutoff_ms` in the hour starting at
    /// `hour`.
    fn expired_in_hour(
        &self,
        hour: u64,
        hour_path: Path,
        cutoff_ms: u64,
    ) -> BoxStream<'static, Result<SharedExpiry>> {
        let layout = self.store.layout();
        hour_folders::listed_before(self.store.store(), hour, hour_path, cutoff_ms, || {
            layout.shared_expiry_offset(hour, cutoff_ms)
        })
            .try_filter_map(move |meta| {
                let expiry = match layout::parse_shared_expiry(&meta.location) {
                    Some(name) if name.hour == hour => Some(SharedExpiry {
                        expires_ms: name.expires_ms,
                        namespace: name.namespace,
                        digest: name.digest,
                        token: name.token,
                    }),
                    _ => {
                        tracing::warn!(path = %meta.location, "skipping an object that is not a shared expiry marker");
                        None
                    }
                };
                future::ready(Ok(expiry.filter(|e| e.expires_ms < cutoff_ms)))
            })
            .boxed()
    }
}
