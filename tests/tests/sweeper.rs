//! The retention sweeper on InMemory and LocalFileSystem: what a pass
//! deletes and keeps, under injected faults, in dry-run mode, what its
//! listing costs, and the background task's life cycle.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::DeletionBegan::{At, Forgotten, Unrecorded};
use memo_runtime::runtime_store::{
    Commit, InMemoryRuntimeStore, InputRecord, NewInput, NewRun, ObjectStoreRuntimeStore,
    RunRecord, RunStatus, StatusChange, StepReceipt,
};
use memo_runtime::testing::{
    CountingStore, FaultInjectingStore, FaultRule, RequestKind, write_legacy_step_output,
};
use memo_runtime::{
    Error, Incarnation, MemoStore, RunId,
    clock::ManualClock,
    retention::{MARKER_PARTITION_MS, RetentionSweeper, TerminalMarker},
    runtime_store::RuntimeStore,
};
use memo_tests::fixtures::{Backend, Faulty, run, stored_entries};
use tokio::sync::{Notify, Semaphore};

const HOUR: u64 = MARKER_PARTITION_MS;
const DAY: u64 = 24 * HOUR;
const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// "Now" in every test: day 100, in the middle of an hour.
const NOW: u64 = 100 * DAY + HOUR / 2;
/// The cutoff at `NOW` with `RETENTION`.
const CUTOFF: u64 = NOW - 7 * DAY;

/// Gives `run` `steps` memo entries and `steps` step-output entries (as
/// earlier versions wrote them: a sweep still clears them).
async fn seed_entries(store: &MemoStore, run: &RunId, steps: u32) {
    for step in 0..steps {
        store
            .new_memo(run, step)
            .put("key", b"value")
            .await
            .unwrap();
        write_legacy_step_output(
            store,
            run,
            Incarnation::STANDALONE,
            step,
            b"payload",
            b"output",
        )
        .await
        .unwrap();
    }
}

/// Incarnation `incarnation` of a run with entries and a terminal marker.
async fn seed_run(
    store: &MemoStore,
    run: &RunId,
    incarnation: Incarnation,
    steps: u32,
    terminal_at_ms: u64,
) {
    for step in 0..steps {
        let memo = store.memo_for(run, incarnation, step);
        memo.put("key", b"value").await.unwrap();
        write_legacy_step_output(store, run, incarnation, step, b"payload", b"output")
            .await
            .unwrap();
    }
    let marker = TerminalMarker {
        run_id: run.clone(),
        terminal_at_ms,
        incarnation,
    };
    store.markers().write(&marker).await.unwrap();
}

/// A run with standalone entries and a terminal marker.
async fn seed_terminal_run(store: &MemoStore, run: &RunId, steps: u32, terminal_at_ms: u64) {
    seed_entries(store, run, steps).await;
    store
        .markers()
        .write_standalone(run, terminal_at_ms)
        .await
        .unwrap();
}

fn marker_runs(markers: &[TerminalMarker]) -> Vec<&str> {
    let mut runs: Vec<_> = markers.iter().map(|m| m.run_id.as_str()).collect();
    runs.sort_unstable();
    runs
}

/// The run ids of `markers`, in their order.
fn in_order(markers: &[TerminalMarker]) -> Vec<String> {
    markers.iter().map(|m| m.run_id.to_string()).collect()
}

fn sweeper(store: &MemoStore) -> RetentionSweeper {
    RetentionSweeper::builder(store.clone(), RETENTION).build()
}

/// Records a run in `store` and finishes it at `terminal_at_ms`.
async fn finished_run(store: &dyn RuntimeStore, run: &RunId, terminal_at_ms: u64) -> Incarnation {
    let incarnation = started_run(store, run, terminal_at_ms - 2).await;
    let done = StatusChange::Completed {
        output: Bytes::from_static(b"done"),
    };
    store
        .atomic_apply(run, Commit::status(done, terminal_at_ms))
        .await
        .unwrap();
    incarnation
}

/// Records a run in `store` and starts its first attempt.
async fn started_run(store: &dyn RuntimeStore, run: &RunId, created_at_ms: u64) -> Incarnation {
    let new = NewRun {
        run_id: run.clone(),
        workflow: "wf".into(),
        input: Bytes::new(),
        created_at_ms,
        workflow_version: None,
    };
    let incarnation = store.create_run(new).await.unwrap().incarnation;
    let start = StatusChange::start_attempt(1);
    store
        .atomic_apply(run, Commit::status(start, created_at_ms + 1))
        .await
        .unwrap();
    incarnation
}

#[tokio::test]
async fn expired_runs_are_cleared_and_their_markers_removed() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let store = MemoStore::new(objects, "memo");
        seed_terminal_run(&store, &run("old-a"), 3, CUTOFF - DAY).await;
        seed_terminal_run(&store, &run("old-b"), 2, CUTOFF - 5 * HOUR - 7).await;
        seed_terminal_run(&store, &run("recent"), 2, CUTOFF + HOUR).await;

        let report = sweeper(&store).sweep_once(NOW).await.unwrap();

        assert_eq!(report.cutoff_ms, CUTOFF, "{name}");
        assert_eq!(
            (report.markers_expired, report.runs_cleared),
            (2, 2),
            "{name}"
        );
        assert_eq!(report.entries_deleted, 2 * (3 + 2), "{name}");
        assert!(
            report.is_complete() && !report.dry_run,
            "{name}: {report:?}"
        );
        assert_eq!(stored_entries(&store, &run("old-a")).await, 0, "{name}");
        assert_eq!(stored_entries(&store, &run("old-b")).await, 0, "{name}");
        assert_eq!(stored_entries(&store, &run("recent")).await, 4, "{name}");
        let markers = store.markers().list().await.unwrap();
        assert_eq!(marker_runs(&markers), ["recent"], "{name}");
    }
}

#[tokio::test]
async fn a_run_terminal_at_exactly_the_cutoff_is_kept() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let store = MemoStore::new(objects, "memo");
        seed_terminal_run(&store, &run("at-cutoff"), 1, CUTOFF).await;
        seed_terminal_run(&store, &run("just-before"), 1, CUTOFF - 1).await;
        let sweeper = sweeper(&store);

        let report = sweeper.sweep_once(NOW).await.unwrap();
        assert_eq!(report.runs_cleared, 1, "{name}");
        assert_eq!(
            stored_entries(&store, &run("just-before")).await,
            0,
            "{name}"
        );
        assert_eq!(stored_entries(&store, &run("at-cutoff")).await, 2, "{name}");

        // One millisecond later it has expired.
        let report = sweeper.sweep_once(NOW + 1).await.unwrap();
        assert_eq!(report.runs_cleared, 1, "{name}");
        assert_eq!(stored_entries(&store, &run("at-cutoff")).await, 0, "{name}");
        assert!(store.markers().list().await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn runs_next_to_an_expired_run_are_untouched() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let store = MemoStore::new(objects, "memo");
        seed_terminal_run(&store, &run("run"), 2, CUTOFF - DAY).await;
        // Neighbours by name: a run id that extends it, and ones that sort
        // right around it. One has a retained marker, the others none.
        seed_terminal_run(&store, &run("run-suffix"), 2, CUTOFF + 1).await;
        for neighbour in ["run_2", "ru", "runx"] {
            seed_entries(&store, &run(neighbour), 2).await;
        }

        let report = sweeper(&store).sweep_once(NOW).await.unwrap();

        assert_eq!(
            (report.runs_cleared, report.entries_deleted),
            (1, 4),
            "{name}"
        );
        assert_eq!(stored_entries(&store, &run("run")).await, 0, "{name}");
        for neighbour in ["run-suffix", "run_2", "ru", "runx"] {
            assert_eq!(
                stored_entries(&store, &run(neighbour)).await,
                4,
                "{name}: {neighbour}"
            );
        }
    }
}

/// A backend's name, a fault-injecting store over it, a memo store over
/// that, and the folder that backs it.
#[tokio::test]
async fn a_failed_entry_delete_keeps_the_marker_and_a_later_pass_leaves_nothing() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let (name, store) = (backend.name(), backend.memo_store("memo"));
        seed_terminal_run(&store, &run("fails"), 4, CUTOFF - DAY).await;
        seed_terminal_run(&store, &run("works"), 2, CUTOFF - DAY).await;
        seed_terminal_run(&store, &run("fails-not"), 2, CUTOFF - HOUR).await;
        seed_terminal_run(&store, &run("recent"), 2, CUTOFF + DAY).await;
        faults.inject(
            FaultRule::fail_before(RequestKind::Delete)
                .at_prefix("memo/memos/fails")
                .times(1),
        );
        let sweeper = sweeper(&store);

        let first = sweeper.sweep_once(NOW).await.unwrap();
        assert_eq!(faults.faults_injected(), 1, "{name}");
        assert_eq!(first.markers_expired, 3, "{name}");
        assert_eq!(first.runs_cleared, 2, "{name}");
        assert_eq!(first.failures.len(), 1, "{name}: {first:?}");
        let failure = &first.failures[0];
        assert_eq!(failure.run_id.as_str(), "fails", "{name}");
        assert_eq!(failure.terminal_at_ms, CUTOFF - DAY, "{name}");
        assert!(
            failure.message.contains("fails") && failure.message.contains("injected fault"),
            "{name}: {}",
            failure.message
        );
        // Every entry but the one whose delete failed is gone; the marker
        // stays, so the run is not orphaned.
        assert_eq!(stored_entries(&store, &run("fails")).await, 1, "{name}");
        let markers = store.markers().list().await.unwrap();
        assert_eq!(marker_runs(&markers), ["fails", "recent"], "{name}");

        let second = sweeper.sweep_once(NOW).await.unwrap();
        assert!(second.is_complete(), "{name}: {second:?}");
        assert_eq!(
            (second.runs_cleared, second.entries_deleted),
            (1, 1),
            "{name}"
        );
        assert_eq!(stored_entries(&store, &run("fails")).await, 0, "{name}");
        assert_eq!(stored_entries(&store, &run("recent")).await, 4, "{name}");
        let markers = store.markers().list().await.unwrap();
        assert_eq!(marker_runs(&markers), ["recent"], "{name}");
    }
}

#[tokio::test]
async fn a_failed_marker_delete_keeps_the_marker_until_a_later_pass() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let (name, store) = (backend.name(), backend.memo_store("memo"));
        seed_terminal_run(&store, &run("sticky"), 2, CUTOFF - DAY).await;
        faults.inject(
            FaultRule::fail_before(RequestKind::Delete)
                .at_prefix("memo/terminals")
                .times(1),
        );
        let sweeper = sweeper(&store);

        let first = sweeper.sweep_once(NOW).await.unwrap();
        assert_eq!(first.runs_cleared, 0, "{name}");
        assert_eq!(first.entries_deleted, 4, "{name}");
        assert_eq!(first.failures.len(), 1, "{name}: {first:?}");
        assert_eq!(stored_entries(&store, &run("sticky")).await, 0, "{name}");
        assert_eq!(store.markers().list().await.unwrap().len(), 1, "{name}");

        let second = sweeper.sweep_once(NOW).await.unwrap();
        assert_eq!(
            (second.runs_cleared, second.entries_deleted),
            (1, 0),
            "{name}"
        );
        assert!(store.markers().list().await.unwrap().is_empty(), "{name}");
    }
}

#[tokio::test]
async fn a_failed_marker_listing_is_an_error_and_deletes_nothing() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let (name, store) = (backend.name(), backend.memo_store("memo"));
        seed_terminal_run(&store, &run("listed"), 2, CUTOFF - DAY).await;
        faults.inject(
            FaultRule::fail_before(RequestKind::List)
                .at_prefix("memo/terminals")
                .times(1),
        );
        match sweeper(&store).sweep_once(NOW).await {
            Err(Error::Store { path, .. }) => {
                assert_eq!(path, "memo/terminals", "{name}")
            }
            other => panic!("{name}: expected a store error, got {other:?}"),
        }
        assert_eq!(stored_entries(&store, &run("listed")).await, 4, "{name}");
        assert_eq!(store.markers().list().await.unwrap().len(), 1, "{name}");
    }
}

#[tokio::test]
async fn a_listing_failing_mid_pass_is_an_error_and_earlier_pages_stay_swept() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let (name, store) = (backend.name(), backend.memo_store("memo"));
        seed_terminal_run(&store, &run("older"), 1, CUTOFF - 2 * DAY).await;
        seed_terminal_run(&store, &run("newer"), 1, CUTOFF - DAY).await;
        // The partition folders and the oldest partition list; the next partition fails.
        faults.inject(
            FaultRule::fail_before(RequestKind::List)
                .at_prefix("memo/terminals")
                .skip(2)
                .times(1),
        );
        let sweeper = RetentionSweeper::builder(store.clone(), RETENTION)
            .page_size(1)
            .build();
        let error = sweeper.sweep_once(NOW).await.unwrap_err();
        assert!(matches!(error, Error::Store { .. }), "{name}: {error:?}");
        assert_eq!(stored_entries(&store, &run("older")).await, 0, "{name}");
        assert_eq!(stored_entries(&store, &run("newer")).await, 2, "{name}");
        let markers = store.markers().list().await.unwrap();
        assert_eq!(marker_runs(&markers), ["newer"], "{name}");

        let report = sweeper.sweep_once(NOW).await.unwrap();
        assert_eq!(report.runs_cleared, 1, "{name}");
        assert!(store.markers().list().await.unwrap().is_empty(), "{name}");
    }
}

/// A runtime store that can fail deletes, hold `load_run` at a gate, and
/// records how many `load_run` calls overlap.
#[derive(Debug, Default)]
struct ObservedRuntimeStore {
    inner: InMemoryRuntimeStore,
    failing_deletes: AtomicU64,
    loads_in_flight: AtomicUsize,
    most_loads_in_flight: AtomicUsize,
    /// When set, each `load_run` takes a permit first.
    gate: Mutex<Option<Arc<Semaphore>>>,
    load_started: Notify,
}

#[async_trait]
impl RuntimeStore for ObservedRuntimeStore {
    async fn create_run(&self, run: NewRun) -> memo_runtime::Result<RunRecord> {
        self.inner.create_run(run).await
    }

    async fn load_run(&self, run_id: &RunId) -> memo_runtime::Result<Option<RunRecord>> {
        let now = self.loads_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_loads_in_flight.fetch_max(now, Ordering::SeqCst);
        self.load_started.notify_one();
        let gate = self.gate.lock().unwrap().clone();
        if let Some(gate) = gate {
            gate.acquire().await.unwrap().forget();
        }
        // Give the other loads the sweeper allows a chance to overlap.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        self.loads_in_flight.fetch_sub(1, Ordering::SeqCst);
        self.inner.load_run(run_id).await
    }

    async fn atomic_apply(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> memo_runtime::Result<RunRecord> {
        self.inner.atomic_apply(run_id, commit).await
    }

    async fn load_receipts(
        &self,
        run_id: &RunId,
        after: Option<u64>,
    ) -> memo_runtime::Result<Vec<StepReceipt>> {
        self.inner.load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> memo_runtime::Result<Option<Bytes>> {
        self.inner.load_snapshot(run_id).await
    }

    async fn append_input(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> memo_runtime::Result<InputRecord> {
        self.inner.append_input(run_id, input).await
    }

    async fn load_inputs(&self, run_id: &RunId) -> memo_runtime::Result<Vec<InputRecord>> {
        self.inner.load_inputs(run_id).await
    }

    async fn list_runs(
        &self,
        status: RunStatus,
    ) -> memo_runtime::Result<Vec<memo_runtime::runtime_store::RunSummary>> {
        self.inner.list_runs(status).await
    }

    async fn delete_run(
        &self,
        run_id: &RunId,
        incarnation: memo_runtime::Incarnation,
    ) -> memo_runtime::Result<bool> {
        let fail = self
            .failing_deletes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            return Err(Error::Conflict {
                what: format!("run {run_id}"),
                reason: "injected delete failure".into(),
            });
        }
        self.inner.delete_run(run_id, incarnation).await
    }
}

#[tokio::test]
async fn runtime_store_records_are_deleted_when_configured() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let store = MemoStore::new(objects, "memo");
        let runtime = Arc::new(InMemoryRuntimeStore::new());
        for (id, at) in [("expired", CUTOFF - DAY), ("retained", CUTOFF + DAY)] {
            let incarnation = finished_run(runtime.as_ref(), &run(id), at).await;
            seed_run(&store, &run(id), incarnation, 1, at).await;
        }
        let sweeper = RetentionSweeper::builder(store.clone(), RETENTION)
            .runtime_store(runtime.clone())
            .build();

        let report = sweeper.sweep_once(NOW).await.unwrap();

        assert_eq!(
            (report.runs_cleared, report.runtime_runs_deleted),
            (1, 1),
            "{name}"
        );
        assert_eq!(
            runtime.load_run(&run("expired")).await.unwrap(),
            None,
            "{name}"
        );
        assert!(runtime.load_run(&run("retained")).await.unwrap().is_some());
        assert_eq!(stored_entries(&store, &run("expired")).await, 0, "{name}");
    }
}

#[tokio::test]
async fn runtime_store_records_are_kept_without_a_runtime_store() {
    let store = Backend::in_memory().memo_store("memo");
    let runtime = InMemoryRuntimeStore::new();
    let incarnation = finished_run(&runtime, &run("expired"), CUTOFF - DAY).await;
    seed_run(&store, &run("expired"), incarnation, 1, CUTOFF - DAY).await;

    let report = sweeper(&store).sweep_once(NOW).await.unwrap();

    assert_eq!((report.runs_cleared, report.runtime_runs_deleted), (1, 0));
    assert_eq!(stored_entries(&store, &run("expired")).await, 0);
    let kept = runtime.load_run(&run("expired")).await.unwrap().unwrap();
    assert_eq!(kept.status, RunStatus::Completed);
}

#[tokio::test]
async fn a_failed_runtime_store_delete_keeps_the_marker_until_a_later_pass() {
    let store = Backend::in_memory().memo_store("memo");
    let runtime = Arc::new(ObservedRuntimeStore::default());
    runtime.failing_deletes.store(1, Ordering::SeqCst);
    let incarnation = finished_run(runtime.as_ref(), &run("expired"), CUTOFF - DAY).await;
    seed_run(&store, &run("expired"), incarnation, 1, CUTOFF - DAY).await;
    let sweeper = RetentionSweeper::builder(store.clone(), RETENTION)
        .runtime_store(runtime.clone())
        .build();

    let first = sweeper.sweep_once(NOW).await.unwrap();
    assert_eq!(first.failures.len(), 1, "{first:?}");
    assert!(
        first.failures[0]
            .message
            .contains("injected delete failure")
    );
    assert_eq!(store.markers().list().await.unwrap().len(), 1);
    assert!(runtime.load_run(&run("expired")).await.unwrap().is_some());

    let second = sweeper.sweep_once(NOW).await.unwrap();
    assert_eq!((second.runs_cleared, second.runtime_runs_deleted), (1, 1));
    assert!(store.markers().list().await.unwrap().is_empty());
    assert_eq!(runtime.load_run(&run("expired")).await.unwrap(), None);
}

#[tokio::test]
async fn a_marker_of_a_run_that_is_not_terminal_deletes_nothing() {
    let store = Backend::in_memory().memo_store("memo");
    let runtime = Arc::new(InMemoryRuntimeStore::new());
    let incarnation = started_run(runtime.as_ref(), &run("live"), CUTOFF - DAY).await;
    seed_run(&store, &run("live"), incarnation, 2, CUTOFF - DAY).await;
    let sweeper = RetentionSweeper::builder(store.clone(), RETENTION)
        .runtime_store(runtime.clone())
        .build();

    let report = sweeper.sweep_once(NOW).await.unwrap();

    assert_eq!(report.runs_cleared, 0);
    assert_eq!(report.failures.len(), 1, "{report:?}");
    assert!(
        report.failures[0].message.contains("Running"),
        "{}",
        report.failures[0].message
    );
    assert_eq!(stored_entries(&store, &run("live")).await, 4);
    assert_eq!(store.markers().list().await.unwrap().len(), 1);
    let live = runtime.load_run(&run("live")).await.unwrap().unwrap();
    assert_eq!(live.status, RunStatus::Running);
}

/// Two processes (sweepers over separate store instances, as every worker
/// runs one) reach the same due recheck at once: both finish it without a
/// failure, the late entry and the marker are gone, and the swept id's new
/// run keeps its entry.
#[tokio::test]
async fn two_sweepers_rechecking_one_swept_run_at_once_both_finish_it() {
    for backend in Backend::all() {
        let name = backend.name();
        let process = || {
            let memo = MemoStore::new(backend.open(), "memo");
            let runs: Arc<dyn RuntimeStore> = Arc::new(
                memo_runtime::runtime_store::ObjectStoreRuntimeStore::new(backend.open(), "runs"),
            );
            let sweeper = RetentionSweeper::builder(memo.clone(), RETENTION)
                .runtime_store(Arc::clone(&runs))
                .build();
            (memo, runs, sweeper)
        };
        let (memo, runs, first) = process();
        let (_, _, second) = process();
        let id = run("order-1");
        let old = finished_run(runs.as_ref(), &id, CUTOFF - DAY).await;
        seed_run(&memo, &id, old, 1, CUTOFF - DAY).await;
        assert_eq!(
            first.sweep_once(NOW).await.unwrap().runs_cleared,
            1,
            "{name}"
        );

        // A stale attempt's late entry in the swept incarnation; the id is
        // used again meanwhile.
        memo.memo_for(&id, old, 0).put("late", b"v").await.unwrap();
        let new = finished_run(runs.as_ref(), &id, NOW).await;
        memo.memo_for(&id, new, 0).put("kept", b"v").await.unwrap();

        let due = NOW + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
        let (a, b) = tokio::join!(first.sweep_once(due), second.sweep_once(due));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!((a.recheck_failures, b.recheck_failures), (0, 0), "{name}");
        assert!(a.rechecks_due + b.rechecks_due >= 1, "{name}: {a:?} {b:?}");
        assert_eq!(
            a.late_objects_deleted + b.late_objects_deleted,
            1,
            "{name}: the late entry is deleted once"
        );
        let left: Vec<String> = backend
            .objects()
            .list(Some(&memo_runtime::object_store::path::Path::from("memo")))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert!(
            !left.iter().any(|p| p.starts_with("memo/rechecks/")),
            "{name}: {left:?}"
        );
        assert_eq!(
            left.iter().filter(|p| p.starts_with("memo/memos/")).count(),
            1,
            "{name}: only the new run's entry is left: {left:?}"
        );
        assert!(
            left.iter().any(|p| p.contains(&new.to_string())),
            "{name}: {left:?}"
        );
    }
}

/// The recheck markers stored under the memo store's prefix `memo`.
async fn recheck_markers(objects: &dyn ObjectStore) -> Vec<String> {
    let folder = memo_runtime::object_store::path::Path::from("memo/rechecks");
    let listed: Vec<_> = objects.list(Some(&folder)).try_collect().await.unwrap();
    listed
        .into_iter()
        .map(|meta| meta.location.to_string())
        .collect()
}

/// A sweeper over stores of its own on `objects`, and the time its
/// recheck of the run it has swept comes due: the run's memo entry was
/// written again after the sweep (the late write a recheck is for).
async fn swept_with_a_late_write(objects: Arc<dyn ObjectStore>) -> (RetentionSweeper, u64) {
    let memo = MemoStore::new(objects.clone(), "memo");
    let runs: Arc<dyn RuntimeStore> = Arc::new(
        memo_runtime::runtime_store::ObjectStoreRuntimeStore::new(objects, "runs"),
    );
    let sweeper = RetentionSweeper::builder(memo.clone(), RETENTION)
        .runtime_store(Arc::clone(&runs))
        .build();
    let id = run("order-1");
    let old = finished_run(runs.as_ref(), &id, CUTOFF - DAY).await;
    seed_run(&memo, &id, old, 1, CUTOFF - DAY).await;
    assert_eq!(sweeper.sweep_once(NOW).await.unwrap().runs_cleared, 1);
    memo.memo_for(&id, old, 0).put("late", b"v").await.unwrap();
    let due = NOW + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    (sweeper, due)
}

/// A whole pass of `sweeper` at `due`, on a thread and runtime of its own
/// (from inside a store call of another pass, which waits for it).
fn pass_on_a_thread(sweeper: &RetentionSweeper, due: u64) -> memo_runtime::retention::SweepReport {
    let sweeper = sweeper.clone();
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(sweeper.sweep_once(due))
            .unwrap()
    })
    .join()
    .unwrap()
}

/// Runs `sweeper`'s whole pass at `at` (on a thread of its own:
/// [`pass_on_a_thread`]) the first time a request of `kind` for a path
/// holding `part` is about to go through `faulty`: the cell its report is
/// left in.
fn pass_before(
    faulty: &FaultInjectingStore<Arc<InMemory>>,
    kind: RequestKind,
    part: &'static str,
    sweeper: &RetentionSweeper,
    at: u64,
) -> Arc<Mutex<Option<memo_runtime::retention::SweepReport>>> {
    let report = Arc::new(Mutex::new(None));
    faulty.inject(FaultRule::fail_before(kind).matching({
        let (sweeper, report) = (sweeper.clone(), report.clone());
        move |path| {
            if path.as_ref().contains(part) && report.lock().unwrap().is_none() {
                *report.lock().unwrap() = Some(pass_on_a_thread(&sweeper, at));
            }
            false
        }
    }));
    report
}

/// The report [`pass_before`] left, once that pass ran.
fn ran(
    report: &Mutex<Option<memo_runtime::retention::SweepReport>>,
) -> memo_runtime::retention::SweepReport {
    (report.lock().unwrap().take()).expect("the other sweeper's pass ran meanwhile")
}

/// The interleaving of two sweepers' rechecks that made the test above
/// fail once in CI, staged: a fresh sweeper (a worker's, not yet proved
/// its runtime store is the workers') lists a due recheck marker; before
/// it looks for the deletion's tombstone, the sweeper that deleted the run
/// rechecks it whole, forgetting the tombstone and deleting the marker.
/// The fresh one then finds no tombstone: not a failure, since the marker
/// is gone by the end of its pass (it was a failure, "is its prefix
/// theirs?", before session 49). A marker with no tombstone that is still
/// there at the end of the pass is one, and kept:
/// `wrong_prefix_sweeps::a_recheck_through_another_prefix_keeps_its_marker_for_the_workers_sweep`.
#[tokio::test]
async fn a_recheck_another_sweeper_finishes_after_this_pass_listed_it_is_no_failure() {
    let objects = Arc::new(InMemory::new());
    let (first, due) = swept_with_a_late_write(objects.clone()).await;

    // The fresh sweeper's runtime store: its HEAD of the tombstone waits
    // for the first sweeper's whole pass, run on a thread of its own.
    let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
    let finished = pass_before(&faulty, RequestKind::Head, "tombstones/", &first, due);
    // Another process: stores of its own over the same objects.
    let second = RetentionSweeper::builder(MemoStore::new(objects.clone(), "memo"), RETENTION)
        .runtime_store(Arc::new(
            memo_runtime::runtime_store::ObjectStoreRuntimeStore::new(faulty.clone(), "runs"),
        ))
        .build();
    let report = second.sweep_once(due).await.unwrap();
    let theirs = ran(&finished);
    assert_eq!(
        (theirs.rechecks_due, theirs.late_objects_deleted),
        (1, 1),
        "{theirs:?}"
    );
    assert_eq!(
        (report.recheck_failures, report.rechecks_due),
        (0, 0),
        "the fresh sweeper found the recheck done: {report:?}"
    );
    let rechecks = recheck_markers(objects.as_ref()).await;
    assert!(rechecks.is_empty(), "{rechecks:?}");
}

/// The interleaving that remained after session 49, found by the
/// simulator's quiet worlds (session 50: a sweeper in every worker, no
/// crash or fault; 114 of 2,000 seeds): the fresh sweeper's whole pass
/// runs after the first sweeper's recheck forgot the tombstone and before
/// it deleted the marker. The fresh one finds no tombstone and the marker
/// still there at the end of its pass; it leaves the marker for its next
/// pass (it counted a failure, "is its prefix theirs?", before), by when
/// the marker is gone: no failure either time. One still there at the
/// next pass is a failure:
/// `wrong_prefix_sweeps::a_recheck_through_another_prefix_keeps_its_marker_for_the_workers_sweep`.
#[tokio::test]
async fn a_recheck_another_sweeper_is_finishing_when_this_pass_ends_is_no_failure() {
    let objects = Arc::new(InMemory::new());
    let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
    // The first sweeper's stores: its delete of the recheck marker waits
    // for the fresh sweeper's whole pass.
    let (first, due) = swept_with_a_late_write(faulty.clone()).await;

    // Another process: stores of its own over the same objects.
    let (_, _, second) = sweeping_process(objects.clone());
    let during = pass_before(&faulty, RequestKind::Delete, "memo/rechecks/", &second, due);
    let theirs = first.sweep_once(due).await.unwrap();
    let during = ran(&during);
    assert_eq!(
        (theirs.rechecks_due, theirs.late_objects_deleted),
        (1, 1),
        "{theirs:?}"
    );
    assert_eq!(
        (during.recheck_failures, during.rechecks_due),
        (0, 0),
        "the fresh sweeper left the marker for its next pass: {during:?}"
    );
    let next = second.sweep_once(due).await.unwrap();
    assert_eq!(
        (next.recheck_failures, next.rechecks_due),
        (0, 0),
        "the marker is gone by the next pass: {next:?}"
    );
    let rechecks = recheck_markers(objects.as_ref()).await;
    assert!(rechecks.is_empty(), "{rechecks:?}");
}

/// A process's stores and sweeper over `objects` (every worker runs one).
fn sweeping_process(
    objects: Arc<dyn ObjectStore>,
) -> (MemoStore, Arc<dyn RuntimeStore>, RetentionSweeper) {
    let memo = MemoStore::new(objects.clone(), "memo");
    let runs: Arc<dyn RuntimeStore> = Arc::new(ObjectStoreRuntimeStore::new(objects, "runs"));
    let sweeper = RetentionSweeper::builder(memo.clone(), RETENTION)
        .runtime_store(Arc::clone(&runs))
        .build();
    (memo, runs, sweeper)
}

/// The recheck marker's due time, from its name
/// (`rechecks/<hour>/<u64::MAX - due>_<run>.<inc>`).
fn due_of(recheck_marker: &str) -> u64 {
    let name = recheck_marker.rsplit('/').next().unwrap();
    let inverted: u64 = name.split('_').next().unwrap().parse().unwrap();
    u64::MAX - inverted
}

/// Two processes' sweepers delete one expired run at once, their clocks
/// ten minutes apart: the second's whole pass runs after the first listed
/// the run's marker and before it buried the run. Both leave the same
/// recheck marker, dated from when the deletion began (the second's time:
/// it buried the run first, and the first reads that from the tombstone),
/// so one recheck finishes the deletion, and a fresh sweeper, not yet
/// proved its runtime store the workers', has nothing to report at any
/// pass. Each left a marker of its own before (session 50's quiet-world
/// seeds 1278 and 5374): the first recheck forgot the tombstone, and the
/// fresh sweeper's second pass counted the other marker a failure ("is
/// its prefix the workers'?").
#[tokio::test]
async fn two_sweepers_deleting_one_run_at_once_leave_one_recheck_marker() {
    let objects = Arc::new(InMemory::new());
    let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
    let (memo, runs, first) = sweeping_process(faulty.clone());
    let (_, _, second) = sweeping_process(objects.clone());
    let id = run("order-1");
    let old = finished_run(runs.as_ref(), &id, CUTOFF - DAY).await;
    seed_run(&memo, &id, old, 1, CUTOFF - DAY).await;

    let later = NOW + 10 * 60 * 1000;
    let during = pass_before(
        &faulty,
        RequestKind::Create,
        "runs/tombstones/",
        &second,
        later,
    );
    let mine = first.sweep_once(NOW).await.unwrap();
    let theirs = ran(&during);
    assert_eq!(
        (theirs.runs_cleared, theirs.runtime_runs_deleted),
        (1, 1),
        "{theirs:?}"
    );
    assert!(mine.failures.is_empty(), "{mine:?}");
    let rechecks = recheck_markers(objects.as_ref()).await;
    assert_eq!(rechecks.len(), 1, "one deletion, one recheck: {rechecks:?}");
    let due = later + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    assert_eq!(due_of(&rechecks[0]), due, "{rechecks:?}");

    let rechecked = first.sweep_once(due).await.unwrap();
    assert_eq!(
        (rechecked.rechecks_due, rechecked.recheck_failures),
        (1, 0),
        "{rechecked:?}"
    );
    a_fresh_sweeper_has_nothing_to_report(objects.clone(), due).await;
    assert!(recheck_markers(objects.as_ref()).await.is_empty());
}

/// A run whose runtime records were deleted alone, to use its id again
/// (`RuntimeStore::delete_run`, which records no time, as an older
/// release's deletion did not), is swept by two processes at once, ten
/// minutes apart: the second's whole pass runs while the first reads the
/// deletion's tombstone. Both date the recheck from the time the run's
/// marker expired, and leave one recheck marker between them.
#[tokio::test]
async fn sweeps_of_a_run_deleted_with_no_time_date_its_recheck_alike() {
    let objects = Arc::new(InMemory::new());
    let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
    let (memo, runs, first) = sweeping_process(faulty.clone());
    let (_, _, second) = sweeping_process(objects.clone());
    // Each sweeper proves its runtime store the workers' by a run of its
    // own it deletes.
    let proof = |name: &'static str| {
        let (memo, runs) = (memo.clone(), Arc::clone(&runs));
        async move {
            let id = run(name);
            let incarnation = finished_run(runs.as_ref(), &id, CUTOFF - DAY).await;
            seed_run(&memo, &id, incarnation, 1, CUTOFF - DAY).await;
        }
    };
    proof("proof-of-the-second").await;
    assert_eq!(second.sweep_once(NOW - HOUR).await.unwrap().runs_cleared, 1);
    proof("proof-of-the-first").await;

    // Expired a minute before `NOW`; deleted from the runtime store alone,
    // and its id used again.
    let id = run("order-1");
    let ended = CUTOFF - 60 * 1000;
    let old = finished_run(runs.as_ref(), &id, ended).await;
    seed_run(&memo, &id, old, 1, ended).await;
    assert!(runs.delete_run(&id, old).await.unwrap());
    started_run(runs.as_ref(), &id, NOW - HOUR).await;

    let later = NOW + 10 * 60 * 1000;
    let during = pass_before(
        &faulty,
        RequestKind::Get,
        "runs/tombstones/",
        &second,
        later,
    );
    let mine = first.sweep_once(NOW).await.unwrap();
    let theirs = ran(&during);
    // Each cleared both expired runs: the first's proof too, whose marker
    // goes with the first's page.
    assert_eq!(
        (theirs.runs_cleared, theirs.failures.len()),
        (2, 0),
        "{theirs:?}"
    );
    assert_eq!((mine.runs_cleared, mine.failures.len()), (2, 0), "{mine:?}");
    let rechecks: Vec<_> = recheck_markers(objects.as_ref())
        .await
        .into_iter()
        .filter(|marker| marker.contains("order-1"))
        .collect();
    assert_eq!(rechecks.len(), 1, "{rechecks:?}");
    let expired = ended + RETENTION.as_millis() as u64;
    let after = memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    assert_eq!(due_of(&rechecks[0]), expired + after, "{rechecks:?}");
}

/// A deletion answers when the incarnation's deletion began: the time of
/// the deleter that buried it, whichever process asks and whatever its
/// clock reads; unrecorded where that deleter had no time (`delete_run`);
/// forgotten once a recheck forgot the deletion; the caller's own in a
/// store that keeps no tombstone.
#[tokio::test]
async fn a_deletion_answers_the_time_its_first_deleter_recorded() {
    for backend in Backend::all() {
        let name = backend.name();
        let store = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let other = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let id = run("timed");
        let incarnation = finished_run(&store, &id, 1_000).await;
        let first = store.delete_run_at(&id, incarnation, 5_000).await.unwrap();
        assert_eq!((first.existed, first.began), (true, At(5_000)), "{name}");
        let again = other.delete_run_at(&id, incarnation, 9_000).await.unwrap();
        assert_eq!((again.existed, again.began), (false, At(5_000)), "{name}");
        store.forget_deleted(&id, incarnation).await.unwrap();
        let gone = other.delete_run_at(&id, incarnation, 12_000).await.unwrap();
        assert_eq!((gone.existed, gone.began), (false, Forgotten), "{name}");

        let id = run("untimed");
        let incarnation = finished_run(&store, &id, 1_000).await;
        assert!(store.delete_run(&id, incarnation).await.unwrap(), "{name}");
        let after = other.delete_run_at(&id, incarnation, 9_000).await.unwrap();
        assert_eq!((after.existed, after.began), (false, Unrecorded), "{name}");
    }
    let memory = InMemoryRuntimeStore::new();
    let id = run("in-memory");
    let incarnation = finished_run(&memory, &id, 1_000).await;
    let deleted = memory.delete_run_at(&id, incarnation, 7_000).await.unwrap();
    assert_eq!((deleted.existed, deleted.began), (true, At(7_000)));
}

/// The first time a request of `kind` for a path starting with `part` is
/// about to go through `faulty`, runs `other`'s pass at `NOW` (which
/// deletes the expired run) and its pass at the deletion's recheck (an
/// hour on), each on a thread of its own, then `then`: the cell their two
/// reports are left in.
fn deleted_and_rechecked_before(
    faulty: &FaultInjectingStore<Arc<InMemory>>,
    kind: RequestKind,
    part: &'static str,
    other: &RetentionSweeper,
    then: impl Fn() + Send + Sync + 'static,
) -> Arc<Mutex<Vec<memo_runtime::retention::SweepReport>>> {
    let due = NOW + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    let reports = Arc::new(Mutex::new(Vec::new()));
    faulty.inject(FaultRule::fail_before(kind).matching({
        let (other, reports) = (other.clone(), reports.clone());
        move |path| {
            if path.as_ref().starts_with(part) && reports.lock().unwrap().is_empty() {
                let passes = [NOW, due].map(|at| pass_on_a_thread(&other, at));
                reports.lock().unwrap().extend(passes);
                then();
            }
            false
        }
    }));
    reports
}

/// What the other process's sweeper reported while a pass stalled
/// (`deleted_and_rechecked_before`) says it deleted the run and rechecked
/// the deletion; no recheck marker is left, and a fresh sweeper at `due`
/// has nothing to report.
async fn no_marker_left_after_the_other_recheck(
    meanwhile: &Mutex<Vec<memo_runtime::retention::SweepReport>>,
    objects: Arc<InMemory>,
    due: u64,
) {
    let theirs = meanwhile.lock().unwrap().clone();
    assert_eq!(
        (theirs.len(), theirs[0].runs_cleared, theirs[1].rechecks_due),
        (2, 1, 1),
        "the other sweeper deleted the run and rechecked it meanwhile: {theirs:?}"
    );
    let rechecks = recheck_markers(objects.as_ref()).await;
    assert!(rechecks.is_empty(), "{rechecks:?}");
    a_fresh_sweeper_has_nothing_to_report(objects, due).await;
}

/// A fresh process's sweeper (not yet proved its runtime store the
/// workers') over `objects` finds nothing due and reports no failed
/// recheck in two passes from `at` on, an hour apart: no recheck marker
/// stands with nothing of its deletion behind it.
async fn a_fresh_sweeper_has_nothing_to_report(objects: Arc<InMemory>, at: u64) {
    let (_, _, fresh) = sweeping_process(objects);
    for pass in 0..2 {
        let report = fresh.sweep_once(at + pass * HOUR).await.unwrap();
        assert_eq!(
            (report.rechecks_due, report.recheck_failures),
            (0, 0),
            "pass {pass}: {report:?}"
        );
    }
}

/// A run deleted with `RetentionSweeper::delete_run` (to use its id again
/// before its retention ran out) keeps its terminal marker until a pass
/// past its retention, which finds nothing of it: its recheck has run by
/// then, and forgot the deletion, so that pass leaves no recheck marker of
/// it again. It left one, with nothing of the deletion for it to find,
/// which a sweeper not yet proved its runtime store the workers' counted
/// a failed recheck on its second pass (the quiet worlds' seed 2013, session 51).
#[tokio::test]
async fn a_pass_after_a_deleted_runs_recheck_leaves_no_second_one() {
    let objects = Arc::new(InMemory::new());
    let (memo, runs, _) = sweeping_process(objects.clone());
    let sweeper = RetentionSweeper::builder(memo.clone(), RETENTION)
        .runtime_store(Arc::clone(&runs))
        .clock(Arc::new(ManualClock::new(NOW)))
        .build();
    let id = run("order-1");
    let incarnation = finished_run(runs.as_ref(), &id, NOW - DAY).await;
    seed_run(&memo, &id, incarnation, 1, NOW - DAY).await;
    assert!(sweeper.delete_run(&id).await.unwrap());
    assert_eq!(recheck_markers(objects.as_ref()).await.len(), 1);

    let after = memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    let rechecked = sweeper.sweep_once(NOW + after).await.unwrap();
    assert_eq!(
        (rechecked.rechecks_due, rechecked.runs_cleared),
        (1, 0),
        "{rechecked:?}"
    );
    let past_retention = NOW - DAY + RETENTION.as_millis() as u64 + HOUR;
    let report = sweeper.sweep_once(past_retention).await.unwrap();
    assert_eq!(
        (
            report.rechecks_due,
            report.runs_cleared,
            report.recheck_failures
        ),
        (0, 1, 0),
        "{report:?}"
    );
    assert!(memo.markers().list().await.unwrap().is_empty());
    let rechecks = recheck_markers(objects.as_ref()).await;
    assert!(rechecks.is_empty(), "{rechecks:?}");
}

/// `RetentionSweeper::delete_run` of an expired run races a pass of
/// another process's sweeper: after the call read the run, and before it
/// cleared the run's entries, the pass deleted the run and a pass an hour
/// on rechecked the deletion and forgot it. The call finds the deletion
/// forgotten (`DeletionBegan::Forgotten`) and leaves no recheck marker:
/// one would stand with nothing of the deletion behind it, which a
/// sweeper not yet proved its runtime store the workers' reports a failed
/// recheck on its second pass.
#[tokio::test]
async fn a_delete_run_racing_a_pass_and_its_recheck_leaves_no_marker_behind() {
    let objects = Arc::new(InMemory::new());
    let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
    let (memo, runs, explicit) = sweeping_process(faulty.clone());
    let (_, _, other) = sweeping_process(objects.clone());
    let id = run("order-1");
    let old = finished_run(runs.as_ref(), &id, CUTOFF - DAY).await;
    seed_run(&memo, &id, old, 1, CUTOFF - DAY).await;

    let due = NOW + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    let meanwhile =
        deleted_and_rechecked_before(&faulty, RequestKind::List, "memo/memos/", &other, || {});
    assert!(
        !explicit.delete_run(&id).await.unwrap(),
        "the pass deleted the run first"
    );
    no_marker_left_after_the_other_recheck(&meanwhile, objects.clone(), due).await;
}

/// A sweep that stalls inside a deletion (its clock an hour on when it
/// goes on) until another process's sweeper has deleted the run and
/// rechecked the deletion: its recheck marker, written after that recheck
/// deleted the marker of the same name, would stand with no tombstone
/// behind it, which a sweeper not yet proved its runtime store the
/// workers' reports a failed recheck on its second pass (the quiet
/// worlds' seed 25954, session 51). The stalled sweep asks after its write
/// whether the deletion's tombstone still stands, and deletes its marker:
/// nothing is left to report. A sweep that did not stall asks nothing.
#[tokio::test]
async fn a_sweep_stalled_past_its_deletions_recheck_leaves_no_marker_behind() {
    let objects = Arc::new(InMemory::new());
    let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
    let (memo, runs, _) = sweeping_process(faulty.clone());
    let clock = Arc::new(ManualClock::new(NOW));
    let stalled = RetentionSweeper::builder(memo.clone(), RETENTION)
        .runtime_store(Arc::clone(&runs))
        .clock(clock.clone())
        .build();
    let (_, _, other) = sweeping_process(objects.clone());
    // The other sweeper proves its runtime store the workers' by a run it
    // deletes, as a worker's does.
    let proof = run("proof-of-the-other");
    let incarnation = finished_run(runs.as_ref(), &proof, CUTOFF - DAY).await;
    seed_run(&memo, &proof, incarnation, 1, CUTOFF - DAY).await;
    assert_eq!(other.sweep_once(NOW - HOUR).await.unwrap().runs_cleared, 1);
    let id = run("order-1");
    let old = finished_run(runs.as_ref(), &id, CUTOFF - DAY).await;
    seed_run(&memo, &id, old, 1, CUTOFF - DAY).await;

    // Just before the stalled sweep writes its recheck marker: the other
    // sweeper deletes the run (it finds it buried, and dates its marker
    // from the tombstone, as the stalled one does), and its pass an hour
    // on rechecks the deletion, forgetting the tombstone.
    let due = NOW + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    let stalled_clock = clock.clone();
    let meanwhile = deleted_and_rechecked_before(
        &faulty,
        RequestKind::Create,
        "memo/rechecks/",
        &other,
        move || stalled_clock.set_ms(due),
    );
    let report = stalled.sweep_once(NOW).await.unwrap();
    assert_eq!(
        (report.runs_cleared, report.failures.len()),
        (1, 0),
        "{report:?}"
    );
    no_marker_left_after_the_other_recheck(&meanwhile, objects.clone(), due).await;

    // A sweep that did not stall writes its marker and asks nothing more.
    let id = run("order-2");
    let quick = finished_run(runs.as_ref(), &id, CUTOFF - DAY).await;
    seed_run(&memo, &id, quick, 1, CUTOFF - DAY).await;
    clock.set_ms(due);
    let heads = Arc::new(AtomicUsize::new(0));
    faulty.inject(FaultRule::fail_before(RequestKind::Head).matching({
        let heads = heads.clone();
        move |path| {
            if path.as_ref().starts_with("runs/tombstones/") {
                heads.fetch_add(1, Ordering::SeqCst);
            }
            false
        }
    }));
    let report = stalled.sweep_once(due).await.unwrap();
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    assert_eq!(heads.load(Ordering::SeqCst), 0);
    assert_eq!(recheck_markers(objects.as_ref()).await.len(), 1);
}

/// The pointer of run `order-1` in [`Swept::objects`].
const ORDER_POINTER: &str = "runs/runs/order-1/run";

/// Run `order-1`, ended and deleted by a pass of `sweeper` (a process over
/// `faulty`, around `objects`), whose recheck is `due`.
struct Swept {
    objects: Arc<InMemory>,
    faulty: Arc<FaultInjectingStore<Arc<InMemory>>>,
    runs: Arc<dyn RuntimeStore>,
    sweeper: RetentionSweeper,
    old: Incarnation,
    due: u64,
    /// Another process's runtime store over `objects`.
    other: Arc<dyn RuntimeStore>,
}

impl Swept {
    async fn new() -> Swept {
        let objects = Arc::new(InMemory::new());
        let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
        let (memo, runs, sweeper) = sweeping_process(faulty.clone());
        let old = finished_run(runs.as_ref(), &run("order-1"), CUTOFF - DAY).await;
        seed_run(&memo, &run("order-1"), old, 1, CUTOFF - DAY).await;
        assert_eq!(sweeper.sweep_once(NOW).await.unwrap().runs_cleared, 1);
        let due = NOW + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
        let other = Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
        Swept {
            objects,
            faulty,
            runs,
            sweeper,
            old,
            due,
            other,
        }
    }

    /// [`Swept::new`], then the recheck at `due`, which marks the run's
    /// vacated pointer swept and fails to delete it (a fault on that
    /// delete; its sweeper may as well have stopped there).
    async fn with_a_mark_left() -> Swept {
        let swept = Swept::new().await;
        swept.faulty.inject(
            FaultRule::fail_before(RequestKind::Delete)
                .matching(|path| path.as_ref() == ORDER_POINTER),
        );
        let failed = swept.sweeper.sweep_once(swept.due).await.unwrap();
        assert_eq!(failed.recheck_failures, 1, "{failed:?}");
        swept.faulty.clear_faults();
        swept
    }

    /// A new run of `order-1`, created at `created_at_ms`.
    fn new_run(created_at_ms: u64) -> NewRun {
        NewRun {
            run_id: run("order-1"),
            workflow: "wf".into(),
            input: Bytes::new(),
            created_at_ms,
            workflow_version: None,
        }
    }

    /// Runs `other`'s creation of `order-1` at `created_at_ms`, on a thread
    /// of its own, the first time `kind` is about to be sent to the pointer
    /// through `faulty`: its answer, once it ran.
    fn create_before(
        &self,
        kind: RequestKind,
        created_at_ms: u64,
    ) -> Arc<Mutex<Option<Result<RunRecord, Error>>>> {
        let answer = Arc::new(Mutex::new(None));
        self.faulty.inject(FaultRule::fail_before(kind).matching({
            let (other, answer) = (self.other.clone(), answer.clone());
            move |path| {
                if path.as_ref() == ORDER_POINTER && answer.lock().unwrap().is_none() {
                    let other = other.clone();
                    let created = std::thread::spawn(move || {
                        tokio::runtime::Runtime::new()
                            .unwrap()
                            .block_on(other.create_run(Swept::new_run(created_at_ms)))
                    })
                    .join()
                    .unwrap();
                    *answer.lock().unwrap() = Some(created);
                }
                false
            }
        }));
        answer
    }

    /// Whether an object stands at the run's pointer.
    async fn pointer_stands(&self) -> bool {
        let pointer = memo_runtime::object_store::path::Path::from(ORDER_POINTER);
        memo_runtime::object_store::ObjectStoreExt::head(self.objects.as_ref(), &pointer)
            .await
            .is_ok()
    }
}

/// A deleted run's id used again while a recheck of its deletion is
/// between its mark of the vacated pointer (`vacant <inc> swept <mark> at
/// <ms>`) and that pointer's delete, which is unconditional: the creation
/// is refused, where it replaced the mark by a conditional update and the
/// delete then removed the new run's pointer (seed 27027 of session 51's
/// quiet-world survey: a second creator then took the free path, and a
/// step commit acknowledged to one run went missing from what a fresh
/// reader saw). Once the delete landed, the id is free and its new run's
/// pointer stands.
#[tokio::test]
async fn a_creation_never_takes_a_pointer_a_recheck_is_about_to_delete() {
    let swept = Swept::new().await;
    let during = swept.create_before(RequestKind::Delete, swept.due);
    let rechecked = swept.sweeper.sweep_once(swept.due).await.unwrap();
    assert_eq!(
        (rechecked.rechecks_due, rechecked.recheck_failures),
        (1, 0),
        "{rechecked:?}"
    );
    let during =
        (during.lock().unwrap().take()).expect("the creation ran between the mark and the delete");
    assert!(
        matches!(during, Err(Error::Conflict { .. })),
        "refused while the pointer is marked for its delete: {during:?}"
    );

    let created = swept.other.create_run(Swept::new_run(swept.due + 1)).await;
    let created = created.unwrap();
    assert_ne!(created.incarnation, swept.old);
    assert!(swept.pointer_stands().await, "the new run's pointer stands");
    let loaded = swept.runs.load_run(&run("order-1")).await.unwrap().unwrap();
    assert_eq!(loaded.incarnation, created.incarnation);
}

/// A recheck that marked a vacated pointer swept and never deleted it
/// holds the id only for a while: a creation a minute after the mark's
/// time replaces it, and the next recheck of the deletion leaves the new
/// run's pointer alone.
#[tokio::test]
async fn a_pointer_mark_whose_delete_never_came_is_replaced_a_minute_on() {
    let swept = Swept::with_a_mark_left().await;
    let due = swept.due;
    for created_at_ms in [due, due + 59_999] {
        let refused = swept.other.create_run(Swept::new_run(created_at_ms)).await;
        assert!(
            matches!(refused, Err(Error::Conflict { .. })),
            "{refused:?}"
        );
    }
    let created = swept.other.create_run(Swept::new_run(due + 60_000)).await;
    let created = created.unwrap();
    assert_ne!(created.incarnation, swept.old);

    let again = swept.sweeper.sweep_once(due + HOUR).await.unwrap();
    assert_eq!(
        (again.rechecks_due, again.recheck_failures),
        (1, 0),
        "{again:?}"
    );
    let loaded = swept.runs.load_run(&run("order-1")).await.unwrap().unwrap();
    assert_eq!(loaded.incarnation, created.incarnation);
}

/// The same mark met by a later recheck of the deletion, with no creation
/// of the id meanwhile: within a minute of the mark it is another
/// recheck's to delete (two sweepers at once), and the later one waits,
/// keeping its recheck marker and counting no failure; a minute on, it
/// deletes the mark itself, and the id's pointer is gone.
#[tokio::test]
async fn a_later_recheck_deletes_a_pointer_mark_left_a_minute_ago() {
    let swept = Swept::with_a_mark_left().await;
    let waiting = swept.sweeper.sweep_once(swept.due + 1_000).await.unwrap();
    assert_eq!(
        (waiting.rechecks_due, waiting.recheck_failures),
        (0, 0),
        "{waiting:?}"
    );
    assert!(swept.pointer_stands().await);
    assert_eq!(recheck_markers(swept.objects.as_ref()).await.len(), 1);
    let done = swept.sweeper.sweep_once(swept.due + 60_000).await.unwrap();
    assert_eq!(
        (done.rechecks_due, done.recheck_failures),
        (1, 0),
        "{done:?}"
    );
    assert!(!swept.pointer_stands().await, "the mark is deleted");
    assert!(recheck_markers(swept.objects.as_ref()).await.is_empty());
}

/// A minute-old mark taken by a later recheck and by a creation at once:
/// the creation replaces it just before the recheck's own mark of it
/// lands. The recheck marks it again by a conditional update of the
/// version it read, which the creation's replacement refuses: no delete
/// follows, and the new run's pointer stands.
#[tokio::test]
async fn a_later_recheck_leaves_a_stale_mark_a_creation_replaced_meanwhile() {
    let swept = Swept::with_a_mark_left().await;
    let later = swept.due + 60_000;
    let created = swept.create_before(RequestKind::Put, later);
    let report = swept.sweeper.sweep_once(later).await.unwrap();
    let created = (created.lock().unwrap().take())
        .expect("the creation ran before the recheck's mark")
        .unwrap();
    assert_ne!(created.incarnation, swept.old);
    assert_eq!(report.recheck_failures, 0, "{report:?}");
    let loaded = swept
        .other
        .load_run(&run("order-1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loaded.incarnation, created.incarnation);
    assert!(swept.pointer_stands().await, "the new run's pointer stands");
}

/// `recheck_after(Duration::MAX)` saturates: the sweep does not overflow,
/// and its recheck comes due only at the end of the clock's range.
#[tokio::test]
async fn a_recheck_after_duration_max_comes_due_at_the_end_of_time() {
    let store = Backend::in_memory().memo_store("memo");
    let runtime = Arc::new(InMemoryRuntimeStore::new());
    let incarnation = finished_run(runtime.as_ref(), &run("order-1"), CUTOFF - DAY).await;
    seed_run(&store, &run("order-1"), incarnation, 1, CUTOFF - DAY).await;
    let sweeper = RetentionSweeper::builder(store, RETENTION)
        .runtime_store(runtime)
        .recheck_after(Duration::MAX)
        .build();
    assert_eq!(sweeper.sweep_once(NOW).await.unwrap().runs_cleared, 1);
    let late = sweeper.sweep_once(u64::MAX - 2).await.unwrap();
    assert_eq!(late.rechecks_due, 0, "{late:?}");
    let end = sweeper.sweep_once(u64::MAX).await.unwrap();
    assert_eq!((end.rechecks_due, end.recheck_failures), (1, 0), "{end:?}");
}

#[tokio::test]
async fn a_dry_run_counts_what_it_would_delete_and_deletes_nothing() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let store = MemoStore::new(objects.clone(), "memo");
        let rechecks = || async { recheck_markers(objects.as_ref()).await.len() };
        let runtime = Arc::new(InMemoryRuntimeStore::new());
        let incarnation = finished_run(runtime.as_ref(), &run("with-record"), CUTOFF - DAY).await;
        seed_run(&store, &run("with-record"), incarnation, 3, CUTOFF - DAY).await;
        seed_terminal_run(&store, &run("memo-only"), 2, CUTOFF - HOUR).await;
        seed_terminal_run(&store, &run("recent"), 2, CUTOFF + HOUR).await;
        let dry = RetentionSweeper::builder(store.clone(), RETENTION)
            .runtime_store(runtime.clone())
            .dry_run(true)
            .build();
        assert!(dry.is_dry_run());

        let report = dry.sweep_once(NOW).await.unwrap();

        assert!(report.dry_run, "{name}");
        assert_eq!(report.markers_expired, 2, "{name}");
        assert_eq!(report.runs_cleared, 2, "{name}");
        assert_eq!(report.entries_deleted, 2 * (3 + 2), "{name}");
        assert_eq!(report.runtime_runs_deleted, 1, "{name}");
        assert!(report.is_complete(), "{name}");
        assert_eq!(
            stored_entries(&store, &run("with-record")).await,
            6,
            "{name}"
        );
        assert_eq!(stored_entries(&store, &run("memo-only")).await, 4, "{name}");
        assert_eq!(store.markers().list().await.unwrap().len(), 3, "{name}");
        assert!(
            runtime
                .load_run(&run("with-record"))
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            rechecks().await,
            0,
            "{name}: a dry run leaves no recheck marker"
        );

        // The same sweeper without dry-run does what was reported.
        let real = RetentionSweeper::builder(store.clone(), RETENTION)
            .runtime_store(runtime.clone())
            .build();
        let done = real.sweep_once(NOW).await.unwrap();
        assert_eq!(
            (
                done.runs_cleared,
                done.entries_deleted,
                done.runtime_runs_deleted
            ),
            (2, 10, 1),
            "{name}"
        );
        // One recheck marker, of the workflow run: the standalone run
        // (`memo-only`) gets none. A dry run once it is due counts it and
        // keeps it; a real pass clears it.
        assert_eq!(rechecks().await, 1, "{name}");
        let due = NOW + memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
        let counted = dry.sweep_once(due).await.unwrap();
        assert_eq!(counted.rechecks_due, 1, "{name}");
        assert_eq!(rechecks().await, 1, "{name}");
        let rechecked = real.sweep_once(due).await.unwrap();
        assert_eq!(
            (rechecked.rechecks_due, rechecked.late_objects_deleted),
            (1, 0),
            "{name}"
        );
        assert_eq!(rechecks().await, 0, "{name}");
    }
}

#[tokio::test]
async fn markers_are_processed_in_pages_with_bounded_concurrency() {
    let store = Backend::in_memory().memo_store("memo");
    let runtime = Arc::new(ObservedRuntimeStore::default());
    for i in 0..7 {
        let id = run(&format!("r{i}"));
        let at = CUTOFF - (i + 1) * HOUR;
        let incarnation = finished_run(runtime.as_ref(), &id, at).await;
        seed_run(&store, &id, incarnation, 1, at).await;
    }
    let sweeper = RetentionSweeper::builder(store.clone(), RETENTION)
        .runtime_store(runtime.clone())
        .page_size(3)
        .concurrency(2)
        .build();

    let report = sweeper.sweep_once(NOW).await.unwrap();

    assert_eq!((report.pages, report.runs_cleared), (3, 7), "{report:?}");
    assert_eq!(runtime.most_loads_in_flight.load(Ordering::SeqCst), 2);
    assert!(store.markers().list().await.unwrap().is_empty());
}

#[tokio::test]
async fn sweep_listing_cost_grows_with_expired_markers_not_retained_ones() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let counting = Arc::new(CountingStore::new(objects));
        let store = MemoStore::new(counting.clone(), "memo");
        // 12 expired runs over three hours, the last in the cutoff's hour.
        for i in 0..12 {
            let at = CUTOFF - (i % 3) * HOUR - i - 1;
            seed_terminal_run(&store, &run(&format!("old-{i}")), 1, at).await;
        }
        // 300 retained markers from the cutoff on.
        for i in 0..300 {
            let at = CUTOFF + i * (HOUR / 20);
            store
                .markers()
                .write_standalone(&run(&format!("kept-{i}")), at)
                .await
                .unwrap();
        }
        counting.reset();

        let report = sweeper(&store).sweep_once(NOW).await.unwrap();

        assert_eq!(report.runs_cleared, 12, "{name}");
        let counts = counting.counts();
        // One for the runs' marker hours, one for the recheck markers' hours
        // (none: standalone runs get no recheck), one for the shared
        // scope's expiry hours (none: no shared entry was written).
        assert_eq!(counts.lists_with_delimiter, 3, "{name}: {counts:?}");
        // Each expired marker once, each cleared run's two entries, and the
        // first step-output entry the pass's one look for any finds (these
        // runs have some, so it lists each run's folder of them too).
        assert_eq!(counts.objects_listed, 12 + 12 * 2 + 1, "{name}: {counts:?}");
        assert_eq!(counts.delete_paths, 12 * 2 + 12, "{name}: {counts:?}");
        assert_eq!(store.markers().list().await.unwrap().len(), 300);

        // A second pass lists no marker, only the cutoff's hour (it holds
        // retained markers too): the emptied hours before it are gone, on a
        // local folder too, which removes the folders its deletes empty.
        counting.reset();
        let again = sweeper(&store).sweep_once(NOW).await.unwrap();
        assert_eq!(again.markers_expired, 0, "{name}");
        let counts = counting.counts();
        assert_eq!(counts.objects_listed, 0, "{name}: {counts:?}");
        assert_eq!(
            counts.lists + counts.lists_with_offset,
            1,
            "{name}: {counts:?}"
        );
    }
}

#[tokio::test]
async fn the_marker_stream_lists_a_partition_only_when_it_reaches_it() {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let store = MemoStore::new(counting.clone(), "memo");
    for hour in 0..5 {
        store
            .markers()
            .write_standalone(&run(&format!("h{hour}")), hour * HOUR)
            .await
            .unwrap();
    }
    counting.reset();
    let mut stream = store.markers().expired(10 * HOUR);
    let first = stream.try_next().await.unwrap().unwrap();
    assert_eq!(first.run_id.as_str(), "h0", "oldest partition first");
    let counts = counting.counts();
    assert_eq!(
        (
            counts.lists_with_delimiter,
            counts.lists,
            counts.objects_listed
        ),
        (1, 1, 1)
    );
    let rest: Vec<_> = stream.try_collect().await.unwrap();
    assert_eq!(
        marker_runs(&rest),
        ["h1", "h2", "h3", "h4"],
        "the rest, once each"
    );
}

#[tokio::test]
async fn marker_pages_go_oldest_first_and_list_no_partition_before_their_cursor() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let counting = Arc::new(CountingStore::new(objects));
        let store = MemoStore::new(counting.clone(), "memo");
        // Four markers in each of hours 0..5, written newest first; two
        // runs end at the same time in hour 2, across a page boundary.
        for hour in (0..5).rev() {
            for i in (0..4).rev() {
                let at = hour * HOUR + if hour == 2 && i == 1 { 0 } else { i * 10 };
                store
                    .markers()
                    .write_standalone(&run(&format!("h{hour}-{i}")), at)
                    .await
                    .unwrap();
            }
        }
        // Every page, three markers each, with the cutoff in hour 4.
        let cutoff = 4 * HOUR + 25;
        let mut pages = Vec::new();
        let mut after: Option<TerminalMarker> = None;
        loop {
            let page = store
                .markers()
                .expired_page(cutoff, after.as_ref(), 3)
                .await
                .unwrap();
            assert!(page.markers.len() <= 3, "{name}");
            pages.push(in_order(&page.markers));
            match page.next {
                Some(next) => {
                    assert_eq!(page.markers.last(), Some(&next), "{name}");
                    after = Some(next);
                }
                None => break,
            }
            assert!(pages.len() < 20, "{name}: paging does not end");
        }
        let listed: Vec<String> = pages.concat();
        let expected: Vec<String> = store
            .markers()
            .list_expired(cutoff)
            .await
            .unwrap()
            .iter()
            .map(|m| (m.terminal_at_ms, m.run_id.to_string()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        assert_eq!(listed.len(), 4 * 4 + 3, "{name}: {pages:?}");
        assert_eq!(listed, expected, "{name}: {pages:?}");
        assert_eq!(pages[0], ["h0-0", "h0-1", "h0-2"], "{name}");
        // A tie in time goes by run id, across the page boundary.
        assert_eq!(pages[2], ["h1-2", "h1-3", "h2-0"], "{name}");
        assert_eq!(pages[3][0], "h2-1", "{name}");

        // A page from a cursor in hour 3 lists hour 3 and the cutoff's
        // hour, never the three before it.
        counting.reset();
        let cursor = TerminalMarker {
            run_id: run("h3-0"),
            terminal_at_ms: 3 * HOUR,
            incarnation: Incarnation::STANDALONE,
        };
        let page = store
            .markers()
            .expired_page(cutoff, Some(&cursor), 3)
            .await
            .unwrap();
        assert_eq!(in_order(&page.markers), ["h3-1", "h3-2", "h3-3"], "{name}");
        assert_eq!(page.next.map(|m| m.run_id), Some(run("h3-3")), "{name}");
        let counts = counting.counts();
        assert_eq!(counts.lists_with_delimiter, 1, "{name}: {counts:?}");
        assert_eq!(
            counts.lists + counts.lists_with_offset,
            2,
            "{name}: {counts:?}"
        );
        // Hour 3's four markers and the cutoff hour's three expired ones.
        assert_eq!(counts.objects_listed, 4 + 3, "{name}: {counts:?}");
    }
}

#[tokio::test]
async fn the_marker_stream_reports_a_failed_partition_listing() {
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let store = MemoStore::new(faults.clone(), "memo");
    store
        .markers()
        .write_standalone(&run("a"), 5)
        .await
        .unwrap();
    faults.inject(FaultRule::fail_before(RequestKind::List).skip(1));
    let streamed: Result<Vec<_>, _> = store.markers().expired(10).try_collect().await;
    match streamed {
        Err(Error::Store { path, .. }) => {
            assert_eq!(path, "memo/terminals/00000000000000000000")
        }
        other => panic!("expected a store error naming the partition, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_background_sweeper_sweeps_at_each_interval_until_shut_down() {
    let store = Backend::in_memory().memo_store("memo");
    let clock = Arc::new(ManualClock::new(NOW));
    seed_terminal_run(&store, &run("early"), 1, CUTOFF - 1).await;
    seed_terminal_run(&store, &run("later"), 1, CUTOFF + HOUR / 2).await;
    let handle = RetentionSweeper::builder(store.clone(), RETENTION)
        .clock(clock.clone())
        .build()
        .spawn(Duration::from_secs(3600));
    let mut progress = handle.subscribe();

    progress.wait_for(|s| s.passes >= 1).await.unwrap();
    assert_eq!(handle.summary().runs_cleared, 1);
    assert_eq!(stored_entries(&store, &run("early")).await, 0);
    assert_eq!(stored_entries(&store, &run("later")).await, 2);

    // The next pass runs after the interval, at the clock's new time.
    clock.advance_ms(HOUR);
    progress.wait_for(|s| s.passes >= 2).await.unwrap();
    assert_eq!(stored_entries(&store, &run("later")).await, 0);
    progress.wait_for(|s| s.passes >= 3).await.unwrap();

    let summary = handle.shutdown().await;
    assert_eq!(summary.passes, 3);
    assert_eq!((summary.runs_cleared, summary.entries_deleted), (2, 4));
    assert_eq!(summary.failed_passes, 0);
    let last = summary.last_report.unwrap();
    assert_eq!(last.markers_expired, 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_background_pass_is_recorded_and_the_next_one_retries() {
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let store = MemoStore::new(faults.clone(), "memo");
    seed_terminal_run(&store, &run("old"), 1, CUTOFF - DAY).await;
    faults.inject(
        FaultRule::fail_before(RequestKind::List)
            .at_prefix("memo/terminals")
            .times(1),
    );
    let handle = RetentionSweeper::builder(store.clone(), RETENTION)
        .clock(Arc::new(ManualClock::new(NOW)))
        .build()
        .spawn(Duration::from_secs(60));
    let mut progress = handle.subscribe();

    let after_first = progress.wait_for(|s| s.passes >= 1).await.unwrap().clone();
    assert_eq!(after_first.failed_passes, 1);
    assert!(
        after_first
            .last_error
            .as_deref()
            .unwrap()
            .contains("injected fault"),
        "{after_first:?}"
    );
    progress.wait_for(|s| s.passes >= 2).await.unwrap();

    let summary = handle.shutdown().await;
    assert_eq!((summary.failed_passes, summary.runs_cleared), (1, 1));
    assert_eq!(summary.last_error, None);
    assert_eq!(stored_entries(&store, &run("old")).await, 0);
}

/// Awaits `future`, failing the test instead of hanging if a bug keeps it
/// from finishing.
async fn bounded<F: std::future::IntoFuture>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("did not finish within 30 s")
}

#[tokio::test]
async fn shutdown_waits_for_the_pass_in_progress_to_finish() {
    let store = Backend::in_memory().memo_store("memo");
    let runtime = Arc::new(ObservedRuntimeStore::default());
    let gate = Arc::new(Semaphore::new(0));
    *runtime.gate.lock().unwrap() = Some(gate.clone());
    let incarnation = finished_run(runtime.as_ref(), &run("old"), CUTOFF - DAY).await;
    seed_run(&store, &run("old"), incarnation, 2, CUTOFF - DAY).await;
    let handle = RetentionSweeper::builder(store.clone(), RETENTION)
        .runtime_store(runtime.clone())
        .clock(Arc::new(ManualClock::new(NOW)))
        .build()
        .spawn(Duration::from_secs(3600));

    // The pass is now held inside the run's clearing.
    bounded(runtime.load_started.notified()).await;
    let shutdown = tokio::spawn(handle.shutdown());
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
    assert!(!shutdown.is_finished(), "shutdown must wait for the pass");
    gate.add_permits(1);

    let summary = bounded(shutdown).await.unwrap();
    assert_eq!((summary.passes, summary.runs_cleared), (1, 1));
    assert_eq!(stored_entries(&store, &run("old")).await, 0);
    assert!(store.markers().list().await.unwrap().is_empty());
    assert_eq!(runtime.inner.load_run(&run("old")).await.unwrap(), None);
}

/// Regression: the README's `retention_sweeper().spawn(...)` dropped the
/// handle, which stopped the sweeper after its first pass.
#[tokio::test(start_paused = true)]
async fn dropping_the_handle_detaches_the_sweeper_which_keeps_sweeping() {
    let store = Backend::in_memory().memo_store("memo");
    let handle = RetentionSweeper::builder(store, RETENTION)
        .clock(Arc::new(ManualClock::new(NOW)))
        .build()
        .spawn(Duration::from_secs(60));
    let mut progress = handle.subscribe();
    progress.wait_for(|s| s.passes >= 1).await.unwrap();
    drop(handle);

    let later = tokio::time::timeout(
        Duration::from_secs(600),
        progress.wait_for(|s| s.passes >= 5),
    )
    .await
    .map(|seen| seen.map(|summary| summary.passes));
    assert!(
        matches!(later, Ok(Ok(5..))),
        "the sweeper stopped when its handle was dropped: {later:?}"
    );
}

#[test]
fn the_cutoff_saturates_at_zero() {
    let store = Backend::in_memory().memo_store("memo");
    let sweeper = sweeper(&store);
    assert_eq!(sweeper.cutoff_ms(1_000), 0);
    assert_eq!(sweeper.cutoff_ms(NOW), CUTOFF);
    assert_eq!(sweeper.retention(), RETENTION);
    let forever = RetentionSweeper::builder(store, Duration::MAX).build();
    assert_eq!(forever.cutoff_ms(u64::MAX), 0);
}

/// An operator's sweep with the wrong runtime-store prefix (issue 20, case
/// 11: the workers keep runs under `runs`, the sweep looks under `runtime`)
/// finds the marker's run nowhere: it reports the run and deletes nothing
/// of it, neither its entries, nor its marker, nor its records; the sweep
/// with the right prefix then clears it.
#[tokio::test]
async fn a_marker_of_a_run_the_runtime_store_does_not_hold_deletes_nothing() {
    for backend in Backend::all() {
        let (name, store) = (backend.name(), backend.memo_store("memo"));
        let workers: Arc<dyn RuntimeStore> = Arc::new(backend.runtime_store("runs"));
        let elsewhere: Arc<dyn RuntimeStore> = Arc::new(backend.runtime_store("runtime"));
        let order = run("order-11");
        let incarnation = finished_run(workers.as_ref(), &order, CUTOFF - DAY).await;
        seed_run(&store, &order, incarnation, 2, CUTOFF - DAY).await;

        let mistaken = RetentionSweeper::builder(store.clone(), RETENTION)
            .runtime_store(elsewhere)
            .build();
        let report = mistaken.sweep_once(NOW).await.unwrap();
        assert_eq!(
            (
                report.runs_cleared,
                report.entries_deleted,
                report.failures.len()
            ),
            (0, 0, 1),
            "{name}: {report:?}"
        );
        assert!(!report.is_complete(), "{name}");
        assert_eq!(stored_entries(&store, &order).await, 4, "{name}");
        assert_eq!(store.markers().list().await.unwrap().len(), 1, "{name}");
        assert!(workers.load_run(&order).await.unwrap().is_some(), "{name}");

        let right = RetentionSweeper::builder(store.clone(), RETENTION)
            .runtime_store(workers.clone())
            .build();
        let report = right.sweep_once(NOW).await.unwrap();
        assert_eq!(
            (report.runs_cleared, report.entries_deleted),
            (1, 4),
            "{name}"
        );
        assert!(workers.load_run(&order).await.unwrap().is_none(), "{name}");
    }
}

/// A pass that deleted a run's entries and records but not its marker
/// leaves a marker whose run the runtime store no longer holds: the next
/// pass deletes it, as nothing else of the run is left.
#[tokio::test]
async fn a_marker_left_after_its_run_was_deleted_is_swept_by_the_next_pass() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let (name, store) = (backend.name(), backend.memo_store("memo"));
        let runtime: Arc<dyn RuntimeStore> = Arc::new(backend.runtime_store("runs"));
        let order = run("order-12");
        let incarnation = finished_run(runtime.as_ref(), &order, CUTOFF - DAY).await;
        seed_run(&store, &order, incarnation, 2, CUTOFF - DAY).await;
        faults.inject(
            FaultRule::fail_before(RequestKind::Delete)
                .at_prefix("memo/terminals")
                .times(1),
        );
        let sweeper = RetentionSweeper::builder(store.clone(), RETENTION)
            .runtime_store(runtime.clone())
            .build();
        let first = sweeper.sweep_once(NOW).await.unwrap();
        assert_eq!(first.failures.len(), 1, "{name}: {first:?}");
        assert!(runtime.load_run(&order).await.unwrap().is_none(), "{name}");

        let second = sweeper.sweep_once(NOW).await.unwrap();
        assert_eq!(
            (second.runs_cleared, second.failures.len()),
            (1, 0),
            "{name}: {second:?}"
        );
        assert!(store.markers().list().await.unwrap().is_empty(), "{name}");
    }
}

/// Every folder under `root`, the root excluded.
fn folders_under(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                found.push(entry.path());
                pending.push(entry.path());
            }
        }
    }
    found
}

/// A sweep on a local folder opened from its URL removes the folders it
/// empties (issue 20, case 12: three runs left 35 behind), and the folder
/// itself stays; so do the index folders that every run enters and leaves
/// (the status-hint folders and the folder above them), which the next run
/// would create again at the cost of a sync each.
#[tokio::test]
async fn a_sweep_on_a_local_folder_leaves_no_empty_folders() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = memo_runtime::store::store_from_url(&url, Vec::<(String, String)>::new()).unwrap();
    let store = MemoStore::new(opened.store.clone(), "memo");
    let runtime: Arc<dyn RuntimeStore> = Arc::new(
        memo_runtime::runtime_store::ObjectStoreRuntimeStore::new(opened.store.clone(), "runtime"),
    );
    for id in ["order-1", "order-2", "order-3"] {
        let incarnation = finished_run(runtime.as_ref(), &run(id), CUTOFF - DAY).await;
        seed_run(&store, &run(id), incarnation, 2, CUTOFF - DAY).await;
    }
    assert!(!folders_under(dir.path()).is_empty());

    let sweeper = RetentionSweeper::builder(store.clone(), RETENTION)
        .runtime_store(runtime)
        .build();
    let report = sweeper.sweep_once(NOW).await.unwrap();
    assert_eq!(
        (report.runs_cleared, report.failures.len()),
        (3, 0),
        "{report:?}"
    );
    // The index folders kept (the status hints': three statuses these runs
    // went through, and the folder above them), and until the rechecks the
    // recheck markers' hour folder, the tombstones' folder and each run
    // id's folder with its vacated pointer (and the folder above them).
    let index_folders = ["Pending", "Running", "Completed"]
        .map(|status| dir.path().join("runtime/runs-by-status").join(status));
    let under = |folders: &[&str]| {
        let folders: Vec<_> = folders.iter().map(|f| dir.path().join(f)).collect();
        let index_folders = &index_folders;
        move |f: &std::path::PathBuf| {
            folders
                .iter()
                .chain(index_folders)
                .any(|kept| kept.starts_with(f) || f.starts_with(kept))
        }
    };
    let left = folders_under(dir.path());
    let kept = under(&[
        "memo/rechecks",
        "runtime/tombstones",
        "runtime/runs/order-1",
        "runtime/runs/order-2",
        "runtime/runs/order-3",
    ]);
    assert!(left.len() == 13 && left.iter().all(kept), "{left:?}");
    let recheck_ms = memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64;
    let report = sweeper.sweep_once(NOW + recheck_ms).await.unwrap();
    assert_eq!(
        (report.rechecks_due, report.recheck_failures),
        (3, 0),
        "{report:?}"
    );
    let left = folders_under(dir.path());
    assert!(left.len() == 5 && left.iter().all(under(&[])), "{left:?}");
    assert!(dir.path().is_dir());
}

/// The folders a sweep empties are removed up to a symlink another writer
/// planted beside them, never the symlink nor the empty folder it points
/// to outside the store.
#[cfg(unix)]
#[tokio::test]
async fn emptied_folders_are_removed_up_to_a_planted_symlink_and_never_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let outside_empty = outside.path().join("empty");
    std::fs::create_dir(&outside_empty).unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = memo_runtime::store::store_from_url(&url, Vec::<(String, String)>::new()).unwrap();
    let store = MemoStore::new(opened.store.clone(), "memo");
    let incarnation = Incarnation::from_u64(5);
    seed_run(&store, &run("order-1"), incarnation, 1, CUTOFF - DAY).await;
    let run_folder = dir.path().join("memo/memos/order-1");
    let planted = run_folder.join("planted");
    std::os::unix::fs::symlink(&outside_empty, &planted).unwrap();

    let report = sweeper(&store).sweep_once(NOW).await.unwrap();
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    assert!(!run_folder.join(incarnation.to_string()).exists());
    assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink());
    assert!(outside_empty.is_dir());
}
