//! `CaseFoldingStore`: an object store that, like a case-insensitive folder
//! (macOS, Windows), cannot tell names apart that differ only in case.

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Wraps a store so that every path is folded to lower case on the way in,
/// as a case-insensitive file system folds names: `Order-1` and `order-1`
/// are one object. Listings return the folded names.
///
/// Use it to check that nothing a program stores relies on case to keep two
/// objects apart (memo's own layout is all lower case for that reason).
///
/// # Example
///
/// ```
/// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStoreExt};
/// use memo_runtime::testing::CaseFoldingStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = CaseFoldingStore::new(InMemory::new());
/// store.put(&Path::from("Order-1"), "a".into()).await.unwrap();
/// let read = store.get(&Path::from("order-1")).await.unwrap().bytes().await.unwrap();
/// assert_eq!(&read[..], b"a");
/// # }
/// ```
pub struct CaseFoldingStore<T> {
    inner: T,
}

impl<T> CaseFoldingStore<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        CaseFoldingStore { inner }
    }
}

fn fold(path: &Path) -> Path {
    Path::from_iter(
        path.parts()
            .map(|part| part.as_ref().to_ascii_lowercase())
            .collect::<Vec<_>>(),
    )
}

fn fold_option(path: Option<&Path>) -> Option<Path> {
    path.map(fold)
}

/// Names the inner store by its `Display`: its `Debug` may print
/// credentials (an Azure access key, a SAS token).
impl<T: fmt::Display> fmt::Debug for CaseFoldingStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaseFoldingStore")
            .field("inner", &format_args!("{}", self.inner))
            .finish()
    }
}

impl<T: fmt::Display> fmt::Display for CaseFoldingStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CaseFoldingStore({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for CaseFoldingStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(&fold(location), payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(&fold(location), opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(&fold(location), options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(&fold(location), ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let folded = locations.map(|location| location.map(|l| fold(&l)));
        self.inner.delete_stream(folded.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(fold_option(prefix).as_ref())
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner
            .list_with_offset(fold_option(prefix).as_ref(), &fold(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner
            .list_with_delimiter(fold_option(prefix).as_ref())
            .await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(&fold(from), &fold(to), options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner
            .rename_opts(&fold(from), &fold(to), options)
            .await
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::stores::exercise_every_method;

    #[tokio::test]
    async fn every_method_reaches_the_inner_store() {
        exercise_every_method(&CaseFoldingStore::new(InMemory::new())).await;
    }
}
