//! A run id used again is a new run everywhere (issue 9, cases 1, 2, 3 and
//! 9): its memo entries, records and marker are its own; an old marker, a
//! stale cache or a deletion of the earlier run never touches it; and ids
//! that differ only in case never share an object, even on a folder that
//! cannot tell case apart. Two processes are modelled as two runtimes (or
//! stores) over separate instances on one folder or bucket.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{Commit, NewRun, RunStatus, StatusChange, StepReceipt};
use memo_runtime::testing::{CaseFoldingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow};
use memo_runtime::{
    Bytes, Error, MemoStore, RunId,
    clock::ManualClock,
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::{Backend, charge, run};

const DAY: u64 = 24 * 60 * 60 * 1000;
const RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A runtime over fresh store instances: what another process would build.
fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .retention(RETENTION)
        .marker_retry(RetryPolicy::attempts(2).with_min_delay(Duration::from_millis(1)))
        .build()
        .unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

fn checkout(
    charges: Arc<AtomicU64>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    Workflow::new("checkout", move |ctx: Context, cents: u64| {
        let charges = charges.clone();
        Box::pin(async move {
            ctx.step("charge", |memo| {
                let charges = charges.clone();
                async move { charge(&memo, cents, &charges).await }
            })
            .await
        }) as BoxedRun
    })
}

/// Case 1: `order-1` completes on day 10 (marker M1), is deleted and run
/// again, completing on day 16 (marker M2). A sweep on day 17 with 7 days of
/// retention finds M1 expired: it must clear only the day-10 run, so a
/// redelivery of the day-16 run charges nothing.
#[tokio::test]
async fn an_old_marker_never_sweeps_a_newer_run_of_the_same_id() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(10 * DAY));
        let charges = Arc::new(AtomicU64::new(0));
        let workflow = checkout(charges.clone());
        let order = run("order-1");

        let first = process(&backend.objects(), &clock);
        assert_eq!(first.run(&order, &500, &workflow).await.unwrap(), 1);
        let old = first.status(&order).await.unwrap().unwrap();
        assert!(
            first
                .runtime_store()
                .delete_run(&order, old.incarnation)
                .await
                .unwrap()
        );

        clock.set_ms(16 * DAY);
        let second = process(&backend.objects(), &clock);
        assert_eq!(second.run(&order, &500, &workflow).await.unwrap(), 2);
        assert_eq!(charges.load(Ordering::SeqCst), 2, "{name}");
        let new = second.status(&order).await.unwrap().unwrap();
        assert_ne!(new.incarnation, old.incarnation, "{name}");

        clock.set_ms(17 * DAY + 60 * 60 * 1000);
        let sweeper = process(&backend.objects(), &clock).retention_sweeper();
        let report = sweeper.sweep_now().await.unwrap();
        assert_eq!(report.markers_expired, 1, "{name}: only M1 expired");
        assert!(report.is_complete(), "{name}: {report:?}");

        let redelivery = process(&backend.objects(), &clock);
        assert_eq!(
            redelivery.run(&order, &500, &workflow).await.unwrap(),
            2,
            "{name}: the day-16 run's output"
        );
        assert_eq!(charges.load(Ordering::SeqCst), 2, "{name}: charged again");
        let kept = redelivery.status(&order).await.unwrap().unwrap();
        assert_eq!(
            (kept.incarnation, kept.status),
            (new.incarnation, RunStatus::Completed),
            "{name}"
        );
        let markers = redelivery.memo_store().markers().list().await.unwrap();
        assert_eq!(markers.len(), 1, "{name}: M2 is kept");
        assert_eq!(markers[0].incarnation, new.incarnation, "{name}");
    }
}

/// Case 2: a run deleted and created again is a new run: its memoized side
/// effects run again instead of hitting the earlier run's entries.
#[tokio::test]
async fn a_recreated_run_does_not_inherit_the_old_runs_memo_entries() {
    for backend in Backend::all() {
        let name = backend.name();
        let clock = Arc::new(ManualClock::new(DAY));
        let charges = Arc::new(AtomicU64::new(0));
        let workflow = checkout(charges.clone());
        let order = run("order-2");

        let first = process(&backend.objects(), &clock);
        assert_eq!(first.run(&order, &700, &workflow).await.unwrap(), 1);
        let old = first.status(&order).await.unwrap().unwrap();
        first
            .runtime_store()
            .delete_run(&order, old.incarnation)
            .await
            .unwrap();

        let second = process(&backend.objects(), &clock);
        assert_eq!(
            second.run(&order, &700, &workflow).await.unwrap(),
            2,
            "{name}: the new run read the old run's charge"
        );
        assert_eq!(charges.load(Ordering::SeqCst), 2, "{name}");
        // The earlier run's entries are still its own, untouched.
        let old_memo = second.memo_store().memo_for(&order, old.incarnation, 0);
        let old_charge = old_memo.content_get(&("charge", 700u64)).await.unwrap();
        assert_eq!(
            old_charge.as_deref(),
            Some(&1u64.to_le_bytes()[..]),
            "{name}"
        );
    }
}

fn new_run(run_id: &RunId) -> NewRun {
    NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: Bytes::from_static(b"in"),
        created_at_ms: 1,
        workflow_version: None,
    }
}

fn receipt(run_id: &RunId, sequence: u64, output: &'static [u8]) -> StepReceipt {
    StepReceipt {
        run_id: run_id.clone(),
        sequence,
        step: "s".into(),
        error: None,
        retries: 0,
        last_retried_error: None,
        output: Bytes::from_static(output),
        recorded_at_ms: 2,
    }
}

/// Case 3: instance A caches run R as running; instance B completes,
/// deletes and re-creates R. A must see the new run, and A's next commit
/// (meant for the old run) must not land in the new run's log, which fresh
/// readers must still read whole.
#[tokio::test]
async fn a_stale_cache_never_answers_for_or_writes_into_a_recreated_run() {
    for backend in Backend::all() {
        let name = backend.name();
        let a = ObjectStoreRuntimeStore::new(backend.objects(), "runs");
        let b = ObjectStoreRuntimeStore::new(backend.objects(), "runs");
        let r = run("recycled");
        a.create_run(new_run(&r)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 2);
        a.atomic_apply(&r, start).await.unwrap();
        a.atomic_apply(&r, Commit::step(receipt(&r, 0, b"old"), 3))
            .await
            .unwrap();
        assert_eq!(
            a.load_run(&r).await.unwrap().unwrap().status,
            RunStatus::Running
        );

        // Process B finishes the run, deletes it and creates it again.
        let done = StatusChange::Completed {
            output: Bytes::from_static(b"done"),
        };
        let finished = b.atomic_apply(&r, Commit::status(done, 4)).await.unwrap();
        assert!(b.delete_run(&r, finished.incarnation).await.unwrap());
        let reborn = b.create_run(new_run(&r)).await.unwrap();
        assert_ne!(reborn.incarnation, finished.incarnation);

        let seen = a.load_run(&r).await.unwrap().unwrap();
        assert_eq!(
            (seen.incarnation, seen.status),
            (reborn.incarnation, RunStatus::Pending),
            "{name}: A answered from its stale cache"
        );
        assert!(
            a.load_receipts(&r, None).await.unwrap().is_empty(),
            "{name}"
        );

        // A second stale instance that never looked again tries to commit
        // the old run's next step.
        let stale = ObjectStoreRuntimeStore::new(backend.objects(), "runs");
        let c = ObjectStoreRuntimeStore::new(backend.objects(), "runs");
        let r2 = run("recycled-2");
        stale.create_run(new_run(&r2)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 2);
        stale.atomic_apply(&r2, start).await.unwrap();
        let old = c
            .atomic_apply(
                &r2,
                Commit::status(StatusChange::Failed { error: "e".into() }, 3),
            )
            .await
            .unwrap();
        assert!(c.delete_run(&r2, old.incarnation).await.unwrap());
        let reborn = c.create_run(new_run(&r2)).await.unwrap();
        let late = stale
            .atomic_apply(&r2, Commit::step(receipt(&r2, 0, b"zombie"), 5))
            .await;
        assert!(
            matches!(late, Err(Error::Conflict { .. })),
            "{name}: a commit into the deleted run was acknowledged: {late:?}"
        );
        let fresh = ObjectStoreRuntimeStore::new(backend.objects(), "runs");
        let now = fresh.load_run(&r2).await.unwrap().unwrap();
        assert_eq!(now, reborn, "{name}: the new run changed");
        assert!(fresh.load_receipts(&r2, None).await.unwrap().is_empty());
        // A deletion of the old incarnation never touches the new run.
        assert!(!stale.delete_run(&r2, old.incarnation).await.unwrap());
        assert_eq!(
            fresh.load_run(&r2).await.unwrap().unwrap(),
            reborn,
            "{name}"
        );
    }
}

/// Case 9: on a folder that cannot tell case apart, `Order-1` and `order-1`
/// keep their own memo entries, records and markers, and sweeping one
/// leaves the other whole.
#[tokio::test]
async fn run_ids_that_differ_only_in_case_never_share_an_object() {
    let objects: Arc<dyn ObjectStore> = Arc::new(CaseFoldingStore::new(InMemory::new()));
    let clock = Arc::new(ManualClock::new(DAY));
    let charges = Arc::new(AtomicU64::new(0));
    let workflow = checkout(charges.clone());
    let (upper, lower) = (run("Order-1"), run("order-1"));

    let runtime = process(&objects, &clock);
    assert_eq!(runtime.run(&upper, &900, &workflow).await.unwrap(), 1);
    clock.set_ms(5 * DAY);
    let other = process(&objects, &clock);
    assert_eq!(
        other.run(&lower, &900, &workflow).await.unwrap(),
        2,
        "order-1 hit Order-1's charge"
    );
    assert_eq!(charges.load(Ordering::SeqCst), 2);

    // Standalone memos too.
    let memo = MemoStore::new(objects.clone(), "standalone");
    memo.new_memo(&upper, 0).put("k", b"upper").await.unwrap();
    memo.new_memo(&lower, 0).put("k", b"lower").await.unwrap();
    assert_eq!(memo.clear_memos_for_run(&upper).await.unwrap(), 1);
    let kept = memo.new_memo(&lower, 0).get("k").await.unwrap();
    assert_eq!(kept.as_deref(), Some(&b"lower"[..]));

    // Day 9: Order-1 (terminal on day 1) is expired, order-1 (day 5) is not.
    clock.set_ms(9 * DAY);
    let report = process(&objects, &clock)
        .retention_sweeper()
        .sweep_now()
        .await
        .unwrap();
    assert_eq!((report.runs_cleared, report.runtime_runs_deleted), (1, 1));
    let fresh = process(&objects, &clock);
    assert_eq!(fresh.status(&upper).await.unwrap(), None);
    let lower_run = fresh.status(&lower).await.unwrap().unwrap();
    assert_eq!(lower_run.status, RunStatus::Completed);
    assert_eq!(fresh.run(&lower, &900, &workflow).await.unwrap(), 2);
    let incarnation_memo = fresh
        .memo_store()
        .memo_for(&lower, lower_run.incarnation, 0);
    assert!(
        incarnation_memo
            .content_get(&("charge", 900u64))
            .await
            .unwrap()
            .is_some(),
        "sweeping Order-1 cleared order-1's memo entries"
    );
    let markers = fresh.memo_store().markers().list().await.unwrap();
    assert_eq!(markers.len(), 1);
    assert_eq!(markers[0].run_id, lower);
    let listed: Vec<_> = objects
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    assert!(
        listed.iter().all(|path| path == &path.to_ascii_lowercase()),
        "{listed:?}"
    );
}

/// A deletion that failed part-way leaves some of the run's log entries
/// behind. An instance that cached the run while it was open, and reads it
/// after the id was used again, must not catch up on those leftovers and
/// answer for the deleted run: it answers for the new one, and a
/// redelivery of the new run's input through it is accepted.
#[tokio::test]
async fn a_cache_never_catches_up_on_a_partly_deleted_run() {
    for faulty in Backend::all_faulty() {
        let backend = &faulty.backend;
        let name = backend.name();
        let r = run("half-swept");
        // Both through the fault injector (a folder opened again would not be).
        let a = ObjectStoreRuntimeStore::new(backend.objects(), "runs");
        let b = ObjectStoreRuntimeStore::new(backend.objects(), "runs");
        a.create_run(new_run(&r)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 2);
        a.atomic_apply(&r, start).await.unwrap();
        a.atomic_apply(&r, Commit::step(receipt(&r, 0, b"one"), 3))
            .await
            .unwrap();

        // B moves the run on from A's cache, ends it, and its deletion
        // stops at the first entry A has not read.
        b.atomic_apply(&r, Commit::step(receipt(&r, 1, b"two"), 3))
            .await
            .unwrap();
        let done = StatusChange::Completed {
            output: Bytes::from_static(b"done"),
        };
        let old = b.atomic_apply(&r, Commit::status(done, 4)).await.unwrap();
        faulty.faults.inject(
            FaultRule::fail_before(RequestKind::Delete)
                .matching(|path| path.as_ref().ends_with("/log/00000000000000000002"))
                .times(1),
        );
        assert!(b.delete_run(&r, old.incarnation).await.is_err(), "{name}");

        // The id is used again, for another order.
        let other = NewRun {
            input: Bytes::from_static(b"another order"),
            ..new_run(&r)
        };
        let reborn = b.create_run(other.clone()).await.unwrap();

        let seen = a.load_run(&r).await.unwrap().unwrap();
        assert_eq!(
            (seen.incarnation, seen.status),
            (reborn.incarnation, RunStatus::Pending),
            "{name}: the cache answered for the deleted run"
        );
        let redelivered = a.create_run(other).await.unwrap();
        assert_eq!(redelivered.incarnation, reborn.incarnation, "{name}");
    }
}
