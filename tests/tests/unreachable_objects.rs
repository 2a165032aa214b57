//! Nothing of a run is left where no later sweep, deletion or listing can
//! reach it: a creator that lost its id to another creator takes back the
//! status hint it wrote, a sweep finishes a runtime-store deletion that
//! stopped part way, and `RetentionSweeper::delete_run` deletes a whole run
//! in the order that keeps a failure part way finishable. Found by the
//! simulator's "no object is left unreachable after every run is swept".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::{
    AttemptCost, Commit, NewRun, ObjectStoreRuntimeStore, RuntimeStore, StatusChange, StepReceipt,
};
use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Bytes, Error, Incarnation, Memo, MemoStore, RunId, memoized,
    retention::{RetentionSweeper, TerminalMarker},
};
use memo_tests::fixtures::{
    Backend, Faulty, but_deletion_remains, process_builder, run, stored_under,
};
use memo_tests::pause::{Held, Pauses, wait_reached};

fn order(run_id: &RunId) -> NewRun {
    NewRun {
        run_id: run_id.clone(),
        workflow: "checkout".into(),
        input: Bytes::from_static(b"order"),
        created_at_ms: 1,
        workflow_version: None,
    }
}

fn completed() -> Commit {
    let done = StatusChange::Completed {
        output: Bytes::from_static(b"done"),
    };
    Commit::status(done, 4)
}

/// What a stale attempt paused past its lease meets: run `run_id`
/// created and its first attempt started through `stale`, then ended and
/// deleted through `other`, a store of another process. Returns
/// `(stale, other, the deleted incarnation)`.
async fn deleted_under_a_stale_attempt(
    backend: &Backend,
    run_id: &RunId,
) -> (
    ObjectStoreRuntimeStore,
    ObjectStoreRuntimeStore,
    Incarnation,
) {
    let stale = backend.runtime_store("runs");
    let created = stale.create_run(order(run_id)).await.unwrap();
    stale
        .atomic_apply(run_id, Commit::status(StatusChange::start_attempt(1), 2))
        .await
        .unwrap();
    let other = backend.runtime_store("runs");
    other.atomic_apply(run_id, completed()).await.unwrap();
    assert!(
        other.delete_run(run_id, created.incarnation).await.unwrap(),
        "{}",
        backend.name()
    );
    (stale, other, created.incarnation)
}

/// What `backend`'s runtime store (prefix `runs`) holds that a deletion
/// would not account for: nothing, once every run is deleted.
async fn runs_left(backend: &Backend) -> Vec<String> {
    let objects = backend.objects();
    but_deletion_remains(
        objects.as_ref(),
        stored_under(objects.as_ref(), "runs").await,
    )
    .await
}

/// A finished run of `run_id` with a memo entry and its terminal marker,
/// as a workflow leaves it.
async fn finished_run_with_entry(
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
    runs.atomic_apply(run_id, completed()).await.unwrap();
    let marker = TerminalMarker {
        run_id: run_id.clone(),
        terminal_at_ms: 4,
        incarnation: created.incarnation,
    };
    memo.markers().write(&marker).await.unwrap();
    marker
}

/// Process B reads no run of the id and writes the `Pending` hint of the
/// incarnation it is about to create; process A creates the run meanwhile,
/// so B's pointer create finds A's and B answers with A's run. B's
/// incarnation never exists, so no deletion would ever look for its hint:
/// B must take it back.
#[tokio::test]
async fn a_creator_that_lost_its_id_leaves_no_status_hint() {
    let objects = Arc::new(InMemory::new());
    let run_id = run("order-7");
    let (paused, pause) = Pauses::new(
        objects.clone(),
        Held::Put,
        Path::from("runs/runs-by-status"),
    );
    let creator_b = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
    let run_b = run_id.clone();
    let creation_b = tokio::spawn(async move { creator_b.create_run(order(&run_b)).await });
    wait_reached(pause.reached, "B writes its hint").await;

    let creator_a = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let created_a = creator_a.create_run(order(&run_id)).await.unwrap();
    pause.release.send(()).unwrap();
    let created_b = creation_b.await.unwrap().unwrap();

    assert_eq!(created_b.incarnation, created_a.incarnation);
    let hints = stored_under(&objects, "runs/runs-by-status").await;
    assert_eq!(
        hints,
        vec![format!(
            "runs/runs-by-status/Pending/order-7.{}",
            created_a.incarnation
        )],
        "only the run that exists is hinted"
    );
}

/// A `RuntimeStore::delete_run` that stopped part way (its log deletes
/// failed after the run's pointer was gone) leaves log entries and hints
/// that no reader reaches. The next sweep finds the run nowhere, but those
/// remains prove that its runtime store held it (the wrong runtime store
/// holds none): it clears the run's memo entries, then finishes the
/// deletion in the runtime store, where nothing else ever would, and
/// deletes the marker.
#[tokio::test]
async fn a_sweep_finishes_a_runtime_deletion_that_stopped_part_way() {
    let objects = Arc::new(InMemory::new());
    let memo = MemoStore::new(objects.clone(), "memo");
    let runs = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let run_id = run("order-7");
    let marker = finished_run_with_entry(&memo, &runs, &run_id).await;

    let faulty = FaultInjectingStore::new(objects.clone() as Arc<dyn ObjectStore>);
    faulty.inject(
        FaultRule::fail_before(RequestKind::Delete).matching(|p| p.as_ref().contains("/log/")),
    );
    let deleter = ObjectStoreRuntimeStore::new(Arc::new(faulty), "runs");
    assert!(
        deleter
            .delete_run(&run_id, marker.incarnation)
            .await
            .is_err()
    );
    assert!(runs.load_run(&run_id).await.unwrap().is_none());
    assert!(!stored_under(&objects, "runs").await.is_empty());

    let runtime_store: Arc<dyn RuntimeStore> =
        Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let sweeper = RetentionSweeper::builder(memo.clone(), Duration::ZERO)
        .runtime_store(runtime_store)
        .build();
    let report = sweeper.sweep_once(100).await.unwrap();

    assert!(report.failures.is_empty(), "{:?}", report.failures);
    nothing_left_after_the_rechecks(&sweeper, objects.as_ref(), "").await;
}

/// `RetentionSweeper::delete_run` deletes a finished run whole, memo
/// entries first; the marker it leaves is deleted by the next pass, and
/// then nothing of the run is left.
#[tokio::test]
async fn deleting_a_run_through_the_sweeper_leaves_nothing_after_the_next_pass() {
    let objects = Arc::new(InMemory::new());
    let memo = MemoStore::new(objects.clone(), "memo");
    let runs = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let run_id = run("order-7");
    finished_run_with_entry(&memo, &runs, &run_id).await;
    let runtime_store: Arc<dyn RuntimeStore> =
        Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let sweeper = RetentionSweeper::builder(memo.clone(), Duration::ZERO)
        .runtime_store(runtime_store)
        .build();

    assert!(sweeper.delete_run(&run_id).await.unwrap());
    assert!(runs.load_run(&run_id).await.unwrap().is_none());
    assert_eq!(
        stored_under(&objects, "memo/memos").await,
        Vec::<String>::new()
    );
    assert!(!sweeper.delete_run(&run_id).await.unwrap(), "already gone");

    let report = sweeper.sweep_once(100).await.unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    nothing_left_after_the_rechecks(&sweeper, objects.as_ref(), "").await;
}

/// Seed 378 of the deployment world: a finished run whose last attempt
/// stopped before writing its terminal marker is deleted with
/// `RetentionSweeper::delete_run`, and the runtime store's deletion fails
/// after the run's pointer is gone. A second call finds no run; without a
/// marker no pass would reach the log entries and hints left behind. The
/// deletion gives the run its marker first, so the next pass past the
/// run's retention deletes what is left.
#[tokio::test]
async fn a_sweeper_deletion_of_a_run_without_a_marker_that_stops_part_way_is_finished_by_a_pass() {
    let objects = Arc::new(InMemory::new());
    let memo = MemoStore::new(objects.clone(), "memo");
    let runs = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let run_id = run("order-7");
    finished_run_with_entry(&memo, &runs, &run_id).await;
    let markers = stored_under(&objects, "memo/terminals").await;
    for marker in &markers {
        objects.delete(&Path::from(marker.as_str())).await.unwrap();
    }

    let faulty = Arc::new(FaultInjectingStore::new(
        objects.clone() as Arc<dyn ObjectStore>
    ));
    faulty.inject(
        FaultRule::fail_before(RequestKind::Delete)
            .matching(|p| p.as_ref().contains("/log/"))
            .times(1),
    );
    let deleter: Arc<dyn RuntimeStore> =
        Arc::new(ObjectStoreRuntimeStore::new(faulty.clone(), "runs"));
    let sweeper = RetentionSweeper::builder(MemoStore::new(faulty, "memo"), Duration::ZERO)
        .runtime_store(deleter)
        .build();
    assert!(sweeper.delete_run(&run_id).await.is_err());
    assert!(runs.load_run(&run_id).await.unwrap().is_none());
    assert!(
        !sweeper.delete_run(&run_id).await.unwrap(),
        "no run to find"
    );
    assert!(!stored_under(&objects, "runs").await.is_empty());

    let report = sweeper.sweep_once(100).await.unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    nothing_left_after_the_rechecks(&sweeper, objects.as_ref(), "").await;
}

/// Seed 206 of the deployment world: an earlier run of an id was deleted
/// and its marker left to the next pass; the id's next run ended, but its
/// attempt stopped before writing its marker. `Runtime::recover` counts an
/// id with a marker of any incarnation as marked, so it did not mark the
/// later run, and once the pass deleted the earlier run's marker nothing
/// would ever sweep the later one. The pass gives it its marker.
#[tokio::test]
async fn a_pass_that_sweeps_an_earlier_runs_marker_marks_the_later_finished_run() {
    let objects = Arc::new(InMemory::new());
    let memo = MemoStore::new(objects.clone(), "memo");
    let runs = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let run_id = run("order-7");
    let earlier = finished_run_with_entry(&memo, &runs, &run_id).await;
    let runtime_store: Arc<dyn RuntimeStore> =
        Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let sweeper = RetentionSweeper::builder(memo.clone(), Duration::ZERO)
        .runtime_store(runtime_store)
        .build();
    assert!(sweeper.delete_run(&run_id).await.unwrap());
    let later = runs.create_run(order(&run_id)).await.unwrap();
    runs.atomic_apply(&run_id, Commit::status(StatusChange::start_attempt(1), 5))
        .await
        .unwrap();
    runs.atomic_apply(&run_id, completed()).await.unwrap();

    let report = sweeper.sweep_once(100).await.unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let markers: Vec<_> = memo
        .markers()
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.incarnation)
        .collect();
    assert_eq!(
        markers,
        [later.incarnation],
        "earlier: {}",
        earlier.incarnation
    );
    let report = sweeper.sweep_once(100).await.unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    nothing_left_after_the_rechecks(&sweeper, objects.as_ref(), "").await;
}

/// Seed 1919 of the deployment world: a worker whose cache held a run as
/// running commits a status change after the run ended and was deleted.
/// Its log entry lands on a position the deletion freed, the pointer is
/// gone, so it takes the entry back; the status hint it wrote just before
/// must go too, or nothing would ever delete it.
#[tokio::test]
async fn a_change_that_finds_its_run_deleted_takes_back_its_status_hint() {
    let objects = Arc::new(InMemory::new());
    let stale = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let run_id = run("order-7");
    let created = stale.create_run(order(&run_id)).await.unwrap();
    stale
        .atomic_apply(&run_id, Commit::status(StatusChange::start_attempt(1), 2))
        .await
        .unwrap();
    let other = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    other.atomic_apply(&run_id, completed()).await.unwrap();
    assert!(
        other
            .delete_run(&run_id, created.incarnation)
            .await
            .unwrap()
    );

    let failed = StatusChange::Failed {
        error: "refused".into(),
    };
    let late = stale.atomic_apply(&run_id, Commit::status(failed, 5)).await;
    assert!(
        matches!(late, Err(memo_runtime::Error::Conflict { .. })),
        "{late:?}"
    );
    assert_eq!(
        but_deletion_remains(&objects, stored_under(&objects, "runs").await).await,
        Vec::<String>::new()
    );
}

/// Seeds 1606, 1835, 3082, 4250, 6361, 6948, 6997, 7993 and 8773 of the
/// deployment world, after the cost ledger was merged: an attempt paused
/// past its lease while another attempt ended the run, the run was deleted
/// (its marker with it) and its id used again; the stale attempt then
/// failed, and recorded what it cost in the deleted incarnation's folder,
/// where no deletion would ever look again. It takes the record back, and
/// the run now under the id keeps everything.
#[tokio::test]
async fn a_stale_attempts_cost_record_for_a_deleted_run_is_taken_back() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-8");
        let (stale, other, incarnation) = deleted_under_a_stale_attempt(&backend, &run_id).await;
        let again = other.create_run(order(&run_id)).await.unwrap();
        let before = runs_left(&backend).await;

        let mut cost = AttemptCost::default();
        cost.attempt = 1;
        let late = stale.record_attempt_cost(&run_id, incarnation, &cost).await;
        assert!(
            matches!(late, Err(memo_runtime::Error::Conflict { .. })),
            "{name}: {late:?}"
        );
        assert_eq!(runs_left(&backend).await, before, "{name}");
        let current = other.load_run(&run_id).await.unwrap().unwrap();
        assert_eq!(current.incarnation, again.incarnation, "{name}");

        // And with the id not used again: nothing of the run is left.
        let start = Commit::status(StatusChange::start_attempt(1), 2);
        other.atomic_apply(&run_id, start).await.unwrap();
        other.atomic_apply(&run_id, completed()).await.unwrap();
        assert!(
            other.delete_run(&run_id, again.incarnation).await.unwrap(),
            "{name}"
        );
        let late = stale
            .record_attempt_cost(&run_id, again.incarnation, &cost)
            .await;
        assert!(late.is_err(), "{name}: {late:?}");
        assert_eq!(runs_left(&backend).await, Vec::<String>::new(), "{name}");
    }
}

/// Seed 1375 of the deployment world: `RetentionSweeper::delete_run` of an
/// ended run cleared its memo entries, then a stale attempt of the run
/// (paused past its lease while another attempt ended the run) committed
/// a memo entry, and the runtime store's deletion failed part way (a
/// listing of the incarnation's folder, after its pointer and record were
/// gone). The next pass found the marker's run nowhere and the entry
/// there: it kept both for ever, as if its runtime store were the wrong
/// one. The remains of the incarnation in the runtime store tell the two
/// apart: the pass clears the entry, then the remains, then the marker.
#[tokio::test]
async fn a_deletion_that_stopped_part_way_after_a_stale_entry_landed_is_finished_by_a_pass() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let memo = backend.memo_store("memo");
        let runs = backend.runtime_store("runs");
        let run_id = run("order-9");
        let marker = finished_run_with_entry(&memo, &runs, &run_id).await;
        let runtime_store: Arc<dyn RuntimeStore> = Arc::new(backend.runtime_store("runs"));
        let sweeper = RetentionSweeper::builder(memo.clone(), Duration::ZERO)
            .runtime_store(runtime_store)
            .build();
        let folder = format!("runs/runs/{run_id}/{}", marker.incarnation);
        faults.inject(
            FaultRule::fail_before(RequestKind::List)
                .matching(move |p| p.as_ref() == folder)
                .times(1),
        );
        assert!(sweeper.delete_run(&run_id).await.is_err(), "{name}");
        assert!(runs.load_run(&run_id).await.unwrap().is_none(), "{name}");
        // The stale attempt's commit, landed after the deletion's clear.
        memo.memo_for(&run_id, marker.incarnation, 0)
            .put("charge", b"charged")
            .await
            .unwrap();

        let report = sweeper.sweep_once(100).await.unwrap();
        assert!(report.failures.is_empty(), "{name}: {:?}", report.failures);
        nothing_left_after_the_rechecks(&sweeper, backend.objects().as_ref(), name).await;
    }
}

/// Seed 1746 of the deployment world: a pass cleared an ended run's memo
/// entries, a stale attempt of the run then committed one, and the pass
/// deleted the run's records and its marker: nothing would ever reach the
/// entry. The recheck the pass leaves reaches it: a pass past it deletes
/// the entry (a pass cleared the entries once more right after the
/// records, until the recheck made that second clear, two listings a run
/// swept, redundant).
#[tokio::test]
async fn a_stale_entry_that_lands_while_a_pass_deletes_its_run_is_cleared_by_its_recheck() {
    for backend in Backend::all() {
        let name = backend.name();
        let memo = backend.memo_store("memo");
        let runs = backend.runtime_store("runs");
        let run_id = run("order-10");
        let marker = finished_run_with_entry(&memo, &runs, &run_id).await;
        let record = Path::from(format!("runs/runs/{run_id}/{}/run", marker.incarnation));
        let (paused, pause) = Pauses::new(backend.objects(), Held::Delete, record);
        let paused: Arc<dyn ObjectStore> = Arc::new(paused);
        let runtime_store: Arc<dyn RuntimeStore> =
            Arc::new(ObjectStoreRuntimeStore::new(paused.clone(), "runs"));
        let sweeper = RetentionSweeper::builder(MemoStore::new(paused, "memo"), Duration::ZERO)
            .runtime_store(runtime_store)
            .build();

        let pass = tokio::spawn({
            let sweeper = sweeper.clone();
            async move { sweeper.sweep_once(100).await }
        });
        wait_reached(pause.reached, "pause").await;
        assert_eq!(
            stored_under(backend.objects().as_ref(), "memo/memos").await,
            Vec::<String>::new(),
            "{name}: the pass cleared the entries before the records"
        );
        memo.memo_for(&run_id, marker.incarnation, 0)
            .put("charge", b"charged")
            .await
            .unwrap();
        pause.release.send(()).unwrap();
        let report = pass.await.unwrap().unwrap();

        assert!(report.failures.is_empty(), "{name}: {:?}", report.failures);
        let late = stored_under(backend.objects().as_ref(), "memo/memos").await;
        assert_eq!(
            late.len(),
            1,
            "{name}: the late entry waits for the recheck: {late:?}"
        );
        let rechecked = sweeper.sweep_once(u64::MAX).await.unwrap();
        assert_eq!(
            (rechecked.late_objects_deleted, rechecked.recheck_failures),
            (1, 0),
            "{name}: {rechecked:?}"
        );
        assert_eq!(
            stored_under(backend.objects().as_ref(), "").await,
            Vec::<String>::new(),
            "{name}"
        );
    }
}

/// Seed 3542 of the deployment world, after the fix above: the stale
/// attempt's read of the pointer after its cost record failed (an injected
/// fault on the listing that looks for a record to restore the pointer
/// from), and the record stayed. A record whose check fails is taken back
/// too.
#[tokio::test]
async fn a_cost_record_whose_check_of_its_run_fails_is_taken_back() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let run_id = run("order-11");
        let (stale, _, incarnation) = deleted_under_a_stale_attempt(&backend, &run_id).await;
        let folder = format!("runs/runs/{run_id}");
        faults.inject(
            FaultRule::fail_before(RequestKind::List)
                .matching(move |p| p.as_ref() == folder)
                .times(1),
        );

        let mut cost = AttemptCost::default();
        cost.attempt = 1;
        let late = stale.record_attempt_cost(&run_id, incarnation, &cost).await;
        assert!(late.is_err(), "{name}: {late:?}");
        assert_eq!(faults.faults_injected(), 1, "{name}");
        assert_eq!(runs_left(&backend).await, Vec::<String>::new(), "{name}");
    }
}

/// Seed 9217 of the deployment world: an attempt paused with its change's
/// log entry in flight while another attempt ended the run and a sweep
/// deleted it; the entry then landed in the freed log, and the first read
/// of the pointer after it failed. The pointer is read again, the run is
/// found gone, and the entry taken back (the writer's next change was
/// another, which would have found that entry as another writer's).
#[tokio::test]
async fn a_change_whose_pointer_check_fails_once_reads_it_again_and_takes_its_entry_back() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let run_id = run("order-14");
        let (stale, _, _) = deleted_under_a_stale_attempt(&backend, &run_id).await;
        let pointer = format!("runs/runs/{run_id}/run");
        faults.inject(
            FaultRule::fail_before(RequestKind::Get)
                .matching(move |p| p.as_ref() == pointer)
                .times(1),
        );

        let failed = StatusChange::Failed {
            error: "refused".into(),
        };
        let late = stale.atomic_apply(&run_id, Commit::status(failed, 5)).await;
        assert!(
            matches!(late, Err(Error::Conflict { .. })),
            "{name}: {late:?}"
        );
        assert_eq!(faults.faults_injected(), 1, "{name}");
        assert_eq!(runs_left(&backend).await, Vec::<String>::new(), "{name}");
    }
}

/// Seed 9217 of the deployment world: an attempt paused with its change's
/// log entry in flight while another attempt ended the run and a sweep
/// deleted it; the entry then landed in the freed log, and the pointer
/// check after it failed, every read of it (a store error: a dead run
/// cannot be told from a live one, so the entry stays). The attempt tried
/// the change again, found the run gone, and takes that entry back too.
#[tokio::test]
async fn a_change_whose_pointer_check_failed_takes_its_entry_back_when_tried_again() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let run_id = run("order-12");
        let (stale, _, _) = deleted_under_a_stale_attempt(&backend, &run_id).await;
        let pointer = format!("runs/runs/{run_id}/run");
        faults.inject(
            FaultRule::fail_before(RequestKind::Get)
                .matching(move |p| p.as_ref() == pointer)
                .times(3),
        );

        let failed = || {
            let failed = StatusChange::Failed {
                error: "refused".into(),
            };
            Commit::status(failed, 5)
        };
        let first = stale.atomic_apply(&run_id, failed()).await;
        assert!(first.is_err(), "{name}: {first:?}");
        assert_eq!(faults.faults_injected(), 3, "{name}");
        // The retry reads the run again from its pointer (the failed check
        // left the change unconfirmed), finds it gone and takes the entry
        // back: the run is not found.
        let again = stale.atomic_apply(&run_id, failed()).await;
        assert!(
            matches!(
                again,
                Err(Error::Conflict { .. } | Error::RunNotFound { .. })
            ),
            "{name}: {again:?}"
        );
        assert_eq!(runs_left(&backend).await, Vec::<String>::new(), "{name}");
    }
}

/// Seed 9217 of the deployment world: a stale attempt's cost record for a
/// deleted run is taken back, and the `DELETE` doing it fails once; it is
/// tried again, as no deletion lists the folder again.
#[tokio::test]
async fn a_cost_record_taken_back_whose_delete_fails_once_is_deleted_again() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let run_id = run("order-13");
        let (stale, _, incarnation) = deleted_under_a_stale_attempt(&backend, &run_id).await;
        faults.inject(
            FaultRule::fail_before(RequestKind::Delete)
                .matching(|p| p.as_ref().contains("/cost/"))
                .times(1),
        );

        let mut cost = AttemptCost::default();
        cost.attempt = 1;
        let late = stale.record_attempt_cost(&run_id, incarnation, &cost).await;
        assert!(
            matches!(late, Err(Error::Conflict { .. })),
            "{name}: {late:?}"
        );
        assert_eq!(faults.faults_injected(), 1, "{name}");
        assert_eq!(runs_left(&backend).await, Vec::<String>::new(), "{name}");
    }
}

/// Only a finished run can be deleted: deleting an open one is a conflict
/// and deletes nothing.
#[tokio::test]
async fn deleting_an_open_run_through_the_sweeper_is_refused() {
    let objects = Arc::new(InMemory::new());
    let memo = MemoStore::new(objects.clone(), "memo");
    let runs = Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "runs"));
    let run_id = run("order-7");
    runs.create_run(order(&run_id)).await.unwrap();
    let sweeper = RetentionSweeper::builder(memo, Duration::ZERO)
        .runtime_store(runs.clone())
        .build();

    let refused = sweeper.delete_run(&run_id).await;
    assert!(
        matches!(refused, Err(memo_runtime::Error::Conflict { .. })),
        "{refused:?}"
    );
    assert!(runs.load_run(&run_id).await.unwrap().is_some());
}

/// The `Pending` hint of `run_id` incarnations, as listed.
async fn pending_hints(objects: &InMemory) -> Vec<String> {
    stored_under(objects, "runs/runs-by-status/Pending").await
}

/// A creator that stops for good (a crash) between its `Pending` hint and
/// its pointer leaves the hint of an incarnation that never exists. No
/// deletion looks for it, and recovery lists `Pending` run ids: the listing
/// tidies it away (and does not list the run), so nothing is left once
/// every run is swept.
#[tokio::test]
async fn a_create_that_stopped_before_its_pointer_leaves_no_hint_once_pending_runs_are_listed() {
    let objects = Arc::new(InMemory::new());
    let run_id = run("order-7");
    let (paused, pause) = Pauses::new(
        objects.clone(),
        Held::Put,
        Path::from("runs/runs/order-7/run"),
    );
    let creator = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
    let run_c = run_id.clone();
    let creation = tokio::spawn(async move { creator.create_run(order(&run_c)).await });
    wait_reached(pause.reached, "the creator writes its pointer").await;
    // The process dies with its pointer unwritten.
    creation.abort();
    assert!(creation.await.unwrap_err().is_cancelled());
    assert_eq!(pending_hints(&objects).await.len(), 1, "the hint stands");

    let recovering = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let listed = recovering
        .list_run_ids(memo_runtime::runtime_store::RunStatus::Pending)
        .await
        .unwrap();
    assert!(listed.is_empty(), "no run to recover: {listed:?}");
    assert_eq!(
        but_deletion_remains(&objects, stored_under(&objects, "runs").await).await,
        Vec::<String>::new()
    );
}

/// A tidying listing races a creator that is between its hint and its
/// pointer: the listing reads no run and deletes the hint, then the creator
/// writes its pointer. The created run must keep its hint (recovery finds
/// `Pending` runs by it): the creator checks its hint once its pointer and
/// record stand, and writes it again.
#[tokio::test]
async fn a_listing_that_tidies_a_hint_before_its_creators_pointer_leaves_the_run_hinted() {
    let objects = Arc::new(InMemory::new());
    let run_id = run("order-7");
    let (paused, pause) = Pauses::new(
        objects.clone(),
        Held::Put,
        Path::from("runs/runs/order-7/run"),
    );
    let creator = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
    let run_c = run_id.clone();
    let creation = tokio::spawn(async move { creator.create_run(order(&run_c)).await });
    wait_reached(pause.reached, "the creator writes its pointer").await;

    let lister = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let pending = memo_runtime::runtime_store::RunStatus::Pending;
    assert!(lister.list_run_ids(pending).await.unwrap().is_empty());
    assert!(pending_hints(&objects).await.is_empty(), "tidied");
    pause.release.send(()).unwrap();
    let created = creation.await.unwrap().unwrap();

    assert_eq!(
        pending_hints(&objects).await,
        vec![format!(
            "runs/runs-by-status/Pending/order-7.{}",
            created.incarnation
        )]
    );
    assert_eq!(lister.list_run_ids(pending).await.unwrap(), vec![run_id]);
}

/// The same race the other way round: the listing reads no run, the
/// creator then writes its pointer and record and finds its hint still
/// there, and only then does the listing's delete of the hint land. The
/// listing reads the pointer again after its delete, finds the hint's
/// incarnation current, and writes the hint back.
#[tokio::test]
async fn a_listing_whose_tidying_delete_lands_after_a_creation_writes_the_hint_back() {
    let objects = Arc::new(InMemory::new());
    let run_id = run("order-7");
    let (paused, pause) = Pauses::new(
        objects.clone(),
        Held::Delete,
        Path::from("runs/runs-by-status"),
    );
    // The hint of a creation that stops before its pointer, which the
    // listing will find unborn; its creator then comes back and finishes.
    let (paused_creator, creator_pause) = Pauses::new(
        objects.clone(),
        Held::Put,
        Path::from("runs/runs/order-7/run"),
    );
    let creator = ObjectStoreRuntimeStore::new(Arc::new(paused_creator), "runs");
    let run_c = run_id.clone();
    let creation = tokio::spawn(async move { creator.create_run(order(&run_c)).await });
    creator_pause
        .reached
        .await
        .expect("the creator writes its pointer");

    let lister = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
    let pending = memo_runtime::runtime_store::RunStatus::Pending;
    let listing = tokio::spawn(async move { lister.list_run_ids(pending).await });
    wait_reached(pause.reached, "the listing deletes the hint").await;
    creator_pause.release.send(()).unwrap();
    let created = creation.await.unwrap().unwrap();
    pause.release.send(()).unwrap();
    assert!(listing.await.unwrap().unwrap().is_empty());

    assert_eq!(
        pending_hints(&objects).await,
        vec![format!(
            "runs/runs-by-status/Pending/order-7.{}",
            created.incarnation
        )]
    );
}

/// A memoized side effect: counts its runs, returns its run's number.
#[memoized(skip(runs))]
async fn reserve_seat(memo: &Memo, runs: &AtomicU64, order: u32) -> Result<u64, Error> {
    let _ = order;
    Ok(runs.fetch_add(1, Ordering::SeqCst) + 1)
}

type Reserved = futures::future::BoxFuture<'static, Result<u32, Error>>;

/// One step that reserves a seat.
fn reservation(
    runs: Arc<AtomicU64>,
) -> Workflow<impl Fn(Context, u32) -> Reserved + Send + Sync + 'static> {
    Workflow::new("reservation", move |ctx: Context, order: u32| {
        let runs = runs.clone();
        Box::pin(async move {
            ctx.step("reserve", |memo| {
                let runs = runs.clone();
                async move { Ok::<_, Error>(reserve_seat(&memo, &runs, order).await? as u32) }
            })
            .await
        }) as Reserved
    })
}

/// Seed 3121 of the deployment world (the history of seed 2281, to its
/// end): attempt A runs a memoized side effect and stalls before its value
/// commits; its lease expires, attempt B takes the run over, ends it, and
/// a sweep deletes the run, memo entries and all, marker last. A's commit
/// then creates the freed key in the deleted incarnation's folder, where
/// no sweep will ever look again (the marker is gone). A's lease check
/// refuses the value; A must also take its entry back.
#[tokio::test]
async fn a_stale_attempts_memo_entry_committed_after_its_run_was_swept_is_taken_back() {
    const LEASE: Duration = Duration::from_secs(30);
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-12");
        let clock = Arc::new(ManualClock::new(1_000_000));
        let runs = Arc::new(AtomicU64::new(0));
        let workflow = Arc::new(reservation(runs.clone()));
        let process = |memo: Arc<dyn ObjectStore>, worker: &str| {
            process_builder(memo, backend.open(), &clock, worker, LEASE)
                .build()
                .unwrap()
        };

        // A's memo entry write, its reservation's commit, is held.
        let (paused, commit) = Pauses::new(backend.open(), Held::Put, Path::from("memo/memos"));
        let a = process(Arc::new(paused), "worker-a");
        let attempt_a = tokio::spawn({
            let (run_id, workflow) = (run_id.clone(), workflow.clone());
            async move { a.run(&run_id, &7, &*workflow).await }
        });
        wait_reached(commit.reached, "commit").await;

        // A's lease expires; B takes the run over and ends it; a sweep
        // deletes it whole.
        clock.advance_ms(LEASE.as_millis() as u64 + 1_000);
        let b = process(backend.open(), "worker-b");
        assert_eq!(b.run(&run_id, &7, &*workflow).await.unwrap(), 2, "{name}");
        let sweeper = b.retention_sweeper();
        assert!(sweeper.delete_run(&run_id).await.unwrap(), "{name}");
        sweeper.sweep_once(u64::MAX).await.unwrap();
        nothing_left_after_the_rechecks(&sweeper, backend.objects().as_ref(), name).await;

        // A's commit lands on the freed key, and is refused.
        commit.release.send(()).unwrap();
        assert!(attempt_a.await.unwrap().is_err(), "{name}");
        assert_eq!(
            stored_under(backend.objects().as_ref(), "").await,
            Vec::<String>::new(),
            "{name}: the stale attempt left objects of the deleted run"
        );
    }
}

/// Seed 5988 of session 25's survey: as above, but attempt A's worker dies
/// after its late memo entry landed and before it could take it back (its
/// take-back, a delete, is held, and A is aborted there). Nothing of the
/// run leads a pass to that entry any more: the sweep that deleted the run
/// left a recheck marker, and a pass once it is due clears the
/// incarnation's folders again. A pass before it is due keeps the entry;
/// a new run of the same id is another incarnation and keeps its own.
#[tokio::test]
async fn a_stale_attempts_entry_whose_worker_died_before_its_take_back_is_cleared_by_a_recheck() {
    const LEASE: Duration = Duration::from_secs(30);
    const RECHECK: Duration = Duration::from_secs(600);
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-14");
        let clock = Arc::new(ManualClock::new(1_000_000));
        let runs = Arc::new(AtomicU64::new(0));
        let workflow = Arc::new(reservation(runs.clone()));
        let process = |memo: Arc<dyn ObjectStore>, worker: &str| {
            process_builder(memo, backend.open(), &clock, worker, LEASE)
                .build()
                .unwrap()
        };
        let sweeper = |runtime: &Runtime, retention: Duration| {
            runtime
                .retention_sweeper_builder()
                .retention(retention)
                .recheck_after(RECHECK)
                .build()
        };

        // A's memo entry write is held, and so is the delete that would
        // take it back.
        let memos = Path::from("memo/memos");
        let (put_held, commit) = Pauses::new(backend.open(), Held::Put, memos.clone());
        let (paused, take_back) = Pauses::new(Arc::new(put_held), Held::Delete, memos);
        let a = process(Arc::new(paused), "worker-a");
        let attempt_a = tokio::spawn({
            let (run_id, workflow) = (run_id.clone(), workflow.clone());
            async move { a.run(&run_id, &7, &*workflow).await }
        });
        wait_reached(commit.reached, "commit").await;

        // A's lease expires; B takes the run over and ends it; a pass
        // deletes it whole.
        clock.advance_ms(LEASE.as_millis() as u64 + 1_000);
        let b = process(backend.open(), "worker-b");
        assert_eq!(b.run(&run_id, &7, &*workflow).await.unwrap(), 2, "{name}");
        clock.advance_ms(1);
        let report = sweeper(&b, Duration::ZERO).sweep_now().await.unwrap();
        assert_eq!(report.runs_cleared, 1, "{name}");
        let left = stored_under(backend.objects().as_ref(), "").await;
        assert!(
            left.len() == 3
                && left[0].starts_with("memo/rechecks/")
                && but_deletion_remains(backend.objects().as_ref(), left[1..].to_vec())
                    .await
                    .is_empty(),
            "{name}: only the recheck marker, the tombstone and the vacated pointer are left: \
             {left:?}"
        );

        // A's commit lands in the deleted incarnation's folder; A's worker
        // dies at its take-back.
        commit.release.send(()).unwrap();
        wait_reached(take_back.reached, "take back").await;
        attempt_a.abort();
        let _ = attempt_a.await;
        let late: Vec<_> = stored_under(backend.objects().as_ref(), "memo/memos").await;
        assert_eq!(late.len(), 1, "{name}: the late entry stands: {late:?}");

        // The id is used again meanwhile: another incarnation.
        let again = process(backend.open(), "worker-c");
        assert_eq!(
            again.run(&run_id, &8, &*workflow).await.unwrap(),
            3,
            "{name}"
        );

        // A pass before the recheck is due keeps the late entry; one after
        // clears it, and only it (the new run is retained for a day).
        let day = Duration::from_secs(24 * 3600);
        sweeper(&b, day).sweep_now().await.unwrap();
        let before = stored_under(backend.objects().as_ref(), "memo/memos").await;
        assert!(before.contains(&late[0]), "{name}: {before:?}");
        clock.advance_ms(RECHECK.as_millis() as u64);
        let report = sweeper(&b, day).sweep_now().await.unwrap();
        assert_eq!(
            (
                report.rechecks_due,
                report.late_objects_deleted,
                report.recheck_failures
            ),
            (1, 1, 0),
            "{name}"
        );
        let after = stored_under(backend.objects().as_ref(), "memo").await;
        assert!(
            !after.contains(&late[0]) && !after.iter().any(|p| p.starts_with("memo/rechecks/")),
            "{name}: the late entry and the recheck marker are gone: {after:?}"
        );
        assert!(
            after.iter().any(|p| p.starts_with("memo/memos/")),
            "{name}: the new run keeps its entry: {after:?}"
        );
        assert_eq!(
            b.runtime_store()
                .load_run(&run_id)
                .await
                .unwrap()
                .map(|r| r.status),
            Some(memo_runtime::runtime_store::RunStatus::Completed),
            "{name}"
        );
    }
}

/// What a sweep leaves of the runs it deleted is their recheck markers,
/// their tombstones and their vacated pointers, until a pass past them (an
/// hour later by default) deletes them too.
async fn nothing_left_after_the_rechecks(
    sweeper: &RetentionSweeper,
    objects: &dyn ObjectStore,
    name: &str,
) {
    let left = but_deletion_remains(objects, stored_under(objects, "").await).await;
    assert!(
        left.iter().all(|p| p.starts_with("memo/rechecks/")),
        "{name}: {left:?}"
    );
    let report = sweeper.sweep_once(u64::MAX).await.unwrap();
    assert_eq!(report.recheck_failures, 0, "{name}: {report:?}");
    assert_eq!(
        stored_under(objects, "").await,
        Vec::<String>::new(),
        "{name}"
    );
}

/// Seed 101 of the deployment world: a process reads a finished run (its
/// pointer, then the listing of its checkpoint deltas) and stalls before
/// it reads the newest delta; a sweep deletes the run meanwhile. The
/// delta is gone, and so is everything a second listing could find: the
/// read took the deleted run for one just created, `Pending` with an empty
/// log, and a redelivery committed its first attempt into the freed log
/// (its worker died before it took the entry back, and nothing reaches
/// that folder again). A delta that vanished with none after it is a
/// deletion, not a run just created: the read finds no run.
#[tokio::test]
async fn a_read_whose_checkpoint_vanished_with_its_deleted_run_finds_no_run() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-13");
        let writer =
            ObjectStoreRuntimeStore::new(backend.open(), "runs").with_checkpoint_interval(1);
        let created = writer.create_run(order(&run_id)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 2);
        writer.atomic_apply(&run_id, start).await.unwrap();
        // And a step: at this interval, a delta that names no base comes 2
        // entries after the last.
        let receipt = StepReceipt {
            run_id: run_id.clone(),
            sequence: 0,
            step: "reserve".into(),
            output: Bytes::from_static(b"seat 1"),
            recorded_at_ms: 3,
            error: None,
            retries: 0,
            last_retried_error: None,
        };
        writer
            .atomic_apply(&run_id, Commit::step(receipt, 3))
            .await
            .unwrap();

        // The reader's read of the newest delta is held.
        let deltas = Path::from(format!("runs/runs/order-13/{}/deltas", created.incarnation));
        let (paused, read) = Pauses::new(backend.open(), Held::Get, deltas);
        let reader = Arc::new(ObjectStoreRuntimeStore::new(Arc::new(paused), "runs"));
        let loading = tokio::spawn({
            let (reader, run_id) = (reader.clone(), run_id.clone());
            async move { reader.load_run(&run_id).await }
        });
        wait_reached(read.reached, "read").await;

        // The run ends and is deleted whole.
        writer.atomic_apply(&run_id, completed()).await.unwrap();
        assert!(
            writer
                .delete_run(&run_id, created.incarnation)
                .await
                .unwrap(),
            "{name}"
        );
        assert_eq!(runs_left(&backend).await, Vec::<String>::new(), "{name}");

        read.release.send(()).unwrap();
        let loaded = loading.await.unwrap().unwrap();
        assert_eq!(
            loaded.map(|run| run.status),
            None,
            "{name}: a deleted run read as another"
        );
        // So a commit finds no run, and writes nothing.
        let late = Commit::status(StatusChange::start_attempt(1), 5);
        assert!(reader.atomic_apply(&run_id, late).await.is_err(), "{name}");
        assert_eq!(runs_left(&backend).await, Vec::<String>::new(), "{name}");
    }
}
