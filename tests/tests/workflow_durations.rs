//! Durations at their limits (issue 20, item 5): every `Duration` the
//! workflow runtime's builders take is honoured at `Duration::ZERO` and at
//! `Duration::MAX` (saturating wherever it is added to a time), or refused
//! by `build()` with an error naming the setting; nothing panics or wraps.
//!
//! Waits run on Tokio's paused clock, which jumps to the next timer when
//! every task is idle: a wait of years takes no time, and what a test
//! asserts about time is exact.

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::RuntimeStore;
use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{
    Context, MIN_SIGNAL_POLL_INTERVAL, RetryPolicy, Runtime, RuntimeBuilder, Workflow,
};
use memo_runtime::{
    Error, MemoStore, RunId,
    clock::{Clock, ManualClock},
    runtime_store::ObjectStoreRuntimeStore,
};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A runtime builder over fresh store instances on `objects`: what another
/// process would build.
fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> RuntimeBuilder {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
}

fn approval()
-> Workflow<impl Fn(Context, u64) -> futures::future::BoxFuture<'static, Result<bool, Error>>> {
    Workflow::new("approval", |ctx: Context, _: u64| {
        Box::pin(async move { ctx.wait_for_signal::<bool>("approve").await })
            as futures::future::BoxFuture<'static, _>
    })
}

/// `signal_wait(Duration::MAX)` means "wait as long as it takes": the run
/// waits in-process for ten days and takes the signal another process
/// sends then.
#[tokio::test(start_paused = true)]
async fn a_signal_wait_of_duration_max_waits_until_the_signal_comes() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000_000));
    let worker = process(&objects, &clock)
        .signal_wait(Duration::MAX)
        .signal_poll_interval(Duration::from_secs(60 * 60))
        .lease(DAY)
        .build()
        .unwrap();
    let run = RunId::new("waits-forever").unwrap();
    let waiting = tokio::spawn({
        let run = run.clone();
        async move { worker.run(&run, &1, &approval()).await }
    });

    tokio::time::sleep(10 * DAY).await;
    assert!(!waiting.is_finished(), "the run stopped waiting");
    let operator = process(&objects, &clock).build().unwrap();
    operator.signal(&run, "approve", &true).await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
}

/// A run suspends when its signal wait is up, not a poll interval after
/// it: a poll interval of `Duration::MAX` does not stretch a wait of a
/// second.
#[tokio::test(start_paused = true)]
async fn a_signal_wait_ends_on_time_whatever_the_poll_interval() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000_000));
    let worker = process(&objects, &clock)
        .signal_wait(Duration::from_secs(1))
        .signal_poll_interval(Duration::MAX)
        // Renewed less often than the longest timer, so that the paused
        // clock jumps straight to the wait's next timer.
        .lease(100 * 365 * DAY)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    match worker
        .run(&RunId::new("waits").unwrap(), &1, &approval())
        .await
    {
        Err(Error::Suspended { signal, .. }) => assert_eq!(signal, "approve"),
        other => panic!("expected the run to suspend, got {other:?}"),
    }
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

/// A signal wait of zero (the default) suspends at once.
#[tokio::test(start_paused = true)]
async fn a_signal_wait_of_zero_suspends_at_once() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000_000));
    let worker = process(&objects, &clock)
        .signal_wait(Duration::ZERO)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let outcome = worker
        .run(&RunId::new("no-wait").unwrap(), &1, &approval())
        .await;
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
}

/// A poll interval below the minimum would poll the store without pause:
/// `build()` refuses it and names the setting; the minimum itself and
/// `Duration::MAX` are accepted.
#[test]
fn a_signal_poll_interval_below_the_minimum_is_refused_by_build() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(0));
    for interval in [Duration::ZERO, Duration::from_micros(999)] {
        match process(&objects, &clock)
            .signal_poll_interval(interval)
            .build()
        {
            Err(e @ Error::InvalidConfig { .. }) => {
                assert!(e.to_string().contains("signal_poll_interval"), "{e}")
            }
            other => panic!("{interval:?} was accepted: {other:?}"),
        }
    }
    for interval in [MIN_SIGNAL_POLL_INTERVAL, Duration::MAX] {
        process(&objects, &clock)
            .signal_poll_interval(interval)
            .build()
            .unwrap();
    }
}

/// A workflow whose one step returns the run's lease expiry as `store`
/// reads it while the step runs.
fn lease_probe(
    store: Arc<dyn RuntimeStore>,
) -> Workflow<impl Fn(Context, u64) -> futures::future::BoxFuture<'static, Result<u64, Error>>> {
    Workflow::new("lease-probe", move |ctx: Context, _: u64| {
        let store = store.clone();
        Box::pin(async move {
            ctx.step("read-lease", |_memo| {
                let (store, run) = (store.clone(), ctx.run_id().clone());
                async move {
                    let record = store.load_run(&run).await?.expect("the run exists");
                    Ok::<_, Error>(record.lease.expect("a running run is leased").until_ms)
                }
            })
            .await
        }) as futures::future::BoxFuture<'static, _>
    })
}

/// `lease(Duration::MAX)` saturates at the last millisecond: the run runs
/// under a lease that never expires (it does not panic, nor wrap into a
/// lease already expired); `lease(Duration::ZERO)` counts as the 3 ms
/// minimum.
#[tokio::test]
async fn a_lease_at_its_limits_is_saturated_or_raised_to_the_minimum() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let now = 1_000_000;
    for (lease, until_ms) in [
        (Duration::MAX, u64::MAX),
        (Duration::ZERO, now + 3),
        (Duration::from_millis(u64::MAX), u64::MAX),
    ] {
        let clock = Arc::new(ManualClock::new(now));
        let worker = process(&objects, &clock).lease(lease).build().unwrap();
        let observer: Arc<dyn RuntimeStore> =
            Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
        let run = memo_tests::fixtures::unique_run("leased");
        let seen = worker.run(&run, &1, &lease_probe(observer)).await.unwrap();
        assert_eq!(seen, until_ms, "{lease:?}");
    }
}

/// A step body that fails on its first try and returns its try's number
/// on the second.
fn fails_once(
    policy: RetryPolicy,
) -> Workflow<impl Fn(Context, u64) -> futures::future::BoxFuture<'static, Result<u32, Error>>> {
    Workflow::new("fails-once", move |ctx: Context, _: u64| {
        Box::pin(async move {
            let tries = std::sync::atomic::AtomicU32::new(0);
            ctx.step("call", |_memo| {
                let tried = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                async move {
                    if tried == 1 {
                        return Err(Error::InvalidConfig {
                            what: "the upstream".into(),
                            reason: "503".into(),
                        });
                    }
                    Ok(tried)
                }
            })
            .retry(policy)
            .await
        }) as futures::future::BoxFuture<'static, _>
    })
}

/// A retry policy's waits at zero and at `Duration::MAX` are honoured: zero
/// retries at once, `Duration::MAX` waits as long as the timer can (about
/// 30 years) and then retries; nothing panics.
#[tokio::test(start_paused = true)]
async fn a_step_retry_waits_at_their_limits_are_honoured() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000_000));
    // A lease that outlives the longest wait, so no renewal ticks meanwhile.
    let worker = process(&objects, &clock)
        .lease(Duration::MAX)
        .build()
        .unwrap();
    let year = 365 * DAY;
    for (policy, waited_at_least) in [
        (
            RetryPolicy::attempts(2).with_min_delay(Duration::ZERO),
            Duration::ZERO,
        ),
        (
            RetryPolicy::attempts(2)
                .with_min_delay(Duration::ZERO)
                .with_max_delay(Duration::ZERO),
            Duration::ZERO,
        ),
        (
            RetryPolicy::attempts(2).with_min_delay(Duration::MAX),
            29 * year,
        ),
        (
            RetryPolicy::attempts(2)
                .with_min_delay(Duration::MAX)
                .with_max_delay(Duration::MAX)
                .without_jitter(),
            29 * year,
        ),
        (
            RetryPolicy::attempts(2)
                .with_min_delay(Duration::MAX)
                .with_max_delay(Duration::ZERO),
            29 * year,
        ),
    ] {
        let started = tokio::time::Instant::now();
        let run = memo_tests::fixtures::unique_run("retried");
        let tries = worker.run(&run, &1, &fails_once(policy)).await.unwrap();
        assert_eq!(tries, 2, "{policy:?}");
        let waited = started.elapsed();
        assert!(waited >= waited_at_least, "{policy:?} waited {waited:?}");
        if waited_at_least.is_zero() {
            assert_eq!(waited, Duration::ZERO, "{policy:?}");
        }
    }
}

/// The terminal marker's retry policy at `Duration::MAX`: a marker write
/// that failed once is written after the wait, without a panic.
#[tokio::test(start_paused = true)]
async fn a_marker_retry_wait_of_duration_max_is_honoured() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faults = Arc::new(FaultInjectingStore::new(objects.clone()));
    faults.inject(
        FaultRule::fail_before(RequestKind::Put)
            .at_prefix("memo/terminals")
            .times(1),
    );
    let memo_objects: Arc<dyn ObjectStore> = faults.clone();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let worker = Runtime::builder()
        .memo_store(MemoStore::new(memo_objects, "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .lease(Duration::MAX)
        .marker_retry(RetryPolicy::attempts(2).with_min_delay(Duration::MAX))
        .build()
        .unwrap();
    let run = RunId::new("marked").unwrap();
    let done = Workflow::new(
        "done",
        |_: Context, n: u64| async move { Ok::<_, Error>(n) },
    );
    assert_eq!(worker.run(&run, &7, &done).await.unwrap(), 7);
    let markers = worker.memo_store().markers().list().await.unwrap();
    assert_eq!(markers.len(), 1, "the marker was not written again");
    assert_eq!(markers[0].run_id, run);
}

/// Retention at its limits: `Duration::MAX` keeps a terminal run for ever
/// (at the end of time too), zero lets the first sweep after it ended clear
/// it.
#[tokio::test]
async fn a_retention_at_its_limits_is_honoured() {
    let done = Workflow::new(
        "done",
        |_: Context, n: u64| async move { Ok::<_, Error>(n) },
    );
    for (retention, swept) in [(Duration::MAX, 0), (Duration::ZERO, 1)] {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let clock = Arc::new(ManualClock::new(1_000_000));
        let worker = process(&objects, &clock)
            .retention(retention)
            .build()
            .unwrap();
        let run = RunId::new("kept").unwrap();
        worker.run(&run, &1, &done).await.unwrap();

        clock.advance_ms(1);
        let sweeper = worker.retention_sweeper();
        assert_eq!(sweeper.retention(), retention);
        let now = clock.now_ms();
        let cutoff = if retention.is_zero() { now } else { 0 };
        assert_eq!(sweeper.cutoff_ms(now), cutoff, "{retention:?}");
        let report = sweeper.sweep_now().await.unwrap();
        assert_eq!(report.runs_cleared, swept, "{retention:?}");
        clock.set_ms(u64::MAX);
        let report = sweeper.sweep_now().await.unwrap();
        assert_eq!(report.runs_cleared, 0, "{retention:?}: swept twice");
        assert_eq!(
            worker.status(&run).await.unwrap().is_some(),
            swept == 0,
            "{retention:?}"
        );
    }
}

/// A manual clock moved past the end of time stops there; it never wraps
/// back to the epoch.
#[test]
fn a_manual_clock_saturates_at_the_end_of_time() {
    let clock = ManualClock::new(u64::MAX - 5);
    clock.advance_ms(10);
    assert_eq!(clock.now_ms(), u64::MAX);
    clock.advance_ms(u64::MAX);
    assert_eq!(clock.now_ms(), u64::MAX);
}
