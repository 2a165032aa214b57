//! Resuming is cheap (issue 23, item 6): a run waiting for a signal or a
//! timer that is not there yet is not started as a new attempt, and writes
//! nothing, however often it is resumed or recovered (before, five
//! recoveries of three waiting runs grew the store from 18 to 51 objects);
//! `Runtime::resume` continues a run knowing only its id. The worker that
//! recovers is another process: a runtime over separate store instances.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::RunStatus;
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

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// After a first step: input 0 waits for the signal `go`; 1 sleeps an hour;
/// 2 waits for `go` for two hours.
fn waiter() -> Workflow<impl Fn(Context, u8) -> BoxedRun + Send + Sync + 'static> {
    Workflow::new("waiter", |ctx: Context, kind: u8| {
        Box::pin(async move {
            ctx.step("first", |_memo| async { Ok::<_, Error>(()) })
                .await?;
            Ok(match kind {
                0 => format!("got {}", ctx.wait_for_signal::<u32>("go").await?),
                1 => {
                    ctx.sleep(Duration::from_millis(HOUR_MS)).await?;
                    "slept".to_string()
                }
                _ => format!(
                    "got {:?}",
                    ctx.wait_for_signal_timeout::<u32>("go", Duration::from_millis(2 * HOUR_MS))
                        .await?
                ),
            })
        }) as BoxedRun
    })
}

/// Every object in the store with its version.
async fn snapshot(objects: &Arc<dyn ObjectStore>) -> Vec<(String, Option<String>)> {
    let mut all: Vec<_> = objects
        .list(None)
        .map_ok(|meta| (meta.location.to_string(), meta.e_tag))
        .try_collect()
        .await
        .unwrap();
    all.sort();
    all
}

#[tokio::test]
async fn waiting_runs_resumed_or_recovered_again_and_again_write_nothing() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let (worker, recoverer) = (process(&objects, &clock), process(&objects, &clock));
    let flow = waiter();
    let runs: Vec<RunId> = (0..3u8)
        .map(|i| RunId::new(format!("waiter-{i}")).unwrap())
        .collect();
    for (kind, run) in runs.iter().enumerate() {
        let outcome = worker.run(run, &(kind as u8), &flow).await;
        assert!(
            matches!(outcome, Err(Error::Suspended { .. })),
            "{outcome:?}"
        );
    }
    let before = snapshot(&objects).await;
    // The signal wait marked itself (pinned: a step name of the history).
    let receipts = worker
        .runtime_store()
        .load_receipts(&runs[0], None)
        .await
        .unwrap();
    let steps: Vec<&str> = receipts.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(steps, ["first", "memo.wait:go"]);
    assert!(receipts[1].output.is_empty());

    for round in 0..5 {
        clock.advance_ms(1_000);
        let recovery = recoverer.recover(&flow).await.unwrap();
        assert_eq!(recovery.resumed.len(), 3, "round {round}");
        for (run, outcome) in &recovery.resumed {
            assert!(
                matches!(outcome, Err(Error::Suspended { .. })),
                "round {round}, {run}: {outcome:?}"
            );
        }
        for (kind, run) in runs.iter().enumerate() {
            let resumed: Result<String, Error> = recoverer.resume(run, &flow).await;
            assert!(
                matches!(resumed, Err(Error::Suspended { .. })),
                "{kind}: {resumed:?}"
            );
            let again = worker.run(run, &(kind as u8), &flow).await;
            assert!(
                matches!(again, Err(Error::Suspended { .. })),
                "{kind}: {again:?}"
            );
        }
    }
    let after = snapshot(&objects).await;
    assert_eq!(after.len(), before.len(), "idle resumes created no object");
    assert_eq!(after, before, "idle resumes wrote nothing");
    for run in &runs {
        let record = worker.status(run).await.unwrap().unwrap();
        assert_eq!(record.attempts, 1, "{run}: no attempt was started");
    }

    // What they wait for comes: each continues, on the recovering worker.
    recoverer.signal(&runs[0], "go", &7u32).await.unwrap();
    let out: String = recoverer.resume(&runs[0], &flow).await.unwrap();
    assert_eq!(out, "got 7");
    let receipts = worker
        .runtime_store()
        .load_receipts(&runs[0], None)
        .await
        .unwrap();
    let steps: Vec<&str> = receipts.iter().map(|r| r.step.as_str()).collect();
    assert_eq!(steps, ["first", "memo.wait:go", "signal:go"]);
    clock.advance_ms(HOUR_MS);
    let out: String = recoverer.resume(&runs[1], &flow).await.unwrap();
    assert_eq!(out, "slept");
    clock.advance_ms(HOUR_MS);
    let out: String = recoverer.resume(&runs[2], &flow).await.unwrap();
    assert_eq!(out, "got None");
    for run in &runs {
        let record = worker.status(run).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Completed);
        assert_eq!(record.attempts, 2);
    }
}

/// A signal sent to an idle waiting run wakes it at the next resume; an
/// unknown run cannot be resumed.
#[tokio::test]
async fn resume_needs_only_the_run_id() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let (worker, webhook) = (process(&objects, &clock), process(&objects, &clock));
    let flow = waiter();
    let run = RunId::new("waiter-hook").unwrap();
    worker.run(&run, &2, &flow).await.unwrap_err();
    webhook.signal(&run, "go", &3u32).await.unwrap();
    let out: String = webhook.resume(&run, &flow).await.unwrap();
    assert_eq!(out, "got Some(3)");

    let unknown = RunId::new("no-such-run").unwrap();
    let missing: Result<String, Error> = webhook.resume(&unknown, &flow).await;
    assert!(
        matches!(missing, Err(Error::RunNotFound { .. })),
        "{missing:?}"
    );
}
