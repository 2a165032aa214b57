//! The shared scope (`#[memoized(scope = shared)]`, `memo_runtime::shared`):
//! one entry per call for every run and worker, racing writers converging
//! on one value, apart from every run's entries and their sweep, and its
//! own expiry, swept at a cost that grows with the expired entries only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use memo_runtime::clock::{Clock, ManualClock};
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::retention::RetentionSweeper;
use memo_runtime::shared::{SharedScope, SharedSweep};
use memo_runtime::store::LocalFolder;
use memo_runtime::testing::CountingStore;
use memo_runtime::{Memo, MemoStore, memoized};
use memo_tests::fixtures::{run, stored_under};
use memo_tests::pause::{Held, Pauses, wait_reached};
use tokio::sync::Barrier;

const HOUR_MS: u64 = 60 * 60 * 1000;

/// A model call that records how often it ran and which worker ran it.
#[memoized(scope = shared, skip(calls, barrier, worker))]
async fn complete(
    memo: &Memo,
    calls: &AtomicU32,
    barrier: &Barrier,
    worker: u32,
    prompt: &str,
) -> memo_runtime::Result<String> {
    calls.fetch_add(1, Ordering::SeqCst);
    // Both workers' bodies are in flight before either commits: the race
    // is on the commit, as between two machines.
    barrier.wait().await;
    Ok(format!("worker {worker} answers {prompt}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_racing_one_shared_key_converge_on_one_value() {
    let folder = tempfile::tempdir().unwrap();
    // Two workers: two object-store instances over one folder, as two
    // processes would have.
    let worker = |_| {
        let store: Arc<dyn ObjectStore> = Arc::new(LocalFolder::new(folder.path()).unwrap());
        MemoStore::new(store, "memo")
    };
    let (a, b) = (worker(0), worker(1));
    let calls = AtomicU32::new(0);
    let barrier = Barrier::new(2);
    let (memo_a, memo_b) = (a.new_memo(&run("run-a"), 0), b.new_memo(&run("run-b"), 7));
    let (answer_a, answer_b) = tokio::join!(
        complete(&memo_a, &calls, &barrier, 1, "refund?"),
        complete(&memo_b, &calls, &barrier, 2, "refund?"),
    );
    let (answer_a, answer_b) = (answer_a.unwrap(), answer_b.unwrap());
    assert_eq!(answer_a, answer_b, "every caller sees one value");
    // Across processes each body may run before one commits; no more.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // One entry, one expiry marker: the loser deleted its own.
    let store = a.object_store().as_ref();
    assert_eq!(stored_under(store, "memo/shared/entries").await.len(), 1);
    assert_eq!(stored_under(store, "memo/shared/expiry").await.len(), 1);
    assert!(
        stored_under(store, "memo/memos").await.is_empty(),
        "no run entry"
    );

    // A third run, on either worker, finds the committed value without a call.
    let again = Barrier::new(1);
    let third = complete(&b.new_memo(&run("run-c"), 1), &calls, &again, 3, "refund?").await;
    assert_eq!(third.unwrap(), answer_a);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_in_one_process_run_a_shared_body_once() {
    let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    let calls = AtomicU32::new(0);
    // One party: the body never waits for another.
    let barrier = Barrier::new(1);
    let memos: Vec<Memo> = (0..8)
        .map(|i| store.new_memo(&run(&format!("run-{i}")), i))
        .collect();
    let answers = futures::future::join_all(
        memos
            .iter()
            .enumerate()
            .map(|(i, memo)| complete(memo, &calls, &barrier, i as u32, "hello")),
    )
    .await;
    let first = answers[0].as_ref().unwrap();
    assert!(answers.iter().all(|a| a.as_ref().unwrap() == first));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "single flight across runs");
}

static PRIVATE_CALLS: AtomicU32 = AtomicU32::new(0);
static SHARED_CALLS: AtomicU32 = AtomicU32::new(0);

#[memoized(name = "summarize")]
async fn summarize_per_run(memo: &Memo, text: &str) -> memo_runtime::Result<usize> {
    PRIVATE_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(text.len())
}

#[memoized(name = "summarize", scope = shared)]
async fn summarize_shared(memo: &Memo, text: &str) -> memo_runtime::Result<usize> {
    SHARED_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(text.len())
}

#[tokio::test]
async fn a_shared_entry_is_apart_from_the_runs_and_survives_their_sweep() {
    let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    let (one, two) = (run("order-1"), run("order-2"));
    // Same name, version and arguments: the scope alone keeps them apart.
    summarize_per_run(&store.new_memo(&one, 0), "text")
        .await
        .unwrap();
    summarize_shared(&store.new_memo(&one, 0), "text")
        .await
        .unwrap();
    summarize_shared(&store.new_memo(&two, 3), "text")
        .await
        .unwrap();
    summarize_per_run(&store.new_memo(&two, 3), "text")
        .await
        .unwrap();
    assert_eq!(PRIVATE_CALLS.load(Ordering::SeqCst), 2, "once per run");
    assert_eq!(SHARED_CALLS.load(Ordering::SeqCst), 1, "once for both runs");

    // Both runs end long ago and are swept.
    for id in [&one, &two] {
        store.markers().write_standalone(id, 1_000).await.unwrap();
    }
    let sweeper = RetentionSweeper::builder(store.clone(), Duration::from_secs(1)).build();
    let report = sweeper.sweep_once(1_000_000).await.unwrap();
    assert_eq!((report.runs_cleared, report.entries_deleted), (2, 2));
    let objects = store.object_store().as_ref();
    assert!(stored_under(objects, "memo/memos").await.is_empty());
    assert_eq!(stored_under(objects, "memo/shared/entries").await.len(), 1);

    // A later run still finds the shared value; its own call runs again.
    let three = store.new_memo(&run("order-3"), 0);
    summarize_shared(&three, "text").await.unwrap();
    summarize_per_run(&three, "text").await.unwrap();
    assert_eq!(SHARED_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(PRIVATE_CALLS.load(Ordering::SeqCst), 3);
}

/// A store whose shared scope is `namespace`, with time to live `ttl_ms`,
/// timed by `clock`.
fn scoped(store: &MemoStore, namespace: &str, ttl_ms: u64, clock: &Arc<ManualClock>) -> Memo {
    let scope = SharedScope::new(namespace, Duration::from_millis(ttl_ms))
        .unwrap()
        .with_clock(clock.clone());
    store.new_memo(&run("writer"), 0).shared_in(&scope)
}

#[tokio::test]
async fn the_ttl_sweep_deletes_exactly_the_expired_entries_at_a_cost_in_proportion_to_them() {
    const EXPIRED: u64 = 5;
    let mut costs = Vec::new();
    for retained in [20u64, 400] {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let store = MemoStore::new(counting.clone(), "memo");
        let start = 100 * HOUR_MS;
        let clock = Arc::new(ManualClock::new(start));
        // Short-lived entries, written a minute apart within one hour...
        let short = scoped(&store, "short", HOUR_MS / 2, &clock);
        for i in 0..EXPIRED {
            short.put(&format!("short-{i}"), b"v").await.unwrap();
            clock.advance_ms(60_000);
        }
        // ...and long-lived ones, over many hours, in another namespace and
        // the same one.
        let long = scoped(&store, "long", 30 * 24 * HOUR_MS, &clock);
        let short_but_later = scoped(&store, "short", 10 * HOUR_MS, &clock);
        for i in 0..retained {
            long.put(&format!("long-{i}"), b"v").await.unwrap();
            clock.advance_ms(HOUR_MS / 4);
        }
        short_but_later.put("short-kept", b"v").await.unwrap();
        // In the hour that holds the cutoff (listed from an offset): one
        // entry expiring just before the cutoff, swept, and one expiring
        // exactly at it, kept.
        let cutoff = start + HOUR_MS + HOUR_MS / 2;
        clock.set_ms(cutoff - HOUR_MS / 2 - 1);
        short.put(&format!("short-{EXPIRED}"), b"v").await.unwrap();
        clock.set_ms(cutoff - HOUR_MS / 2);
        short.put("at-the-cutoff", b"v").await.unwrap();
        let expired = EXPIRED + 1;

        counting.reset();
        let report = store.shared_entries().sweep(cutoff).await.unwrap();
        let c = counting.counts();
        assert_eq!(report.markers_expired, expired as usize, "{report:?}");
        assert_eq!(report.entries_deleted, expired as usize, "{report:?}");
        assert_eq!(report.failures, 0);
        // Requests: the hour folders, one listing of each expired hour (the
        // cutoff's from an offset), and two deletes (entry, marker) per
        // expired entry, in two `delete_stream`s (the entries, then their
        // markers: one S3 request each, for up to 1,000); nothing read.
        assert_eq!(
            (c.lists_with_delimiter, c.lists, c.lists_with_offset),
            (1, 1, 1),
            "{c:?}"
        );
        assert_eq!(c.delete_paths, 2 * expired, "{c:?}");
        assert_eq!(c.delete_streams, 2, "{c:?}");
        assert_eq!((c.gets, c.heads, c.creates, c.puts), (0, 0, 0, 0), "{c:?}");
        assert_eq!(
            c.objects_listed, expired,
            "only expired markers are listed: {c:?}"
        );
        costs.push((
            c.delete_paths,
            c.objects_listed,
            c.lists + c.lists_with_offset,
        ));

        for i in 0..expired {
            assert_eq!(short.get(&format!("short-{i}")).await.unwrap(), None);
        }
        assert!(short.get("at-the-cutoff").await.unwrap().is_some());
        assert!(short.get("short-kept").await.unwrap().is_some());
        for i in 0..retained {
            assert!(long.get(&format!("long-{i}")).await.unwrap().is_some());
        }
        // Sweeping again finds nothing.
        let again = store.shared_entries().sweep(cutoff).await.unwrap();
        assert_eq!((again.markers_expired, again.entries_deleted), (0, 0));
        // An expired key is written afresh, with a new marker.
        assert_eq!(&short.put("short-0", b"new").await.unwrap()[..], b"new");
    }
    assert_eq!(costs[0], costs[1], "the same cost with 20 and 400 retained");
}

/// A memo store over `objects` holding `n` shared entries (namespace
/// `short`, a minute to live), and its clock an hour after they were
/// written: every one of them expired.
async fn expired_entries(objects: Arc<dyn ObjectStore>, n: u64) -> (MemoStore, Arc<ManualClock>) {
    let store = MemoStore::new(objects, "memo");
    let clock = Arc::new(ManualClock::new(100 * HOUR_MS));
    let short = scoped(&store, "short", 60_000, &clock);
    for i in 0..n {
        short.put(&format!("k-{i}"), b"v").await.unwrap();
    }
    clock.advance_ms(HOUR_MS);
    (store, clock)
}

#[tokio::test]
async fn a_sweep_deletes_a_thousand_expired_entries_per_batch_and_their_markers_after_them() {
    const EXPIRED: u64 = 1_001;
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let (store, clock) = expired_entries(counting.clone(), EXPIRED).await;
    counting.reset();
    let report = store.shared_entries().sweep(clock.now_ms()).await.unwrap();
    assert_eq!(
        (
            report.markers_expired,
            report.entries_deleted,
            report.failures
        ),
        (EXPIRED as usize, EXPIRED as usize, 0),
        "{report:?}"
    );
    let c = counting.counts();
    // A thousand entries, their markers, then the last entry and its
    // marker: one `DeleteObjects` request each on S3, where a delete per
    // path sent 2,002.
    assert_eq!(
        (c.delete_streams, c.delete_paths),
        (4, 2 * EXPIRED),
        "{c:?}"
    );
    assert!(
        stored_under(counting.as_ref(), "memo/shared")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn an_entry_whose_delete_fails_keeps_its_marker_for_the_next_sweep() {
    use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let (store, clock) = expired_entries(faults.clone(), 5).await;
    // The second entry's delete is refused (entries are deleted first, in
    // the markers' order: a batch of five).
    faults.inject(
        FaultRule::fail_before(RequestKind::Delete)
            .at_prefix("memo/shared/entries")
            .skip(1)
            .times(1),
    );
    let report = store.shared_entries().sweep(clock.now_ms()).await.unwrap();
    assert_eq!(
        (
            report.markers_expired,
            report.entries_deleted,
            report.failures
        ),
        (5, 4, 1),
        "{report:?}"
    );
    let left = stored_under(faults.as_ref(), "memo/shared").await;
    assert_eq!(left.len(), 2, "one entry and its marker are kept: {left:?}");
    assert!(
        left.iter().any(|p| p.starts_with("memo/shared/entries/")),
        "{left:?}"
    );
    assert!(
        left.iter().any(|p| p.starts_with("memo/shared/expiry/")),
        "{left:?}"
    );
    // The next sweep deletes both.
    let again = store.shared_entries().sweep(clock.now_ms()).await.unwrap();
    assert_eq!(
        (again.markers_expired, again.entries_deleted, again.failures),
        (1, 1, 0),
        "{again:?}"
    );
    assert!(
        stored_under(faults.as_ref(), "memo/shared")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_listing_that_fails_part_way_still_sweeps_what_it_listed_before() {
    use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let store = MemoStore::new(faults.clone(), "memo");
    let clock = Arc::new(ManualClock::new(100 * HOUR_MS));
    let short = scoped(&store, "short", 60_000, &clock);
    // Three entries expiring in hour 100, two in hour 101.
    for i in 0..3 {
        short.put(&format!("early-{i}"), b"v").await.unwrap();
    }
    clock.advance_ms(HOUR_MS);
    for i in 0..2 {
        short.put(&format!("late-{i}"), b"v").await.unwrap();
    }
    clock.advance_ms(2 * HOUR_MS);
    // The hour folders, hour 100, then hour 101, whose listing fails.
    faults.inject(
        FaultRule::fail_before(RequestKind::List)
            .at_prefix("memo/shared/expiry")
            .skip(2)
            .times(1),
    );
    let failed = store.shared_entries().sweep(clock.now_ms()).await;
    assert!(failed.is_err(), "{failed:?}");
    for i in 0..3 {
        assert_eq!(short.get(&format!("early-{i}")).await.unwrap(), None);
    }
    for i in 0..2 {
        assert!(short.get(&format!("late-{i}")).await.unwrap().is_some());
    }
    // The next sweep finds the rest.
    let again = store.shared_entries().sweep(clock.now_ms()).await.unwrap();
    assert_eq!((again.markers_expired, again.entries_deleted), (2, 2));
    assert!(
        stored_under(faults.as_ref(), "memo/shared")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_swept_shared_call_runs_its_body_again() {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    #[memoized(scope = shared)]
    async fn translate(memo: &Memo, text: &str) -> memo_runtime::Result<String> {
        CALLS.fetch_add(1, Ordering::SeqCst);
        Ok(text.to_uppercase())
    }
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let scope = SharedScope::new("translations", Duration::from_secs(60))
        .unwrap()
        .with_clock(clock.clone());
    let store = MemoStore::new(Arc::new(InMemory::new()), "memo").with_shared_scope(scope);
    assert_eq!(store.shared_scope().namespace(), "translations");
    let memo = store.new_memo(&run("r"), 0);
    translate(&memo, "hi").await.unwrap();
    translate(&memo, "hi").await.unwrap();
    assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    clock.advance_ms(59_999);
    let kept = store.shared_entries().sweep(clock.now_ms()).await.unwrap();
    assert_eq!(kept.entries_deleted, 0, "not yet expired");
    clock.advance_ms(2);
    let swept = store.shared_entries().sweep(clock.now_ms()).await.unwrap();
    assert_eq!(swept.entries_deleted, 1);
    translate(&memo, "hi").await.unwrap();
    assert_eq!(CALLS.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_value_over_the_limit_is_refused_before_anything_is_written() {
    let store = MemoStore::new(Arc::new(InMemory::new()), "memo").with_max_value_size(4);
    let memo = store.new_memo(&run("r"), 0).shared();
    let error = memo.put("k", b"too large").await.unwrap_err();
    assert!(
        matches!(error, memo_runtime::Error::TooLarge { .. }),
        "{error}"
    );
    assert!(
        stored_under(store.object_store().as_ref(), "memo")
            .await
            .is_empty()
    );
}

#[test]
fn a_namespace_is_checked() {
    for bad in ["", "Upper", "with space", "dot.ted", "a/b", &"n".repeat(65)] {
        let error = SharedScope::new(bad, Duration::from_secs(1)).unwrap_err();
        assert!(error.to_string().contains("namespace"), "{error}");
    }
    assert!(SharedScope::new("ok", Duration::ZERO).is_err());
    let default = SharedScope::default();
    assert_eq!(
        (default.namespace(), default.ttl()),
        ("default", Duration::from_secs(7 * 24 * 3600))
    );
}

#[tokio::test]
async fn a_shared_miss_costs_two_creates_and_a_hit_one_read() {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    #[memoized(scope = shared)]
    async fn answer(memo: &Memo, prompt: &str) -> memo_runtime::Result<String> {
        CALLS.fetch_add(1, Ordering::SeqCst);
        Ok(prompt.to_owned())
    }
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let store = MemoStore::new(counting.clone(), "memo");
    answer(&store.new_memo(&run("first"), 0), "q")
        .await
        .unwrap();
    let miss = counting.counts();
    // The read (no flight ended since it, so none again under the flight),
    // then the expiry marker and the entry: the run-scoped miss's read and
    // create, plus one create.
    assert_eq!(
        (miss.gets, miss.creates, miss.delete_paths),
        (1, 2, 0),
        "{miss:?}"
    );
    counting.reset();
    answer(&store.new_memo(&run("second"), 0), "q")
        .await
        .unwrap();
    let hit = counting.counts();
    assert_eq!(
        (hit.gets, hit.creates, hit.delete_paths),
        (1, 0, 0),
        "{hit:?}"
    );
    assert_eq!(CALLS.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_background_sweepers_on_one_folder_delete_each_expired_shared_entry_once() {
    const EXPIRED: usize = 12;
    const LIVE: usize = 5;
    let folder = tempfile::tempdir().unwrap();
    // Two workers: two object-store instances over one folder.
    let worker = |_| {
        let store: Arc<dyn ObjectStore> = Arc::new(LocalFolder::new(folder.path()).unwrap());
        MemoStore::new(store, "memo")
    };
    let (a, b) = (worker(0), worker(1));
    // Written at 1 s with an hour to live: expired by the sweepers' time.
    let then = Arc::new(ManualClock::new(1_000));
    let stale = scoped(&a, "llm", HOUR_MS, &then);
    for i in 0..EXPIRED {
        stale.put(&format!("old-{i}"), b"stale").await.unwrap();
    }
    // Written at the sweepers' time with a day to live: live.
    let now_ms = 10 * HOUR_MS;
    let now = Arc::new(ManualClock::new(now_ms));
    let live = scoped(&b, "llm", 24 * HOUR_MS, &now);
    for i in 0..LIVE {
        live.put(&format!("new-{i}"), b"live").await.unwrap();
    }

    // A sweeper in every worker, both passing at once; runs' retention
    // (a week) expires no run, the shared entries have their own.
    let sweepers = [&a, &b].map(|store| {
        RetentionSweeper::builder(store.clone(), Duration::from_secs(7 * 24 * 3600))
            .clock(now.clone())
            .build()
            .spawn(Duration::from_secs(3600))
    });
    let mut summaries = Vec::new();
    for handle in sweepers {
        handle
            .subscribe()
            .wait_for(|summary| summary.passes >= 1)
            .await
            .unwrap();
        summaries.push(handle.shutdown().await);
    }
    let deleted: u64 = summaries.iter().map(|s| s.shared_entries_deleted).sum();
    assert_eq!(
        deleted, EXPIRED as u64,
        "each expired entry deleted once: {summaries:?}"
    );
    for summary in &summaries {
        let report = summary.last_report.as_ref().unwrap();
        assert!(report.is_complete(), "{report:?}");
        assert_eq!(summary.runs_cleared, 0);
    }

    let objects = a.object_store().as_ref();
    assert_eq!(
        stored_under(objects, "memo/shared/entries").await.len(),
        LIVE
    );
    assert_eq!(
        stored_under(objects, "memo/shared/expiry").await.len(),
        LIVE
    );
    for i in 0..EXPIRED {
        assert_eq!(stale.get(&format!("old-{i}")).await.unwrap(), None);
    }
    for i in 0..LIVE {
        let value = live.get(&format!("new-{i}")).await.unwrap();
        assert_eq!(value.as_deref(), Some(&b"live"[..]), "live entry {i} kept");
    }
}

#[tokio::test]
async fn a_dry_run_pass_counts_the_expired_shared_entries_and_deletes_none() {
    let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    let then = Arc::new(ManualClock::new(1_000));
    let stale = scoped(&store, "llm", HOUR_MS, &then);
    for key in ["a", "b", "c"] {
        stale.put(key, b"stale").await.unwrap();
    }
    let week = Duration::from_secs(7 * 24 * 3600);
    let dry = RetentionSweeper::builder(store.clone(), week)
        .dry_run(true)
        .build()
        .sweep_once(2 * HOUR_MS)
        .await
        .unwrap();
    assert_eq!(
        (dry.shared_markers_expired, dry.shared_entries_deleted),
        (3, 0)
    );
    assert!(stale.get("a").await.unwrap().is_some());
    let real = RetentionSweeper::builder(store.clone(), week)
        .build()
        .sweep_once(2 * HOUR_MS)
        .await
        .unwrap();
    assert_eq!(
        (real.shared_markers_expired, real.shared_entries_deleted),
        (3, 3)
    );
    assert_eq!(stale.get("a").await.unwrap(), None);
}

/// A sweep of the shared scope of `objects` at `clock`'s time, through a
/// store of another worker.
async fn sweep_shared(objects: &Arc<dyn ObjectStore>, clock: &ManualClock) -> SharedSweep {
    let sweeper = MemoStore::new(objects.clone(), "memo");
    sweeper
        .shared_entries()
        .sweep(clock.now_ms())
        .await
        .unwrap()
}

/// Every object of the shared scope of `objects`.
async fn shared_left(objects: &Arc<dyn ObjectStore>) -> Vec<String> {
    stored_under(objects.as_ref(), "memo/shared").await
}

/// Found by the simulator's shared-scope world (seed 57, session 53): a
/// writer wrote its expiry marker, then stalled (a paused process, a slow
/// request) past the time to live before its entry landed; a sweep
/// meanwhile found the marker expired, deleted the entry it names (none
/// yet) and the marker. The entry then landed with no marker, so no sweep
/// would ever delete it. A write that took half its time to live or more
/// marks its entry again once it has landed.
#[tokio::test]
async fn an_entry_written_after_its_marker_was_swept_is_marked_again_and_expires() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (paused, pause) = Pauses::new(
        objects.clone(),
        Held::Put,
        Path::from("memo/shared/entries"),
    );
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let writer_store = MemoStore::new(Arc::new(paused), "memo");
    let writer = scoped(&writer_store, "llm", 60_000, &clock);
    let write = tokio::spawn(async move { writer.put("prompt", b"answer").await });
    wait_reached(pause.reached, "the writer creates its entry").await;

    // The writer stalls past its marker's expiry; another worker's sweep
    // deletes the marker, and the entry it names, which is not there yet.
    clock.advance_ms(60_001);
    let swept = sweep_shared(&objects, &clock).await;
    assert_eq!(swept.markers_expired, 1);
    assert_eq!(shared_left(&objects).await, Vec::<String>::new());

    pause.release.send(()).unwrap();
    let committed = write.await.unwrap().unwrap();
    assert_eq!(&committed[..], b"answer");
    let markers = stored_under(objects.as_ref(), "memo/shared/expiry").await;
    assert_eq!(
        markers.len(),
        1,
        "the landed entry has a marker: {markers:?}"
    );

    // It lives its time to live from when it landed, then goes.
    clock.advance_ms(59_999);
    let kept = sweep_shared(&objects, &clock).await;
    assert_eq!(kept.entries_deleted, 0, "not yet expired");
    clock.advance_ms(2);
    let swept = sweep_shared(&objects, &clock).await;
    assert_eq!(swept.entries_deleted, 1);
    assert_eq!(shared_left(&objects).await, Vec::<String>::new());
}

/// The same stall in the marker's own write: the marker landed already
/// expired, so a sweep before the entry lands would take it, and a writer
/// that then died after its entry landed, before marking it again, would
/// leave the entry unmarked. A marker whose write took half the time to
/// live or more is replaced before the entry is written.
#[tokio::test]
async fn a_marker_whose_write_outlived_half_the_ttl_is_written_again_before_the_entry() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (entries_held, entry) = Pauses::new(
        objects.clone(),
        Held::Put,
        Path::from("memo/shared/entries"),
    );
    let (markers_held, marker) = Pauses::new(
        Arc::new(entries_held),
        Held::Put,
        Path::from("memo/shared/expiry"),
    );
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let writer_store = MemoStore::new(Arc::new(markers_held), "memo");
    let writer = scoped(&writer_store, "llm", 60_000, &clock);
    let write = tokio::spawn(async move { writer.put("prompt", b"answer").await });
    wait_reached(marker.reached, "the writer creates its marker").await;
    clock.advance_ms(60_001);
    marker.release.send(()).unwrap();
    wait_reached(entry.reached, "the writer creates its entry").await;

    // The entry's create is in flight: a sweep now finds no expired
    // marker of it, and one marker stands.
    let swept = sweep_shared(&objects, &clock).await;
    assert_eq!(swept.markers_expired, 0, "{swept:?}");
    let markers = stored_under(objects.as_ref(), "memo/shared/expiry").await;
    assert_eq!(markers.len(), 1, "{markers:?}");

    entry.release.send(()).unwrap();
    assert_eq!(&write.await.unwrap().unwrap()[..], b"answer");
    let after = stored_under(objects.as_ref(), "memo/shared/expiry").await;
    assert_eq!(after, markers, "the entry landed in time: no third marker");
    clock.advance_ms(60_001);
    let swept = sweep_shared(&objects, &clock).await;
    assert_eq!(swept.entries_deleted, 1);
    assert_eq!(shared_left(&objects).await, Vec::<String>::new());
}
