//! Attempt leases with fencing (issue 9, case 4): while an attempt is alive
//! no other worker runs the run's steps; a crashed or hung worker's run is
//! taken over once its lease expired, and the attempt that lost its lease
//! commits nothing more; an attempt that ends in any way releases the run at
//! once. Two processes are two runtimes over separate store instances on one
//! folder or bucket; time is a `ManualClock`.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunIdPage, RunPage, RunRecord, RunStatus,
    RunSummary, RuntimeStore, StatusChange, StepReceipt,
};
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow};
use memo_runtime::{
    Bytes, Error, Incarnation, MemoStore, RunId, clock::ManualClock,
    runtime_store::ObjectStoreRuntimeStore,
};
use memo_tests::fixtures::{Backend, charge, process_builder};
use memo_tests::pause::wait_reached;
use tokio::sync::{mpsc, oneshot};

const LEASE: Duration = Duration::from_secs(30);

/// A runtime over fresh store instances: what another process would build.
fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>, name: &str) -> Runtime {
    process_builder(objects.clone(), objects.clone(), clock, name, LEASE)
        .marker_retry(RetryPolicy::attempts(2).with_min_delay(Duration::from_millis(1)))
        .build()
        .unwrap()
}

/// What the step bodies did, and the gate the first of them waits at inside
/// the step.
#[derive(Default)]
struct World {
    bodies: AtomicU64,
    charges: AtomicU64,
    gate: std::sync::Mutex<Option<oneshot::Receiver<()>>>,
    /// Set: the next body to charge hangs right after the charge committed.
    hang_after_charge: AtomicBool,
}

type BoxedRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// One step: tell the test it entered, wait at the gate, then charge.
fn checkout(
    world: Arc<World>,
    entered: mpsc::UnboundedSender<()>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    Workflow::new("checkout", move |ctx: Context, cents: u64| {
        let (world, entered) = (world.clone(), entered.clone());
        Box::pin(async move {
            ctx.step("charge", |memo| {
                let (world, entered) = (world.clone(), entered.clone());
                async move {
                    world.bodies.fetch_add(1, Ordering::SeqCst);
                    let _ = entered.send(());
                    let gate = world.gate.lock().unwrap().take();
                    if let Some(gate) = gate {
                        gate.await.unwrap();
                    }
                    let charged = charge(&memo, cents, &world.charges).await?;
                    if world.hang_after_charge.swap(false, Ordering::SeqCst) {
                        let _ = entered.send(());
                        std::future::pending::<()>().await;
                    }
                    Ok(charged)
                }
            })
            .await
        }) as BoxedRun
    })
}

/// Worker A enters the step and hangs (its future is no longer polled);
/// worker B finds the run held until A's lease expires, then takes it over
/// and finishes it. When A wakes up, its step finds B's charge in the memo
/// and its commit is refused: A commits nothing, and nothing is charged
/// twice.
#[tokio::test]
async fn a_live_attempt_holds_its_run_and_a_taken_over_attempt_commits_nothing() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let clock = Arc::new(ManualClock::new(1_000_000));
        let (open_gate, gate) = oneshot::channel();
        let world = Arc::new(World {
            gate: std::sync::Mutex::new(Some(gate)),
            ..World::default()
        });
        let (entered, mut entered_rx) = mpsc::unbounded_channel();
        let workflow = checkout(world.clone(), entered);
        let order = RunId::new("order-1").unwrap();
        let (a, b) = (
            process(&objects, &clock, "worker-a"),
            process(&objects, &clock, "worker-b"),
        );

        let mut first = Box::pin(a.run(&order, &100, &workflow));
        tokio::select! {
            done = &mut first => panic!("{name}: A finished inside the gate: {done:?}"),
            _ = entered_rx.recv() => {}
        }

        match b.run(&order, &100, &workflow).await {
            Err(Error::LeaseHeld { owner, .. }) => assert_eq!(owner, "worker-a", "{name}"),
            other => panic!("{name}: B ran a run A holds: {other:?}"),
        }
        let recovery = b.recover(&workflow).await.unwrap();
        assert!(
            recovery.resumed.is_empty(),
            "{name}: recover() resumed a held run"
        );
        assert_eq!(recovery.busy.len(), 1, "{name}");
        assert_eq!(recovery.busy[0].1.owner, "worker-a", "{name}");
        assert_eq!(world.bodies.load(Ordering::SeqCst), 1, "{name}");

        // A hangs past its lease: B takes the run over and finishes it.
        clock.advance_ms(LEASE.as_millis() as u64 + 1);
        assert_eq!(b.run(&order, &100, &workflow).await.unwrap(), 1, "{name}");
        assert_eq!(world.charges.load(Ordering::SeqCst), 1, "{name}");

        // A wakes up: its body runs on, hits B's memo entry, and its commit
        // is refused.
        open_gate.send(()).unwrap();
        match first.await {
            Err(Error::LeaseLost { attempt, .. }) => assert_eq!(attempt, 1, "{name}"),
            other => panic!("{name}: the taken-over attempt committed: {other:?}"),
        }
        assert_eq!(
            world.charges.load(Ordering::SeqCst),
            1,
            "{name}: charged twice"
        );
        let record = b.status(&order).await.unwrap().unwrap();
        assert_eq!((record.status, record.attempts), (RunStatus::Completed, 2));
        assert_eq!(b.run(&order, &100, &workflow).await.unwrap(), 1, "{name}");
    }
}

/// A worker that crashed inside a step (its attempt dropped) holds the run
/// until its lease expires; then any worker finishes the run, and the
/// step's committed charge is not made again.
#[tokio::test]
async fn a_crashed_attempts_run_is_taken_over_once_its_lease_expired() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let clock = Arc::new(ManualClock::new(5_000_000));
        let world = Arc::new(World {
            hang_after_charge: AtomicBool::new(true),
            ..World::default()
        });
        let (entered, mut entered_rx) = mpsc::unbounded_channel();
        let workflow = checkout(world.clone(), entered);
        let order = RunId::new("order-2").unwrap();
        let crashing = process(&objects, &clock, "crashing");
        // Crash after the charge committed, before the step did: the body
        // reports twice (entering, then hanging after the charge).
        let charged_then_hung = async {
            entered_rx.recv().await;
            entered_rx.recv().await;
        };
        tokio::select! {
            () = charged_then_hung => {}
            done = crashing.run(&order, &250, &workflow) => panic!("{name}: {done:?}"),
        }

        let next = process(&objects, &clock, "next");
        assert!(
            matches!(
                next.run(&order, &250, &workflow).await,
                Err(Error::LeaseHeld { .. })
            ),
            "{name}: the crashed attempt's lease was ignored"
        );
        clock.advance_ms(LEASE.as_millis() as u64);
        assert_eq!(
            next.run(&order, &250, &workflow).await.unwrap(),
            1,
            "{name}"
        );
        assert_eq!(world.charges.load(Ordering::SeqCst), 1, "{name}");
    }
}

/// An attempt that ends without finishing the run (it suspends waiting for
/// a signal, or the workflow panics) releases its lease: the next `run()`
/// proceeds at once, without waiting for the lease to expire.
#[tokio::test]
async fn an_attempt_that_ends_in_any_way_releases_its_lease() {
    for backend in Backend::all() {
        let (name, objects) = (backend.name(), backend.objects());
        let clock = Arc::new(ManualClock::new(9_000_000));
        let waits = Workflow::new("approval", |ctx: Context, _: u64| async move {
            let approved: bool = ctx.wait_for_signal("approve").await?;
            Ok::<_, Error>(approved)
        });
        let run = RunId::new("needs-approval").unwrap();
        let first = process(&objects, &clock, "first");
        let second = process(&objects, &clock, "second");
        for runtime in [&first, &second, &first] {
            match runtime.run(&run, &1, &waits).await {
                Err(Error::Suspended { .. }) => {}
                other => panic!("{name}: expected the run to suspend, got {other:?}"),
            }
        }
        first.signal(&run, "approve", &true).await.unwrap();
        assert!(second.run(&run, &1, &waits).await.unwrap(), "{name}");

        let panics = Workflow::new("panics", |_: Context, n: u64| async move {
            if n > 0 {
                panic!("a bug in the workflow");
            }
            Ok::<u64, Error>(n)
        });
        let crashy = RunId::new("panics").unwrap();
        for runtime in [&first, &second] {
            match runtime.run(&crashy, &1, &panics).await {
                Err(Error::Aborted { reason, .. }) => {
                    assert!(reason.contains("a bug in the workflow"), "{name}: {reason}")
                }
                other => panic!("{name}: expected the attempt to abort, got {other:?}"),
            }
        }
        let record = second.status(&crashy).await.unwrap().unwrap();
        assert_eq!((record.status, record.attempts), (RunStatus::Running, 2));
    }
}

/// Charges made by [`charge_card`]'s body, in this binary.
static CARD_CHARGES: AtomicU64 = AtomicU64::new(0);

#[memo_runtime::memoized]
async fn charge_card(memo: &memo_runtime::Memo, cents: u64) -> Result<u64, Error> {
    Ok(CARD_CHARGES.fetch_add(cents, Ordering::SeqCst) + cents)
}

/// A step that makes one `#[memoized]` charge, after telling `entered` and
/// waiting at `gate` (if any).
fn pay(
    entered: mpsc::UnboundedSender<()>,
    gate: Option<oneshot::Receiver<()>>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    let gate = Arc::new(std::sync::Mutex::new(gate));
    Workflow::new("pay", move |ctx: Context, cents: u64| {
        let (entered, gate) = (entered.clone(), gate.clone());
        Box::pin(async move {
            ctx.step("charge", |memo| {
                let (entered, gate) = (entered.clone(), gate.clone());
                async move {
                    let _ = entered.send(());
                    let gate = gate.lock().unwrap().take();
                    if let Some(gate) = gate {
                        gate.await.unwrap();
                    }
                    charge_card(&memo, cents).await
                }
            })
            .await
        }) as BoxedRun
    })
}

/// Worker A starts the step under a live lease, then pauses while its
/// `#[memoized]` call reads the memo (a GC pause, a slow read, a clock
/// jump); its lease expires and worker B takes the run over and enters the
/// step. When A resumes and misses, it must not run the side effect: its
/// attempt lost the lease after the step began, and the check at the start
/// of the step alone would let it charge while B's attempt is live. (A's
/// call begins with under half its lease left, so that it reads the entry
/// at all: with more, a run's first attempt knows no entry can be there;
/// see `a_first_attempts_call_reads_no_entry_while_half_its_lease_is_left`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_lost_its_lease_during_a_memo_read_does_not_run_the_side_effect() {
    let objects: Arc<dyn ObjectStore> =
        Arc::new(memo_runtime::object_store::memory::InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000_000));
    // A's store pauses A's first memo read until the test lets it go on.
    let (paused_tx, mut paused_rx) = mpsc::unbounded_channel();
    let (resume_tx, resume_rx) = std::sync::mpsc::channel::<()>();
    let resume_rx = std::sync::Mutex::new(Some(resume_rx));
    let faults = Arc::new(memo_runtime::testing::FaultInjectingStore::new(
        objects.clone(),
    ));
    faults.inject(
        memo_runtime::testing::FaultRule::fail_before(memo_runtime::testing::RequestKind::Get)
            .matching(move |path| {
                if path.as_ref().starts_with("memo/memos/")
                    && let Some(resume) = resume_rx.lock().unwrap().take()
                {
                    let _ = paused_tx.send(());
                    // Blocks A's worker thread: A is paused mid-read.
                    resume.recv().unwrap();
                }
                false
            }),
    );
    let a_objects: Arc<dyn ObjectStore> = faults;
    let a = process(&a_objects, &clock, "worker-a");
    let b = process(&objects, &clock, "worker-b");
    let order = RunId::new("pay-1").unwrap();
    let (entered, mut entered_rx) = mpsc::unbounded_channel();

    let (open_a, a_gate) = oneshot::channel();
    let a_run = tokio::spawn({
        let (order, workflow) = (order.clone(), pay(entered.clone(), Some(a_gate)));
        async move { a.run(&order, &7, &workflow).await }
    });
    entered_rx.recv().await.unwrap(); // A entered the step
    clock.advance_ms(LEASE.as_millis() as u64 / 2 + 1);
    open_a.send(()).unwrap();
    paused_rx.recv().await.unwrap();

    // A is paused past its lease: B takes the run over and waits in the
    // step, before its charge.
    clock.advance_ms(LEASE.as_millis() as u64 + 1);
    let (open_gate, gate) = oneshot::channel();
    let b_workflow = pay(entered, Some(gate));
    let mut b_run = Box::pin(b.run(&order, &7, &b_workflow));
    tokio::select! {
        done = &mut b_run => panic!("B finished inside the gate: {done:?}"),
        _ = entered_rx.recv() => {}
    }

    // A resumes, misses, and must stop before the body.
    resume_tx.send(()).unwrap();
    match a_run.await.unwrap() {
        Err(Error::LeaseLost { attempt, .. }) => assert_eq!(attempt, 1),
        other => panic!("A's attempt went on after losing its lease: {other:?}"),
    }
    assert_eq!(
        CARD_CHARGES.load(Ordering::SeqCst),
        0,
        "A charged while B's attempt held the run"
    );

    open_gate.send(()).unwrap();
    assert_eq!(b_run.await.unwrap(), 7);
    assert_eq!(CARD_CHARGES.load(Ordering::SeqCst), 7, "charged once");
}

/// Holds the first caller of [`PauseBeforeRetry::pause`] until the test
/// lets it go on, blocking its thread: a GC pause, a suspended VM.
struct PauseBeforeRetry {
    paused: mpsc::UnboundedSender<()>,
    resume: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl PauseBeforeRetry {
    fn pause(&self) {
        let resume = self.resume.lock().unwrap().take();
        if let Some(resume) = resume {
            let _ = self.paused.send(());
            resume.recv().unwrap();
        }
    }
}

/// One step retried up to three times: worker `who`'s body records that it
/// started, then (for `"a"`) fails, or (for anyone else) waits at `gate` and
/// returns 1. Before each retry the step passes `pause`.
fn flaky(
    who: &'static str,
    starts: Arc<std::sync::Mutex<Vec<&'static str>>>,
    entered: mpsc::UnboundedSender<()>,
    gate: Option<oneshot::Receiver<()>>,
    pause: Option<Arc<PauseBeforeRetry>>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    let gate = Arc::new(std::sync::Mutex::new(gate));
    Workflow::new("flaky", move |ctx: Context, _: u64| {
        let (starts, entered, gate, pause) =
            (starts.clone(), entered.clone(), gate.clone(), pause.clone());
        Box::pin(async move {
            ctx.step("call", |_memo| {
                let (starts, entered, gate) = (starts.clone(), entered.clone(), gate.clone());
                async move {
                    starts.lock().unwrap().push(who);
                    let _ = entered.send(());
                    if who == "a" {
                        return Err(Error::InvalidConfig {
                            what: "the upstream".into(),
                            reason: "503".into(),
                        });
                    }
                    let gate = gate.lock().unwrap().take();
                    if let Some(gate) = gate {
                        gate.await.unwrap();
                    }
                    Ok(1u64)
                }
            })
            .retry(
                RetryPolicy::attempts(3)
                    .with_min_delay(Duration::from_millis(1))
                    .without_jitter(),
            )
            .when(move |_| {
                if let Some(pause) = &pause {
                    pause.pause();
                }
                true
            })
            .await
        }) as BoxedRun
    })
}

/// Worker A's step body fails, and A pauses before its retry past its
/// lease; worker B takes the run over and enters the same step. When A goes
/// on, its retry must not start the body while B's attempt holds the run:
/// every try starts only under a live lease, not only the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_retry_does_not_start_the_body_after_its_attempt_lost_the_lease() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(2_000_000));
        let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (entered, mut entered_rx) = mpsc::unbounded_channel();
        let (paused, mut paused_rx) = mpsc::unbounded_channel();
        let (resume, resume_rx) = std::sync::mpsc::channel();
        let pause = Arc::new(PauseBeforeRetry {
            paused,
            resume: std::sync::Mutex::new(Some(resume_rx)),
        });
        let a = process(&backend.open(), &clock, "worker-a");
        let b = process(&backend.open(), &clock, "worker-b");
        let order = RunId::new("retry-1").unwrap();

        let a_run = tokio::spawn({
            let workflow = flaky("a", starts.clone(), entered.clone(), None, Some(pause));
            let order = order.clone();
            async move { a.run(&order, &1, &workflow).await }
        });
        paused_rx.recv().await.unwrap(); // A failed once and waits to retry

        // A is paused past its lease: B takes the run over and waits inside
        // the step.
        clock.advance_ms(LEASE.as_millis() as u64 + 1);
        let (open_gate, gate) = oneshot::channel();
        let b_workflow = flaky("b", starts.clone(), entered, Some(gate), None);
        let mut b_run = Box::pin(b.run(&order, &1, &b_workflow));
        entered_rx.recv().await.unwrap(); // A's first try
        tokio::select! {
            done = &mut b_run => panic!("{name}: B finished inside the gate: {done:?}"),
            _ = entered_rx.recv() => {}
        }

        // A goes on: its retry must stop before the body.
        resume.send(()).unwrap();
        match a_run.await.unwrap() {
            Err(Error::LeaseLost { attempt, .. }) => assert_eq!(attempt, 1, "{name}"),
            other => panic!("{name}: A's attempt went on after losing its lease: {other:?}"),
        }
        assert_eq!(
            *starts.lock().unwrap(),
            ["a", "b"],
            "{name}: A's retry started the body while B's attempt held the run"
        );

        open_gate.send(()).unwrap();
        assert_eq!(b_run.await.unwrap(), 1, "{name}");
        assert_eq!(*starts.lock().unwrap(), ["a", "b"], "{name}");
    }
}

/// Two steps by worker `who`: each body records its start in `starts`; the
/// first then calls `after_first` (if any), the second tells `entered` and
/// waits at `gate` (if any).
fn two_steps(
    who: &'static str,
    starts: Arc<std::sync::Mutex<Vec<String>>>,
    after_first: Option<Arc<dyn Fn() + Send + Sync>>,
    entered: mpsc::UnboundedSender<()>,
    gate: Option<oneshot::Receiver<()>>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    let gate = Arc::new(std::sync::Mutex::new(gate));
    Workflow::new("two-steps", move |ctx: Context, _: u64| {
        let (starts, after_first, entered, gate) = (
            starts.clone(),
            after_first.clone(),
            entered.clone(),
            gate.clone(),
        );
        Box::pin(async move {
            ctx.step("first", |_memo| {
                let (starts, after_first) = (starts.clone(), after_first.clone());
                async move {
                    starts.lock().unwrap().push(format!("{who}: first"));
                    if let Some(after_first) = &after_first {
                        after_first();
                    }
                    Ok::<u64, Error>(1)
                }
            })
            .await?;
            ctx.step("second", |_memo| {
                let (starts, entered, gate) = (starts.clone(), entered.clone(), gate.clone());
                async move {
                    starts.lock().unwrap().push(format!("{who}: second"));
                    let _ = entered.send(());
                    let gate = gate.lock().unwrap().take();
                    if let Some(gate) = gate {
                        gate.await.unwrap();
                    }
                    Ok::<u64, Error>(2)
                }
            })
            .await
        }) as BoxedRun
    })
}

/// A process whose clock jumps past a whole lease as each of its run log
/// entries (receipts, lease renewals) is written, as many times as `jumps`
/// says when the write starts.
fn jumping_process(
    backend: &Backend,
    clock: &Arc<ManualClock>,
    jumps: &Arc<AtomicU64>,
    name: &str,
) -> Runtime {
    let objects = Arc::new(memo_runtime::testing::FaultInjectingStore::new(
        backend.open(),
    ));
    objects.inject(
        memo_runtime::testing::FaultRule::fail_before(memo_runtime::testing::RequestKind::Create)
            .matching({
                let (clock, jumps) = (clock.clone(), jumps.clone());
                move |path| {
                    let log_entry =
                        path.as_ref().starts_with("runs/") && path.as_ref().contains("/log/");
                    if log_entry
                        && jumps
                            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                            .is_ok()
                    {
                        clock.advance_ms(LEASE.as_millis() as u64 + 1);
                    }
                    false
                }
            }),
    );
    process(&(objects as Arc<dyn ObjectStore>), clock, name)
}

/// Sets `jumps` to `n`.
fn arm(jumps: &Arc<AtomicU64>, n: u64) -> Arc<dyn Fn() + Send + Sync> {
    let jumps = jumps.clone();
    Arc::new(move || jumps.store(n, SeqCst))
}

/// Worker A's clock jumps past its lease while the first step's receipt is
/// written, so A renews the lease before the second step's body; the clock
/// jumps past the lease again while that renewal is written. A renewed
/// lease is not a live one: A must renew again (or stop) before the body
/// starts, or its body runs under an expired lease while worker B, finding
/// the lease expired, takes the run over and runs the same body.
#[tokio::test]
async fn a_step_body_does_not_start_under_a_lease_that_expired_during_its_renewal() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(3_000_000));
        let jumps = Arc::new(AtomicU64::new(0));
        let a = jumping_process(&backend, &clock, &jumps, "worker-a");
        let b = process(&backend.open(), &clock, "worker-b");
        let order = RunId::new("renewal-race-1").unwrap();
        let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (entered, mut entered_rx) = mpsc::unbounded_channel();
        let (open_gate, gate) = oneshot::channel();
        // A's first body arms two jumps: at its receipt, then at the renewal.
        let arm_two = arm(&jumps, 2);
        let a_workflow = two_steps(
            "a",
            starts.clone(),
            Some(arm_two),
            entered.clone(),
            Some(gate),
        );
        let mut a_run = Box::pin(a.run(&order, &1, &a_workflow));
        tokio::select! {
            done = &mut a_run => panic!("{name}: A finished inside the gate: {done:?}"),
            _ = entered_rx.recv() => {}
        }
        assert_eq!(
            jumps.load(SeqCst),
            0,
            "{name}: the clock did not jump twice"
        );

        // A's second body has started: its attempt must hold a live lease.
        let b_workflow = two_steps("b", starts.clone(), None, entered, None);
        match b.run(&order, &1, &b_workflow).await {
            Err(Error::LeaseHeld { owner, .. }) => assert_eq!(owner, "worker-a", "{name}"),
            other => panic!(
                "{name}: B took over while A's body ran under a lease that expired as it was renewed: {other:?}"
            ),
        }

        open_gate.send(()).unwrap();
        assert_eq!(a_run.await.unwrap(), 2, "{name}");
        assert_eq!(*starts.lock().unwrap(), ["a: first", "a: second"], "{name}");
    }
}

/// If the clock jumps past the lease during every renewal, the attempt
/// gives up before the body (the lease is lost, the run stays open for the
/// next attempt) rather than renew forever or start the body under an
/// expired lease.
#[tokio::test]
async fn an_attempt_whose_lease_expires_during_every_renewal_stops_before_the_body() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(4_000_000));
        let jumps = Arc::new(AtomicU64::new(0));
        let a = jumping_process(&backend, &clock, &jumps, "worker-a");
        let order = RunId::new("renewal-race-2").unwrap();
        let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (entered, _entered_rx) = mpsc::unbounded_channel();
        let workflow = two_steps("a", starts.clone(), Some(arm(&jumps, 100)), entered, None);
        match a.run(&order, &1, &workflow).await {
            Err(Error::LeaseLost { attempt, .. }) => assert_eq!(attempt, 1, "{name}"),
            other => panic!("{name}: expected the attempt to lose its lease, got {other:?}"),
        }
        assert_eq!(*starts.lock().unwrap(), ["a: first"], "{name}");
        jumps.store(0, SeqCst);
        let record = a.status(&order).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Running, "{name}");
        assert_eq!(a.run(&order, &1, &workflow).await.unwrap(), 2, "{name}");
    }
}

/// A runtime store that holds the first lease renewal written after
/// `armed` is set, tells the test it got there, and forwards it once
/// released; then tells the test the renewal is in effect.
#[derive(Debug)]
struct HoldsARenewal {
    inner: Arc<dyn RuntimeStore>,
    armed: AtomicBool,
    held: std::sync::Mutex<Option<HeldRenewal>>,
}

/// The renewal's side of [`HoldsARenewal`]: `reached`, `release`, `applied`.
type HeldRenewal = (
    oneshot::Sender<()>,
    oneshot::Receiver<()>,
    oneshot::Sender<()>,
);

#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl RuntimeStore for HoldsARenewal {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord, Error> {
        self.inner.create_run(run).await
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>, Error> {
        self.inner.load_run(run_id).await
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord, Error> {
        let renewal = matches!(commit.status, Some(StatusChange::Lease { .. }));
        let held = (renewal && self.armed.load(SeqCst))
            .then(|| self.held.lock().unwrap().take())
            .flatten();
        let Some((reached, release, applied)) = held else {
            return self.inner.atomic_apply(run_id, commit).await;
        };
        let _ = reached.send(());
        let _ = release.await;
        let record = self.inner.atomic_apply(run_id, commit).await;
        let _ = applied.send(());
        record
    }

    async fn load_receipts(
        &self,
        run_id: &RunId,
        after: Option<u64>,
    ) -> Result<Vec<StepReceipt>, Error> {
        self.inner.load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>, Error> {
        self.inner.load_snapshot(run_id).await
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord, Error> {
        self.inner.append_input(run_id, input).await
    }

    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>), Error> {
        self.inner.append_input_and_load(run_id, input).await
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>, Error> {
        self.inner.load_inputs(run_id).await
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>), Error> {
        self.inner.load_receipts_and_inputs(run_id).await
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>), Error> {
        // An attempt's start, never a renewal: nothing to hold.
        self.inner.atomic_apply_and_load(run_id, commit).await
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>, Error> {
        self.inner.list_runs(status).await
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>, Error> {
        self.inner.list_run_ids(status).await
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage, Error> {
        self.inner.list_run_ids_page(status, after, limit).await
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage, Error> {
        self.inner.list_runs_page(status, after, limit).await
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool, Error> {
        self.inner.delete_run(run_id, incarnation).await
    }

    async fn delete_run_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> Result<memo_runtime::runtime_store::RunDeletion, Error> {
        self.inner.delete_run_at(run_id, incarnation, at_ms).await
    }

    async fn holds_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool, Error> {
        self.inner.holds_remains(run_id, incarnation).await
    }

    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<bool>, Error> {
        self.inner.holds_deletion(run_id, incarnation).await
    }

    async fn forget_deleted(&self, run_id: &RunId, incarnation: Incarnation) -> Result<(), Error> {
        self.inner.forget_deleted(run_id, incarnation).await
    }

    async fn clear_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool, Error> {
        self.inner.clear_remains(run_id, incarnation).await
    }

    async fn forget_deleted_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<(), Error>> {
        self.inner.forget_deleted_all(deleted).await
    }

    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: u64,
    ) -> Vec<Result<(), Error>> {
        self.inner.forget_deleted_all_at(deleted, at_ms).await
    }

    fn use_clock(&self, clock: Arc<dyn memo_runtime::clock::Clock>) {
        self.inner.use_clock(clock);
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> Result<(), Error> {
        self.inner
            .record_attempt_cost(run_id, incarnation, cost)
            .await
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>, Error> {
        self.inner.load_attempt_costs(run_id, incarnation).await
    }
}

/// Two steps: the first tells `entered` and waits at `first_gate`, the
/// second records its start in `starts`, tells `entered` and waits at
/// `second_gate` (if any).
fn gated_steps(
    who: &'static str,
    starts: Arc<std::sync::Mutex<Vec<String>>>,
    entered: mpsc::UnboundedSender<&'static str>,
    first_gate: Option<oneshot::Receiver<()>>,
    second_gate: Option<oneshot::Receiver<()>>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    let gates = Arc::new(std::sync::Mutex::new((first_gate, second_gate)));
    Workflow::new("gated-steps", move |ctx: Context, _: u64| {
        let (starts, entered, gates) = (starts.clone(), entered.clone(), gates.clone());
        Box::pin(async move {
            ctx.step("first", |_memo| {
                let (entered, gates) = (entered.clone(), gates.clone());
                async move {
                    let _ = entered.send("first");
                    let gate = gates.lock().unwrap().0.take();
                    if let Some(gate) = gate {
                        gate.await.unwrap();
                    }
                    Ok::<u64, Error>(1)
                }
            })
            .await?;
            ctx.step("second", |_memo| {
                let (starts, entered, gates) = (starts.clone(), entered.clone(), gates.clone());
                async move {
                    starts.lock().unwrap().push(format!("{who}: second"));
                    let _ = entered.send("second");
                    let gate = gates.lock().unwrap().1.take();
                    if let Some(gate) = gate {
                        gate.await.unwrap();
                    }
                    Ok::<u64, Error>(2)
                }
            })
            .await
        }) as BoxedRun
    })
}

/// Worker A's periodic renewal is written slowly: it lands only after A's
/// lease expired, A's step renewed the lease on its own and would start the
/// next body. The slow renewal's expiry is the earlier one, so once it
/// lands the store holds A's lease as expired and worker B may take the run
/// over: A must not go on believing the later expiry. Renewals of one
/// attempt do not overlap, so the step's renewal waits for the periodic
/// one, finds the lease expired, and renews again before the body.
#[tokio::test(start_paused = true)]
async fn a_slow_periodic_renewal_does_not_cut_short_the_lease_of_a_body() {
    let objects: Arc<dyn ObjectStore> =
        Arc::new(memo_runtime::object_store::memory::InMemory::new());
    let t0 = 6_000_000;
    let clock = Arc::new(ManualClock::new(t0));
    let (reached_tx, reached) = oneshot::channel();
    let (release, release_rx) = oneshot::channel();
    let (applied_tx, applied) = oneshot::channel();
    let store = Arc::new(HoldsARenewal {
        inner: Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs")),
        armed: AtomicBool::new(false),
        held: std::sync::Mutex::new(Some((reached_tx, release_rx, applied_tx))),
    });
    let a = Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(store.clone())
        .clock(clock.clone())
        .lease(LEASE)
        .worker_id("worker-a")
        .build()
        .unwrap();
    let b = process(&objects, &clock, "worker-b");
    let order = RunId::new("slow-renewal-1").unwrap();
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (entered, mut entered_rx) = mpsc::unbounded_channel();
    let (open_first, first_gate) = oneshot::channel();
    let (open_second, second_gate) = oneshot::channel();
    let a_workflow = gated_steps(
        "a",
        starts.clone(),
        entered.clone(),
        Some(first_gate),
        Some(second_gate),
    );
    let a_run = tokio::spawn({
        let order = order.clone();
        async move { a.run(&order, &1, &a_workflow).await }
    });
    assert_eq!(entered_rx.recv().await, Some("first"));

    // A's periodic renewal starts a second into the lease, and is held.
    clock.advance_ms(1_000);
    store.armed.store(true, SeqCst);
    wait_reached(reached, "A's lease renewal").await;
    // A's lease expires by its clock; A's first body ends and its step
    // renews the lease before the second body.
    clock.advance_ms(LEASE.as_millis() as u64 + 1_000);
    open_first.send(()).unwrap();
    // Lets A go as far as it can (paused time moves only when all is idle).
    tokio::time::sleep(Duration::from_millis(1)).await;
    // The periodic renewal lands, with the earlier expiry.
    release.send(()).unwrap();
    applied.await.unwrap();
    assert_eq!(entered_rx.recv().await, Some("second"));

    // A's second body has started: its attempt must hold a live lease.
    let b_workflow = gated_steps("b", starts.clone(), entered, None, None);
    match b.run(&order, &1, &b_workflow).await {
        Err(Error::LeaseHeld { owner, .. }) => assert_eq!(owner, "worker-a"),
        other => panic!(
            "B took over while A's body ran under a lease a slower renewal cut short: {other:?}"
        ),
    }
    open_second.send(()).unwrap();
    assert_eq!(a_run.await.unwrap().unwrap(), 2);
    assert_eq!(*starts.lock().unwrap(), ["a: second"]);
}
