//! A local folder as the simulated bucket: memo's own
//! [`LocalFolder`](crate::store::LocalFolder), the embedded default, over
//! real files, real renames and hard links, each request run to its end
//! off the async runtime, so that it completes within the poll that makes
//! it (a history stays a function of its seed, and the fault-free views of
//! the truth read it at once).

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use crate::store::LocalFolder;
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Runs `request` on a thread of its own, outside the async runtime, and
/// waits for it: `LocalFolder` then does its file work inline instead of
/// on the runtime's blocking pool, whose completion the simulator's
/// scheduler could not order.
fn off_runtime<F>(request: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| futures::executor::block_on(request))
            .join()
            .expect("a local-folder request does not panic")
    })
}

/// A [`LocalFolder`] over a fresh folder, removed when dropped.
pub(super) struct Folder {
    inner: Arc<LocalFolder>,
    root: PathBuf,
}

impl Folder {
    /// A fresh, empty folder under [`base`].
    pub(super) fn new(seed: u64) -> std::io::Result<Folder> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = base().join(format!("memo-sim-{}-{seed}-{n}", std::process::id()));
        std::fs::create_dir_all(&root)?;
        // Without syncs: they change when an answer comes, never what it
        // is (the simulator makes its own power losses, and `local.rs`'s
        // tests pin every sync), and a folder on a disk would pay for each.
        let inner = LocalFolder::new(&root)
            .map_err(std::io::Error::other)?
            .with_fsync(false);
        Ok(Folder {
            inner: Arc::new(inner),
            root,
        })
    }
}

/// Where the simulator's folders go: `MEMO_SIM_FOLDER` if set, otherwise
/// `/dev/shm` where it is a folder (a file system in memory: real files,
/// renames and hard links, without a disk's file system's cost of creating
/// inodes, which on a busy ext4 took three quarters of a local-folder
/// seed's time), otherwise the system's temporary folder.
fn base() -> PathBuf {
    if let Some(folder) = std::env::var_os("MEMO_SIM_FOLDER") {
        return PathBuf::from(folder);
    }
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

impl Drop for Folder {
    fn drop(&mut self) {
        // Best effort: a folder left behind is only disk space.
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl fmt::Debug for Folder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Folder").field("root", &self.root).finish()
    }
}

impl fmt::Display for Folder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Folder({})", self.root.display())
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Folder {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        off_runtime(self.inner.put_opts(location, payload, opts))
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        off_runtime(self.inner.put_multipart_opts(location, opts))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        off_runtime(async {
            let got = self.inner.get_opts(location, options).await?;
            // A file payload would be read later, on the runtime: read it
            // now, off it.
            let (meta, range, attributes, extensions) = (
                got.meta.clone(),
                got.range.clone(),
                got.attributes.clone(),
                got.extensions.clone(),
            );
            let bytes = got.bytes().await?;
            Ok(GetResult {
                payload: GetResultPayload::Stream(stream::once(async { Ok(bytes) }).boxed()),
                meta,
                range,
                attributes,
                extensions,
            })
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        off_runtime(self.inner.get_ranges(location, ranges))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let inner = Arc::clone(&self.inner);
        locations
            .then(move |location| {
                let inner = Arc::clone(&inner);
                async move {
                    let location = location?;
                    // The stream is made on the other thread too: one made
                    // on the runtime works on the runtime's pool.
                    let deleted = off_runtime(async {
                        inner
                            .delete_stream(stream::once(async { Ok(location) }).boxed())
                            .try_collect::<Vec<_>>()
                            .await
                    })?;
                    Ok(deleted.into_iter().next().expect("one path in, one out"))
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let (inner, prefix) = (Arc::clone(&self.inner), prefix.cloned());
        // Listed when first polled, as a listing is.
        stream::once(async move {
            off_runtime(async { inner.list(prefix.as_ref()).collect::<Vec<_>>().await })
        })
        .flat_map(stream::iter)
        .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let (inner, prefix, offset) = (Arc::clone(&self.inner), prefix.cloned(), offset.clone());
        stream::once(async move {
            off_runtime(async {
                inner
                    .list_with_offset(prefix.as_ref(), &offset)
                    .collect::<Vec<_>>()
                    .await
            })
        })
        .flat_map(stream::iter)
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        off_runtime(self.inner.list_with_delimiter(prefix))
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        off_runtime(self.inner.copy_opts(from, to, options))
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        off_runtime(self.inner.rename_opts(from, to, options))
    }
}
