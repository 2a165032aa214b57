//! Signals with deadlines (issue 23, item 2): `wait_for_signal_timeout`
//! ends with the signal or with a timeout, and records which, so that every
//! replay takes the same branch; a signal sent after the deadline is left for
//! a later wait. Workers and the sender are separate processes: runtimes over
//! separate store instances on one object store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::InputPhase;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Error, MemoStore, RunId, clock::ManualClock, runtime_store::ObjectStoreRuntimeStore,
};

const HOUR_MS: u64 = 3_600_000;

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

/// How often each branch's step body ran.
#[derive(Default)]
struct Branches {
    answered: AtomicU64,
    expired: AtomicU64,
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// Waits an hour for `approve: bool`, runs a step for the branch taken, then
/// waits (without a deadline) for another `approve`.
fn approval(
    branches: Arc<Branches>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    Workflow::new("approval", move |ctx: Context, _: u64| {
        let branches = branches.clone();
        Box::pin(async move {
            let first: Option<bool> = ctx
                .wait_for_signal_timeout("approve", Duration::from_millis(HOUR_MS))
                .await?;
            let counter = match first {
                Some(_) => &branches.answered,
                None => &branches.expired,
            };
            ctx.step("branch", |_memo| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, Error>(()) }
            })
            .await?;
            let second: bool = ctx.wait_for_signal("approve").await?;
            Ok(format!("{first:?} then {second}"))
        }) as BoxedRun
    })
}

fn waiting(outcome: Result<String, Error>) -> (String, Option<u64>) {
    match outcome {
        Err(Error::Suspended {
            signal, until_ms, ..
        }) => (signal, until_ms),
        other => panic!("expected the run to wait, got {other:?}"),
    }
}

/// The signal comes before the deadline: the wait returns it, on another
/// worker than the one that recorded the deadline, and every replay agrees.
#[tokio::test]
async fn a_signal_before_the_deadline_is_returned_and_replayed() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let (a, b, sender) = (
        process(&objects, &clock),
        process(&objects, &clock),
        process(&objects, &clock),
    );
    let branches = Arc::new(Branches::default());
    let flow = approval(branches.clone());
    let run = RunId::new("approve-1").unwrap();

    let deadline = 1_000 + HOUR_MS;
    assert_eq!(
        waiting(a.run(&run, &1, &flow).await),
        ("approve".to_string(), Some(deadline))
    );
    clock.advance_ms(HOUR_MS - 1);
    sender.signal(&run, "approve", &true).await.unwrap();
    assert_eq!(
        waiting(b.run(&run, &1, &flow).await),
        ("approve".to_string(), None),
        "the first wait took the signal; the second waits without a deadline"
    );
    clock.advance_ms(HOUR_MS); // past the deadline: the recorded outcome stands
    sender.signal(&run, "approve", &false).await.unwrap();
    assert_eq!(
        a.run(&run, &1, &flow).await.unwrap(),
        "Some(true) then false"
    );
    assert_eq!(branches.answered.load(Ordering::SeqCst), 1);
    assert_eq!(branches.expired.load(Ordering::SeqCst), 0);
}

/// The deadline passes first: the timeout is recorded, and a signal sent
/// after it (before the run even looked again) is not consumed by the
/// timed wait but by the next wait; replays on either worker agree.
#[tokio::test]
async fn a_deadline_that_passes_first_is_recorded_and_leaves_a_late_signal_pending() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let (a, b, sender) = (
        process(&objects, &clock),
        process(&objects, &clock),
        process(&objects, &clock),
    );
    let branches = Arc::new(Branches::default());
    let flow = approval(branches.clone());
    let run = RunId::new("approve-2").unwrap();

    waiting(a.run(&run, &1, &flow).await);
    clock.advance_ms(HOUR_MS); // the deadline, exactly
    clock.advance_ms(1);
    sender.signal(&run, "approve", &true).await.unwrap();
    assert_eq!(b.run(&run, &1, &flow).await.unwrap(), "None then true");
    let receipts = a.runtime_store().load_receipts(&run, None).await.unwrap();
    let steps: Vec<&str> = receipts.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(
        steps,
        [
            "memo.signal-deadline:approve",
            "memo.signal-timeout:approve",
            "branch",
            "signal:approve"
        ]
    );
    let inputs = a.runtime_store().load_inputs(&run).await.unwrap();
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].phase, InputPhase::Consumed);
    assert_eq!(inputs[0].consumed_by, Some(3), "taken by the second wait");
    assert_eq!(branches.expired.load(Ordering::SeqCst), 1);
    assert_eq!(branches.answered.load(Ordering::SeqCst), 0);
}

/// The timeout, once recorded, is what every later attempt replays, even
/// with a signal now pending.
#[tokio::test]
async fn a_recorded_timeout_is_replayed_whatever_comes_later() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let (a, b) = (process(&objects, &clock), process(&objects, &clock));
    let branches = Arc::new(Branches::default());
    let flow = approval(branches.clone());
    let run = RunId::new("approve-3").unwrap();

    waiting(a.run(&run, &1, &flow).await);
    clock.advance_ms(HOUR_MS);
    assert_eq!(
        waiting(a.run(&run, &1, &flow).await),
        ("approve".to_string(), None)
    );
    clock.advance_ms(1);
    b.signal(&run, "approve", &false).await.unwrap();
    assert_eq!(b.run(&run, &1, &flow).await.unwrap(), "None then false");
    assert_eq!(branches.expired.load(Ordering::SeqCst), 1);
    assert_eq!(branches.answered.load(Ordering::SeqCst), 0);
}

/// A signal sent in time counts even if the run, suspended, is only run
/// again after the deadline.
#[tokio::test]
async fn a_signal_sent_in_time_wins_over_a_late_resume() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let (a, sender) = (process(&objects, &clock), process(&objects, &clock));
    let branches = Arc::new(Branches::default());
    let flow = approval(branches.clone());
    let run = RunId::new("approve-4").unwrap();

    waiting(a.run(&run, &1, &flow).await);
    clock.advance_ms(HOUR_MS); // at the deadline: still in time
    sender.signal(&run, "approve", &true).await.unwrap();
    clock.advance_ms(HOUR_MS);
    assert_eq!(
        waiting(a.run(&run, &1, &flow).await),
        ("approve".to_string(), None)
    );
    assert_eq!(branches.answered.load(Ordering::SeqCst), 1);
    assert_eq!(branches.expired.load(Ordering::SeqCst), 0);
}
