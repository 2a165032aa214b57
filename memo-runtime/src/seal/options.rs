//! The store-URL options that ask for a seal: compression, a key file,
//! plaintext accepted, and per-run data keys with their key store.

use super::{Compression, DataKeys, Keyring, Seal};
use crate::error::{Error, Result};

/// The store-URL option naming a key file (see [`Keyring::from_file`]):
/// the store's values are then encrypted with it.
pub const ENCRYPTION_KEY_FILE_OPTION: &str = "encryption_key_file";
/// The store-URL option `"zstd"` (the default) or `"off"`: compression of
/// stored payloads.
pub const COMPRESSION_OPTION: &str = "compression";
/// The store-URL option `"true"` reads plaintext objects in an encrypted
/// store (see [`Seal::accepting_plaintext`]; default `"false"`).
pub const ACCEPT_PLAINTEXT_OPTION: &str = "accept_plaintext";
/// The store-URL option naming the key store of per-run data keys (see
/// [`DataKeys`]): a `file://` folder or a bucket URL (credentials from the
/// environment), which must not be the data's bucket or hold the data's
/// folder. With [`KEY_ENCRYPTION_KEY_FILE_OPTION`], each run is encrypted
/// with a data key of its own.
pub const DATA_KEY_STORE_OPTION: &str = "data_key_store";
/// The store-URL option naming the key file (see [`Keyring::from_file`])
/// whose keys wrap the data keys of [`DATA_KEY_STORE_OPTION`].
pub const KEY_ENCRYPTION_KEY_FILE_OPTION: &str = "key_encryption_key_file";

/// The seal that `options` (a store URL's) ask for, and the options left
/// for the store; `url` names the store in errors.
pub(crate) fn seal_from_options<I, K, V>(
    url: &str,
    options: I,
) -> Result<(Seal, Vec<(String, String)>)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: Into<String>,
{
    let invalid = |reason: String| Error::InvalidStoreUrl {
        url: url.to_owned(),
        reason,
    };
    let mut seal = Seal::default();
    let mut accept_plaintext = false;
    let (mut key_store, mut kek_file) = (None, None);
    let mut rest = Vec::new();
    for (key, value) in options {
        let key = key.as_ref().to_ascii_lowercase();
        let value: String = value.into();
        match key.as_str() {
            ENCRYPTION_KEY_FILE_OPTION => {
                let keys = Keyring::from_file(value.trim()).map_err(|e| invalid(e.to_string()))?;
                seal = seal.with_encryption(keys);
            }
            COMPRESSION_OPTION => {
                let compression = match value.trim() {
                    "zstd" => Compression::default(),
                    "off" => Compression::Off,
                    _ => {
                        return Err(invalid(format!(
                            "option {key}={value:?} is not \"zstd\" or \"off\""
                        )));
                    }
                };
                seal = seal.with_compression(compression);
            }
            DATA_KEY_STORE_OPTION => key_store = Some(value.trim().to_owned()),
            KEY_ENCRYPTION_KEY_FILE_OPTION => kek_file = Some(value.trim().to_owned()),
            ACCEPT_PLAINTEXT_OPTION => {
                accept_plaintext = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(format!("option {key}={value:?} is not true or false")))?;
            }
            _ => rest.push((key, value)),
        }
    }
    match (key_store, kek_file) {
        (None, None) => {}
        (Some(key_store), Some(kek_file)) => {
            let kek = Keyring::from_file(&kek_file).map_err(|e| invalid(e.to_string()))?;
            seal = seal.with_data_keys(data_keys_at(url, &key_store, kek).map_err(invalid)?);
        }
        _ => {
            return Err(invalid(format!(
                "options {DATA_KEY_STORE_OPTION} and {KEY_ENCRYPTION_KEY_FILE_OPTION} go \
                 together: per-run data keys need a key store and the key that wraps them"
            )));
        }
    }
    if accept_plaintext {
        seal = seal.accepting_plaintext();
    }
    Ok((seal, rest))
}

/// The data keys in the key store at `key_store` (a URL with no options),
/// wrapped by `kek`, for the data at `data_url`; an error if the key store
/// is the data's bucket or folder (a copy of the data would hold the keys).
fn data_keys_at(
    data_url: &str,
    key_store: &str,
    kek: Keyring,
) -> std::result::Result<DataKeys, String> {
    let shown = crate::store::redact_store_url(key_store);
    if shares_storage(data_url, key_store) {
        return Err(format!(
            "the key store {shown:?} is in the data's bucket or folder: a copy of the data \
             would then hold the keys, and forgetting a run would not reach it; put the keys \
             in another bucket or a folder outside the data's"
        ));
    }
    let opened = crate::store::store_from_url(key_store, [("", ""); 0])
        .map_err(|e| format!("option {DATA_KEY_STORE_OPTION}: {e}"))?;
    Ok(DataKeys::new(kek, opened.store, opened.prefix.as_ref()))
}

/// Whether the stores at two URLs share a bucket (same scheme and host) or
/// one folder holds the other.
pub(super) fn shares_storage(a: &str, b: &str) -> bool {
    let (Ok(a), Ok(b)) = (url::Url::parse(a), url::Url::parse(b)) else {
        return false;
    };
    if a.scheme() != b.scheme() {
        return false;
    }
    if a.scheme() == "memory" {
        // Each `memory://` URL opens a store of its own.
        return false;
    }
    if a.scheme() != "file" {
        return a.host_str() == b.host_str();
    }
    let folder = |u: &url::Url| format!("{}/", u.path().trim_end_matches('/'));
    let (a, b) = (folder(&a), folder(&b));
    a.starts_with(&b) || b.starts_with(&a)
}
