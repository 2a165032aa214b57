//! Benchmarks of the hot paths: deriving a content key, and a memo hit and
//! miss on the embedded backends.
//!
//! ```text
//! cargo bench -p memo-runtime --bench memo
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
use memo_runtime::{MemoStore, RunId, content_key};
use serde::Serialize;
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
