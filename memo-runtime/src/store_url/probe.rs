//! The check that a store keeps memo's write-once promise: the probe, and
//! the wrapper that runs it before a store's first conditional create.

use std::sync::Arc;

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, PutResult};
use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::forward::forward_object_store;
use crate::layout;
use crate::run_id::unique_token;

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
pub(super) struct CheckedCreates {
    pub(super) inner: Arc<dyn ObjectStore>,
    pub(super) prefix: Path,
    /// The probe's verdict, once it has one (a failed request is no verdict:
    /// the next create probes again).
    pub(super) supported: OnceCell<bool>,
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
