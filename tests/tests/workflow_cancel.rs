//! Cancellation (issue 23, item 3): `Runtime::cancel` is recorded durably,
//! ends an idle run at once, and is observed by a live attempt at its next
//! step boundary or wait (never in the middle of a step body); the run ends
//! `Cancelled` with its terminal marker, and is swept like any other.
//! Cancelling an ended run is an error. The operator and the workers are
//! separate processes: runtimes over separate store instances on one store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::workflow::{
    CANCEL_SIGNAL, Cancellation, Context, Runtime, RuntimeBuilder, Workflow,
};
use memo_runtime::{
    Error, MemoStore, RunId, clock::ManualClock, runtime_store::ObjectStoreRuntimeStore,
};
use tokio::sync::Notify;

fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> RuntimeBuilder {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .retention(Duration::ZERO)
}

/// How often each step body ran, and a gate the first one waits at.
#[derive(Default)]
struct Bodies {
    first: AtomicU64,
    second: AtomicU64,
    started: Notify,
    proceed: Notify,
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// Step `first`, a wait for the signal `go`, then step `second`; if `gate`,
/// `first` tells the test it started and waits for it, and no signal wait
/// follows.
fn flow(
    bodies: Arc<Bodies>,
    gate: bool,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("cancellable", move |ctx: Context, _: u64| {
        let bodies = bodies.clone();
        Box::pin(async move {
            ctx.step("first", |_memo| {
                let bodies = bodies.clone();
                async move {
                    bodies.first.fetch_add(1, Ordering::SeqCst);
                    if gate {
                        bodies.started.notify_one();
                        bodies.proceed.notified().await;
                    }
                    Ok::<_, Error>(())
                }
            })
            .await?;
            // A gated run goes straight on to its next step.
            let go: bool = if gate {
                true
            } else {
                ctx.wait_for_signal("go").await?
            };
            ctx.step("second", |_memo| {
                bodies.second.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, Error>(format!("went {go}")) }
            })
            .await
        }) as BoxedRun
    })
}

fn cancelled(outcome: Result<String, Error>) -> Option<String> {
    match outcome {
        Err(Error::RunCancelled { reason, .. }) => reason,
        other => panic!("expected a cancelled run, got {other:?}"),
    }
}

/// A run suspended in a wait holds no lease: cancelling it from another
/// process ends it at once, with its marker; running it again runs nothing,
/// and a sweep clears it.
#[tokio::test]
async fn cancelling_an_idle_run_ends_it_with_its_marker_and_it_is_swept() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let worker = process(&objects, &clock).build().unwrap();
    let operator = process(&objects, &clock).build().unwrap();
    let bodies = Arc::new(Bodies::default());
    let wf = flow(bodies.clone(), false);
    let run = RunId::new("cancel-idle").unwrap();

    assert!(matches!(
        worker.run(&run, &1, &wf).await,
        Err(Error::Suspended { .. })
    ));
    assert_eq!(
        operator.cancel(&run, "customer left").await.unwrap(),
        Cancellation::Cancelled
    );
    let record = operator.status(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.error.as_deref(), Some("customer left"));
    let markers = operator.memo_store().markers().list().await.unwrap();
    assert!(markers.iter().any(|m| m.run_id == run), "{markers:?}");

    worker.signal(&run, "go", &true).await.unwrap_err();
    assert_eq!(
        cancelled(worker.run(&run, &1, &wf).await).as_deref(),
        Some("customer left")
    );
    assert_eq!(bodies.first.load(Ordering::SeqCst), 1);
    assert_eq!(bodies.second.load(Ordering::SeqCst), 0);

    clock.advance_ms(1);
    operator.retention_sweeper().sweep_now().await.unwrap();
    assert!(
        operator.status(&run).await.unwrap().is_none(),
        "the cancelled run was swept"
    );
}

/// A run that ended cannot be cancelled, with an error that says so; an
/// unknown run is not found; the reserved signal name cannot be sent.
#[tokio::test]
async fn cancelling_an_ended_or_unknown_run_is_a_clear_error() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let rt = process(&objects, &clock).build().unwrap();
    let bodies = Arc::new(Bodies::default());
    let wf = flow(bodies.clone(), false);
    let run = RunId::new("cancel-ended").unwrap();

    rt.run(&run, &1, &wf).await.unwrap_err();
    rt.signal(&run, "go", &true).await.unwrap();
    assert_eq!(rt.run(&run, &1, &wf).await.unwrap(), "went true");
    match rt.cancel(&run, "too late").await {
        Err(Error::Conflict { reason, .. }) => {
            assert!(reason.contains("already ended (Completed)"), "{reason}")
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let record = rt.status(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed);

    let unknown = RunId::new("no-such-run").unwrap();
    assert!(matches!(
        rt.cancel(&unknown, "x").await,
        Err(Error::RunNotFound { .. })
    ));

    let open = RunId::new("cancel-reserved").unwrap();
    rt.run(&open, &1, &wf).await.unwrap_err();
    assert!(matches!(
        rt.signal(&open, CANCEL_SIGNAL, &"sneaky").await,
        Err(Error::InvalidWrite { .. })
    ));
    assert_eq!(
        rt.status(&open).await.unwrap().unwrap().status,
        RunStatus::Running
    );
}

/// An attempt waiting in process for a signal observes a cancellation sent
/// by another process at its next poll, and ends the run cancelled.
#[tokio::test]
async fn a_live_signal_wait_observes_the_cancellation() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let worker = process(&objects, &clock)
        .signal_wait(Duration::MAX)
        .signal_poll_interval(Duration::from_millis(1))
        .build()
        .unwrap();
    let operator = process(&objects, &clock).build().unwrap();
    let bodies = Arc::new(Bodies::default());
    let wf = flow(bodies.clone(), false);
    let run = RunId::new("cancel-waiting").unwrap();

    let running = tokio::spawn({
        let (worker, run, wf) = (worker.clone(), run.clone(), wf.clone());
        async move { worker.run(&run, &1, &wf).await }
    });
    while bodies.first.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let requested = operator.cancel(&run, "stop").await.unwrap();
    assert!(
        matches!(requested, Cancellation::Requested { .. }),
        "the worker holds the run: {requested:?}"
    );
    assert_eq!(cancelled(running.await.unwrap()).as_deref(), Some("stop"));
    let record = operator.status(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Cancelled);
    assert!(record.lease.is_none());
    let markers = operator.memo_store().markers().list().await.unwrap();
    assert!(markers.iter().any(|m| m.run_id == run));
    assert_eq!(bodies.second.load(Ordering::SeqCst), 0);
}

/// A step body running when the cancellation is recorded finishes (its
/// receipt is committed): the attempt learns of the request at a lease
/// renewal and observes it at the next boundary, where no new body starts.
/// Tokio's clock is paused, so the renewals come in order, not by timing.
#[tokio::test(start_paused = true)]
async fn a_running_step_finishes_and_the_next_boundary_observes_the_cancellation() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let lease = Duration::from_secs(30);
    let worker = process(&objects, &clock).lease(lease).build().unwrap();
    let operator = process(&objects, &clock).build().unwrap();
    let bodies = Arc::new(Bodies::default());
    let wf = flow(bodies.clone(), true);
    let run = RunId::new("cancel-mid-step").unwrap();

    let running = tokio::spawn({
        let (worker, run, wf) = (worker.clone(), run.clone(), wf.clone());
        async move { worker.run(&run, &1, &wf).await }
    });
    bodies.started.notified().await;
    let requested = operator.cancel(&run, "abort").await.unwrap();
    assert!(
        matches!(requested, Cancellation::Requested { .. }),
        "{requested:?}"
    );
    // The body is still running: the run is open.
    assert_eq!(
        operator.status(&run).await.unwrap().unwrap().status,
        RunStatus::Running
    );
    // Past one renewal (a third of the lease), then let the body finish.
    tokio::time::sleep(lease).await;
    bodies.proceed.notify_one();
    assert_eq!(cancelled(running.await.unwrap()).as_deref(), Some("abort"));

    let receipts = operator
        .runtime_store()
        .load_receipts(&run, None)
        .await
        .unwrap();
    let steps: Vec<&str> = receipts.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(
        steps,
        ["first"],
        "the running step committed; nothing after it"
    );
    assert_eq!(bodies.first.load(Ordering::SeqCst), 1);
    assert_eq!(bodies.second.load(Ordering::SeqCst), 0);
    let record = operator.status(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.error.as_deref(), Some("abort"));
}

/// A body that asks sees the cancellation at once; the run then ends
/// cancelled whatever the workflow returns.
#[tokio::test]
async fn a_body_that_asks_sees_the_cancellation() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let worker = process(&objects, &clock).build().unwrap();
    let operator = process(&objects, &clock).build().unwrap();
    let started = Arc::new(Notify::new());
    let run = RunId::new("cancel-asked").unwrap();
    let wf = Workflow::new("asker", {
        let started = started.clone();
        move |ctx: Context, _: u64| {
            let started = started.clone();
            async move {
                let stopped_early = ctx
                    .step("long", |_memo| {
                        let (ctx, started) = (ctx.clone(), started.clone());
                        async move {
                            started.notify_one();
                            while !ctx.is_cancelled().await? {
                                tokio::task::yield_now().await;
                            }
                            Ok::<_, Error>(true)
                        }
                    })
                    .await?;
                Ok::<_, Error>(format!("stopped early: {stopped_early}"))
            }
        }
    });
    let running = tokio::spawn({
        let (worker, run, wf) = (worker.clone(), run.clone(), wf.clone());
        async move { worker.run(&run, &1, &wf).await }
    });
    started.notified().await;
    operator.cancel(&run, "enough").await.unwrap();
    assert_eq!(cancelled(running.await.unwrap()).as_deref(), Some("enough"));
    let record = operator.status(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Cancelled);
}

/// A store fault while a workflow asks `is_cancelled` interrupts the
/// attempt like a step's would: a workflow that passes it on with `?` does
/// not fail the run, and the next attempt goes on. (The simulation with
/// worker loops found it failing runs, seed 6.)
#[tokio::test]
async fn a_store_fault_while_asking_is_cancelled_interrupts_and_never_fails_the_run() {
    use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let objects: Arc<dyn ObjectStore> = faults.clone();
    let clock = Arc::new(ManualClock::new(1_000));
    let runtime = process(&objects, &clock).build().unwrap();
    let armed = Arc::new(AtomicU64::new(1));
    let (store, arm) = (faults.clone(), armed.clone());
    let asker = Workflow::new("asker", move |ctx: Context, (): ()| {
        let (store, arm) = (store.clone(), arm.clone());
        async move {
            if arm.swap(0, Ordering::SeqCst) == 1 {
                for kind in RequestKind::ALL {
                    store.inject(FaultRule::fail_before(kind).times(1));
                }
            }
            let cancelled = ctx.is_cancelled().await;
            store.clear_faults();
            // Passed on with `?`, as a workflow does.
            let cancelled = cancelled?;
            Ok::<_, Error>(cancelled)
        }
    });
    let run = RunId::new("asker-1").unwrap();
    let first = runtime.run(&run, &(), &asker).await;
    assert!(first.is_err(), "{first:?}");
    let status = runtime.status(&run).await.unwrap().unwrap().status;
    assert_eq!(
        status,
        RunStatus::Running,
        "the fault failed the run: {first:?}"
    );
    clock.advance_ms(60_000);
    assert!(!runtime.run(&run, &(), &asker).await.unwrap());
}
