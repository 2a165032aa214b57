//! Per-run data keys: where they live, how they are made, read, forgotten
//! and rewrapped.
//!
//! # Paths in the key store
//!
//! Under the key store's prefix: `runs/<run>/<inc>` (the data key of one run
//! incarnation, standalone memos under incarnation `0000000000000000`) and
//! `shared/<ns>` (the data key of one shared namespace), `<run>` and
//! `<inc>` as in the data store's layout. Each holds a wrapped key, in the
//! record `key_record` describes: a standalone run's with its generation.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chacha20poly1305::XChaCha20Poly1305;
use chacha20poly1305::aead::KeyInit;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::key_record::{FIRST_GENERATION, KeyRecord, context, new_generation};
use super::scope::run_key_name;
use super::wrap::{DataKey, KeyEncryptionKey, unreadable_key};
use crate::error::{Error, Result};
use crate::layout::run_segment;
use crate::run_id::{Incarnation, RunId};

/// How many unwrapped keys a process keeps: a bound on memory, and on how
/// long a forgotten run's key may stay in another process (until it is
/// pushed out or the process ends).
const CACHE_CAPACITY: usize = 4096;

/// The data keys of a store: one per run incarnation (and shared
/// namespace), drawn when first needed, wrapped by a
/// [`KeyEncryptionKey`], kept in a key store apart from the data (see the
/// section below for why), and cached unwrapped in the process.
///
/// Give it to a store through [`Seal::with_data_keys`](super::Seal::with_data_keys).
/// Cloning is cheap and shares the cache.
///
/// # Where the keys live, and why there
///
/// Forgetting a run deletes its data key, and must make the run's data
/// unreadable *at once and for good*: even where the data bucket's
/// versioning or lifecycle rules keep the deleted objects, and even from a
/// copy of the data bucket taken before. If the wrapped key lived in the
/// data bucket, such a copy would still hold it, and the key-encryption key
/// (which stays, for the other runs) would still unwrap it. So wrapped data
/// keys live in a **key store apart from the data**: another folder or
/// another bucket (any [`ObjectStore`]) that [`DataKeys::new`] is given,
/// with no versioning and no backups kept longer than you may take to
/// forget a run. A copy of the data bucket then holds ciphertexts only; the
/// one object that could open them is the wrapped key, deleted from the key
/// store by [`DataKeys::forget_run`].
///
/// If the key store itself is backed up, a backup taken before a forget
/// still holds the wrapped key. Retire the key-encryption key that wrapped
/// it ([`DataKeys::rewrap`] with a new version, then destroy the old one):
/// every wrapped key in such a backup is then unreadable too.
///
/// # Standalone runs: a generation per key
///
/// A workflow run is forgotten once it ended, and a new run of its id is a
/// new incarnation with a key of its own, so nothing is ever sealed again
/// with a forgotten key's name. The standalone memos of a run id
/// ([`MemoStore::new_memo`](crate::MemoStore::new_memo)) share one
/// incarnation, and its key's name, across every clear and forget: a
/// sweep (a sweeper in every worker) or an operator may forget the key
/// while another process is using it, and the next use makes a new one.
/// So a standalone run's key has a **generation**, drawn at random when it
/// is made, stored beside it in the key store and named in the frame of
/// every entry sealed with it:
///
/// - a write of a standalone entry reads the key from the key store (one
///   `GET` of a small object; the unwrapped key is cached per generation),
///   so a process that still holds a forgotten key in its cache never
///   seals with it, and what it writes after a forget is readable by
///   every process;
/// - an entry sealed with a generation the key store no longer holds (a
///   write that raced the forget, or an entry of a forgotten run that was
///   not cleared) belongs to a cleared run: it reads as a miss, never as
///   an error, and the next put of its key replaces it;
/// - an entry of the generation the key store holds that does not
///   authenticate is [`Error::Corrupt`] naming its path, as always.
///
/// A workflow run's keys have no generations and cost no request more: a
/// payload whose key was forgotten stays an error there (its run was
/// forgotten; nothing of it is read again).
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> memo_runtime::Result<()> {
/// use std::sync::Arc;
/// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
/// use memo_runtime::seal::{DataKeys, Keyring, Seal};
///
/// let kek = Keyring::new(1, [7; 32])?; // in production: Keyring::from_file
/// let key_store = Arc::new(InMemory::new()); // in production: another bucket or folder
/// let keys = DataKeys::new(kek, key_store, "memo-keys");
/// let memo = MemoStore::new(Arc::new(InMemory::new()), "memo")
///     .with_seal(Seal::default().with_data_keys(keys.clone()));
///
/// let run = RunId::new("order-1")?;
/// memo.new_memo(&run, 0).put("reply", b"Dear customer").await?;
/// assert_eq!(keys.forget_run(&run).await?, 1); // its data can never be read again
/// // A standalone entry of a forgotten key reads as a miss, and a new value
/// // replaces it, sealed with a key of a new generation.
/// assert_eq!(memo.new_memo(&run, 0).get("reply").await?, None);
/// memo.new_memo(&run, 0).put("reply", b"Dear client").await?;
/// assert_eq!(&memo.new_memo(&run, 0).get("reply").await?.unwrap()[..], b"Dear client");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DataKeys {
    inner: Arc<Inner>,
}

struct Inner {
    kek: Arc<dyn KeyEncryptionKey>,
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    cache: Mutex<HashMap<String, Unwrapped>>,
}

impl fmt::Debug for DataKeys {
    /// Names the key store and the key-encryption key, never a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataKeys")
            .field("key_store", &format_args!("{}", self.inner.store))
            .field("prefix", &self.inner.prefix.as_ref())
            .field("kek", &self.inner.kek)
            .finish()
    }
}

/// What [`DataKeys::rewrap`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Rewrapped {
    /// Data keys wrapped again with the current key-encryption key.
    pub rewrapped: u64,
    /// Data keys already wrapped with it, left as they are.
    pub current: u64,
    /// Of the rewrapped keys, those made with an older version while the
    /// rewrap ran (absent from its first listing of the key store, or
    /// changed since): a process still wraps with that version, so it
    /// must not be destroyed yet. Give every process the current version,
    /// then rewrap again.
    pub written_meanwhile: u64,
}

/// What [`DataKeys::rewrap`] did to one key, with the entity tag the key
/// is left with where the store told it.
enum Rewrap {
    /// Wrapped again with the current version.
    Rewrapped(Option<String>),
    /// Already wrapped with it.
    Current(Option<String>),
    /// No longer in the key store, or changed since it was read (its
    /// replacement refused): forgotten meanwhile, or rewrapped by another
    /// rewrap. The second listing finds it if it is there again.
    Gone,
}

/// A data key unwrapped, with its generation.
#[derive(Clone)]
struct Unwrapped {
    generation: u32,
    cipher: Arc<XChaCha20Poly1305>,
}

/// What the key store holds of the key (and generation) a frame names.
pub(crate) enum Lookup {
    /// The key, of the generation asked for.
    Found(Arc<XChaCha20Poly1305>),
    /// No key of that name: forgotten (or never made).
    Absent,
    /// A key of another generation: the one asked for was forgotten, and
    /// the key made again since.
    Replaced,
}

/// How many keys [`DataKeys::kek_versions`] reads at once.
const KEY_READS: usize = 16;

/// How many times a writer makes a standalone run's key that is forgotten
/// again before it can read it back, before it gives up.
const MAKE_ATTEMPTS: u32 = 3;

impl DataKeys {
    /// Data keys wrapped by `kek` and kept in `key_store` under `prefix`.
    ///
    /// `key_store` must not be the data's bucket (nor a folder inside the
    /// data's folder): a copy of the data would then hold the keys, and
    /// forgetting a run would not reach it.
    pub fn new(
        kek: impl KeyEncryptionKey,
        key_store: Arc<dyn ObjectStore>,
        prefix: &str,
    ) -> DataKeys {
        DataKeys::with_kek(Arc::new(kek), key_store, prefix)
    }

    /// [`DataKeys::new`] with a shared key-encryption key.
    pub fn with_kek(
        kek: Arc<dyn KeyEncryptionKey>,
        key_store: Arc<dyn ObjectStore>,
        prefix: &str,
    ) -> DataKeys {
        DataKeys {
            inner: Arc::new(Inner {
                kek,
                store: key_store,
                prefix: Path::from(prefix),
                cache: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn path(&self, name: &str) -> Path {
        let mut path = self.inner.prefix.clone();
        for part in name.split('/') {
            path = path.join(part);
        }
        path
    }

    /// The key of `name` this process holds unwrapped, if it holds it and
    /// it is of `generation`.
    fn cached(&self, name: &str, generation: u32) -> Option<Arc<XChaCha20Poly1305>> {
        let cache = self.inner.cache.lock().expect("poisoned");
        let hit = cache.get(name)?;
        (hit.generation == generation).then(|| Arc::clone(&hit.cipher))
    }

    fn remember(&self, name: &str, generation: u32, key: &DataKey) -> Arc<XChaCha20Poly1305> {
        let cipher = Arc::new(XChaCha20Poly1305::new(key.as_bytes().into()));
        let mut cache = self.inner.cache.lock().expect("poisoned");
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        let unwrapped = Unwrapped {
            generation,
            cipher: Arc::clone(&cipher),
        };
        cache.insert(name.to_owned(), unwrapped);
        cipher
    }

    /// The key named `name` that writes use, with its generation, made and
    /// stored first if there is none; `path` is the object being written,
    /// for errors.
    ///
    /// A `generational` key (a standalone run's) is read from the key store
    /// at every call, never taken from the cache alone: its name is used
    /// again after every forget, and a writer that sealed with a key it
    /// cached before a forget would write what no one else can read (see
    /// [`DataKeys`], *Standalone runs*). One `GET` of a small object; the
    /// unwrap is cached. Any other key is made once and never again under
    /// its name, so the cache answers.
    pub(crate) async fn for_writing(
        &self,
        name: &str,
        generational: bool,
        path: &Path,
    ) -> Result<(u32, Arc<XChaCha20Poly1305>)> {
        if generational {
            return self.current(name, path).await;
        }
        if let Some(hit) = self.cached(name, FIRST_GENERATION) {
            return Ok((FIRST_GENERATION, hit));
        }
        let fresh = DataKey::random();
        let record = KeyRecord {
            generation: None,
            wrapped: self.inner.kek.wrap(&fresh, &context(name, None)).await?,
        };
        if self.create(name, &record).await? {
            return Ok((
                FIRST_GENERATION,
                self.remember(name, FIRST_GENERATION, &fresh),
            ));
        }
        // Another writer made the key first: every writer uses its key.
        match self.for_reading(name, FIRST_GENERATION, path).await? {
            Lookup::Found(key) => Ok((FIRST_GENERATION, key)),
            Lookup::Absent => Err(Error::corrupt(
                path,
                format!("the data key of {name} was forgotten while it was being made"),
            )),
            Lookup::Replaced => Err(Error::corrupt(
                path,
                format!(
                    "the data key of {name} has a generation of its own, which only a \
                     standalone run's key has"
                ),
            )),
        }
    }

    /// The standalone key `name` as the key store holds it now, with its
    /// generation; made, of a new generation, if the store holds none.
    async fn current(&self, name: &str, path: &Path) -> Result<(u32, Arc<XChaCha20Poly1305>)> {
        for _ in 0..MAKE_ATTEMPTS {
            if let Some(found) = self.fetch(name, path).await? {
                return Ok(found);
            }
            let generation = new_generation();
            let fresh = DataKey::random();
            let wrapped = (self.inner.kek)
                .wrap(&fresh, &context(name, Some(generation)))
                .await?;
            let record = KeyRecord {
                generation: Some(generation),
                wrapped,
            };
            if self.create(name, &record).await? {
                return Ok((generation, self.remember(name, generation, &fresh)));
            }
            // Another writer made one first: read it back and use it.
        }
        Err(Error::corrupt(
            path,
            format!(
                "the data key of {name} was forgotten while it was being made, \
                 {MAKE_ATTEMPTS} times"
            ),
        ))
    }

    /// Stores `record` under `name` unless a key is there: whether this
    /// call stored it.
    async fn create(&self, name: &str, record: &KeyRecord) -> Result<bool> {
        let at = self.path(name);
        let opts = PutOptions::from(PutMode::Create);
        let payload = PutPayload::from(record.encode()?);
        match self.inner.store.put_opts(&at, payload, opts).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(Error::store(&at, e)),
        }
    }

    /// The key the key store holds under `name` now (one `GET`), with its
    /// generation, or `None` if it holds none; unwrapped only if the cache
    /// lacks that generation. `path` is the object being read or written,
    /// for errors.
    async fn fetch(
        &self,
        name: &str,
        path: &Path,
    ) -> Result<Option<(u32, Arc<XChaCha20Poly1305>)>> {
        let at = self.path(name);
        let bytes = match self.inner.store.get(&at).await {
            Ok(got) => got.bytes().await.map_err(|e| Error::store(&at, e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(Error::store(&at, e)),
        };
        let record = KeyRecord::decode(&bytes).map_err(|reason| Error::corrupt(&at, reason))?;
        let generation = record.generation();
        if let Some(hit) = self.cached(name, generation) {
            return Ok(Some((generation, hit)));
        }
        let key = self
            .inner
            .kek
            .unwrap(&record.wrapped, &record.context(name))
            .await
            .map_err(|e| unreadable_key(path.as_ref(), name, e))?;
        Ok(Some((generation, self.remember(name, generation, &key))))
    }

    /// The key named `name` of `generation` (the one a frame records), as
    /// far as the key store holds it: from the cache if it holds that
    /// generation, else read; `path` is the object being read, for errors.
    pub(crate) async fn for_reading(
        &self,
        name: &str,
        generation: u32,
        path: &Path,
    ) -> Result<Lookup> {
        if let Some(hit) = self.cached(name, generation) {
            return Ok(Lookup::Found(hit));
        }
        Ok(match self.fetch(name, path).await? {
            None => Lookup::Absent,
            Some((current, key)) if current == generation => Lookup::Found(key),
            Some(_) => Lookup::Replaced,
        })
    }
    /// Forgets every data key of `run_id` (all its incarnations, and its
    /// standalone memos'): from then on none of its data, wherever a copy
    /// of it is kept, can be read again. Returns how many keys were deleted.
    ///
    /// This process forgets them at once; another process that holds one of
    /// them unwrapped keeps it until it pushes it out of its cache (it holds
    /// at most 4,096) or ends, and can read with it what it could read
    /// before, so forget workflow runs that no process works on (ended
    /// ones: a new run of the id has a new key). A standalone run may be
    /// forgotten while it is in use: no process seals with its forgotten
    /// key afterwards, and its entries read as misses (see *Standalone
    /// runs* above). A [`MemoStore`](crate::MemoStore) keeps the values of
    /// workflow runs it read or wrote in its entry cache until the run is
    /// cleared: clear the run too (`memoctl forget` and the retention
    /// sweeper do both).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the key store cannot be listed or a key cannot
    /// be deleted (call it again: what was deleted stays deleted).
    pub async fn forget_run(&self, run_id: &RunId) -> Result<u64> {
        let folder = self.path(&format!("runs/{}", run_segment(run_id)));
        let names: Vec<Path> = self
            .inner
            .store
            .list(Some(&folder))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let run_prefix = format!("runs/{}/", run_segment(run_id));
        self.inner
            .cache
            .lock()
            .expect("poisoned")
            .retain(|name, _| !name.starts_with(&run_prefix));
        let mut deleted = 0;
        for path in names {
            match self.inner.store.delete(&path).await {
                Ok(()) => deleted += 1,
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(Error::store(&path, e)),
            }
        }
        Ok(deleted)
    }

    /// Forgets the data key of one incarnation of `run_id` (see
    /// [`forget_run`](Self::forget_run)); whether there was one.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the key cannot be deleted.
    pub async fn forget_incarnation(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<bool> {
        let name = run_key_name(run_id, incarnation);
        self.inner.cache.lock().expect("poisoned").remove(&name);
        let at = self.path(&name);
        match self.inner.store.head(&at).await {
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(Error::store(&at, e)),
            Ok(_) => {}
        }
        match self.inner.store.delete(&at).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(true),
            Err(e) => Err(Error::store(&at, e)),
        }
    }

    /// Wraps every data key again with the key-encryption key's current
    /// version, rewriting the wrapped keys only, never the data. After it,
    /// older versions of the key-encryption key can be destroyed (and with
    /// them every wrapped key a backup of the key store still holds), once
    /// no process wraps with them any more: run it only after every
    /// process writes with the current version (the rotation of
    /// [`Keyring`](super::Keyring)'s docs), and destroy nothing while it
    /// reports [`Rewrapped::written_meanwhile`].
    ///
    /// It lists the key store, rewraps each key of an older version, then
    /// lists it again: a key of an older version that the first listing
    /// did not show, or that changed since (forgotten and made again; told
    /// by its entity tag where the store gives one), was made while it
    /// ran, by a process that still wraps with that version. It is
    /// rewrapped too, and counted in `written_meanwhile`: that process
    /// will go on making such keys until it has the current version, so
    /// destroying the older one would make their runs unreadable.
    ///
    /// A key forgotten while this runs is not written back: each rewrap
    /// replaces the wrapped key only if it is still the one read (a
    /// conditional update: buckets, and a [`LocalFolder`](crate::store::LocalFolder),
    /// whose deletes wait for an update of the same file), so sweepers may
    /// go on forgetting keys meanwhile. On a key store with no conditional
    /// update, a key forgotten while it is rewrapped is written back: do
    /// not forget runs of such a store while rewrapping it.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the key store fails, [`Error::Corrupt`] if a
    /// wrapped key is damaged or does not unwrap (naming it; the keys
    /// before it are rewrapped, call it again once it is mended).
    pub async fn rewrap(&self) -> Result<Rewrapped> {
        let current = self.inner.kek.current_version();
        if current == 0 {
            return Err(super::invalid_key(
                "every key of the key-encryption key is staged: there is no current version to \
                 rewrap with (promote one by removing `staged` from its line)",
            ));
        }
        let mut report = Rewrapped::default();
        // The entity tag the first pass left each key it found with (none
        // where the store gives none, or the key changed under the pass).
        let mut left: HashMap<Path, Option<String>> = HashMap::new();
        for meta in self.list_keys().await? {
            let tag = match self.rewrap_one(&meta.location, current).await? {
                Rewrap::Rewrapped(tag) => {
                    report.rewrapped += 1;
                    tag
                }
                Rewrap::Current(tag) => {
                    report.current += 1;
                    tag
                }
                Rewrap::Gone => continue,
            };
            left.insert(meta.location, tag);
        }
        // A key the first listing did not show, or that changed since the
        // first pass left it (forgotten and made again), was made while
        // this ran.
        for meta in self.list_keys().await? {
            let seen = left.get(&meta.location);
            if seen.is_some_and(|tag| *tag == meta.e_tag) {
                continue;
            }
            match self.rewrap_one(&meta.location, current).await? {
                Rewrap::Rewrapped(_) => {
                    report.rewrapped += 1;
                    report.written_meanwhile += 1;
                }
                Rewrap::Current(_) if seen.is_none() => report.current += 1,
                Rewrap::Current(_) | Rewrap::Gone => {}
            }
        }
        Ok(report)
    }

    /// Whether these keys seal what a store writes: their key-encryption
    /// key has a current version (a [`Keyring`](super::Keyring) of staged
    /// keys only has none: its data keys read, and none is made).
    pub(crate) fn writes(&self) -> bool {
        self.inner.kek.current_version() > 0
    }

    /// How many data keys each version of the key-encryption key wraps:
    /// an older version may be destroyed once it wraps none (after a
    /// [`rewrap`](Self::rewrap), with every process on the current
    /// version). One listing of the key store and a read of each key.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the key store fails, [`Error::Corrupt`] if a
    /// wrapped key is damaged.
    pub async fn kek_versions(&self) -> Result<BTreeMap<u32, u64>> {
        let prefix = &self.inner.prefix;
        let mut read = self
            .inner
            .store
            .list(Some(prefix))
            .map_err(|e| Error::store(prefix, e))
            .map_ok(|meta| self.kek_version_at(meta.location))
            .try_buffer_unordered(KEY_READS);
        let mut versions = BTreeMap::new();
        while let Some(version) = read.try_next().await? {
            if let Some(version) = version {
                *versions.entry(version).or_default() += 1;
            }
        }
        Ok(versions)
    }

    /// The version of the key-encryption key that wraps the key at `at`
    /// (`None` if it was forgotten since it was listed).
    async fn kek_version_at(&self, at: Path) -> Result<Option<u32>> {
        let bytes = match self.inner.store.get(&at).await {
            Ok(got) => got.bytes().await.map_err(|e| Error::store(&at, e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(Error::store(&at, e)),
        };
        let record = KeyRecord::decode(&bytes).map_err(|reason| Error::corrupt(&at, reason))?;
        Ok(Some(record.wrapped.kek_version()))
    }

    /// Every wrapped key in the key store.
    async fn list_keys(&self) -> Result<Vec<ObjectMeta>> {
        let prefix = &self.inner.prefix;
        self.inner
            .store
            .list(Some(prefix))
            .try_collect()
            .await
            .map_err(|e| Error::store(prefix, e))
    }

    /// Rewraps the key at `at` with version `current` unless it already
    /// is.
    async fn rewrap_one(&self, at: &Path, current: u32) -> Result<Rewrap> {
        let Some(name) = at.prefix_match(&self.inner.prefix).map(|parts| {
            parts
                .map(|p| p.as_ref().to_owned())
                .collect::<Vec<_>>()
                .join("/")
        }) else {
            return Ok(Rewrap::Gone);
        };
        let got = match self.inner.store.get(at).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(Rewrap::Gone),
            Err(e) => return Err(Error::store(at, e)),
        };
        let read_tag = got.meta.e_tag.clone();
        let version = read_tag.clone().map(|e_tag| object_store::UpdateVersion {
            e_tag: Some(e_tag),
            version: got.meta.version.clone(),
        });
        let bytes = got.bytes().await.map_err(|e| Error::store(at, e))?;
        let record = KeyRecord::decode(&bytes).map_err(|reason| Error::corrupt(at, reason))?;
        if record.wrapped.kek_version() == current {
            return Ok(Rewrap::Current(read_tag));
        }
        // A standalone run's key keeps its generation: the frames
        // sealed with it name that generation.
        let context = record.context(&name);
        let key = self
            .inner
            .kek
            .unwrap(&record.wrapped, &context)
            .await
            .map_err(|e| unreadable_key(at.as_ref(), &name, e))?;
        let rewrapped = KeyRecord {
            generation: record.generation,
            wrapped: self.inner.kek.wrap(&key, &context).await?,
        };
        match self.replace(at, rewrapped.encode()?, version).await? {
            Some(tag) => Ok(Rewrap::Rewrapped(tag)),
            None => Ok(Rewrap::Gone),
        }
    }

    /// Writes `record` at `at` if the object there is still `version`
    /// (where the store can tell), so a key forgotten meanwhile stays so:
    /// `Some` with the entity tag it wrote (if the store told it), `None`
    /// if the replacement was refused.
    async fn replace(
        &self,
        at: &Path,
        record: Bytes,
        version: Option<object_store::UpdateVersion>,
    ) -> Result<Option<Option<String>>> {
        if let Some(version) = version {
            let opts = PutOptions::from(PutMode::Update(version));
            match self
                .inner
                .store
                .put_opts(at, PutPayload::from(record.clone()), opts)
                .await
            {
                Ok(put) => return Ok(Some(put.e_tag)),
                Err(object_store::Error::Precondition { .. })
                | Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(object_store::Error::NotImplemented { .. }) => {}
                Err(e) => return Err(Error::store(at, e)),
            }
        }
        self.inner
            .store
            .put(at, PutPayload::from(record))
            .await
            .map(|put| Some(put.e_tag))
            .map_err(|e| Error::store(at, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::Keyring;
    use object_store::memory::InMemory;

    fn keys(store: &Arc<InMemory>, kek: Keyring) -> DataKeys {
        DataKeys::new(kek, store.clone(), "keys")
    }

    #[tokio::test]
    async fn two_runs_and_two_incarnations_get_different_keys_and_writers_share_one() {
        let store = Arc::new(InMemory::new());
        let ring = Keyring::new(1, [1; 32]).unwrap();
        let (a, b) = (keys(&store, ring.clone()), keys(&store, ring));
        let p = Path::from("x");
        let name = |run: &str, inc: u64| {
            run_key_name(&RunId::new(run).unwrap(), Incarnation::from_u64(inc))
        };
        a.for_writing(&name("r1", 1), false, &p).await.unwrap();
        // Another process, racing or later, uses the key the first one made.
        b.for_writing(&name("r1", 1), false, &p).await.unwrap();
        b.for_writing(&name("r2", 1), false, &p).await.unwrap();
        b.for_writing(&name("r1", 2), false, &p).await.unwrap();
        let mut stored = Vec::new();
        for n in [name("r1", 1), name("r2", 1), name("r1", 2)] {
            let record = store.get(&a.path(&n)).await.unwrap().bytes().await.unwrap();
            let record = KeyRecord::decode(&record).unwrap();
            let ring = Keyring::new(1, [1; 32]).unwrap();
            stored.push(
                ring.unwrap(&record.wrapped, &record.context(&n))
                    .await
                    .unwrap(),
            );
        }
        assert_ne!(stored[0], stored[1]);
        assert_ne!(stored[0], stored[2]);
        assert_eq!(
            store
                .list(None)
                .try_collect::<Vec<_>>()
                .await
                .unwrap()
                .len(),
            3
        );
    }

    #[tokio::test]
    async fn a_standalone_key_made_again_has_a_new_generation_that_every_writer_reads() {
        let store = Arc::new(InMemory::new());
        let ring = Keyring::new(1, [1; 32]).unwrap();
        let (a, b) = (keys(&store, ring.clone()), keys(&store, ring.clone()));
        let p = Path::from("x");
        let run = RunId::new("s").unwrap();
        let name = run_key_name(&run, Incarnation::STANDALONE);
        let (first, _) = a.for_writing(&name, true, &p).await.unwrap();
        assert!(first > FIRST_GENERATION);
        assert_eq!(b.for_writing(&name, true, &p).await.unwrap().0, first);

        b.forget_incarnation(&run, Incarnation::STANDALONE)
            .await
            .unwrap();
        // A still holds the forgotten key: a read of its generation is
        // answered from the cache, but a write asks the key store.
        assert!(matches!(
            a.for_reading(&name, first, &p).await.unwrap(),
            Lookup::Found(_)
        ));
        assert!(matches!(
            b.for_reading(&name, first, &p).await.unwrap(),
            Lookup::Absent
        ));
        let (second, _) = a.for_writing(&name, true, &p).await.unwrap();
        assert_ne!(second, first);
        assert!(matches!(
            b.for_reading(&name, first, &p).await.unwrap(),
            Lookup::Replaced
        ));
        assert!(matches!(
            b.for_reading(&name, second, &p).await.unwrap(),
            Lookup::Found(_)
        ));

        // A rewrap keeps the generation (and its wrap's binding to it).
        let rotated = ring.with_key(2, [2; 32]).unwrap();
        let report = keys(&store, rotated.clone()).rewrap().await.unwrap();
        assert_eq!(report.rewrapped, 1);
        let fresh = keys(&store, rotated);
        assert_eq!(fresh.for_writing(&name, true, &p).await.unwrap().0, second);
        let record = store
            .get(&fresh.path(&name))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let record = KeyRecord::decode(&record).unwrap();
        assert_eq!(
            (record.generation, record.wrapped.kek_version()),
            (Some(second), 2)
        );
    }
}
