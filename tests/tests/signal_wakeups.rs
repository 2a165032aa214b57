//! A signal wakes the run that waits for it however a worker's poll falls
//! around it (found by the fleet benchmark, session 30: a run waited for
//! its signal until its lease expired, or for ever). Each test stages one
//! interleaving of three processes over one store: the run's attempt, the
//! signaller and a worker that polls, with a request held where the poll
//! must fall.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunStatus};
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, MemoStore, RunId};
use memo_tests::pause::{Held, Pauses, wait_reached};

const START_MS: u64 = 24 * 3600 * 1000;

/// A process over `objects`: its own store instances, the shared clock,
/// and waits that suspend at once.
fn process(objects: Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, "runs")))
        .clock(clock.clone())
        .signal_wait(Duration::ZERO)
        .timer_wait(Duration::ZERO)
        .build()
        .unwrap()
}

type Approved = futures::future::BoxFuture<'static, Result<bool, Error>>;

/// Waits for its approval, with no deadline, and ends with it.
fn approval() -> Workflow<impl Fn(Context, u32) -> Approved + Clone + Send + Sync> {
    Workflow::new("approval", |ctx: Context, _: u32| {
        Box::pin(async move { ctx.wait_for_signal::<bool>("approve").await }) as Approved
    })
}

fn worker(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Worker {
    Worker::builder(process(objects.clone(), clock))
        .workflow(&approval())
        .build()
}

async fn status(runtime: &Runtime, run_id: &RunId) -> RunStatus {
    runtime
        .status(run_id)
        .await
        .unwrap()
        .expect("the run")
        .status
}

/// A worker polls after the signaller wrote the run's wake-up and before
/// the signal itself landed: it finds the run waiting with nothing to see.
/// With the wake-up written before the signal only (as it was), the poll
/// deleted it, the signal then landed with none, and the run waited for
/// ever. The wake-up due now is written once the signal is recorded.
#[tokio::test]
async fn a_poll_between_a_signals_wake_up_and_the_signal_leaves_the_run_due() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let run_id = RunId::new("approval-1").unwrap();
    let runtime = process(objects.clone(), &clock);
    let outcome = runtime.run(&run_id, &1, &approval()).await;
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );

    // The signaller's append of the signal (its first put under the run's
    // folder) is held.
    let (paused, pause) = Pauses::new(objects.clone(), Held::Put, Path::from("runs/runs"));
    let signaller = process(Arc::new(paused), &clock);
    let signal = tokio::spawn({
        let run_id = run_id.clone();
        async move { signaller.signal(&run_id, "approve", &true).await }
    });
    wait_reached(pause.reached, "the signal's append").await;

    let polling = worker(&objects, &clock);
    let report = polling.wake_due().await.unwrap();
    assert_eq!(report.resumed, 0, "{report:?}");
    drop(pause.release);
    signal.await.unwrap().unwrap();

    // The clock has not moved: only a wake-up due now starts the run.
    let report = polling.wake_due().await.unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert_eq!(status(&runtime, &run_id).await, RunStatus::Completed);
}

/// What [`signalled_while_suspending`] staged.
struct Staged {
    objects: Arc<dyn ObjectStore>,
    clock: Arc<ManualClock>,
    run_id: RunId,
    signaller: Runtime,
}

/// Stages a signal that lands while the attempt that waits for it holds its
/// lease, after the attempt last looked at the run's inputs (it is
/// suspending). The signaller sees the lease held and makes the run due at
/// no time now: its wake-up stays due a lease from now (a minute), and a
/// worker's poll finds nothing to wake (it found the lease held and moved
/// a wake-up due now to the lease's expiry, a load of the run and two
/// requests, before session 48). Returns once the attempt has suspended,
/// its lease let go.
async fn signalled_while_suspending(run: &str, input: u32) -> Staged {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let run_id = RunId::new(run).unwrap();

    // The attempt's first delete in the due-run index is its lease entry's,
    // once it committed its suspension and before it releases its lease.
    let (paused, pause) = Pauses::new(objects.clone(), Held::Delete, Path::from("memo/due"));
    let waiter = process(Arc::new(paused), &clock);
    let attempt = tokio::spawn({
        let run_id = run_id.clone();
        async move { waiter.run(&run_id, &input, &approval()).await }
    });
    wait_reached(pause.reached, "the lease entry's delete").await;

    let signaller = process(objects.clone(), &clock);
    signaller.signal(&run_id, "approve", &true).await.unwrap();
    let due: Vec<_> = signaller.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(
        due.iter().all(|e| e.due_at_ms >= START_MS + 60_000),
        "nothing due before the lease expires: {due:?}"
    );
    let report = worker(&objects, &clock).wake_due().await.unwrap();
    assert_eq!(
        (report.entries, report.resumed, report.busy),
        (0, 0, 0),
        "{report:?}"
    );

    drop(pause.release);
    let outcome = attempt.await.unwrap();
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );
    Staged {
        objects,
        clock,
        run_id,
        signaller,
    }
}

/// As staged by [`signalled_while_suspending`]: the attempt looks at the
/// inputs once more after it released its lease, and makes the run due at
/// once.
#[tokio::test]
async fn a_signal_that_lands_while_its_waiter_suspends_wakes_the_run_at_once() {
    let staged = signalled_while_suspending("approval-2", 2).await;

    // The clock has not moved: the lease would expire a minute from now.
    let report = worker(&staged.objects, &staged.clock)
        .wake_due()
        .await
        .unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert_eq!(
        status(&staged.signaller, &staged.run_id).await,
        RunStatus::Completed
    );
}

/// As staged by [`signalled_while_suspending`]: the signal's wake-up stays
/// due at the lease's expiry, where the waiter's own lease entry is due
/// too. The waiter deletes that entry when it suspends, and, should it stop
/// before its look for the signal once it let go, only the signal's
/// wake-up is left to wake the run. So it is an entry of its own (as the
/// wake-up a worker moved to a held lease was, before session 48): it is
/// still there once the waiter is done.
#[tokio::test]
async fn a_signals_wake_up_kept_for_a_held_lease_outlives_the_holders_lease_entry() {
    let staged = signalled_while_suspending("approval-4", 4).await;
    let lease_expiry = START_MS + 60_000;
    let due: Vec<_> = staged
        .signaller
        .due_runs(u64::MAX)
        .try_collect()
        .await
        .unwrap();
    assert!(
        due.iter()
            .any(|e| e.run_id == staged.run_id && e.due_at_ms == lease_expiry),
        "{due:?}"
    );
}

/// A worker's poll wakes a submitted run and drives its attempt, which
/// suspends in the wait; before the poll deletes the entry it woke, a
/// signal lands, in the same millisecond. The signal's wake-up due now, and
/// the waiter's own look after it let go, had the name of the entry the
/// poll woke: each write found that object there (create-once) and
/// succeeded, and the poll's delete of its woken entry then took the run's
/// every wake-up, so it slept for good (seed 3263 of the worker-loops
/// world). Each of those entries is an object of its writer's own now.
#[tokio::test]
async fn a_signal_in_the_millisecond_of_the_entry_a_poll_woke_survives_the_polls_delete() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let run_id = RunId::new("approval-3").unwrap();
    let submitter = worker(&objects, &clock);
    submitter.submit(&approval(), &run_id, &3).await.unwrap();

    // The poll's first delete in the due-run index: its attempt's lease
    // entry, once the attempt committed its suspension and before it let
    // go (the entry the poll woke is deleted after that).
    let (paused, pause) = Pauses::new(objects.clone(), Held::Delete, Path::from("memo/due"));
    let polling = Worker::builder(process(Arc::new(paused), &clock))
        .workflow(&approval())
        .build();
    let poll = tokio::spawn(async move { polling.wake_due().await });
    wait_reached(pause.reached, "the poll's lease entry delete").await;

    let signaller = process(objects.clone(), &clock);
    signaller.signal(&run_id, "approve", &true).await.unwrap();
    drop(pause.release);
    let report = poll.await.unwrap().unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert_eq!(status(&signaller, &run_id).await, RunStatus::Running);

    // The clock has not moved: the signal's wake-up, due now, is left.
    let report = worker(&objects, &clock).wake_due().await.unwrap();
    assert_eq!(report.resumed, 1, "{report:?}");
    assert_eq!(status(&signaller, &run_id).await, RunStatus::Completed);
}

/// A signal recorded while the attempt that will wait for it holds the
/// run's lease (its first step is running): the signaller makes the run
/// due at no time now (its wake-up stays due when the lease would expire,
/// should the attempt die), and the attempt finds the signal itself when
/// it reaches the wait (its step's commit folds it in) and ends the run,
/// with no worker's poll.
#[tokio::test]
async fn a_signal_recorded_while_its_run_is_leased_is_found_by_the_attempt_itself() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(START_MS));
    let run_id = RunId::new("approval-5").unwrap();
    let (started, mut step_started) = tokio::sync::mpsc::channel::<()>(1);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let opens = gate.clone();
    let gated = Workflow::new("gated-approval", move |ctx: Context, _: u32| {
        let (started, gate) = (started.clone(), gate.clone());
        Box::pin(async move {
            ctx.step("first", move |_memo| {
                let (started, gate) = (started.clone(), gate.clone());
                async move {
                    started.send(()).await.ok();
                    let _open = gate.acquire().await;
                    Ok::<_, Error>(())
                }
            })
            .await?;
            ctx.wait_for_signal::<bool>("approve").await
        }) as Approved
    });
    let waiter = process(objects.clone(), &clock);
    let attempt = tokio::spawn({
        let (run_id, gated) = (run_id.clone(), gated.clone());
        async move { waiter.run(&run_id, &5, &gated).await }
    });
    step_started.recv().await.expect("the step started");

    let signaller = process(objects.clone(), &clock);
    signaller.signal(&run_id, "approve", &true).await.unwrap();
    let due: Vec<_> = signaller.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(
        !due.is_empty() && due.iter().all(|e| e.due_at_ms >= START_MS + 60_000),
        "nothing due before the lease expires: {due:?}"
    );
    opens.add_permits(1);
    let outcome = attempt.await.unwrap();
    assert!(matches!(outcome, Ok(true)), "{outcome:?}");
}
