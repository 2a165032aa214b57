//! Stores selected by URL (`file://`, `memory://`, `s3://`, `gs://`, `az://`)
//! and the start-up probe that checks a store can keep memo's write-once
//! promise.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode, PutOptions, PutPayload, PutResult,
};
use tokio::sync::OnceCell;
use url::Url;

use crate::error::{Error, Result};
use crate::forward::forward_object_store;
use crate::layout;
use crate::run_id::unique_token;
use crate::seal::{Seal, seal_from_options};

/// A (store, prefix) pair: the store [`store_from_url`] built, and the path
/// within it that the URL points at.
///
/// Its `Debug` names the store by its `Display` (backend, bucket or account
/// and container), never by the store's own `Debug`, which for some
/// backends prints their credentials.
#[derive(Clone)]
pub struct StoreAndPrefix {
    /// The store, shared by everything that uses it.
    pub store: Arc<dyn ObjectStore>,
    /// The path within `store` that the URL names (empty for a bucket root or
    /// a `file://` folder); pass it as the prefix of a `MemoStore`.
    pub prefix: Path,
    /// How payloads are sealed, from the URL's seal options
    /// ([`ENCRYPTION_KEY_FILE_OPTION`](crate::seal::ENCRYPTION_KEY_FILE_OPTION),
    /// [`COMPRESSION_OPTION`](crate::seal::COMPRESSION_OPTION),
    /// [`ACCEPT_PLAINTEXT_OPTION`](crate::seal::ACCEPT_PLAINTEXT_OPTION));
    /// pass it to [`MemoStore::with_seal`](crate::MemoStore::with_seal) and
    /// [`ObjectStoreRuntimeStore::with_seal`](crate::runtime_store::ObjectStoreRuntimeStore::with_seal).
    pub seal: Seal,
}

impl std::fmt::Debug for StoreAndPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreAndPrefix")
            .field("store", &format_args!("{}", self.store))
            .field("prefix", &self.prefix.as_ref())
            .field("seal", &self.seal)
            .finish()
    }
}

/// Memo's own option key: how many times a failed cloud request is retried.
pub const MAX_RETRIES_OPTION: &str = "max_retries";
/// Memo's own option key: how long a cloud request is retried in total, in
/// [`humantime`] syntax (`"10s"`, `"2m"`).
pub const RETRY_TIMEOUT_OPTION: &str = "retry_timeout";
/// Memo's own option key: `"false"` turns off the check that a cloud store
/// refuses to create an object that exists (default `"true"`; see
/// [`store_from_url`]).
pub const CHECK_CONDITIONAL_CREATE_OPTION: &str = "check_conditional_create";
/// Memo's own option key for a `file://` folder: `"false"` makes writes and
/// deletes skip `fsync` (default `"true"`: an acknowledged write survives a
/// power loss; see [`LocalFolder`](crate::store::LocalFolder#durability)).
pub const FSYNC_OPTION: &str = "fsync";

/// Builds the object store a URL names, and the path prefix within it.
///
/// The URL is read by `object_store`'s own parser
/// ([`ObjectStoreScheme::parse`]) and the cloud stores by its own builders, so
/// every form those accept works here:
///
/// | URL | store | cargo feature |
/// |---|---|---|
/// | `file:///var/lib/memo` | a [`LocalFolder`](crate::store::LocalFolder) (a [`LocalFileSystem`](object_store::local::LocalFileSystem) that never acts through a symlink) rooted at the folder, which is created if missing | always |
/// | `memory://` | a fresh [`InMemory`] | always |
/// | `s3://bucket/prefix` (also `s3a://`, `https://…amazonaws.com/…`) | `AmazonS3` | `aws` |
/// | `gs://bucket/prefix` | `GoogleCloudStorage` | `gcp` |
/// | `az://container/prefix` (also `abfs[s]://`, `adl://`, `azure://`) | `MicrosoftAzure` | `azure` |
///
/// Cloud stores read the standard environment variables first (`AWS_*`,
/// `GOOGLE_*`, `AZURE_*`: credentials, region, endpoint), then `options`,
/// whose keys are the builders' config keys with or without their prefix
/// (`"endpoint"` or `"aws_endpoint"`, `"region"`, `"access_key_id"`, …), plus
/// memo's own [`MAX_RETRIES_OPTION`] and [`RETRY_TIMEOUT_OPTION`]. `file://`
/// takes one option, [`FSYNC_OPTION`]: by default a local folder `fsync`s
/// each write and delete, so an acknowledged commit survives a power loss;
/// `"false"` skips that (faster; a power loss may then lose the last
/// writes). `memory://` takes no options. Every URL takes the seal options
/// (see [`seal`](crate::seal)): [`ENCRYPTION_KEY_FILE_OPTION`](crate::seal::ENCRYPTION_KEY_FILE_OPTION)
/// turns encryption on with a key file, [`COMPRESSION_OPTION`](crate::seal::COMPRESSION_OPTION)
/// (`"zstd"`, the default, or `"off"`) and [`ACCEPT_PLAINTEXT_OPTION`](crate::seal::ACCEPT_PLAINTEXT_OPTION);
/// they set the returned [`StoreAndPrefix::seal`].
///
/// For S3, conditional puts are always set to `S3ConditionalPut::ETagMatch`
/// (`If-None-Match: *` on create), which memo's write-once entries need, and
/// an `http://` endpoint (a local S3 server) is allowed. Whether a cloud
/// store really honours conditional creates is checked by default: before
/// its first conditional create, the store runs [`probe_conditional_create`]
/// once under the URL's prefix, and if the backend fails it, every
/// conditional create is refused (memo reports
/// [`Error::ConditionalPutUnsupported`]) rather than silently overwriting.
/// Set [`CHECK_CONDITIONAL_CREATE_OPTION`] to `"false"` to skip the check
/// for a backend known to keep conditional creates. Local folders and
/// memory keep them natively and are not checked.
///
/// # Errors
///
/// [`Error::InvalidStoreUrl`] for a URL that does not parse, names no
/// supported store (plain `http(s)://` is not a bucket), has an unknown option
/// key or a bad option value, or a `file://` folder that cannot be created;
/// [`Error::InvalidStoreUrl`] too for a [`CHECK_CONDITIONAL_CREATE_OPTION`]
/// or [`FSYNC_OPTION`] that is not `"true"` or `"false"`, or an
/// [`FSYNC_OPTION`] on a URL that is not `file://`;
/// [`Error::StoreFeatureDisabled`] for a cloud URL whose cargo feature is
/// off; [`Error::Store`] if the store's builder rejects its configuration
/// (such as a missing bucket).
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memo_runtime::object_store::ObjectStoreExt;
/// use memo_runtime::store::store_from_url;
///
/// let no_options: [(&str, &str); 0] = [];
/// let folder = std::env::temp_dir().join(format!("memo-doc-{}", std::process::id()));
/// let opened = store_from_url(&format!("file://{}", folder.display()), no_options)?;
/// assert!(folder.is_dir());
/// assert_eq!(opened.prefix.as_ref(), "");
///
/// let opened = store_from_url("memory:///memo/prod", no_options)?;
/// assert_eq!(opened.prefix.as_ref(), "memo/prod");
/// opened.store.put(&"memo/prod/x".into(), "1".into()).await?;
///
/// // With the `aws` feature (none of the cloud features is on by default):
/// # #[cfg(feature = "aws")] {
/// let opened = store_from_url(
///     "s3://my-bucket/memo",
///     [("endpoint", "http://127.0.0.1:9000"), ("region", "us-east-1"), ("max_retries", "3")],
/// )?;
/// assert_eq!(opened.prefix.as_ref(), "memo");
/// # }
/// # std::fs::remove_dir_all(&folder).ok();
/// # Ok(())
/// # }
/// ```
pub fn store_from_url<I, K, V>(url: &str, options: I) -> Result<StoreAndPrefix>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: Into<String>,
{
    // Every error names the URL as it may be printed; the builders get it whole.
    let shown = redact_store_url(url);
    let parsed = Url::parse(url).map_err(|e| invalid(&shown, e))?;
    refuse_secrets(&shown, &parsed)?;
    let (scheme, prefix) = ObjectStoreScheme::parse(&parsed).map_err(|e| invalid(&shown, e))?;
    let (seal, options) = seal_from_options(&shown, options)?;
    let options = StoreOptions::collect(&shown, options)?;
    let (store, prefix) = store_for_scheme(url, &shown, &parsed, scheme, prefix, options)?;
    Ok(StoreAndPrefix {
        store,
        prefix,
        seal,
    })
}

/// The store of a parsed URL; `shown` is the URL for errors.
fn store_for_scheme(
    url: &str,
    shown: &str,
    parsed: &Url,
    scheme: ObjectStoreScheme,
    prefix: Path,
    options: StoreOptions,
) -> Result<(Arc<dyn ObjectStore>, Path)> {
    if options.fsync.is_some() && scheme != ObjectStoreScheme::Local {
        return Err(invalid(
            shown,
            format!(
                "option {FSYNC_OPTION:?} applies to file:// folders only \
                 (a bucket's durability is its own)"
            ),
        ));
    }
    let (store, prefix) = match scheme {
        ObjectStoreScheme::Local => {
            options.expect_none(shown)?;
            let fsync = options.fsync.unwrap_or(true);
            // The whole URL path is the folder, so nothing is left as prefix.
            (local_folder(shown, parsed, fsync)?, Path::default())
        }
        ObjectStoreScheme::Memory => {
            options.expect_none(shown)?;
            (Arc::new(InMemory::new()) as Arc<dyn ObjectStore>, prefix)
        }
        ObjectStoreScheme::AmazonS3 => (
            options.checked(cloud::s3(url, shown, options.clone())?, &prefix),
            prefix,
        ),
        ObjectStoreScheme::GoogleCloudStorage => (
            options.checked(cloud::gcs(url, shown, options.clone())?, &prefix),
            prefix,
        ),
        ObjectStoreScheme::MicrosoftAzure => (
            options.checked(cloud::azure(url, shown, options.clone())?, &prefix),
            prefix,
        ),
        ObjectStoreScheme::Http => {
            return Err(invalid(
                shown,
                "plain http(s) URLs name no bucket; use s3://, gs:// or az:// \
                 (set the S3 endpoint with the \"endpoint\" option)",
            ));
        }
        other => return Err(invalid(shown, format!("unsupported store {other:?}"))),
    };
    Ok((store, prefix))
}

/// A store URL as it may be printed: any user info (`KEY:SECRET@`) and any
/// query string or fragment (`?sig=...`) replaced by `***`, whether or not
/// the URL parses.
///
/// [`store_from_url`] names URLs this way in every error, and refuses a URL
/// that holds a password or a query string (credentials go in its options
/// or the environment); print a URL you were given this way too.
///
/// # Example
///
/// ```
/// use memo_runtime::store::redact_store_url;
///
/// assert_eq!(redact_store_url("s3://KEY:SECRET@bucket/memo"), "s3://***@bucket/memo");
/// assert_eq!(
///     redact_store_url("az://container/memo?sv=2024&sig=SECRET"),
///     "az://container/memo?***"
/// );
/// assert_eq!(redact_store_url("file:///var/lib/memo"), "file:///var/lib/memo");
/// ```
pub fn redact_store_url(url: &str) -> String {
    let (head, tail) = url.split_at(url.find(['?', '#']).unwrap_or(url.len()));
    let (scheme, rest) = match head.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, head),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_string(),
    };
    let mut shown = match scheme {
        Some(scheme) => format!("{scheme}://{authority}{path}"),
        None => format!("{authority}{path}"),
    };
    if let Some(mark) = tail.chars().next() {
        shown.push(mark);
        shown.push_str("***");
    }
    shown
}

/// Refuses a URL that carries a password or a query string: `object_store`
/// reads credentials only from options and the environment (it ignores
/// both), and a URL is printed in errors and logs.
fn refuse_secrets(shown: &str, parsed: &Url) -> Result<()> {
    if parsed.password().is_some() {
        return Err(invalid(
            shown,
            "a store URL cannot hold a password (it would be printed in errors and logs): \
             pass credentials as options (\"access_key_id\", \"secret_access_key\", \
             ...) or in the environment (AWS_*, GOOGLE_*, AZURE_*)",
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid(
            shown,
            "a store URL cannot have a query string or fragment (it would be printed in \
             errors and logs): pass a SAS token or other credentials as options \
             (\"sas_token\", ...) or in the environment (AZURE_STORAGE_SAS_TOKEN, ...)",
        ));
    }
    Ok(())
}

/// A [`LocalFolder`](crate::store::LocalFolder) rooted at the folder of a `file://`
/// URL, created if missing: a folder shared with other writers must never
/// steer memo outside it through a symlink. It `fsync`s unless `fsync` is
/// false (elsewhere than on Unix, `LocalFileSystem`, which never does).
fn local_folder(url: &str, parsed: &Url, fsync: bool) -> Result<Arc<dyn ObjectStore>> {
    let folder = parsed
        .to_file_path()
        .map_err(|()| invalid(url, "not a local folder path"))?;
    let cannot_create = |e: &dyn std::fmt::Display| {
        invalid(
            url,
            format!("cannot create folder {}: {e}", folder.display()),
        )
    };
    #[cfg(unix)]
    let store = {
        crate::local::create_root(&folder, fsync).map_err(|e| cannot_create(&e))?;
        crate::local::LocalFolder::new(&folder)
            .map_err(|e| store_err(url, e))?
            .with_fsync(fsync)
    };
    #[cfg(not(unix))]
    let store = {
        let _ = fsync;
        std::fs::create_dir_all(&folder).map_err(|e| cannot_create(&e))?;
        object_store::local::LocalFileSystem::new_with_prefix(&folder)
            .map_err(|e| store_err(url, e))?
    };
    Ok(Arc::new(store))
}

/// The options given to [`store_from_url`], with memo's own keys taken out.
#[derive(Debug, Default, Clone)]
struct StoreOptions {
    /// The builder config keys and values, in the order given.
    builder: Vec<(String, String)>,
    /// `None` keeps the builder's default.
    max_retries: Option<usize>,
    /// `None` keeps the builder's default.
    retry_timeout: Option<Duration>,
    /// `Some(false)` turns the conditional-create check off.
    check_conditional_create: Option<bool>,
    /// `Some(false)` makes a `file://` folder skip `fsync`.
    fsync: Option<bool>,
}

impl StoreOptions {
    fn collect<I, K, V>(url: &str, options: I) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        let mut collected = StoreOptions::default();
        for (key, value) in options {
            let key = key.as_ref().to_ascii_lowercase();
            let value: String = value.into();
            match key.as_str() {
                MAX_RETRIES_OPTION => {
                    let max = value.trim().parse().map_err(|e| {
                        invalid(url, format!("option {key}={value:?} is not a count: {e}"))
                    })?;
                    collected.max_retries = Some(max);
                }
                RETRY_TIMEOUT_OPTION => {
                    let timeout = humantime::parse_duration(value.trim()).map_err(|e| {
                        invalid(
                            url,
                            format!("option {key}={value:?} is not a duration: {e}"),
                        )
                    })?;
                    collected.retry_timeout = Some(timeout);
                }
                CHECK_CONDITIONAL_CREATE_OPTION => {
                    let check = value.trim().parse().map_err(|_| {
                        invalid(url, format!("option {key}={value:?} is not true or false"))
                    })?;
                    collected.check_conditional_create = Some(check);
                }
                FSYNC_OPTION => {
                    let fsync = value.trim().parse().map_err(|_| {
                        invalid(url, format!("option {key}={value:?} is not true or false"))
                    })?;
                    collected.fsync = Some(fsync);
                }
                _ => collected.builder.push((key, value)),
            }
        }
        Ok(collected)
    }

    /// Local and in-memory stores have nothing to configure: an option there
    /// is a mistake the caller should hear about.
    fn expect_none(&self, url: &str) -> Result<()> {
        let retry_set = self.max_retries.is_some()
            || self.retry_timeout.is_some()
            || self.check_conditional_create.is_some();
        match self.builder.first() {
            Some((key, _)) => Err(invalid(
                url,
                format!("option {key:?} applies to no store here: this URL takes no options"),
            )),
            None if retry_set => Err(invalid(
                url,
                "retry and conditional-create options apply to cloud stores only; \
                 this URL takes no options",
            )),
            None => Ok(()),
        }
    }

    /// `store`, checked for conditional creates unless the options say not to.
    fn checked(&self, store: Arc<dyn ObjectStore>, prefix: &Path) -> Arc<dyn ObjectStore> {
        if self.check_conditional_create == Some(false) {
            return store;
        }
        Arc::new(CheckedCreates {
            inner: store,
            prefix: prefix.clone(),
            supported: OnceCell::new(),
        })
    }

    /// The retry policy the options ask for, if they touch it.
    #[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
    fn retry(&self) -> Option<object_store::RetryConfig> {
        if self.max_retries.is_none() && self.retry_timeout.is_none() {
            return None;
        }
        let mut retry = object_store::RetryConfig::default();
        retry.max_retries = self.max_retries.unwrap_or(retry.max_retries);
        retry.retry_timeout = self.retry_timeout.unwrap_or(retry.retry_timeout);
        Some(retry)
    }

    /// Applies the builder options through `with_config`, parsing each key
    /// as the backend's config key type so a misspelt key is an error rather
    /// than silently ignored.
    #[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
    fn apply<B, K>(
        &self,
        url: &str,
        builder: B,
        with_config: impl Fn(B, K, String) -> B,
    ) -> Result<B>
    where
        K: std::str::FromStr,
    {
        self.builder
            .iter()
            .try_fold(builder, |builder, (key, value)| {
                let key: K = key
                    .parse()
                    .map_err(|_| invalid(url, format!("unknown option {key:?} for this store")))?;
                Ok(with_config(builder, key, value.clone()))
            })
    }
}

/// The cloud backends, each compiled only with its cargo feature.
mod cloud {
    use super::*;

    #[cfg(feature = "aws")]
    pub(super) fn s3(
        url: &str,
        shown: &str,
        options: StoreOptions,
    ) -> Result<Arc<dyn ObjectStore>> {
        use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};

        let builder = AmazonS3Builder::from_env().with_url(url);
        let mut builder = options.apply(shown, builder, |b, k, v| b.with_config(k, v))?;
        let plain_http = builder
            .get_config_value(&AmazonS3ConfigKey::Endpoint)
            .is_some_and(|endpoint| endpoint.starts_with("http://"));
        if plain_http {
            builder = builder.with_allow_http(true);
        }
        if let Some(retry) = options.retry() {
            builder = builder.with_retry(retry);
        }
        // Set last so no environment variable or option can switch off the
        // If-None-Match create that write-once entries stand on.
        let store = builder
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .build()
            .map_err(|e| store_err(shown, e))?;
        Ok(Arc::new(store))
    }

    #[cfg(feature = "gcp")]
    pub(super) fn gcs(
        url: &str,
        shown: &str,
        options: StoreOptions,
    ) -> Result<Arc<dyn ObjectStore>> {
        use object_store::gcp::GoogleCloudStorageBuilder;

        let builder = GoogleCloudStorageBuilder::from_env().with_url(url);
        let mut builder = options.apply(shown, builder, |b, k, v| b.with_config(k, v))?;
        if let Some(retry) = options.retry() {
            builder = builder.with_retry(retry);
        }
        Ok(Arc::new(builder.build().map_err(|e| store_err(shown, e))?))
    }

    #[cfg(feature = "azure")]
    pub(super) fn azure(
        url: &str,
        shown: &str,
        options: StoreOptions,
    ) -> Result<Arc<dyn ObjectStore>> {
        use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

        let builder = MicrosoftAzureBuilder::from_env().with_url(url);
        let mut builder = options.apply(shown, builder, |b, k, v| b.with_config(k, v))?;
        let plain_http = builder
            .get_config_value(&AzureConfigKey::Endpoint)
            .is_some_and(|endpoint| endpoint.starts_with("http://"));
        if plain_http {
            builder = builder.with_allow_http(true);
        }
        if let Some(retry) = options.retry() {
            builder = builder.with_retry(retry);
        }
        Ok(Arc::new(builder.build().map_err(|e| store_err(shown, e))?))
    }

    #[cfg(not(feature = "aws"))]
    pub(super) fn s3(_: &str, shown: &str, _: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
        Err(disabled(shown, "aws"))
    }

    #[cfg(not(feature = "gcp"))]
    pub(super) fn gcs(_: &str, shown: &str, _: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
        Err(disabled(shown, "gcp"))
    }

    #[cfg(not(feature = "azure"))]
    pub(super) fn azure(_: &str, shown: &str, _: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
        Err(disabled(shown, "azure"))
    }

    #[cfg_attr(
        all(feature = "aws", feature = "gcp", feature = "azure"),
        allow(dead_code)
    )]
    fn disabled(url: &str, feature: &'static str) -> Error {
        Error::StoreFeatureDisabled {
            url: url.to_owned(),
            feature,
        }
    }
}

/// Checks that `store` refuses to create an object that already exists, the
/// promise every write-once memo entry stands on.
///
/// Creates one probe object under `<prefix>/probes/` twice with
/// `PutMode::Create`: the first must succeed and the second must fail with
/// `AlreadyExists`. The probe object is deleted afterwards, whatever the
/// outcome. Run it once at start-up, before trusting a store from a URL: an
/// S3-compatible server that ignores `If-None-Match` would otherwise let
/// racing writers overwrite each other's committed entries unnoticed.
///
/// # Errors
///
/// [`Error::ConditionalPutUnsupported`] if the store rejects conditional
/// creates or lets the second create overwrite the first; [`Error::Store`] if
/// a request fails for another reason.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use memo_runtime::object_store::memory::InMemory;
/// use memo_runtime::store::probe_conditional_create;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = Arc::new(InMemory::new());
/// probe_conditional_create(store.as_ref(), &"memo".into()).await?;
/// # Ok::<_, memo_runtime::Error>(())
/// # })?;
/// # Ok::<_, memo_runtime::Error>(())
/// ```
pub async fn probe_conditional_create(store: &dyn ObjectStore, prefix: &Path) -> Result<()> {
    let path = layout::probe(prefix, unique_token());
    let outcome = create_twice(store, &path).await;
    let cleanup = match store.delete(&path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(Error::store(&path, e)),
    };
    outcome.and(cleanup)
}

async fn create_twice(store: &dyn ObjectStore, path: &Path) -> Result<()> {
    let create = || {
        store.put_opts(
            path,
            PutPayload::from_static(b"memo conditional-create probe"),
            PutOptions::from(PutMode::Create),
        )
    };
    let unsupported = || Error::ConditionalPutUnsupported {
        path: path.to_string(),
    };
    match create().await {
        Ok(_) => {}
        Err(object_store::Error::NotImplemented { .. }) => return Err(unsupported()),
        Err(e) => return Err(Error::store(path, e)),
    }
    match create().await {
        Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
        Ok(_) | Err(object_store::Error::NotImplemented { .. }) => Err(unsupported()),
        Err(e) => Err(Error::store(path, e)),
    }
}

/// A cloud store from a URL whose first conditional create runs
/// [`probe_conditional_create`]: if the backend lets a create overwrite, this
/// store refuses every conditional create with `NotImplemented`, which memo
/// reports as [`Error::ConditionalPutUnsupported`].
struct CheckedCreates {
    inner: Arc<dyn ObjectStore>,
    prefix: Path,
    /// The probe's verdict, once it has one (a failed request is no verdict:
    /// the next create probes again).
    supported: OnceCell<bool>,
}

impl CheckedCreates {
    async fn check(&self) -> object_store::Result<()> {
        let supported = self
            .supported
            .get_or_try_init(|| async {
                match probe_conditional_create(self.inner.as_ref(), &self.prefix).await {
                    Ok(()) => Ok(true),
                    Err(Error::ConditionalPutUnsupported { .. }) => Ok(false),
                    Err(Error::Store { source, .. }) => Err(source),
                    Err(other) => Err(object_store::Error::Generic {
                        store: "memo conditional-create check",
                        source: Box::new(other),
                    }),
                }
            })
            .await?;
        if *supported {
            Ok(())
        } else {
            Err(object_store::Error::NotImplemented {
                operation: "put_opts with PutMode::Create (the store let a create overwrite \
                            an existing object)"
                    .into(),
                implementer: self.inner.to_string(),
            })
        }
    }
}

/// As its `Display`: the inner store's `Debug` may print credentials.
impl std::fmt::Debug for CheckedCreates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedCreates")
            .field("inner", &format_args!("{}", self.inner))
            .field("prefix", &self.prefix.as_ref())
            .field("supported", &self.supported.get())
            .finish()
    }
}

impl std::fmt::Display for CheckedCreates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CheckedCreates({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for CheckedCreates {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if opts.mode == PutMode::Create {
            self.check().await?;
        }
        self.inner.put_opts(location, payload, opts).await
    }

    forward_object_store!(self.inner => put_multipart_opts, get_opts, get_ranges, delete_stream,
        list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

fn invalid(url: &str, reason: impl std::fmt::Display) -> Error {
    Error::InvalidStoreUrl {
        url: url.to_owned(),
        reason: reason.to_string(),
    }
}

fn store_err(url: &str, source: object_store::Error) -> Error {
    Error::store(url, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::IgnoresConditionalCreates;
    use futures::StreamExt;

    const NO_OPTIONS: [(&str, &str); 0] = [];

    #[test]
    fn file_url_creates_its_folder_and_roots_the_store_there() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("a").join("b");
        let opened = store_from_url(&format!("file://{}", folder.display()), NO_OPTIONS).unwrap();
        assert!(folder.is_dir());
        assert_eq!(opened.prefix, Path::default());
    }

    #[tokio::test]
    async fn file_url_store_writes_inside_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let opened =
            store_from_url(&format!("file://{}", dir.path().display()), NO_OPTIONS).unwrap();
        opened.store.put(&"x/y".into(), "v".into()).await.unwrap();
        assert!(dir.path().join("x").join("y").is_file());
    }

    #[test]
    fn memory_url_keeps_its_path_as_the_prefix() {
        assert_eq!(
            store_from_url("memory://", NO_OPTIONS).unwrap().prefix,
            Path::default()
        );
        let opened = store_from_url("memory:///memo/prod", NO_OPTIONS).unwrap();
        assert_eq!(opened.prefix.as_ref(), "memo/prod");
    }

    #[cfg(feature = "aws")]
    #[test]
    fn s3_url_splits_bucket_from_prefix() {
        let opened = store_from_url(
            "s3://bucket/memo/prod",
            [
                ("endpoint", "http://127.0.0.1:1"),
                ("region", "us-east-1"),
                ("access_key_id", "k"),
                ("secret_access_key", "s"),
            ],
        )
        .unwrap();
        assert_eq!(opened.prefix.as_ref(), "memo/prod");
        assert!(
            opened.store.to_string().contains("bucket"),
            "{}",
            opened.store
        );
    }

    #[cfg(feature = "aws")]
    #[test]
    fn misspelt_option_is_an_error_naming_the_key() {
        let err = store_from_url("s3://bucket", [("endpiont", "http://127.0.0.1:1")]).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidStoreUrl { reason, .. } if reason.contains("endpiont")),
            "{err}"
        );
    }

    #[test]
    fn bad_retry_values_are_errors_naming_the_option() {
        for (key, value) in [(MAX_RETRIES_OPTION, "many"), (RETRY_TIMEOUT_OPTION, "soon")] {
            let err = store_from_url("s3://bucket", [(key, value)]).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidStoreUrl { reason, .. } if reason.contains(key)),
                "{err}"
            );
        }
    }

    #[test]
    fn a_file_url_fsyncs_unless_its_option_says_false() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let fsyncs = |options: &[(&str, &str)]| {
            let opened = store_from_url(&url, options.iter().copied()).unwrap();
            !opened.store.to_string().contains("without fsync")
        };
        assert!(fsyncs(&[]));
        assert!(fsyncs(&[(FSYNC_OPTION, "true")]));
        assert!(!fsyncs(&[(FSYNC_OPTION, "false")]));
        assert!(!fsyncs(&[("FSYNC", " false ")]));
    }

    #[test]
    fn a_bad_fsync_option_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        for (url, value) in [
            (url.as_str(), "no"),
            ("memory://", "false"),
            ("s3://b", "true"),
        ] {
            let err = store_from_url(url, [(FSYNC_OPTION, value)]).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidStoreUrl { reason, .. } if reason.contains("fsync")),
                "{url}: {err}"
            );
        }
    }

    #[test]
    fn options_on_a_local_url_are_refused() {
        let err = store_from_url("memory://", [("region", "us-east-1")]).unwrap_err();
        assert!(matches!(err, Error::InvalidStoreUrl { .. }), "{err}");
    }

    #[test]
    fn http_and_unknown_schemes_are_invalid_store_urls() {
        for url in [
            "https://example.com/memo",
            "ftp://host/x",
            "not a url",
            "file://relative/x",
        ] {
            let err = store_from_url(url, NO_OPTIONS).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidStoreUrl { url: u, .. } if u == url),
                "{url}: {err}"
            );
        }
    }

    #[cfg(not(feature = "aws"))]
    #[test]
    fn s3_url_without_the_aws_feature_names_the_feature() {
        let err = store_from_url("s3://bucket/memo", NO_OPTIONS).unwrap_err();
        assert!(
            matches!(err, Error::StoreFeatureDisabled { feature: "aws", .. }),
            "{err}"
        );
    }

    #[cfg(not(feature = "gcp"))]
    #[test]
    fn gs_url_without_the_gcp_feature_names_the_feature() {
        let err = store_from_url("gs://bucket/memo", NO_OPTIONS).unwrap_err();
        assert!(
            matches!(err, Error::StoreFeatureDisabled { feature: "gcp", .. }),
            "{err}"
        );
        assert!(err.to_string().contains("features = [\"gcp\"]"), "{err}");
    }

    #[cfg(not(feature = "azure"))]
    #[test]
    fn az_url_without_the_azure_feature_names_the_feature() {
        let err = store_from_url("az://container/memo", NO_OPTIONS).unwrap_err();
        assert!(
            matches!(
                err,
                Error::StoreFeatureDisabled {
                    feature: "azure",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn redacted_urls_keep_no_user_info_query_or_fragment() {
        for (url, shown) in [
            ("s3://KEY:SECRET@bucket/memo", "s3://***@bucket/memo"),
            ("s3://KEY@bucket", "s3://***@bucket"),
            ("az://c/memo?sv=1&sig=SECRET", "az://c/memo?***"),
            ("gs://b/p#SECRET", "gs://b/p#***"),
            ("KEY:SECRET@bucket/x?sig=S", "***@bucket/x?***"),
            ("not a url", "not a url"),
            ("file:///var/lib/memo", "file:///var/lib/memo"),
            ("s3://bucket/a@b", "s3://bucket/a@b"),
        ] {
            assert_eq!(redact_store_url(url), shown, "{url}");
        }
    }

    #[test]
    fn urls_with_a_password_or_a_query_are_refused_without_echoing_it() {
        for url in [
            "s3://AKID:SECRET@bucket/memo",
            "gs://user:SECRET@bucket/memo",
            "az://container/memo?sv=2024-01-01&sig=SECRET",
            "memory:///memo?token=SECRET",
            "file:///tmp/memo#SECRET",
            "az://user:SECRET@container/memo?sig=SECRET",
            "nope://user:SECRET@host/x?sig=SECRET",
            "::user:SECRET@ not a url ?sig=SECRET",
        ] {
            let err = store_from_url(url, NO_OPTIONS).unwrap_err();
            for shown in [err.to_string(), format!("{err:?}"), format!("{err:#?}")] {
                assert!(!shown.contains("SECRET"), "{url}: {shown}");
            }
            assert!(matches!(err, Error::InvalidStoreUrl { .. }), "{url}: {err}");
        }
        let err = store_from_url("s3://AKID:SECRET@bucket/memo", NO_OPTIONS).unwrap_err();
        assert!(err.to_string().contains("cannot hold a password"), "{err}");
        let err = store_from_url("az://c/memo?sig=SECRET", NO_OPTIONS).unwrap_err();
        assert!(err.to_string().contains("\"sas_token\""), "{err}");
    }

    #[tokio::test]
    async fn probe_passes_on_stores_with_conditional_create_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn ObjectStore> =
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        for store in [local, memory] {
            probe_conditional_create(store.as_ref(), &"memo".into())
                .await
                .unwrap();
            let left: Vec<_> = store.list(Some(&"memo".into())).collect().await;
            assert!(left.is_empty(), "{store}: {left:?}");
        }
    }

    #[tokio::test]
    async fn probe_reports_a_store_that_overwrites_on_create() {
        let store = IgnoresConditionalCreates::new(InMemory::new());
        let err = probe_conditional_create(&store, &"memo".into())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::ConditionalPutUnsupported { path } if path.starts_with("memo/probes/")),
            "{err}"
        );
        let left: Vec<_> = store.list(None).collect().await;
        assert!(left.is_empty(), "probe object left behind: {left:?}");
    }

    #[tokio::test]
    async fn a_checked_store_refuses_creates_on_a_backend_that_overwrites() {
        let options = StoreOptions::default();
        let careless = Arc::new(IgnoresConditionalCreates::new(InMemory::new()));
        let store = options.checked(careless.clone(), &"memo".into());
        let path = Path::from("memo/memos/r/0/k");
        let refused = crate::write_once::create_once(
            store.as_ref(),
            &path,
            b"v",
            crate::read_limit::Limit::MARKER,
            &crate::seal::PLAIN,
        )
        .await;
        assert!(
            matches!(&refused, Err(Error::ConditionalPutUnsupported { .. })),
            "{refused:?}"
        );
        let left: Vec<_> = careless.list(None).collect().await;
        assert!(
            left.is_empty(),
            "written despite the failed check: {left:?}"
        );
        // Plain writes are not conditional creates, and are not checked.
        store.put(&path, "v".into()).await.unwrap();
    }

    #[tokio::test]
    async fn a_checked_store_creates_on_a_backend_that_keeps_creates() {
        let options = StoreOptions::default();
        let store = options.checked(Arc::new(InMemory::new()), &"memo".into());
        let path = Path::from("memo/memos/r/0/k");
        crate::write_once::create_once(
            store.as_ref(),
            &path,
            b"v",
            crate::read_limit::Limit::MARKER,
            &crate::seal::PLAIN,
        )
        .await
        .unwrap();
        let left: Vec<_> = store
            .list(None)
            .map(|m| m.unwrap().location)
            .collect()
            .await;
        assert_eq!(left, [path], "the probe object is left behind");
    }

    #[tokio::test]
    async fn the_conditional_create_check_can_be_turned_off() {
        let options =
            StoreOptions::collect("s3://b", [(CHECK_CONDITIONAL_CREATE_OPTION, "false")]).unwrap();
        let careless = Arc::new(IgnoresConditionalCreates::new(InMemory::new()));
        let store = options.checked(careless, &"memo".into());
        let path = Path::from("memo/k");
        crate::write_once::create_once(
            store.as_ref(),
            &path,
            b"v",
            crate::read_limit::Limit::MARKER,
            &crate::seal::PLAIN,
        )
        .await
        .unwrap();
        let bad = StoreOptions::collect("s3://b", [(CHECK_CONDITIONAL_CREATE_OPTION, "maybe")]);
        assert!(matches!(bad, Err(Error::InvalidStoreUrl { .. })), "{bad:?}");
    }
}
