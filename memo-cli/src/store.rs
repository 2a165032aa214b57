//! Opening the store a URL names, and the memo and runtime stores within it.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Args;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::path::Path;
use memo_runtime::{
    MemoStore,
    runtime_store::ObjectStoreRuntimeStore,
    store::{redact_store_url, store_from_url},
};

/// Where the store is and how its parts are laid out in it. The defaults are
/// what the example workers use: `<url prefix>/memo` and
/// `<url prefix>/runtime`.
#[derive(Args)]
pub(crate) struct StoreArgs {
    /// The store: `file:///var/lib/memo`, `s3://bucket/prefix`,
    /// `gs://bucket/prefix`, `az://container/prefix`.
    #[arg(long, global = true, value_name = "URL")]
    store: Option<String>,
    /// A store option `key=value` (`endpoint=http://127.0.0.1:9000`,
    /// `region=eu-west-1`, `retry_timeout=10s`); repeatable. Credentials come
    /// from the usual environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
    // Split in `open`, not by a clap value parser: clap echoes a value it
    // refuses, and a mistyped option may be a secret.
    #[arg(long = "option", global = true, value_name = "KEY=VALUE")]
    options: Vec<String>,
    /// Where the memo store is, under the URL's prefix.
    #[arg(long, global = true, default_value = "memo", value_name = "PREFIX")]
    memo_prefix: String,
    /// Where the runtime store (runs, receipts, signals) is, under the URL's
    /// prefix.
    #[arg(long, global = true, default_value = "runtime", value_name = "PREFIX")]
    runs_prefix: String,
}

/// The URL redacted and the options' keys only: their values may be secrets.
impl std::fmt::Debug for StoreArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreArgs")
            .field("store", &self.store.as_deref().map(redact_store_url))
            .field(
                "options",
                &self
                    .options
                    .iter()
                    .map(|o| o.split_once('=').map_or("?", |(key, _)| key))
                    .collect::<Vec<_>>(),
            )
            .field("memo_prefix", &self.memo_prefix)
            .field("runs_prefix", &self.runs_prefix)
            .finish()
    }
}

/// `key=value`; an argument without `=` is refused without being echoed
/// (it may be a secret typed with the wrong separator).
fn parse_option(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((key, value)) => Ok((key.to_string(), value.to_string())),
        None => bail!("--option expects KEY=VALUE (the argument is not shown: it may be a secret)"),
    }
}

/// The opened store. Its `Debug` is the URL and the prefixes: the object
/// store's own `Debug` may print credentials.
pub(crate) struct Store {
    /// The URL as it may be printed (no user info, no query string), for
    /// messages.
    pub(crate) url: String,
    pub(crate) objects: Arc<dyn ObjectStore>,
    /// The prefix the URL names, which the memo and runs prefixes are under.
    pub(crate) base: Path,
    pub(crate) memo: MemoStore,
    pub(crate) runs: Arc<ObjectStoreRuntimeStore>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.url)
            .field("memo", &self.memo)
            .field("runs", &self.runs)
            .finish_non_exhaustive()
    }
}

impl StoreArgs {
    pub(crate) fn open(&self) -> anyhow::Result<Store> {
        let Some(given) = &self.store else {
            bail!("no store given: pass --store URL (file:///path, s3://bucket/prefix, ...)");
        };
        // A URL may carry credentials (which `store_from_url` refuses): it is
        // only ever printed redacted.
        let url = redact_store_url(given);
        if given.starts_with("memory:") {
            bail!(
                "{url:?} is a store in this process's memory, empty at every start: \
                 point --store at a folder (file://) or a bucket"
            );
        }
        let options = self
            .options
            .iter()
            .map(|option| parse_option(option))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let opened = store_from_url(given, options)
            .with_context(|| format!("cannot open the store {url:?}"))?;
        let under = |prefix: &str| -> Path {
            Path::from_iter(opened.prefix.parts().chain(Path::from(prefix).parts()))
        };
        // The URL's seal options (an encryption key file) open sealed data.
        let memo = MemoStore::new(Arc::clone(&opened.store), under(&self.memo_prefix))
            .with_seal(opened.seal.clone());
        // An operator's listing must not change the store it inspects.
        let mut runs =
            ObjectStoreRuntimeStore::new(Arc::clone(&opened.store), under(&self.runs_prefix))
                .with_read_only_listings()
                .with_seal(opened.seal.clone());
        // The cloud stores and memo's local folder list in order from an
        // offset, so a page stops its listing there.
        if lists_in_order(given) {
            runs = runs.with_ordered_listings();
        }
        Ok(Store {
            url,
            base: opened.prefix.clone(),
            objects: opened.store,
            memo,
            runs: Arc::new(runs),
        })
    }
}

/// Whether the store a URL names lists objects in lexical order from an
/// offset: S3, GCS and Azure do, and so does the `LocalFolder` a `file://`
/// URL opens (it reads a folder's names whole, but keeps and returns only
/// the first after the offset), and so does the `SqliteStore` of a
/// `sqlite://` URL (an index range).
fn lists_in_order(url: &str) -> bool {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    matches!(
        scheme.to_ascii_lowercase().as_str(),
        "file" | "sqlite" | "s3" | "s3a" | "gs" | "az" | "adl" | "azure" | "abfs" | "abfss"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(url: &str) -> Store {
        StoreArgs {
            store: Some(url.to_owned()),
            options: Vec::new(),
            memo_prefix: "memo".into(),
            runs_prefix: "runtime".into(),
        }
        .open()
        .unwrap()
    }

    /// A folder and a SQLite file (an index range) list in order from an
    /// offset, so a page of `memoctl runs` on one stops its listing at the
    /// page rather than reading every hint after the cursor.
    #[test]
    fn a_folder_and_a_sqlite_file_are_paged_from_their_listings_offset() {
        let dir = tempfile::tempdir().unwrap();
        let folder = format!("file://{}", dir.path().display());
        let sqlite = format!("sqlite://{}/memo.db", dir.path().display());
        for url in [folder, sqlite] {
            // The runtime store's `Debug` says how it pages.
            let runs = format!("{:?}", opened(&url).runs);
            assert!(runs.contains("ordered_listings: true"), "{url}: {runs}");
        }
        assert!(lists_in_order("s3://bucket/prefix"));
    }
}
