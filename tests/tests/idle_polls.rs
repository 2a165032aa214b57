//! A spawned worker's idle polls (`WorkerBuilder::idle_poll_interval`): an
//! idle worker lists the due-run index less and less often, up to the
//! maximum, never past an entry its last listing saw due later, and as
//! often as before once it has work again. Run on Tokio's paused clock
//! (with the runtime's clock following it), so an hour passes at once.

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::clock::Clock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunStatus};
use memo_runtime::testing::CountingStore;
use memo_runtime::workflow::{Context, Runtime, Worker, WorkerHandle, Workflow};
use memo_runtime::{Error, MemoStore, RunId};
use tokio::time::Instant;

const SECOND: Duration = Duration::from_secs(1);

/// The runtime's clock on Tokio's: paused in these tests, it moves as
/// Tokio's timers fire.
#[derive(Debug)]
struct TokioClock(Instant);

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        // A day after the epoch, in an hour of its own.
        let elapsed = u64::try_from(self.0.elapsed().as_millis()).unwrap();
        24 * 3600 * 1000 + elapsed
    }
}

/// A process on `objects`, its requests counted.
fn process(objects: &Arc<dyn ObjectStore>) -> (Arc<CountingStore<Arc<dyn ObjectStore>>>, Runtime) {
    let counting = Arc::new(CountingStore::new(objects.clone()));
    let counted: Arc<dyn ObjectStore> = counting.clone();
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(counted.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(counted, "runs")))
        .clock(Arc::new(TokioClock(Instant::now())))
        .timer_wait(Duration::ZERO)
        .build()
        .unwrap();
    (counting, runtime)
}

type BoxedRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// Sleeps the input's seconds, then ends with them.
fn napper() -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync> {
    Workflow::new("napper", |ctx: Context, secs: u64| {
        Box::pin(async move {
            ctx.sleep(Duration::from_secs(secs)).await?;
            Ok::<_, Error>(secs)
        }) as BoxedRun
    })
}

/// A spawned worker of the napper over `runtime`, polling every second,
/// idle up to `idle` if given, and sweeping nothing (its listings are the
/// polls').
fn spawn(runtime: &Runtime, idle: Option<Duration>) -> WorkerHandle {
    let builder = Worker::builder(runtime.clone())
        .workflow(&napper())
        .poll_interval(SECOND)
        .sweep_interval(None);
    match idle {
        Some(max) => builder.idle_poll_interval(max).spawn(),
        None => builder.spawn(),
    }
}

async fn status(runtime: &Runtime, id: &str) -> Option<RunStatus> {
    let run = RunId::new(id).unwrap();
    runtime.status(&run).await.unwrap().map(|r| r.status)
}

/// An idle worker lists every poll interval by default (with up to a
/// quarter of it in jitter: 2,880 to 3,600 listings an hour, one request
/// each); one that may back off to 32 s lists about once every 32 s once
/// its doublings reach it. Both find a run made due by another process
/// afterwards, the backed-off one within its maximum.
#[tokio::test(start_paused = true)]
async fn an_idle_worker_lists_less_often_up_to_its_maximum() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (every, every_runtime) = process(&objects);
    let (idling, idling_runtime) = process(&objects);
    let every_worker = spawn(&every_runtime, None);
    let idling_worker = spawn(&idling_runtime, Some(32 * SECOND));
    tokio::time::sleep(3600 * SECOND).await;
    let (every_lists, idling_lists) = (
        every.counts().lists_with_offset,
        idling.counts().lists_with_offset,
    );
    // The first listing at once, then one a poll interval and jitter.
    assert!(
        (2_881..=3_601).contains(&every_lists),
        "{every_lists} listings an hour at every poll interval"
    );
    // 2, 4, 8 and 16 s, then 32 s, each with up to a quarter in jitter:
    // the first five and at most 3570 / 32 more, at least 3563 / 40.
    assert!(
        (94..=116).contains(&idling_lists),
        "{idling_lists} listings an hour backing off to 32 s"
    );
    every_worker.shutdown(SECOND).await;

    // Another process makes a run due now: a run it submits to a worker
    // it does not spawn.
    let (_, operator) = process(&objects);
    let submitter = Worker::builder(operator.clone())
        .workflow(&napper())
        .build();
    submitter
        .submit(&napper(), &RunId::new("nap").unwrap(), &0)
        .await
        .unwrap();
    let submitted = Instant::now();
    while status(&operator, "nap").await != Some(RunStatus::Completed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        submitted.elapsed() <= Duration::from_millis(40_000 + 100),
        "found {:?} after its submit",
        submitted.elapsed()
    );
    idling_worker.shutdown(SECOND).await;
}

/// A timer the idle worker's listing saw fires on time: the wait never
/// runs past it, however far the backing off had gone (the worker would
/// list about 1,000 s in, then 2,000 s, with an hour for maximum). Then
/// the worker has had work, so it lists a poll interval later again.
#[tokio::test(start_paused = true)]
async fn a_timer_an_idle_worker_listed_fires_on_time() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (_, operator) = process(&objects);
    let run = RunId::new("nap").unwrap();
    let outcome = operator.run(&run, &600, &napper()).await;
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );
    let (counting, runtime) = process(&objects);
    let worker = spawn(&runtime, Some(3600 * SECOND));
    tokio::time::sleep(599 * SECOND).await;
    assert_eq!(status(&operator, "nap").await, Some(RunStatus::Running));
    // Listed at 0, 2, 6, 14, 30, 62, 126 and 254 s, and 510 s unless the
    // jitter (up to a quarter of each wait) took that past the timer; the
    // next waits for the timer, not 512 s.
    let idle_lists = counting.counts().lists_with_offset;
    assert!((8..=9).contains(&idle_lists), "{idle_lists} listings");
    tokio::time::sleep(2 * SECOND).await;
    assert_eq!(status(&operator, "nap").await, Some(RunStatus::Completed));
    // The run's waking ended: the next listing within a poll interval and
    // its jitter.
    let woken_lists = counting.counts().lists_with_offset;
    tokio::time::sleep(Duration::from_millis(1_250)).await;
    assert!(
        counting.counts().lists_with_offset > woken_lists,
        "no listing a poll interval after the run's waking"
    );
    worker.shutdown(SECOND).await;
}

/// With the longest maximum there is, an idle worker still starts a run
/// submitted to it at once, and lists at once for a signal sent through
/// its runtime: neither waits for a listing. And the submitted run's
/// waking ends its idling: the timer the run then waits for is listed a
/// poll interval later and fires on time, where the backed-off wait would
/// have been a year.
#[tokio::test(start_paused = true)]
async fn a_worker_idle_up_to_duration_max_starts_its_own_work_at_once() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (_, runtime) = process(&objects);
    let handle = spawn(&runtime, Some(Duration::MAX));
    tokio::time::sleep(24 * 3600 * SECOND).await;

    let started = Instant::now();
    handle
        .worker()
        .submit(&napper(), &RunId::new("naps").unwrap(), &5)
        .await
        .unwrap();
    while status(&runtime, "naps").await != Some(RunStatus::Running) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(started.elapsed() < SECOND, "{:?}", started.elapsed());
    while status(&runtime, "naps").await != Some(RunStatus::Completed) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let slept = started.elapsed();
    assert!(
        (5 * SECOND..=Duration::from_millis(5_500)).contains(&slept),
        "{slept:?} for a timer of 5 s"
    );

    // A run waiting for a signal, suspended by another process.
    let (_, operator) = process(&objects);
    let waits = Workflow::new("waits", |ctx: Context, (): ()| async move {
        ctx.wait_for_signal::<u64>("go").await
    });
    let handle = {
        handle.shutdown(SECOND).await;
        Worker::builder(runtime.clone())
            .workflow(&waits)
            .poll_interval(SECOND)
            .idle_poll_interval(Duration::MAX)
            .sweep_interval(None)
            .spawn()
    };
    let run = RunId::new("waits").unwrap();
    let outcome = operator.run(&run, &(), &waits).await;
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );
    tokio::time::sleep(24 * 3600 * SECOND).await;
    let signalled = Instant::now();
    runtime.signal(&run, "go", &7u64).await.unwrap();
    while status(&runtime, "waits").await != Some(RunStatus::Completed) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(signalled.elapsed() < SECOND, "{:?}", signalled.elapsed());
    handle.shutdown(SECOND).await;
}
