//! Signals whose payload is not what the run waits for (issue 20, item 10):
//! `memoctl signal RUN approval --payload '"yes"'` to a run waiting for a
//! `bool` must not poison it. Such a signal is never consumed: the run goes
//! on waiting, the signal is recorded as refused (`Abandoned`, in the run's
//! signal list), the next good one gets through, and every replay takes the
//! branch the good one chose. Workers and the operator are separate
//! processes: runtimes over separate store instances on one store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::{InputPhase, RunStatus};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Error, MemoStore, RunId, clock::ManualClock, runtime_store::ObjectStoreRuntimeStore,
};
use memo_tests::fixtures::Backend;
use serde_json::json;

fn process(objects: Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, "runs")))
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// How often each branch's step body ran.
#[derive(Default)]
struct Branches {
    ship: AtomicU64,
    cancel: AtomicU64,
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// Waits for `approval: bool`, ships or cancels in a step, then waits for
/// `parcels: u32`.
fn fulfil(
    branches: Arc<Branches>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    Workflow::new("fulfil", move |ctx: Context, _: u64| {
        let branches = branches.clone();
        Box::pin(async move {
            let approved: bool = ctx.wait_for_signal("approval").await?;
            let branch = if approved {
                ctx.step("ship", |_memo| {
                    branches.ship.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, Error>("shipped".to_string()) }
                })
                .await?
            } else {
                ctx.step("cancel", |_memo| {
                    branches.cancel.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, Error>("cancelled".to_string()) }
                })
                .await?
            };
            let parcels: u32 = ctx.wait_for_signal("parcels").await?;
            Ok(format!("{branch} {parcels}"))
        }) as BoxedRun
    })
}

async fn expect_waiting_for(
    worker: &Runtime,
    run: &RunId,
    workflow: &Workflow<impl Fn(Context, u64) -> BoxedRun>,
    signal: &str,
    name: &str,
) {
    match worker.run(run, &1, workflow).await {
        Err(Error::Suspended {
            signal: waiting, ..
        }) => assert_eq!(waiting, signal, "{name}"),
        other => panic!("{name}: expected the run to wait for {signal:?}, got {other:?}"),
    }
}

/// The operator sends `"yes"` (as `memoctl signal` sends JSON) to a run
/// waiting for a `bool`: the run keeps waiting and records the signal as
/// refused; `true` sent afterwards gets through. A bad and a good signal
/// pending at once: the bad one is refused and the good one taken in the
/// same attempt. Every replay, in any process, takes the branch `true`
/// chose, and the run completes.
#[tokio::test]
async fn a_signal_of_the_wrong_type_is_refused_and_the_next_good_one_gets_through() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(1_000_000));
        let branches = Arc::new(Branches::default());
        let workflow = fulfil(branches.clone());
        let worker = process(backend.open(), &clock);
        let other_worker = process(backend.open(), &clock);
        let operator = process(backend.open(), &clock);
        let run = RunId::new("order-9").unwrap();

        expect_waiting_for(&worker, &run, &workflow, "approval", name).await;
        operator
            .signal(&run, "approval", &json!("yes"))
            .await
            .unwrap();
        expect_waiting_for(&worker, &run, &workflow, "approval", name).await;
        expect_waiting_for(&other_worker, &run, &workflow, "approval", name).await;
        let inputs = operator.runtime_store().load_inputs(&run).await.unwrap();
        assert_eq!(inputs.len(), 1, "{name}");
        assert_eq!(
            (inputs[0].phase, inputs[0].consumed_by),
            (InputPhase::Abandoned, None),
            "{name}: the bad signal is not recorded as refused"
        );

        operator
            .signal(&run, "approval", &json!(true))
            .await
            .unwrap();
        expect_waiting_for(&worker, &run, &workflow, "parcels", name).await;
        // Replays, here and in another process, take the branch `true` chose.
        for replaying in [&worker, &other_worker, &worker] {
            expect_waiting_for(replaying, &run, &workflow, "parcels", name).await;
        }
        assert_eq!(branches.ship.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!(branches.cancel.load(Ordering::SeqCst), 0, "{name}");

        operator
            .signal(&run, "parcels", &json!("three"))
            .await
            .unwrap();
        operator.signal(&run, "parcels", &json!(3)).await.unwrap();
        assert_eq!(
            other_worker.run(&run, &1, &workflow).await.unwrap(),
            "shipped 3",
            "{name}"
        );
        assert_eq!(worker.run(&run, &1, &workflow).await.unwrap(), "shipped 3");
        let record = operator.status(&run).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Completed, "{name}");
        let phases: Vec<_> = operator
            .runtime_store()
            .load_inputs(&run)
            .await
            .unwrap()
            .into_iter()
            .map(|input| (input.name, input.phase))
            .collect();
        assert_eq!(
            phases,
            [
                ("approval".to_string(), InputPhase::Abandoned),
                ("approval".to_string(), InputPhase::Consumed),
                ("parcels".to_string(), InputPhase::Abandoned),
                ("parcels".to_string(), InputPhase::Consumed),
            ],
            "{name}"
        );
        assert_eq!(branches.ship.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!(branches.cancel.load(Ordering::SeqCst), 0, "{name}");
    }
}

/// A refused signal stays refused: sending it again records nothing new
/// (it is the same signal) and does not revive it for a later wait.
#[tokio::test]
async fn a_refused_signal_sent_again_stays_refused() {
    let backend = Backend::in_memory();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let branches = Arc::new(Branches::default());
    let workflow = fulfil(branches.clone());
    let worker = process(backend.open(), &clock);
    let run = RunId::new("order-10").unwrap();
    worker.signal(&run, "approval", &"yes").await.unwrap_err(); // no run yet
    expect_waiting_for(&worker, &run, &workflow, "approval", "").await;
    worker.signal(&run, "approval", &"yes").await.unwrap();
    expect_waiting_for(&worker, &run, &workflow, "approval", "").await;
    worker.signal(&run, "approval", &"yes").await.unwrap();
    expect_waiting_for(&worker, &run, &workflow, "approval", "").await;
    let inputs = worker.runtime_store().load_inputs(&run).await.unwrap();
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].phase, InputPhase::Abandoned);
    worker.signal(&run, "approval", &false).await.unwrap();
    expect_waiting_for(&worker, &run, &workflow, "parcels", "").await;
    assert_eq!(branches.cancel.load(Ordering::SeqCst), 1);
}
