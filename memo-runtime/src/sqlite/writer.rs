//! The writer: the one thread per store that applies changes, a group at
//! a time, in one transaction each; the file's format and its version.

use std::path::Path as FsPath;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{PutMode, PutResult};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use super::{BUSY_TIMEOUT, PIECE, e_tag_text, generic, new_e_tag, not_found, now_ms};

/// The stored format's version, kept in the file's `user_version`: a file
/// of a later version is refused, never read as this one; a file of
/// version 1 is rewritten as this version when a writer opens it
/// ([`FROM_VERSION_1`]).
const FORMAT_VERSION: i64 = 2;

/// The one table: an object per row, its path the key (compared byte by
/// byte, as `object_store` orders paths). The value is the last column: a
/// zero-filled value there is written without being held in memory, which
/// is how a large upload makes its row before its bytes are written in
/// ([`put_staged`]). A macro, so that [`FROM_VERSION_1`] makes the same.
macro_rules! objects_table {
    () => {
        "CREATE TABLE IF NOT EXISTS objects (
    path TEXT PRIMARY KEY NOT NULL,
    modified_ms INTEGER NOT NULL,
    e_tag INTEGER NOT NULL,
    data BLOB NOT NULL
)"
    };
}

/// The table of a new file.
const SCHEMA: &str = objects_table!();

/// Version 1's table had the same columns with the value second: its rows,
/// moved into version 2's table in the transaction that opens the file (one
/// row at a time, each value read whole, as version 1 read it).
const FROM_VERSION_1: &str = concat!(
    "ALTER TABLE objects RENAME TO objects_version_1;\n",
    objects_table!(),
    ";\nINSERT INTO objects (path, modified_ms, e_tag, data)
    SELECT path, modified_ms, e_tag, data FROM objects_version_1;
DROP TABLE objects_version_1;"
);

/// How large the write-ahead log may stay once a checkpoint emptied it: a
/// transaction that wrote a large value grows the log by its size, and
/// SQLite would otherwise keep the file at that size for good.
const LOG_KEPT_BYTES: i64 = 64 << 20;

/// How many changes one transaction of the writer takes at most.
pub(super) const GROUP: usize = 1_024;

/// What the writer committed.
#[derive(Default)]
pub(super) struct Commits {
    pub(super) all: AtomicU64,
    pub(super) unsynced: AtomicU64,
}

/// A change for the writer, and where its outcome goes once committed.
pub(super) enum Job {
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

type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub(super) fn open_writer(file: &FsPath, fsync: bool) -> Result<Connection, BoxError> {
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
    connection.pragma_update(None, "journal_size_limit", LOG_KEPT_BYTES)?;
    connection.execute_batch("BEGIN IMMEDIATE")?;
    let version: i64 = connection.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    // What makes a new file, or one of an earlier version, this version's.
    let upgrade = match version {
        0 => Ok(Some(SCHEMA)),
        1 => Ok(Some(FROM_VERSION_1)),
        FORMAT_VERSION => Ok(None),
        other => Err(format!(
            "the database holds format version {other}; this memo reads version {FORMAT_VERSION}"
        )),
    };
    let checked: Result<(), BoxError> = match upgrade {
        Ok(Some(batch)) => connection
            .execute_batch(batch)
            .and_then(|()| connection.pragma_update(None, "user_version", FORMAT_VERSION))
            .map_err(Into::into),
        Ok(None) => Ok(()),
        Err(refused) => Err(refused.into()),
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
pub(super) fn write_loop(
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
pub(super) fn is_unsynced_delete(location: &Path) -> bool {
    crate::local::is_unsynced_delete(location)
}

#[cfg(not(unix))]
pub(super) fn is_unsynced_delete(_: &Path) -> bool {
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
pub(super) fn commit_group(connection: &mut Connection, group: Vec<Job>, committed: impl FnOnce()) {
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
