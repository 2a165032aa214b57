//! A sweep through a runtime store at another prefix than the workers'
//! (issue 20, item 11: `memoctl sweep` with a mistyped or defaulted
//! `--runs-prefix`) finds none of the runs the memo store names, and
//! deletes nothing of them: neither the due-run entry of a live run nor
//! the marker of a run a right sweep is clearing. A worker's poll through
//! such a store deletes no due-run entry either. Found by the
//! simulator's `wrong_prefix_operator` (*a sweep through another
//! runtime-store prefix deletes no due-run entry*, *deletes no terminal
//! marker*). Each test runs two processes: separate store instances over
//! one store.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::retention::{RetentionSweeper, TerminalMarker};
use memo_runtime::runtime_store::{
    Commit, NewRun, ObjectStoreRuntimeStore, RuntimeStore, StatusChange,
};
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Bytes, Error, MemoStore, RunId};
use memo_tests::fixtures::{but_deletion_remains, run, stored_under};
use memo_tests::pause::{Held, Pauses, wait_reached};

/// The workers' runtime-store prefix, and the operator's mistyped one.
const RIGHT: &str = "runs";
const WRONG: &str = "runtime";

/// A process over `objects`: its own memo store and runtime store (at
/// `runs_prefix`) instances, the shared clock.
fn process(objects: &Arc<dyn ObjectStore>, runs_prefix: &str, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(Arc::clone(objects), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            Arc::clone(objects),
            runs_prefix,
        )))
        .clock(clock.clone())
        .retention(Duration::from_secs(24 * 3600))
        .build()
        .unwrap()
}

async fn due_run_ids(runtime: &Runtime) -> Vec<String> {
    let due: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    due.iter().map(|d| d.run_id.to_string()).collect()
}

/// Two live runs have due-run entries due now: one got a signal it waits
/// for, the other's timer is due; no worker has woken them yet. The
/// operator's sweep through another prefix finds neither run, and deletes
/// neither entry (it deleted both: the only thing that wakes the runs).
/// A right sweep then still deletes the entry of a run that was deleted,
/// once it meets a live run of the memo store in its runtime store.
#[tokio::test]
async fn a_live_runs_due_entry_survives_a_sweep_through_another_prefix() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let workers = process(&objects, RIGHT, &clock);
    let approval = Workflow::new("approval", |ctx: Context, _: ()| async move {
        let yes: bool = ctx.wait_for_signal("go").await?;
        Ok::<_, Error>(yes)
    });
    let nap = Workflow::new("nap", |ctx: Context, _: ()| async move {
        ctx.sleep(Duration::from_secs(3600)).await?;
        Ok::<_, Error>(true)
    });
    let (waiting, asleep) = (run("waiting"), run("asleep"));
    assert!(workers.run(&waiting, &(), &approval).await.is_err());
    workers.signal(&waiting, "go", &true).await.unwrap();
    assert!(workers.run(&asleep, &(), &nap).await.is_err());
    clock.advance_ms(2 * 3_600_000);
    assert_eq!(due_run_ids(&workers).await, ["waiting", "asleep"]);

    let operator = process(&objects, WRONG, &clock);
    let report = operator.retention_sweeper().sweep_now().await.unwrap();
    assert_eq!(report.due_entries_deleted, 0, "{report:?}");
    assert_eq!(
        due_run_ids(&workers).await,
        ["waiting", "asleep"],
        "the live runs' entries stay"
    );

    // The signalled run is run to its end and deleted: its entry is stale,
    // and its run is gone from every runtime store.
    assert!(workers.run(&waiting, &(), &approval).await.unwrap());
    assert!(
        workers
            .retention_sweeper()
            .delete_run(&waiting)
            .await
            .unwrap()
    );
    let report = operator.retention_sweeper().sweep_now().await.unwrap();
    assert_eq!(report.due_entries_deleted, 0, "{report:?}");
    assert_eq!(due_run_ids(&workers).await, ["waiting", "asleep"]);

    // A right sweep in a process of its own: the sleeping run, held with
    // its entry's incarnation, proves its runtime store the workers'.
    let right = process(&objects, RIGHT, &clock);
    let report = right.retention_sweeper().sweep_now().await.unwrap();
    assert_eq!(report.due_entries_deleted, 1, "{report:?}");
    assert_eq!(due_run_ids(&workers).await, ["asleep"]);
}

/// A worker whose runtime store is at another prefix finds none of the
/// due runs: it keeps their entries (it deleted them as stale, and the
/// sleeping run was never woken again). A right worker then wakes the
/// run and, its store proved by that run, deletes the entries of a run
/// that was deleted, in the same poll.
#[tokio::test]
async fn a_live_runs_due_entry_survives_a_poll_through_another_prefix() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let workers = process(&objects, RIGHT, &clock);
    let nap = Workflow::new("nap", |ctx: Context, _: ()| async move {
        ctx.sleep(Duration::from_secs(3600)).await?;
        Ok::<_, Error>(true)
    });
    let (asleep, deleted) = (run("asleep"), run("deleted"));
    for id in [&asleep, &deleted] {
        assert!(workers.run(id, &(), &nap).await.is_err());
    }
    // Cancelled and deleted: its timer's entry is left, of a run no store
    // holds.
    workers.cancel(&deleted, "not needed").await.unwrap();
    assert!(
        workers
            .retention_sweeper()
            .delete_run(&deleted)
            .await
            .unwrap()
    );
    clock.advance_ms(2 * 3_600_000);
    let entries = ["deleted", "asleep", "deleted"];
    assert_eq!(due_run_ids(&workers).await, entries);

    let wrong = Worker::builder(process(&objects, WRONG, &clock))
        .workflow(&nap)
        .build();
    for _ in 0..2 {
        let report = wrong.wake_due().await.unwrap();
        assert_eq!((report.not_held, report.stale), (2, 0), "{report:?}");
        assert_eq!(due_run_ids(&workers).await, entries);
    }

    let right = Worker::builder(process(&objects, RIGHT, &clock))
        .workflow(&nap)
        .build();
    let report = right.wake_due().await.unwrap();
    assert_eq!(
        (report.resumed, report.stale, report.not_held),
        (1, 1, 0),
        "{report:?}"
    );
    assert!(due_run_ids(&workers).await.is_empty());
    assert!(workers.run(&asleep, &(), &nap).await.unwrap());
}

fn order(run_id: &RunId) -> NewRun {
    NewRun {
        run_id: run_id.clone(),
        workflow: "checkout".into(),
        input: Bytes::from_static(b"order"),
        created_at_ms: 1,
        workflow_version: None,
    }
}

/// A finished run with a memo entry and its terminal marker, as a workflow
/// leaves it.
async fn finished_run(
    memo: &MemoStore,
    runs: &ObjectStoreRuntimeStore,
    run_id: &RunId,
) -> TerminalMarker {
    let created = runs.create_run(order(run_id)).await.unwrap();
    let start = Commit::status(StatusChange::start_attempt(1), 2);
    runs.atomic_apply(run_id, start).await.unwrap();
    memo.memo_for(run_id, created.incarnation, 0)
        .put("charge", b"charged")
        .await
        .unwrap();
    let done = StatusChange::Completed {
        output: Bytes::from_static(b"done"),
    };
    runs.atomic_apply(run_id, Commit::status(done, 4))
        .await
        .unwrap();
    let marker = TerminalMarker {
        run_id: run_id.clone(),
        terminal_at_ms: 4,
        incarnation: created.incarnation,
    };
    memo.markers().write(&marker).await.unwrap();
    marker
}

fn sweeper(objects: Arc<dyn ObjectStore>, runs_prefix: &str) -> RetentionSweeper {
    let runs: Arc<dyn RuntimeStore> = Arc::new(ObjectStoreRuntimeStore::new(
        Arc::clone(&objects),
        runs_prefix,
    ));
    RetentionSweeper::builder(MemoStore::new(objects, "memo"), Duration::ZERO)
        .runtime_store(runs)
        .build()
}

async fn stored(objects: &dyn ObjectStore) -> Vec<String> {
    stored_under(objects, "").await
}

/// A right sweep clears an expired run's memo entries and stalls before
/// its runtime-store deletion; meanwhile the operator's sweep through
/// another prefix finds nothing of the run but its marker. It keeps the
/// marker (it deleted it: had the right sweep's deletion then failed, the
/// run would be left terminal and unmarked, for ever), and reports it.
/// The right sweep then finishes, and nothing of the run is left.
#[tokio::test]
async fn the_marker_of_a_run_being_cleared_survives_a_sweep_through_another_prefix() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let memo = MemoStore::new(Arc::clone(&objects), "memo");
    let runs = ObjectStoreRuntimeStore::new(Arc::clone(&objects), RIGHT);
    let run_id = run("order-1");
    let marker = finished_run(&memo, &runs, &run_id).await;

    let (paused, pause) = Pauses::new(Arc::clone(&objects), Held::Delete, Path::from(RIGHT));
    let right = sweeper(Arc::new(paused), RIGHT);
    let pass = tokio::spawn(async move { right.sweep_once(100).await });
    wait_reached(pause.reached, "pause").await;
    assert!(
        stored(objects.as_ref())
            .await
            .iter()
            .all(|p| !p.starts_with("memo/memos")),
        "the right sweep cleared the entries before the records"
    );

    let report = sweeper(Arc::clone(&objects), WRONG)
        .sweep_once(100)
        .await
        .unwrap();
    assert_eq!(report.runs_cleared, 0, "{report:?}");
    let kept: Vec<&RunId> = report.failures.iter().map(|f| &f.run_id).collect();
    assert_eq!(kept, [&run_id], "the wrong sweep reports the run it kept");
    assert_eq!(
        memo.markers().list().await.unwrap(),
        [marker],
        "the marker stays"
    );

    pause.release.send(()).unwrap();
    let report = pass.await.unwrap().unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.runs_cleared, 1);
    // The right sweep leaves the run's recheck marker, its tombstone and
    // its vacated pointer, which a pass once the marker is due deletes.
    let left = stored(objects.as_ref()).await;
    assert!(
        left.len() == 3
            && left[0].starts_with("memo/rechecks/")
            && but_deletion_remains(objects.as_ref(), left[1..].to_vec())
                .await
                .is_empty(),
        "{left:?}"
    );
    sweeper(Arc::clone(&objects), RIGHT)
        .sweep_once(u64::MAX)
        .await
        .unwrap();
    assert_eq!(stored(objects.as_ref()).await, Vec::<String>::new());
}

/// The operator's runtime store holds a run of the same id as an expired
/// run of the workers' (another incarnation: another deployment's, or an
/// old one left at that prefix), and nothing else of the memo store's. A
/// later run of the id proves the marker's run deleted only in the store
/// the marker's run was created in: the sweep clears nothing of it (it
/// cleared its memo entries and deleted its marker).
#[tokio::test]
async fn a_sweep_through_a_store_that_holds_only_another_run_of_the_id_clears_nothing() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let memo = MemoStore::new(Arc::clone(&objects), "memo");
    let runs = ObjectStoreRuntimeStore::new(Arc::clone(&objects), RIGHT);
    let run_id = run("order-1");
    let marker = finished_run(&memo, &runs, &run_id).await;
    let elsewhere = ObjectStoreRuntimeStore::new(Arc::clone(&objects), WRONG);
    elsewhere.create_run(order(&run_id)).await.unwrap();
    let before = stored(objects.as_ref()).await;

    let report = sweeper(Arc::clone(&objects), WRONG)
        .sweep_once(100)
        .await
        .unwrap();
    assert_eq!(report.runs_cleared, 0, "{report:?}");
    assert_eq!(report.failures.len(), 1, "{report:?}");
    assert_eq!(stored(objects.as_ref()).await, before, "nothing deleted");
    assert_eq!(memo.markers().list().await.unwrap(), [marker]);

    // The right sweep clears the run.
    let report = sweeper(Arc::clone(&objects), RIGHT)
        .sweep_once(100)
        .await
        .unwrap();
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    assert!(memo.markers().list().await.unwrap().is_empty());
}

/// The workers' sweep deletes an expired run and leaves its recheck
/// marker; a stale attempt of the run then puts a record back in its
/// incarnation's folder and dies before it takes it back (the late write
/// the recheck is for). The operator's sweep through another prefix meets
/// the due recheck marker first: its store holds no trace of the deletion
/// and is not proved the workers', so it rechecks nothing and keeps the
/// marker (it deleted it, having cleared nothing there: the record was
/// left for good, seed 30657 of session 47's deployment survey), and its
/// second pass that finds it so reports the failure (session 50). The
/// workers' next pass rechecks the run, and nothing of it is left.
#[tokio::test]
async fn a_recheck_through_another_prefix_keeps_its_marker_for_the_workers_sweep() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let memo = MemoStore::new(Arc::clone(&objects), "memo");
    let runs = ObjectStoreRuntimeStore::new(Arc::clone(&objects), RIGHT);
    let run_id = run("order-1");
    finished_run(&memo, &runs, &run_id).await;
    let log = stored(objects.as_ref())
        .await
        .into_iter()
        .find(|path| path.contains("/log/"))
        .expect("a log entry");
    let report = sweeper(Arc::clone(&objects), RIGHT)
        .sweep_once(100)
        .await
        .unwrap();
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    let late = Path::from(format!(
        "{}/cost/0000000002",
        log.split("/log/").next().unwrap()
    ));
    objects
        .put(&late, Bytes::from_static(b"late").into())
        .await
        .unwrap();

    // Its first pass leaves the marker for its next (another sweeper may
    // be between the tombstone's delete and the marker's); its next pass,
    // finding it so again, reports the failure.
    let wrong = sweeper(Arc::clone(&objects), WRONG);
    let first = wrong.sweep_once(u64::MAX).await.unwrap();
    assert_eq!(
        (first.rechecks_due, first.recheck_failures),
        (0, 0),
        "{first:?}"
    );
    let report = wrong.sweep_once(u64::MAX).await.unwrap();
    assert_eq!(
        (report.rechecks_due, report.recheck_failures),
        (0, 1),
        "{report:?}"
    );
    let left = stored(objects.as_ref()).await;
    assert!(
        left.iter().any(|p| p.starts_with("memo/rechecks/")) && left.contains(&late.to_string()),
        "{left:?}"
    );

    let report = sweeper(Arc::clone(&objects), RIGHT)
        .sweep_once(u64::MAX)
        .await
        .unwrap();
    assert_eq!(
        (
            report.rechecks_due,
            report.late_objects_deleted,
            report.recheck_failures
        ),
        (1, 1, 0),
        "{report:?}"
    );
    assert_eq!(stored(objects.as_ref()).await, Vec::<String>::new());
}
