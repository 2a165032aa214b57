//! `IgnoresConditionalCreates`: an object store that, like some
//! S3-compatible servers, ignores `PutMode::Create` and overwrites.

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Wraps a store so that every conditional create (`PutMode::Create`)
/// becomes a plain overwrite, as a backend that ignores `If-None-Match`
/// does. Use it to check that such a backend is refused before it can
/// overwrite a committed entry.
///
/// # Example
///
/// ```
/// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStore, PutMode};
/// use memo_runtime::testing::IgnoresConditionalCreates;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = IgnoresConditionalCreates::new(InMemory::new());
/// let path = Path::from("k");
/// store.put_opts(&path, "a".into(), PutMode::Create.into()).await.unwrap();
/// // The second create is not refused: it overwrites.
/// store.put_opts(&path, "b".into(), PutMode::Create.into()).await.unwrap();
/// # }
/// ```
pub struct IgnoresConditionalCreates<T> {
    inner: T,
}

impl<T> IgnoresConditionalCreates<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        IgnoresConditionalCreates { inner }
    }
}

/// Names the inner store by its `Display`: its `Debug` may print
/// credentials (an Azure access key, a SAS token).
impl<T: fmt::Display> fmt::Debug for IgnoresConditionalCreates<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IgnoresConditionalCreates")
            .field("inner", &format_args!("{}", self.inner))
            .finish()
    }
}

impl<T: fmt::Display> fmt::Display for IgnoresConditionalCreates<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IgnoresConditionalCreates({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for IgnoresConditionalCreates<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        if opts.mode == PutMode::Create {
            opts.mode = PutMode::Overwrite;
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
