//! `Context::select` (issue 23, item 2): the first of several signals or a
//! deadline, the winner recorded in the run so every replay takes the same
//! branch; a suspended select is woken by a signal or its deadline through
//! the due-run index.

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::runtime_store::{InputPhase, RunStatus};
use memo_runtime::workflow::{Context, Runtime, Selected, Worker, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

const HOUR_MS: u64 = 3600 * 1000;

fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .timer_wait(Duration::ZERO)
        .signal_poll_interval(Duration::from_millis(1))
        .build()
        .unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// Selects "approve" or "reject" until an hour from its start, then sleeps
/// a day (so the run is replayed after the select), then says who won.
fn review() -> Workflow<impl Fn(Context, ()) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("review", |ctx: Context, (): ()| {
        Box::pin(async move {
            let answer = ctx
                .select_timeout(&["approve", "reject"], Duration::from_millis(HOUR_MS))
                .await?;
            ctx.sleep(Duration::from_millis(24 * HOUR_MS)).await?;
            Ok(match &answer {
                Selected::Signal { name, .. } => format!("{name}: {}", answer.decode::<String>()?),
                _ => "timed out".to_string(),
            })
        }) as BoxedRun
    })
}

fn suspended<T: std::fmt::Debug>(outcome: Result<T, Error>) {
    assert!(
        matches!(outcome, Err(Error::Suspended { .. })),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_first_signal_wins_and_every_replay_takes_its_branch() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let (a, b) = (process(&objects, &clock), process(&objects, &clock));
    let id = RunId::new("review-1").unwrap();
    suspended(a.run(&id, &(), &review()).await);
    b.signal(&id, "reject", "bob").await.unwrap();
    b.signal(&id, "approve", "ada").await.unwrap();
    // The select takes "reject", then the run sleeps.
    suspended(a.run(&id, &(), &review()).await);
    clock.advance_ms(24 * HOUR_MS);
    // Replayed on another process after the sleep: the same winner.
    assert_eq!(b.run(&id, &(), &review()).await.unwrap(), "reject: bob");
    let inputs = a.runtime_store().load_inputs(&id).await.unwrap();
    let phase = |name: &str| inputs.iter().find(|i| i.name == name).unwrap().phase;
    assert_eq!(phase("reject"), InputPhase::Consumed);
    assert_eq!(
        phase("approve"),
        InputPhase::Accepted,
        "the loser stays pending"
    );
}

#[tokio::test]
async fn the_deadline_wins_when_no_signal_came_in_time_and_a_late_one_stays_pending() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let runtime = process(&objects, &clock);
    let id = RunId::new("review-2").unwrap();
    suspended(runtime.run(&id, &(), &review()).await);
    // Run again before anything came: no attempt, nothing written.
    suspended(runtime.run(&id, &(), &review()).await);
    let record = runtime.status(&id).await.unwrap().unwrap();
    assert_eq!(
        record.attempts, 1,
        "a select that still waits starts no attempt"
    );
    clock.advance_ms(HOUR_MS);
    suspended(runtime.run(&id, &(), &review()).await); // timed out, now asleep
    runtime.signal(&id, "approve", "late").await.unwrap();
    clock.advance_ms(24 * HOUR_MS);
    assert_eq!(runtime.run(&id, &(), &review()).await.unwrap(), "timed out");
    let inputs = runtime.runtime_store().load_inputs(&id).await.unwrap();
    assert_eq!(inputs[0].phase, InputPhase::Accepted);
}

#[tokio::test]
async fn a_signal_sent_in_time_wins_even_if_the_run_looks_after_the_deadline() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let runtime = process(&objects, &clock);
    let id = RunId::new("review-3").unwrap();
    suspended(runtime.run(&id, &(), &review()).await);
    runtime.signal(&id, "approve", "ada").await.unwrap();
    clock.advance_ms(2 * HOUR_MS);
    suspended(runtime.run(&id, &(), &review()).await);
    clock.advance_ms(24 * HOUR_MS);
    assert_eq!(
        runtime.run(&id, &(), &review()).await.unwrap(),
        "approve: ada"
    );
}

#[tokio::test]
async fn a_suspended_select_is_woken_by_a_worker_for_a_signal_or_its_deadline() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let (a, b) = (process(&objects, &clock), process(&objects, &clock));
    let review = review();
    let worker = Worker::builder(a.clone()).workflow(&review).build();
    let (signalled, expired) = (
        RunId::new("signalled").unwrap(),
        RunId::new("expired").unwrap(),
    );
    worker.submit(&review, &signalled, &()).await.unwrap();
    worker.submit(&review, &expired, &()).await.unwrap();
    assert_eq!(worker.wake_due().await.unwrap().resumed, 2);
    // Resuming a select that still waits starts no attempt.
    let idle = worker.wake_due().await.unwrap();
    assert_eq!(idle.entries, 0, "{idle:?}");

    b.signal(&signalled, "approve", "ada").await.unwrap();
    let woken = worker.wake_due().await.unwrap();
    assert_eq!(woken.resumed, 1, "{woken:?}");
    clock.advance_ms(HOUR_MS);
    let woken = worker.wake_due().await.unwrap();
    assert_eq!(woken.resumed, 1, "the deadline: {woken:?}");
    clock.advance_ms(24 * HOUR_MS);
    assert_eq!(worker.wake_due().await.unwrap().resumed, 2);
    for (id, out) in [(&signalled, "approve: ada"), (&expired, "timed out")] {
        let record = a.status(id).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Completed, "{id}");
        assert_eq!(a.run(id, &(), &review).await.unwrap(), out);
    }
}

#[tokio::test]
async fn a_select_of_other_signals_than_the_run_recorded_is_non_determinism() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(HOUR_MS));
    let runtime = process(&objects, &clock);
    let id = RunId::new("changed").unwrap();
    suspended(runtime.run(&id, &(), &review()).await);
    let changed = Workflow::new("review", |ctx: Context, (): ()| async move {
        let answer = ctx.select(&["approve", "escalate"], None).await?;
        Ok::<_, Error>(format!("{answer:?}"))
    });
    runtime.signal(&id, "approve", "ada").await.unwrap();
    let outcome = runtime.run(&id, &(), &changed).await;
    assert!(
        matches!(outcome, Err(Error::NonDeterminism { .. })),
        "{outcome:?}"
    );
}
