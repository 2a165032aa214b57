//! Reading: a read connection, an object's value (whole, or a piece at a
//! time from one snapshot), and the pages of a listing.

use std::ops::Range;
use std::path::Path as FsPath;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, ObjectMeta};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

use super::{BUSY_TIMEOUT, PIECE, e_tag_text, generic, not_found};

/// How much of the database file a read connection maps into memory.
const MMAP_BYTES: i64 = 256 << 20;

/// How many rows a listing reads at a time.
pub(super) const PAGE: usize = 1_000;

/// A read connection to `file`: it reads only, and waits for a writer as
/// long as a writer waits for another.
pub(super) fn open_reader(file: &FsPath) -> rusqlite::Result<Connection> {
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

/// The rows of a listing: what a row holds of an object but its data.
pub(super) fn meta(
    path: String,
    size: i64,
    modified_ms: i64,
    e_tag: i64,
) -> object_store::Result<ObjectMeta> {
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
pub(super) fn bounds(prefix: Option<&Path>) -> (String, Option<String>) {
    match prefix.map(Path::as_ref).filter(|p| !p.is_empty()) {
        None => (String::new(), None),
        Some(p) => (format!("{p}/"), Some(format!("{p}0"))),
    }
}

/// One page of a listing: the objects after `after` (or from `from`) below
/// `below`, at most [`PAGE`]. Each bound is a bound of the index's range,
/// so a page reads what it returns and no row beyond.
pub(super) fn page(
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
pub(super) fn first_from(
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
/// [`PIECE`] at a time to `pieces`, which holds one piece ahead of the
/// reader, so a read holds a few pieces whatever the value's size. Stops
/// when the reader drops its stream.
pub(super) fn read_object(
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
