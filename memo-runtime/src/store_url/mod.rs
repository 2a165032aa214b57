//! Stores selected by URL (`file://`, `memory://`, `s3://`, `gs://`, `az://`)
//! and the start-up probe that checks a store can keep memo's write-once
//! promise.

mod cloud;
mod options;
mod probe;

use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreScheme};
use url::Url;

use crate::error::{Error, Result};
use crate::seal::{Seal, seal_from_options};
use options::StoreOptions;

pub use options::{
    CHECK_CONDITIONAL_CREATE_OPTION, FSYNC_OPTION, MAX_RETRIES_OPTION, RETRY_TIMEOUT_OPTION,
};
pub use probe::probe_conditional_create;

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
/// | `sqlite:///var/lib/memo/memo.db` | a `SqliteStore` (one SQLite file, commits synced once per group through its write-ahead log) in that file, which is created if missing | `sqlite` |
/// | `s3://bucket/prefix` (also `s3a://`, `https://…amazonaws.com/…`) | `AmazonS3` | `aws` |
/// | `gs://bucket/prefix` | `GoogleCloudStorage` | `gcp` |
/// | `az://container/prefix` (also `abfs[s]://`, `adl://`, `azure://`) | `MicrosoftAzure` | `azure` |
///
/// Cloud stores read the standard environment variables first (`AWS_*`,
/// `GOOGLE_*`, `AZURE_*`: credentials, region, endpoint), then `options`,
/// whose keys are the builders' config keys with or without their prefix
/// (`"endpoint"` or `"aws_endpoint"`, `"region"`, `"access_key_id"`, …), plus
/// memo's own [`MAX_RETRIES_OPTION`] and [`RETRY_TIMEOUT_OPTION`]. `file://`
/// and `sqlite://` take one option, [`FSYNC_OPTION`]: by default a local
/// folder `fsync`s each write and delete, and a SQLite file syncs its log at
/// each commit, so an acknowledged commit survives a power loss; `"false"`
/// skips that (faster; a power loss may then lose the last writes).
/// `memory://` takes no options. Every URL takes the seal options
/// (see [`seal`](crate::seal)): [`ENCRYPTION_KEY_FILE_OPTION`](crate::seal::ENCRYPTION_KEY_FILE_OPTION)
/// turns encryption on with a key file, [`COMPRESSION_OPTION`](crate::seal::COMPRESSION_OPTION)
/// (`"zstd"`, the default, or `"off"`), [`ACCEPT_PLAINTEXT_OPTION`](crate::seal::ACCEPT_PLAINTEXT_OPTION),
/// and [`DATA_KEY_STORE_OPTION`](crate::seal::DATA_KEY_STORE_OPTION) with
/// [`KEY_ENCRYPTION_KEY_FILE_OPTION`](crate::seal::KEY_ENCRYPTION_KEY_FILE_OPTION)
/// (per-run data keys); they set the returned [`StoreAndPrefix::seal`].
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
/// or [`FSYNC_OPTION`] that is not `"true"` or `"false"`, an
/// [`FSYNC_OPTION`] on a URL that is neither `file://` nor `sqlite://`, or a
/// `sqlite://` URL with a host or naming a folder;
/// [`Error::StoreFeatureDisabled`] for a cloud or `sqlite://` URL whose
/// cargo feature is off; [`Error::Store`] if the store's builder rejects its configuration
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
    if parsed.scheme() == "sqlite" {
        let (seal, options) = seal_from_options(&shown, options)?;
        let options = StoreOptions::collect(&shown, options)?;
        options.expect_none(&shown)?;
        let store = sqlite_file(&shown, &parsed, options.fsync.unwrap_or(true))?;
        return Ok(StoreAndPrefix {
            store,
            prefix: Path::default(),
            seal,
        });
    }
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
                "option {FSYNC_OPTION:?} applies to file:// folders and sqlite:// files only \
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

/// A [`SqliteStore`](crate::store::SqliteStore) in the file a `sqlite://`
/// URL names (its folder created if missing), syncing each commit unless
/// `fsync` is false.
#[cfg(feature = "sqlite")]
fn sqlite_file(url: &str, parsed: &Url, fsync: bool) -> Result<Arc<dyn ObjectStore>> {
    let file = sqlite_path(url, parsed)?;
    Ok(Arc::new(crate::sqlite::SqliteStore::open_with_fsync(
        file, fsync,
    )?))
}

#[cfg(not(feature = "sqlite"))]
fn sqlite_file(url: &str, parsed: &Url, _: bool) -> Result<Arc<dyn ObjectStore>> {
    sqlite_path(url, parsed)?;
    Err(Error::StoreFeatureDisabled {
        url: url.to_owned(),
        feature: "sqlite",
    })
}

/// The file of a `sqlite://` URL: an absolute path, no host.
fn sqlite_path(url: &str, parsed: &Url) -> Result<std::path::PathBuf> {
    if parsed.host_str().is_some_and(|h| !h.is_empty()) {
        return Err(invalid(
            url,
            "a sqlite:// URL names a local file by its absolute path: sqlite:///var/lib/memo/memo.db",
        ));
    }
    let file = parsed
        .to_file_path()
        .map_err(|()| invalid(url, "not a local file path"))?;
    if file.file_name().is_none() || parsed.path().ends_with('/') {
        return Err(invalid(url, "names a folder, not the database file"));
    }
    Ok(file)
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
    use object_store::ObjectStoreExt;

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

    #[cfg(feature = "sqlite")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sqlite_url_opens_its_file_with_or_without_fsync() {
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("data").join("memo.db");
        let url = format!("sqlite://{}", file.display());
        let opened = store_from_url(&url, NO_OPTIONS).unwrap();
        assert_eq!(opened.prefix.as_ref(), "");
        assert!(file.is_file());
        assert!(opened.store.to_string().contains("memo.db"));
        opened.store.put(&"a/b".into(), "1".into()).await.unwrap();
        // A second store on the file (a second process) reads it; this one
        // does not sync.
        let other = store_from_url(&url, [(FSYNC_OPTION, "false")]).unwrap();
        let read = other
            .store
            .get(&"a/b".into())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(read, "1".as_bytes());
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn a_sqlite_url_names_a_local_file_by_its_absolute_path() {
        for (url, why) in [
            ("sqlite://host/var/memo.db", "absolute path"),
            ("sqlite:///tmp/memo-folder/", "names a folder"),
        ] {
            let err = store_from_url(url, NO_OPTIONS).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidStoreUrl { reason, .. } if reason.contains(why)),
                "{url}: {err}"
            );
        }
        let err = store_from_url("sqlite:///tmp/memo.db", [("max_retries", "3")]).unwrap_err();
        assert!(matches!(err, Error::InvalidStoreUrl { .. }), "{err}");
    }

    #[cfg(not(feature = "sqlite"))]
    #[test]
    fn sqlite_url_without_the_sqlite_feature_names_the_feature() {
        let err = store_from_url("sqlite:///tmp/memo.db", NO_OPTIONS).unwrap_err();
        assert!(
            matches!(
                err,
                Error::StoreFeatureDisabled {
                    feature: "sqlite",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("features = [\"sqlite\"]"), "{err}");
        // The URL is checked first: one that names no absolute path is
        // refused for that, with or without the feature.
        let err = store_from_url("sqlite://host/var/memo.db", NO_OPTIONS).unwrap_err();
        assert!(matches!(err, Error::InvalidStoreUrl { .. }), "{err}");
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
