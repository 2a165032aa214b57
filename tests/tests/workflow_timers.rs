//! Durable timers (issue 23, item 1): `ctx.sleep` records its wake time in
//! the run when first reached, so that a replay, a clock jump or another
//! worker (with its own clock) sees the same deadline; a sleep longer than
//! the runtime's timer wait suspends the attempt, and the run continues after
//! the deadline on whichever worker runs it. Workers are separate processes:
//! runtimes over separate store instances on one object store, each with its
//! own `ManualClock`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Error, MemoStore, RunId,
    clock::{Clock, ManualClock},
    runtime_store::ObjectStoreRuntimeStore,
};

const DAY_MS: u64 = 24 * 3600 * 1000;

fn worker(
    objects: &Arc<dyn ObjectStore>,
    clock: &Arc<ManualClock>,
    timer_wait: Duration,
) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .timer_wait(timer_wait)
        .signal_poll_interval(Duration::from_millis(1))
        .build()
        .unwrap()
}

/// How often each step body ran.
#[derive(Default)]
struct Bodies {
    before: AtomicU64,
    after: AtomicU64,
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// Runs a step, sleeps for `input` ms (`u64::MAX`: `Duration::MAX`), runs
/// another step.
fn napper(
    bodies: Arc<Bodies>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("napper", move |ctx: Context, ms: u64| {
        let bodies = bodies.clone();
        Box::pin(async move {
            ctx.step("before", |_memo| {
                bodies.before.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Error>(()) }
            })
            .await?;
            let nap = if ms == u64::MAX {
                Duration::MAX
            } else {
                Duration::from_millis(ms)
            };
            ctx.sleep(nap).await?;
            ctx.step("after", |_memo| {
                bodies.after.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Error>("woke".to_string()) }
            })
            .await
        }) as BoxedRun
    })
}

fn until_ms(outcome: Result<String, Error>) -> u64 {
    match outcome {
        Err(Error::Suspended {
            until_ms: Some(at),
            signal,
            ..
        }) if signal.is_empty() => at,
        other => panic!("expected the run to sleep, got {other:?}"),
    }
}

/// The wake time is recorded when the sleep is first reached, as the step
/// `memo.sleep` whose output is the wake time (MessagePack `u64`); a second
/// worker whose clock is ahead, and the first one after its clock jumped,
/// both wait for the recorded time, not their own now + 10 s.
#[tokio::test]
async fn a_sleep_keeps_its_recorded_wake_time_across_workers_and_clock_jumps() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (clock_a, clock_b) = (
        Arc::new(ManualClock::new(DAY_MS)),
        Arc::new(ManualClock::new(DAY_MS + 5_000)),
    );
    let a = worker(&objects, &clock_a, Duration::ZERO);
    let b = worker(&objects, &clock_b, Duration::ZERO);
    let bodies = Arc::new(Bodies::default());
    let flow = napper(bodies.clone());
    let run = RunId::new("nap-1").unwrap();

    let wake = DAY_MS + 10_000;
    assert_eq!(until_ms(a.run(&run, &10_000, &flow).await), wake);
    // The record: step 1 is the timer, its output the wake time.
    let receipts = a.runtime_store().load_receipts(&run, None).await.unwrap();
    assert_eq!(receipts[1].step, "memo.sleep");
    assert_eq!(
        rmp_serde::from_slice::<u64>(&receipts[1].output).unwrap(),
        wake
    );
    assert_eq!(
        receipts[1].output.as_ref(),
        rmp_serde::to_vec(&wake).unwrap().as_slice()
    );

    // Another worker, whose clock reads 5 s later.
    assert_eq!(until_ms(b.run(&run, &10_000, &flow).await), wake);
    // The first worker's clock jumps to a millisecond before the wake time.
    clock_a.set_ms(wake - 1);
    assert_eq!(until_ms(a.run(&run, &10_000, &flow).await), wake);
    assert_eq!(bodies.before.load(Ordering::SeqCst), 1);
    assert_eq!(bodies.after.load(Ordering::SeqCst), 0);

    // Worker b's clock reaches the recorded time: it continues the run.
    clock_b.set_ms(wake);
    assert_eq!(b.run(&run, &10_000, &flow).await.unwrap(), "woke");
    assert_eq!(bodies.before.load(Ordering::SeqCst), 1);
    assert_eq!(bodies.after.load(Ordering::SeqCst), 1);
    let record = a.status(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed);
}

/// A sleeper resumed a millisecond before its wake time suspends again and
/// runs no step body; resumed at it, it continues.
#[tokio::test]
async fn a_sleeper_never_wakes_before_its_wake_time() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(5_000));
    let rt = worker(&objects, &clock, Duration::ZERO);
    let bodies = Arc::new(Bodies::default());
    let flow = napper(bodies.clone());
    let run = RunId::new("nap-2").unwrap();

    assert_eq!(until_ms(rt.run(&run, &60_000, &flow).await), 65_000);
    for now in [5_001, 30_000, 64_999] {
        clock.set_ms(now);
        assert_eq!(
            until_ms(rt.run(&run, &60_000, &flow).await),
            65_000,
            "at {now}"
        );
    }
    assert_eq!(bodies.before.load(Ordering::SeqCst), 1);
    assert_eq!(bodies.after.load(Ordering::SeqCst), 0);
    let record = rt.status(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Running);
    assert!(
        record
            .lease
            .as_ref()
            .is_none_or(|l| l.until_ms <= clock.now_ms()),
        "a suspended sleeper holds no lease: {record:?}"
    );

    clock.set_ms(65_000);
    assert_eq!(rt.run(&run, &60_000, &flow).await.unwrap(), "woke");
    assert_eq!(bodies.after.load(Ordering::SeqCst), 1);
}

/// A sleep within the runtime's timer wait is awaited in process: the one
/// attempt continues once the runtime's clock reaches the wake time.
#[tokio::test]
async fn a_short_sleep_waits_in_process_for_the_runtime_clock() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(5_000));
    let rt = worker(&objects, &clock, Duration::from_secs(60));
    let bodies = Arc::new(Bodies::default());
    let flow = napper(bodies.clone());
    let run = RunId::new("nap-3").unwrap();

    let running = tokio::spawn({
        let (rt, run, flow) = (rt.clone(), run.clone(), flow.clone());
        async move { rt.run(&run, &30_000, &flow).await }
    });
    // Wait until the timer is recorded, then move the clock past it.
    loop {
        let receipts = rt.runtime_store().load_receipts(&run, None).await.unwrap();
        if receipts.len() == 2 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(bodies.after.load(Ordering::SeqCst), 0);
    clock.set_ms(35_000);
    assert_eq!(running.await.unwrap().unwrap(), "woke");
    let record = rt.status(&run).await.unwrap().unwrap();
    assert_eq!(record.attempts, 1, "the sleep did not suspend the attempt");
}

/// A sleep of a year wakes a year later; a sleep of `Duration::MAX` waits
/// until the end of the clock's range rather than wrapping to the past.
#[tokio::test]
async fn a_year_long_sleep_and_an_endless_one_saturate() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let rt = worker(&objects, &clock, Duration::ZERO);
    let bodies = Arc::new(Bodies::default());
    let flow = napper(bodies.clone());

    let year = RunId::new("nap-year").unwrap();
    let year_ms = 365 * DAY_MS;
    assert_eq!(
        until_ms(rt.run(&year, &year_ms, &flow).await),
        1_000 + year_ms
    );
    clock.advance_ms(year_ms - 1);
    assert_eq!(
        until_ms(rt.run(&year, &year_ms, &flow).await),
        1_000 + year_ms
    );
    clock.advance_ms(1);
    assert_eq!(rt.run(&year, &year_ms, &flow).await.unwrap(), "woke");

    let endless = RunId::new("nap-endless").unwrap();
    assert_eq!(until_ms(rt.run(&endless, &u64::MAX, &flow).await), u64::MAX);
    clock.set_ms(u64::MAX - 1);
    assert_eq!(until_ms(rt.run(&endless, &u64::MAX, &flow).await), u64::MAX);
    clock.set_ms(u64::MAX);
    assert_eq!(rt.run(&endless, &u64::MAX, &flow).await.unwrap(), "woke");
}
