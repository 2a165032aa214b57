//! `MemoStore`'s committed-entry cache: a committed value is served again
//! without a request, a miss is not kept, a lost create keeps the stored
//! value, and no cleared entry is ever served again, whoever cleared it in
//! the process (a clear, a retention sweep, another instance).
//!
//! A clear reaches every cache in the process by path, whichever store it
//! went through, and the tests of this file run in parallel: each keeps its
//! objects under a prefix of its own ([`own_prefix`]), so that another
//! test's clear never evicts what it counts on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::{
    Incarnation, MemoStore, limits::DEFAULT_ENTRY_CACHE_BYTES, retention::RetentionSweeper,
};
use memo_tests::fixtures::run;

/// The incarnation of a workflow run: only workflow runs' entries are
/// cached.
const WORKFLOW_RUN: Incarnation = Incarnation::from_u64(7);

/// A store prefix no other test of this binary uses.
fn own_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("memo-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Objects shared by every `MemoStore` of a test, counted.
fn counted_objects() -> (Arc<CountingStore<InMemory>>, Arc<dyn ObjectStore>) {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let objects: Arc<dyn ObjectStore> = counting.clone();
    (counting, objects)
}

/// Requests made since the last call, then zeroes the counts.
fn requests(counting: &CountingStore<InMemory>) -> RequestCounts {
    let counts = counting.counts();
    counting.reset();
    counts
}

#[tokio::test]
async fn the_cache_is_on_by_default_with_the_documented_size() {
    let prefix = own_prefix();
    let store = MemoStore::new(Arc::new(InMemory::new()), &prefix);
    assert_eq!(store.entry_cache_bytes(), DEFAULT_ENTRY_CACHE_BYTES);
    assert_eq!(
        store.clone().with_max_value_size(8).entry_cache_bytes(),
        DEFAULT_ENTRY_CACHE_BYTES
    );
    assert_eq!(store.with_entry_cache(1 << 20).entry_cache_bytes(), 1 << 20);
}

#[tokio::test]
async fn a_second_read_of_a_committed_entry_makes_no_request() {
    let prefix = own_prefix();
    let (counting, objects) = counted_objects();
    MemoStore::new(Arc::clone(&objects), &prefix)
        .memo_for(&run("r"), WORKFLOW_RUN, 0)
        .put("k", b"v")
        .await
        .unwrap();
    let memo = MemoStore::new(objects, &prefix).memo_for(&run("r"), WORKFLOW_RUN, 0);
    requests(&counting);
    assert_eq!(&memo.get("k").await.unwrap().unwrap()[..], b"v");
    assert_eq!(requests(&counting).gets, 1, "the first read is cold");
    assert_eq!(&memo.get("k").await.unwrap().unwrap()[..], b"v");
    assert_eq!(requests(&counting), RequestCounts::default());
}

#[tokio::test]
async fn clones_share_the_cache_and_a_committed_put_fills_it() {
    let prefix = own_prefix();
    let (counting, objects) = counted_objects();
    let store = MemoStore::new(objects, &prefix);
    let memo = store.memo_for(&run("r"), WORKFLOW_RUN, 0);
    memo.put("k", b"v").await.unwrap();
    requests(&counting);
    let clone = store.clone();
    assert_eq!(
        &clone
            .memo_for(&run("r"), WORKFLOW_RUN, 0)
            .get("k")
            .await
            .unwrap()
            .unwrap()[..],
        b"v"
    );
    // A put of a committed key answers from the cache too.
    assert_eq!(&memo.put("k", b"other").await.unwrap()[..], b"v");
    assert_eq!(requests(&counting), RequestCounts::default());
}

#[tokio::test]
async fn two_instances_do_not_share_a_cache() {
    let prefix = own_prefix();
    let (counting, objects) = counted_objects();
    let first = MemoStore::new(Arc::clone(&objects), &prefix);
    first.new_memo(&run("r"), 0).put("k", b"v").await.unwrap();
    requests(&counting);
    let second = MemoStore::new(objects, &prefix).new_memo(&run("r"), 0);
    assert_eq!(&second.get("k").await.unwrap().unwrap()[..], b"v");
    assert_eq!(requests(&counting).gets, 1);
}

#[tokio::test]
async fn misses_are_not_cached() {
    let prefix = own_prefix();
    let (_, objects) = counted_objects();
    let reader = MemoStore::new(Arc::clone(&objects), &prefix).new_memo(&run("r"), 0);
    assert_eq!(reader.get("k").await.unwrap(), None);
    MemoStore::new(objects, &prefix)
        .new_memo(&run("r"), 0)
        .put("k", b"v")
        .await
        .unwrap();
    assert_eq!(&reader.get("k").await.unwrap().unwrap()[..], b"v");
}

#[tokio::test]
async fn a_lost_create_caches_the_stored_value_not_its_own() {
    let prefix = own_prefix();
    let (counting, objects) = counted_objects();
    let winner = MemoStore::new(Arc::clone(&objects), &prefix).memo_for(&run("r"), WORKFLOW_RUN, 0);
    let loser = MemoStore::new(objects, &prefix).memo_for(&run("r"), WORKFLOW_RUN, 0);
    winner.put("k", b"first").await.unwrap();
    assert_eq!(&loser.put("k", b"second").await.unwrap()[..], b"first");
    requests(&counting);
    assert_eq!(&loser.get("k").await.unwrap().unwrap()[..], b"first");
    assert_eq!(requests(&counting), RequestCounts::default(), "cached");
}

#[tokio::test]
async fn without_the_cache_every_read_makes_a_request() {
    let prefix = own_prefix();
    let (counting, objects) = counted_objects();
    let store = MemoStore::new(objects, &prefix).with_entry_cache(0);
    assert_eq!(store.entry_cache_bytes(), 0);
    let memo = store.new_memo(&run("r"), 0);
    memo.put("k", b"v").await.unwrap();
    requests(&counting);
    memo.get("k").await.unwrap().unwrap();
    memo.get("k").await.unwrap().unwrap();
    assert_eq!(requests(&counting).gets, 2);
}

#[tokio::test]
async fn a_cleared_standalone_run_is_read_from_the_store_again() {
    let prefix = own_prefix();
    let (counting, objects) = counted_objects();
    let store = MemoStore::new(objects, &prefix);
    let memo = store.new_memo(&run("r"), 0);
    memo.put("k", b"old").await.unwrap();
    assert_eq!(store.clear_memos_for_run(&run("r")).await.unwrap(), 1);
    requests(&counting);
    assert_eq!(memo.get("k").await.unwrap(), None);
    assert_eq!(requests(&counting).gets, 1, "the read went to the store");
    // The id used again is a new run: its value, not the cleared one.
    assert_eq!(&memo.put("k", b"new").await.unwrap()[..], b"new");
}

#[tokio::test]
async fn a_cleared_incarnation_is_never_served_and_others_stay_cached() {
    let prefix = own_prefix();
    let (counting, objects) = counted_objects();
    let store = MemoStore::new(objects, &prefix);
    let (doomed, kept) = (Incarnation::from_u64(1), Incarnation::from_u64(2));
    store
        .memo_for(&run("r"), doomed, 0)
        .put("k", b"doomed")
        .await
        .unwrap();
    store
        .memo_for(&run("r"), kept, 0)
        .put("k", b"kept")
        .await
        .unwrap();
    store.clear_incarnation(&run("r"), doomed).await.unwrap();
    requests(&counting);
    assert_eq!(
        store.memo_for(&run("r"), doomed, 0).get("k").await.unwrap(),
        None
    );
    assert_eq!(
        &store
            .memo_for(&run("r"), kept, 0)
            .get("k")
            .await
            .unwrap()
            .unwrap()[..],
        b"kept"
    );
    assert_eq!(requests(&counting).gets, 1, "only the cleared one is read");
}

#[tokio::test]
async fn a_clear_through_another_instance_reaches_this_cache() {
    let prefix = own_prefix();
    let (_, objects) = counted_objects();
    let cached = MemoStore::new(Arc::clone(&objects), &prefix).new_memo(&run("r"), 0);
    cached.put("k", b"v").await.unwrap();
    MemoStore::new(objects, &prefix)
        .clear_memos_for_run(&run("r"))
        .await
        .unwrap();
    assert_eq!(cached.get("k").await.unwrap(), None);
}

#[tokio::test]
async fn a_swept_run_is_never_served_from_the_cache() {
    let prefix = own_prefix();
    let (_, objects) = counted_objects();
    let store = MemoStore::new(objects, &prefix);
    let memo = store.new_memo(&run("swept"), 0);
    memo.put("k", b"v").await.unwrap();
    store
        .markers()
        .write_standalone(&run("swept"), 0)
        .await
        .unwrap();
    // A sweeper of its own instance, as a separate sweeper task builds it.
    let sweeper_store = MemoStore::new(Arc::clone(store.object_store()), &prefix);
    let day = Duration::from_secs(24 * 3600);
    let report = RetentionSweeper::builder(sweeper_store, day)
        .build()
        .sweep_once(30 * day.as_millis() as u64)
        .await
        .unwrap();
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    assert_eq!(memo.get("k").await.unwrap(), None);
}

/// Standalone memos across processes (issue 20, case 7): process A reads a
/// standalone entry; process B (an operator's `memoctl sweep`) clears the
/// run; process C commits a new value for the key. A must read C's value,
/// so that every caller of the key sees one value.
#[tokio::test]
async fn a_standalone_entry_cleared_and_rewritten_elsewhere_is_read_anew() {
    let prefix = own_prefix();
    let (_, objects) = counted_objects();
    let (a, b, c) = (
        MemoStore::new(Arc::clone(&objects), &prefix),
        MemoStore::new(Arc::clone(&objects), &prefix),
        MemoStore::new(Arc::clone(&objects), &prefix),
    );
    let key = run("standalone");
    c.new_memo(&key, 0).put("k", b"old").await.unwrap();
    let cached = a.new_memo(&key, 0);
    assert_eq!(&cached.get("k").await.unwrap().unwrap()[..], b"old");

    // B clears the run in another process. A clear through a `MemoStore` of
    // this process would reach A's cache too, which another process's
    // cannot: B deletes what its clear would, through the objects alone.
    let folder = Path::from(format!("{prefix}/memos/standalone"));
    let entries: Vec<_> = objects
        .list(Some(&folder))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(entries.len(), 1);
    for entry in &entries {
        objects.delete(entry).await.unwrap();
    }
    assert_eq!(b.new_memo(&key, 0).get("k").await.unwrap(), None);
    let new = c.new_memo(&key, 0).put("k", b"new").await.unwrap();
    assert_eq!(&new[..], b"new");

    assert_eq!(&cached.get("k").await.unwrap().unwrap()[..], b"new");
    assert_eq!(&cached.put("k", b"mine").await.unwrap()[..], b"new");
}
