//! The memory a large value takes to write and read: a global allocator
//! that counts the bytes allocated, in a test binary of its own so no other
//! test's allocations are counted, and a value generated a piece at a time
//! (never held whole) written as a blob to a local folder, and to a SQLite
//! file, and read back.
//!
//! The bound is `memo_runtime::blob`'s (its *Memory* section): a few chunks
//! and parts, whatever the value's size. On a SQLite file SQLite's own
//! allocations (not Rust's, so not counted here) are held under a hard
//! limit of its heap. The 1 GiB measurement of
//! `BENCHMARKS.md` is the ignored test:
//!
//! ```sh
//! cargo test -p memo-tests --test large_values_memory -- --ignored --nocapture
//! ```

use std::sync::Arc;
use std::time::Instant;

use memo_runtime::MemoStore;
use memo_runtime::blob::{DEFAULT_CHUNK_SIZE, PART_SIZE};
use memo_runtime::object_store::ObjectStore;
use memo_runtime::store::{LocalFolder, SqliteStore};
use memo_tests::fixtures::run;
use memo_tests::large_values::{Generated, read_back};
use peak_alloc::PeakAlloc;

/// Counts the bytes allocated now and the most at once since the last
/// reset, in every thread of the process.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// Starts a measurement: returns what is allocated now, and counts the
/// peak from here.
fn start() -> usize {
    ALLOCATOR.reset_peak_usage();
    ALLOCATOR.current_usage()
}

/// The most allocated at once above `base` since [`start`].
fn peak_above(base: usize) -> usize {
    ALLOCATOR.peak_usage().saturating_sub(base)
}

const MIB: usize = 1 << 20;

/// Held by each measurement: the counters are the process's, so two tests
/// measuring at once would count each other's bytes.
static MEASURING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sets SQLite's hard limit on its heap, for the whole process: an
/// allocation over it fails. A limit can only be lowered, not lifted.
fn sqlite_heap_limit(bytes: usize) {
    let c = rusqlite::Connection::open_in_memory().unwrap();
    let set: i64 = c
        .query_row(&format!("PRAGMA hard_heap_limit = {bytes}"), [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(set, bytes as i64);
}

/// The store a measurement writes to.
#[derive(Clone, Copy, Debug)]
enum Backend {
    Folder,
    Sqlite,
}

/// The peak allocations of writing `value` as a blob to a fresh local
/// folder or SQLite file, and of reading it back, above what was allocated
/// before each.
async fn measure(backend: Backend, value: Generated, chunk_size: usize) -> (usize, usize) {
    let _alone = MEASURING.lock().await;
    let folder = tempfile::tempdir().unwrap();
    let objects: Arc<dyn ObjectStore> = match backend {
        Backend::Folder => Arc::new(LocalFolder::new(folder.path()).unwrap()),
        Backend::Sqlite => Arc::new(SqliteStore::open(folder.path().join("memo.db")).unwrap()),
    };
    // The default seal: zstd, kept only where it shrinks a chunk.
    let store = MemoStore::new(objects, "memo");
    let memo = store.new_memo(&run("measured"), 0);

    let base = start();
    let started = Instant::now();
    let blob = value.write_in_chunks(&memo, chunk_size).await.unwrap();
    let write_peak = peak_above(base);
    let wrote = started.elapsed();

    let base = start();
    let started = Instant::now();
    let back = read_back(&blob, &store).await.unwrap();
    let read_peak = peak_above(base);
    let read = started.elapsed();

    assert_eq!((back.len, back.sha256.as_str()), (value.len, blob.sha256()));
    println!(
        "{backend:?}, {} MiB ({}), {} MiB chunks: write peak {:.1} MiB in {wrote:.1?}, read peak {:.1} MiB in {read:.1?}",
        value.len >> 20,
        if value.compressible {
            "compressible"
        } else {
            "random"
        },
        chunk_size >> 20,
        write_peak as f64 / MIB as f64,
        read_peak as f64 / MIB as f64,
    );
    (write_peak, read_peak)
}

/// What writing a value in chunks of `chunk_size` may take above what was
/// allocated before, whatever the value's size: `memo_runtime::blob`'s
/// bound (two parts and three chunks), and 4 MiB for the test's 1 MiB
/// pieces and the zstd contexts of the runtime's two worker threads.
fn write_bound(chunk_size: usize) -> usize {
    2 * PART_SIZE.max(chunk_size) + 3 * chunk_size + 4 * MIB
}

/// What reading it may take: a chunk (its record, or the chunk it opens
/// to), and as much again for the rest.
fn read_bound(chunk_size: usize) -> usize {
    2 * chunk_size + 8 * MIB
}

/// Measures `value` on `backend` and fails unless both peaks are within
/// the bounds for `chunk_size`.
async fn assert_bounded(backend: Backend, value: Generated, chunk_size: usize) {
    let (write_peak, read_peak) = measure(backend, value, chunk_size).await;
    assert!(
        write_peak < write_bound(chunk_size),
        "{backend:?}: write peak {write_peak} bytes"
    );
    assert!(
        read_peak < read_bound(chunk_size),
        "{backend:?}: read peak {read_peak} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_and_reading_a_value_of_96_mib_takes_a_few_chunks_and_parts_of_memory() {
    for value in [
        Generated::random(96 * MIB as u64, 1),
        Generated::compressible(96 * MIB as u64, 2),
    ] {
        assert_bounded(Backend::Folder, value, DEFAULT_CHUNK_SIZE).await;
    }
}

/// On a SQLite file: the same bound for memo's allocations, and SQLite's
/// own heap held under 16 MiB throughout (its page caches, and a piece of
/// the value read or written at a time), where a value held whole in a
/// multipart upload, or a row written or read whole, would need 96 MiB of
/// it and fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_sqlite_file_neither_memo_nor_sqlite_holds_a_value_of_96_mib() {
    sqlite_heap_limit(16 * MIB);
    for value in [
        Generated::random(96 * MIB as u64, 4),
        Generated::compressible(96 * MIB as u64, 5),
    ] {
        assert_bounded(Backend::Sqlite, value, DEFAULT_CHUNK_SIZE).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes and reads 1 GiB (900 MiB on SQLite): run with --ignored --nocapture to measure"]
async fn one_gib_value_is_written_and_read_in_bounded_memory() {
    let value = Generated::random(1 << 30, 3);
    // A SQLite row holds at most 10⁹ bytes: 900 MiB there, with SQLite's
    // heap under the 96 MiB test's limit.
    let on_sqlite = Generated::random(900 * MIB as u64, 3);
    sqlite_heap_limit(16 * MIB);
    let cases = [
        (Backend::Folder, value, MIB),
        (Backend::Folder, value, DEFAULT_CHUNK_SIZE),
        (Backend::Folder, value, 16 * MIB),
        (Backend::Sqlite, on_sqlite, DEFAULT_CHUNK_SIZE),
    ];
    for (backend, value, chunk_size) in cases {
        assert_bounded(backend, value, chunk_size).await;
    }
}
