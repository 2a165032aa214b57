//! The journaled local store, [`SqliteStore`]: every object a row of one
//! SQLite database file, committed through its write-ahead log with one
//! sync per group of changes.

use std::fmt;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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
    MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RenameOptions, RenameTargetMode, UploadPart,
};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

/// How long a writer waits for another process's write transaction on the
/// same file before its change fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The stored format's version, kept in the file's `user_version`: a file
/// of a later version is refused, never read as this one; a file of
/// version 1 is rewritten as this version when a writer opens it
/// ([`FROM_VERSION_1`]).
const FORMAT_VERSION: i64 = 2;

/// The one table: an object per row, its path the key (compared byte by
/// byte, as `object_store` orders paths). The value is the last column: a
/// zero-filled value there is written without being held in memory, which
/// is how a large upload makes its row before its bytes are written in
/// ([`put_staged`]).
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS objects (
    path TEXT PRIMARY KEY NOT NULL,
    modified_ms INTEGER NOT NULL,
    e_tag INTEGER NOT NULL,
    data BLOB NOT NULL
)";

/// Version 1's table had the same columns with the value second: its rows,
/// moved into version 2's table in the transaction that opens the file (one
/// row at a time, each value read whole, as version 1 read it).
const FROM_VERSION_1: &str = "ALTER TABLE objects RENAME TO objects_version_1;
CREATE TABLE objects (
    path TEXT PRIMARY KEY NOT NULL,
    modified_ms INTEGER NOT NULL,
    e_tag INTEGER NOT NULL,
    data BLOB NOT NULL
);
INSERT INTO objects (path, modified_ms, e_tag, data)
    SELECT path, modified_ms, e_tag, data FROM objects_version_1;
DROP TABLE objects_version_1;";

/// How many bytes of a value are read or written at a time: a read of more
/// than this streams the value in pieces of this size, and a large upload
/// is written into its row a piece at a time.
const PIECE: usize = 1 << 20;

/// How many changes one transaction of the writer takes at most.
const GROUP: usize = 1_024;

/// How much of the database file a read connection maps into memory.
const MMAP_BYTES: i64 = 256 << 20;

/// How many rows a listing reads at a time.
const PAGE: usize = 1_000;

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
/// Large values take a piece (1 MiB) of memory at a time, not their size,
/// in memo and in SQLite alike. A multipart upload stages its parts in a
/// file beside the database that no name points to (the system removes it
/// when the upload ends, or its process dies), and its completion writes
/// them into the row a piece at a time, in the writer's transaction: other
/// changes, of this process and the others on the file, wait while it
/// copies. A read of more than a piece streams the value a piece at a time
/// from one snapshot, read as the stream is taken: the object as it was
/// when the read began, even if it is replaced or deleted meanwhile. While
/// such a read is open the write-ahead log cannot be wound back past it,
/// so the log grows with what is written until the read ends.
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

/// What the writer committed.
#[derive(Default)]
struct Commits {
    all: AtomicU64,
    unsynced: AtomicU64,
}

/// A change for the writer, and where its outcome goes once committed.
enum Job {
    Put {
        path: String,
        data: Bytes,
        mode: PutMode,
        reply: oneshot::Sender<object_store::Result<PutResult>>,
    },
    /// A multipart upload's completion: its bytes, staged in `file`.
    PutStaged {
        path: String,
        file: std::fs::File,
        len: u64,
        reply: oneshot::Sender<object_store::Result<PutResult>>,
    },
    Delete {
        paths: Vec<String>,
        /// Whether the delete must be synced before it is acknowledged:
        /// false when every path is a status hint or a due-run entry.
        durable: bool,
        /// For each path, whether there was an object to delete.
        reply: oneshot::Sender<object_store::Result<Vec<bool>>>,
    },
    Copy {
        from: String,
        to: String,
        create: bool,
        remove_source: bool,
        reply: oneshot::Sender<object_store::Result<()>>,
    },
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

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn open_writer(file: &FsPath, fsync: bool) -> Result<Connection, BoxError> {
    let connection = Connection::open(file)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!(
            "the database could not enter write-ahead-log mode (it is in {mode} mode)"
        )
        .into());
    }
    set_synchronous(&connection, fsync)?;
    connection.execute_batch("BEGIN IMMEDIATE")?;
    let version: i64 = connection.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let checked: Result<(), BoxError> = match version {
        0 => connection
            .execute_batch(SCHEMA)
            .and_then(|()| connection.pragma_update(None, "user_version", FORMAT_VERSION))
            .map_err(Into::into),
        1 => connection
            .execute_batch(FROM_VERSION_1)
            .and_then(|()| connection.pragma_update(None, "user_version", FORMAT_VERSION))
            .map_err(Into::into),
        FORMAT_VERSION => Ok(()),
        other => Err(format!(
            "the database holds format version {other}; this memo reads version {FORMAT_VERSION}"
        )
        .into()),
    };
    match checked {
        Ok(()) => connection.execute_batch("COMMIT")?,
        Err(e) => {
            connection.execute_batch("ROLLBACK").ok();
            return Err(e);
        }
    }
    Ok(connection)
}

fn set_synchronous(connection: &Connection, fsync: bool) -> rusqlite::Result<()> {
    let level = if fsync { "FULL" } else { "NORMAL" };
    connection.pragma_update(None, "synchronous", level)
}

fn open_reader(file: &FsPath) -> rusqlite::Result<Connection> {
    let connection = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.pragma_update(None, "query_only", true)?;
    // Pages read through a map of the file rather than copied into each
    // connection's cache, which every commit of the writer invalidates.
    connection.pragma_update(None, "mmap_size", MMAP_BYTES)?;
    Ok(connection)
}

/// The writer thread: takes what is queued (up to [`GROUP`] changes),
/// applies it in one transaction, commits it (one sync of the log, with
/// `fsync`), then answers each change; what queued meanwhile is the next
/// group.
///
/// A group of deletes of status hints and due-run entries only commits
/// without a sync (`synchronous = NORMAL` for that transaction), as a
/// [`LocalFolder`](crate::store::LocalFolder) deletes them without a sync:
/// memo checks each such entry against its run before acting on it, so a
/// power loss that undoes the delete leaves what a crash just before it
/// left. The log keeps the order of commits, so the next synced commit
/// syncs it too, and a power loss can undo only such deletes at the end.
fn write_loop(
    mut connection: Connection,
    fsync: bool,
    queue: mpsc::Receiver<Job>,
    commits: &Commits,
) {
    let mut synced = fsync;
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let sync = fsync && group.iter().any(Job::is_durable);
        if sync != synced {
            match set_synchronous(&connection, sync) {
                Ok(()) => synced = sync,
                // Left as it was: synced, or (if it was unsynced) a
                // durable group is refused below rather than not synced.
                Err(e) => tracing::warn!(error = %e, "the SQLite store's sync setting kept"),
            }
        }
        if sync && !synced {
            for job in group {
                fail(job, "the store could not turn its sync back on");
            }
            continue;
        }
        commit_group(&mut connection, group, || {
            commits.all.fetch_add(1, Ordering::Relaxed);
            if !sync {
                commits.unsynced.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

impl Job {
    /// Whether the change must be synced before it is acknowledged.
    fn is_durable(&self) -> bool {
        match self {
            Job::Delete { durable, .. } => *durable,
            Job::Put { .. } | Job::PutStaged { .. } | Job::Copy { .. } => true,
        }
    }
}

/// Whether a delete of `location` may be acknowledged without a sync: the
/// local folder's rule (a status hint or a due-run entry, matched whole).
#[cfg(unix)]
fn is_unsynced_delete(location: &Path) -> bool {
    crate::local::is_unsynced_delete(location)
}

#[cfg(not(unix))]
fn is_unsynced_delete(_: &Path) -> bool {
    false
}

/// An applied change's answer, sent once its group's fate is known: its own
/// outcome if the group committed, else the group's error (`Some`).
type Answer = Box<dyn FnOnce(Option<&str>)>;

fn answer<T: 'static>(
    reply: oneshot::Sender<object_store::Result<T>>,
    out: object_store::Result<T>,
) -> Answer {
    Box::new(move |failed| {
        let sent = match failed {
            None => out,
            Some(message) => Err(generic(message.to_owned())),
        };
        drop(reply.send(sent));
    })
}

/// Applies and commits one group, calls `committed` if it committed, then
/// answers each change.
fn commit_group(connection: &mut Connection, group: Vec<Job>, committed: impl FnOnce()) {
    let mut answers = Vec::with_capacity(group.len());
    let transaction =
        match connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
            Ok(t) => t,
            Err(e) => {
                let message = e.to_string();
                for job in group {
                    fail(job, &message);
                }
                return;
            }
        };
    // An error that ends the transaction (SQLite rolls back on a full disk
    // or an I/O error) fails the whole group, and what is left of it is not
    // applied: outside the transaction each change would commit alone.
    let mut rolled_back = false;
    for job in group {
        if rolled_back {
            fail(
                job,
                "an earlier change of its group rolled the transaction back",
            );
            continue;
        }
        match job {
            Job::Put {
                path,
                data,
                mode,
                reply,
            } => {
                let out = put(&transaction, &path, &data, mode);
                answers.push(answer(reply, out));
            }
            Job::PutStaged {
                path,
                file,
                len,
                reply,
            } => {
                let out = put_staged(&transaction, &path, file, len);
                answers.push(answer(reply, out));
            }
            Job::Delete { paths, reply, .. } => {
                let out = delete(&transaction, &paths);
                answers.push(answer(reply, out));
            }
            Job::Copy {
                from,
                to,
                create,
                remove_source,
                reply,
            } => {
                let out = copy(&transaction, &from, &to, create, remove_source);
                answers.push(answer(reply, out));
            }
        }
        rolled_back = transaction.is_autocommit();
    }
    let outcome = match rolled_back {
        true => Err("an error rolled the transaction back".to_string()),
        false => transaction
            .commit()
            .map_err(|e| format!("the commit failed: {e}")),
    };
    let failed = outcome.as_ref().err().map(String::as_str);
    if failed.is_none() {
        committed();
    }
    for answer in answers {
        answer(failed);
    }
}

fn fail(job: Job, message: &str) {
    let error = || generic(format!("the change could not start: {message}"));
    match job {
        Job::Put { reply, .. } | Job::PutStaged { reply, .. } => drop(reply.send(Err(error()))),
        Job::Delete { reply, .. } => drop(reply.send(Err(error()))),
        Job::Copy { reply, .. } => drop(reply.send(Err(error()))),
    }
}

fn put(
    connection: &Connection,
    path: &str,
    data: &[u8],
    mode: PutMode,
) -> object_store::Result<PutResult> {
    let e_tag = new_e_tag();
    let written = match mode {
        PutMode::Overwrite => connection
            .prepare_cached(
                "INSERT INTO objects (path, data, modified_ms, e_tag) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (path) DO UPDATE SET data = excluded.data,
                 modified_ms = excluded.modified_ms, e_tag = excluded.e_tag",
            )
            .and_then(|mut s| s.execute(params![path, data, now_ms(), e_tag])),
        PutMode::Create => connection
            .prepare_cached(
                "INSERT INTO objects (path, data, modified_ms, e_tag) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (path) DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![path, data, now_ms(), e_tag])),
        PutMode::Update(version) => {
            let Some(expected) = version.e_tag else {
                return Err(generic("a conditional update needs an e-tag"));
            };
            let changed = connection
                .execute(
                    "UPDATE objects SET data = ?2, modified_ms = ?3, e_tag = ?4
                     WHERE path = ?1 AND printf('\"%016x\"', e_tag) = ?5",
                    params![path, data, now_ms(), e_tag, expected],
                )
                .map_err(generic)?;
            if changed == 0 {
                return Err(object_store::Error::Precondition {
                    path: path.to_string(),
                    source: format!("{path} is missing or is not at e-tag {expected}").into(),
                });
            }
            Ok(changed)
        }
    }
    .map_err(generic)?;
    if written == 0 {
        return Err(object_store::Error::AlreadyExists {
            path: path.to_string(),
            source: format!("{path} exists").into(),
        });
    }
    Ok(PutResult {
        e_tag: Some(e_tag_text(e_tag)),
        version: None,
        extensions: Default::default(),
    })
}

/// Writes the object at `path` (replacing any) from the `len` bytes
/// staged in `file`, a [`PIECE`] at a time: its row is made with a
/// zero-filled value of that length, which SQLite writes without holding
/// it (the value is the row's last column), and the staged bytes are
/// written into it. Under a savepoint: an error leaves the object as it
/// was, and the rest of the group goes on.
fn put_staged(
    connection: &Connection,
    path: &str,
    mut file: std::fs::File,
    len: u64,
) -> object_store::Result<PutResult> {
    connection
        .execute_batch("SAVEPOINT staged")
        .map_err(generic)?;
    let written = write_staged(connection, path, &mut file, len);
    let end = match written {
        Ok(_) => "RELEASE staged",
        Err(_) => "ROLLBACK TO staged; RELEASE staged",
    };
    // An error that rolled the whole transaction back took the savepoint
    // with it: the group fails (`commit_group`), and the first error says
    // why.
    let ended = connection.execute_batch(end).map_err(generic);
    let e_tag = written?;
    ended?;
    Ok(PutResult {
        e_tag: Some(e_tag_text(e_tag)),
        version: None,
        extensions: Default::default(),
    })
}

/// [`put_staged`]'s writes: the row, then its value; the row's e-tag.
fn write_staged(
    connection: &Connection,
    path: &str,
    file: &mut std::fs::File,
    len: u64,
) -> object_store::Result<i64> {
    use std::io::{Read, Seek, SeekFrom};

    let size = i64::try_from(len)
        .map_err(|_| generic(format!("{path}: a value of {len} bytes is too large")))?;
    let e_tag = new_e_tag();
    delete(connection, &[path.to_string()])?;
    connection
        .prepare_cached(
            "INSERT INTO objects (path, modified_ms, e_tag, data)
             VALUES (?1, ?2, ?3, zeroblob(?4))",
        )
        .and_then(|mut s| s.execute(params![path, now_ms(), e_tag, size]))
        .map_err(generic)?;
    if len == 0 {
        return Ok(e_tag);
    }
    let row = connection.last_insert_rowid();
    let mut value = connection
        .blob_open(rusqlite::MAIN_DB, c"objects", c"data", row, false)
        .map_err(generic)?;
    file.seek(SeekFrom::Start(0)).map_err(generic)?;
    let mut piece = vec![0; PIECE.min(value.len())];
    let mut at = 0;
    while at < value.len() {
        let n = piece.len().min(value.len() - at);
        file.read_exact(&mut piece[..n]).map_err(generic)?;
        value.write_all_at(&piece[..n], at).map_err(generic)?;
        at += n;
    }
    value.close().map_err(generic)?;
    Ok(e_tag)
}

/// Deletes `paths`: for each, whether there was an object to delete.
fn delete(connection: &Connection, paths: &[String]) -> object_store::Result<Vec<bool>> {
    let mut statement = connection
        .prepare_cached("DELETE FROM objects WHERE path = ?1")
        .map_err(generic)?;
    paths
        .iter()
        .map(|path| Ok(statement.execute([path]).map_err(generic)? > 0))
        .collect()
}

fn copy(
    connection: &Connection,
    from: &str,
    to: &str,
    create: bool,
    remove_source: bool,
) -> object_store::Result<()> {
    let conflict = if create {
        "ON CONFLICT (path) DO NOTHING"
    } else {
        "ON CONFLICT (path) DO UPDATE SET data = excluded.data,
             modified_ms = excluded.modified_ms, e_tag = excluded.e_tag"
    };
    let exists: bool = connection
        .query_row("SELECT 1 FROM objects WHERE path = ?1", [from], |_| Ok(()))
        .optional()
        .map_err(generic)?
        .is_some();
    if !exists {
        return Err(not_found(from));
    }
    let copied = connection
        .execute(
            &format!(
                "INSERT INTO objects (path, data, modified_ms, e_tag)
                 SELECT ?2, data, ?3, ?4 FROM objects WHERE path = ?1 {conflict}"
            ),
            params![from, to, now_ms(), new_e_tag()],
        )
        .map_err(generic)?;
    if copied == 0 {
        return Err(object_store::Error::AlreadyExists {
            path: to.to_string(),
            source: format!("{to} exists").into(),
        });
    }
    if remove_source && from != to {
        delete(connection, &[from.to_string()])?;
    }
    Ok(())
}

/// The rows of a listing: what a row holds of an object but its data.
fn meta(path: String, size: i64, modified_ms: i64, e_tag: i64) -> object_store::Result<ObjectMeta> {
    let location = Path::parse(&path).map_err(generic)?;
    let last_modified = chrono::DateTime::from_timestamp_millis(modified_ms).ok_or_else(|| {
        generic(format!(
            "{path}: modification time {modified_ms} ms is out of range"
        ))
    })?;
    Ok(ObjectMeta {
        location,
        last_modified,
        size: u64::try_from(size).unwrap_or(0),
        e_tag: Some(e_tag_text(e_tag)),
        version: None,
    })
}

/// The paths a listing of `prefix` covers: from `prefix/` (inclusive) to
/// `prefix0` (exclusive, `0` being the byte after `/`); everything for the
/// root.
fn bounds(prefix: Option<&Path>) -> (String, Option<String>) {
    match prefix.map(Path::as_ref).filter(|p| !p.is_empty()) {
        None => (String::new(), None),
        Some(p) => (format!("{p}/"), Some(format!("{p}0"))),
    }
}

/// One page of a listing: the objects after `after` (or from `from`) below
/// `below`, at most [`PAGE`]. Each bound is a bound of the index's range,
/// so a page reads what it returns and no row beyond.
fn page(
    connection: &Connection,
    from: &str,
    after: Option<&str>,
    below: Option<&str>,
) -> object_store::Result<Vec<ObjectMeta>> {
    let (start, start_op) = match after {
        Some(after) if after >= from => (after, ">"),
        _ => (from, ">="),
    };
    let sql = format!(
        "SELECT path, length(data), modified_ms, e_tag FROM objects
         WHERE path {start_op} ?1 {} ORDER BY path LIMIT {PAGE}",
        if below.is_some() { "AND path < ?2" } else { "" }
    );
    let mut statement = connection.prepare_cached(&sql).map_err(generic)?;
    let read = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?));
    let rows = match below {
        Some(below) => statement.query_map(params![start, below], read),
        None => statement.query_map(params![start], read),
    }
    .map_err(generic)?;
    rows.map(|row| {
        let (path, size, modified, e_tag) = row.map_err(generic)?;
        meta(path, size, modified, e_tag)
    })
    .collect()
}

/// The first object at or after `from` and below `below`: one seek of the
/// index.
fn first_from(
    connection: &Connection,
    from: &str,
    below: Option<&str>,
) -> object_store::Result<Option<(String, i64, i64, i64)>> {
    let sql = format!(
        "SELECT path, length(data), modified_ms, e_tag FROM objects
         WHERE path >= ?1 {} ORDER BY path LIMIT 1",
        if below.is_some() { "AND path < ?2" } else { "" }
    );
    let mut statement = connection.prepare_cached(&sql).map_err(generic)?;
    let read = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?));
    match below {
        Some(below) => statement.query_row(params![from, below], read),
        None => statement.query_row(params![from], read),
    }
    .optional()
    .map_err(generic)
}

/// What a read opened: the object's metadata, the range read, and its
/// first piece (all of it, unless it is more than a [`PIECE`]).
type Opened = object_store::Result<(ObjectMeta, Range<u64>, Bytes)>;

/// Reads `path` as `options` ask, in one snapshot of the database: sends
/// the metadata, the range and the first piece to `opened`, then the rest a
/// [`PIECE`] at a time to `pieces`, each read when the last was taken, so a
/// read holds one piece whatever the value's size. Stops when the reader
/// drops its stream.
fn read_object(
    connection: &Connection,
    path: &str,
    options: &GetOptions,
    opened: oneshot::Sender<Opened>,
    pieces: &tokio::sync::mpsc::Sender<object_store::Result<Bytes>>,
) {
    // A deferred transaction: its snapshot is taken by the first read.
    let snapshot = match connection.unchecked_transaction().map_err(generic) {
        Ok(t) => t,
        Err(e) => return drop(opened.send(Err(e))),
    };
    let (meta, range, value) = match open_read(&snapshot, path, options) {
        Ok(read) => read,
        Err(e) => return drop(opened.send(Err(e))),
    };
    let value = match value {
        Value::Nothing => return drop(opened.send(Ok((meta, range, Bytes::new())))),
        Value::Whole(bytes) => return drop(opened.send(Ok((meta, range, bytes)))),
        Value::Pieces(value) => value,
    };
    // The range is within the value: `as_range` checked it against the size.
    let piece = |from: u64| -> object_store::Result<Bytes> {
        let len = (range.end - from).min(PIECE as u64) as usize;
        let mut bytes = vec![0; len];
        value
            .read_at_exact(&mut bytes, from as usize)
            .map_err(generic)?;
        Ok(Bytes::from(bytes))
    };
    let first = match piece(range.start) {
        Ok(first) => first,
        Err(e) => return drop(opened.send(Err(e))),
    };
    let mut at = range.start + first.len() as u64;
    if opened.send(Ok((meta, range.clone(), first))).is_err() {
        return;
    }
    while at < range.end {
        let next = piece(at);
        let failed = next.is_err();
        if let Ok(bytes) = &next {
            at += bytes.len() as u64;
        }
        // An error ends the stream; so does a reader that dropped it.
        if pieces.blocking_send(next).is_err() || failed {
            return;
        }
    }
}

/// What a read takes of an object's value.
enum Value<'c> {
    /// Nothing: a `HEAD`, or an empty range.
    Nothing,
    /// The range, read at once: the object is a piece or less.
    Whole(Bytes),
    /// The object's value, to read the range from a piece at a time.
    Pieces(rusqlite::blob::Blob<'c>),
}

/// The object at `path` as `snapshot` holds it: its metadata, the range
/// `options` ask of it, and what to read that range from.
fn open_read<'c>(
    snapshot: &'c Connection,
    path: &str,
    options: &GetOptions,
) -> object_store::Result<(ObjectMeta, Range<u64>, Value<'c>)> {
    let found = snapshot
        .prepare_cached(
            "SELECT length(data), modified_ms, e_tag, rowid FROM objects WHERE path = ?1",
        )
        .and_then(|mut s| {
            s.query_row([path], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .optional()
        })
        .map_err(generic)?;
    let Some((size, modified, e_tag, row)) = found else {
        return Err(not_found(path));
    };
    let meta = meta(path.to_string(), size, modified, e_tag)?;
    options.check_preconditions(&meta)?;
    let range = match &options.range {
        Some(range) => range.as_range(meta.size).map_err(generic)?,
        None => 0..meta.size,
    };
    if options.head || range.is_empty() {
        return Ok((meta, range, Value::Nothing));
    }
    if meta.size <= PIECE as u64 {
        // In one statement: opening a blob compiles a statement of its own.
        let bytes: Option<Vec<u8>> = snapshot
            .prepare_cached("SELECT substr(data, ?2, ?3) FROM objects WHERE rowid = ?1")
            .and_then(|mut s| {
                let (start, len) = (range.start as i64 + 1, (range.end - range.start) as i64);
                s.query_row(params![row, start, len], |r| r.get(0))
            })
            .map_err(generic)?;
        return Ok((
            meta,
            range,
            Value::Whole(Bytes::from(bytes.unwrap_or_default())),
        ));
    }
    let value = snapshot
        .blob_open(rusqlite::MAIN_DB, c"objects", c"data", row, true)
        .map_err(generic)?;
    Ok((meta, range, Value::Pieces(value)))
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
        Ok(Box::new(Upload {
            store: self.clone(),
            location: location.clone(),
            staged: Arc::new(Mutex::new(None)),
            len: 0,
        }))
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

/// A multipart upload: its parts staged in a file beside the database
/// that no name points to (the system removes it once it is closed, when
/// the upload ends or its process dies), written into the object's row
/// when it completes. It holds no part in memory once the part is staged.
#[derive(Debug)]
struct Upload {
    store: SqliteStore,
    location: Path,
    /// The staging file, made with the first part.
    staged: Arc<Mutex<Option<std::fs::File>>>,
    /// Where the next part starts in it.
    len: u64,
}

impl Upload {
    /// The folder the staging file is made in: the database's, so that
    /// what is staged takes the room the database will.
    fn folder(&self) -> PathBuf {
        match self.store.inner.file.parent() {
            Some(folder) if !folder.as_os_str().is_empty() => folder.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }
}

#[async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        use std::io::{Seek, SeekFrom, Write};

        let at = self.len;
        self.len += data.content_length() as u64;
        let staged = Arc::clone(&self.staged);
        let folder = self.folder();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut staged = lock(&staged);
                let file = match staged.as_mut() {
                    Some(file) => file,
                    None => staged.insert(tempfile::tempfile_in(&folder)?),
                };
                // Parts may be staged in any order: each at its place.
                file.seek(SeekFrom::Start(at))?;
                for bytes in &data {
                    file.write_all(bytes)?;
                }
                Ok::<_, std::io::Error>(())
            })
            .await
            .map_err(generic)?
            .map_err(generic)
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let file = lock(&self.staged).take();
        let len = std::mem::take(&mut self.len);
        let Some(file) = file else {
            if len > 0 {
                return Err(generic(
                    "the upload was completed before its parts were written",
                ));
            }
            // No part: an empty value.
            return self
                .store
                .put_opts(&self.location, PutPayload::default(), PutOptions::default())
                .await;
        };
        let path = self.location.to_string();
        self.store
            .write(|reply| Job::PutStaged {
                path,
                file,
                len,
                reply,
            })
            .await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        drop(lock(&self.staged).take());
        self.len = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
