//! Opening the store a URL names, and the memo and runtime stores within it.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Args;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::path::Path;
use memo_runtime::{MemoStore, ObjectStoreRuntimeStore, store_from_url};

/// Where the store is and how its parts are laid out in it. The defaults are
/// what the example workers use: `<url prefix>/memo` and
/// `<url prefix>/runtime`.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The store: `file:///var/lib/memo`, `s3://bucket/prefix`,
    /// `gs://bucket/prefix`, `az://container/prefix`.
    #[arg(long, global = true, value_name = "URL")]
    store: Option<String>,
    /// A store option `key=value` (`endpoint=http://127.0.0.1:9000`,
    /// `region=eu-west-1`, `retry_timeout=10s`); repeatable. Credentials come
    /// from the usual environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
    #[arg(long = "option", global = true, value_name = "KEY=VALUE", value_parser = parse_option)]
    options: Vec<(String, String)>,
    /// Where the memo store is, under the URL's prefix.
    #[arg(long, global = true, default_value = "memo", value_name = "PREFIX")]
    memo_prefix: String,
    /// Where the runtime store (runs, receipts, signals) is, under the URL's
    /// prefix.
    #[arg(long, global = true, default_value = "runtime", value_name = "PREFIX")]
    runs_prefix: String,
}

fn parse_option(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected key=value, got {s:?}"))
}

/// The opened store.
#[derive(Debug)]
pub(crate) struct Store {
    /// The URL, for messages.
    pub(crate) url: String,
    pub(crate) objects: Arc<dyn ObjectStore>,
    pub(crate) memo: MemoStore,
    pub(crate) runs: Arc<ObjectStoreRuntimeStore>,
}

impl StoreArgs {
    pub(crate) fn open(&self) -> anyhow::Result<Store> {
        let Some(url) = self.store.clone() else {
            bail!("no store given: pass --store URL (file:///path, s3://bucket/prefix, ...)");
        };
        if url.starts_with("memory:") {
            bail!(
                "{url:?} is a store in this process's memory, empty at every start: \
                 point --store at a folder (file://) or a bucket"
            );
        }
        let opened = store_from_url(&url, self.options.clone())
            .with_context(|| format!("cannot open the store {url:?}"))?;
        let under = |prefix: &str| -> Path {
            Path::from_iter(opened.prefix.parts().chain(Path::from(prefix).parts()))
        };
        let memo = MemoStore::new(Arc::clone(&opened.store), under(&self.memo_prefix));
        let runs =
            ObjectStoreRuntimeStore::new(Arc::clone(&opened.store), under(&self.runs_prefix));
        Ok(Store {
            url,
            objects: opened.store,
            memo,
            runs: Arc::new(runs),
        })
    }
}
