//! A delivery that loses the race with its run's completion answers with
//! the run's outcome, as a delivery that reads the run ended does: between
//! its read of the run and its attempt's start, another process (a
//! redelivery, a worker that took the run over) may run the run to its
//! end. Two processes are two runtimes over separate store instances on one
//! folder or bucket; the interleaving is staged with a store that holds one
//! request until the test lets it go. An attempt that ended the run itself
//! answers with its outcome too, whatever its lease renewals meet after.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memo_runtime::Error;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::path::Path;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_tests::fixtures::{Backend, process_builder, run};
use memo_tests::pause::{Held, Pauses, wait_reached};
use tokio::sync::oneshot;

type Doubled = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// One step that doubles its input.
fn double() -> Workflow<impl Fn(Context, u64) -> Doubled + Send + Sync + 'static> {
    Workflow::new("double", |ctx: Context, n: u64| {
        Box::pin(async move { ctx.step("double", |_memo| async move { Ok(n * 2) }).await })
            as Doubled
    })
}

/// A process whose memo store reads and writes through `memo_objects`.
fn process(
    backend: &Backend,
    memo_objects: Arc<dyn ObjectStore>,
    clock: &Arc<ManualClock>,
    name: &str,
) -> Runtime {
    leased(backend, memo_objects, clock, name, Duration::from_secs(30))
}

/// [`process`] with a lease of `lease`.
fn leased(
    backend: &Backend,
    memo_objects: Arc<dyn ObjectStore>,
    clock: &Arc<ManualClock>,
    name: &str,
    lease: Duration,
) -> Runtime {
    process_builder(memo_objects, backend.open(), clock, name, lease)
        .build()
        .unwrap()
}

/// Process A reads the run (new, no attempt yet) and stalls before its
/// attempt starts (its write of the attempt's due-run entry, the first
/// thing a start does, is held); process B runs the run to completion
/// meanwhile. A's start then meets a completed run: A answers with B's
/// output, not with a conflict a queue would count as a failed delivery.
#[tokio::test]
async fn a_delivery_whose_start_loses_to_the_runs_completion_answers_with_its_output() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(1_000));
        let (paused, start) = Pauses::new(backend.open(), Held::Put, Path::from("memo/due"));
        let a = process(&backend, Arc::new(paused), &clock, "a");
        let b = process(&backend, backend.open(), &clock, "b");
        let run_id = run("order-1");

        let delivery = tokio::spawn({
            let run_id = run_id.clone();
            async move { a.run(&run_id, &21_u64, &double()).await }
        });
        wait_reached(start.reached, "start").await;
        assert_eq!(
            b.run(&run_id, &21_u64, &double()).await.unwrap(),
            42,
            "{name}"
        );

        start.release.send(()).unwrap();
        let answered = delivery.await.unwrap();
        assert!(
            matches!(answered, Ok(42)),
            "{name}: the stalled delivery answered {answered:?}"
        );
    }
}

/// Where a workflow waits: it tells the test it got there, then waits to
/// be let go.
type Between = (oneshot::Sender<()>, oneshot::Receiver<()>);

/// Two steps, the second doubling the first's output; between them the
/// workflow waits at `between` (if given).
fn paced(
    between: Option<Between>,
) -> Workflow<impl Fn(Context, u64) -> Doubled + Send + Sync + 'static> {
    let between = Arc::new(Mutex::new(between));
    Workflow::new("paced", move |ctx: Context, n: u64| {
        let between = between.clone();
        Box::pin(async move {
            let first = ctx
                .step("first", |_memo| async move { Ok::<u64, Error>(n) })
                .await?;
            let pause = between.lock().unwrap().take();
            if let Some((reached, gate)) = pause {
                let _ = reached.send(());
                let _ = gate.await;
            }
            ctx.step("second", |_memo| async move { Ok(first * 2) })
                .await
        }) as Doubled
    })
}

/// Process A commits the first step and stalls before the second; its
/// lease expires meanwhile, and process B takes the run over and runs it
/// to its end. A then renews its lease before the second step's body, and
/// the store refuses the renewal (the run ended). That is a lost lease,
/// as any refused renewal is: A's delivery fails with `Error::LeaseLost`,
/// which a queue delivers again (and the next delivery answers with B's
/// output), not with a conflict, which a queue counts as a failed
/// delivery (seed 71 of session 24's survey; CI's crash loop).
#[tokio::test]
async fn a_renewal_refused_because_another_attempt_ended_the_run_is_a_lost_lease() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(1_000));
        let a = process(&backend, backend.open(), &clock, "a");
        let b = process(&backend, backend.open(), &clock, "b");
        let run_id = run("order-2");

        let (reached, between) = oneshot::channel();
        let (go, gate) = oneshot::channel();
        let delivery = tokio::spawn({
            let run_id = run_id.clone();
            async move { a.run(&run_id, &21_u64, &paced(Some((reached, gate)))).await }
        });
        between.await.unwrap();
        clock.advance_ms(31_000);
        assert_eq!(
            b.run(&run_id, &21_u64, &paced(None)).await.unwrap(),
            42,
            "{name}"
        );

        go.send(()).unwrap();
        let answered = delivery.await.unwrap();
        assert!(
            matches!(answered, Err(Error::LeaseLost { attempt: 1, .. })),
            "{name}: the delivery whose renewal was refused answered {answered:?}"
        );
        let redelivered = process(&backend, backend.open(), &clock, "a");
        assert_eq!(
            redelivered
                .run(&run_id, &21_u64, &paced(None))
                .await
                .unwrap(),
            42,
            "{name}: the next delivery answers with the run's output"
        );
    }
}

/// An attempt commits the run's completion and then writes its terminal
/// marker, which is slow (held here); meanwhile its lease renewals, every
/// third of a lease, keep firing, and the store refuses them: the run has
/// ended. The attempt ended it itself, so its delivery answers with the
/// output; it answered `Error::LeaseLost` ("its renewal was refused: the
/// run is already Completed"), as CI's `crash_resume` example did under
/// load.
#[tokio::test(start_paused = true)]
async fn renewals_refused_after_the_attempt_ended_the_run_itself_lose_nothing() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(1_000));
        let (paused, marker) = Pauses::new(backend.open(), Held::Put, Path::from("memo/terminals"));
        let lease = Duration::from_millis(300);
        let a = leased(&backend, Arc::new(paused), &clock, "a", lease);
        let run_id = run("order-3");

        let delivery = tokio::spawn({
            let run_id = run_id.clone();
            async move { a.run(&run_id, &21_u64, &double()).await }
        });
        wait_reached(marker.reached, "marker").await;
        // Ten renewal periods (time is paused: the sleep passes at once,
        // after every timer before it fired).
        tokio::time::sleep(lease * 10 / 3).await;
        // Dropped if the attempt was: it then answered already.
        let _ = marker.release.send(());
        let answered = delivery.await.unwrap();
        assert!(
            matches!(answered, Ok(42)),
            "{name}: the attempt that completed the run answered {answered:?}"
        );
    }
}
