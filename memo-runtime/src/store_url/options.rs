//! The options [`store_from_url`] takes: memo's own keys, and the rest
//! passed to the backend's builder.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path;
use tokio::sync::OnceCell;

use super::invalid;
use super::probe::CheckedCreates;
#[cfg(doc)]
use super::store_from_url;
use crate::error::Result;

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

/// The options given to [`store_from_url`], with memo's own keys taken out.
#[derive(Debug, Default, Clone)]
pub(super) struct StoreOptions {
    /// The builder config keys and values, in the order given.
    builder: Vec<(String, String)>,
    /// `None` keeps the builder's default.
    max_retries: Option<usize>,
    /// `None` keeps the builder's default.
    retry_timeout: Option<Duration>,
    /// `Some(false)` turns the conditional-create check off.
    check_conditional_create: Option<bool>,
    /// `Some(false)` makes a `file://` folder skip `fsync`.
    pub(super) fsync: Option<bool>,
}

impl StoreOptions {
    pub(super) fn collect<I, K, V>(url: &str, options: I) -> Result<Self>
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
    pub(super) fn expect_none(&self, url: &str) -> Result<()> {
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
    pub(super) fn checked(
        &self,
        store: Arc<dyn ObjectStore>,
        prefix: &Path,
    ) -> Arc<dyn ObjectStore> {
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
    pub(super) fn retry(&self) -> Option<object_store::RetryConfig> {
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
    pub(super) fn apply<B, K>(
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
