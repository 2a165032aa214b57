//! What an attempt reads before its workflow runs: the run's receipts and
//! inputs as the attempt's start left them, answered with the start itself
//! (`RuntimeStore::atomic_apply_and_load`), never an older copy the
//! worker's store instance held. Two processes are two runtimes over
//! separate store instances on one store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::{NewInput, RunStatus};
use memo_runtime::workflow::{CANCEL_SIGNAL, Context, Workflow};
use memo_runtime::{Bytes, Error};
use memo_tests::fixtures::{Backend, process_builder, run};
use memo_tests::pause::{Held, Pauses, wait_reached};

type BoxedRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// One step, which counts its body's runs.
fn one_step(bodies: Arc<AtomicU64>) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync> {
    Workflow::new("one-step", move |ctx: Context, _: u64| {
        let bodies = bodies.clone();
        Box::pin(async move {
            ctx.step("charge", move |_memo| {
                let runs = bodies.fetch_add(1, Ordering::SeqCst) + 1;
                async move { Ok::<_, Error>(runs) }
            })
            .await
        }) as BoxedRun
    })
}

/// A worker creates a run and stalls before its first attempt starts (held
/// at the attempt's due-run entry, written just before the start), while
/// another process records a cancellation of the run: `Runtime::cancel`'s
/// first write, by a canceller that stalls before its own attempt would end
/// the run. The worker's store instance holds the run as it created it,
/// without the request. The attempt's start lands after the request's
/// entry, and the inputs it reads with the start hold it: the attempt
/// observes the cancellation at its first step boundary, so the step's body
/// never runs and the run ends cancelled.
#[tokio::test]
async fn a_cancellation_recorded_before_the_first_attempt_started_is_in_its_history() {
    for backend in Backend::all() {
        let objects = backend.objects();
        let clock = Arc::new(ManualClock::new(1_000));
        let (held, pause) = Pauses::new(objects.clone(), Held::Put, "memo/due".into());
        let held: Arc<dyn ObjectStore> = Arc::new(held);
        let lease = Duration::from_secs(30);
        let worker = process_builder(held, objects.clone(), &clock, "worker", lease)
            .build()
            .unwrap();
        let canceller = process_builder(objects.clone(), objects.clone(), &clock, "op", lease)
            .build()
            .unwrap();
        let id = run("cancel-me-first");
        let bodies = Arc::new(AtomicU64::new(0));

        let delivery = tokio::spawn({
            let (id, bodies) = (id.clone(), bodies.clone());
            async move { worker.run(&id, &1, &one_step(bodies)).await }
        });
        wait_reached(pause.reached, "pause").await;
        let store = canceller.runtime_store();
        let created = store.load_run(&id).await.unwrap().unwrap();
        assert_eq!((created.status, created.attempts), (RunStatus::Pending, 0));
        let request = NewInput {
            input_id: CANCEL_SIGNAL.to_string(),
            name: CANCEL_SIGNAL.to_string(),
            // MessagePack for the reason "stop".
            payload: Bytes::from_static(b"\xa4stop"),
            accepted_at_ms: 1_000,
        };
        store.append_input(&id, request).await.unwrap();
        pause.release.send(()).unwrap();

        let delivered = delivery.await.unwrap();
        assert!(
            matches!(&delivered, Err(Error::RunCancelled { reason: Some(r), .. }) if r == "stop"),
            "{backend:?}: the first attempt observed the cancellation: {delivered:?}"
        );
        assert_eq!(bodies.load(Ordering::SeqCst), 0, "{backend:?}: no body ran");
        let ended = store.load_run(&id).await.unwrap().unwrap();
        assert_eq!((ended.status, ended.attempts), (RunStatus::Cancelled, 1));
    }
}
