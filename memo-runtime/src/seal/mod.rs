//! How stored payloads are sealed: zstd compression, and authenticated
//! encryption bound to the path a payload lives at.
//!
//! A [`Seal`] is given to a [`MemoStore`](crate::MemoStore) and an
//! [`ObjectStoreRuntimeStore`](crate::runtime_store::ObjectStoreRuntimeStore)
//! (or read from a store URL's options, see
//! [`store_from_url`](crate::store::store_from_url)); every payload they
//! write (memo values, step receipts and outputs, run records and inputs,
//! signals, checkpoints) is compressed and encrypted by it, and every
//! payload they read is checked against it. The frame of each stored object
//! records what was done, so data written with any seal, or by an older
//! memo, reads alike; the guide's `docs/guide/encryption.md` says how to
//! turn it on and what it protects against.
//!
//! Encryption takes its keys from a store-wide [`Keyring`]
//! ([`Seal::with_encryption`]), or from **per-run data keys**
//! ([`Seal::with_data_keys`], [`DataKeys`]): each run incarnation gets a
//! random key, wrapped by a [`KeyEncryptionKey`] (a [`Keyring`], or a cloud
//! KMS you connect) and kept in a key store apart from the data, so that
//! deleting it ([`DataKeys::forget_run`], `memoctl forget`, the retention
//! sweeper) makes the run unreadable at once, even from a copy of the data
//! bucket taken before; [`DataKeys`]' docs say why the keys must live
//! apart. [`DataKeys::rewrap`] rotates the key-encryption key without
//! rewriting data.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use memo_runtime::{MemoStore, object_store::memory::InMemory};
//! use memo_runtime::seal::{Keyring, Seal};
//!
//! let keys = Keyring::new(1, [7; 32])?; // in production: Keyring::from_file
//! let memo = MemoStore::new(Arc::new(InMemory::new()), "memo")
//!     .with_seal(Seal::default().with_encryption(keys));
//! assert!(memo.seal().is_encrypted());
//! # Ok::<(), memo_runtime::Error>(())
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path as FsPath;
use std::sync::Arc;

use chacha20poly1305::XChaCha20Poly1305;
use chacha20poly1305::aead::KeyInit;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};

mod data_keys;
mod key_record;
mod options;
mod scope;
mod usage;
mod wrap;

use data_keys::Lookup;
pub use data_keys::{DataKeys, Rewrapped};
pub(crate) use key_record::FIRST_GENERATION;
pub(crate) use options::seal_from_options;
pub use options::{
    ACCEPT_PLAINTEXT_OPTION, COMPRESSION_OPTION, DATA_KEY_STORE_OPTION, ENCRYPTION_KEY_FILE_OPTION,
    KEY_ENCRYPTION_KEY_FILE_OPTION,
};
pub(crate) use scope::KeyScope;
pub use usage::KeyUsage;
pub use wrap::{DataKey, KeyEncryptionKey, WrappedKey};

/// Compression of stored payloads: zstd, before encryption.
///
/// The default compresses a payload of [`DEFAULT_MIN_SIZE`](Compression::DEFAULT_MIN_SIZE)
/// bytes or more at zstd level [`DEFAULT_LEVEL`](Compression::DEFAULT_LEVEL), and keeps
/// the compressed form only where it is smaller, so incompressible data
/// (images, ciphertexts, already compressed files) is stored as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Payloads are stored as they are.
    Off,
    /// Payloads of `min_size` bytes or more are compressed with zstd at
    /// `level` (1 to 22; higher is smaller and slower).
    Zstd {
        /// The zstd level.
        level: i32,
        /// The smallest payload compressed, in bytes.
        min_size: usize,
    },
}

impl Compression {
    /// The default zstd level: level 1 compresses JSON-like values to a
    /// third at several hundred MB/s, far below a store's round trip.
    pub const DEFAULT_LEVEL: i32 = 1;
    /// The smallest payload compressed by default, in bytes: below it zstd
    /// saves too few bytes to repay its frame and its time (measured in
    /// `BENCHMARKS.md`, *Sealed payloads*).
    pub const DEFAULT_MIN_SIZE: usize = 512;

    /// zstd at `level` for payloads of `min_size` bytes or more.
    pub fn zstd(level: i32, min_size: usize) -> Compression {
        Compression::Zstd { level, min_size }
    }
}

impl Default for Compression {
    fn default() -> Compression {
        Compression::zstd(Compression::DEFAULT_LEVEL, Compression::DEFAULT_MIN_SIZE)
    }
}

/// The 256-bit keys a store encrypts with, each under a version number that
/// the frame of every encrypted object records.
///
/// Writes use the current key: the highest version that is not *staged*.
/// Reads use whichever version the object names, so a new key can be added
/// without rewriting what the old one sealed, and an old key is dropped
/// from the ring once nothing it sealed is kept.
///
/// # Rotating a key across a fleet
///
/// Every process that shares a store must be able to read what any of
/// them writes. A key added to one process's ring as a plain key is
/// written with at once, and a process that does not have it yet reads
/// those objects as [`Error::Corrupt`] ("encrypted with key version 2,
/// which this keyring lacks ..."): its runs stay open and are retried,
/// but they stall until every process has the key. So a rotation takes
/// three rollouts, each finished on every process before the next starts:
///
/// 1. **stage** the new key ([`Keyring::with_staged_key`], or `staged`
///    after the key on its line of the key file): every process reads with
///    it, none writes with it yet;
/// 2. **promote** it (a plain key, [`Keyring::with_key`]): processes write
///    with it as they pick it up, and every one reads both;
/// 3. **retire** the old key once nothing it sealed is kept: for a store
///    keyring, after the retention period; for the key-encryption key of
///    [`DataKeys`], once [`DataKeys::rewrap`] (run after step 2 reached every
///    process) reports no key written meanwhile with an older version.
///    [`KeyUsage::scan`] and [`DataKeys::kek_versions`] (`memoctl keys`)
///    say what still needs a version.
///
/// Turning encryption on goes the same way: a ring of staged keys only
/// ([`Keyring::staged`]) reads what its key encrypted and writes
/// plaintext, until the key is promoted.
#[derive(Clone)]
pub struct Keyring {
    current: u32,
    keys: BTreeMap<u32, Arc<XChaCha20Poly1305>>,
    staged: BTreeSet<u32>,
}

impl fmt::Debug for Keyring {
    /// Names the versions, never the keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current)
            .field("versions", &self.keys.keys().collect::<Vec<_>>())
            .field("staged", &self.staged)
            .finish()
    }
}

impl Keyring {
    /// A keyring of one key, `key`, under `version` (1 or more).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `version` is 0 (it marks an unencrypted
    /// frame).
    pub fn new(version: u32, key: [u8; 32]) -> Result<Keyring> {
        Keyring::empty().insert(version, key, false)
    }

    /// A keyring of one key, `key`, under `version` *staged*
    /// ([`Keyring::with_staged_key`]): a store sealed with it reads what
    /// that key encrypted and plaintext alike, and writes plaintext. The
    /// first step of turning encryption on across processes: once every
    /// process reads with the key, it can be promoted ([`Keyring::new`]),
    /// process by process.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `version` is 0.
    pub fn staged(version: u32, key: [u8; 32]) -> Result<Keyring> {
        Keyring::empty().insert(version, key, true)
    }

    /// The same keyring with `key` under `version` too; the highest version
    /// that is not staged is the one writes use.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `version` is 0 or already in the ring.
    pub fn with_key(self, version: u32, key: [u8; 32]) -> Result<Keyring> {
        self.insert(version, key, false)
    }

    /// The same keyring with `key` under `version` *staged*: read wherever
    /// an object names `version`, never written with, even as the highest
    /// version. The first step of a rotation across processes (see
    /// [`Keyring`]): once every process holds the key staged, it can be
    /// promoted ([`Keyring::with_key`]) process by process, and each
    /// process reads what the others write throughout.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `version` is 0 or already in the ring.
    pub fn with_staged_key(self, version: u32, key: [u8; 32]) -> Result<Keyring> {
        self.insert(version, key, true)
    }

    fn empty() -> Keyring {
        Keyring {
            current: 0,
            keys: BTreeMap::new(),
            staged: BTreeSet::new(),
        }
    }

    fn insert(mut self, version: u32, key: [u8; 32], staged: bool) -> Result<Keyring> {
        if version == 0 {
            return Err(invalid_key("key version 0 is reserved; number keys from 1"));
        }
        if self.keys.contains_key(&version) {
            return Err(invalid_key(format!("key version {version} appears twice")));
        }
        let cipher = XChaCha20Poly1305::new(&key.into());
        self.keys.insert(version, Arc::new(cipher));
        if staged {
            self.staged.insert(version);
        } else {
            self.current = self.current.max(version);
        }
        Ok(self)
    }

    /// Reads a key file: one key a line, `<version> <64 hex digits>`,
    /// followed by `staged` for a key that is read but not yet written
    /// with ([`Keyring::with_staged_key`]); blank lines and lines starting
    /// with `#` are skipped. Make one with
    /// `printf '1 %s\n' "$(openssl rand -hex 32)" > memo.key` and keep it
    /// readable by the workers only. Rotate by adding a line with a higher
    /// version and `staged`, and once every process has read that file,
    /// removing `staged` (see [`Keyring`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] naming the file (never a key) if it cannot be
    /// read, has a malformed line, no key, or a version twice. A file of
    /// staged keys only is a keyring that writes plaintext
    /// ([`Keyring::staged`]).
    pub fn from_file(path: impl AsRef<FsPath>) -> Result<Keyring> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            invalid_key(format!("cannot read the key file {}: {e}", path.display()))
        })?;
        Keyring::parse(&text)
            .map_err(|reason| invalid_key(format!("key file {}: {reason}", path.display())))
    }

    fn parse(text: &str) -> std::result::Result<Keyring, String> {
        let mut ring = Keyring::empty();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let malformed = || {
                format!(
                    "line {} is not `<version> <64 hex digits>` or `<version> <64 hex digits> staged`",
                    number + 1
                )
            };
            let mut words = line.split_whitespace();
            let (Some(version), Some(hex)) = (words.next(), words.next()) else {
                return Err(malformed());
            };
            let staged = match (words.next(), words.next()) {
                (None, _) => false,
                (Some("staged"), None) => true,
                _ => return Err(malformed()),
            };
            let version: u32 = version.parse().map_err(|_| malformed())?;
            let key = parse_hex_key(hex).ok_or_else(malformed)?;
            ring = ring
                .insert(version, key, staged)
                .map_err(|e| format!("line {}: {e}", number + 1))?;
        }
        if ring.keys.is_empty() {
            return Err("holds no key".to_owned());
        }
        Ok(ring)
    }

    /// The version writes use: the highest in the ring that is not staged;
    /// 0 if every key is staged (writes are then not encrypted).
    pub fn current_version(&self) -> u32 {
        self.current
    }

    /// Why this ring cannot read what key `version` sealed, for an error
    /// that says what the ring holds and what to do.
    pub(crate) fn lacks(&self, version: u32) -> String {
        let why = if version > self.current {
            "a process with a newer key wrote it: give every process the new key as staged \
             before any process writes with it (the encryption guide's \"Rotating the key\")"
        } else {
            "it was retired, or this is another keyring"
        };
        format!(
            "key version {version}, which this keyring lacks (its current version is {}): {why}",
            self.current
        )
    }

    /// The key writes use and its version; `None` if every key is staged
    /// (the ring then reads what it encrypted and writes plaintext).
    pub(crate) fn current(&self) -> Option<(u32, &XChaCha20Poly1305)> {
        self.keys
            .get(&self.current)
            .map(|cipher| (self.current, cipher.as_ref()))
    }

    pub(crate) fn get(&self, version: u32) -> Option<&XChaCha20Poly1305> {
        self.keys.get(&version).map(Arc::as_ref)
    }
}

/// Fills `bytes` (a key or a nonce) from the operating system's random
/// source; in a simulated history (a `with_token_source` call of the
/// `testing` simulator on this thread), from the history's seed, so that a
/// sealed seed replays exactly. Outside the simulator no token source is
/// installed, so every key and nonce memo draws comes from the operating
/// system.
pub(crate) fn fill_random(bytes: &mut [u8]) {
    #[cfg(any(test, feature = "testing"))]
    if let Some(first) = crate::run_id::seeded_token() {
        let mut next = Some(first);
        for chunk in bytes.chunks_mut(8) {
            let token = next.take().or_else(crate::run_id::seeded_token);
            chunk.copy_from_slice(&token.unwrap_or_default().to_le_bytes()[..chunk.len()]);
        }
        return;
    }
    getrandom::fill(bytes).expect("the operating system's random source failed");
}

/// The error of a bad key or key file; it never holds a key.
pub(crate) fn invalid_key(reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        what: "encryption key".into(),
        reason: reason.into(),
    }
}

fn parse_hex_key(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(key)
}

/// What a store does to the payloads it writes, and what it accepts when it
/// reads: compression, encryption, and whether a plaintext object still
/// reads in an encrypted store (only while migrating to encryption).
///
/// The default compresses ([`Compression::default`]) and does not encrypt;
/// [`Seal::plain`] does neither and writes the frames memo wrote before
/// seals existed.
#[derive(Clone, Default)]
pub struct Seal {
    compression: Compression,
    keys: Option<Keyring>,
    accept_plaintext: bool,
    data_keys: Option<DataKeys>,
    /// Whose data key payloads are sealed with: set by the store for each
    /// run (or shared namespace) it writes or reads.
    scope: Option<KeyScope>,
    /// The data key of `scope` a frame is sealed or opened with, once
    /// fetched: what the frame names it by, and its cipher.
    data_key: Option<(KeyRef, Arc<XChaCha20Poly1305>)>,
}

/// How a version-3 frame names the data key that sealed it: the key's id
/// (the run incarnation; 0 for a standalone run's or a shared namespace's)
/// and its generation ([`FIRST_GENERATION`] for every key but a standalone
/// run's made since generations; see [`DataKeys`], *Standalone runs*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRef {
    pub(crate) id: u64,
    pub(crate) generation: u32,
}

impl fmt::Debug for Seal {
    /// Names what is done and by which keys' versions and stores, never a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Seal")
            .field("compression", &self.compression)
            .field("keys", &self.keys)
            .field("accept_plaintext", &self.accept_plaintext)
            .field("data_keys", &self.data_keys)
            .field("scope", &self.scope)
            .finish()
    }
}

/// The seal of objects whose payload is empty and whose meaning is in their
/// name (terminal markers, status hints, due-run entries, probes): there is
/// nothing to compress or hide.
pub(crate) const PLAIN: Seal = Seal {
    compression: Compression::Off,
    keys: None,
    accept_plaintext: false,
    data_keys: None,
    scope: None,
    data_key: None,
};

impl Seal {
    /// No compression and no encryption: what memo wrote before seals.
    pub fn plain() -> Seal {
        PLAIN
    }

    /// The same seal with `compression`.
    pub fn with_compression(mut self, compression: Compression) -> Seal {
        self.compression = compression;
        self
    }

    /// The same seal encrypting every payload with `keys`' current key.
    ///
    /// An encrypted store reads only objects encrypted by a key of `keys`
    /// for the path they are read at: a plaintext object is refused as
    /// [`Error::Corrupt`] (an attacker who can write to the bucket cannot
    /// plant a value), unless [`Seal::accepting_plaintext`] is set.
    pub fn with_encryption(mut self, keys: Keyring) -> Seal {
        self.keys = Some(keys);
        self
    }

    /// The same seal, reading plaintext objects as valid too: for a store
    /// that held data before encryption was turned on, until that data is
    /// gone (swept or rewritten). New payloads are still encrypted. Without
    /// encryption this changes nothing.
    pub fn accepting_plaintext(mut self) -> Seal {
        self.accept_plaintext = true;
        self
    }

    /// The same seal encrypting the payloads of each run incarnation (and
    /// each shared namespace) with a data key of its own, drawn when first
    /// needed and kept wrapped in `keys`' key store: forgetting a run
    /// ([`DataKeys::forget_run`]) then makes all of its data unreadable at
    /// once, wherever copies of it are kept.
    ///
    /// Reads as [`Seal::with_encryption`] does (plaintext is refused unless
    /// [`Seal::accepting_plaintext`]); objects sealed before with a store
    /// keyring still read if the seal keeps that keyring too
    /// (`with_encryption(ring).with_data_keys(keys)`: writes use the data
    /// keys, reads of older objects the ring).
    pub fn with_data_keys(mut self, keys: DataKeys) -> Seal {
        self.data_keys = Some(keys);
        self
    }

    /// The data keys of this seal, if it has them: to forget a run, or
    /// rewrap.
    pub fn data_keys(&self) -> Option<&DataKeys> {
        self.data_keys.as_ref()
    }

    /// Whether payloads are encrypted: with data keys, or with a keyring,
    /// that have a key to write with (not only staged ones).
    pub fn is_encrypted(&self) -> bool {
        self.keys
            .as_ref()
            .is_some_and(|keys| keys.current().is_some())
            || self.data_keys.as_ref().is_some_and(DataKeys::writes)
    }

    /// The compression of payloads.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    pub(crate) fn keys(&self) -> Option<&Keyring> {
        self.keys.as_ref()
    }

    /// Whether a payload that is not encrypted reads as valid.
    pub(crate) fn reads_plaintext(&self) -> bool {
        !self.is_encrypted() || self.accept_plaintext
    }

    /// This seal with the data key `key` fetched under `id`, of generation
    /// `generation`: for tests of the frame.
    #[cfg(test)]
    pub(crate) fn with_fetched_data_key(mut self, id: u64, generation: u32, key: [u8; 32]) -> Seal {
        let key_ref = KeyRef { id, generation };
        self.data_key = Some((key_ref, Arc::new(XChaCha20Poly1305::new(&key.into()))));
        self
    }

    /// The data key a frame is sealed or opened with, once fetched.
    pub(crate) fn data_key(&self) -> Option<(KeyRef, &XChaCha20Poly1305)> {
        self.data_key.as_ref().map(|(at, key)| (*at, key.as_ref()))
    }

    /// This seal for the payloads of `run_id`'s `incarnation` (a cheap
    /// borrow where there are no data keys).
    pub(crate) fn for_run(&self, run_id: &RunId, incarnation: Incarnation) -> Cow<'_, Seal> {
        self.scoped(|| KeyScope::Run {
            run_id: run_id.clone(),
            incarnation: Some(incarnation),
        })
    }

    /// This seal for reading records of `run_id` whose incarnation is not
    /// known beforehand (the run pointer): the frame names it.
    pub(crate) fn for_run_id(&self, run_id: &RunId) -> Cow<'_, Seal> {
        self.scoped(|| KeyScope::Run {
            run_id: run_id.clone(),
            incarnation: None,
        })
    }

    /// This seal for the entries of the shared namespace `namespace`.
    pub(crate) fn for_shared(&self, namespace: &str) -> Cow<'_, Seal> {
        self.scoped(|| KeyScope::Shared(namespace.to_owned()))
    }

    fn scoped(&self, scope: impl FnOnce() -> KeyScope) -> Cow<'_, Seal> {
        if self.data_keys.is_none() {
            return Cow::Borrowed(self);
        }
        let mut seal = self.clone();
        seal.scope = Some(scope());
        seal.data_key = None;
        Cow::Owned(seal)
    }

    /// This seal with the data key its writes use fetched (made first, if
    /// the scope has none yet); `path` is the object written, for errors.
    ///
    /// A standalone run's key is read from the key store at every fetch,
    /// so that no write seals with a key forgotten meanwhile (see
    /// [`DataKeys`], *Standalone runs*). A seal that holds its key already
    /// keeps it: a blob's chunks all use the key of its first chunk.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the seal has data keys but no scope that
    /// names one (a payload outside any run; a bug of memo's), and whatever
    /// fetching, making or wrapping the key fails with.
    pub(crate) async fn for_writing(&self, path: &Path) -> Result<Cow<'_, Seal>> {
        // Without data keys, or with staged ones only (which read and never
        // make a key), the keyring's current key, or none, seals.
        let Some(data_keys) = self.data_keys.as_ref().filter(|keys| keys.writes()) else {
            return Ok(Cow::Borrowed(self));
        };
        let scoped = self.scope.as_ref().and_then(|scope| {
            let id = scope.write_id()?;
            Some((id, scope.name(id)?, scope.generational(id)))
        });
        let Some((id, name, generational)) = scoped else {
            return Err(Error::InvalidConfig {
                what: "seal".into(),
                reason: format!("{path} is written with data keys but in no run's scope"),
            });
        };
        if self.data_key.as_ref().is_some_and(|(at, _)| at.id == id) {
            return Ok(Cow::Borrowed(self));
        }
        let (generation, key) = data_keys.for_writing(&name, generational, path).await?;
        let mut seal = self.clone();
        seal.data_key = Some((KeyRef { id, generation }, key));
        Ok(Cow::Owned(seal))
    }

    /// This seal with the data key `key` fetched: the key the frame read at
    /// `path` names (`envelope::data_key_ref`, `None` for a frame sealed
    /// without a data key).
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] naming `path` if the key is not in the key store
    /// (the run was forgotten: its data can never be read again), the key
    /// store holds another generation of it (a standalone run's entry
    /// sealed before a forget; [`for_reading_entry`](Self::for_reading_entry)
    /// reads that as a miss), or the frame names a key outside the scope;
    /// whatever fetching the key fails with.
    pub(crate) async fn for_reading(
        &self,
        path: &Path,
        key: Option<KeyRef>,
    ) -> Result<Cow<'_, Seal>> {
        match self.for_reading_entry(path, key).await? {
            Opening::With(seal) => Ok(seal),
            Opening::Stale => Err(Error::corrupt(path, cleared(key))),
            Opening::Forgotten(error) => Err(error),
        }
    }

    /// [`for_reading`](Self::for_reading), but [`Opening::Stale`] for a
    /// frame that belongs to a cleared standalone run: one of a standalone memo's
    /// entries, sealed with a generation of its run's key that the key
    /// store no longer holds (forgotten, and maybe made again since). Such
    /// an entry was written by a use that raced the run's clear (or was
    /// left by a forget without a clear); its reader takes it as a miss,
    /// and the next put of its key replaces it.
    ///
    /// A frame of the generation the key store holds is opened with that
    /// key, so if it does not authenticate it is corrupt, never a miss;
    /// a frame whose generation field was altered fails its checksum, and
    /// one altered with its checksum mended reads as a miss, which is what
    /// deleting the entry (in the reach of whoever can alter it) does too.
    ///
    /// A frame whose data key is not in the key store at all is
    /// [`Opening::Forgotten`], with the error a read of it returns unless
    /// the reader finds the object gone meanwhile: a run's key is
    /// forgotten only after its objects are deleted (the sweeper's and
    /// `memoctl forget`'s order), so an object read just before its run's
    /// deletion and its key looked up just after reads as what it is by
    /// then, absent (`write_once::read_entry`).
    ///
    /// # Errors
    ///
    /// As [`for_reading`](Self::for_reading), but for the miss and the
    /// forgotten key.
    pub(crate) async fn for_reading_entry(
        &self,
        path: &Path,
        key: Option<KeyRef>,
    ) -> Result<Opening<'_>> {
        let Some(key) = key else {
            return Ok(Opening::With(Cow::Borrowed(self)));
        };
        if self.data_key.as_ref().is_some_and(|(at, _)| *at == key) {
            return Ok(Opening::With(Cow::Borrowed(self)));
        }
        let corrupt = |reason: String| Error::corrupt(path, reason);
        let id = key.id;
        let Some(data_keys) = &self.data_keys else {
            return Err(corrupt(
                "the object is encrypted with a run's data key and this store has no data \
                 keys: give it the key store and key-encryption key it was written with \
                 (turning data keys on across processes, give every process the \
                 key-encryption key as staged before any process writes with it: the \
                 encryption guide's \"Old data\")"
                    .into(),
            ));
        };
        let Some((scope, name)) = self
            .scope
            .as_ref()
            .and_then(|scope| Some((scope, scope.name(id)?)))
        else {
            return Err(corrupt(format!(
                "the object names data key {id:016x}, which belongs to no run this read is of"
            )));
        };
        if !scope.generational(id) && key.generation != FIRST_GENERATION {
            return Err(corrupt(format!(
                "the object names generation {} of data key {id:016x}, which has none (only \
                 a standalone run's key has generations)",
                key.generation
            )));
        }
        let cipher = match data_keys.for_reading(&name, key.generation, path).await? {
            Lookup::Found(cipher) => cipher,
            Lookup::Absent | Lookup::Replaced if scope.stale_is_miss() => {
                return Ok(Opening::Stale);
            }
            Lookup::Absent => {
                return Ok(Opening::Forgotten(corrupt(format!(
                    "the data key of {name} is not in the key store: the run was forgotten \
                     (its data can never be read again), or the object was moved or copied \
                     here from another run, or this is not the key store it was written with"
                ))));
            }
            Lookup::Replaced => return Err(corrupt(cleared(Some(key)))),
        };
        let mut seal = self.clone();
        seal.data_key = Some((key, cipher));
        Ok(Opening::With(Cow::Owned(seal)))
    }
}

/// What [`Seal::for_reading_entry`] found to open a frame with.
pub(crate) enum Opening<'a> {
    /// The seal that opens it.
    With(Cow<'a, Seal>),
    /// The frame belongs to a cleared standalone run: a miss.
    Stale,
    /// The data key it names is not in the key store: forgotten, with its
    /// run's objects deleted first. The error is the read's unless the
    /// object is found gone.
    Forgotten(Error),
}

/// Why a frame sealed with the forgotten generation `key` names cannot be
/// read.
fn cleared(key: Option<KeyRef>) -> String {
    let generation = key.map_or(0, |key| key.generation);
    format!(
        "the object is sealed with generation {generation:08x} of its standalone run's data \
         key, which the key store no longer holds: the run was forgotten (and its key maybe \
         made again) after the object was written, or while it was"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn a_key_file_names_versions_and_the_highest_writes() {
        let ring =
            Keyring::parse(&format!("# memo keys\n1 {HEX}\n\n3 {}\n", "ff".repeat(32))).unwrap();
        assert_eq!(ring.current_version(), 3);
        assert!(ring.get(1).is_some() && ring.get(2).is_none());
    }

    #[test]
    fn a_staged_key_reads_but_never_writes_until_promoted() {
        let ff = "ff".repeat(32);
        let ring = Keyring::parse(&format!("1 {HEX}\n2 {ff}  staged\n")).unwrap();
        assert_eq!(
            ring.current_version(),
            1,
            "a staged key is not written with"
        );
        assert!(ring.get(2).is_some(), "a staged key reads");
        assert_eq!(
            format!("{ring:?}"),
            "Keyring { current: 1, versions: [1, 2], staged: {2} }"
        );
        let promoted = Keyring::parse(&format!("1 {HEX}\n2 {ff}\n")).unwrap();
        assert_eq!(promoted.current_version(), 2);
        // Built in code, as a key file builds it.
        let built = Keyring::new(1, [0; 32])
            .unwrap()
            .with_staged_key(2, [1; 32])
            .unwrap();
        assert_eq!(built.current_version(), 1);
        assert!(built.get(2).is_some());
        // A staged version below the current one is read like any older key.
        let below = Keyring::new(3, [0; 32])
            .unwrap()
            .with_staged_key(2, [1; 32])
            .unwrap();
        assert_eq!(below.current_version(), 3);
        assert!(below.get(2).is_some());
    }

    /// A keyring of staged keys only writes plaintext and reads both: the
    /// first step of turning encryption on across processes.
    #[test]
    fn a_keyring_of_staged_keys_only_writes_plaintext_and_reads_both() {
        let ring = Keyring::parse(&format!("1 {HEX} staged\n")).unwrap();
        assert_eq!(ring.current_version(), 0);
        assert!(ring.current().is_none() && ring.get(1).is_some());
        assert_eq!(
            format!("{:?}", Keyring::staged(1, [0; 32]).unwrap()),
            "Keyring { current: 0, versions: [1], staged: {1} }"
        );
        let staged = Seal::plain().with_encryption(ring);
        assert!(!staged.is_encrypted() && staged.reads_plaintext());
        let at = Path::from("m/r/1/k");
        let written = crate::envelope::seal(&at, b"v", &staged);
        assert_eq!(
            crate::envelope::sealed_with(&written),
            crate::envelope::SealedWith::Plaintext
        );
        let promoted =
            Seal::plain().with_encryption(Keyring::parse(&format!("1 {HEX}\n")).unwrap());
        let encrypted = crate::envelope::seal(&at, b"v", &promoted);
        assert_eq!(
            &crate::envelope::open(&at, encrypted, &staged, 1 << 20).unwrap()[..],
            b"v"
        );
        // A key-encryption key of staged keys only has nothing to wrap with.
        let kek = Keyring::staged(1, [0; 32]).unwrap();
        let wrapped = futures::executor::block_on(kek.wrap(&DataKey::from_bytes([1; 32]), b"x"));
        assert!(
            matches!(&wrapped, Err(Error::InvalidConfig { reason, .. }) if reason.contains("staged")),
            "{wrapped:?}"
        );
    }

    #[test]
    fn a_bad_key_file_is_refused_without_showing_a_key() {
        for (text, says) in [
            ("", "holds no key"),
            ("1 abc", "line 1 is not"),
            (&format!("0 {HEX}"), "reserved"),
            (&format!("1 {HEX}\n1 {HEX}"), "appears twice"),
            (&format!("1 {HEX}\n1 {HEX} staged"), "appears twice"),
            (&format!("x {HEX}"), "line 1"),
            (&format!("1 {HEX} stage"), "line 1 is not"),
            (&format!("1 {HEX} staged now"), "line 1 is not"),
            ("1", "line 1 is not"),
        ] {
            let err = Keyring::parse(text).unwrap_err();
            assert!(err.contains(says), "{text:?}: {err}");
            assert!(!err.contains(HEX), "{err}");
        }
        let err = Keyring::from_file("/nonexistent/memo.key").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConfig { reason, .. } if reason.contains("/nonexistent/memo.key")),
            "{err:?}"
        );
    }

    #[test]
    fn a_store_url_turns_on_encryption_and_compression_with_its_options() {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("memo.key");
        std::fs::write(&key_file, format!("1 {HEX}\n")).unwrap();
        let key_file = key_file.to_str().unwrap();
        let opened = crate::store::store_from_url(
            "memory://",
            [
                (ENCRYPTION_KEY_FILE_OPTION, key_file),
                (COMPRESSION_OPTION, "off"),
            ],
        )
        .unwrap();
        assert!(opened.seal.is_encrypted() && !opened.seal.reads_plaintext());
        assert_eq!(opened.seal.compression(), Compression::Off);
        let default = crate::store::store_from_url("memory://", [("", ""); 0]).unwrap();
        assert!(!default.seal.is_encrypted());
        assert_eq!(default.seal.compression(), Compression::default());
        let migrating = crate::store::store_from_url(
            "memory://",
            [
                (ENCRYPTION_KEY_FILE_OPTION, key_file),
                (ACCEPT_PLAINTEXT_OPTION, "true"),
            ],
        )
        .unwrap();
        assert!(migrating.seal.is_encrypted() && migrating.seal.reads_plaintext());
        for bad in [
            (COMPRESSION_OPTION, "lz4"),
            (ACCEPT_PLAINTEXT_OPTION, "maybe"),
            (ENCRYPTION_KEY_FILE_OPTION, "/nonexistent/memo.key"),
        ] {
            let err = crate::store::store_from_url("memory://", [bad]).unwrap_err();
            assert!(matches!(err, Error::InvalidStoreUrl { .. }), "{err:?}");
        }
    }

    #[test]
    fn a_store_url_turns_on_data_keys_with_a_key_store_apart_from_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let kek = dir.path().join("kek");
        std::fs::write(&kek, format!("1 {HEX}\n")).unwrap();
        let kek = kek.to_str().unwrap();
        let keys = format!("file://{}/keys", dir.path().display());
        let data = format!("file://{}/data", dir.path().display());
        let opened = crate::store::store_from_url(
            &data,
            [
                (DATA_KEY_STORE_OPTION, keys.as_str()),
                (KEY_ENCRYPTION_KEY_FILE_OPTION, kek),
            ],
        )
        .unwrap();
        assert!(opened.seal.data_keys().is_some() && !opened.seal.reads_plaintext());
        let refused = |url: &str, options: &[(&str, &str)]| match crate::store::store_from_url(
            url,
            options.iter().copied(),
        ) {
            Err(Error::InvalidStoreUrl { reason, .. }) => reason,
            other => panic!("{url}: expected InvalidStoreUrl, got {other:?}"),
        };
        // A key-encryption key of staged keys only: data keys that read
        // and are never made (the first step of turning them on), and
        // nothing to rewrap with.
        let staged = dir.path().join("kek-staged");
        std::fs::write(&staged, format!("1 {HEX} staged\n")).unwrap();
        let opened = crate::store::store_from_url(
            &data,
            [
                (DATA_KEY_STORE_OPTION, keys.as_str()),
                (KEY_ENCRYPTION_KEY_FILE_OPTION, staged.to_str().unwrap()),
            ],
        )
        .unwrap();
        let seal = &opened.seal;
        assert!(seal.data_keys().is_some() && !seal.is_encrypted() && seal.reads_plaintext());
        let rewrap = futures::executor::block_on(seal.data_keys().unwrap().rewrap());
        assert!(
            matches!(&rewrap, Err(Error::InvalidConfig { reason, .. }) if reason.contains("staged")),
            "{rewrap:?}"
        );
        // Keys inside the data's folder, or the data inside the keys'.
        for (data, keys) in [
            (format!("file://{}", dir.path().display()), keys.clone()),
            (data.clone(), format!("file://{}", dir.path().display())),
        ] {
            let reason = refused(
                &data,
                &[
                    (DATA_KEY_STORE_OPTION, keys.as_str()),
                    (KEY_ENCRYPTION_KEY_FILE_OPTION, kek),
                ],
            );
            assert!(
                reason.contains("in the data's bucket or folder"),
                "{reason}"
            );
        }
        assert!(options::shares_storage(
            "s3://bucket/data",
            "s3://bucket/keys"
        ));
        assert!(!options::shares_storage(
            "s3://bucket/data",
            "s3://bucket-keys/keys"
        ));
        let alone = refused(&data, &[(DATA_KEY_STORE_OPTION, keys.as_str())]);
        assert!(alone.contains("go together"), "{alone}");
    }

    #[test]
    fn debug_never_prints_a_key() {
        let ring = Keyring::new(1, [0xab; 32]).unwrap();
        let shown = format!("{:?}", Seal::default().with_encryption(ring));
        assert!(
            !shown.contains("171") && !shown.to_lowercase().contains("abab"),
            "{shown}"
        );
    }
}
