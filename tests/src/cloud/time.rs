//! Timers, signal deadlines and cancellation across two workers on one
//! store (issue 23): a check every backend passes, given a way to open the
//! store as a new process would.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::clock::ManualClock;
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::store::StoreAndPrefix;
use memo_runtime::workflow::{Cancellation, Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

const DAY_MS: u64 = 24 * 3600 * 1000;

/// A runtime over a new client of the store, as another process has.
fn process(opened: StoreAndPrefix, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(
            opened.store.clone(),
            opened.prefix.clone().join("memo"),
        ))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            opened.store,
            opened.prefix.join("runtime"),
        )))
        .clock(clock.clone())
        .timer_wait(Duration::ZERO)
        .signal_poll_interval(Duration::from_millis(1))
        .build()
        .unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// `sleep` sleeps a year; `deadline` waits two days for "approve"; `cancel`
/// waits for "never" (and is cancelled).
fn timed() -> Workflow<impl Fn(Context, String) -> BoxedRun + Clone + Send + Sync + 'static> {
    Workflow::new("timed", |ctx: Context, kind: String| {
        Box::pin(async move {
            match kind.as_str() {
                "sleep" => {
                    ctx.sleep(Duration::from_millis(365 * DAY_MS)).await?;
                    Ok("a year later".to_string())
                }
                "deadline" => {
                    let two_days = Duration::from_millis(2 * DAY_MS);
                    let answer = ctx
                        .wait_for_signal_timeout::<bool>("approve", two_days)
                        .await?;
                    Ok(format!("{answer:?}"))
                }
                _ => {
                    let never: String = ctx.wait_for_signal("never").await?;
                    Ok(never)
                }
            }
        }) as BoxedRun
    })
}

/// A year-long sleep, a signal deadline that passes and a cancellation,
/// across two workers each with its own client of the store: the timers
/// never fire early, every run ends, and the due-run index is left empty.
pub async fn timers_deadlines_and_cancellation_across_workers(open: impl Fn() -> StoreAndPrefix) {
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let (a, b) = (process(open(), &clock), process(open(), &clock));
    let timed = timed();
    let first = Worker::builder(a.clone()).workflow(&timed).build();
    let second = Worker::builder(b.clone()).workflow(&timed).build();
    let run = |id: &str| RunId::new(id).unwrap();
    for kind in ["sleep", "deadline", "cancel"] {
        first
            .submit(&timed, &run(kind), &kind.to_string())
            .await
            .unwrap();
    }
    let started = second.wake_due().await.unwrap();
    assert_eq!(started.resumed, 3, "{started:?}");

    assert_eq!(
        b.cancel(&run("cancel"), "not needed").await.unwrap(),
        Cancellation::Cancelled
    );

    clock.advance_ms(2 * DAY_MS - 1);
    assert_eq!(
        first.wake_due().await.unwrap().resumed,
        0,
        "nothing is due yet"
    );
    clock.advance_ms(1);
    let expired = first.wake_due().await.unwrap();
    assert_eq!(expired.resumed, 1, "the deadline: {expired:?}");
    assert_eq!(
        a.run(&run("deadline"), &"deadline".to_string(), &timed)
            .await
            .unwrap(),
        "None"
    );

    clock.set_ms(DAY_MS + 365 * DAY_MS - 1);
    assert_eq!(
        second.wake_due().await.unwrap().resumed,
        0,
        "a year less a millisecond"
    );
    clock.advance_ms(1);
    assert_eq!(second.wake_due().await.unwrap().resumed, 1);
    for (kind, status) in [
        ("sleep", RunStatus::Completed),
        ("deadline", RunStatus::Completed),
        ("cancel", RunStatus::Cancelled),
    ] {
        let record = a.status(&run(kind)).await.unwrap().unwrap();
        assert_eq!(record.status, status, "{kind}");
    }
    // The cancellation's own entry is stale: the next poll removes it.
    first.wake_due().await.unwrap();
    let left: Vec<_> = a.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}
