//! The workflow runtime: replay after crashes, non-determinism, racing
//! workers, retries, signals and terminal marking, on InMemory and on a
//! local folder.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow};
use memo_runtime::{
    Error, Memo, MemoStore,
    clock::ManualClock,
    runtime_store::{InMemoryRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::{self, run};
use tokio::sync::mpsc;

/// The stores a test runs on: the runs' records in memory or in the
/// backend's objects; the folder lives as long as the value.
struct Backend {
    name: &'static str,
    objects: Arc<dyn ObjectStore>,
    /// A runtime store over the backend's records, as a new process would
    /// open it (the in-memory store can only be shared).
    runtime_store: Box<dyn Fn() -> Arc<dyn RuntimeStore>>,
    _objects: fixtures::Backend,
}

impl Backend {
    /// A new runtime over the backend: what another process would build.
    fn runtime(&self, clock: &Arc<ManualClock>) -> Runtime {
        runtime(&self.objects, &(self.runtime_store)(), clock)
    }
}

/// In-memory records, then object-store records on every fixture backend.
fn backends() -> Vec<Backend> {
    let shared: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let memory = fixtures::Backend::in_memory();
    let mut backends = vec![Backend {
        name: "in-memory records",
        objects: memory.objects(),
        runtime_store: Box::new(move || shared.clone()),
        _objects: memory,
    }];
    for objects in fixtures::Backend::all() {
        let records = objects.clone();
        backends.push(Backend {
            name: objects.name(),
            objects: objects.objects(),
            runtime_store: Box::new(move || Arc::new(records.runtime_store("runs"))),
            _objects: objects,
        });
    }
    backends
}

/// A new runtime over existing stores.
fn runtime(
    objects: &Arc<dyn ObjectStore>,
    store: &Arc<dyn RuntimeStore>,
    clock: &Arc<ManualClock>,
) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(store.clone())
        .clock(clock.clone())
        .marker_retry(RetryPolicy::attempts(2).with_min_delay(Duration::from_millis(1)))
        .build()
        .unwrap()
}

/// The default lease, in ms: how long a crashed worker holds its run.
const LEASE_MS: u64 = memo_runtime::workflow::DEFAULT_LEASE.as_millis() as u64;

/// Counts how often each side effect really ran.
#[derive(Default)]
struct Effects {
    charged: AtomicUsize,
    emailed: AtomicUsize,
    step_bodies: AtomicUsize,
}

/// A side effect made retry-safe by hand with the memo (what `#[memoized]`
/// expands to): it runs at most once per (run, step, input).
async fn effect(
    memo: &Memo,
    name: &str,
    input: u64,
    counter: &AtomicUsize,
) -> memo_runtime::Result<u64> {
    if let Some(hit) = memo.content_get(&(name, input)).await? {
        return Ok(u64::from_le_bytes(hit[..].try_into().unwrap()));
    }
    counter.fetch_add(1, Ordering::SeqCst);
    let committed = memo
        .content_put(&(name, input), (input * 10).to_le_bytes())
        .await?;
    Ok(u64::from_le_bytes(committed[..].try_into().unwrap()))
}

/// Three steps: charge, e-mail (both memoized inside), then a sum. When
/// `crash_in_email` is set, the e-mail step performs its side effect, reports
/// on the channel, and hangs until the test kills the attempt.
fn order_workflow(
    effects: Arc<Effects>,
    crash_in_email: Option<mpsc::UnboundedSender<()>>,
) -> Workflow<
    impl Fn(Context, u64) -> futures::future::BoxFuture<'static, Result<u64, Error>>
    + Send
    + Sync
    + 'static,
> {
    Workflow::new("order", move |ctx: Context, amount: u64| {
        let effects = effects.clone();
        let crash = crash_in_email.clone();
        Box::pin(async move {
            let charged = ctx
                .step("charge", |memo| {
                    let effects = effects.clone();
                    async move {
                        effects.step_bodies.fetch_add(1, Ordering::SeqCst);
                        effect(&memo, "charge", amount, &effects.charged).await
                    }
                })
                .await?;
            let emailed = ctx
                .step("email", |memo| {
                    let effects = effects.clone();
                    let crash = crash.clone();
                    async move {
                        effects.step_bodies.fetch_add(1, Ordering::SeqCst);
                        let sent = effect(&memo, "email", charged, &effects.emailed).await?;
                        if let Some(crash) = crash {
                            crash.send(()).unwrap();
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, Error>(sent)
                    }
                })
                .await?;
            ctx.step(
                "total",
                |_memo| async move { Ok::<_, Error>(charged + emailed) },
            )
            .await
        }) as futures::future::BoxFuture<'static, Result<u64, Error>>
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_step_resumes_without_repeating_committed_side_effects() {
    for backend in backends() {
        let clock = Arc::new(ManualClock::new(1_000));
        let effects = Arc::new(Effects::default());
        let id = run("order-1");

        // Process 1 dies inside the e-mail step, after its side effect committed.
        let (crashed, mut reached) = mpsc::unbounded_channel();
        let first = backend.runtime(&clock);
        let doomed = order_workflow(effects.clone(), Some(crashed));
        let attempt = tokio::spawn({
            let id = id.clone();
            async move { first.run(&id, &7u64, &doomed).await }
        });
        reached.recv().await.unwrap();
        attempt.abort();
        assert!(attempt.await.unwrap_err().is_cancelled());
        // The crashed worker's lease must expire before another takes over.
        clock.advance_ms(LEASE_MS);
        assert_eq!(effects.charged.load(Ordering::SeqCst), 1);
        assert_eq!(effects.emailed.load(Ordering::SeqCst), 1);

        // Process 2 finishes the run: charge is replayed from its receipt, the
        // e-mail step runs again but its memoized side effect hits.
        let second = backend.runtime(&clock);
        let total = second
            .run(&id, &7u64, &order_workflow(effects.clone(), None))
            .await
            .unwrap();
        assert_eq!(total, 70 + 700, "{}", backend.name);
        assert_eq!(
            effects.charged.load(Ordering::SeqCst),
            1,
            "{}: charged twice",
            backend.name
        );
        assert_eq!(
            effects.emailed.load(Ordering::SeqCst),
            1,
            "{}: e-mailed twice",
            backend.name
        );
        assert_eq!(
            effects.step_bodies.load(Ordering::SeqCst),
            3,
            "{}: charge once, email twice",
            backend.name
        );

        let record = second.status(&id).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Completed);
        assert_eq!(record.attempts, 2, "{}", backend.name);
    }
}

#[tokio::test]
async fn a_completed_run_returns_its_stored_result_without_running_anything() {
    let objects = fixtures::Backend::in_memory().objects();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let clock = Arc::new(ManualClock::new(5));
    let effects = Arc::new(Effects::default());
    let runtime = runtime(&objects, &store, &clock);
    let workflow = order_workflow(effects.clone(), None);
    let id = run("done");
    assert_eq!(runtime.run(&id, &1u64, &workflow).await.unwrap(), 110);
    let bodies = effects.step_bodies.load(Ordering::SeqCst);
    assert_eq!(runtime.run(&id, &1u64, &workflow).await.unwrap(), 110);
    assert_eq!(effects.step_bodies.load(Ordering::SeqCst), bodies);
    assert_eq!(runtime.status(&id).await.unwrap().unwrap().attempts, 1);
}

#[tokio::test]
async fn another_input_under_the_same_run_id_is_a_conflict() {
    let objects = fixtures::Backend::in_memory().objects();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let runtime = runtime(&objects, &store, &Arc::new(ManualClock::new(0)));
    let workflow = order_workflow(Arc::default(), None);
    runtime.run(&run("r"), &1u64, &workflow).await.unwrap();
    let err = runtime.run(&run("r"), &2u64, &workflow).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_step_order_is_non_determinism_naming_both_steps() {
    let objects = fixtures::Backend::in_memory().objects();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let clock = Arc::new(ManualClock::new(0));
    let id = run("nondet");
    let (crashed, mut reached) = mpsc::unbounded_channel();
    let first = runtime(&objects, &store, &clock);
    let doomed = order_workflow(Arc::default(), Some(crashed));
    let attempt = tokio::spawn({
        let id = id.clone();
        async move { first.run(&id, &3u64, &doomed).await }
    });
    reached.recv().await.unwrap();
    attempt.abort();
    let _ = attempt.await;
    clock.advance_ms(LEASE_MS);

    let reordered = Workflow::new("order", |ctx: Context, _amount: u64| async move {
        ctx.step("refund", |_memo| async { Ok::<_, Error>(0u64) })
            .await
    });
    let err = runtime(&objects, &store, &clock)
        .run(&id, &3u64, &reordered)
        .await
        .unwrap_err();
    match err {
        Error::NonDeterminism {
            sequence: 0,
            recorded,
            called,
            ..
        } => {
            assert_eq!((recorded.as_str(), called.as_str()), ("charge", "refund"));
        }
        other => panic!("expected NonDeterminism, got {other:?}"),
    }
    // The run is left open for a fixed deployment, not failed.
    assert_eq!(
        store.load_run(&id).await.unwrap().unwrap().status,
        RunStatus::Running
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slower_of_two_workers_on_one_run_loses_its_lease_and_commits_nothing() {
    let objects = fixtures::Backend::in_memory().objects();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let clock = Arc::new(ManualClock::new(0));
    let id = run("raced");
    let gate = Arc::new(tokio::sync::Notify::new());
    let (entered, mut entered_rx) = mpsc::unbounded_channel();
    let worker = |label: &'static str,
                  gate: Option<Arc<tokio::sync::Notify>>,
                  entered: mpsc::UnboundedSender<()>| {
        Workflow::new("raced", move |ctx: Context, _: ()| {
            let gate = gate.clone();
            let entered = entered.clone();
            async move {
                ctx.step("work", |_memo| {
                    let gate = gate.clone();
                    let entered = entered.clone();
                    async move {
                        if let Some(gate) = gate {
                            entered.send(()).unwrap();
                            gate.notified().await;
                        }
                        Ok::<_, Error>(label.to_string())
                    }
                })
                .await
            }
        })
    };
    let slow = runtime(&objects, &store, &clock);
    let slow_workflow = worker("slow", Some(gate.clone()), entered.clone());
    let slow_attempt = tokio::spawn({
        let id = id.clone();
        async move { slow.run(&id, &(), &slow_workflow).await }
    });
    entered_rx.recv().await.unwrap();
    // The slow worker hangs past its lease: a second worker takes the run
    // over and wins.
    clock.advance_ms(LEASE_MS);
    let fast = runtime(&objects, &store, &clock);
    assert_eq!(
        fast.run(&id, &(), &worker("fast", None, entered))
            .await
            .unwrap(),
        "fast"
    );
    gate.notify_one();
    let err = slow_attempt.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err:?}");
    let receipts = store.load_receipts(&id, None).await.unwrap();
    assert_eq!(receipts.len(), 1, "the step was committed once");
    let record = store.load_run(&id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed);
}

#[tokio::test]
async fn transient_errors_are_retried_and_permanent_ones_fail_the_run() {
    #[derive(Debug)]
    enum AppError {
        Flaky,
        Broken,
        Memo(Error),
    }
    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            AppError::Memo(e)
        }
    }
    impl std::fmt::Display for AppError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{self:?}")
        }
    }

    let objects = fixtures::Backend::in_memory().objects();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let runtime = runtime(&objects, &store, &Arc::new(ManualClock::new(0)));
    let tries = Arc::new(AtomicUsize::new(0));
    let flaky_then_ok = {
        let tries = tries.clone();
        Workflow::new("retry", move |ctx: Context, fail_permanently: bool| {
            let tries = tries.clone();
            async move {
                ctx.step("call", |_memo| {
                    let n = tries.fetch_add(1, Ordering::SeqCst);
                    async move {
                        match (fail_permanently, n) {
                            (true, _) => Err(AppError::Broken),
                            (false, 0 | 1) => Err(AppError::Flaky),
                            (false, _) => Ok(n),
                        }
                    }
                })
                .retry(RetryPolicy::attempts(4).with_min_delay(Duration::from_millis(1)))
                .when(|e| matches!(e, AppError::Flaky))
                .await
            }
        })
    };
    assert_eq!(
        runtime
            .run(&run("flaky"), &false, &flaky_then_ok)
            .await
            .unwrap(),
        2
    );
    assert_eq!(tries.load(Ordering::SeqCst), 3);
    // The receipt says how many tries the step took, and why it retried.
    let receipts = store.load_receipts(&run("flaky"), None).await.unwrap();
    assert_eq!(receipts[0].retries, 2);
    assert_eq!(receipts[0].last_retried_error.as_deref(), Some("Flaky"));

    tries.store(0, Ordering::SeqCst);
    let err = runtime
        .run(&run("broken"), &true, &flaky_then_ok)
        .await
        .unwrap_err();
    // The step's failure reads as its recorded failure, now and in every
    // replay.
    assert!(
        matches!(&err, AppError::Memo(Error::StepFailed { message, .. }) if message == "Broken"),
        "{err:?}"
    );
    assert_eq!(
        tries.load(Ordering::SeqCst),
        1,
        "a permanent error is not retried"
    );
    let receipts = store.load_receipts(&run("broken"), None).await.unwrap();
    assert_eq!(
        (receipts[0].retries, &receipts[0].last_retried_error),
        (0, &None)
    );
    let record = runtime.status(&run("broken")).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.error, Some(err.to_string()));
    // Running a failed run again reports the stored failure and runs nothing.
    match runtime
        .run(&run("broken"), &true, &flaky_then_ok)
        .await
        .unwrap_err()
    {
        AppError::Memo(Error::RunFailed { message, .. }) => assert_eq!(message, err.to_string()),
        other => panic!("expected RunFailed, got {other:?}"),
    }
    assert_eq!(tries.load(Ordering::SeqCst), 1);
}

fn approval_workflow(
    steps: Arc<AtomicUsize>,
) -> Workflow<
    impl Fn(Context, String) -> futures::future::BoxFuture<'static, Result<String, Error>> + Send + Sync,
> {
    Workflow::new("approval", move |ctx: Context, draft: String| {
        let steps = steps.clone();
        Box::pin(async move {
            let drafted = ctx
                .step("draft", |_memo| {
                    steps.fetch_add(1, Ordering::SeqCst);
                    let draft = draft.clone();
                    async move { Ok::<_, Error>(draft) }
                })
                .await?;
            let approved: bool = ctx.wait_for_signal("approval").await?;
            Ok(format!(
                "{drafted}: {}",
                if approved { "sent" } else { "dropped" }
            ))
        }) as futures::future::BoxFuture<'static, Result<String, Error>>
    })
}

#[tokio::test]
async fn a_run_waiting_for_a_signal_is_resumed_by_another_runtime() {
    for backend in backends() {
        let store = (backend.runtime_store)();
        let clock = Arc::new(ManualClock::new(0));
        let steps = Arc::new(AtomicUsize::new(0));
        let id = run("needs-approval");
        let reply = "reply".to_string();

        let err = backend
            .runtime(&clock)
            .run(&id, &reply, &approval_workflow(steps.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Suspended { signal, .. } if signal == "approval"),
            "{err:?}"
        );
        assert_eq!(
            store.load_run(&id).await.unwrap().unwrap().status,
            RunStatus::Running
        );

        runtime(&backend.objects, &store, &clock)
            .signal(&id, "approval", &true)
            .await
            .unwrap();

        let resumed = runtime(&backend.objects, &store, &clock);
        let out = resumed
            .run(&id, &reply, &approval_workflow(steps.clone()))
            .await
            .unwrap();
        assert_eq!(out, "reply: sent", "{}", backend.name);
        assert_eq!(
            steps.load(Ordering::SeqCst),
            1,
            "{}: the draft step replayed",
            backend.name
        );
        // The signal was consumed by the run's third step (the second marks
        // the suspended wait: `memo.wait:approval`).
        let inputs = store.load_inputs(&id).await.unwrap();
        assert_eq!(inputs.len(), 1);
        assert_eq!(inputs[0].consumed_by, Some(2));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_can_wait_in_process_for_a_signal_sent_meanwhile() {
    let objects = fixtures::Backend::in_memory().objects();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let clock = Arc::new(ManualClock::new(0));
    let waiting = Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(store.clone())
        .clock(clock.clone())
        .signal_wait(Duration::from_secs(30))
        .signal_poll_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    let id = run("waits");
    let attempt = tokio::spawn({
        let id = id.clone();
        async move {
            waiting
                .run(&id, &"x".to_string(), &approval_workflow(Arc::default()))
                .await
        }
    });
    let sender = runtime(&objects, &store, &clock);
    // The run must exist before it can be signalled.
    while sender.status(&id).await.unwrap().is_none() {
        tokio::task::yield_now().await;
    }
    sender.signal(&id, "approval", &false).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(out, "x: dropped");
}

#[tokio::test]
async fn a_terminal_run_is_marked_and_a_lost_marker_is_rewritten_by_recover() {
    let faults = Arc::new(FaultInjectingStore::new(
        Arc::new(InMemory::new()) as Arc<dyn ObjectStore>
    ));
    let objects: Arc<dyn ObjectStore> = faults.clone();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let clock = Arc::new(ManualClock::new(42_000));
    let runtime = runtime(&objects, &store, &clock);
    let workflow = order_workflow(Arc::default(), None);

    runtime.run(&run("marked"), &1u64, &workflow).await.unwrap();
    let markers = runtime.memo_store().markers().list().await.unwrap();
    assert_eq!(markers.len(), 1);
    assert_eq!(
        (markers[0].run_id.as_str(), markers[0].terminal_at_ms),
        ("marked", 42_000)
    );

    // Every marker write fails: the run still completes, unmarked...
    faults.inject(FaultRule::fail_before(RequestKind::Create).at_prefix("memo/terminals"));
    runtime
        .run(&run("unmarked"), &2u64, &workflow)
        .await
        .unwrap();
    assert_eq!(
        runtime.memo_store().markers().list().await.unwrap().len(),
        1
    );
    // ...and recovery at the next start marks it.
    faults.clear_faults();
    let recovery = runtime.recover(&workflow).await.unwrap();
    assert_eq!(recovery.remarked, 1, "only the unmarked run is marked");
    let runs: Vec<_> = runtime
        .memo_store()
        .markers()
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.run_id.to_string())
        .collect();
    assert_eq!(runs.len(), 2);
    assert!(runs.contains(&"unmarked".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_resumes_the_open_runs_of_its_workflow() {
    let objects = fixtures::Backend::in_memory().objects();
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let clock = Arc::new(ManualClock::new(0));
    let effects = Arc::new(Effects::default());
    for (i, id) in ["open-a", "open-b"].into_iter().enumerate() {
        let (crashed, mut reached) = mpsc::unbounded_channel();
        let first = runtime(&objects, &store, &clock);
        let doomed = order_workflow(effects.clone(), Some(crashed));
        let attempt =
            tokio::spawn(async move { first.run(&run(id), &(i as u64 + 1), &doomed).await });
        reached.recv().await.unwrap();
        attempt.abort();
        let _ = attempt.await;
        clock.advance_ms(LEASE_MS);
    }
    let recovery = runtime(&objects, &store, &clock)
        .recover(&order_workflow(effects.clone(), None))
        .await
        .unwrap();
    let mut resumed: Vec<_> = recovery
        .resumed
        .into_iter()
        .map(|(id, out)| (id.to_string(), out.unwrap()))
        .collect();
    resumed.sort();
    assert_eq!(
        resumed,
        vec![("open-a".to_string(), 110), ("open-b".to_string(), 220)]
    );
    assert_eq!(effects.charged.load(Ordering::SeqCst), 2);
    assert_eq!(effects.emailed.load(Ordering::SeqCst), 2);
}

/// How many objects are stored under `folder`.
async fn objects_under(objects: &Arc<dyn ObjectStore>, folder: &str) -> usize {
    use futures::TryStreamExt;
    let folder = memo_runtime::object_store::path::Path::from(folder);
    objects
        .list(Some(&folder))
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_clears_expired_runs_whole_and_keeps_the_rest() {
    for backend in backends() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let retention = Duration::from_secs(10);
        let runtime_with_retention = || {
            Runtime::builder()
                .memo_store(MemoStore::new(backend.objects.clone(), "memo"))
                .runtime_store((backend.runtime_store)())
                .clock(clock.clone())
                .retention(retention)
                .build()
                .unwrap()
        };
        let runtime = runtime_with_retention();
        let workflow = order_workflow(Arc::default(), None);
        runtime.run(&run("old"), &1u64, &workflow).await.unwrap();
        clock.advance_ms(5_000);
        runtime
            .run(&run("at-cutoff"), &2u64, &workflow)
            .await
            .unwrap();
        // A run still open is never swept, however old.
        let (crashed, mut reached) = mpsc::unbounded_channel();
        let doomed = order_workflow(Arc::default(), Some(crashed));
        let open = tokio::spawn({
            let runtime = runtime_with_retention();
            async move { runtime.run(&run("open"), &3u64, &doomed).await }
        });
        reached.recv().await.unwrap();
        open.abort();
        let _ = open.await;
        assert_eq!(
            objects_under(&backend.objects, "memo/memos/old").await,
            2,
            "{}",
            backend.name
        );

        // Now "old" is 15 s past its end and "at-cutoff" exactly 10 s.
        clock.advance_ms(10_000);
        let sweeper = runtime.retention_sweeper();
        let report = sweeper.sweep_now().await.unwrap();
        assert!(report.failures.is_empty(), "{}: {report:?}", backend.name);
        assert_eq!(
            (
                report.markers_expired,
                report.runs_cleared,
                report.entries_deleted
            ),
            (1, 1, 2),
            "{}",
            backend.name
        );
        assert_eq!(report.runtime_runs_deleted, 1);

        assert_eq!(
            objects_under(&backend.objects, "memo/memos/old").await,
            0,
            "{}",
            backend.name
        );
        assert!(
            runtime.status(&run("old")).await.unwrap().is_none(),
            "{}",
            backend.name
        );
        assert_eq!(
            objects_under(&backend.objects, "memo/memos/at-cutoff").await,
            2,
            "{}",
            backend.name
        );
        assert_eq!(
            runtime
                .status(&run("at-cutoff"))
                .await
                .unwrap()
                .unwrap()
                .status,
            RunStatus::Completed
        );
        assert_eq!(
            objects_under(&backend.objects, "memo/memos/open").await,
            2,
            "{}",
            backend.name
        );
        let markers: Vec<_> = runtime.memo_store().markers().list().await.unwrap();
        assert_eq!(markers.len(), 1);
        assert_eq!(markers[0].run_id.as_str(), "at-cutoff");

        // A second pass finds nothing more to do.
        let again = sweeper.sweep_now().await.unwrap();
        assert_eq!((again.markers_expired, again.runs_cleared), (0, 0));
    }
}
