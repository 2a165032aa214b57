//! `recover()` and bounded memory (issue 20 item 8): a recovery lists
//! neither the terminal markers nor the ended runs, so what it holds and
//! what it requests do not grow with the runs a bucket retains; and the
//! guarantee that an ended run without its marker gets one is kept by the
//! due-run index instead: an attempt that could not write its run's marker
//! keeps its entry, and whoever wakes the entry (a recovery, a worker, a
//! sweep) writes the marker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use memo_runtime::clock::{Clock, ManualClock};
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{
    Commit, InMemoryRuntimeStore, InputRecord, NewInput, NewRun, ObjectStoreRuntimeStore,
    RunIdPage, RunPage, RunRecord, RunStatus, RunSummary, RuntimeStore, StepReceipt,
};
use memo_runtime::testing::{CountingStore, FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Bytes, Error, Incarnation, MemoStore, Result, RunId};

const DAY_MS: u64 = 24 * 3600 * 1000;

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, std::result::Result<u64, Error>>;

/// Sleeps the input's milliseconds (none for 0), then ends with them.
fn napper() -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync> {
    Workflow::new("napper", |ctx: Context, ms: u64| {
        Box::pin(async move {
            if ms > 0 {
                ctx.sleep(Duration::from_millis(ms)).await?;
            }
            Ok::<_, Error>(ms)
        }) as BoxedRun
    })
}

fn runtime_over(
    objects: &Arc<dyn ObjectStore>,
    runs: Arc<dyn RuntimeStore>,
    clock: &Arc<ManualClock>,
) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(runs)
        .clock(clock.clone())
        .timer_wait(Duration::ZERO)
        .build()
        .unwrap()
}

/// Stores `ended` completed runs (with their markers) and two that sleep
/// for a day, over one counting store; returns what a recovery then
/// requested.
async fn cost_of_recovering(ended: usize) -> memo_runtime::testing::RequestCounts {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let objects: Arc<dyn ObjectStore> = counting.clone();
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let runs = Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let runtime = runtime_over(&objects, runs, &clock);
    let napper = napper();
    for i in 0..ended {
        runtime
            .run(&run(&format!("ended-{i}")), &0, &napper)
            .await
            .unwrap();
    }
    for i in 0..2 {
        let outcome = runtime
            .run(&run(&format!("asleep-{i}")), &DAY_MS, &napper)
            .await;
        assert!(
            matches!(outcome, Err(Error::Suspended { .. })),
            "{outcome:?}"
        );
    }
    counting.reset();
    let recovery = runtime.recover(&napper).await.unwrap();
    assert_eq!(recovery.remarked, 0, "{recovery:?}");
    assert!(recovery.skipped.is_empty(), "{recovery:?}");
    counting.counts()
}

#[tokio::test]
async fn a_recovery_costs_the_same_whatever_the_ended_runs_retained() {
    let mut few = cost_of_recovering(3).await;
    let mut many = cost_of_recovering(60).await;
    // Requests, not bytes: a compressed record's size varies by a few
    // bytes with its random incarnation.
    (few.bytes_put, many.bytes_put) = (0, 0);
    assert_eq!(
        few, many,
        "a recovery read more with more ended runs retained"
    );
}

/// A runtime store that records the listings it is asked for: whole ones
/// (`list_runs`, `list_run_ids`) by status, and the largest page.
#[derive(Debug, Default)]
struct Listings {
    inner: InMemoryRuntimeStore,
    whole: Mutex<Vec<RunStatus>>,
    largest_page: AtomicUsize,
}

#[async_trait]
impl RuntimeStore for Listings {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        self.inner.create_run(run).await
    }
    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.inner.load_run(run_id).await
    }
    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        self.inner.atomic_apply(run_id, commit).await
    }
    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        self.inner.load_receipts(run_id, after).await
    }
    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        self.inner.load_snapshot(run_id).await
    }
    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        self.inner.append_input(run_id, input).await
    }
    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        self.inner.load_inputs(run_id).await
    }
    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        self.whole.lock().unwrap().push(status);
        self.inner.list_runs(status).await
    }
    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        self.whole.lock().unwrap().push(status);
        self.inner.list_run_ids(status).await
    }
    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        self.largest_page.fetch_max(limit, Ordering::SeqCst);
        self.inner.list_run_ids_page(status, after, limit).await
    }
    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        self.largest_page.fetch_max(limit, Ordering::SeqCst);
        self.inner.list_runs_page(status, after, limit).await
    }
    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.inner.delete_run(run_id, incarnation).await
    }
}

#[tokio::test]
async fn a_recovery_lists_no_markers_and_no_listing_whole() {
    let faults = Arc::new(FaultInjectingStore::new(
        Arc::new(InMemory::new()) as Arc<dyn ObjectStore>
    ));
    let objects: Arc<dyn ObjectStore> = faults.clone();
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let listings = Arc::new(Listings::default());
    let runtime = runtime_over(&objects, listings.clone(), &clock);
    let napper = napper();
    for i in 0..5 {
        runtime
            .run(&run(&format!("ended-{i}")), &0, &napper)
            .await
            .unwrap();
    }
    let outcome = runtime.run(&run("asleep"), &DAY_MS, &napper).await;
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );
    // The markers folder cannot be listed at all.
    faults.inject(FaultRule::fail_before(RequestKind::List).at_prefix("memo/terminals"));

    clock.advance_ms(DAY_MS);
    let recovery = runtime.recover(&napper).await.unwrap();
    assert!(recovery.skipped.is_empty(), "{recovery:?}");
    assert_eq!(recovery.resumed.len(), 1, "{recovery:?}");
    let worker = Worker::builder(runtime.clone()).workflow(&napper).build();
    let recovery = worker.recover().await.unwrap();
    assert!(recovery.skipped.is_empty(), "{recovery:?}");
    assert_eq!(
        runtime
            .status(&run("asleep"))
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Completed
    );
    assert_eq!(*listings.whole.lock().unwrap(), Vec::<RunStatus>::new());
    let largest = listings.largest_page.load(Ordering::SeqCst);
    assert!((1..=1_000).contains(&largest), "pages of {largest} ids");
}

/// Completes run `unmarked` while every marker write fails, over `objects`.
async fn end_without_its_marker(
    faults: &FaultInjectingStore<Arc<dyn ObjectStore>>,
    runtime: &Runtime,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync + use<>> {
    let napper = napper();
    faults.inject(FaultRule::fail_before(RequestKind::Create).at_prefix("memo/terminals"));
    runtime.run(&run("unmarked"), &0, &napper).await.unwrap();
    faults.clear_faults();
    assert!(
        runtime
            .memo_store()
            .markers()
            .list()
            .await
            .unwrap()
            .is_empty()
    );
    napper
}

async fn marked(runtime: &Runtime) -> Vec<String> {
    let markers = runtime.memo_store().markers().list().await.unwrap();
    markers.into_iter().map(|m| m.run_id.to_string()).collect()
}

type Faulty = Arc<FaultInjectingStore<Arc<dyn ObjectStore>>>;

fn faulty() -> (Faulty, Arc<dyn ObjectStore>) {
    let faults = Arc::new(FaultInjectingStore::new(
        Arc::new(InMemory::new()) as Arc<dyn ObjectStore>
    ));
    let objects: Arc<dyn ObjectStore> = faults.clone();
    (faults, objects)
}

#[tokio::test]
async fn an_ended_run_whose_marker_write_failed_is_marked_by_a_recovery() {
    let (faults, objects) = faulty();
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let runs = Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let runtime = runtime_over(&objects, runs, &clock);
    let napper = end_without_its_marker(&faults, &runtime).await;
    let recovery = runtime.recover(&napper).await.unwrap();
    assert_eq!(recovery.remarked, 1, "{recovery:?}");
    assert_eq!(marked(&runtime).await, ["unmarked"]);
    // Written once: the next recovery finds it there.
    assert_eq!(runtime.recover(&napper).await.unwrap().remarked, 0);
}

#[tokio::test]
async fn an_ended_run_whose_marker_write_failed_is_marked_by_a_workers_poll() {
    let (faults, objects) = faulty();
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let runs = Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let runtime = runtime_over(&objects, runs, &clock);
    let napper = end_without_its_marker(&faults, &runtime).await;
    // The attempt's entry is due when its lease would have expired.
    clock.advance_ms(DAY_MS);
    let report = Worker::builder(runtime.clone())
        .workflow(&napper)
        .build()
        .wake_due()
        .await
        .unwrap();
    assert_eq!(report.stale, 1, "{report:?}");
    assert_eq!(marked(&runtime).await, ["unmarked"]);
    let left: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(runtime.due_runs(u64::MAX))
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn an_ended_run_whose_marker_write_failed_is_marked_by_a_sweep() {
    let (faults, objects) = faulty();
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let runs = Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let runtime = runtime_over(&objects, runs, &clock);
    end_without_its_marker(&faults, &runtime).await;
    clock.advance_ms(DAY_MS);
    runtime
        .retention_sweeper()
        .sweep_once(clock.now_ms())
        .await
        .unwrap();
    assert_eq!(marked(&runtime).await, ["unmarked"]);
}
