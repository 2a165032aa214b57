//! Per-run data keys: where they live, how they are made, read, forgotten
//! and rewrapped.
//!
//! # Paths in the key store
//!
//! Under the key store's prefix: `runs/<run>/<inc>` (the data key of one run
//! incarnation, standalone memos under incarnation `0000000000000000`) and
//! `shared/<ns>` (the data key of one shared namespace), `<run>` and
//! `<inc>` as in the data store's layout. Each holds a wrapped key:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MKEY"` |
//! | 1 | format version 1 |
//! | 4 | version of the key-encryption key that wrapped it |
//! | 2 | wrapped length `n` (at most 4096) |
//! | `n` | the wrapped key, as the key-encryption key made it |
//! | 4 | CRC-32 (IEEE) over everything before it |
//!
//! The wrap is bound to the name (`runs/<run>/<inc>`), so a wrapped key
//! copied under another run's name does not unwrap.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use chacha20poly1305::XChaCha20Poly1305;
use chacha20poly1305::aead::KeyInit;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::wrap::{DataKey, KeyEncryptionKey, WrappedKey, unreadable_key};
use crate::error::{Error, Result};
use crate::layout::run_segment;
use crate::run_id::{Incarnation, RunId};

const MAGIC: &[u8; 4] = b"MKEY";
const VERSION: u8 = 1;
const HEADER_LEN: usize = 4 + 1 + 4 + 2;
/// What every wrap is bound to besides the key's name, so no other use of
/// a key-encryption key makes a wrapped key memo accepts.
const CONTEXT_DOMAIN: &[u8] = b"memo data key v1\0";
/// How many unwrapped keys a process keeps: a bound on memory, and on how
/// long a forgotten run's key may stay in another process (until it is
/// pushed out or the process ends).
const CACHE_CAPACITY: usize = 4096;

/// Whose payloads a data key seals: what names it in the key store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyScope {
    /// One run: writes use `incarnation`'s key, reads the key of the
    /// incarnation their frame names (the run pointer's reader does not
    /// know it beforehand).
    Run {
        run_id: RunId,
        incarnation: Option<Incarnation>,
    },
    /// One shared namespace.
    Shared(String),
}

impl KeyScope {
    /// The id a frame written in this scope records: the incarnation, or 0.
    pub(crate) fn write_id(&self) -> Option<u64> {
        match self {
            KeyScope::Run { incarnation, .. } => incarnation.map(Incarnation::as_u64),
            KeyScope::Shared(_) => Some(0),
        }
    }

    /// The key store's name of the key a frame with `id` was sealed with.
    pub(crate) fn name(&self, id: u64) -> Option<String> {
        match self {
            KeyScope::Run { run_id, .. } => Some(run_key_name(run_id, Incarnation::from_u64(id))),
            KeyScope::Shared(ns) => (id == 0).then(|| format!("shared/{ns}")),
        }
    }
}

fn run_key_name(run_id: &RunId, incarnation: Incarnation) -> String {
    format!("runs/{}/{incarnation}", run_segment(run_id))
}

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
/// assert!(memo.new_memo(&run, 0).get("reply").await.is_err());
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
    cache: Mutex<HashMap<String, Arc<XChaCha20Poly1305>>>,
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
}

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

    fn context(name: &str) -> Vec<u8> {
        [CONTEXT_DOMAIN, name.as_bytes()].concat()
    }

    fn cached(&self, name: &str) -> Option<Arc<XChaCha20Poly1305>> {
        self.inner
            .cache
            .lock()
            .expect("poisoned")
            .get(name)
            .cloned()
    }

    fn remember(&self, name: &str, key: &DataKey) -> Arc<XChaCha20Poly1305> {
        let cipher = Arc::new(XChaCha20Poly1305::new(key.as_bytes().into()));
        let mut cache = self.inner.cache.lock().expect("poisoned");
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(name.to_owned(), Arc::clone(&cipher));
        cipher
    }

    /// The key named `name`, made and stored first if there is none; `path`
    /// is the object being written, for errors.
    pub(crate) async fn for_writing(
        &self,
        name: &str,
        path: &Path,
    ) -> Result<Arc<XChaCha20Poly1305>> {
        if let Some(hit) = self.cached(name) {
            return Ok(hit);
        }
        let at = self.path(name);
        let fresh = DataKey::random();
        let context = Self::context(name);
        let wrapped = self.inner.kek.wrap(&fresh, &context).await?;
        let record = encode(&wrapped)?;
        let opts = PutOptions::from(PutMode::Create);
        match self
            .inner
            .store
            .put_opts(&at, PutPayload::from(record), opts)
            .await
        {
            Ok(_) => Ok(self.remember(name, &fresh)),
            // Another writer made the key first: every writer uses its key.
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => {
                match self.for_reading(name, path).await? {
                    Some(key) => Ok(key),
                    None => Err(Error::corrupt(
                        path,
                        format!("the data key of {name} was forgotten while it was being made"),
                    )),
                }
            }
            Err(e) => Err(Error::store(&at, e)),
        }
    }

    /// The key named `name`, or `None` if the key store holds none
    /// (forgotten, or never made); `path` is the object being read, for
    /// errors.
    pub(crate) async fn for_reading(
        &self,
        name: &str,
        path: &Path,
    ) -> Result<Option<Arc<XChaCha20Poly1305>>> {
        if let Some(hit) = self.cached(name) {
            return Ok(Some(hit));
        }
        let at = self.path(name);
        let bytes = match self.inner.store.get(&at).await {
            Ok(got) => got.bytes().await.map_err(|e| Error::store(&at, e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(Error::store(&at, e)),
        };
        let wrapped = decode(&bytes).map_err(|reason| Error::corrupt(&at, reason))?;
        let key = self
            .inner
            .kek
            .unwrap(&wrapped, &Self::context(name))
            .await
            .map_err(|e| unreadable_key(path.as_ref(), name, e))?;
        Ok(Some(self.remember(name, &key)))
    }

    /// Forgets every data key of `run_id` (all its incarnations, and its
    /// standalone memos'): from then on none of its data, wherever a copy
    /// of it is kept, can be read again. Returns how many keys were deleted.
    ///
    /// This process forgets them at once; another process that holds one of
    /// them unwrapped keeps it until it pushes it out of its cache (it holds
    /// at most 4,096) or ends, so forget runs that no process works on. A
    /// [`MemoStore`](crate::MemoStore) keeps the values of workflow runs it
    /// read or wrote in its entry cache until the run is cleared: clear the
    /// run too (`memoctl forget` and the retention sweeper do both).
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
    /// them every wrapped key a backup of the key store still holds).
    ///
    /// A key forgotten while this runs is not written back: each rewrap
    /// replaces the wrapped key only if it is still the one read, where the
    /// key store can tell (buckets; a local folder cannot, so do not forget
    /// runs of a folder key store while rewrapping it).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the key store fails, [`Error::Corrupt`] if a
    /// wrapped key is damaged or does not unwrap (naming it; the keys
    /// before it are rewrapped, call it again once it is mended).
    pub async fn rewrap(&self) -> Result<Rewrapped> {
        let prefix = &self.inner.prefix;
        let all: Vec<Path> = self
            .inner
            .store
            .list(Some(prefix))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .map_err(|e| Error::store(prefix, e))?;
        let current = self.inner.kek.current_version();
        let mut report = Rewrapped::default();
        for at in all {
            let Some(name) = at.prefix_match(prefix).map(|parts| {
                parts
                    .map(|p| p.as_ref().to_owned())
                    .collect::<Vec<_>>()
                    .join("/")
            }) else {
                continue;
            };
            let got = match self.inner.store.get(&at).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(Error::store(&at, e)),
            };
            let version = got
                .meta
                .e_tag
                .clone()
                .map(|e_tag| object_store::UpdateVersion {
                    e_tag: Some(e_tag),
                    version: got.meta.version.clone(),
                });
            let bytes = got.bytes().await.map_err(|e| Error::store(&at, e))?;
            let wrapped = decode(&bytes).map_err(|reason| Error::corrupt(&at, reason))?;
            if wrapped.kek_version() == current {
                report.current += 1;
                continue;
            }
            let context = Self::context(&name);
            let key = self
                .inner
                .kek
                .unwrap(&wrapped, &context)
                .await
                .map_err(|e| unreadable_key(at.as_ref(), &name, e))?;
            let record = encode(&self.inner.kek.wrap(&key, &context).await?)?;
            self.replace(&at, record, version).await?;
            report.rewrapped += 1;
        }
        Ok(report)
    }

    /// Writes `record` at `at` if the object there is still `version`
    /// (where the store can tell), so a key forgotten meanwhile stays so.
    async fn replace(
        &self,
        at: &Path,
        record: Bytes,
        version: Option<object_store::UpdateVersion>,
    ) -> Result<()> {
        if let Some(version) = version {
            let opts = PutOptions::from(PutMode::Update(version));
            match self
                .inner
                .store
                .put_opts(at, PutPayload::from(record.clone()), opts)
                .await
            {
                Ok(_) => return Ok(()),
                Err(object_store::Error::Precondition { .. })
                | Err(object_store::Error::NotFound { .. }) => return Ok(()),
                Err(object_store::Error::NotImplemented { .. }) => {}
                Err(e) => return Err(Error::store(at, e)),
            }
        }
        self.inner
            .store
            .put(at, PutPayload::from(record))
            .await
            .map(|_| ())
            .map_err(|e| Error::store(at, e))
    }
}

fn encode(wrapped: &WrappedKey) -> Result<Bytes> {
    let len = wrapped.bytes().len();
    if len > WrappedKey::MAX_LEN {
        return Err(Error::InvalidConfig {
            what: "key-encryption key".into(),
            reason: format!(
                "a wrapped data key of {len} bytes, over the {} memo stores",
                WrappedKey::MAX_LEN
            ),
        });
    }
    let mut out = BytesMut::with_capacity(HEADER_LEN + len + 4);
    out.put_slice(MAGIC);
    out.put_u8(VERSION);
    out.put_u32_le(wrapped.kek_version());
    out.put_u16_le(len as u16);
    out.put_slice(wrapped.bytes());
    let crc = crc32fast::hash(&out);
    out.put_u32_le(crc);
    Ok(out.freeze())
}

fn decode(bytes: &[u8]) -> std::result::Result<WrappedKey, String> {
    if bytes.len() < HEADER_LEN + 4 || &bytes[..4] != MAGIC {
        return Err("not a memo data key (bad magic or too short)".into());
    }
    if bytes[4] != VERSION {
        return Err(format!("unknown data key format version {}", bytes[4]));
    }
    let kek_version = u32::from_le_bytes(bytes[5..9].try_into().expect("4 bytes"));
    let len = usize::from(u16::from_le_bytes(
        bytes[9..11].try_into().expect("2 bytes"),
    ));
    if bytes.len() != HEADER_LEN + len + 4 {
        return Err(format!(
            "the data key declares {len} wrapped bytes but holds {}",
            bytes.len().saturating_sub(HEADER_LEN + 4)
        ));
    }
    let body_end = HEADER_LEN + len;
    let stored = u32::from_le_bytes(bytes[body_end..].try_into().expect("4 bytes"));
    if stored != crc32fast::hash(&bytes[..body_end]) {
        return Err("the data key's checksum does not match".into());
    }
    Ok(WrappedKey::new(
        kek_version,
        bytes[HEADER_LEN..body_end].to_vec(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::Keyring;
    use object_store::memory::InMemory;

    fn keys(store: &Arc<InMemory>, kek: Keyring) -> DataKeys {
        DataKeys::new(kek, store.clone(), "keys")
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_wrapped_key_record_is_pinned() {
        // Checksum computed independently (Python: zlib.crc32).
        let record = encode(&WrappedKey::new(2, vec![0xaa, 0xbb])).unwrap();
        assert_eq!(hex(&record), "4d4b455901020000000200aabb545936a1");
        assert_eq!(
            decode(&record).unwrap(),
            WrappedKey::new(2, vec![0xaa, 0xbb])
        );
        let mut damaged = record.to_vec();
        damaged[12] ^= 1;
        assert!(decode(&damaged).unwrap_err().contains("checksum"));
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
        a.for_writing(&name("r1", 1), &p).await.unwrap();
        // Another process, racing or later, uses the key the first one made.
        b.for_writing(&name("r1", 1), &p).await.unwrap();
        b.for_writing(&name("r2", 1), &p).await.unwrap();
        b.for_writing(&name("r1", 2), &p).await.unwrap();
        let mut stored = Vec::new();
        for n in [name("r1", 1), name("r2", 1), name("r1", 2)] {
            let record = store.get(&a.path(&n)).await.unwrap().bytes().await.unwrap();
            let wrapped = decode(&record).unwrap();
            let ring = Keyring::new(1, [1; 32]).unwrap();
            stored.push(ring.unwrap(&wrapped, &DataKeys::context(&n)).await.unwrap());
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
}
