//! `Memo`: the memo of one step of one run incarnation, the handle a step
//! (or a `#[memoized]` call) reads and writes its entries through, and the
//! attempt hook a workflow step's memo carries.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use serde::Serialize;

use super::MemoStore;
use super::entry_cache::EntryCache;
use super::flight::{Ended, Flight};
use super::shared::SharedScope;
use crate::error::{Error, Result};
use crate::key::{content_key, sha256_digest};
use crate::run_id::{Incarnation, RunId};
use crate::seal::Seal;
use crate::write_once::Created;

/// The memo of one step of one run incarnation: a write-once key-value map
/// whose entries survive crashes, retries and other processes.
///
/// Every caller of a key sees one value: [`put`](Memo::put) creates the
/// entry only if it is absent and otherwise returns what is committed.
#[derive(Clone)]
pub struct Memo {
    pub(super) store: MemoStore,
    pub(super) run_id: RunId,
    pub(super) incarnation: Incarnation,
    pub(super) step_number: u32,
    /// `<prefix>/memos/<run>/<inc>/<step>`, built once: every key's path
    /// is this plus one segment.
    pub(super) memo_folder: Path,
    /// The workflow attempt this memo's step belongs to: checked before a
    /// memoized call runs its body, and told of the memo's transient errors;
    /// `None` for a standalone memo.
    pub(super) attempt: Option<Arc<dyn AttemptHook>>,
    /// The shared scope this memo's entries are in ([`Memo::shared`]);
    /// `None` for a run's own entries.
    pub(super) shared: Option<Arc<SharedScope>>,
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

    /// Whether `incarnation` is still its run's current incarnation (a read
    /// of the run): `false` once a deletion removed it, which no later
    /// write brings back.
    fn is_current(&self, incarnation: Incarnation) -> futures::future::BoxFuture<'_, Result<bool>>;

    /// Tells the attempt of a memo-layer error met in its step: one that
    /// does not fail the run ([`Error::fails_run`]) stops the attempt and
    /// leaves the run open, whatever the step's code does with the error.
    fn report(&self, error: &Error);

    /// Whether the attempt holds its run's lease by the local clock now
    /// (no request).
    fn lease_is_live(&self) -> bool;

    /// The attempt's number (named in a lease error; the simulator's audit
    /// of step bodies asks too).
    fn attempt(&self) -> u32;

    /// Whether no entry of `key` can be committed in the step's folder
    /// unless this attempt wrote it, so that a read of it would find
    /// nothing (no request): the attempt is its run's first, it has not
    /// written `key` ([`writing`](Self::writing)), and more of its lease
    /// is left by the local clock than the clock skew the runtime allows
    /// (`RuntimeBuilder::max_clock_skew`). Only an attempt of the run
    /// writes its step folders, and another attempt starts only once the
    /// lease expired by its own clock: still in the future, unless clocks
    /// disagree by more than that skew.
    fn unread_is_absent(&self, key: &str) -> bool;

    /// Notes that this attempt writes `key`'s entry in the step's folder
    /// (before the write, whatever its outcome): a later call of the key
    /// in this attempt reads it.
    fn writing(&self, key: &str);
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
    pub(crate) fn lease_attempt(&self) -> Option<u32> {
        self.attempt.as_ref().map(|attempt| attempt.attempt())
    }

    /// Whether a read of `key` would find nothing, known without one (see
    /// [`AttemptHook::unread_is_absent`]): for the memo of a step of its
    /// run's first attempt only, never a standalone memo's or a shared
    /// scope's.
    pub(crate) fn unread_is_absent(&self, key: &str) -> bool {
        self.shared.is_none()
            && self.incarnation != Incarnation::STANDALONE
            && self
                .attempt
                .as_ref()
                .is_some_and(|attempt| attempt.unread_is_absent(key))
    }

    /// Whether the workflow attempt this memo belongs to holds its run's
    /// lease by the local clock now (no request); a standalone memo has no
    /// lease: always `true`.
    pub(crate) fn lease_is_live(&self) -> bool {
        self.attempt
            .as_ref()
            .is_none_or(|attempt| attempt.lease_is_live())
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

    /// Takes back the entry of `key` this memo just created, if its run
    /// incarnation is gone: a value committed after the attempt lost its
    /// lease may land after a sweep deleted the run, its entries and its
    /// marker, in a folder no sweep lists again. Only then: while the
    /// incarnation lives, another attempt may have read the entry. Best
    /// effort, a `GET` or two and a `DELETE`, on that failure path only. A
    /// copy in this process's entry cache stays; nothing reads a deleted
    /// incarnation's entries but a stale attempt of it, whose commits fail.
    pub(crate) async fn take_back_if_deleted(&self, key: &str) {
        let Some(attempt) = self.attempt.as_ref().filter(|_| self.shared.is_none()) else {
            return;
        };
        if let Ok(false) = attempt.is_current(self.incarnation).await {
            let path = self.key_path(key);
            if let Err(e) = self.store.store().delete(&path).await {
                tracing::debug!(run_id = %self.run_id, %path, error = %e, "entry of a deleted run not taken back");
            }
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

    /// The store's seal for this memo's entries: its run incarnation's data
    /// key, or its shared namespace's.
    pub(crate) fn seal(&self) -> Cow<'_, Seal> {
        match &self.shared {
            Some(scope) => self.store.seal().for_shared(scope.namespace()),
            None => self.store.seal().for_run(&self.run_id, self.incarnation),
        }
    }

    /// The store's entry cache, if this memo's entries may be kept in it.
    ///
    /// A standalone memo's are not: every standalone run of an id shares
    /// [`Incarnation::STANDALONE`], so after another process clears the run
    /// and a third commits a new value for a key, a value cached here would
    /// be the old one. Nor are a shared scope's: a shared entry expires, and
    /// is then written again, maybe with another value, by any process. A
    /// workflow run's entries cannot go stale that way: a run is cleared
    /// only once it ended, and a run created again under its id is another
    /// incarnation, at other paths.
    fn cached(&self) -> Option<&EntryCache> {
        (self.incarnation != Incarnation::STANDALONE && self.shared.is_none())
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
            .read(&self.key_path(key), self.cached(), &self.seal())
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
        if let Some(scope) = &self.shared {
            return super::shared::put(self, scope, key, value.as_ref())
                .await
                .inspect_err(|e| self.report_transient(e));
        }
        if let Some(attempt) = &self.attempt {
            attempt.writing(key);
        }
        let describe = || {
            format!(
                "{key:?} (run {} incarnation {}, step {})",
                self.run_id, self.incarnation, self.step_number
            )
        };
        let created = self
            .store
            .create(
                &self.key_path(key),
                value.as_ref(),
                self.cached(),
                &self.seal(),
                describe,
            )
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

    /// Looks at the flights ended in `key`'s stripe of this memo's store,
    /// before the call's first read of its entry (see [`Ended`]).
    pub(crate) fn before_read(&self, key: &str) -> Ended {
        self.store.inner.flights.before_read(key)
    }

    /// Whether a flight that could have committed `key`'s entry unseen by
    /// the read `looked` came before has ended since.
    pub(crate) fn flight_ended_since(&self, looked: &Ended) -> bool {
        looked.since(&self.store.inner.flights)
    }

    /// Waits until this caller holds the single flight of `key`'s entry in
    /// this memo's store: identical concurrent calls through the store run
    /// the body once.
    pub(crate) async fn enter_flight(&self, key: &str) -> Flight {
        Flight::enter(&self.store.inner.flights, self.key_path(key), key).await
    }
}

impl Memo {
    /// This memo, with its entries in `folder` of the shared `scope`
    /// instead of its step's folder; the run, step and attempt are kept for
    /// spans, errors and the lease check before a body runs.
    pub(crate) fn in_shared_folder(&self, folder: Path, scope: Arc<SharedScope>) -> Memo {
        Memo {
            memo_folder: folder,
            shared: Some(scope),
            ..self.clone()
        }
    }

    /// The shared scope this memo's entries are in, if any.
    pub(crate) fn shared_scope_arc(&self) -> Option<&Arc<SharedScope>> {
        self.shared.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use crate::key::sha256_hex;
    use crate::layout::MEMOS;

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
