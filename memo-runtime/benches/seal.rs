//! What sealing costs: a hit read from the store and a put, with each seal
//! option (plain, zstd, encrypted, both) side by side in one run, in memory
//! and on a local folder; and sealing and opening a frame alone, by payload
//! size, with the bytes each option stores.
//!
//! ```text
//! cargo bench -p memo-runtime --bench seal
//! ```
//!
//! The hits read through a store without the committed-entry cache, so each
//! one opens the frame (a cached hit returns bytes opened once, whatever
//! the seal). BENCHMARKS.md (*Sealed payloads*) holds the latest tables.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::TryStreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::seal::{Compression, Keyring, Seal};
use memo_runtime::store::LocalFolder;
use memo_runtime::{Incarnation, MemoStore, RunId};

fn main() {
    print_stored_sizes();
    divan::main();
}

const IN_A_RUN: Incarnation = Incarnation::from_u64(1);

/// Every option, on both embedded backends: `<backend>/<seal>`.
const CONFIGS: &[&str] = &[
    "in-memory/plain",
    "in-memory/zstd",
    "in-memory/encrypted",
    "in-memory/zstd+encrypted",
    "local/plain",
    "local/zstd",
    "local/encrypted",
    "local/zstd+encrypted",
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn seal(name: &str) -> Seal {
    let keys = || Keyring::new(1, [42; 32]).unwrap();
    match name {
        "plain" => Seal::plain(),
        "zstd" => Seal::default(),
        "encrypted" => Seal::plain().with_encryption(keys()),
        "zstd+encrypted" => Seal::default().with_encryption(keys()),
        other => panic!("unknown seal {other}"),
    }
}

/// A memo store without the entry cache, as `config` names it, and the
/// folder behind a local one (`fsync` on, the default of `file://`).
fn memo_store(config: &str) -> (MemoStore, Option<tempfile::TempDir>) {
    let (backend, seal_name) = config.split_once('/').unwrap();
    let (objects, dir): (Arc<dyn ObjectStore>, _) = if backend == "local" {
        let dir = tempfile::tempdir().unwrap();
        (Arc::new(LocalFolder::new(dir.path()).unwrap()), Some(dir))
    } else {
        (Arc::new(InMemory::new()), None)
    };
    let store = MemoStore::new(objects, "bench")
        .with_entry_cache(0)
        .with_seal(seal(seal_name));
    (store, dir)
}

/// A step's value as memo stores it: about 4 KiB of MessagePack-like text
/// (an LLM answer, a customer e-mail), which zstd compresses to a third.
fn value() -> Bytes {
    let mut text = String::new();
    for i in 0..60 {
        text.push_str(&format!(
            "{{\"line\":{i},\"text\":\"Dear customer, your order {} has shipped.\"}}\n",
            1000 + i * 7
        ));
    }
    Bytes::from(text.into_bytes())
}

/// A hit read from the store: the read, the frame's checks, and whatever
/// the seal adds (decryption, decompression).
#[divan::bench(args = CONFIGS)]
fn hit(bencher: divan::Bencher, config: &str) {
    let rt = runtime();
    let (store, _dir) = memo_store(config);
    let memo = store.memo_for(&RunId::new("bench").unwrap(), IN_A_RUN, 0);
    let value = value();
    rt.block_on(memo.put("k", &value)).unwrap();
    bencher.bench_local(|| rt.block_on(memo.get("k")).unwrap().unwrap());
}

/// A put that commits a fresh key: the seal, the frame and the create.
#[divan::bench(args = CONFIGS)]
fn put(bencher: divan::Bencher, config: &str) {
    let rt = runtime();
    let (store, _dir) = memo_store(config);
    let memo = store.memo_for(&RunId::new("bench").unwrap(), IN_A_RUN, 0);
    let value = value();
    let next = AtomicU64::new(0);
    bencher.bench_local(|| {
        let key = next.fetch_add(1, Ordering::Relaxed).to_string();
        rt.block_on(memo.put(&key, &value)).unwrap()
    });
}

/// Sealing and opening alone, by payload size: a put then a get on an
/// `InMemory` store with no cache (the store's part is a map access).
mod by_size {
    use super::*;

    const SIZES: &[usize] = &[128, 512, 4096, 65536];
    const SEALS: &[&str] = &["plain", "zstd-always", "encrypted"];

    fn payload(size: usize) -> Vec<u8> {
        value().iter().copied().cycle().take(size).collect()
    }

    #[divan::bench(consts = SIZES, args = SEALS)]
    fn put_then_get<const N: usize>(bencher: divan::Bencher, name: &str) {
        let rt = runtime();
        let seal = match name {
            "zstd-always" => Seal::plain().with_compression(Compression::zstd(1, 0)),
            other => super::seal(other),
        };
        let store = MemoStore::new(Arc::new(InMemory::new()), "bench")
            .with_entry_cache(0)
            .with_seal(seal);
        let memo = store.memo_for(&RunId::new("bench").unwrap(), IN_A_RUN, 0);
        let payload = payload(N);
        let next = AtomicU64::new(0);
        bencher.bench_local(|| {
            let key = next.fetch_add(1, Ordering::Relaxed).to_string();
            rt.block_on(memo.put(&key, &payload)).unwrap();
            rt.block_on(memo.get(&key)).unwrap().unwrap()
        });
    }
}

/// The bytes stored for each payload size at zstd level 1 (the default),
/// against the payload: where compression starts to pay.
fn print_stored_sizes() {
    let rt = runtime();
    println!("stored bytes of a text payload (frame included):");
    println!("payload | plain | zstd (always) | saved");
    for size in [64usize, 128, 256, 512, 1024, 4096, 65536] {
        let payload: Vec<u8> = value().iter().copied().cycle().take(size).collect();
        let stored = |seal: Seal| {
            let objects = Arc::new(InMemory::new());
            let store = MemoStore::new(objects.clone(), "b").with_seal(seal);
            let memo = store.new_memo(&RunId::new("r").unwrap(), 0);
            rt.block_on(memo.put("k", &payload)).unwrap();
            let listed: Vec<_> = rt.block_on(objects.list(None).try_collect()).unwrap();
            listed[0].size
        };
        let plain = stored(Seal::plain());
        let zstd = stored(Seal::plain().with_compression(Compression::zstd(1, 0)));
        println!("{size} | {plain} | {zstd} | {}", plain as i64 - zstd as i64);
    }
}
