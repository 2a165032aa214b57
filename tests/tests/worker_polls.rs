//! What a worker's poll of the due-run index reads (issue 23): by default
//! (every store memo opens lists in order), requests in proportion to the
//! due runs, whatever the runs waiting later in the same hour; and every
//! due entry gets its turn, however many entries of workflows the worker
//! does not know come before it.

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunStatus};
use memo_runtime::store::LocalFolder;
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

/// The clock starts at the beginning of an hour, so the runs below wait
/// in the hour that holds the polls.
const START_MS: u64 = 24 * 3600 * 1000;
const MINUTE_MS: u64 = 60_000;

fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .timer_wait(Duration::ZERO)
        .build()
        .unwrap()
}

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// Sleeps the input's milliseconds, then ends with them.
fn napper(name: &'static str) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync> {
    Workflow::new(name, |ctx: Context, ms: u64| {
        Box::pin(async move {
            ctx.sleep(Duration::from_millis(ms)).await?;
            Ok::<_, Error>(ms)
        }) as BoxedRun
    })
}

async fn suspend(
    runtime: &Runtime,
    id: &str,
    ms: u64,
    workflow: &Workflow<impl Fn(Context, u64) -> BoxedRun>,
) {
    let outcome = runtime.run(&run(id), &ms, workflow).await;
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );
}

async fn status(runtime: &Runtime, id: &str) -> RunStatus {
    runtime
        .status(&run(id))
        .await
        .unwrap()
        .expect("the run")
        .status
}

/// `later` runs wait 30 minutes and three wait one minute, all in the
/// current hour; the clock moves two minutes on. Returns what the poll
/// that wakes the three requested, by a worker over `inner` built as it
/// is by default or declaring the store unordered.
async fn cost_of_waking_three<T: ObjectStore>(
    inner: T,
    later: usize,
    unordered: bool,
) -> RequestCounts {
    let counting = Arc::new(CountingStore::new(inner));
    let objects: Arc<dyn ObjectStore> = counting.clone();
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = process(&objects, &clock);
    let napper = napper("napper");
    for i in 0..later {
        suspend(&runtime, &format!("later-{i}"), 30 * MINUTE_MS, &napper).await;
    }
    for i in 0..3 {
        suspend(&runtime, &format!("due-{i}"), MINUTE_MS, &napper).await;
    }
    clock.advance_ms(2 * MINUTE_MS);
    let mut worker = Worker::builder(runtime.clone()).workflow(&napper);
    if unordered {
        worker = worker.unordered_listings();
    }
    let worker = worker.build();
    counting.reset();
    let report = worker.wake_due().await.unwrap();
    let counts = counting.counts();
    assert_eq!((report.entries, report.resumed), (3, 3), "{report:?}");
    for i in 0..3 {
        assert_eq!(
            status(&runtime, &format!("due-{i}")).await,
            RunStatus::Completed
        );
    }
    assert_eq!(status(&runtime, "later-0").await, RunStatus::Running);
    counts
}

/// A default poll's listing: one request, read up to the first entry not
/// yet due (the three due ones and that one), however many runs wait
/// later in the same hour.
fn assert_reads_only_the_due_entries(few: &RequestCounts, many: &RequestCounts) {
    // Every count but the bytes uploaded: a run's checkpoints are
    // compressed, and their random parts (attempt tokens, incarnations,
    // commit digests) compress to a few bytes more or less from one run to
    // the next, however many wait.
    let requests = |c: &RequestCounts| RequestCounts { bytes_put: 0, ..*c };
    assert_eq!(
        requests(few),
        requests(many),
        "the cost of a poll grew with the runs waiting later"
    );
    assert_eq!(
        few.lists + few.lists_with_offset + few.lists_with_delimiter,
        1,
        "{few:?}"
    );
    assert_eq!(few.objects_listed, 3 + 1, "{few:?}");
}

#[tokio::test]
async fn a_default_poll_reads_the_due_entries_not_the_hours_later_ones() {
    let few = cost_of_waking_three(InMemory::new(), 5, false).await;
    let many = cost_of_waking_three(InMemory::new(), 200, false).await;
    assert_reads_only_the_due_entries(&few, &many);
}

#[tokio::test]
async fn a_default_poll_on_a_local_folder_reads_the_due_entries_not_the_hours_later_ones() {
    // The folder a `file://` URL opens lists in order from an offset.
    let (few_dir, many_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let folder = |dir: &tempfile::TempDir| LocalFolder::new(dir.path()).unwrap().with_fsync(false);
    let few = cost_of_waking_three(folder(&few_dir), 5, false).await;
    let many = cost_of_waking_three(folder(&many_dir), 200, false).await;
    assert_reads_only_the_due_entries(&few, &many);
}

#[tokio::test]
async fn a_poll_declared_unordered_lists_the_current_hour_whole() {
    // For a custom store that does not list in order: correct, at the
    // cost of the current hour's entries.
    let few = cost_of_waking_three(InMemory::new(), 5, true).await;
    let many = cost_of_waking_three(InMemory::new(), 200, true).await;
    assert_eq!(few.objects_listed, 3 + 5, "{few:?}");
    assert_eq!(many.objects_listed, 3 + 200, "{many:?}");
}

/// Three runs of a workflow the worker does not know are due before one of
/// its own; with a batch of two, the second poll reaches its run.
async fn a_run_behind_unknown_entries_is_woken(unordered: bool) {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = process(&objects, &clock);
    let (mine, theirs) = (napper("mine"), napper("theirs"));
    for i in 0..3 {
        suspend(&runtime, &format!("theirs-{i}"), MINUTE_MS, &theirs).await;
    }
    suspend(&runtime, "mine", 2 * MINUTE_MS, &mine).await;
    clock.advance_ms(3 * MINUTE_MS);
    let mut worker = Worker::builder(runtime.clone())
        .workflow(&mine)
        .poll_batch(2);
    if unordered {
        worker = worker.unordered_listings();
    }
    let worker = worker.build();
    let first = worker.wake_due().await.unwrap();
    assert_eq!(
        (first.entries, first.unknown, first.resumed),
        (2, 2, 0),
        "{first:?}"
    );
    let second = worker.wake_due().await.unwrap();
    assert_eq!((second.unknown, second.resumed), (1, 1), "{second:?}");
    assert_eq!(status(&runtime, "mine").await, RunStatus::Completed);
    // The next poll goes on from the earliest entry when none is left
    // after its cursor: the unknown runs' entries stay for a worker that
    // knows them.
    let third = worker.wake_due().await.unwrap();
    assert_eq!((third.entries, third.unknown), (2, 2), "{third:?}");
}

#[tokio::test]
async fn entries_of_unknown_workflows_never_starve_a_workers_own_runs() {
    a_run_behind_unknown_entries_is_woken(false).await;
    a_run_behind_unknown_entries_is_woken(true).await;
}

/// Waits, in real time, until `done` holds (at most 10 s).
async fn until(mut done: impl AsyncFnMut() -> bool) {
    for _ in 0..2_000 {
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("not done within 10 s");
}

/// A workflow `name` of one step that returns once it acquires a permit
/// of `gate`.
fn gated(
    name: &'static str,
    gate: Arc<tokio::sync::Semaphore>,
) -> Workflow<impl Fn(Context, ()) -> BoxedRun + Clone + Send + Sync> {
    Workflow::new(name, move |ctx: Context, (): ()| {
        let gate = gate.clone();
        Box::pin(async move {
            ctx.step("wait", move |_memo| {
                let gate = gate.clone();
                async move {
                    let _open = gate.acquire().await;
                    Ok::<_, Error>(1u64)
                }
            })
            .await
        }) as BoxedRun
    })
}

/// A run submitted to a spawned worker is that worker's to start: the
/// other workers on the store, polling all the while it runs, never see it
/// due, so none of them loads it (each used to load it, find it held and
/// move its entry: O(N) requests a run). And nothing of it is left in the
/// index once it ends.
#[tokio::test]
async fn a_run_submitted_to_a_spawned_worker_is_not_woken_by_the_others() {
    let shared: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated("gated", gate.clone());
    let spawn = |runtime: Runtime| {
        Worker::builder(runtime)
            .workflow(&gated)
            .poll_interval(Duration::from_millis(1))
            .sweep_interval(None)
            .spawn()
    };
    let submitter = process(&shared, &clock);
    let own = spawn(submitter.clone());
    let others: Vec<_> = (0..2)
        .map(|_| {
            let counting = Arc::new(CountingStore::new(shared.clone()));
            let objects: Arc<dyn ObjectStore> = counting.clone();
            (counting, spawn(process(&objects, &clock)))
        })
        .collect();
    own.worker()
        .submit(&gated, &run("submitted"), &())
        .await
        .unwrap();
    // Before the loop runs (this test's runtime has one thread): its
    // attempt starts a millisecond after the submit, so its lease entry is
    // another entry than the submit's, which the attempt then deletes.
    clock.advance_ms(1);
    until(async || status(&submitter, "submitted").await == RunStatus::Running).await;
    // The others poll every millisecond while the run is held.
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.add_permits(1);
    until(async || status(&submitter, "submitted").await == RunStatus::Completed).await;
    let mut polls = 0;
    for (counting, handle) in others {
        let report = handle.shutdown(Duration::from_secs(5)).await;
        assert_eq!(report.entries, 0, "{report:?}");
        let counts = counting.counts();
        polls += counts.lists_with_offset;
        // Nothing read of the run, nothing written.
        assert_eq!(
            (
                counts.gets,
                counts.creates,
                counts.puts,
                counts.delete_paths
            ),
            (0, 0, 0, 0),
            "{counts:?}"
        );
    }
    assert!(polls > 10, "the others polled: {polls} listings");
    own.shutdown(Duration::from_secs(5)).await;
    assert_no_due_entries(&shared).await;
}

/// That the due-run index in `objects` (under `memo/`) is empty.
async fn assert_no_due_entries(objects: &Arc<dyn ObjectStore>) {
    use futures::TryStreamExt;
    let index: Vec<_> = objects
        .list(Some(&"memo/due".into()))
        .try_collect()
        .await
        .unwrap();
    assert!(index.is_empty(), "{index:?}");
}

/// Three steps, each counting its body's runs in `bodies`.
fn counted_steps(
    bodies: Arc<std::sync::atomic::AtomicU64>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync> {
    Workflow::new("counted", move |ctx: Context, steps: u64| {
        let bodies = bodies.clone();
        Box::pin(async move {
            for n in 0..steps {
                let bodies = bodies.clone();
                ctx.step(format!("step-{n}"), move |_memo| {
                    let bodies = bodies.clone();
                    async move {
                        bodies.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Ok::<_, Error>(n)
                    }
                })
                .await?;
            }
            Ok::<_, Error>(steps)
        }) as BoxedRun
    })
}

/// A run submitted to a spawned worker is started on the record its
/// submit's creation returned, as `Runtime::run` starts the run it
/// creates: the worker reads nothing of the run before its attempt starts
/// (a load read its pointer and its log's next position), and the run's
/// only reads are the pointer checks of its start and its end. And its
/// attempt, started before the submit's due-run entry is due, keeps that
/// entry as its lease entry: the run writes one entry and deletes it once
/// it ended (it wrote a second and deleted both).
#[tokio::test]
async fn a_run_submitted_to_a_spawned_worker_starts_without_a_load_or_a_second_entry() {
    let shared: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let (memo, runs) = (
        Arc::new(CountingStore::new(shared.clone())),
        Arc::new(CountingStore::new(shared.clone())),
    );
    let bodies = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = counted_steps(bodies.clone());
    let submitter = Runtime::builder()
        .memo_store(MemoStore::new(memo.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(runs.clone(), "runs")))
        .clock(clock.clone())
        .check_conditional_create(false)
        .build()
        .unwrap();
    let handle = Worker::builder(submitter)
        .workflow(&counted)
        .poll_interval(Duration::from_secs(3600))
        .sweep_interval(None)
        .spawn();
    let observer = process(&shared, &clock);
    handle
        .worker()
        .submit(&counted, &run("submitted"), &3)
        .await
        .unwrap();
    // Before the loop runs (this test's runtime has one thread): the
    // attempt starts a millisecond after the submit, so the lease it takes
    // expires a millisecond after the submit's entry is due.
    clock.advance_ms(1);
    until(async || status(&observer, "submitted").await == RunStatus::Completed).await;
    handle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(bodies.load(std::sync::atomic::Ordering::SeqCst), 3);
    let runs = runs.counts();
    assert_eq!(
        (runs.gets, runs.get_ranges),
        (2, 0),
        "the start's and the end's pointer checks only: {runs:?}"
    );
    // The memo store: the due-run entry and the terminal marker, and the
    // entry's delete; no read.
    let memo = memo.counts();
    assert_eq!(
        (memo.creates, memo.delete_paths, memo.gets + memo.heads),
        (2, 1, 0),
        "{memo:?}"
    );
    assert_no_due_entries(&shared).await;
}

/// The attempt of a submitted run keeps the submit's entry as its lease
/// entry, due a moment before its lease first expires. If that attempt
/// stalls (here its step never returns; a process that died is the same),
/// another worker that wakes the entry then finds the lease live and moves
/// the entry to the lease's expiry, and once the lease has expired it
/// takes the run over and ends it.
#[tokio::test]
async fn a_stalled_attempt_that_kept_the_submits_entry_is_taken_over_once_its_lease_expires() {
    const LEASE_MS: u64 = 60_000;
    let shared: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let leased = || {
        Runtime::builder()
            .memo_store(MemoStore::new(shared.clone(), "memo"))
            .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
                shared.clone(),
                "runs",
            )))
            .clock(clock.clone())
            .lease(Duration::from_millis(LEASE_MS))
            .build()
            .unwrap()
    };
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let stalled = gated("job", gate.clone());
    let quick = Workflow::new("job", |ctx: Context, (): ()| {
        Box::pin(async move {
            ctx.step("wait", |_memo| async { Ok::<_, Error>(2u64) })
                .await
        }) as BoxedRun
    });
    let first = Worker::builder(leased())
        .workflow(&stalled)
        .poll_interval(Duration::from_secs(3600))
        .sweep_interval(None)
        .spawn();
    let observer = leased();
    first
        .worker()
        .submit(&stalled, &run("job-1"), &())
        .await
        .unwrap();
    clock.advance_ms(1);
    until(async || status(&observer, "job-1").await == RunStatus::Running).await;
    let due: Vec<u64> = {
        use futures::TryStreamExt;
        (observer.due_runs(u64::MAX))
            .map_ok(|e| e.due_at_ms)
            .try_collect()
            .await
            .unwrap()
    };
    assert_eq!(due, [START_MS + LEASE_MS], "the submit's entry, kept");
    let second = Worker::builder(leased())
        .workflow(&quick)
        .sweep_interval(None)
        .build();
    // The entry is due, the lease expires a millisecond later.
    clock.set_ms(START_MS + LEASE_MS);
    let report = second.wake_due().await.unwrap();
    assert_eq!((report.entries, report.busy), (1, 1), "{report:?}");
    clock.advance_ms(1);
    let report = second.wake_due().await.unwrap();
    assert_eq!((report.entries, report.resumed), (1, 1), "{report:?}");
    assert_eq!(status(&observer, "job-1").await, RunStatus::Completed);
    gate.add_permits(1);
    first.shutdown(Duration::from_secs(5)).await;
    assert_eq!(status(&observer, "job-1").await, RunStatus::Completed);
}

/// A run submitted to a spawned worker whose places are all taken may
/// move on before the loop takes it: here another process runs it to its
/// end meanwhile. The loop's attempt, started on the submit's record of a
/// run not yet started, finds the run's first log position taken and the
/// run ended: no step body runs again, and the run keeps the other
/// process's outcome.
#[tokio::test]
async fn a_submitted_run_that_another_process_ran_meanwhile_is_not_run_again() {
    let shared: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated("gated", gate.clone());
    let bodies = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = counted_steps(bodies.clone());
    let submitter = process(&shared, &clock);
    let handle = Worker::builder(submitter.clone())
        .workflow(&gated)
        .workflow(&counted)
        .concurrency(1)
        .poll_interval(Duration::from_secs(3600))
        .sweep_interval(None)
        .spawn();
    let worker = handle.worker().clone();
    worker
        .submit(&gated, &run("holds-the-place"), &())
        .await
        .unwrap();
    until(async || status(&submitter, "holds-the-place").await == RunStatus::Running).await;
    worker
        .submit(&counted, &run("taken-over"), &3)
        .await
        .unwrap();
    // Another process runs it to its end while the loop's one place is
    // taken.
    let other = process(&shared, &clock);
    assert_eq!(
        other.run(&run("taken-over"), &3, &counted).await.unwrap(),
        3
    );
    assert_eq!(bodies.load(std::sync::atomic::Ordering::SeqCst), 3);
    gate.add_permits(1);
    until(async || status(&submitter, "holds-the-place").await == RunStatus::Completed).await;
    // The place frees once that attempt has written its marker and
    // deleted its entry; the loop then takes the second run (it writes
    // nothing, so there is nothing to wait for in the store).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let report = handle.shutdown(Duration::from_secs(5)).await;
    // Both runs were woken, the second on its submit's stale record.
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!((report.entries, report.resumed), (2, 2), "{report:?}");
    assert_eq!(
        bodies.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "no body ran again"
    );
    assert_eq!(status(&other, "taken-over").await, RunStatus::Completed);
}

/// A run submitted to a spawned worker that cannot start it (here, a
/// worker that does not register its workflow) is still started: its
/// entry comes due for every worker once a lease has run from the submit,
/// as if the submitter's attempt had started and crashed at once.
#[tokio::test]
async fn a_run_submitted_to_a_worker_that_does_not_start_it_is_due_a_lease_later() {
    let shared: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let unrelated = napper("unrelated");
    let napper = napper("napper");
    let submitter = Worker::builder(process(&shared, &clock))
        .workflow(&unrelated)
        .poll_interval(Duration::from_millis(1))
        .sweep_interval(None)
        .spawn();
    submitter
        .worker()
        .submit(&napper, &run("orphan"), &0u64)
        .await
        .unwrap();
    // The submitter's loop takes the run and cannot wake it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let runtime = process(&shared, &clock);
    let other = Worker::builder(runtime.clone()).workflow(&napper).build();
    let report = other.wake_due().await.unwrap();
    assert_eq!(report.entries, 0, "not due yet: {report:?}");
    clock.advance_ms(memo_runtime::workflow::DEFAULT_LEASE.as_millis() as u64);
    let report = other.wake_due().await.unwrap();
    assert_eq!((report.entries, report.resumed), (1, 1), "{report:?}");
    assert_eq!(status(&runtime, "orphan").await, RunStatus::Completed);
    submitter.shutdown(Duration::from_secs(5)).await;
}
