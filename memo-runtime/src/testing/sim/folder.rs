//! A local folder as the simulated bucket: memo's own
//! [`LocalFolder`](crate::store::LocalFolder), the embedded default, over
//! real files, real renames and hard links; or a
//! [`SqliteStore`](crate::store::SqliteStore) file in such a folder. Each
//! request runs to its end off the simulator's runtime, so that it
//! completes within the poll that makes it (a history stays a function of
//! its seed, and the fault-free views of the truth read it at once).

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

/// Where a folder's requests run to their end: on a thread of their own,
/// outside the simulator's runtime, so that its scheduler never waits for
/// a completion it cannot order. A `LocalFolder` then does its file work
/// inline (it finds no runtime); a SQLite file's reads work on Tokio's
/// blocking pool, so they run on a runtime of the folder's own.
#[derive(Clone)]
struct Requests(Option<Arc<OwnRuntime>>);

/// A folder's own runtime, shut down without waiting when the last request
/// that holds it is dropped (which may be within the simulator's runtime,
/// where a runtime may not be dropped).
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Requests {
    /// Runs `request` to its end, off the simulator's runtime.
    fn run<F>(&self, request: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        let own = self.0.as_deref().and_then(|own| own.0.as_ref());
        std::thread::scope(|scope| {
            scope
                .spawn(|| match own {
                    Some(runtime) => runtime.block_on(request),
                    None => futures::executor::block_on(request),
                })
                .join()
                .expect("a request to a simulated folder does not panic")
        })
    }
}

/// A [`LocalFolder`] over a fresh folder, or a SQLite file in one,
/// removed when the instance that made it is dropped.
pub(super) struct Folder {
    inner: Arc<dyn ObjectStore>,
    requests: Requests,
    root: PathBuf,
    /// A SQLite file (`memo.db` in the folder), not the folder's files.
    sqlite: bool,
    /// Whether this instance made the folder, and removes it when dropped
    /// (not one [`another`](Self::another) opened).
    owns_root: bool,
}

impl Folder {
    /// A [`LocalFolder`] over a fresh, empty folder under [`base`].
    pub(super) fn new(seed: u64) -> std::io::Result<Folder> {
        let root = fresh_root(seed)?;
        // Without syncs: they change when an answer comes, never what it
        // is (the simulator makes its own power losses, and `local.rs`'s
        // tests pin every sync), and a folder on a disk would pay for each.
        let inner = LocalFolder::new(&root)
            .map_err(std::io::Error::other)?
            .with_fsync(false);
        Ok(Folder {
            inner: Arc::new(inner),
            requests: Requests(None),
            root,
            sqlite: false,
            owns_root: true,
        })
    }

    /// A [`SqliteStore`](crate::store::SqliteStore) file in a fresh, empty
    /// folder under [`base`], without syncs (as a local folder's).
    #[cfg(feature = "sqlite")]
    pub(super) fn sqlite(seed: u64) -> std::io::Result<Folder> {
        let root = fresh_root(seed)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Folder {
            inner: Self::open_sqlite(&root)?,
            requests: Requests(Some(Arc::new(OwnRuntime(Some(runtime))))),
            root,
            sqlite: true,
            owns_root: true,
        })
    }

    /// Another instance over the same folder or SQLite file, as another
    /// process opens it: its own `LocalFolder`, or its own `SqliteStore`
    /// (its own writer and read connections, meeting the others' only
    /// through the file and SQLite's lock). Each simulated process gets
    /// one, so what one instance keeps to itself is never what another
    /// reads.
    pub(super) fn another(&self) -> std::io::Result<Folder> {
        let inner: Arc<dyn ObjectStore> = if self.sqlite {
            Self::open_sqlite(&self.root)?
        } else {
            let folder = LocalFolder::new(&self.root).map_err(std::io::Error::other)?;
            Arc::new(folder.with_fsync(false))
        };
        Ok(Folder {
            inner,
            requests: self.requests.clone(),
            root: self.root.clone(),
            sqlite: self.sqlite,
            owns_root: false,
        })
    }

    #[cfg(feature = "sqlite")]
    fn open_sqlite(root: &std::path::Path) -> std::io::Result<Arc<dyn ObjectStore>> {
        let store = crate::store::SqliteStore::open_with_fsync(root.join("memo.db"), false)
            .map_err(std::io::Error::other)?;
        Ok(Arc::new(store))
    }

    #[cfg(not(feature = "sqlite"))]
    fn open_sqlite(_root: &std::path::Path) -> std::io::Result<Arc<dyn ObjectStore>> {
        unreachable!("a SQLite file is made with the `sqlite` feature only")
    }
}

/// A fresh, empty folder under [`base`], named after the process and the
/// seed.
fn fresh_root(seed: u64) -> std::io::Result<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = base().join(format!("memo-sim-{}-{seed}-{n}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    Ok(root)
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
        if self.owns_root {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

impl fmt::Debug for Folder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Folder")
            .field("root", &self.root)
            .field("store", &self.inner.to_string())
            .finish()
    }
}

impl fmt::Display for Folder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Folder({}: {})", self.root.display(), self.inner)
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
        self.requests
            .run(self.inner.put_opts(location, payload, opts))
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.requests
            .run(self.inner.put_multipart_opts(location, opts))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.requests.run(async {
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
        self.requests.run(self.inner.get_ranges(location, ranges))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let (inner, requests) = (Arc::clone(&self.inner), self.requests.clone());
        locations
            .then(move |location| {
                let (inner, requests) = (Arc::clone(&inner), requests.clone());
                async move {
                    let location = location?;
                    // The stream is made on the other thread too: one made
                    // on the runtime works on the runtime's pool.
                    let deleted = requests.run(async {
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
        let requests = self.requests.clone();
        // Listed when first polled, as a listing is.
        stream::once(async move {
            requests.run(async { inner.list(prefix.as_ref()).collect::<Vec<_>>().await })
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
        let requests = self.requests.clone();
        stream::once(async move {
            requests.run(async {
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
        self.requests.run(self.inner.list_with_delimiter(prefix))
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.requests.run(self.inner.copy_opts(from, to, options))
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.requests.run(self.inner.rename_opts(from, to, options))
    }
}
