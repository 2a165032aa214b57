//! Benchmarks of the hot paths: deriving a content key, a memo hit and
//! miss on the embedded backends, and a `#[memoized]` hit against the
//! hand-written `content_get` + decode it replaces.
//!
//! ```text
//! cargo bench -p memo-runtime --bench memo
//! cargo bench -p memo-runtime --bench memo -- hit   # the hits only
//! ```
//!
//! Compare figures side by side within one run; absolute times on a shared
//! machine are noisy.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::local::LocalFileSystem;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::{Memo, MemoStore, RunId, content_key, memoized};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

fn main() {
    divan::main();
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

/// memo's canonical key: streamed into SHA-256, map entries sorted.
#[divan::bench]
fn content_key_canonical(bencher: divan::Bencher) {
    let input = ticket();
    bencher.bench(|| content_key(divan::black_box(&input)).unwrap());
}

/// The naive alternative, for comparison: encode into a buffer with
/// rmp-serde (map order as iterated, so not canonical), then hash.
#[divan::bench]
fn content_key_buffered_rmp_serde(bencher: divan::Bencher) {
    let input = ticket();
    bencher.bench(|| {
        let bytes = rmp_serde::to_vec_named(divan::black_box(&input)).unwrap();
        Sha256::digest(&bytes)
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn backends() -> Vec<(
    &'static str,
    Arc<dyn ObjectStore>,
    Option<tempfile::TempDir>,
)> {
    let dir = tempfile::tempdir().unwrap();
    let local = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    vec![
        ("in-memory", Arc::new(InMemory::new()), None),
        ("local", local, Some(dir)),
    ]
}

/// A hit: read and check a committed 1 KiB entry.
#[divan::bench(args = ["in-memory", "local"])]
fn memo_hit(bencher: divan::Bencher, backend: &str) {
    let rt = runtime();
    let (_, objects, _dir) = backends()
        .into_iter()
        .find(|(name, ..)| *name == backend)
        .unwrap();
    let memo = MemoStore::new(objects, "bench").new_memo(&RunId::new("bench").unwrap(), 0);
    let input = ticket();
    rt.block_on(memo.content_put(&input, vec![7u8; 1024]))
        .unwrap();
    bencher.bench_local(|| rt.block_on(memo.content_get(&input)).unwrap().unwrap());
}

/// A miss that commits: a new key's write-once create of a 1 KiB value.
#[divan::bench(args = ["in-memory", "local"])]
fn memo_commit(bencher: divan::Bencher, backend: &str) {
    let rt = runtime();
    let (_, objects, _dir) = backends()
        .into_iter()
        .find(|(name, ..)| *name == backend)
        .unwrap();
    let memo = MemoStore::new(objects, "bench").new_memo(&RunId::new("bench").unwrap(), 0);
    let next = AtomicU64::new(0);
    bencher.bench_local(|| {
        let key = next.fetch_add(1, Ordering::Relaxed);
        rt.block_on(memo.content_put(&key, [7u8; 1024])).unwrap()
    });
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

/// An in-memory memo where `draft_reply(ticket())` is committed, and that
/// ticket.
fn committed_reply(rt: &tokio::runtime::Runtime) -> (Memo, Ticket) {
    let memo = MemoStore::new(Arc::new(InMemory::new()), "bench")
        .new_memo(&RunId::new("bench").unwrap(), 0);
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

/// A hit through `#[memoized]`: the generated key, read, decode and span.
/// Compare with `hit_by_hand` from the same run.
#[divan::bench]
fn hit_memoized(bencher: divan::Bencher) {
    let rt = runtime();
    let (memo, ticket) = committed_reply(&rt);
    bencher.bench_local(|| {
        rt.block_on(draft_reply(&memo, divan::black_box(&ticket)))
            .unwrap()
    });
}

/// The same hit written by hand: `content_get` + `rmp_serde::from_slice`.
#[divan::bench]
fn hit_by_hand(bencher: divan::Bencher) {
    let rt = runtime();
    let (memo, ticket) = committed_reply(&rt);
    bencher.bench_local(|| rt.block_on(read_by_hand(&memo, divan::black_box(&ticket))));
}
