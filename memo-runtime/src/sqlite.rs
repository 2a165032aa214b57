//! The journaled local store, [`SqliteStore`]: every object a row of one
//! SQLite database file, committed through its write-ahead log with one
//! sync per group of changes.

use std::fmt;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RenameOptions, RenameTargetMode,
};
use rusqlite::Connection;
use tokio::sync::oneshot;

use read::{PAGE, bounds, first_from, meta, open_reader, page, read_object};
use upload::Upload;
use writer::{Commits, GROUP, Job, is_unsynced_delete, open_writer, write_loop};

/// How long a writer waits for another process's write transaction on the
/// same file before its change fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many bytes of a value are read or written at a time: a read of more
/// than this streams the value in pieces of this size, and a large upload
/// is written into its row a piece at a time.
const PIECE: usize = 1 << 20;

/// How many idle read connections a store keeps for its next reads; a
/// connection beyond that is closed when its read ends.
const IDLE_READERS: usize = 8;

/// The name this store gives itself in `object_store` errors.
const STORE: &str = "SqliteStore";

/// The journaled local store: every object a row of one SQLite database
/// file, every change committed through SQLite's write-ahead log, and the
/// changes that reach the writer together committed together, with one
/// sync of the log for all of them (a *group commit*).
///
/// A [`LocalFolder`](crate::store::LocalFolder) keeps each object in a file
/// of its own, so a durable create costs two syncs (the file, then the
/// folder that names it) and a new folder one more. [`SqliteStore`] appends
/// each commit to the log and syncs the log once per group: one sync for a
/// create, and one for every change that arrived while the last sync ran.
/// That is how a journaled engine (a database's log, Restate's RocksDB
/// write-ahead log) makes durable commits cheap, and what
/// `BENCHMARKS.md` measures.
///
/// # Durability
///
/// The database is opened in write-ahead-log mode with
/// `synchronous = FULL` ([`SqliteStore::open_with_fsync`] `true`, the default):
/// a change is acknowledged only once the log frames that hold it are
/// synced, so an acknowledged commit survives a power loss. With `fsync`
/// off (`synchronous = NORMAL`) the log is synced at checkpoints only: a
/// power loss may undo the last changes, always a suffix of them in the
/// order they were made (the log is checksummed frame by frame and read
/// back up to the first frame that does not check), never one change
/// without those before it. Both survive a crash of the process.
///
/// # Several processes on one file
///
/// SQLite locks the file: writers of several processes take turns
/// (each waits up to [`BUSY_TIMEOUT`] for the others), readers read the
/// last committed state beside them. A conditional create is decided in
/// the writer's transaction, so of two processes creating one path exactly
/// one succeeds. The file must be on a local file system: SQLite's locks do
/// not hold over a network file system.
///
/// # Costs and limits
///
/// Reads run on read connections in Tokio's blocking threads (up to 8 kept
/// open between reads); writes go to one writer thread per store. A
/// listing reads 1,000 rows a page, so it holds one page in memory
/// whatever the number of objects; a listing with a delimiter seeks once
/// per child it returns. An object is one row, so a value is whole or
/// absent, and at most SQLite's largest value, 10⁹ bytes.
///
/// A large value takes a piece (1 MiB) of the store's memory at a time,
/// not its size, in Rust's heap and in SQLite's alike. A multipart upload stages its parts in a
/// file beside the database that no name points to (the system removes it
/// when the upload ends, or its process dies), and its completion writes
/// them into the row a piece at a time, in the writer's transaction: other
/// changes, of this process and the others on the file, wait while it
/// copies. A read of more than a piece streams the value a piece at a time
/// from one snapshot, read as the stream is taken: the object as it was
/// when the read began, even if it is replaced or deleted meanwhile. While
/// such a read is open the write-ahead log cannot be wound back past it,
/// so the log grows with what is written until the read ends. A large
/// value grows the log by its size while it is written; once a checkpoint
/// has copied the log into the database, the next transaction cuts the
/// log's file back to 64 MiB.
///
/// Copies and renames are atomic (each holds the value it copies in
/// SQLite's memory). A delete of a path with no object answers `NotFound`,
/// as a local folder does (S3 answers success), so of two deletes of one
/// object one finds it.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use memo_runtime::MemoStore;
/// use memo_runtime::store::SqliteStore;
///
/// let folder = tempfile::tempdir()?;
/// let file = folder.path().join("memo.db");
/// let memos = MemoStore::new(Arc::new(SqliteStore::open(&file)?), "memo");
/// let run = memo_runtime::RunId::new("order-1")?;
/// memos.new_memo(&run, 1).put("reply", b"paid once").await?;
///
/// // Another process opens the same file and reads what was committed.
/// let other = MemoStore::new(Arc::new(SqliteStore::open(&file)?), "memo");
/// let read = other.new_memo(&run, 1).get("reply").await?;
/// assert_eq!(read.as_deref(), Some(&b"paid once"[..]));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    file: PathBuf,
    fsync: bool,
    /// The writer thread's queue; the thread ends once every store that
    /// shares it is dropped.
    writer: mpsc::Sender<Job>,
    /// Read connections not in use.
    readers: Mutex<Vec<Connection>>,
    /// The transactions the writer committed, and of those the ones it
    /// committed without a sync.
    commits: Arc<Commits>,
}

impl SqliteStore {
    /// Opens (or creates) the database file at `file`, its folder created if
    /// missing, with `fsync` on: see [`open_with_fsync`](Self::open_with_fsync).
    ///
    /// # Errors
    ///
    /// As [`open_with_fsync`](Self::open_with_fsync).
    pub fn open(file: impl AsRef<FsPath>) -> crate::Result<SqliteStore> {
        SqliteStore::open_with_fsync(file, true)
    }

    /// Opens (or creates) the database file at `file`, its folder created if
    /// missing. With `fsync` `true` each commit is synced before it is
    /// acknowledged (`synchronous = FULL`); with `false` the log is synced
    /// at checkpoints only (`synchronous = NORMAL`): faster, and a power loss
    /// may undo the last changes (a suffix of them, in order). See the
    /// [type's notes](SqliteStore).
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) if the folder or the file cannot
    /// be created or opened, the file is not a SQLite database, cannot be
    /// put in write-ahead-log mode, or holds another format version.
    pub fn open_with_fsync(file: impl AsRef<FsPath>, fsync: bool) -> crate::Result<SqliteStore> {
        let file = file.as_ref().to_path_buf();
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| {
            crate::Error::store(file.display(), generic(source))
        };
        if let Some(folder) = file.parent().filter(|f| !f.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|e| fail(Box::new(e)))?;
        }
        let writer = open_writer(&file, fsync).map_err(fail)?;
        let (sender, queue) = mpsc::channel();
        let commits = Arc::new(Commits::default());
        let counted = Arc::clone(&commits);
        std::thread::Builder::new()
            .name("memo-sqlite-writer".into())
            .spawn(move || write_loop(writer, fsync, queue, &counted))
            .map_err(|e| fail(Box::new(e)))?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                file,
                fsync,
                writer: sender,
                readers: Mutex::new(Vec::new()),
                commits,
            }),
        })
    }

    /// Whether each commit is synced before it is acknowledged.
    pub fn fsync(&self) -> bool {
        self.inner.fsync
    }

    /// The database file.
    pub fn file(&self) -> &FsPath {
        &self.inner.file
    }

    /// How many transactions this store's writer committed, and how many
    /// of those without a sync of the log.
    #[cfg(test)]
    fn commits(&self) -> (u64, u64) {
        let commits = &self.inner.commits;
        (
            commits.all.load(Ordering::Relaxed),
            commits.unsynced.load(Ordering::Relaxed),
        )
    }

    /// Queues a change for the writer and waits until its group committed.
    async fn write<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<object_store::Result<T>>) -> Job,
    ) -> object_store::Result<T> {
        let (reply, answer) = oneshot::channel();
        self.inner
            .writer
            .send(job(reply))
            .map_err(|_| writer_gone())?;
        answer.await.unwrap_or_else(|_| Err(writer_gone()))
    }

    /// Runs `read` on a read connection, in a blocking thread.
    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> object_store::Result<T> + Send + 'static,
    ) -> object_store::Result<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let connection = inner.reader()?;
            let out = read(&connection);
            inner.idle(connection);
            out
        })
        .await
        .map_err(generic)?
    }
}

impl Inner {
    /// An idle read connection, or a new one.
    fn reader(&self) -> object_store::Result<Connection> {
        let connection = lock(&self.readers).pop();
        match connection {
            Some(c) => Ok(c),
            None => open_reader(&self.file).map_err(generic),
        }
    }

    /// Keeps `connection` for the next read, if fewer than
    /// [`IDLE_READERS`] are kept.
    fn idle(&self, connection: Connection) {
        let mut idle = lock(&self.readers);
        if idle.len() < IDLE_READERS {
            idle.push(connection);
        }
    }
}

impl fmt::Display for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SqliteStore({})", self.inner.file.display())
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("file", &self.inner.file)
            .field("fsync", &self.inner.fsync)
            .field("commits", &self.inner.commits.all.load(Ordering::Relaxed))
            .field(
                "unsynced_commits",
                &self.inner.commits.unsynced.load(Ordering::Relaxed),
            )
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn generic(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: source.into(),
    }
}

fn writer_gone() -> object_store::Error {
    generic("the store's writer thread stopped")
}

fn not_found(path: &str) -> object_store::Error {
    object_store::Error::NotFound {
        path: path.to_string(),
        source: format!("no object at {path}").into(),
    }
}

fn now_ms() -> i64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A fresh e-tag: random, so an object deleted and created again never
/// carries the e-tag of the one before.
fn new_e_tag() -> i64 {
    i64::from_ne_bytes(crate::run_id::unique_token().to_ne_bytes())
}

fn e_tag_text(e_tag: i64) -> String {
    format!("\"{:016x}\"", e_tag as u64)
}

/// Object attributes (content type and the like), which this store does
/// not keep: refused, as `object_store` asks of a store that lacks them.
fn refuse_attributes(attributes: &object_store::Attributes) -> object_store::Result<()> {
    if attributes.is_empty() {
        return Ok(());
    }
    Err(object_store::Error::NotImplemented {
        operation: "attributes".into(),
        implementer: STORE.into(),
    })
}

impl SqliteStore {
    /// A copy of `from` to `to` (only if `to` is absent, with `create`),
    /// and the removal of `from` with `remove_source`: one change.
    async fn copy(
        &self,
        from: &Path,
        to: &Path,
        create: bool,
        remove_source: bool,
    ) -> object_store::Result<()> {
        let (from, to) = (from.to_string(), to.to_string());
        self.write(|reply| Job::Copy {
            from,
            to,
            create,
            remove_source,
            reply,
        })
        .await
    }

    /// Lists `prefix` a page at a time, after `offset` if one is given.
    fn list_from(
        &self,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let (from, below) = bounds(prefix);
        let store = self.clone();
        let start = offset.map(|o| o.as_ref().to_string());
        futures::stream::try_unfold(Some(start), move |state| {
            let (store, from, below) = (store.clone(), from.clone(), below.clone());
            async move {
                let Some(after) = state else {
                    return Ok::<_, object_store::Error>(None);
                };
                let rows = store
                    .read(move |c| page(c, &from, after.as_deref(), below.as_deref()))
                    .await?;
                let next = match rows.last() {
                    Some(last) if rows.len() == PAGE => Some(Some(last.location.to_string())),
                    _ => None,
                };
                Ok(Some((
                    futures::stream::iter(rows.into_iter().map(Ok)),
                    next,
                )))
            }
        })
        .try_flatten()
        .boxed()
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for SqliteStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        refuse_attributes(&opts.attributes)?;
        let data = Bytes::from(payload);
        let path = location.to_string();
        self.write(|reply| Job::Put {
            path,
            data,
            mode: opts.mode,
            reply,
        })
        .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        refuse_attributes(&opts.attributes)?;
        Ok(Box::new(Upload::new(self.clone(), location.clone())))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let path = location.to_string();
        let inner = Arc::clone(&self.inner);
        let (opened, is_open) = oneshot::channel();
        let (pieces, rest) = tokio::sync::mpsc::channel(1);
        // One snapshot for the metadata and every byte: the read's thread
        // holds it (and its connection) until the last piece is taken, or
        // the stream is dropped.
        tokio::task::spawn_blocking(move || match inner.reader() {
            Ok(connection) => {
                read_object(&connection, &path, &options, opened, &pieces);
                inner.idle(connection);
            }
            Err(e) => drop(opened.send(Err(e))),
        });
        let (meta, range, first) = is_open.await.map_err(generic)??;
        let first = futures::stream::once(futures::future::ready(Ok(first)));
        let rest = futures::stream::unfold(rest, |mut rest| async move {
            rest.recv().await.map(|piece| (piece, rest))
        });
        Ok(GetResult {
            payload: GetResultPayload::Stream(first.chain(rest).boxed()),
            attributes: Default::default(),
            meta,
            range,
            extensions: Default::default(),
        })
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let mut out = Vec::with_capacity(ranges.len());
        for range in ranges {
            let options = GetOptions {
                range: Some(GetRange::Bounded(range.clone())),
                ..GetOptions::default()
            };
            out.push(self.get_opts(location, options).await?.bytes().await?);
        }
        Ok(out)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let store = self.clone();
        locations
            .ready_chunks(GROUP)
            .then(move |chunk| {
                let store = store.clone();
                async move {
                    let located: Vec<&Path> =
                        chunk.iter().filter_map(|p| p.as_ref().ok()).collect();
                    let durable = !located.iter().all(|p| is_unsynced_delete(p));
                    let paths: Vec<String> = located.iter().map(ToString::to_string).collect();
                    let deleted = match paths.is_empty() {
                        true => Ok(Vec::new()),
                        false => {
                            let job = |reply| Job::Delete {
                                paths,
                                durable,
                                reply,
                            };
                            store.write(job).await
                        }
                    };
                    // A path with no object is `NotFound`, as on a local
                    // folder: of two deletes of one object, one deleted it.
                    let out: Vec<object_store::Result<Path>> = match deleted {
                        Ok(found) => {
                            let mut found = found.into_iter();
                            chunk
                                .into_iter()
                                .map(|p| match (p, found.next()) {
                                    (Ok(p), Some(false)) => Err(not_found(p.as_ref())),
                                    (p, _) => p,
                                })
                                .collect()
                        }
                        Err(e) => {
                            let message = e.to_string();
                            chunk
                                .into_iter()
                                .map(|p| p.and_then(|_| Err(generic(message.clone()))))
                                .collect()
                        }
                    };
                    futures::stream::iter(out)
                }
            })
            .flatten()
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.list_from(prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.list_from(prefix, Some(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let (from, below) = bounds(prefix);
        self.read(move |c| {
            // One snapshot for the whole listing.
            let c = c.unchecked_transaction().map_err(generic)?;
            let mut listed = ListResult {
                common_prefixes: Vec::new(),
                objects: Vec::new(),
                extensions: Default::default(),
            };
            // One seek per child: past a folder's every object at once.
            let mut next = from.clone();
            loop {
                let row = first_from(&c, &next, below.as_deref())?;
                let Some((path, size, modified, e_tag)) = row else {
                    break;
                };
                let rest = &path[from.len()..];
                match rest.find('/') {
                    Some(end) => {
                        let folder = &path[..from.len() + end];
                        listed
                            .common_prefixes
                            .push(Path::parse(folder).map_err(generic)?);
                        next = format!("{folder}0");
                    }
                    None => {
                        next = format!("{path}\u{0}");
                        listed.objects.push(meta(path, size, modified, e_tag)?);
                    }
                }
            }
            Ok(listed)
        })
        .await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let create = matches!(options.mode, CopyMode::Create);
        self.copy(from, to, create, false).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        let create = matches!(options.target_mode, RenameTargetMode::Create);
        self.copy(from, to, create, true).await
    }
}

mod read;
#[cfg(test)]
mod tests;
mod upload;
mod writer;
