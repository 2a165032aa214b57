//! [`CountingStore`]: an [`ObjectStore`] wrapper that counts the requests
//! made through it, by kind.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use super::lock;

/// A snapshot of the requests a [`CountingStore`] has seen.
///
/// Each request is counted once, when it is made, whether it succeeds or
/// not; each field names the [`ObjectStore`] method it counts (the
/// `ObjectStoreExt` conveniences are counted as the method they call).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RequestCounts {
    /// `put_opts` in `PutMode::Overwrite` or `PutMode::Update` (`put`).
    pub puts: u64,
    /// `put_opts` in `PutMode::Create`.
    pub creates: u64,
    /// Bytes of the payloads given to `put_opts`, in any mode: what a
    /// writer uploads (counted whether the put succeeds or not).
    pub bytes_put: u64,
    /// `put_multipart_opts` (`put_multipart`).
    pub multipart_uploads: u64,
    /// `get_opts` without `head` (`get`, `get_range`).
    pub gets: u64,
    /// `get_ranges` calls.
    pub get_ranges: u64,
    /// `get_opts` with `head` (`head`).
    pub heads: u64,
    /// `delete_stream` calls (`delete` is a stream of one path). A store that
    /// deletes in bulk, like S3, may turn one call into several batches.
    pub delete_streams: u64,
    /// Paths that flowed into `delete_stream`, whether their delete succeeded
    /// or not.
    pub delete_paths: u64,
    /// `list` calls.
    pub lists: u64,
    /// `list_with_offset` calls.
    pub lists_with_offset: u64,
    /// `list_with_delimiter` calls.
    pub lists_with_delimiter: u64,
    /// Objects returned by `list`, `list_with_offset` and
    /// `list_with_delimiter`: the cost of a listing that grows with its size.
    pub objects_listed: u64,
    /// Common prefixes returned by `list_with_delimiter`.
    pub prefixes_listed: u64,
    /// `copy_opts` calls, either mode (`copy`, `copy_if_not_exists`).
    pub copies: u64,
    /// `rename_opts` calls, either mode (`rename`, `rename_if_not_exists`).
    pub renames: u64,
}

/// An [`ObjectStore`] that forwards every request to `inner` and counts it.
///
/// Counts are read with [`counts`](Self::counts) and zeroed with
/// [`reset`](Self::reset), both through `&self`, so a test can keep an `Arc`
/// of the store while the code under test owns another.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStore, ObjectStoreExt};
/// use memo_runtime::testing::{CountingStore, RequestCounts};
/// use futures::TryStreamExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let counting = Arc::new(CountingStore::new(InMemory::new()));
/// let store: Arc<dyn ObjectStore> = counting.clone();
///
/// store.put(&Path::from("runs/a"), "1".into()).await.unwrap();
/// store.put(&Path::from("runs/b"), "2".into()).await.unwrap();
/// let listed: Vec<_> = store.list(Some(&Path::from("runs"))).try_collect().await.unwrap();
/// assert_eq!(listed.len(), 2);
///
/// assert_eq!(
///     counting.counts(),
///     RequestCounts { puts: 2, bytes_put: 2, lists: 1, objects_listed: 2, ..RequestCounts::default() }
/// );
/// counting.reset();
/// assert_eq!(counting.counts(), RequestCounts::default());
/// # }
/// ```
pub struct CountingStore<T> {
    inner: T,
    // Shared with the streams the store returns, which count as they are read.
    counts: Arc<Mutex<RequestCounts>>,
}

impl<T: ObjectStore> CountingStore<T> {
    /// Wraps `inner`, with every count at zero.
    pub fn new(inner: T) -> Self {
        CountingStore {
            inner,
            counts: Arc::default(),
        }
    }

    /// The requests counted so far.
    pub fn counts(&self) -> RequestCounts {
        *lock(&self.counts)
    }

    /// Sets every count to zero.
    pub fn reset(&self) {
        *lock(&self.counts) = RequestCounts::default();
    }

    /// The wrapped store.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// Unwraps the store.
    pub fn into_inner(self) -> T {
        self.inner
    }

    fn count(&self, field: impl FnOnce(&mut RequestCounts)) {
        field(&mut lock(&self.counts));
    }

    /// Counts the objects `listing` yields, as they are read.
    fn counted_listing(
        &self,
        listing: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let counts = Arc::clone(&self.counts);
        listing
            .inspect(move |object| {
                if object.is_ok() {
                    lock(&counts).objects_listed += 1;
                }
            })
            .boxed()
    }
}

/// Names the inner store by its `Display`: its `Debug` may print
/// credentials (an Azure access key, a SAS token).
impl<T: fmt::Display> fmt::Debug for CountingStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingStore")
            .field("inner", &format_args!("{}", self.inner))
            .field("counts", &self.counts)
            .finish()
    }
}

impl<T: fmt::Display> fmt::Display for CountingStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for CountingStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.count(|c| {
            match opts.mode {
                PutMode::Create => c.creates += 1,
                PutMode::Overwrite | PutMode::Update(_) => c.puts += 1,
            }
            c.bytes_put += payload.content_length() as u64;
        });
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.count(|c| c.multipart_uploads += 1);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.count(|c| match options.head {
            true => c.heads += 1,
            false => c.gets += 1,
        });
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.count(|c| c.get_ranges += 1);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.count(|c| c.delete_streams += 1);
        let counts = Arc::clone(&self.counts);
        let locations = locations.inspect(move |location| {
            if location.is_ok() {
                lock(&counts).delete_paths += 1;
            }
        });
        self.inner.delete_stream(locations.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.count(|c| c.lists += 1);
        self.counted_listing(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.count(|c| c.lists_with_offset += 1);
        self.counted_listing(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.count(|c| c.lists_with_delimiter += 1);
        let listed = self.inner.list_with_delimiter(prefix).await?;
        self.count(|c| {
            c.objects_listed += listed.objects.len() as u64;
            c.prefixes_listed += listed.common_prefixes.len() as u64;
        });
        Ok(listed)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.count(|c| c.copies += 1);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.count(|c| c.renames += 1);
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::{StreamExt, TryStreamExt};
    use object_store::local::LocalFileSystem;
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutMode};

    use super::*;
    use crate::testing::stores::exercise_every_method;

    #[tokio::test]
    async fn every_method_is_counted_and_reaches_the_inner_store() {
        // The inner counter sees exactly what the outer one forwarded.
        let outer = CountingStore::new(Arc::new(CountingStore::new(InMemory::new())));
        let expected = exercise_every_method(&outer).await;
        assert_eq!(outer.counts(), expected);
        assert_eq!(outer.inner().counts(), expected);
    }

    #[tokio::test]
    async fn every_method_reaches_a_local_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let outer = CountingStore::new(Arc::new(CountingStore::new(local)));
        let expected = exercise_every_method(&outer).await;
        assert_eq!(outer.counts(), expected);
        assert_eq!(outer.inner().counts(), expected);
    }

    #[tokio::test]
    async fn list_with_offset_reaches_the_inner_stores_own_implementation() {
        // Were the trait default used, the inner store would see a `list`.
        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let store = CountingStore::new(Arc::new(CountingStore::new(local)));
        for name in ["m/1", "m/2", "m/3"] {
            store.put(&Path::from(name), "x".into()).await.unwrap();
        }
        let listed: Vec<_> = store
            .list_with_offset(Some(&Path::from("m")), &Path::from("m/1"))
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed.len(), 2);
        let inner = store.inner().counts();
        assert_eq!((inner.lists_with_offset, inner.lists), (1, 0));
        assert_eq!(inner.objects_listed, 2);
    }

    #[tokio::test]
    async fn counts_are_exact_for_a_known_sequence() {
        let store = Arc::new(CountingStore::new(InMemory::new()));
        let dyn_store: Arc<dyn ObjectStore> = store.clone();
        let key = Path::from("memos/run/1/k");

        dyn_store
            .put_opts(&key, "v".into(), PutMode::Create.into())
            .await
            .unwrap();
        let again = dyn_store
            .put_opts(&key, "w".into(), PutMode::Create.into())
            .await;
        assert!(matches!(
            again,
            Err(object_store::Error::AlreadyExists { .. })
        ));
        dyn_store.get(&key).await.unwrap();
        assert!(dyn_store.get(&Path::from("missing")).await.is_err());
        dyn_store.head(&key).await.unwrap();
        dyn_store
            .copy_if_not_exists(&key, &Path::from("memos/run/1/c"))
            .await
            .unwrap();
        dyn_store.delete(&key).await.unwrap();
        let listed = dyn_store.list(Some(&Path::from("memos"))).count().await;

        assert_eq!(listed, 1);
        assert_eq!(
            store.counts(),
            RequestCounts {
                creates: 2,
                // "v", then "w", whose create failed.
                bytes_put: 2,
                gets: 2,
                heads: 1,
                copies: 1,
                delete_streams: 1,
                delete_paths: 1,
                lists: 1,
                objects_listed: 1,
                ..RequestCounts::default()
            }
        );
    }

    #[tokio::test]
    async fn delete_stream_counts_one_call_and_every_path_through_it() {
        let store = CountingStore::new(InMemory::new());
        let paths: Vec<_> = (0..5).map(|i| Ok(Path::from(format!("d/{i}")))).collect();
        let results: Vec<_> = store
            .delete_stream(futures::stream::iter(paths).boxed())
            .collect()
            .await;
        assert_eq!(results.len(), 5);
        let counts = store.counts();
        assert_eq!((counts.delete_streams, counts.delete_paths), (1, 5));
    }

    #[tokio::test]
    async fn listed_objects_are_counted_only_as_far_as_the_listing_is_read() {
        let store = CountingStore::new(InMemory::new());
        for i in 0..4 {
            store
                .put(&Path::from(format!("l/{i}")), "x".into())
                .await
                .unwrap();
        }
        let first_two: Vec<_> = store.list(None).take(2).collect().await;
        assert_eq!(first_two.len(), 2);
        assert_eq!(store.counts().objects_listed, 2);
    }

    #[tokio::test]
    async fn reset_zeroes_every_count() {
        let store = CountingStore::new(InMemory::new());
        exercise_every_method(&store).await;
        assert_ne!(store.counts(), RequestCounts::default());
        store.reset();
        assert_eq!(store.counts(), RequestCounts::default());
    }
}
