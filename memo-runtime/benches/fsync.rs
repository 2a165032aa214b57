//! What durability costs on a local disk: the same writes on a
//! [`LocalFolder`] that `fsync`s (the default: an acknowledged write
//! survives a power loss) and on one that does not (`with_fsync(false)`,
//! the `file://` option `fsync=false`: it survives a crash of the process
//! only), and on a [`SqliteStore`] with and without `fsync` (one file, one
//! sync of its log per commit), side by side in one run.
//!
//! ```text
//! cargo bench -p memo-runtime --features sqlite --bench fsync
//! ```
//!
//! The figures depend on the disk (an SSD's cache flush, a VM's virtual
//! disk, tmpfs where `fsync` does nothing): compare the two columns of one
//! run. BENCHMARKS.md at the repository root holds the latest table.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memo_runtime::store::{LocalFolder, SqliteStore};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Incarnation, Memo, MemoStore, RunId, memoized};
use memo_runtime::{object_store::ObjectStore, runtime_store::ObjectStoreRuntimeStore};

fn main() {
    divan::main();
}

/// The stores and their durability levels, as the benchmarks' argument.
const LEVELS: &[&str] = &["fsync", "no-fsync", "sqlite-fsync", "sqlite-no-fsync"];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A local folder, or a SQLite file, in a fresh temporary folder (on the
/// disk `TMPDIR` names), syncing or not as `level` says.
fn folder(level: &str) -> (Arc<dyn ObjectStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = match level.strip_prefix("sqlite-") {
        Some(sqlite) => Arc::new(
            SqliteStore::open_with_fsync(dir.path().join("memo.db"), sqlite == "fsync").unwrap(),
        ),
        None => Arc::new(
            LocalFolder::new(dir.path())
                .unwrap()
                .with_fsync(level == "fsync"),
        ),
    };
    (store, dir)
}

/// A memo put that commits: a fresh key's write-once create of 256 bytes
/// in a run's folder that exists (a staging file, its sync, a hard link,
/// the folder's sync).
#[divan::bench(args = LEVELS)]
fn memo_put(bencher: divan::Bencher, level: &str) {
    let rt = runtime();
    let (objects, _dir) = folder(level);
    let store = MemoStore::new(objects, "bench");
    let memo = store.memo_for(&RunId::new("bench").unwrap(), Incarnation::from_u64(1), 0);
    let next = AtomicU64::new(0);
    rt.block_on(memo.put("warm", [7u8; 256])).unwrap();
    bencher.bench_local(|| {
        let n = next.fetch_add(1, Ordering::Relaxed);
        rt.block_on(memo.put(&format!("k{n}"), [7u8; 256])).unwrap();
    });
}

/// A memo hit read by a store that has not seen the entry (another
/// process, a restart): one `GET` of 256 bytes and its checksum. No sync
/// on any store; the SQLite columns time a read connection's snapshot.
#[divan::bench(args = LEVELS)]
fn memo_hit_cold(bencher: divan::Bencher, level: &str) {
    let rt = runtime();
    let (objects, _dir) = folder(level);
    let run = RunId::new("bench").unwrap();
    let store = MemoStore::new(Arc::clone(&objects), "bench");
    rt.block_on(
        store
            .memo_for(&run, Incarnation::from_u64(1), 0)
            .put("hit", [7u8; 256]),
    )
    .unwrap();
    bencher
        .with_inputs(|| {
            MemoStore::new(Arc::clone(&objects), "bench").memo_for(
                &run,
                Incarnation::from_u64(1),
                0,
            )
        })
        .bench_local_refs(|memo| rt.block_on(memo.get("hit")).unwrap().unwrap());
}

/// Clearing a run of 500 memo entries (what a retention sweep does to
/// each expired run): one listing, and a delete of each entry's file,
/// each taken under the lock a conditional update holds (a forget racing
/// a rewrap), with its folder's sync where the level syncs.
#[divan::bench(args = LEVELS, sample_count = 10, sample_size = 1)]
fn clear_run(bencher: divan::Bencher, level: &str) {
    const ENTRIES: u64 = 500;
    let rt = runtime();
    let (objects, _dir) = folder(level);
    let store = MemoStore::new(objects, "bench");
    let round = AtomicU64::new(0);
    bencher
        .with_inputs(|| {
            let run =
                RunId::new(format!("cleared-{}", round.fetch_add(1, Ordering::Relaxed))).unwrap();
            let memo = store.memo_for(&run, Incarnation::from_u64(1), 0);
            rt.block_on(async {
                for key in 0..ENTRIES {
                    memo.put(&format!("k{key}"), [7u8; 64]).await.unwrap();
                }
            });
            run
        })
        .bench_local_values(|run| {
            let cleared = rt.block_on(store.clear_memos_for_run(&run)).unwrap();
            assert_eq!(cleared, ENTRIES as usize);
        });
}

#[memoized]
async fn charge(memo: &Memo, order: u64) -> memo_runtime::Result<u64> {
    Ok(order * 100)
}

/// A new run of a one-step workflow (one `#[memoized]` call in the step) to
/// its terminal commit, memo entries and run records in one folder: every
/// create, folder and delete a run makes.
#[divan::bench(args = LEVELS, sample_count = 30)]
fn one_step_run(bencher: divan::Bencher, level: &str) {
    let rt = runtime();
    let (objects, _dir) = folder(level);
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(Arc::clone(&objects), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, "runs")))
        .build()
        .unwrap();
    let workflow = Workflow::new("order", |ctx: Context, order: u64| async move {
        ctx.step("charge", |memo| async move { charge(&memo, order).await })
            .await
    });
    let next = AtomicU64::new(0);
    bencher.bench_local(|| {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let id = RunId::new(format!("order-{n}")).unwrap();
        let out: u64 = rt.block_on(runtime.run(&id, &n, &workflow)).unwrap();
        assert_eq!(out, n * 100);
    });
}

/// A three-step run: the steps' commits on top of the run's creation and
/// end, the shape of a small real workflow.
#[divan::bench(args = LEVELS, sample_count = 30)]
fn three_step_run(bencher: divan::Bencher, level: &str) {
    let rt = runtime();
    let (objects, _dir) = folder(level);
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(Arc::clone(&objects), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, "runs")))
        .build()
        .unwrap();
    let workflow = Workflow::new("order", |ctx: Context, order: u64| async move {
        let a: u64 = ctx
            .step("reserve", |_| async move {
                Ok::<u64, memo_runtime::Error>(order)
            })
            .await?;
        let b: u64 = ctx
            .step("charge", |_| async move {
                Ok::<u64, memo_runtime::Error>(a + 1)
            })
            .await?;
        ctx.step(
            "ship",
            |_| async move { Ok::<u64, memo_runtime::Error>(b + 1) },
        )
        .await
    });
    let next = AtomicU64::new(0);
    bencher.bench_local(|| {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let id = RunId::new(format!("order-{n}")).unwrap();
        let out: u64 = rt.block_on(runtime.run(&id, &n, &workflow)).unwrap();
        assert_eq!(out, n + 2);
    });
}
