//! Data keys and the key-encryption key that wraps them.
//!
//! A [`DataKey`] encrypts the payloads of one run incarnation (or of one
//! shared namespace); it is drawn at random when its first payload is
//! written and stored only wrapped, by a [`KeyEncryptionKey`] that the user
//! provides. A [`Keyring`] is one (a local key file); a cloud KMS is another,
//! written by the user against this trait (see its example).

use std::fmt;

use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{Tag, XNonce};
use futures::future::BoxFuture;

use super::{Keyring, invalid_key};
use crate::error::{Error, Result};

/// The 256-bit key that encrypts one run incarnation's payloads.
///
/// Memo draws one at random for each run incarnation (and each shared
/// namespace) the first time it writes there, and keeps it only wrapped by
/// a [`KeyEncryptionKey`]. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct DataKey([u8; 32]);

impl DataKey {
    /// A fresh key from the operating system's random source.
    pub fn random() -> DataKey {
        let mut key = [0u8; 32];
        super::fill_random(&mut key);
        DataKey(key)
    }

    /// The key of these bytes: what an unwrap returns.
    pub fn from_bytes(bytes: [u8; 32]) -> DataKey {
        DataKey(bytes)
    }

    /// The key's bytes: what a wrap encrypts.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DataKey(..)")
    }
}

/// A [`DataKey`] encrypted by a [`KeyEncryptionKey`], with the version of
/// that key which wrapped it: what the key store holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey {
    kek_version: u32,
    bytes: Vec<u8>,
}

impl WrappedKey {
    /// The most bytes a wrapped key may take (a KMS's ciphertext blob
    /// included).
    pub const MAX_LEN: usize = 4096;

    /// A data key wrapped by version `kek_version` of a key-encryption key
    /// into `bytes` (at most [`MAX_LEN`](Self::MAX_LEN)).
    pub fn new(kek_version: u32, bytes: Vec<u8>) -> WrappedKey {
        WrappedKey { kek_version, bytes }
    }

    /// The version of the key-encryption key that wrapped it.
    pub fn kek_version(&self) -> u32 {
        self.kek_version
    }

    /// The wrapped bytes, as the key-encryption key made them.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The key that wraps and unwraps data keys: a local [`Keyring`], or a cloud
/// KMS the user connects.
///
/// `context` names the data key (its run incarnation or shared namespace,
/// as the key store names it); a wrap must bind the wrapped key to it
/// (as associated data, or a KMS's encryption context), so a wrapped key
/// copied to another run's name fails to unwrap.
///
/// Versions let the key be rotated without rewriting data: each
/// [`WrappedKey`] records the version that wrapped it, an unwrap uses that
/// version, and [`DataKeys::rewrap`](super::DataKeys::rewrap) rewraps every
/// data key with the current version, after which older versions can be
/// destroyed once no process wraps with them. In a fleet, make a new
/// version unwrappable in every process before any process's
/// `current_version` names it (the rotation of [`Keyring`]'s docs).
///
/// # Example: a cloud KMS
///
/// ```
/// use memo_runtime::seal::{DataKey, KeyEncryptionKey, WrappedKey};
/// use memo_runtime::{Error, Result};
/// use futures::future::BoxFuture;
///
/// /// Stands for a KMS client (the AWS SDK's `aws_sdk_kms::Client`, GCP's or
/// /// Azure Key Vault's): `encrypt` and `decrypt` under a key id, with an
/// /// encryption context.
/// struct KmsClient;
/// impl KmsClient {
///     async fn encrypt(&self, _key_id: &str, plaintext: &[u8], _context: &[u8]) -> std::io::Result<Vec<u8>> {
///         Ok(plaintext.iter().map(|b| b ^ 0x5a).collect()) // the KMS's ciphertext blob
///     }
///     async fn decrypt(&self, _key_id: &str, blob: &[u8], _context: &[u8]) -> std::io::Result<Vec<u8>> {
///         Ok(blob.iter().map(|b| b ^ 0x5a).collect())
///     }
/// }
///
/// /// The KMS keys memo wraps with: version `n` is `key_ids[n - 1]`, the
/// /// last one current.
/// #[derive(Debug)]
/// struct Kms {
///     key_ids: Vec<String>,
/// }
///
/// # #[allow(dead_code)]
/// fn kms_error(e: impl std::fmt::Display) -> Error {
///     Error::InvalidConfig { what: "KMS".into(), reason: e.to_string() }
/// }
///
/// impl KeyEncryptionKey for Kms {
///     fn current_version(&self) -> u32 {
///         self.key_ids.len() as u32
///     }
///
///     fn wrap<'a>(&'a self, key: &'a DataKey, context: &'a [u8]) -> BoxFuture<'a, Result<WrappedKey>> {
///         Box::pin(async move {
///             let version = self.current_version();
///             let blob = KmsClient
///                 .encrypt(&self.key_ids[version as usize - 1], key.as_bytes(), context)
///                 .await
///                 .map_err(kms_error)?;
///             Ok(WrappedKey::new(version, blob))
///         })
///     }
///
///     fn unwrap<'a>(&'a self, wrapped: &'a WrappedKey, context: &'a [u8]) -> BoxFuture<'a, Result<DataKey>> {
///         Box::pin(async move {
///             let id = (wrapped.kek_version() as usize)
///                 .checked_sub(1)
///                 .and_then(|i| self.key_ids.get(i))
///                 .ok_or_else(|| kms_error("no such key version"))?;
///             let plain = KmsClient.decrypt(id, wrapped.bytes(), context).await.map_err(kms_error)?;
///             let bytes: [u8; 32] = plain.try_into().map_err(|_| kms_error("not a 32-byte key"))?;
///             Ok(DataKey::from_bytes(bytes))
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<()> {
/// let kms = Kms { key_ids: vec!["alias/memo-1".into()] };
/// let key = DataKey::random();
/// let wrapped = kms.wrap(&key, b"runs/order-1/0000000000000001").await?;
/// assert_eq!(kms.unwrap(&wrapped, b"runs/order-1/0000000000000001").await?, key);
/// # Ok(())
/// # }
/// ```
pub trait KeyEncryptionKey: fmt::Debug + Send + Sync + 'static {
    /// The version new wraps use (1 or more); 0 if the key has none yet
    /// (every version only *staged*, as a [`Keyring`] of staged keys): its
    /// data keys are then read and never made, and a store writes as it
    /// would without them.
    fn current_version(&self) -> u32;

    /// `key` wrapped by the current version, bound to `context`.
    ///
    /// # Errors
    ///
    /// Whatever the key's backend reports (a KMS that cannot be reached):
    /// the write that needed the key fails with it, and nothing is written.
    fn wrap<'a>(&'a self, key: &'a DataKey, context: &'a [u8])
    -> BoxFuture<'a, Result<WrappedKey>>;

    /// The data key `wrapped` holds, if it was wrapped for `context` by a
    /// version this key has.
    ///
    /// # Errors
    ///
    /// An error (memo reports it as [`Error::Corrupt`] of the object it was
    /// reading) if the version is gone, the wrapped bytes do not
    /// authenticate for `context`, or the backend fails.
    fn unwrap<'a>(
        &'a self,
        wrapped: &'a WrappedKey,
        context: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey>>;
}

const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;

/// A local key file as the key-encryption key: each data key is sealed with
/// XChaCha20-Poly1305 under the ring's current key, with `context` as
/// associated data; the wrapped key is the 24-byte nonce, the 32-byte
/// ciphertext and the 16-byte tag.
impl KeyEncryptionKey for Keyring {
    fn current_version(&self) -> u32 {
        Keyring::current_version(self)
    }

    fn wrap<'a>(
        &'a self,
        key: &'a DataKey,
        context: &'a [u8],
    ) -> BoxFuture<'a, Result<WrappedKey>> {
        let Some((version, cipher)) = self.current() else {
            return Box::pin(std::future::ready(Err(invalid_key(
                "every key of the key-encryption key is staged: it has none to wrap a data key \
                 with (promote one by removing `staged` from its line)",
            ))));
        };
        let mut nonce = XNonce::default();
        super::fill_random(&mut nonce);
        let mut bytes = Vec::with_capacity(NONCE_LEN + 32 + TAG_LEN);
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(key.as_bytes());
        let tag = cipher
            .encrypt_in_place_detached(&nonce, context, &mut bytes[NONCE_LEN..])
            .expect("32 bytes are never too long to encrypt");
        bytes.extend_from_slice(&tag);
        Box::pin(std::future::ready(Ok(WrappedKey::new(version, bytes))))
    }

    fn unwrap<'a>(
        &'a self,
        wrapped: &'a WrappedKey,
        context: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey>> {
        Box::pin(std::future::ready(self.unwrap_now(wrapped, context)))
    }
}

impl Keyring {
    fn unwrap_now(&self, wrapped: &WrappedKey, context: &[u8]) -> Result<DataKey> {
        let version = wrapped.kek_version();
        let cipher = self.get(version).ok_or_else(|| {
            invalid_key(format!(
                "the data key is wrapped by {}",
                self.lacks(version)
            ))
        })?;
        let bytes = wrapped.bytes();
        if bytes.len() != NONCE_LEN + 32 + TAG_LEN {
            return Err(invalid_key(format!(
                "a wrapped data key of {} bytes, not {}",
                bytes.len(),
                NONCE_LEN + 32 + TAG_LEN
            )));
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&bytes[NONCE_LEN..NONCE_LEN + 32]);
        cipher
            .decrypt_in_place_detached(
                XNonce::from_slice(&bytes[..NONCE_LEN]),
                context,
                &mut key,
                Tag::from_slice(&bytes[NONCE_LEN + 32..]),
            )
            .map_err(|_| {
                invalid_key(format!(
                    "the wrapped data key does not unwrap for this name with key version \
                     {version}: it was moved from another run, wrapped by another key, or altered"
                ))
            })?;
        Ok(DataKey::from_bytes(key))
    }
}

/// The error an unwrap reports, as a read of `path` reports it.
pub(crate) fn unreadable_key(path: &str, name: &str, error: Error) -> Error {
    Error::corrupt(
        path,
        format!("the data key of {name} does not unwrap: {error}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_keyring_unwraps_what_it_wrapped_for_that_name_only() {
        let ring = Keyring::new(1, [3; 32]).unwrap();
        let key = DataKey::random();
        let wrapped = ring.wrap(&key, b"runs/a/01").await.unwrap();
        assert_eq!(wrapped.kek_version(), 1);
        assert_eq!(wrapped.bytes().len(), 72);
        assert!(!wrapped.bytes().windows(32).any(|w| w == key.as_bytes()));
        assert_eq!(ring.unwrap(&wrapped, b"runs/a/01").await.unwrap(), key);
        let err = ring.unwrap(&wrapped, b"runs/b/01").await.unwrap_err();
        assert!(err.to_string().contains("does not unwrap"), "{err}");
        let other = Keyring::new(2, [3; 32]).unwrap();
        let err = other.unwrap(&wrapped, b"runs/a/01").await.unwrap_err();
        assert!(err.to_string().contains("key version 1"), "{err}");
    }

    #[test]
    fn debug_never_shows_a_data_key() {
        assert_eq!(
            format!("{:?}", DataKey::from_bytes([0xab; 32])),
            "DataKey(..)"
        );
    }
}
