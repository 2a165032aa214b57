//! `NameLimitedStore`: an object store that, like a backend with name
//! limits (255-byte file names on common local filesystems, S3's 1,024-byte
//! keys), refuses names that are too long.

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, MultipartUpload, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use crate::forward::forward_object_store;

/// The longest path segment (file or folder name) common local
/// filesystems store: 255 bytes (ext4, XFS, APFS, NTFS in UTF-16 units).
pub const LOCAL_NAME_BYTES: usize = 255;

/// The longest key S3 stores: 1,024 bytes.
pub const S3_KEY_BYTES: usize = 1_024;

/// Wraps a store so that every request naming a path with a segment longer
/// than [`LOCAL_NAME_BYTES`] or a whole path longer than [`S3_KEY_BYTES`]
/// (or the limits given to [`with_limits`](Self::with_limits)) fails before
/// it reaches the wrapped store, as a local folder answers "file name too
/// long". Listings pass through.
///
/// Use it to check that every name a program builds fits the backends it
/// supports, whatever its input (memo's run ids are up to 128 bytes).
///
/// # Example
///
/// ```
/// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStoreExt};
/// use memo_runtime::testing::NameLimitedStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = NameLimitedStore::new(InMemory::new());
/// store.put(&Path::from("runs/order-1"), "a".into()).await.unwrap();
/// let long = Path::from(format!("runs/{}", "x".repeat(256)));
/// assert!(store.put(&long, "a".into()).await.is_err());
/// # }
/// ```
pub struct NameLimitedStore<T> {
    inner: T,
    segment_bytes: usize,
    path_bytes: usize,
}

impl<T> NameLimitedStore<T> {
    /// Wraps `inner` with the limits of a local folder and S3.
    pub fn new(inner: T) -> Self {
        Self::with_limits(inner, LOCAL_NAME_BYTES, S3_KEY_BYTES)
    }

    /// Wraps `inner`, refusing path segments longer than `segment_bytes`
    /// and paths longer than `path_bytes`.
    pub fn with_limits(inner: T, segment_bytes: usize, path_bytes: usize) -> Self {
        NameLimitedStore {
            inner,
            segment_bytes,
            path_bytes,
        }
    }

    /// `Ok` if `path` fits the limits; else the error a backend gives.
    fn check(&self, path: &Path) -> Result<()> {
        let segment = path.parts().map(|p| p.as_ref().len()).max().unwrap_or(0);
        let whole = path.as_ref().len();
        if segment <= self.segment_bytes && whole <= self.path_bytes {
            return Ok(());
        }
        Err(object_store::Error::Generic {
            store: "NameLimitedStore",
            source: format!(
                "name too long: {path} has a {segment}-byte segment and {whole} bytes in all (limits {} and {})",
                self.segment_bytes, self.path_bytes
            )
            .into(),
        })
    }
}

impl<T: fmt::Debug> fmt::Debug for NameLimitedStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NameLimitedStore")
            .field("inner", &self.inner)
            .field("segment_bytes", &self.segment_bytes)
            .field("path_bytes", &self.path_bytes)
            .finish()
    }
}

impl<T: fmt::Display> fmt::Display for NameLimitedStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NameLimitedStore({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for NameLimitedStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.check(location)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.check(location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.check(location)?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.check(location)?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let limits = NameLimitedStore::with_limits((), self.segment_bytes, self.path_bytes);
        // A name too long reaches the wrapped store as the error it is,
        // which answers it as that location's outcome.
        let checked = locations
            .map(move |location| location.and_then(|l| limits.check(&l).map(|()| l)))
            .boxed();
        self.inner.delete_stream(checked)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.check(from)?;
        self.check(to)?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.check(from)?;
        self.check(to)?;
        self.inner.rename_opts(from, to, options).await
    }

    forward_object_store!(self.inner => list, list_with_offset, list_with_delimiter);
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::stores::exercise_every_method;

    #[tokio::test]
    async fn every_method_reaches_the_inner_store() {
        exercise_every_method(&NameLimitedStore::new(InMemory::new())).await;
    }

    #[tokio::test]
    async fn a_name_past_a_limit_is_refused_and_nothing_is_written() {
        let store = NameLimitedStore::new(InMemory::new());
        let longest = Path::from(format!("runs/{}", "x".repeat(LOCAL_NAME_BYTES)));
        store.put(&longest, "a".into()).await.unwrap();
        let too_long = Path::from(format!("runs/{}", "x".repeat(LOCAL_NAME_BYTES + 1)));
        let refused = store.put(&too_long, "a".into()).await.unwrap_err();
        assert!(refused.to_string().contains("name too long"), "{refused}");
        assert!(store.inner.head(&too_long).await.is_err());
        let deep = Path::from_iter(std::iter::repeat_n("x".repeat(200), 6));
        assert!(
            store
                .get(&deep)
                .await
                .unwrap_err()
                .to_string()
                .contains("name too long")
        );
    }
}
