use std::sync::Arc;

use object_store::integration::*;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};

use super::writer::commit_group;
use super::*;
use rusqlite::OptionalExtension;

fn opened() -> (tempfile::TempDir, SqliteStore) {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(folder.path().join("nested").join("memo.db")).unwrap();
    (folder, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_object_stores_own_conformance_suite() {
    let (_folder, store) = opened();
    put_get_delete_list(&store).await;
    list_with_offset_exclusivity(&store).await;
    get_opts(&store).await;
    put_opts(&store, true).await;
    list_uses_directories_correctly(&store).await;
    list_with_delimiter(&store).await;
    rename_and_copy(&store).await;
    copy_if_not_exists(&store).await;
    copy_rename_nonexistent_object(&store).await;
    stream_get(&store).await;
    // Attributes it does not keep are refused, not dropped.
    let mut attributes = object_store::Attributes::new();
    attributes.insert(object_store::Attribute::ContentType, "text/plain".into());
    let options = PutOptions {
        attributes,
        ..PutOptions::default()
    };
    let refused = store
        .put_opts(&Path::from("typed"), "x".into(), options)
        .await;
    assert!(matches!(
        refused,
        Err(object_store::Error::NotImplemented { .. })
    ));
    assert!(store.head(&Path::from("typed")).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_the_conformance_suite_without_fsync() {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with_fsync(folder.path().join("memo.db"), false).unwrap();
    assert!(!store.fsync());
    put_get_delete_list(&store).await;
    put_opts(&store, true).await;
    list_with_delimiter(&store).await;
}

/// The pragmas that make an acknowledged commit survive a power loss, read
/// back from the writer's own file.
#[tokio::test]
async fn commits_through_a_write_ahead_log_synced_at_each_commit_by_default() {
    let (folder, store) = opened();
    assert!(store.fsync());
    let file = folder.path().join("nested").join("memo.db");
    assert_eq!(store.file(), file);
    let writer = open_writer(&file, true).unwrap();
    let mode: String = writer
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let synchronous: i64 = writer
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(synchronous, 2, "FULL");
    let writer = open_writer(&file, false).unwrap();
    let synchronous: i64 = writer
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(synchronous, 1, "NORMAL");
}

/// The stored format: the table and the version a file carries.
#[test]
fn the_schema_and_its_version_are_pinned() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("memo.db");
    drop(SqliteStore::open(&file).unwrap());
    let c = Connection::open(&file).unwrap();
    assert_version_2(&c);
}

/// Version 2's table: the value last.
const VERSION_2_TABLE: &str = "CREATE TABLE objects (\n    path TEXT PRIMARY KEY NOT NULL,\n    \
     modified_ms INTEGER NOT NULL,\n    e_tag INTEGER NOT NULL,\n    data BLOB NOT NULL\n)";

/// Fails unless the file `c` has open is of version 2, with its table.
fn assert_version_2(c: &Connection) {
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2);
    assert_eq!(objects_table(c), VERSION_2_TABLE);
}

/// How `objects` is declared in the file `c` has open.
fn objects_table(c: &Connection) -> String {
    c.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'objects'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// A file of version 1 (the value the table's second column), as that
/// version made it: opened, it is rewritten as version 2 with every object,
/// its time and its e-tag kept, and read as before.
#[tokio::test]
async fn a_version_1_file_is_rewritten_as_version_2_when_opened() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("memo.db");
    let c = Connection::open(&file).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE IF NOT EXISTS objects (
             path TEXT PRIMARY KEY NOT NULL,
             data BLOB NOT NULL,
             modified_ms INTEGER NOT NULL,
             e_tag INTEGER NOT NULL
         );
         INSERT INTO objects VALUES ('a/one', x'01020304', 1700000000000, 42);
         INSERT INTO objects VALUES ('a/two', x'', 1700000000001, -7);
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(c);

    let store = SqliteStore::open(&file).unwrap();
    let c = Connection::open(&file).unwrap();
    assert_version_2(&c);
    let tables: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1, "the old table is dropped");

    let one = store.get(&Path::from("a/one")).await.unwrap();
    assert_eq!(one.meta.e_tag.as_deref(), Some("\"000000000000002a\""));
    assert_eq!(one.meta.last_modified.timestamp_millis(), 1_700_000_000_000);
    assert_eq!(one.bytes().await.unwrap().as_ref(), &[1, 2, 3, 4]);
    let two = store.get(&Path::from("a/two")).await.unwrap();
    assert_eq!(two.meta.e_tag.as_deref(), Some("\"fffffffffffffff9\""));
    assert!(two.bytes().await.unwrap().is_empty());
    // And a second opening finds version 2 as it is.
    drop(store);
    drop(SqliteStore::open(&file).unwrap());
    assert_eq!(objects_table(&c), VERSION_2_TABLE);
}

#[test]
fn a_file_of_another_format_version_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("memo.db");
    drop(SqliteStore::open(&file).unwrap());
    Connection::open(&file)
        .unwrap()
        .pragma_update(None, "user_version", 3)
        .unwrap();
    let error = SqliteStore::open(&file).unwrap_err().to_string();
    assert!(error.contains("format version 3"), "{error}");
}

#[test]
fn a_file_that_is_not_a_database_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("memo.db");
    std::fs::write(&file, vec![b'x'; 4096]).unwrap();
    assert!(SqliteStore::open(&file).is_err());
}

/// A writer that finds another process's transaction holding the file's
/// write lock waits for it, rather than failing, and commits once it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_waits_for_another_processs_transaction_and_then_commits() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("memo.db");
    let store = SqliteStore::open(&file).unwrap();
    let other = Connection::open(&file).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let path = Path::from("waits/for/the/lock");
    let put = tokio::spawn({
        let store = store.clone();
        let path = path.clone();
        async move { store.put(&path, vec![1u8].into()).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!put.is_finished(), "the put waits while the lock is held");
    other.execute_batch("COMMIT").unwrap();
    put.await.unwrap().unwrap();
    assert!(store.head(&path).await.is_ok());
}

/// Two stores on one file, as two processes: of many creates of one path
/// racing from both, exactly one succeeds, and both read its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_stores_racing_creates_on_one_file_exactly_one_wins_each_path() {
    let (folder, first) = opened();
    let second = SqliteStore::open(folder.path().join("nested").join("memo.db")).unwrap();
    let create = PutOptions::from(PutMode::Create);
    let mut racers = Vec::new();
    for n in 0..40u32 {
        let store = if n % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        let options = create.clone();
        racers.push(tokio::spawn(async move {
            let path = Path::from(format!("race/{}", n % 10));
            let won = store.put_opts(&path, n.to_string().into(), options).await;
            match won {
                Ok(_) => Some((n % 10, n)),
                Err(object_store::Error::AlreadyExists { .. }) => None,
                Err(e) => panic!("{e}"),
            }
        }));
    }
    let mut winners = std::collections::BTreeMap::new();
    for racer in racers {
        if let Some((path, n)) = racer.await.unwrap() {
            assert!(
                winners.insert(path, n).is_none(),
                "two creates of race/{path} won"
            );
        }
    }
    assert_eq!(winners.len(), 10);
    for (path, n) in winners {
        let path = Path::from(format!("race/{path}"));
        for store in [&first, &second] {
            let read = store.get(&path).await.unwrap().bytes().await.unwrap();
            assert_eq!(read, n.to_string().as_bytes());
        }
    }
}

/// What a store acknowledged is in the file for a store opened after it
/// is gone, as for a process started after a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_acknowledged_is_read_by_the_next_store_on_the_file() {
    let (folder, store) = opened();
    let file = folder.path().join("nested").join("memo.db");
    let writes: Vec<_> = (0..100)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .put_opts(
                        &Path::from(format!("a/{n:03}")),
                        vec![n as u8; n].into(),
                        PutMode::Create.into(),
                    )
                    .await
                    .unwrap();
            })
        })
        .collect();
    for write in writes {
        write.await.unwrap();
    }
    store.delete(&Path::from("a/007")).await.unwrap();
    drop(store);
    let next = SqliteStore::open(&file).unwrap();
    let listed: Vec<ObjectMeta> = next
        .list(Some(&Path::from("a")))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed.len(), 99);
    assert!(
        listed.windows(2).all(|w| w[0].location < w[1].location),
        "in order"
    );
    let read = next
        .get(&Path::from("a/042"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(read, vec![42u8; 42]);
    assert!(matches!(
        next.get(&Path::from("a/007")).await,
        Err(object_store::Error::NotFound { .. })
    ));
}

/// A listing pages through more rows than one page, in order, and a
/// listing with a delimiter steps over a folder's objects however many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_page_and_a_delimited_listing_steps_over_folders() {
    let (_folder, store) = opened();
    let paths: Vec<Path> = (0..2_500)
        .map(|n| Path::from(format!("p/{}/{n:05}", n % 3)))
        .collect();
    let puts = futures::stream::iter(paths.iter().cloned())
        .map(|p| {
            let store = store.clone();
            async move { store.put(&p, "x".into()).await }
        })
        .buffer_unordered(64);
    puts.try_collect::<Vec<_>>().await.unwrap();
    store.put(&Path::from("p/top"), "y".into()).await.unwrap();
    store.put(&Path::from("p0"), "z".into()).await.unwrap();
    store.put(&Path::from("p.x/a"), "z".into()).await.unwrap();

    let listed: Vec<Path> = store
        .list(Some(&Path::from("p")))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .unwrap();
    let mut expected: Vec<Path> = paths.clone();
    expected.push(Path::from("p/top"));
    expected.sort();
    assert_eq!(listed, expected);

    let after = Path::from("p/1/02000");
    let rest: Vec<Path> = store
        .list_with_offset(Some(&Path::from("p")), &after)
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .unwrap();
    let expected_rest: Vec<Path> = expected.iter().filter(|p| **p > after).cloned().collect();
    assert_eq!(rest, expected_rest);

    let delimited = store
        .list_with_delimiter(Some(&Path::from("p")))
        .await
        .unwrap();
    let folders: Vec<&str> = delimited
        .common_prefixes
        .iter()
        .map(|p| p.as_ref())
        .collect();
    assert_eq!(folders, ["p/0", "p/1", "p/2"]);
    let objects: Vec<&str> = delimited
        .objects
        .iter()
        .map(|m| m.location.as_ref())
        .collect();
    assert_eq!(objects, ["p/top"]);
    let root = store.list_with_delimiter(None).await.unwrap();
    let folders: Vec<&str> = root.common_prefixes.iter().map(|p| p.as_ref()).collect();
    // In the order of the paths below them: `.` sorts before `/`.
    assert_eq!(folders, ["p.x", "p"]);
    let objects: Vec<&str> = root.objects.iter().map(|m| m.location.as_ref()).collect();
    assert_eq!(objects, ["p0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multipart_upload_is_whole_or_absent() {
    let (_folder, store) = opened();
    let path = Path::from("blob/one");
    let mut upload = store.put_multipart(&path).await.unwrap();
    upload.put_part(vec![1u8; 10].into()).await.unwrap();
    assert!(store.head(&path).await.is_err(), "absent until completed");
    upload.put_part(vec![2u8; 5].into()).await.unwrap();
    upload.complete().await.unwrap();
    let read = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(read.len(), 15);
    assert_eq!(&read[9..11], &[1, 2]);

    let aborted = Path::from("blob/two");
    let mut upload = store.put_multipart(&aborted).await.unwrap();
    upload.put_part(vec![1u8; 10].into()).await.unwrap();
    upload.abort().await.unwrap();
    assert!(store.head(&aborted).await.is_err());

    // Neither upload left its staging file beside the database, nor does
    // one dropped half-way.
    let mut dropped = store
        .put_multipart(&Path::from("blob/three"))
        .await
        .unwrap();
    dropped.put_part(vec![1u8; 10].into()).await.unwrap();
    drop(dropped);
    let mut beside: Vec<String> = std::fs::read_dir(store.file().parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(beside, ["memo.db", "memo.db-shm", "memo.db-wal"]);
}

/// A value of `len` bytes that differ from piece to piece and within one.
fn patterned(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 20) as u8)
        .collect()
}

/// A multipart upload larger than a piece, of parts of uneven sizes staged
/// out of order, reads back whole, in pieces (a read streams it), by range
/// (a range across pieces) and by `get_ranges`; an upload that replaces an
/// object replaces it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_upload_is_staged_then_written_and_read_a_piece_at_a_time() {
    let (_folder, store) = opened();
    let path = Path::from("blob/large");
    store.put(&path, vec![9u8; 100].into()).await.unwrap();

    let value = patterned(3 * PIECE + 12_345);
    let cuts = [0, 5, PIECE + 7, 2 * PIECE, value.len()];
    let mut upload = store.put_multipart(&path).await.unwrap();
    let parts: Vec<_> = cuts
        .windows(2)
        .map(|w| upload.put_part(value[w[0]..w[1]].to_vec().into()))
        .collect();
    // Staged last part first.
    for part in parts.into_iter().rev() {
        part.await.unwrap();
    }
    assert_eq!(
        store.get(&path).await.unwrap().bytes().await.unwrap().len(),
        100,
        "the old object stands until the upload completes"
    );
    upload.complete().await.unwrap();

    let read = store.get(&path).await.unwrap();
    assert_eq!(read.meta.size, value.len() as u64);
    let pieces: Vec<Bytes> = read.into_stream().try_collect().await.unwrap();
    assert_eq!(pieces.len(), 4, "streamed a piece at a time");
    assert!(pieces.iter().all(|p| p.len() <= PIECE));
    assert_eq!(pieces.concat(), value);

    let across = PIECE as u64 - 10..2 * PIECE as u64 + 10;
    let got = store.get_range(&path, across.clone()).await.unwrap();
    assert_eq!(
        got.as_ref(),
        &value[across.start as usize..across.end as usize]
    );
    let ranges = store
        .get_ranges(
            &path,
            &[
                0..3,
                across.clone(),
                value.len() as u64 - 1..value.len() as u64,
            ],
        )
        .await
        .unwrap();
    assert_eq!(ranges[0].as_ref(), &value[..3]);
    assert_eq!(ranges[1], got);
    assert_eq!(ranges[2].as_ref(), &value[value.len() - 1..]);
}

/// The write-ahead log a large value grew is cut back once a checkpoint
/// emptied it, rather than kept at the value's size on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_a_large_value_grew_is_cut_back_after_a_checkpoint() {
    let (folder, store) = opened();
    let wal = folder.path().join("nested").join("memo.db-wal");
    let mut upload = store.put_multipart(&Path::from("blob/big")).await.unwrap();
    for _ in 0..96 {
        upload.put_part(vec![5u8; PIECE].into()).await.unwrap();
    }
    upload.complete().await.unwrap();
    let grown = std::fs::metadata(&wal).unwrap().len();
    assert!(grown > 96 << 20, "the log holds the value: {grown} bytes");
    // The commit's automatic checkpoint copied the log into the database;
    // the next transaction starts the log again from its beginning and
    // cuts the file to the limit.
    for n in 0..3 {
        store
            .put(&Path::from(format!("small/{n}")), vec![1u8].into())
            .await
            .unwrap();
    }
    let kept = std::fs::metadata(&wal).unwrap().len();
    assert!(kept <= 64 << 20, "the log kept {kept} bytes");
    assert_eq!(
        store.head(&Path::from("blob/big")).await.unwrap().size,
        96 * PIECE as u64
    );
}

/// An upload completed before one of its parts was written fails, rather
/// than leaving a hole of zeros where that part goes; the object it would
/// have replaced stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_completed_before_a_part_is_written_fails_whole() {
    let (_folder, store) = opened();
    let path = Path::from("blob/early");
    store.put(&path, vec![3u8; 4].into()).await.unwrap();
    let mut upload = store.put_multipart(&path).await.unwrap();
    upload.put_part(vec![1u8; 10].into()).await.unwrap();
    let never_polled = upload.put_part(vec![2u8; 10].into());
    upload.put_part(vec![3u8; 10].into()).await.unwrap();
    let error = upload.complete().await.unwrap_err().to_string();
    assert!(error.contains("20 of its 30 bytes"), "{error}");
    drop(never_polled);
    let read = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(read.as_ref(), &[3u8; 4]);
}

/// A read holds its snapshot until its last piece: an object replaced and
/// then deleted while it streams, by its store and by another process's,
/// still reads as it was when the read began, and the next read finds it
/// gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_outlives_a_replacement_and_a_delete_reads_what_it_began_on() {
    let (_folder, store) = opened();
    let path = Path::from("blob/read-while-deleted");
    let value = patterned(2 * PIECE + 1);
    store.put(&path, value.clone().into()).await.unwrap();

    let mut stream = store.get(&path).await.unwrap().into_stream();
    let first = stream.next().await.unwrap().unwrap();
    // Replaced and deleted by this store, and by another on the file (as
    // another process).
    let other = SqliteStore::open(store.file()).unwrap();
    store.put(&path, vec![7u8; 3].into()).await.unwrap();
    other.put(&path, vec![8u8; 3].into()).await.unwrap();
    other.delete(&path).await.unwrap();
    let mut read = first.to_vec();
    while let Some(piece) = stream.next().await {
        read.extend_from_slice(&piece.unwrap());
    }
    assert_eq!(read, value);
    assert!(matches!(
        store.get(&path).await,
        Err(object_store::Error::NotFound { .. })
    ));
}

/// A staged upload that cannot be written (over SQLite's largest value)
/// fails alone: the object it would have replaced stands, and a change
/// queued beside it commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_upload_that_fails_leaves_the_object_it_would_replace() {
    let (_folder, store) = opened();
    let path = Path::from("blob/too-large");
    store.put(&path, vec![3u8; 10].into()).await.unwrap();
    let file = tempfile::tempfile().unwrap();
    // A sparse staging file: its length is all `put_staged` asks of it.
    file.set_len(1_000_000_001).unwrap();
    let beside = Path::from("blob/beside");
    let (failed, kept) = tokio::join!(
        store.write(|reply| Job::PutStaged {
            path: path.to_string(),
            file,
            len: 1_000_000_001,
            reply,
        }),
        store.put(&beside, vec![4u8; 2].into()),
    );
    assert!(failed.is_err());
    kept.unwrap();
    let read = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(read.as_ref(), &[3u8; 10]);
    assert!(store.head(&beside).await.is_ok());
}

/// memo's own use of the store: the start-up probe passes and a memoized
/// value committed through one store is a hit through another on the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memo_entries_are_shared_by_two_stores_on_one_file() {
    let (folder, store) = opened();
    crate::store::probe_conditional_create(&store, &Path::from("memo"))
        .await
        .unwrap();
    let first = crate::MemoStore::new(Arc::new(store), "memo");
    let other = SqliteStore::open(folder.path().join("nested").join("memo.db")).unwrap();
    let second = crate::MemoStore::new(Arc::new(other), "memo");
    let run = crate::RunId::new("r").unwrap();
    first
        .new_memo(&run, 1)
        .content_put(&("complete", "prompt"), b"reply")
        .await
        .unwrap();
    let hit = second
        .new_memo(&run, 1)
        .content_get(&("complete", "prompt"))
        .await
        .unwrap();
    assert_eq!(hit.as_deref(), Some(&b"reply"[..]));
}

/// What the child process of
/// `acknowledged_writes_survive_the_writer_process_killed` runs: writes
/// `k/<n>` (holding `n`) 16 at a time and prints `acked <n>` once each is
/// acknowledged, until it is killed (or has written 100,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child of acknowledged_writes_survive_the_writer_process_killed"]
async fn writes_until_killed() {
    use std::io::Write as _;
    let file = std::env::var_os("MEMO_SQLITE_CHILD_FILE").expect("run by its parent test");
    let store = SqliteStore::open(file).unwrap();
    let writes = futures::stream::iter(0..100_000u32)
        .map(|n| {
            let store = store.clone();
            async move {
                let path = Path::from(format!("k/{n}"));
                store
                    .put_opts(&path, n.to_string().into(), PutMode::Create.into())
                    .await
                    .map(|_| n)
            }
        })
        .buffer_unordered(16);
    futures::pin_mut!(writes);
    while let Some(n) = writes.next().await {
        let n = n.unwrap();
        let mut out = std::io::stdout().lock();
        writeln!(out, "acked {n}").unwrap();
        out.flush().unwrap();
    }
}

/// A writer process killed (SIGKILL) in the middle of its writes: every
/// write it acknowledged is in the file for the next process, whole, and
/// every object there holds what was written to it.
#[test]
fn acknowledged_writes_survive_the_writer_process_killed() {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("memo.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "sqlite::tests::writes_until_killed"])
        .args(["--nocapture", "--test-threads=1"])
        .env("MEMO_SQLITE_CHILD_FILE", &file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("acked ") {
            acked.push(n.parse::<u32>().unwrap());
            if acked.len() == 2_000 {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(acked.len(), 2_000, "the child stopped before it was killed");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&file).unwrap();
        for n in &acked {
            let read = store
                .get(&Path::from(format!("k/{n}")))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            assert_eq!(read, n.to_string().as_bytes());
        }
        let listed: Vec<ObjectMeta> = store
            .list(Some(&Path::from("k")))
            .try_collect()
            .await
            .unwrap();
        assert!(listed.len() >= acked.len());
        for meta in listed {
            let n = meta.location.filename().unwrap().to_string();
            let read = store
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            assert_eq!(read, n.as_bytes());
        }
    });
}

/// The group commit: changes that queue while the writer waits (here for
/// another process's write transaction on the file) are committed in one
/// transaction, one sync of the log, and each gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_that_queue_while_the_writer_waits_commit_together() {
    let (folder, store) = opened();
    let file = folder.path().join("nested").join("memo.db");
    store.put(&Path::from("taken"), "0".into()).await.unwrap();
    let (before, _) = store.commits();
    // Another process holds the write lock for a while.
    let other = Connection::open(&file).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let writes: Vec<_> = (0..64)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let path = Path::from(if n == 0 {
                    "taken".to_string()
                } else {
                    format!("g/{n}")
                });
                store
                    .put_opts(&path, n.to_string().into(), PutMode::Create.into())
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    other.execute_batch("COMMIT").unwrap();
    let mut created = 0;
    for write in writes {
        match write.await.unwrap() {
            Ok(_) => created += 1,
            Err(object_store::Error::AlreadyExists { path, .. }) => assert_eq!(path, "taken"),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(created, 63);
    let groups = store.commits().0 - before;
    assert!(groups <= 3, "64 changes took {groups} commits");
}

/// A group some of whose changes fail (the file reaches its size limit, as
/// a full disk would): every change answered `Ok` is in the file, and
/// every change answered with an error is not, whether SQLite rolled back
/// the statement or the whole transaction.
#[test]
fn every_answer_of_a_group_that_hits_a_full_disk_is_true() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("memo.db");
    let mut writer = open_writer(&file, true).unwrap();
    let pages: i64 = writer
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    writer
        .pragma_update(None, "max_page_count", pages + 12)
        .unwrap();
    let mut answers = Vec::new();
    let mut group = Vec::new();
    for n in 0..40 {
        let (reply, answer) = oneshot::channel();
        group.push(Job::Put {
            path: format!("big/{n:02}"),
            data: Bytes::from(vec![n as u8; 4096]),
            mode: PutMode::Create,
            reply,
        });
        answers.push((format!("big/{n:02}"), answer));
    }
    commit_group(&mut writer, group, || ());
    let (mut ok, mut failed) = (0, 0);
    for (path, mut answer) in answers {
        let stored: Option<i64> = writer
            .query_row(
                "SELECT length(data) FROM objects WHERE path = ?1",
                [&path],
                |r| r.get(0),
            )
            .optional()
            .unwrap();
        match answer.try_recv().expect("every change is answered") {
            Ok(_) => {
                ok += 1;
                assert_eq!(stored, Some(4096), "{path} answered Ok");
            }
            Err(e) => {
                failed += 1;
                assert_eq!(stored, None, "{path} answered {e}");
            }
        }
    }
    assert!(failed > 0, "the limit was never reached ({ok} written)");
}

/// A delete of status hints or due-run entries only commits without a
/// sync, as a local folder deletes them; every other change, and a delete
/// that includes any other object, is synced; without `fsync` nothing is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_deletes_of_hints_and_due_entries_commit_without_a_sync() {
    let (_folder, store) = opened();
    let hint = Path::from("runs/runs-by-status/Pending/r.00000000000000aa");
    let due = Path::from("memo/due/00000001796331600000/00000001796331808486_r.00000000000000aa");
    let record = Path::from("runs/runs/r/00000000000000aa/run");
    for path in [&hint, &due, &record] {
        store.put(path, "x".into()).await.unwrap();
    }
    let synced = |store: &SqliteStore, before: (u64, u64)| {
        let (all, unsynced) = store.commits();
        (all - before.0, unsynced - before.1)
    };

    let before = store.commits();
    store.delete(&hint).await.unwrap();
    store.delete(&due).await.unwrap();
    assert_eq!(
        synced(&store, before),
        (2, 2),
        "hint and due entry: unsynced"
    );

    store.put(&hint, "x".into()).await.unwrap();
    let before = store.commits();
    store.delete(&record).await.unwrap();
    assert_eq!(
        synced(&store, before),
        (1, 0),
        "a record's delete is synced"
    );

    store.put(&record, "x".into()).await.unwrap();
    let before = store.commits();
    let both = futures::stream::iter([Ok(hint.clone()), Ok(record.clone())]).boxed();
    let deleted: Vec<Path> = store.delete_stream(both).try_collect().await.unwrap();
    assert_eq!(deleted.len(), 2);
    assert_eq!(
        synced(&store, before),
        (1, 0),
        "with a record among them, synced"
    );
    assert!(store.head(&hint).await.is_err() && store.head(&record).await.is_err());

    // A put after unsynced deletes is synced again.
    store.put(&hint, "x".into()).await.unwrap();
    store.delete(&hint).await.unwrap();
    let before = store.commits();
    store.put(&record, "y".into()).await.unwrap();
    assert_eq!(synced(&store, before), (1, 0));

    // A group that holds a hint's delete and a put is synced: queued
    // together while another process holds the write lock.
    let other = Connection::open(store.file()).unwrap();
    store.put(&hint, "x".into()).await.unwrap();
    let before = store.commits();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let first = tokio::spawn({
        let store = store.clone();
        async move { store.put(&Path::from("first"), "x".into()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (delete, put) = (store.clone(), store.clone());
    let (hint_deleted, put_done) = (
        tokio::spawn(async move { delete.delete(&hint).await }),
        tokio::spawn(async move { put.put(&Path::from("second"), "y".into()).await }),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    other.execute_batch("COMMIT").unwrap();
    first.await.unwrap().unwrap();
    hint_deleted.await.unwrap().unwrap();
    put_done.await.unwrap().unwrap();
    let (groups, unsynced) = synced(&store, before);
    assert!(groups <= 2, "{groups} groups");
    assert_eq!(unsynced, 0, "a group with a put in it is synced");

    let folder = tempfile::tempdir().unwrap();
    let unsynced = SqliteStore::open_with_fsync(folder.path().join("memo.db"), false).unwrap();
    let before = unsynced.commits();
    unsynced.put(&record, "x".into()).await.unwrap();
    unsynced.delete(&record).await.unwrap();
    assert_eq!(synced(&unsynced, before), (2, 2));
}

/// A delete of a path with no object is `NotFound`, as on a local folder:
/// of two stores deleting one object at once, exactly one deleted it (a
/// sweep's report counts what it deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_deletes_of_one_object_exactly_one_finds_it() {
    let (folder, store) = opened();
    let other = SqliteStore::open(folder.path().join("nested").join("memo.db")).unwrap();
    assert!(matches!(
        store.delete(&Path::from("never")).await,
        Err(object_store::Error::NotFound { .. })
    ));
    for n in 0..20 {
        let path = Path::from(format!("late/{n}"));
        store.put(&path, "v".into()).await.unwrap();
        let (a, b) = tokio::join!(store.delete(&path), other.delete(&path));
        let found = [a, b]
            .into_iter()
            .filter(|d| match d {
                Ok(()) => true,
                Err(object_store::Error::NotFound { .. }) => false,
                Err(e) => panic!("{e}"),
            })
            .count();
        assert_eq!(found, 1, "{path}");
    }
    // In one stream, the missing path among others is the only error.
    store.put(&Path::from("a"), "v".into()).await.unwrap();
    let paths = futures::stream::iter([Ok(Path::from("a")), Ok(Path::from("gone"))]).boxed();
    let out: Vec<_> = store.delete_stream(paths).collect().await;
    assert!(matches!(&out[0], Ok(p) if p.as_ref() == "a"));
    assert!(matches!(&out[1], Err(object_store::Error::NotFound { path, .. }) if path == "gone"));
}
