//! Deletions of one run that race each other and a new run of the same id
//! (issue 20, case 1): every worker runs a sweeper, so two processes delete
//! the same expired run while a queue redelivers its id. Object stores
//! delete unconditionally, so a deletion that checked the run and then
//! stalled may still remove the pointer of the run created since; that run
//! must survive it. Each interleaving is staged deterministically: one
//! process's store pauses at a chosen request until the test lets it go.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::{
    Commit, InputRecord, NewInput, NewRun, ObjectStoreRuntimeStore, RunRecord, RunStatus,
    RunSummary, RuntimeStore, StatusChange, StepReceipt,
};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Bytes, Error, Incarnation, Memo, MemoStore, RunId, memoized};
use memo_tests::fixtures::{
    Backend, but_deletion_remains, is_vacated_pointer, process_builder, run, stored_bytes,
    stored_under,
};
use memo_tests::pause::{Held, Pauses, wait_reached};
use tokio::sync::oneshot;

fn order(run_id: &RunId) -> NewRun {
    NewRun {
        run_id: run_id.clone(),
        workflow: "checkout".into(),
        input: Bytes::from_static(b"order"),
        created_at_ms: 1,
        workflow_version: None,
    }
}

fn charged(run_id: &RunId) -> StepReceipt {
    StepReceipt {
        run_id: run_id.clone(),
        sequence: 0,
        step: "charge".into(),
        error: None,
        retries: 0,
        last_retried_error: None,
        output: Bytes::from_static(b"charged"),
        recorded_at_ms: 3,
    }
}

/// The run's first attempt starts and commits its charge.
async fn start_and_charge(worker: &ObjectStoreRuntimeStore, run_id: &RunId) {
    let start = Commit::status(StatusChange::start_attempt(1), 2);
    worker.atomic_apply(run_id, start).await.unwrap();
    worker
        .atomic_apply(run_id, Commit::step(charged(run_id), 3))
        .await
        .unwrap();
}

fn completed() -> Commit {
    let done = StatusChange::Completed {
        output: Bytes::from_static(b"done"),
    };
    Commit::status(done, 4)
}

/// Process A's deletion of the expired run checks it, then stalls at the
/// pointer's change (its conditional update vacating it; in a release
/// before vacated pointers, its delete); process B deletes the same run in
/// full; the queue redelivers the id, which creates a new run, and a
/// worker commits a step to it. A's deletion then goes on. The new run
/// must be whole afterwards, to every process: its status and receipt
/// read by a fresh instance, a redelivery answered with it rather than
/// with a third run, and its worker's next commit accepted.
#[tokio::test]
async fn a_stalled_deletion_never_removes_the_run_created_after_it() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-7");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();

        // Process A checks the run, then its change of the pointer is held.
        let pointer = Path::from("runs/runs/order-7/run");
        let (paused, pause) = Pauses::new(backend.open(), Held::Vacate, pointer);
        let sweeper_a = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
        let (run_a, old_a) = (run_id.clone(), old.incarnation);
        let deletion_a = tokio::spawn(async move { sweeper_a.delete_run(&run_a, old_a).await });
        if pause.reached.await.is_err() {
            panic!(
                "{name}: A never vacated the pointer: {:?}",
                deletion_a.await
            );
        }

        // Process B deletes it in full; the queue redelivers the order.
        let sweeper_b = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert!(
            sweeper_b
                .delete_run(&run_id, old.incarnation)
                .await
                .unwrap(),
            "{name}"
        );
        let new = worker.create_run(order(&run_id)).await.unwrap();
        assert_ne!(new.incarnation, old.incarnation, "{name}");
        start_and_charge(&worker, &run_id).await;

        // A's deletion goes on.
        pause.release.send(()).unwrap();
        deletion_a.await.unwrap().unwrap();

        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let seen = fresh.load_run(&run_id).await.unwrap();
        assert_eq!(
            seen.map(|r| (r.incarnation, r.status)),
            Some((new.incarnation, RunStatus::Running)),
            "{name}: the run created after the deletion was lost"
        );
        assert_eq!(
            fresh.load_receipts(&run_id, None).await.unwrap().len(),
            1,
            "{name}"
        );
        let redelivered = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let again = redelivered.create_run(order(&run_id)).await.unwrap();
        assert_eq!(
            again.incarnation, new.incarnation,
            "{name}: a third run was started"
        );
        let finished = worker.atomic_apply(&run_id, completed()).await.unwrap();
        assert_eq!(finished.incarnation, new.incarnation, "{name}");
    }
}

/// The window a creator's check by listing left (seeds 1392 and 703 of
/// session 43's widened simulator world), staged. Process A's deletion of
/// the expired run reads its pointer and stalls before changing it;
/// process B deletes the run in full; a redelivery (C) finds no run of the
/// id and stalls at its `Pending` hint; the next redelivery creates the
/// run, starts it and commits a step. A's change then lands, and C goes
/// on. In a release before vacated pointers, A's delete removed the new
/// run's pointer, C's create found the path free, and C's run was the id's
/// current run until C's check after its record: a reader answered with it
/// (seed 1392: both runs ran), and the new run's own writer, checking a
/// commit in that window, read its run as deleted and took the commit back
/// (seed 703). A's change is now a conditional update of the version it
/// read, which the new run's pointer is not: refused. The new run's
/// pointer stays the object its creator wrote, C's create finds it taken
/// and answers with the new run, and no reader ever sees another.
#[tokio::test]
async fn a_stalled_deletion_never_lets_a_creator_take_the_id_from_the_run_created_after_it() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-24");
        let pointer = Path::from("runs/runs/order-24/run");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();

        // A reads the pointer; its change of it is held.
        let (paused, stale) = Pauses::new(backend.open(), Held::Vacate, pointer.clone());
        let sweeper_a = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
        let (run_a, old_a) = (run_id.clone(), old.incarnation);
        let deletion_a = tokio::spawn(async move { sweeper_a.delete_run(&run_a, old_a).await });
        wait_reached(stale.reached, "A's change of the pointer").await;

        // B deletes the run; C finds no run of the id and stalls.
        let sweeper_b = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert!(
            sweeper_b
                .delete_run(&run_id, old.incarnation)
                .await
                .unwrap()
        );
        let hints = Path::from("runs/runs-by-status");
        let (paused, at_hint) = Pauses::new(backend.open(), Held::Put, hints);
        let creator_c = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
        let answer_c = tokio::spawn({
            let run_id = run_id.clone();
            async move { creator_c.create_run(order(&run_id)).await }
        });
        wait_reached(at_hint.reached, "C's Pending hint").await;

        // The next redelivery creates the run; it starts and charges.
        let new = worker.create_run(order(&run_id)).await.unwrap();
        assert_ne!(new.incarnation, old.incarnation, "{name}");
        start_and_charge(&worker, &run_id).await;
        let written = backend.objects().head(&pointer).await.unwrap().e_tag;

        // A's change lands; C goes on.
        stale.release.send(()).unwrap();
        assert!(deletion_a.await.unwrap().unwrap(), "{name}");
        assert_eq!(
            backend
                .objects()
                .head(&pointer)
                .await
                .ok()
                .map(|meta| meta.e_tag),
            Some(written),
            "{name}: the new run's pointer was removed (or replaced) by the stale deletion"
        );
        at_hint.release.send(()).unwrap();
        let answered = answer_c.await.unwrap().unwrap();
        assert_eq!(
            (answered.incarnation, answered.status),
            (new.incarnation, RunStatus::Running),
            "{name}: C answered with another run"
        );

        // The new run's worker commits on; every process reads the run.
        let done = worker.atomic_apply(&run_id, completed()).await.unwrap();
        assert_eq!(done.incarnation, new.incarnation, "{name}");
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert_eq!(
            fresh.load_receipts(&run_id, None).await.unwrap().len(),
            1,
            "{name}"
        );
        let records: Vec<_> = stored_under(backend.objects().as_ref(), "runs/runs/order-24")
            .await
            .into_iter()
            .filter(|path| path.ends_with("/run") && path.as_str() != pointer.as_ref())
            .collect();
        assert_eq!(records.len(), 1, "{name}: one run's record: {records:?}");
    }
}

/// Two sweepers recheck one deletion at once (every worker runs one): the
/// first marks the vacated pointer swept and is held at its delete; the
/// second finds the pointer swept, not vacated by the deletion it
/// forgets, and leaves it (no second delete that could land later still).
/// Then a redelivery would create the id's next run: refused while the
/// pointer is marked swept, since the first's held delete, the one
/// unconditional delete of a pointer left, would land on the new run's
/// pointer (it did, and the next reader restored the pointer from the
/// run's record, until session 51: with a second creator on the freed
/// path meanwhile, a commit acknowledged to one of the two runs went
/// missing, seed 27027 of the quiet-world survey). Once the delete
/// landed, the creation goes through, and its pointer stands.
#[tokio::test]
async fn two_rechecks_of_one_deletion_delete_its_vacated_pointer_once() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-26");
        let pointer = Path::from("runs/runs/order-26/run");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();
        assert!(worker.delete_run(&run_id, old.incarnation).await.unwrap());

        let (paused, held) = Pauses::new(backend.open(), Held::Delete, pointer.clone());
        let first = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
        let (run_a, old_a) = (run_id.clone(), old.incarnation);
        // A retention pass's recheck, which dates its mark (the creation
        // below is at 1 ms, within a minute of it).
        let recheck = tokio::spawn(async move {
            let mut forgotten = first.forget_deleted_all_at(&[(run_a, old_a)], 1).await;
            forgotten.pop().expect("one result")
        });
        wait_reached(held.reached, "the first recheck's delete of the pointer").await;

        let counting = Arc::new(memo_runtime::testing::CountingStore::new(backend.open()));
        let second = ObjectStoreRuntimeStore::new(counting.clone(), "runs");
        second
            .forget_deleted(&run_id, old.incarnation)
            .await
            .unwrap();
        let sent = counting.counts();
        assert_eq!(
            (sent.delete_paths, sent.puts),
            (1, 0),
            "{name}: the second recheck deletes the tombstone only: {sent:?}"
        );
        let swept = stored_bytes(backend.objects().as_ref(), &pointer).await;
        assert!(
            swept
                .as_ref()
                .is_some_and(|b| b.windows(7).any(|w| w == b" swept ")),
            "{name}: {swept:?}"
        );

        let refused = worker.create_run(order(&run_id)).await;
        assert!(
            matches!(refused, Err(Error::Conflict { .. })),
            "{name}: {refused:?}"
        );
        held.release.send(()).unwrap();
        recheck.await.unwrap().unwrap();
        assert!(backend.objects().head(&pointer).await.is_err(), "{name}");
        let new = worker.create_run(order(&run_id)).await.unwrap();
        assert!(
            backend.objects().head(&pointer).await.is_ok(),
            "{name}: the new run's pointer stands"
        );
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let current = fresh
            .load_run(&run_id)
            .await
            .unwrap()
            .map(|r| r.incarnation);
        assert_eq!(current, Some(new.incarnation), "{name}");
    }
}

/// A recheck (`clear_remains`, then `forget_deleted`, as a retention
/// pass's runs them) reads the deleted run's pointer once: the read that
/// checks the incarnation is not the run's again finds it vacated by that
/// deletion and keeps its version, which the mark updates. If the id's
/// next run replaced the vacated pointer between the two, the mark's
/// update is refused, the pointer read again, and the new run's pointer
/// left alone.
#[tokio::test]
async fn a_recheck_reads_the_vacated_pointer_once_and_leaves_a_run_created_before_its_mark() {
    use memo_runtime::testing::CountingStore;

    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-29");
        let pointer = Path::from("runs/runs/order-29/run");
        let objects = backend.objects();
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();
        assert!(worker.delete_run(&run_id, old.incarnation).await.unwrap());

        let counting = Arc::new(CountingStore::new(backend.open()));
        let recheck = ObjectStoreRuntimeStore::new(counting.clone(), "runs");
        let late = recheck.clear_remains(&run_id, old.incarnation).await;
        assert!(!late.unwrap(), "{name}: nothing left to clear");
        (recheck.forget_deleted(&run_id, old.incarnation).await).unwrap();
        let c = counting.counts();
        // The pointer's one read, the mark's update, then the deletes.
        assert_eq!((c.gets, c.puts), (1, 1), "{name}: {c:?}");
        let left = stored_under(objects.as_ref(), "runs/runs/order-29").await;
        assert!(left.is_empty(), "{name}: {left:?}");

        // Deleted again; the id's next run comes between the read and the
        // mark.
        let second = worker.create_run(order(&run_id)).await.unwrap();
        worker.atomic_apply(&run_id, completed()).await.unwrap();
        assert!(
            worker
                .delete_run(&run_id, second.incarnation)
                .await
                .unwrap()
        );
        let late = recheck.clear_remains(&run_id, second.incarnation).await;
        assert!(!late.unwrap(), "{name}");
        let third = worker.create_run(order(&run_id)).await.unwrap();
        counting.reset();
        (recheck.forget_deleted(&run_id, second.incarnation).await).unwrap();
        let c = counting.counts();
        // The refused update, the read that finds the new run's pointer.
        assert_eq!((c.gets, c.puts), (1, 1), "{name}: {c:?}");
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let current = fresh.load_run(&run_id).await.unwrap();
        assert_eq!(
            current.map(|r| r.incarnation),
            Some(third.incarnation),
            "{name}"
        );
        assert!(
            !is_vacated_pointer(objects.as_ref(), pointer.as_ref()).await,
            "{name}"
        );
    }
}

/// Lost acknowledgements of the two updates of a deleted run's pointer.
/// The deletion's vacate lands and its answer is lost: the deletion fails,
/// and called again it finds the run gone and finishes (its id is used
/// again as a new run). The recheck's mark lands and its answer is lost:
/// it reads the pointer back, finds its own mark, and deletes the pointer
/// (another recheck's mark it would leave).
#[tokio::test]
async fn a_lost_answer_to_a_vacate_or_a_swept_mark_still_removes_the_pointer() {
    use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};

    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-27");
        let pointer = Path::from("runs/runs/order-27/run");
        let lossy = || {
            let faults = Arc::new(FaultInjectingStore::new(backend.open()));
            let at = pointer.clone();
            faults.inject(
                FaultRule::fail_after(RequestKind::Put)
                    .matching(move |path| *path == at)
                    .times(1),
            );
            faults
        };
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();

        let faults = lossy();
        let deleting = ObjectStoreRuntimeStore::new(faults.clone(), "runs");
        let first = deleting.delete_run(&run_id, old.incarnation).await;
        assert!(first.is_err(), "{name}: {first:?}");
        assert_eq!(faults.faults_injected(), 1, "{name}");
        assert!(
            !deleting.delete_run(&run_id, old.incarnation).await.unwrap(),
            "{name}: called again, the run is gone"
        );
        let objects = backend.objects();
        assert!(
            is_vacated_pointer(objects.as_ref(), pointer.as_ref()).await,
            "{name}"
        );

        let faults = lossy();
        let recheck = ObjectStoreRuntimeStore::new(faults.clone(), "runs");
        recheck
            .forget_deleted(&run_id, old.incarnation)
            .await
            .unwrap();
        assert_eq!(faults.faults_injected(), 1, "{name}");
        let left = stored_under(objects.as_ref(), "runs/runs/order-27").await;
        assert!(left.is_empty(), "{name}: {left:?}");
        let again = worker.create_run(order(&run_id)).await.unwrap();
        assert_ne!(again.incarnation, old.incarnation, "{name}");
    }
}

/// A deletion vacates the pointer by a conditional update of the version
/// its load of the run read, with no read of its own: one `GET` a deletion
/// (the load's). If the pointer changed since, still naming the run (a
/// restorer put it back, a new version of the same bytes), the update is
/// refused and the deletion reads the pointer again and vacates that.
#[tokio::test]
async fn a_deletion_updates_the_pointer_version_its_load_read_or_reads_it_again_if_it_changed() {
    use memo_runtime::testing::CountingStore;

    for backend in Backend::all() {
        let name = backend.name();
        let pointer = Path::from("runs/runs/order-28/run");
        let objects = backend.objects();

        // Unchanged since the load: its read is the deletion's only one.
        let run_id = run("order-28");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();
        let counting = Arc::new(CountingStore::new(backend.open()));
        let deleting = ObjectStoreRuntimeStore::new(counting.clone(), "runs");
        assert!(
            deleting.delete_run(&run_id, old.incarnation).await.unwrap(),
            "{name}"
        );
        let c = counting.counts();
        // The load: the pointer, then the run's terminal delta (a listing
        // of the deltas and a read); the update vacates what the first read.
        assert_eq!((c.gets, c.puts), (2, 1), "{name}: {c:?}");
        assert!(
            is_vacated_pointer(objects.as_ref(), pointer.as_ref()).await,
            "{name}"
        );
        worker
            .forget_deleted(&run_id, old.incarnation)
            .await
            .unwrap();

        // Put back (the same bytes, a new version) while the deletion is
        // held at its tombstone, after its load: read again, then vacated.
        let again = worker.create_run(order(&run_id)).await.unwrap();
        let done = worker.atomic_apply(&run_id, completed()).await.unwrap();
        assert_eq!(done.incarnation, again.incarnation, "{name}");
        let counting = Arc::new(CountingStore::new(backend.open()));
        let tombstones = Path::from("runs/tombstones");
        let (paused, held) = Pauses::new(counting.clone(), Held::Put, tombstones);
        let deleting = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
        let incarnation = again.incarnation;
        let deletion = tokio::spawn({
            let run_id = run_id.clone();
            async move { deleting.delete_run(&run_id, incarnation).await }
        });
        wait_reached(held.reached, "the deletion's tombstone").await;
        let bytes = stored_bytes(objects.as_ref(), &pointer).await.unwrap();
        objects.put(&pointer, bytes.into()).await.unwrap();
        counting.reset();
        held.release.send(()).unwrap();
        assert!(deletion.await.unwrap().unwrap(), "{name}");
        let c = counting.counts();
        // The refused update, the read of the new version, its update.
        assert_eq!((c.gets, c.puts), (1, 2), "{name}: {c:?}");
        assert!(
            is_vacated_pointer(objects.as_ref(), pointer.as_ref()).await,
            "{name}"
        );
        assert!(worker.load_run(&run_id).await.unwrap().is_none(), "{name}");
    }
}

/// On a store with no conditional update (`object_store`'s
/// `LocalFileSystem` given directly, where memo's `LocalFolder` has one) a
/// deletion deletes the pointer where it would vacate it, as before
/// vacated pointers, and reads the id again once its own incarnation
/// cannot be restored: a later run's pointer its stalled delete removed
/// stands again when the deletion returns.
#[tokio::test]
async fn on_a_store_with_no_conditional_update_a_stalled_deletion_restores_what_it_removed() {
    let folder = tempfile::tempdir().unwrap();
    let objects: Arc<dyn ObjectStore> = Arc::new(
        memo_runtime::object_store::local::LocalFileSystem::new_with_prefix(folder.path()).unwrap(),
    );
    let run_id = run("order-25");
    let worker = ObjectStoreRuntimeStore::new(Arc::clone(&objects), "runs");
    worker.create_run(order(&run_id)).await.unwrap();
    let old = worker.atomic_apply(&run_id, completed()).await.unwrap();

    let pointer = Path::from("runs/runs/order-25/run");
    let (paused, stale) = Pauses::new(Arc::clone(&objects), Held::Delete, pointer.clone());
    let sweeper_a = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
    let (run_a, old_a) = (run_id.clone(), old.incarnation);
    let deletion_a = tokio::spawn(async move { sweeper_a.delete_run(&run_a, old_a).await });
    wait_reached(stale.reached, "A's delete of the pointer").await;
    let sweeper_b = ObjectStoreRuntimeStore::new(Arc::clone(&objects), "runs");
    assert!(
        sweeper_b
            .delete_run(&run_id, old.incarnation)
            .await
            .unwrap()
    );
    let new = worker.create_run(order(&run_id)).await.unwrap();
    start_and_charge(&worker, &run_id).await;

    stale.release.send(()).unwrap();
    assert!(deletion_a.await.unwrap().unwrap());
    assert!(
        objects.head(&pointer).await.is_ok(),
        "the later run's pointer is left removed"
    );
    let fresh = ObjectStoreRuntimeStore::new(Arc::clone(&objects), "runs");
    let current = fresh
        .load_run(&run_id)
        .await
        .unwrap()
        .map(|r| r.incarnation);
    assert_eq!(current, Some(new.incarnation));
}

/// A stale deletion of an earlier run of the id removed the pointer of the
/// run created since, and has not looked again yet (it restores what it
/// removed only then): a redelivery's `create_run` in that window finds no
/// pointer but the run's record, answers with that run, restoring its
/// pointer, and never creates another incarnation. (A creator lists the
/// id's folder first: that it holds no pointer must not read as a new id.)
#[tokio::test]
async fn a_redelivery_that_finds_the_pointer_a_stale_deletion_removed_restores_the_run() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-17");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let created = worker.create_run(order(&run_id)).await.unwrap();
        start_and_charge(&worker, &run_id).await;

        // The stale deletion's unconditional delete of the pointer.
        let pointer = Path::from("runs/runs/order-17/run");
        backend.objects().delete(&pointer).await.unwrap();

        let redelivered = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let again = redelivered.create_run(order(&run_id)).await.unwrap();
        assert_eq!(
            (again.incarnation, again.status),
            (created.incarnation, RunStatus::Running),
            "{name}: the redelivery did not answer with the run"
        );
        assert!(
            backend.objects().head(&pointer).await.is_ok(),
            "{name}: the pointer was not restored"
        );
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert_eq!(
            fresh.load_receipts(&run_id, None).await.unwrap().len(),
            1,
            "{name}"
        );
        let finished = worker.atomic_apply(&run_id, completed()).await.unwrap();
        assert_eq!(finished.incarnation, created.incarnation, "{name}");
    }
}

/// A redelivery of a finished run that arrives while the run is being
/// deleted (after its record went, before its pointer is vacated) is
/// answered with the finished run, and the deletion still completes:
/// nothing the redelivery wrote brings the deleted run back.
#[tokio::test]
async fn a_redelivery_during_a_deletion_does_not_bring_the_run_back() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-8");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();

        let pointer = Path::from("runs/runs/order-8/run");
        let (paused, pause) = Pauses::new(backend.open(), Held::Vacate, pointer);
        let sweeper = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
        let (run_a, old_a) = (run_id.clone(), old.incarnation);
        let deletion = tokio::spawn(async move { sweeper.delete_run(&run_a, old_a).await });
        wait_reached(pause.reached, "pause").await;

        let redelivered = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let answer = redelivered.create_run(order(&run_id)).await.unwrap();
        assert_eq!(
            (answer.incarnation, answer.status),
            (old.incarnation, RunStatus::Completed),
            "{name}"
        );
        pause.release.send(()).unwrap();
        assert!(deletion.await.unwrap().unwrap(), "{name}");

        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert_eq!(
            fresh.load_run(&run_id).await.unwrap(),
            None,
            "{name}: the deleted run came back"
        );
        let objects = backend.objects();
        let leftovers = stored_under(objects.as_ref(), "runs/runs/order-8").await;
        let leftovers = but_deletion_remains(objects.as_ref(), leftovers).await;
        assert!(leftovers.is_empty(), "{name}: {leftovers:?}");
    }
}

/// Seed 2505 of the deployment world: a redelivery of a finished run reads
/// its pointer, then stalls before it lists the run's log; meanwhile the
/// run is deleted in full, so the listing finds nothing and the run looks
/// just created. The redelivery must not take it for an open run whose
/// record is missing and write that record back: a reader that finds the
/// pointer missing restores it from the record (here one staged while the
/// redelivery stalls taking its record back), the deleted run exists
/// again with no history, and its steps run again. The redelivery creates
/// a new run instead, and the deleted one stays gone.
#[tokio::test]
async fn a_redelivery_that_read_the_run_before_its_deletion_never_brings_it_back() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-9");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        start_and_charge(&worker, &run_id).await;
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();

        // The redelivery stalls at its first listing of the run's folder,
        // and would stall again at a delete of the run's record.
        let folder = Path::from(format!("runs/runs/order-9/{}", old.incarnation));
        let record = Path::from(format!("{folder}/run"));
        let (take_back, record_delete) = Pauses::new(backend.open(), Held::Delete, record);
        let (listing, log_listing) = Pauses::new(Arc::new(take_back), Held::List, folder.clone());
        let redelivery = ObjectStoreRuntimeStore::new(Arc::new(listing), "runs");
        let again = order(&run_id);
        let answer = tokio::spawn(async move { redelivery.create_run(again).await });
        wait_reached(log_listing.reached, "log listing").await;

        let sweeper = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert!(
            sweeper.delete_run(&run_id, old.incarnation).await.unwrap(),
            "{name}"
        );
        log_listing.release.send(()).unwrap();

        // A record written back (and being taken back) is found by a
        // reader, which restores the pointer from it.
        if record_delete.reached.await.is_ok() {
            let reader = ObjectStoreRuntimeStore::new(backend.open(), "runs");
            let _ = reader.load_run(&run_id).await;
            record_delete.release.send(()).unwrap();
        }
        let answer = answer.await.unwrap().unwrap();
        assert_ne!(
            answer.incarnation, old.incarnation,
            "{name}: the deleted run came back, as created"
        );

        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let seen = fresh.load_run(&run_id).await.unwrap();
        assert_eq!(
            seen.map(|r| (r.incarnation, r.status)),
            Some((answer.incarnation, RunStatus::Pending)),
            "{name}"
        );
        let leftovers: Vec<_> = backend
            .objects()
            .list(Some(&folder))
            .try_collect()
            .await
            .unwrap();
        assert!(leftovers.is_empty(), "{name}: {leftovers:?}");
    }
}

type Checkout = futures::future::BoxFuture<'static, Result<u32, Error>>;

/// One step whose body counts its starts.
fn counted_checkout(
    bodies: Arc<AtomicU64>,
) -> Workflow<impl Fn(Context, u32) -> Checkout + Send + Sync + 'static> {
    Workflow::new("checkout", move |ctx: Context, order: u32| {
        let bodies = bodies.clone();
        Box::pin(async move {
            ctx.step("charge", |_memo| {
                let bodies = bodies.clone();
                async move {
                    bodies.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, Error>(order)
                }
            })
            .await
        }) as Checkout
    })
}

fn runtime(memo: Arc<dyn ObjectStore>, store: Arc<ObjectStoreRuntimeStore>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(memo, "memo"))
        .runtime_store(store)
        .build()
        .unwrap()
}

/// Seeds 1390, 1640 and 3222 of the deployment world: worker A reads a
/// new run and stalls before its attempt starts (here at the due-run entry
/// it writes first). Meanwhile worker B runs the run to its end, a sweep
/// deletes it, and the queue redelivers the id, which creates a new run;
/// a second delivery of the id to A's process reads that new run into A's
/// store cache. A's start then goes on. A start names an attempt number,
/// not an incarnation, so it lands on the new run (whose first attempt is
/// the one A asks for): A must not run the old run's step under the new
/// run's lease (with the old run's memos, whose entries a sweep may have
/// deleted, so its side effects run again), and the new run's own attempt
/// must start at once and finish it.
#[tokio::test]
async fn an_attempt_that_read_a_deleted_run_never_starts_on_the_run_created_after_it() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-10");
        let bodies = Arc::new(AtomicU64::new(0));
        let checkout = Arc::new(counted_checkout(bodies.clone()));

        // A's first write of an attempt is its due-run entry: held.
        let (paused, due_put) = Pauses::new(backend.open(), Held::Put, Path::from("memo/due"));
        let store_a = Arc::new(ObjectStoreRuntimeStore::new(backend.open(), "runs"));
        let a = runtime(Arc::new(paused), store_a.clone());
        let attempt_a = tokio::spawn({
            let (run_id, checkout) = (run_id.clone(), checkout.clone());
            async move { a.run(&run_id, &7, &*checkout).await }
        });
        wait_reached(due_put.reached, "due put").await;
        let old = store_a.load_run(&run_id).await.unwrap().unwrap();

        // B runs it to its end; a sweep deletes it; a redelivery creates it
        // again; A's process reads the new run.
        let store_b = Arc::new(ObjectStoreRuntimeStore::new(backend.open(), "runs"));
        let b = runtime(backend.open(), store_b.clone());
        assert_eq!(b.run(&run_id, &7, &*checkout).await.unwrap(), 7, "{name}");
        assert_eq!(bodies.load(Ordering::SeqCst), 1, "{name}");
        let sweeper = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert!(
            sweeper.delete_run(&run_id, old.incarnation).await.unwrap(),
            "{name}"
        );
        let redelivery = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let mut again = order(&run_id);
        again.workflow = "checkout".into();
        again.input = Bytes::from(rmp_serde::to_vec_named(&7u32).unwrap());
        let new = redelivery.create_run(again).await.unwrap();
        assert_ne!(new.incarnation, old.incarnation, "{name}");
        let seen = store_a.load_run(&run_id).await.unwrap().unwrap();
        assert_eq!(seen.incarnation, new.incarnation, "{name}");

        // A's attempt goes on: it runs nothing.
        due_put.release.send(()).unwrap();
        let answered = attempt_a.await.unwrap();
        assert!(
            matches!(answered, Err(Error::Conflict { .. })),
            "{name}: {answered:?}"
        );
        assert_eq!(
            bodies.load(Ordering::SeqCst),
            1,
            "{name}: the deleted run's step ran again, under the new run's lease"
        );

        // The new run's own attempt starts at once and finishes it.
        let c = runtime(
            backend.open(),
            Arc::new(ObjectStoreRuntimeStore::new(backend.open(), "runs")),
        );
        assert_eq!(c.run(&run_id, &7, &*checkout).await.unwrap(), 7, "{name}");
        assert_eq!(bodies.load(Ordering::SeqCst), 2, "{name}");
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let done = fresh.load_run(&run_id).await.unwrap().unwrap();
        assert_eq!(
            (done.incarnation, done.status),
            (new.incarnation, RunStatus::Completed),
            "{name}"
        );
    }
}

/// A memoized side effect: counts its runs, returns its run's number.
#[memoized(skip(runs))]
async fn reserve_seat(memo: &Memo, runs: &AtomicU64, order: u32) -> Result<u64, Error> {
    let _ = order;
    Ok(runs.fetch_add(1, Ordering::SeqCst) + 1)
}

/// One step that reserves a seat and records what the reservation returned.
fn reservation(
    runs: Arc<AtomicU64>,
    seen: Arc<std::sync::Mutex<Vec<u64>>>,
) -> Workflow<impl Fn(Context, u32) -> Checkout + Send + Sync + 'static> {
    Workflow::new("reservation", move |ctx: Context, order: u32| {
        let (runs, seen) = (runs.clone(), seen.clone());
        Box::pin(async move {
            ctx.step("reserve", |memo| {
                let (runs, seen) = (runs.clone(), seen.clone());
                async move {
                    let seat = reserve_seat(&memo, &runs, order).await?;
                    seen.lock().unwrap().push(seat);
                    Ok::<_, Error>(seat as u32)
                }
            })
            .await
        }) as Checkout
    })
}

/// Seed 2281 of the deployment world: attempt A runs a memoized side
/// effect and stalls before its value commits; its lease expires, attempt
/// B takes the run over, runs the effect, commits its value and ends the
/// run; a sweep deletes the run and its memo entries. A's commit then
/// lands on the key the sweep freed. A must not return its value: B's
/// callers saw B's, and every caller of a key sees one value.
#[tokio::test]
async fn a_memoized_value_committed_after_its_run_was_taken_over_and_swept_is_never_returned() {
    const LEASE: std::time::Duration = std::time::Duration::from_secs(30);
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-11");
        let clock = Arc::new(ManualClock::new(1_000_000));
        let (runs, seen) = (Arc::new(AtomicU64::new(0)), Arc::default());
        let workflow = Arc::new(reservation(runs.clone(), Arc::clone(&seen)));
        let process = |memo: Arc<dyn ObjectStore>, worker: &str| {
            process_builder(memo, backend.open(), &clock, worker, LEASE)
                .build()
                .unwrap()
        };

        // A's first memo entry write, its reservation's commit, is held.
        let (paused, commit) = Pauses::new(backend.open(), Held::Put, Path::from("memo/memos"));
        let a = process(Arc::new(paused), "worker-a");
        let attempt_a = tokio::spawn({
            let (run_id, workflow) = (run_id.clone(), workflow.clone());
            async move { a.run(&run_id, &7, &*workflow).await }
        });
        wait_reached(commit.reached, "commit").await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{name}");

        // A's lease expires; B takes the run over and ends it; a sweep
        // deletes it, memo entries and all.
        clock.advance_ms(LEASE.as_millis() as u64 + 1_000);
        let b = process(backend.open(), "worker-b");
        assert_eq!(b.run(&run_id, &7, &*workflow).await.unwrap(), 2, "{name}");
        assert!(
            b.retention_sweeper().delete_run(&run_id).await.unwrap(),
            "{name}"
        );

        // A's commit lands on the freed key.
        commit.release.send(()).unwrap();
        assert!(attempt_a.await.unwrap().is_err(), "{name}");
        assert_eq!(
            *seen.lock().unwrap(),
            vec![2],
            "{name}: a caller of the key saw another value than B's"
        );
    }
}

/// A basket's items. Equal baskets may be written in two map orders (a
/// `HashMap` writes its own): two encodings of one input.
type Items = std::collections::BTreeMap<String, u32>;

fn items() -> Items {
    Items::from([("apples".into(), 2), ("pears".into(), 3)])
}

/// [`items`] written pears first.
fn pears_first(run_id: &RunId) -> NewRun {
    struct PearsFirst;
    impl serde::Serialize for PearsFirst {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_map([("pears", 3u32), ("apples", 2)])
        }
    }
    NewRun {
        run_id: run_id.clone(),
        workflow: "basket".into(),
        input: Bytes::from(rmp_serde::to_vec_named(&PearsFirst).unwrap()),
        created_at_ms: 1,
        workflow_version: None,
    }
}

/// One step that counts a basket's items.
fn basket() -> Workflow<impl Fn(Context, Items) -> Checkout + Send + Sync + 'static> {
    Workflow::new("basket", |ctx: Context, items: Items| {
        Box::pin(async move {
            let count = items.values().sum::<u32>();
            ctx.step("count", move |_memo| async move { Ok::<_, Error>(count) })
                .await
        }) as Checkout
    })
}

/// A runtime store that holds the first `create_run` it refuses, before
/// answering, until the test lets it go.
struct HoldsARefusal {
    inner: Arc<dyn RuntimeStore>,
    held: std::sync::Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
}

impl std::fmt::Debug for HoldsARefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HoldsARefusal")
    }
}

#[async_trait::async_trait]
impl RuntimeStore for HoldsARefusal {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord, Error> {
        let answer = self.inner.create_run(run).await;
        let held = matches!(answer, Err(Error::Conflict { .. }))
            .then(|| self.held.lock().unwrap().take())
            .flatten();
        if let Some((reached, release)) = held {
            let _ = reached.send(());
            let _ = release.await;
        }
        answer
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>, Error> {
        self.inner.load_run(run_id).await
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord, Error> {
        self.inner.atomic_apply(run_id, commit).await
    }

    async fn load_receipts(
        &self,
        run_id: &RunId,
        after: Option<u64>,
    ) -> Result<Vec<StepReceipt>, Error> {
        self.inner.load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>, Error> {
        self.inner.load_snapshot(run_id).await
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord, Error> {
        self.inner.append_input(run_id, input).await
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>, Error> {
        self.inner.load_inputs(run_id).await
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>, Error> {
        self.inner.list_runs(status).await
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool, Error> {
        self.inner.delete_run(run_id, incarnation).await
    }
}

/// Seed 4483 of the deployment world: a redelivery of a finished run's
/// input, written in another map order, is refused by the store (which
/// compares bytes); before the runtime reads the run to compare the inputs
/// as content keys, a sweep deletes it. The id is free then: the
/// redelivery must run, not fail with "the run exists with a different
/// workflow or input" while no run exists.
#[tokio::test]
async fn a_redelivery_whose_run_is_deleted_after_the_store_refused_its_bytes_runs() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("basket-1");
        let workflow = basket();
        let store = Arc::new(ObjectStoreRuntimeStore::new(backend.open(), "runs"));
        let old = store.create_run(pears_first(&run_id)).await.unwrap();
        let first = runtime(backend.open(), store);
        assert_eq!(first.run(&run_id, &items(), &workflow).await.unwrap(), 5);

        // The redelivery (apples first) is refused by the store, and held.
        let (reached, release) = (oneshot::channel(), oneshot::channel());
        let held = HoldsARefusal {
            inner: Arc::new(ObjectStoreRuntimeStore::new(backend.open(), "runs")),
            held: std::sync::Mutex::new(Some((reached.0, release.1))),
        };
        let redelivery = Runtime::builder()
            .memo_store(MemoStore::new(backend.open(), "memo"))
            .runtime_store(Arc::new(held))
            .build()
            .unwrap();
        let answer = tokio::spawn({
            let run_id = run_id.clone();
            async move { redelivery.run(&run_id, &items(), &basket()).await }
        });
        reached.1.await.unwrap();

        // A sweep deletes the finished run; then the runtime reads it.
        let sweeper = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert!(
            sweeper.delete_run(&run_id, old.incarnation).await.unwrap(),
            "{name}"
        );
        release.0.send(()).unwrap();
        let answer = answer.await.unwrap();
        assert_eq!(answer.ok(), Some(5), "{name}: an equal input was refused");
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let now = fresh.load_run(&run_id).await.unwrap().unwrap();
        assert_ne!(now.incarnation, old.incarnation, "{name}");
        assert_eq!(now.status, RunStatus::Completed, "{name}");
    }
}

/// A store whose pointer of `run_id` vanishes as soon as it is created,
/// as if a stale deletion of an earlier run removed it at once: its
/// creator finds the pointer gone once its record stands, and gives the
/// incarnation up.
struct VanishingPointer {
    inner: Arc<dyn ObjectStore>,
    pointer: Path,
}

impl std::fmt::Debug for VanishingPointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VanishingPointer({})", self.pointer)
    }
}

impl std::fmt::Display for VanishingPointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

#[async_trait::async_trait]
impl ObjectStore for VanishingPointer {
    async fn put_opts(
        &self,
        location: &Path,
        payload: memo_runtime::object_store::PutPayload,
        opts: memo_runtime::object_store::PutOptions,
    ) -> memo_runtime::object_store::Result<memo_runtime::object_store::PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await?;
        if *location == self.pointer {
            memo_runtime::object_store::ObjectStoreExt::delete(&*self.inner, location).await?;
        }
        Ok(put)
    }

    memo_runtime::testing::forward_object_store!(self.inner => put_multipart_opts, get_opts,
        get_ranges, delete_stream, list, list_with_offset, list_with_delimiter, copy_opts,
        rename_opts);
}

/// A creator finds its pointer gone once its record stands (a stale
/// deletion of an earlier run removed it) and gives its incarnation up;
/// before its take-back of the record lands, a reader finds the pointer
/// missing and restores it from that record. The given-up incarnation must
/// not be current afterwards: in a deployment it may have been run and
/// deleted while its creator stalled (seeds 3311 and 1215), and then it
/// would come back, corrupt or empty, and run again.
#[tokio::test]
async fn an_incarnation_its_creator_gave_up_is_never_current_again() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-11");
        let pointer = Path::from("runs/runs/order-11/run");
        let vanishing = VanishingPointer {
            inner: backend.open(),
            pointer: pointer.clone(),
        };
        // The creator's first delete under the run's folder is the
        // take-back of its record.
        let (held, take_back) = Pauses::new(
            Arc::new(vanishing),
            Held::Delete,
            Path::from("runs/runs/order-11"),
        );
        let creator = ObjectStoreRuntimeStore::new(Arc::new(held), "runs");
        let new_run = order(&run_id);
        let answer = tokio::spawn(async move { creator.create_run(new_run).await });
        wait_reached(take_back.reached, "take back").await;

        let reader = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let given_up = reader
            .load_run(&run_id)
            .await
            .unwrap()
            .expect("the reader restores the pointer from the standing record")
            .incarnation;
        take_back.release.send(()).unwrap();

        // The creator's next pointer vanishes too (a store that removes
        // every new pointer); whatever it answers, the given-up
        // incarnation is not the run.
        let answer = answer.await.unwrap();
        if let Ok(created) = &answer {
            assert_ne!(
                created.incarnation, given_up,
                "{name}: the creator answered with the incarnation it gave up"
            );
        }
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let seen = fresh.load_run(&run_id).await.unwrap();
        assert!(
            seen.as_ref().is_none_or(|r| r.incarnation != given_up),
            "{name}: the given-up incarnation is current again: {seen:?}"
        );
    }
}

/// Seed 2117 of session 27's survey of the deployment world: a redelivery
/// folded the run while it was open, stalled past the run's end and its
/// retention, found the run's record missing (a sweep's deletion had just
/// removed it) and the pointer still naming the run (read before the
/// deletion removed it), wrote the record back after the deletion ended,
/// and its process died before its check after the write could take the
/// record back. Every reader then found the pointer missing and an
/// incarnation record beside it, restored the pointer, and read the deleted
/// run as just created, with no history: a recovery ran its steps again.
/// The record written back is staged here as the put the dead writer made.
/// The deletion's tombstone keeps it from being restored: readers take it
/// back, the id's next delivery creates a new run, and the recheck of the
/// swept run removes the tombstone.
#[tokio::test]
async fn a_record_written_back_after_its_run_was_swept_never_brings_the_run_back() {
    use memo_runtime::object_store::{ObjectStoreExt, PutMode};
    const LEASE: std::time::Duration = std::time::Duration::from_secs(30);
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-21");
        let clock = Arc::new(ManualClock::new(1_000_000));
        let bodies = Arc::new(AtomicU64::new(0));
        let checkout = counted_checkout(bodies.clone());
        let process = |worker: &str| {
            process_builder(backend.open(), backend.open(), &clock, worker, LEASE)
                .build()
                .unwrap()
        };
        let a = process("worker-a");
        assert_eq!(a.run(&run_id, &7, &checkout).await.unwrap(), 7, "{name}");
        let swept = a.status(&run_id).await.unwrap().unwrap().incarnation;
        let record = Path::from(format!("runs/runs/order-21/{swept}/run"));
        let bytes = backend
            .objects()
            .get(&record)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        clock.advance_ms(1);
        let sweeper = a
            .retention_sweeper_builder()
            .retention(std::time::Duration::ZERO)
            .build();
        assert_eq!(sweeper.sweep_now().await.unwrap().runs_cleared, 1, "{name}");

        // The dead writer's record lands.
        backend
            .objects()
            .put_opts(&record, bytes.into(), PutMode::Create.into())
            .await
            .unwrap();

        // Another process reads no run, and takes the record back.
        let b = process("worker-b");
        assert_eq!(
            b.status(&run_id)
                .await
                .unwrap()
                .map(|r| (r.incarnation, r.status)),
            None,
            "{name}: the swept run is back"
        );
        let objects = backend.objects();
        let runs = stored_under(objects.as_ref(), "runs/runs").await;
        let runs = but_deletion_remains(objects.as_ref(), runs).await;
        assert!(runs.is_empty(), "{name}: {runs:?}");

        // The id's next delivery is a new run.
        assert_eq!(b.run(&run_id, &8, &checkout).await.unwrap(), 8, "{name}");
        let now = b.status(&run_id).await.unwrap().unwrap();
        assert_ne!(now.incarnation, swept, "{name}");
        assert_eq!(bodies.load(Ordering::SeqCst), 2, "{name}");

        // The recheck of the swept run removes its tombstone; the new run
        // is retained (a day).
        let tombstone = Path::from(format!("runs/tombstones/order-21.{swept}"));
        assert!(backend.objects().head(&tombstone).await.is_ok(), "{name}");
        clock.advance_ms(memo_runtime::retention::DEFAULT_RECHECK_AFTER.as_millis() as u64);
        let report = b
            .retention_sweeper_builder()
            .retention(std::time::Duration::from_secs(24 * 3600))
            .build()
            .sweep_now()
            .await
            .unwrap();
        assert_eq!(
            (report.rechecks_due, report.recheck_failures),
            (1, 0),
            "{name}"
        );
        let tombstones: Vec<_> = backend
            .objects()
            .list(Some(&Path::from("runs/tombstones")))
            .try_collect()
            .await
            .unwrap();
        assert!(tombstones.is_empty(), "{name}: {tombstones:?}");
        // The swept run's vacated pointer was replaced by the new run's,
        // which the recheck leaves alone.
        let current = b.status(&run_id).await.unwrap().map(|r| r.incarnation);
        assert_eq!(current, Some(now.incarnation), "{name}");
    }
}
