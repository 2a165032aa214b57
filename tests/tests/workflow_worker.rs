//! The due-run index and the worker loop (issue 23, items 4 and 5): runs
//! that wait are found by due time at a cost in proportion to the due runs;
//! workers on one store (separate store instances over one object store,
//! as separate processes are) wake them, share them, and take over a
//! crashed worker's runs once their leases expire. Clocks are
//! `ManualClock`s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::clock::{Clock, ManualClock};
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::testing::CountingStore;
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, ErrorKind, MemoStore, RunId};

const DAY_MS: u64 = 24 * 3600 * 1000;
const LEASE: Duration = Duration::from_secs(60);

/// A runtime over its own store instances on `objects`, as a process has.
fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .lease(LEASE)
        .timer_wait(Duration::ZERO)
        .signal_poll_interval(Duration::from_millis(1))
        .build()
        .unwrap()
}

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// How often each run's step bodies ran, by run id and step.
#[derive(Default)]
struct Bodies(Mutex<HashMap<(String, &'static str), u64>>);

impl Bodies {
    fn ran(&self, run: &str, step: &'static str) {
        *self
            .0
            .lock()
            .unwrap()
            .entry((run.into(), step))
            .or_default() += 1;
    }

    fn count(&self, run: &str, step: &'static str) -> u64 {
        let bodies = self.0.lock().unwrap();
        bodies.get(&(run.into(), step)).copied().unwrap_or(0)
    }
}

/// Sleeps `ms` (recorded when first reached), then runs the step `after`.
fn napper(
    bodies: Arc<Bodies>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("napper", move |ctx: Context, ms: u64| {
        let bodies = bodies.clone();
        Box::pin(async move {
            ctx.sleep(Duration::from_millis(ms)).await?;
            let run = ctx.run_id().to_string();
            ctx.step("after", move |_memo| {
                bodies.ran(&run, "after");
                async { Ok::<_, Error>("woke".to_string()) }
            })
            .await
        }) as BoxedRun
    })
}

/// Waits for the signal `go`, then runs the step `after`.
fn waiter(
    bodies: Arc<Bodies>,
) -> Workflow<impl Fn(Context, ()) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("waiter", move |ctx: Context, (): ()| {
        let bodies = bodies.clone();
        Box::pin(async move {
            let go: String = ctx.wait_for_signal("go").await?;
            let run = ctx.run_id().to_string();
            ctx.step("after", move |_memo| {
                bodies.ran(&run, "after");
                let go = go.clone();
                async move { Ok::<_, Error>(go) }
            })
            .await
        }) as BoxedRun
    })
}

/// An empty store, a clock a day after the epoch, a process's runtime over
/// them, and a count of step bodies.
fn one_process() -> (Arc<dyn ObjectStore>, Arc<ManualClock>, Runtime, Arc<Bodies>) {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let runtime = process(&objects, &clock);
    (objects, clock, runtime, Arc::new(Bodies::default()))
}

/// Two steps; the first waits on `gate` when the run's input says so.
fn gated(
    bodies: Arc<Bodies>,
    gate: Arc<tokio::sync::Semaphore>,
) -> Workflow<impl Fn(Context, bool) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("gated", move |ctx: Context, waits: bool| {
        let (bodies, gate) = (bodies.clone(), gate.clone());
        Box::pin(async move {
            let run = ctx.run_id().to_string();
            let (b, r) = (bodies.clone(), run.clone());
            ctx.step("first", move |_memo| {
                let (b, r, gate) = (b.clone(), r.clone(), gate.clone());
                async move {
                    b.ran(&r, "first");
                    if waits {
                        let _open = gate.acquire().await;
                    }
                    Ok::<_, Error>(())
                }
            })
            .await?;
            ctx.step("second", move |_memo| {
                bodies.ran(&run, "second");
                async { Ok::<_, Error>("done".to_string()) }
            })
            .await
        }) as BoxedRun
    })
}

/// Submits `id` of the `gated` workflow through a worker of another
/// process that does not poll, so that its entry is due now.
async fn submit_gated_elsewhere(
    objects: &Arc<dyn ObjectStore>,
    clock: &Arc<ManualClock>,
    id: &RunId,
    waits: bool,
) {
    let gated = gated(Arc::default(), Arc::new(tokio::sync::Semaphore::new(0)));
    let submitter = Worker::builder(process(objects, clock))
        .workflow(&gated)
        .build();
    submitter.submit(&gated, id, &waits).await.unwrap();
}

/// Polls `done` every 5 ms, for at most 10 s.
async fn eventually(mut done: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..2000 {
        if done().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

async fn status(runtime: &Runtime, id: &RunId) -> RunStatus {
    runtime.status(id).await.unwrap().expect("the run").status
}

/// Stores `idle` runs that wait for a timer ten days away and `ended` that
/// completed, then three runs whose one-minute timers are due after the
/// clock moves two hours on; returns the request counts of the poll that
/// wakes them.
async fn cost_of_waking_three(idle: usize, ended: usize) -> memo_runtime::testing::RequestCounts {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let objects: Arc<dyn ObjectStore> = counting.clone();
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let runtime = process(&objects, &clock);
    let bodies = Arc::new(Bodies::default());
    let napper = napper(bodies.clone());
    for i in 0..idle {
        let outcome = runtime
            .run(&run(&format!("idle-{i}")), &(10 * DAY_MS), &napper)
            .await;
        assert!(
            matches!(outcome, Err(Error::Suspended { .. })),
            "{outcome:?}"
        );
    }
    for i in 0..ended {
        runtime
            .run(&run(&format!("ended-{i}")), &0, &napper)
            .await
            .unwrap();
    }
    for i in 0..3 {
        let outcome = runtime
            .run(&run(&format!("due-{i}")), &60_000, &napper)
            .await;
        assert!(
            matches!(outcome, Err(Error::Suspended { .. })),
            "{outcome:?}"
        );
    }
    clock.advance_ms(2 * 3600 * 1000);
    let worker = Worker::builder(runtime.clone()).workflow(&napper).build();
    counting.reset();
    let report = worker.wake_due().await.unwrap();
    let counts = counting.counts();
    assert_eq!((report.entries, report.resumed), (3, 3), "{report:?}");
    for i in 0..3 {
        assert_eq!(
            status(&runtime, &run(&format!("due-{i}"))).await,
            RunStatus::Completed
        );
    }
    assert_eq!(bodies.count("idle-0", "after"), 0);
    counts
}

#[tokio::test]
async fn waking_due_runs_costs_requests_in_proportion_to_the_due_runs_not_all_runs() {
    let mut few = cost_of_waking_three(5, 5).await;
    let mut many = cost_of_waking_three(60, 60).await;
    // Requests, not bytes: a compressed record's size varies by a few
    // bytes with its random incarnation.
    (few.bytes_put, many.bytes_put) = (0, 0);
    assert_eq!(
        few, many,
        "the cost of a poll grew with the idle and ended runs"
    );
    // One listing of the index, read up to the first entry not yet due.
    assert_eq!(
        few.lists + few.lists_with_offset + few.lists_with_delimiter,
        1,
        "{few:?}"
    );
    assert_eq!(few.objects_listed, 3 + 1, "{few:?}");
}

#[tokio::test]
async fn a_timer_woken_by_a_worker_never_fires_before_its_deadline() {
    let (_, clock, runtime, bodies) = one_process();
    let napper = napper(bodies.clone());
    let worker = Worker::builder(runtime.clone()).workflow(&napper).build();
    let id = run("nap");
    worker.submit(&napper, &id, &DAY_MS).await.unwrap();
    let report = worker.wake_due().await.unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert_eq!(status(&runtime, &id).await, RunStatus::Running);
    let waiting: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    assert_eq!(waiting.len(), 1, "only the timer's entry: {waiting:?}");
    assert_eq!(waiting[0].due_at_ms, 2 * DAY_MS);

    clock.set_ms(2 * DAY_MS - 1);
    let early = worker.wake_due().await.unwrap();
    assert_eq!(early.entries, 0, "{early:?}");
    assert_eq!(bodies.count("nap", "after"), 0);

    clock.set_ms(2 * DAY_MS);
    let due = worker.wake_due().await.unwrap();
    assert_eq!(due.resumed, 1, "{due:?}");
    assert_eq!(status(&runtime, &id).await, RunStatus::Completed);
    assert_eq!(bodies.count("nap", "after"), 1);
    let left: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(left.is_empty(), "an ended run keeps no entry: {left:?}");
}

#[tokio::test]
async fn a_signal_makes_a_suspended_run_due_for_a_worker_of_another_process() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let (a, b) = (process(&objects, &clock), process(&objects, &clock));
    let bodies = Arc::new(Bodies::default());
    let waiter = waiter(bodies.clone());
    let worker = Worker::builder(a.clone()).workflow(&waiter).build();
    let id = run("wait");
    worker.submit(&waiter, &id, &()).await.unwrap();
    assert_eq!(worker.wake_due().await.unwrap().resumed, 1);
    // Suspended for the signal: nothing is due, however often it polls.
    let idle = worker.wake_due().await.unwrap();
    assert_eq!(idle.entries, 0, "{idle:?}");

    b.signal(&id, "go", "now").await.unwrap();
    let woken = worker.wake_due().await.unwrap();
    assert_eq!(woken.resumed, 1, "{woken:?}");
    assert_eq!(status(&a, &id).await, RunStatus::Completed);
    assert_eq!(bodies.count("wait", "after"), 1);
}

#[tokio::test]
async fn a_restarted_worker_takes_over_a_crashed_workers_run_once_its_lease_expires() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let started = Arc::new(AtomicU64::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let stuck = {
        let (started, gate) = (started.clone(), gate.clone());
        Workflow::new("stuck", move |ctx: Context, (): ()| {
            let (started, gate) = (started.clone(), gate.clone());
            Box::pin(async move {
                ctx.step("work", move |_memo| {
                    let (started, gate) = (started.clone(), gate.clone());
                    async move {
                        // The first attempt hangs here until its process dies.
                        if started.fetch_add(1, Ordering::SeqCst) == 0 {
                            let _never = gate.acquire().await;
                        }
                        Ok::<_, Error>("done".to_string())
                    }
                })
                .await
            }) as BoxedRun
        })
    };
    // The crashed process ran the run itself (no worker, nothing submitted):
    // only the attempt's own entry says when its lease expires.
    let crashed = process(&objects, &clock);
    let id = run("stuck-1");
    let first = tokio::spawn({
        let (crashed, id, stuck) = (crashed.clone(), id.clone(), stuck.clone());
        async move { crashed.run(&id, &(), &stuck).await }
    });
    for _ in 0..1000 {
        if started.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        started.load(Ordering::SeqCst),
        1,
        "the first attempt started"
    );
    first.abort(); // the worker's process dies mid-step
    let _ = first.await;

    let restarted = process(&objects, &clock);
    let worker = Worker::builder(restarted.clone()).workflow(&stuck).build();
    let before = worker.wake_due().await.unwrap();
    assert_eq!(before.resumed, 0, "the lease is live: {before:?}");
    assert_eq!(started.load(Ordering::SeqCst), 1);

    clock.advance_ms(LEASE.as_millis() as u64);
    let after = worker.wake_due().await.unwrap();
    assert_eq!(after.resumed, 1, "{after:?}");
    assert_eq!(status(&restarted, &id).await, RunStatus::Completed);
    assert_eq!(started.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn two_workers_polling_together_drive_each_due_run_once() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let (a, b) = (process(&objects, &clock), process(&objects, &clock));
    let bodies = Arc::new(Bodies::default());
    let napper = napper(bodies.clone());
    let one = Worker::builder(a.clone()).workflow(&napper).build();
    let two = Worker::builder(b.clone()).workflow(&napper).build();
    let ids: Vec<_> = (0..12).map(|i| run(&format!("shared-{i}"))).collect();
    for id in &ids {
        one.submit(&napper, id, &3_600_000).await.unwrap();
    }
    let (x, y) = tokio::join!(one.wake_due(), two.wake_due());
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(x.failed.is_empty() && y.failed.is_empty(), "{x:?} {y:?}");
    clock.advance_ms(3_600_000);
    let (x, y) = tokio::join!(one.wake_due(), two.wake_due());
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(x.failed.is_empty() && y.failed.is_empty(), "{x:?} {y:?}");
    for id in &ids {
        assert_eq!(status(&a, id).await, RunStatus::Completed, "{id}");
        assert_eq!(bodies.count(id.as_str(), "after"), 1, "{id}");
    }
}

#[tokio::test]
async fn a_spawned_worker_starts_submitted_runs_and_wakes_timers() {
    let (_, clock, runtime, bodies) = one_process();
    let napper = napper(bodies.clone());
    let handle = Worker::builder(runtime.clone())
        .workflow(&napper)
        .poll_interval(Duration::from_millis(5))
        .spawn();
    let id = run("spawned");
    handle.worker().submit(&napper, &id, &DAY_MS).await.unwrap();
    let waits = async |status: RunStatus| {
        for _ in 0..2000 {
            if runtime.status(&id).await.unwrap().map(|r| r.status) == Some(status)
                && runtime
                    .due_runs(u64::MAX)
                    .try_collect::<Vec<_>>()
                    .await
                    .unwrap()
                    .len()
                    == 1
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    };
    assert!(
        waits(RunStatus::Running).await,
        "the run started and sleeps"
    );
    clock.advance_ms(DAY_MS);
    let mut done = false;
    for _ in 0..2000 {
        if status(&runtime, &id).await == RunStatus::Completed {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        done,
        "the spawned worker woke the run once its timer was due"
    );
    let report = handle.shutdown(Duration::from_secs(10)).await;
    assert!(report.resumed >= 2, "{report:?}");
    assert_eq!(bodies.count("spawned", "after"), 1);
}

#[tokio::test]
async fn shutdown_stops_attempts_at_a_step_boundary_and_another_worker_goes_on() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let bodies = Arc::new(Bodies::default());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let two_steps = gated(bodies.clone(), gate.clone());
    let stopping = process(&objects, &clock);
    let handle = Worker::builder(stopping.clone())
        .workflow(&two_steps)
        .poll_interval(Duration::from_millis(5))
        .spawn();
    let id = run("graceful");
    handle
        .worker()
        .submit(&two_steps, &id, &true)
        .await
        .unwrap();
    assert!(eventually(async || bodies.count("graceful", "first") > 0).await);
    assert_eq!(bodies.count("graceful", "first"), 1);
    let shutdown = tokio::spawn(handle.shutdown(Duration::from_secs(30)));
    tokio::time::sleep(Duration::from_millis(20)).await;
    gate.add_permits(100); // the step in flight finishes
    shutdown.await.unwrap();
    assert_eq!(
        bodies.count("graceful", "second"),
        0,
        "no step started after the shutdown"
    );
    let record = stopping.status(&id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Running);
    let lease = record.lease.expect("the attempt's lease");
    assert!(
        !lease.is_live_at(clock.now_ms()),
        "the lease was released: {lease:?}"
    );

    let other = process(&objects, &clock);
    let worker = Worker::builder(other.clone()).workflow(&two_steps).build();
    clock.advance_ms(LEASE.as_millis() as u64);
    let report = worker.wake_due().await.unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert_eq!(status(&other, &id).await, RunStatus::Completed);
    assert_eq!(bodies.count("graceful", "first"), 1);
    assert_eq!(bodies.count("graceful", "second"), 1);
}

#[tokio::test]
async fn timers_deadlines_and_cancellation_across_workers_in_memory_and_on_a_folder() {
    let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    memo_tests::cloud::time::timers_deadlines_and_cancellation_across_workers(|| {
        memo_runtime::store::StoreAndPrefix {
            store: memory.clone(),
            prefix: "p".into(),
            seal: Default::default(),
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    memo_tests::cloud::time::timers_deadlines_and_cancellation_across_workers(|| {
        memo_runtime::store::store_from_url(&url, Vec::<(String, String)>::new()).unwrap()
    })
    .await;
}

/// The cloud test files' worker checks (`memo_tests::cloud::workers`), in
/// memory and on a local folder.
#[tokio::test]
async fn worker_checks_in_memory_and_on_a_folder() {
    use memo_tests::cloud::workers;
    let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let in_memory = |prefix: &'static str| {
        let memory = memory.clone();
        move || memo_runtime::store::StoreAndPrefix {
            store: memory.clone(),
            prefix: prefix.into(),
            seal: Default::default(),
        }
    };
    workers::a_poll_reads_the_due_entries_not_the_hours_later_ones(in_memory("poll")).await;
    workers::workers_on_separate_clients_share_the_runs(in_memory("share")).await;
    let dir = tempfile::tempdir().unwrap();
    let folder = |prefix: &'static str| {
        let url = format!("file://{}/{prefix}", dir.path().display());
        move || memo_runtime::store::store_from_url(&url, [("fsync", "false")]).unwrap()
    };
    workers::a_poll_reads_the_due_entries_not_the_hours_later_ones(folder("poll")).await;
    workers::workers_on_separate_clients_share_the_runs(folder("share")).await;
}

#[tokio::test]
async fn a_spawned_worker_starts_a_submitted_run_while_a_slow_one_runs() {
    // A loop that waited for the whole of a poll's runs before polling
    // again left `quick` in its queue until `slow`'s step ended.
    let (_, _, runtime, bodies) = one_process();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated(bodies.clone(), gate.clone());
    let handle = Worker::builder(runtime.clone())
        .workflow(&gated)
        .concurrency(2)
        .poll_interval(Duration::from_secs(3600))
        .spawn();
    let (slow, quick) = (run("slow"), run("quick"));
    handle.worker().submit(&gated, &slow, &true).await.unwrap();
    assert!(eventually(async || bodies.count("slow", "first") == 1).await);
    handle
        .worker()
        .submit(&gated, &quick, &false)
        .await
        .unwrap();
    assert!(
        eventually(async || status(&runtime, &quick).await == RunStatus::Completed).await,
        "the submitted run ran beside the slow one"
    );
    assert_eq!(bodies.count("slow", "second"), 0, "slow still waits");
    gate.add_permits(1);
    assert!(eventually(async || status(&runtime, &slow).await == RunStatus::Completed).await);
    let report = handle.shutdown(Duration::from_secs(10)).await;
    assert_eq!((report.resumed, report.busy), (2, 0), "{report:?}");
}

#[tokio::test]
async fn a_spawned_worker_does_not_wake_a_run_it_drives_again() {
    // The run's entry is due now (submitted by a worker that does not
    // poll) and stays in the index while the run runs: each of the polls
    // meanwhile lists it. Woken again, the run was found held by the
    // worker's own attempt and its entry moved to the lease's expiry.
    let (objects, clock, runtime, bodies) = one_process();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated(bodies.clone(), gate.clone());
    let id = run("driven");
    submit_gated_elsewhere(&objects, &clock, &id, true).await;
    let polls = Arc::new(CountingStore::new(objects.clone()));
    let counted: Arc<dyn ObjectStore> = polls.clone();
    let handle = Worker::builder(process(&counted, &clock))
        .workflow(&gated)
        .poll_interval(Duration::from_millis(1))
        .spawn();
    assert!(eventually(async || bodies.count("driven", "first") == 1).await);
    let listings = polls.counts().lists_with_offset;
    assert!(
        eventually(async || polls.counts().lists_with_offset >= listings + 5).await,
        "the worker polled while the run ran"
    );
    gate.add_permits(1);
    assert!(eventually(async || status(&runtime, &id).await == RunStatus::Completed).await);
    let report = handle.shutdown(Duration::from_secs(10)).await;
    assert_eq!((report.resumed, report.busy), (1, 0), "{report:?}");
    assert_eq!(bodies.count("driven", "first"), 1);
    let left: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(left.is_empty(), "the woken entry was deleted: {left:?}");
}

#[tokio::test]
async fn a_run_taken_but_not_started_at_shutdown_is_another_workers_to_wake() {
    // One place: `a-slow` holds it, `b-queued` (taken by the same listing)
    // waits in the loop's queue when the worker stops.
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let bodies = Arc::new(Bodies::default());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated(bodies.clone(), gate.clone());
    let (slow, queued) = (run("a-slow"), run("b-queued"));
    submit_gated_elsewhere(&objects, &clock, &slow, true).await;
    submit_gated_elsewhere(&objects, &clock, &queued, false).await;
    let stopping = process(&objects, &clock);
    let handle = Worker::builder(stopping.clone())
        .workflow(&gated)
        .concurrency(1)
        .poll_interval(Duration::from_secs(3600))
        .spawn();
    assert!(eventually(async || bodies.count("a-slow", "first") == 1).await);
    let shutdown = tokio::spawn(handle.shutdown(Duration::from_secs(30)));
    tokio::time::sleep(Duration::from_millis(20)).await;
    gate.add_permits(1);
    let report = shutdown.await.unwrap();
    assert_eq!(report.entries, 2, "one listing took both: {report:?}");
    assert_eq!(bodies.count("b-queued", "first"), 0, "never started");
    assert_eq!(status(&stopping, &queued).await, RunStatus::Pending);

    let other = process(&objects, &clock);
    let worker = Worker::builder(other.clone()).workflow(&gated).build();
    let report = worker.wake_due().await.unwrap();
    assert_eq!(report.resumed, 1, "the queued run, due now: {report:?}");
    assert_eq!(status(&other, &queued).await, RunStatus::Completed);
    clock.advance_ms(LEASE.as_millis() as u64);
    worker.wake_due().await.unwrap();
    assert_eq!(status(&other, &slow).await, RunStatus::Completed);
    assert_eq!(bodies.count("a-slow", "first"), 1);
    assert_eq!(bodies.count("b-queued", "first"), 1);
}

#[tokio::test]
async fn a_signal_sent_through_a_spawned_workers_runtime_is_found_without_waiting_for_a_poll() {
    // Its wake-up is due now, and the worker lists the index at once; a
    // signal from another process is found by the next poll, an hour on.
    let (objects, clock, runtime, bodies) = one_process();
    let waiter = waiter(bodies.clone());
    let handle = Worker::builder(runtime.clone())
        .workflow(&waiter)
        .poll_interval(Duration::from_secs(3600))
        .spawn();
    let here = run("signalled-here");
    handle.worker().submit(&waiter, &here, &()).await.unwrap();
    let waits = async |id: &RunId| {
        let suspended = runtime.due_runs(u64::MAX).try_collect::<Vec<_>>().await;
        status(&runtime, id).await == RunStatus::Running
            && suspended.unwrap().iter().all(|d| d.run_id != *id)
    };
    assert!(eventually(async || waits(&here).await).await, "suspended");
    runtime.signal(&here, "go", "now").await.unwrap();
    assert!(
        eventually(async || status(&runtime, &here).await == RunStatus::Completed).await,
        "woken without waiting for the next poll"
    );

    let there = run("signalled-there");
    handle.worker().submit(&waiter, &there, &()).await.unwrap();
    assert!(eventually(async || waits(&there).await).await, "suspended");
    process(&objects, &clock)
        .signal(&there, "go", "now")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(status(&runtime, &there).await, RunStatus::Running);
    let report = handle.shutdown(Duration::from_secs(10)).await;
    assert_eq!((report.resumed, report.busy), (3, 0), "{report:?}");
    assert_eq!(bodies.count("signalled-here", "after"), 1);
}

#[tokio::test]
async fn a_spawned_worker_with_the_longest_intervals_starts_submitted_runs_and_stops() {
    let (_, _, runtime, bodies) = one_process();
    let gated = gated(bodies.clone(), Arc::new(tokio::sync::Semaphore::new(0)));
    let handle = Worker::builder(runtime.clone())
        .workflow(&gated)
        .poll_interval(Duration::MAX)
        .sweep_interval(Some(Duration::MAX))
        .spawn();
    for id in ["first", "second"] {
        handle
            .worker()
            .submit(&gated, &run(id), &false)
            .await
            .unwrap();
        assert!(
            eventually(async || status(&runtime, &run(id)).await == RunStatus::Completed).await,
            "{id} ran"
        );
    }
    // Within the deadline: neither the loop nor its sweeper waits out its
    // interval.
    let stopping = std::time::Instant::now();
    let report = handle.shutdown(Duration::from_secs(10)).await;
    assert!(stopping.elapsed() < Duration::from_secs(10));
    assert_eq!(report.resumed, 2, "{report:?}");
}

#[tokio::test]
async fn two_polls_of_one_worker_do_not_wake_one_run_together() {
    // The second poll lists the run's entry (due now, submitted by a
    // worker that does not poll) while the first is waking the run: it
    // skips it. Woken by both, it was found held by the worker's own
    // attempt and its entry moved to the lease's expiry.
    let (objects, clock, runtime, bodies) = one_process();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated(bodies.clone(), gate.clone());
    let id = run("polled-twice");
    submit_gated_elsewhere(&objects, &clock, &id, true).await;
    let worker = Worker::builder(runtime.clone()).workflow(&gated).build();
    let first = tokio::spawn({
        let worker = worker.clone();
        async move { worker.wake_due().await.unwrap() }
    });
    assert!(eventually(async || bodies.count("polled-twice", "first") == 1).await);
    let second = worker.wake_due().await.unwrap();
    assert_eq!(
        (second.entries, second.resumed, second.busy),
        (1, 0, 0),
        "{second:?}"
    );
    gate.add_permits(1);
    let first = first.await.unwrap();
    assert_eq!((first.resumed, first.busy), (1, 0), "{first:?}");
    assert_eq!(status(&runtime, &id).await, RunStatus::Completed);
    let left: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn what_made_a_run_due_while_the_loop_woke_it_is_taken_once_that_ends() {
    // Another process submits a run again (a redelivery) while the loop
    // wakes it, in its first step: its entry is due now. A signal sent
    // through the worker's runtime to another run, suspended, prompts a
    // listing, which takes that run and skips the first (the loop is
    // waking it); the loop lists again once the waking ended, an hour
    // before its next poll: the redelivery's entry, stale by then, is
    // deleted. (The first run's own signal made it due so before session
    // 48; a signal that finds a run's lease held makes it due no sooner
    // than the lease's expiry now.)
    let (objects, clock, runtime, bodies) = one_process();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated(bodies.clone(), gate.clone());
    let waiter = waiter(bodies.clone());
    let handle = Worker::builder(runtime.clone())
        .workflow(&gated)
        .workflow(&waiter)
        .poll_interval(Duration::from_secs(3600))
        .spawn();
    let waiting = run("waits-for-go");
    handle
        .worker()
        .submit(&waiter, &waiting, &())
        .await
        .unwrap();
    let suspended = async || {
        let due = runtime.due_runs(u64::MAX).try_collect::<Vec<_>>().await;
        status(&runtime, &waiting).await == RunStatus::Running
            && due.unwrap().iter().all(|d| d.run_id != waiting)
    };
    assert!(eventually(suspended).await, "suspended");

    let id = run("due-while-woken");
    handle.worker().submit(&gated, &id, &true).await.unwrap();
    assert!(eventually(async || bodies.count("due-while-woken", "first") == 1).await);
    submit_gated_elsewhere(&objects, &clock, &id, true).await;
    let due: Vec<_> = runtime.due_runs(DAY_MS).try_collect().await.unwrap();
    assert!(
        due.iter().any(|d| d.run_id == id),
        "the redelivery's entry: {due:?}"
    );
    runtime.signal(&waiting, "go", "now").await.unwrap();
    assert!(
        eventually(async || status(&runtime, &waiting).await == RunStatus::Completed).await,
        "the signalled run, found by the listing the signal prompted"
    );
    assert_eq!(status(&runtime, &id).await, RunStatus::Running);
    gate.add_permits(1);
    assert!(
        eventually(async || {
            status(&runtime, &id).await == RunStatus::Completed
                && runtime
                    .due_runs(u64::MAX)
                    .try_collect::<Vec<_>>()
                    .await
                    .unwrap()
                    .is_empty()
        })
        .await,
        "the redelivery's entry was taken without waiting for the next poll"
    );
    let report = handle.shutdown(Duration::from_secs(10)).await;
    assert_eq!((report.resumed, report.busy), (3, 0), "{report:?}");
}

#[tokio::test]
async fn an_attempt_still_running_at_the_shutdown_deadline_is_dropped_and_taken_over() {
    // Its run is woken in a task of the loop's own: the task goes with the
    // loop, as if the process had died, and another worker takes the run
    // over once its lease expired.
    let (objects, clock, runtime, bodies) = one_process();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let gated = gated(bodies.clone(), gate.clone());
    let handle = Worker::builder(runtime.clone())
        .workflow(&gated)
        .poll_interval(Duration::from_secs(3600))
        .spawn();
    let id = run("stuck");
    handle.worker().submit(&gated, &id, &true).await.unwrap();
    assert!(eventually(async || bodies.count("stuck", "first") == 1).await);
    let report = handle.shutdown(Duration::from_millis(50)).await;
    assert_eq!(report.resumed, 0, "{report:?}");
    gate.add_permits(100);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        bodies.count("stuck", "second"),
        0,
        "the dropped attempt went no further"
    );
    let record = runtime.status(&id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Running);
    assert!(record.lease.expect("its lease").is_live_at(clock.now_ms()));

    let other = process(&objects, &clock);
    let worker = Worker::builder(other.clone()).workflow(&gated).build();
    clock.advance_ms(LEASE.as_millis() as u64);
    assert_eq!(worker.wake_due().await.unwrap().resumed, 1);
    assert_eq!(status(&other, &id).await, RunStatus::Completed);
    assert_eq!(bodies.count("stuck", "second"), 1);
}

/// `waiter` changed without a patch: a step `before` where runs of
/// `waiter` recorded their wait for `go`.
fn changed_waiter() -> Workflow<impl Fn(Context, ()) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("waiter", |ctx: Context, (): ()| {
        Box::pin(async move {
            ctx.step("before", |_memo| async { Ok::<_, Error>(()) })
                .await?;
            ctx.wait_for_signal::<String>("go").await
        }) as BoxedRun
    })
}

#[tokio::test]
async fn a_poll_reports_a_run_whose_attempt_stopped_on_a_runtime_error_and_tries_it_again() {
    // A run suspended on the code that waits for `go` and then runs
    // `after`, woken by a worker whose code calls `before` first (a deploy
    // without a patch, or a worker still on other code in a rolling one):
    // its attempt stops on the non-determinism. The poll says so in
    // `stopped` (as `Aborted`, with the reason and the kind of the error
    // that stopped it, `CodeChanged`; counted as resumed, as before),
    // where it said nothing; the run stays open, and
    // a worker on the right code ends it once that attempt's lease would
    // have expired.
    let (objects, clock, runtime, bodies) = one_process();
    let waiter = waiter(bodies.clone());
    let other = changed_waiter();
    let id = run("changed");
    let first = runtime.run(&id, &(), &waiter).await;
    assert!(matches!(first, Err(Error::Suspended { .. })), "{first:?}");
    runtime.signal(&id, "go", "now").await.unwrap();

    let wrong = Worker::builder(runtime.clone()).workflow(&other).build();
    let report = wrong.wake_due().await.unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert!(
        matches!(&report.stopped[..], [(run_id, Error::Aborted { reason, cause: Some(ErrorKind::CodeChanged), .. })]
            if *run_id == id && reason.starts_with("non-determinism in run changed at step 0")),
        "{report:?}"
    );
    assert_eq!(status(&runtime, &id).await, RunStatus::Running);

    clock.advance_ms(u64::try_from(LEASE.as_millis()).unwrap() + 1);
    let right = Worker::builder(process(&objects, &clock))
        .workflow(&waiter)
        .build();
    let report = right.wake_due().await.unwrap();
    assert_eq!((report.resumed, report.stopped.len()), (1, 0), "{report:?}");
    assert_eq!(status(&runtime, &id).await, RunStatus::Completed);
    assert_eq!(bodies.count("changed", "after"), 1);
}

#[tokio::test]
async fn a_recovery_reports_the_runtime_error_that_stopped_a_runs_attempt() {
    // `Worker::recover` says `Ok(())` for a run whose attempt ran, and the
    // runtime's error for one it stopped: a non-determinism met inside
    // the workflow is such an error (as `Aborted`, with its reason and
    // kind), not an attempt that ran.
    let (_, _, runtime, bodies) = one_process();
    let waiter = waiter(bodies.clone());
    let other = changed_waiter();
    let (id, waiting) = (run("changed"), run("waiting"));
    for run_id in [&id, &waiting] {
        let first = runtime.run(run_id, &(), &waiter).await;
        assert!(matches!(first, Err(Error::Suspended { .. })), "{first:?}");
    }
    runtime.signal(&id, "go", "now").await.unwrap();

    let recovery = Worker::builder(runtime.clone())
        .workflow(&other)
        .build()
        .recover()
        .await
        .unwrap();
    let result = |run_id: &RunId| {
        let found = recovery.resumed.iter().find(|(r, _)| r == run_id);
        found.map(|(_, result)| result)
    };
    assert!(
        matches!(result(&id), Some(Err(Error::Aborted { reason, cause: Some(ErrorKind::CodeChanged), .. })) if reason.contains("non-determinism")),
        "{recovery:?}"
    );
    // Still waiting for its signal: no attempt, as before.
    assert!(
        matches!(result(&waiting), Some(Err(Error::Suspended { .. }))),
        "{recovery:?}"
    );
    assert_eq!(status(&runtime, &id).await, RunStatus::Running);
}

#[tokio::test]
async fn a_poll_reports_a_run_whose_workflow_panicked() {
    // A panic inside user code stops the attempt (the run stays open): the
    // poll lists the run in `stopped`, with the panic's message (and no
    // kind: no runtime error stopped it).
    let (_, _, runtime, _) = one_process();
    let panics = Workflow::new("panics", |ctx: Context, (): ()| {
        Box::pin(async move {
            ctx.step("boom", |_memo| async {
                panic!("the body panicked");
                #[allow(unreachable_code)]
                Ok::<_, Error>(())
            })
            .await?;
            Ok("never".to_string())
        }) as BoxedRun
    });
    let worker = Worker::builder(runtime.clone()).workflow(&panics).build();
    let id = run("panicking");
    worker.submit(&panics, &id, &()).await.unwrap();

    let report = worker.wake_due().await.unwrap();

    assert_eq!(report.resumed, 1, "{report:?}");
    assert!(
        matches!(&report.stopped[..], [(run_id, Error::Aborted { reason, cause: None, .. })]
            if *run_id == id && reason.contains("the body panicked")),
        "{report:?}"
    );
    assert_eq!(status(&runtime, &id).await, RunStatus::Running);
}
