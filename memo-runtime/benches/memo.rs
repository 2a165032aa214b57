//! Benchmarks of memo's hot paths and of what grows with stored data:
//! content keys against raw SHA-256, hits, misses and puts on the embedded
//! backends with the committed-entry cache on and off, a `#[memoized]` hit
//! against the hand-written `content_get` + decode it replaces, a
//! `#[memoized]` miss, one durable step end to end, a retention sweep among
//! many retained runs, and clearing a run.
//!
//! ```text
//! cargo bench -p memo-runtime --bench memo
//! cargo bench -p memo-runtime --bench memo -- hit   # the hits only
//! ```
//!
//! Compare figures side by side within one run; absolute times on a shared
//! machine are noisy. BENCHMARKS.md at the repository root holds the latest
//! tables.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::local::LocalFileSystem;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Incarnation, Memo, MemoStore, RunId, content_key, memoized,
    retention::{RetentionSweeper, TerminalMarker},
    runtime_store::{InMemoryRuntimeStore, ObjectStoreRuntimeStore},
};

/// The incarnation of a workflow run: the entries the cache keeps
/// (standalone memos are read from the store every time).
const IN_A_RUN: memo_runtime::Incarnation = memo_runtime::Incarnation::from_u64(1);
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

/// A typical memoized call's input: a name, a version and a ticket.
#[derive(Serialize)]
struct Ticket {
    id: u64,
    subject: String,
    body: String,
    tags: Vec<String>,
    fields: HashMap<String, String>,
}

fn ticket() -> (&'static str, u32, Ticket) {
    let ticket = Ticket {
        id: 42,
        subject: "refund for order 1234".into(),
        body: "lorem ipsum dolor sit amet ".repeat(40),
        tags: (0..8).map(|i| format!("tag-{i}")).collect(),
        fields: (0..20)
            .map(|i| (format!("field-{i}"), format!("value-{i}")))
            .collect(),
    };
    ("draft_reply", 1, ticket)
}

/// Content keys: the canonical key against what it costs at least.
mod keys {
    use super::*;

    const SIZES: &[usize] = &[64, 1024, 16 * 1024, 256 * 1024, 1024 * 1024];

    /// `content_key` of `n` bytes (a MessagePack `bin`): header, SHA-256,
    /// hex. Compare with `raw_sha256` of the same size.
    #[divan::bench(args = SIZES)]
    fn content_key_of_bytes(bencher: divan::Bencher, n: usize) {
        let input = Bytes::from(vec![0x5a; n]);
        bencher
            .counter(divan::counter::BytesCount::new(n))
            .bench(|| content_key(divan::black_box(&input)).unwrap());
    }

    /// SHA-256 of the same `n` bytes, nothing else: the floor.
    #[divan::bench(args = SIZES)]
    fn raw_sha256(bencher: divan::Bencher, n: usize) {
        let input = vec![0x5a; n];
        bencher
            .counter(divan::counter::BytesCount::new(n))
            .bench(|| Sha256::digest(divan::black_box(&input)));
    }

    /// memo's canonical key of a structured input (a ticket with a map):
    /// streamed into SHA-256, map entries sorted.
    #[divan::bench]
    fn content_key_of_a_ticket(bencher: divan::Bencher) {
        let input = ticket();
        bencher.bench(|| content_key(divan::black_box(&input)).unwrap());
    }

    /// The naive alternative for the same ticket: encode into a buffer with
    /// rmp-serde (map order as iterated, so not canonical), then hash.
    #[divan::bench]
    fn buffered_rmp_serde_of_a_ticket(bencher: divan::Bencher) {
        let input = ticket();
        bencher.bench(|| {
            let bytes = rmp_serde::to_vec_named(divan::black_box(&input)).unwrap();
            Sha256::digest(&bytes)
        });
    }
}

/// The store configurations the entry benchmarks run on.
const STORES: &[&str] = &["in-memory", "in-memory/no-cache", "local", "local/no-cache"];

/// A memo store as `config` names it, and the folder behind a local one.
fn memo_store(config: &str) -> (MemoStore, Option<tempfile::TempDir>) {
    let (objects, dir): (Arc<dyn ObjectStore>, _) = if config.starts_with("local") {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        (Arc::new(local), Some(dir))
    } else {
        (Arc::new(InMemory::new()), None)
    };
    let store = MemoStore::new(objects, "bench");
    let store = if config.ends_with("no-cache") {
        store.with_entry_cache(0)
    } else {
        store
    };
    (store, dir)
}

/// Hits, misses and puts of 256-byte values under the content key of a
/// small input, so the store's part shows (a ticket's key alone is
/// `keys::content_key_of_a_ticket`).
mod entries {
    use super::*;

    const VALUE: [u8; 256] = [7; 256];

    fn input() -> (&'static str, u64) {
        ("draft_reply", 42)
    }

    /// A hit: the committed value of a key read again (with the cache, a
    /// memory read; without, a read and a checksum).
    #[divan::bench(args = STORES)]
    fn hit(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, _dir) = memo_store(config);
        let memo = store.memo_for(&run("bench"), IN_A_RUN, 0);
        let input = input();
        rt.block_on(memo.content_put(&input, VALUE)).unwrap();
        bencher.bench_local(|| rt.block_on(memo.content_get(&input)).unwrap().unwrap());
    }

    /// A hit read by a store that has not seen the entry (another process,
    /// a restart): always a read and a checksum.
    #[divan::bench(args = ["in-memory", "local"])]
    fn hit_cold(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, _dir) = memo_store(config);
        let input = input();
        rt.block_on(
            store
                .memo_for(&run("bench"), IN_A_RUN, 0)
                .content_put(&input, VALUE),
        )
        .unwrap();
        let objects = Arc::clone(store.object_store());
        bencher
            .with_inputs(|| {
                MemoStore::new(Arc::clone(&objects), "bench").memo_for(&run("bench"), IN_A_RUN, 0)
            })
            .bench_local_refs(|memo| rt.block_on(memo.content_get(&input)).unwrap().unwrap());
    }

    /// A miss: a key nothing is committed under.
    #[divan::bench(args = STORES)]
    fn miss(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, _dir) = memo_store(config);
        let memo = store.memo_for(&run("bench"), IN_A_RUN, 0);
        let input = input();
        bencher.bench_local(|| {
            assert!(rt.block_on(memo.content_get(&input)).unwrap().is_none());
        });
    }

    /// A put that commits: a fresh key's write-once create.
    #[divan::bench(args = STORES)]
    fn put(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, _dir) = memo_store(config);
        let memo = store.memo_for(&run("bench"), IN_A_RUN, 0);
        let next = AtomicU64::new(0);
        bencher.bench_local(|| {
            let key = next.fetch_add(1, Ordering::Relaxed);
            rt.block_on(memo.content_put(&key, VALUE)).unwrap()
        });
    }
}

/// What `draft_reply` returns: about 1 KiB encoded.
#[derive(Serialize, Deserialize)]
struct Reply {
    text: String,
    tokens: u32,
}

#[memoized(version = 1)]
async fn draft_reply(memo: &Memo, ticket: &Ticket) -> memo_runtime::Result<Reply> {
    Ok(Reply {
        text: format!("re: {}", ticket.subject).repeat(50),
        tokens: 7,
    })
}

/// `#[memoized]` against the hand-written code it replaces.
mod memoized_hit {
    use super::*;

    /// An in-memory memo where `draft_reply(ticket())` is committed, and
    /// that ticket.
    fn committed_reply(rt: &tokio::runtime::Runtime, config: &str) -> (Memo, Ticket) {
        let (store, _) = memo_store(config);
        let memo = store.memo_for(&run("bench"), IN_A_RUN, 0);
        let (_, _, ticket) = ticket();
        rt.block_on(draft_reply(&memo, &ticket)).unwrap();
        // The hand-written hit reads the entry the macro committed.
        assert!(rt.block_on(read_by_hand(&memo, &ticket)).tokens == 7);
        (memo, ticket)
    }

    /// The hand-written hit `#[memoized]` replaces: `content_get` under the
    /// documented key, then decode.
    async fn read_by_hand(memo: &Memo, ticket: &Ticket) -> Reply {
        let bytes = memo
            .content_get(&("draft_reply", 1u32, (ticket,)))
            .await
            .unwrap()
            .expect("committed");
        rmp_serde::from_slice(&bytes).unwrap()
    }

    /// A hit through `#[memoized]`: the generated key, read, decode and
    /// span. Compare with `by_hand` from the same run.
    #[divan::bench(args = ["in-memory", "in-memory/no-cache"])]
    fn memoized(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (memo, ticket) = committed_reply(&rt, config);
        bencher.bench_local(|| {
            rt.block_on(draft_reply(&memo, divan::black_box(&ticket)))
                .unwrap()
        });
    }

    /// The same hit written by hand: `content_get` + `rmp_serde::from_slice`.
    #[divan::bench(args = ["in-memory", "in-memory/no-cache"])]
    fn by_hand(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (memo, ticket) = committed_reply(&rt, config);
        bencher.bench_local(|| rt.block_on(read_by_hand(&memo, divan::black_box(&ticket))));
    }
}

/// A `#[memoized]` miss: each call's ticket is new, so the body runs and its
/// value is committed (key, read, flight, re-read, encode, create).
mod memoized_miss {
    use super::*;

    #[divan::bench(args = ["in-memory", "in-memory/no-cache"])]
    fn memoized(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, _) = memo_store(config);
        let memo = store.memo_for(&run("bench"), IN_A_RUN, 0);
        let (_, _, mut ticket) = ticket();
        let next = AtomicU64::new(0);
        bencher.bench_local(|| {
            ticket.id = next.fetch_add(1, Ordering::Relaxed);
            rt.block_on(draft_reply(&memo, divan::black_box(&ticket)))
                .unwrap()
        });
    }
}

/// One durable step end to end: a new run of a one-step workflow whose step
/// makes one `#[memoized]` call, to its terminal commit and marker.
mod durable_step {
    use super::*;

    #[memoized]
    async fn charge(memo: &Memo, order: u64) -> memo_runtime::Result<u64> {
        Ok(order * 100)
    }

    #[divan::bench(args = ["in-memory", "local"])]
    fn one_step_run(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (memo, dir) = memo_store(config);
        let runtime_store: Arc<dyn memo_runtime::runtime_store::RuntimeStore> = match &dir {
            Some(_) => Arc::new(ObjectStoreRuntimeStore::new(
                Arc::clone(memo.object_store()),
                "runs",
            )),
            None => Arc::new(InMemoryRuntimeStore::new()),
        };
        let runtime = Runtime::builder()
            .memo_store(memo)
            .runtime_store(runtime_store)
            .build()
            .unwrap();
        let workflow = Workflow::new("order", |ctx: Context, order: u64| async move {
            ctx.step("charge", |memo| async move { charge(&memo, order).await })
                .await
        });
        let next = AtomicU64::new(0);
        bencher.bench_local(|| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let id = run(&format!("order-{n}"));
            let out: u64 = rt.block_on(runtime.run(&id, &n, &workflow)).unwrap();
            assert_eq!(out, n * 100);
        });
    }
}

/// Retention: what a sweep and a clear cost as stored data grows.
mod retention {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);
    /// "Now": day 30. Expired runs ended on day 1, retained ones on day 29.
    const NOW_MS: u64 = 30 * 24 * 3600 * 1000;
    const EXPIRED_AT_MS: u64 = 24 * 3600 * 1000;
    const RETAINED_AT_MS: u64 = 29 * 24 * 3600 * 1000;
    const EXPIRED: u64 = 100;

    /// Writes terminal markers for runs `first..first + n`, each with one
    /// memo entry if `with_entries`.
    fn seed(
        rt: &tokio::runtime::Runtime,
        store: &MemoStore,
        name: &str,
        runs: std::ops::Range<u64>,
        at_ms: u64,
        with_entries: bool,
    ) {
        rt.block_on(async {
            for n in runs {
                let run_id = run(&format!("{name}-{n}"));
                let incarnation = Incarnation::from_u64(1);
                if with_entries {
                    let memo = store.memo_for(&run_id, incarnation, 0);
                    memo.put("k", b"v").await.unwrap();
                }
                let marker = TerminalMarker {
                    run_id,
                    terminal_at_ms: at_ms,
                    incarnation,
                };
                store.markers().write(&marker).await.unwrap();
            }
        });
    }

    /// A sweep of 100 expired runs (one entry each) among `RETAINED` runs
    /// whose markers are not expired: the listing reads only the expired
    /// hours, so the time should not grow with `RETAINED`.
    #[divan::bench(consts = [1_000, 10_000, 100_000], args = ["in-memory", "local"], sample_count = 10, sample_size = 1)]
    fn sweep_100_expired<const RETAINED: u64>(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, _dir) = memo_store(config);
        seed(&rt, &store, "retained", 0..RETAINED, RETAINED_AT_MS, false);
        let sweeper = RetentionSweeper::builder(store.clone(), DAY).build();
        let round = AtomicU64::new(0);
        bencher
            .with_inputs(|| {
                let first = round.fetch_add(1, Ordering::Relaxed) * EXPIRED;
                seed(
                    &rt,
                    &store,
                    "expired",
                    first..first + EXPIRED,
                    EXPIRED_AT_MS,
                    true,
                );
            })
            .bench_local_values(|()| {
                let report = rt.block_on(sweeper.sweep_once(NOW_MS)).unwrap();
                assert_eq!(report.runs_cleared, EXPIRED as usize);
            });
    }

    /// Clearing one run of `ENTRIES` memo entries: one listing and one
    /// delete stream per folder (see BENCHMARKS.md for the S3 requests).
    #[divan::bench(consts = [100, 10_000], args = ["in-memory", "local"], sample_count = 5, sample_size = 1)]
    fn clear_run<const ENTRIES: u32>(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, _dir) = memo_store(config);
        let round = AtomicU64::new(0);
        bencher
            .with_inputs(|| {
                let run_id = run(&format!(
                    "cleared-{}",
                    round.fetch_add(1, Ordering::Relaxed)
                ));
                let memo = store.new_memo(&run_id, 0);
                rt.block_on(async {
                    for key in 0..ENTRIES {
                        memo.content_put(&key, b"v").await.unwrap();
                    }
                });
                run_id
            })
            .bench_local_values(|run_id| {
                let cleared = rt.block_on(store.clear_memos_for_run(&run_id)).unwrap();
                assert_eq!(cleared, ENTRIES as usize);
            });
    }
}

/// What the cost ledger's counting wrapper (which every `MemoStore` and
/// `ObjectStoreRuntimeStore` puts around its store) adds to a request made
/// outside a workflow attempt: a `GET` and a `HEAD` of a 100-byte object on
/// `InMemory`, straight to the store and through the wrapper. Compare the
/// two within one run.
mod metered {
    use memo_runtime::object_store::ObjectStoreExt;
    use memo_runtime::object_store::path::Path;

    use super::*;

    fn store(config: &str) -> (Arc<dyn ObjectStore>, Path) {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("memo/entry");
        runtime()
            .block_on(inner.put(&path, vec![7u8; 100].into()))
            .unwrap();
        let store = match config {
            "direct" => inner,
            _ => memo_runtime::testing::metered(inner),
        };
        (store, path)
    }

    #[divan::bench(args = ["direct", "metered"])]
    fn get(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, path) = store(config);
        bencher.bench_local(|| {
            rt.block_on(async { store.get(&path).await.unwrap().bytes().await.unwrap() })
        });
    }

    #[divan::bench(args = ["direct", "metered"])]
    fn head(bencher: divan::Bencher, config: &str) {
        let rt = runtime();
        let (store, path) = store(config);
        bencher.bench_local(|| rt.block_on(store.head(&path)).unwrap());
    }
}
