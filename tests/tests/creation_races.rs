//! A creation of a run id racing a stale deletion of the id's earlier run
//! (issue 20; seed 1778 of session 24's survey). A creator writes its new
//! run's pointer and then its record; a stale delete of the pointer lands
//! in between (object stores delete unconditionally: a sweeper's deletion
//! in a release before vacated pointers, a recheck's delete of a swept
//! pointer now), so the creator finds no pointer once its record
//! stands. A reader that looks meanwhile restores the pointer from the
//! record and may act on the run; the creator must then not remove what
//! that reader acted on. Each interleaving is staged deterministically:
//! a process's store pauses at a chosen request until the test lets it go.

use std::sync::{Arc, Mutex};

use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{
    self, ObjectStore, ObjectStoreExt, PutOptions, PutPayload, PutResult,
};
use memo_runtime::runtime_store::{
    Commit, NewInput, NewRun, ObjectStoreRuntimeStore, RunRecord, RunStatus, RuntimeStore,
    StatusChange,
};
use memo_runtime::testing::{CountingStore, FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::{Bytes, Error, Incarnation, RunId};
use memo_tests::fixtures::{Backend, but_deletion_remains, run, stored_under};
use memo_tests::pause::{Held, Pauses, wait_reached};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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

fn paid() -> NewInput {
    NewInput {
        input_id: "payment-1".into(),
        name: "paid".into(),
        payload: Bytes::from_static(b"42"),
        accepted_at_ms: 3,
    }
}

/// A store that, once the first put of `path` that succeeds is done, tells
/// the test and waits for it before answering: the creator stalls between
/// its pointer and its record.
struct AfterPut {
    inner: Arc<dyn ObjectStore>,
    path: Path,
    gate: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
}

impl AfterPut {
    /// The store, a receiver that fires once the put is done, and a sender
    /// that lets its answer through.
    fn new(
        inner: Arc<dyn ObjectStore>,
        path: Path,
    ) -> (AfterPut, oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (done, done_rx) = oneshot::channel();
        let (go, go_rx) = oneshot::channel();
        let gate = Mutex::new(Some((done, go_rx)));
        (AfterPut { inner, path, gate }, done_rx, go)
    }
}

/// `Debug` and `Display` for a test store, as its type and the path it
/// acts on: `Name(path)`.
macro_rules! shown_by_path {
    ($store:ident, $path:ident) => {
        impl std::fmt::Debug for $store {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($store), "({})"), self.$path)
            }
        }

        impl std::fmt::Display for $store {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self, f)
            }
        }
    };
}

shown_by_path!(AfterPut, path);

#[async_trait::async_trait]
impl ObjectStore for AfterPut {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await;
        let gate = (*location == self.path && put.is_ok())
            .then(|| self.gate.lock().unwrap().take())
            .flatten();
        if let Some((done, go)) = gate {
            let _ = done.send(());
            let _ = go.await;
        }
        put
    }

    memo_runtime::testing::forward_object_store!(self.inner => put_multipart_opts, get_opts,
        get_ranges, delete_stream, list, list_with_offset, list_with_delimiter, copy_opts,
        rename_opts);
}

/// What [`a_creation_racing_a_stale_deletion`] staged.
struct Staged {
    /// The creator's `create_run`.
    answer: JoinHandle<Result<RunRecord, Error>>,
    /// The run the sweepers deleted.
    old: Incarnation,
}

/// Seed 1778's interleaving up to the creator's record, staged with an
/// unconditional delete of a run pointer (a release before vacated
/// pointers deleted the pointer in every deletion; seed 1778's was a
/// second sweeper's, stalled): a sweeper deletes the expired run, vacating
/// its pointer; a redelivery (the creator, whose store is `creators`
/// around the backend) writes the new run's pointer over the vacated one
/// and stalls before its record; the older release's stale delete then
/// removes the new pointer, and the creator goes on: it writes its record
/// and finds no pointer. (A retention pass's recheck, the one delete of a
/// pointer this release makes, staged this until session 51; a creator
/// no longer writes over the pointer a recheck is about to delete:
/// `sweeper::a_creation_never_takes_a_pointer_a_recheck_is_about_to_delete`.)
async fn a_creation_racing_a_stale_deletion(
    backend: &Backend,
    run_id: &RunId,
    creators: impl FnOnce(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore>,
) -> Staged {
    let pointer = Path::from(format!("runs/runs/{run_id}/run"));
    let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
    worker.create_run(order(run_id)).await.unwrap();
    let old = worker.atomic_apply(run_id, completed()).await.unwrap();
    assert!(worker.delete_run(run_id, old.incarnation).await.unwrap());

    let (after_pointer, pointer_written, go) = AfterPut::new(backend.open(), pointer.clone());
    let creator = ObjectStoreRuntimeStore::new(creators(Arc::new(after_pointer)), "runs");
    let new_run = order(run_id);
    let answer = tokio::spawn(async move { creator.create_run(new_run).await });
    pointer_written.await.unwrap();
    backend.objects().delete(&pointer).await.unwrap();
    go.send(()).unwrap();
    Staged {
        answer,
        old: old.incarnation,
    }
}

/// After the creator answered: the run `signalled` (the incarnation a
/// signal went into) must stand, the creator must have answered with it,
/// a fresh instance must read it with the signal, and once it ends and is
/// deleted nothing of the id may be left in the store.
async fn the_signalled_run_stands(
    backend: &Backend,
    run_id: &RunId,
    signalled: Incarnation,
    answered: Result<RunRecord, Error>,
) {
    let name = backend.name();
    assert_eq!(
        answered.unwrap().incarnation,
        signalled,
        "{name}: the creator answered with another run than the one signalled"
    );
    let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
    let seen = fresh.load_run(run_id).await.unwrap();
    assert_eq!(
        seen.map(|r| r.incarnation),
        Some(signalled),
        "{name}: the run the signal went into is gone"
    );
    let inputs = fresh.load_inputs(run_id).await.unwrap();
    assert_eq!(
        inputs.iter().map(|i| &i.input_id[..]).collect::<Vec<_>>(),
        ["payment-1"],
        "{name}: the acknowledged signal was lost"
    );

    // The run ends and is deleted: nothing of the id is left.
    fresh.atomic_apply(run_id, completed()).await.unwrap();
    assert!(fresh.delete_run(run_id, signalled).await.unwrap(), "{name}");
    let objects = backend.objects();
    let left = stored_under(objects.as_ref(), &format!("runs/runs/{run_id}")).await;
    let left = but_deletion_remains(objects.as_ref(), left).await;
    assert!(
        left.is_empty(),
        "{name}: left with nothing naming it: {left:?}"
    );
}

/// Seed 1778: the creator, having found no pointer after its record,
/// stalls at its take-back (its first delete under the run's folder, of
/// its record). A signal to the run (another process) finds the record,
/// restores the pointer and is accepted into the new run. Then the
/// creator goes on.
///
/// The signal was acknowledged, so the run it went into must stand
/// ([`the_signalled_run_stands`]). Before the fix the creator's take-back
/// removed the restored pointer too and created a third run: the signal
/// was lost and its log entry left with nothing naming it.
#[tokio::test]
async fn a_creator_whose_pointer_a_stale_deletion_removed_keeps_the_run_a_signal_restored() {
    for backend in Backend::all() {
        let run_id = run("order-17");
        let folder = Path::from("runs/runs/order-17");
        let mut take_back = None;
        let staged = a_creation_racing_a_stale_deletion(&backend, &run_id, |store| {
            let (held, pause) = Pauses::new(store, Held::Delete, folder);
            take_back = Some(pause);
            Arc::new(held)
        })
        .await;
        let take_back = take_back.unwrap();
        wait_reached(take_back.reached, "take back").await;

        let signaller = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        signaller.append_input(&run_id, paid()).await.unwrap();
        let signalled = signaller.load_run(&run_id).await.unwrap().unwrap();
        assert_ne!(signalled.incarnation, staged.old, "{}", backend.name());
        take_back.release.send(()).unwrap();

        let answered = staged.answer.await.unwrap();
        the_signalled_run_stands(&backend, &run_id, signalled.incarnation, answered).await;
    }
}

/// The same race, with the signal a little later: a reader restores the
/// pointer before the creator's take-back reads it, so the creator finds
/// its incarnation restored and, as nothing is written to it yet, goes on
/// to vacate the pointer; the signal is accepted just before that update
/// (its check of the pointer passes). The creator must see the signal's
/// entry after its update and put the run back.
#[tokio::test]
async fn a_signal_accepted_just_before_the_creators_pointer_delete_keeps_the_run() {
    for backend in Backend::all() {
        let run_id = run("order-18");
        let folder = Path::from("runs/runs/order-18");
        let pointer = Path::from("runs/runs/order-18/run");
        let mut pauses = None;
        let staged = a_creation_racing_a_stale_deletion(&backend, &run_id, |store| {
            let (at_pointer, pointer_delete) = Pauses::new(store, Held::Vacate, pointer);
            let (held, take_back) = Pauses::new(Arc::new(at_pointer), Held::Delete, folder);
            pauses = Some((take_back, pointer_delete));
            Arc::new(held)
        })
        .await;
        let (take_back, pointer_delete) = pauses.unwrap();
        wait_reached(take_back.reached, "take back").await;

        // A reader restores the pointer from the record.
        let reader = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let restored = reader.load_run(&run_id).await.unwrap().unwrap();
        assert_ne!(restored.incarnation, staged.old, "{}", backend.name());
        take_back.release.send(()).unwrap();

        // The creator found it restored and nothing written: it is about
        // to vacate the pointer when the signal is accepted.
        wait_reached(pointer_delete.reached, "pointer's vacate").await;
        let signaller = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        signaller.append_input(&run_id, paid()).await.unwrap();
        pointer_delete.release.send(()).unwrap();

        let answered = staged.answer.await.unwrap();
        the_signalled_run_stands(&backend, &run_id, restored.incarnation, answered).await;
    }
}

/// Seed 970 of session 25 (case of seeds 3311 and 1215, with a fault): a
/// creator writes its pointer and stalls before its record; another
/// process answers a redelivery with the run (writing its record), runs it
/// to its end, and deletes it. The creator then writes the record (the
/// deleted run's, again), finds no pointer and gives the run up; a reader
/// restores the pointer from that record before the take-back, and the
/// take-back's delete of the record is applied but reported failed. The
/// give-up must still finish: the deleted run is never current again, and
/// the id can be used for a new run with another input. Before the fix the
/// creator stopped at the failure, and the restored pointer stayed: the
/// deleted run came back, and every delivery of the id's new input was
/// refused as a different run, for ever.
#[tokio::test]
async fn a_give_up_whose_delete_fails_once_still_removes_the_run_it_gave_up() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-19");
        let folder = Path::from("runs/runs/order-19");
        let pointer = Path::from("runs/runs/order-19/run");

        // The creator's first delete under the run's folder other than the
        // pointer (the take-back of its record) is applied, then reported
        // failed; before it, the creator is held there.
        let (after_pointer, pointer_written, go) = AfterPut::new(backend.open(), pointer.clone());
        let faults = FaultInjectingStore::new(Arc::new(after_pointer));
        faults.inject(
            FaultRule::fail_after(RequestKind::Delete)
                .matching({
                    let (folder, pointer) = (folder.clone(), pointer.clone());
                    move |path| path.prefix_matches(&folder) && *path != pointer
                })
                .times(1),
        );
        let (held, take_back) = Pauses::new(Arc::new(faults), Held::Delete, folder.clone());
        let creator = ObjectStoreRuntimeStore::new(Arc::new(held), "runs");
        let answer = tokio::spawn({
            let new_run = order(&run_id);
            async move { creator.create_run(new_run).await }
        });
        pointer_written.await.unwrap();

        // Another process answers a redelivery with the run, runs it to its
        // end and deletes it.
        let other = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let deleted = other.create_run(order(&run_id)).await.unwrap().incarnation;
        other.atomic_apply(&run_id, completed()).await.unwrap();
        assert!(other.delete_run(&run_id, deleted).await.unwrap(), "{name}");

        // The creator writes the record and gives the run up; a reader
        // reads the id before the take-back. Before session 27 it restored
        // the pointer from the record, and the give-up had to remove the
        // deleted run again; the deletion's tombstone now keeps the reader
        // from restoring it (it takes the record back itself), and the
        // give-up still meets its failed delete.
        go.send(()).unwrap();
        wait_reached(take_back.reached, "take back").await;
        let reader = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let restored = reader
            .load_run(&run_id)
            .await
            .unwrap()
            .map(|r| r.incarnation);
        assert_eq!(restored, None, "{name}: the deleted run is restored");
        take_back.release.send(()).unwrap();
        let answered = answer.await.unwrap();
        if let Ok(created) = &answered {
            assert_ne!(created.incarnation, deleted, "{name}");
        }

        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let seen = fresh.load_run(&run_id).await.unwrap();
        assert!(
            seen.as_ref().is_none_or(|r| r.incarnation != deleted),
            "{name}: the deleted run is current again (the creator answered {answered:?})"
        );
        if let Some(seen) = seen {
            fresh.atomic_apply(&run_id, completed()).await.unwrap();
            fresh.delete_run(&run_id, seen.incarnation).await.unwrap();
        }
        let mut reused = order(&run_id);
        reused.input = Bytes::from_static(b"another order");
        fresh.create_run(reused).await.unwrap();
    }
}

/// The runs a listing by status finds `Pending`.
async fn pending(store: &ObjectStoreRuntimeStore) -> Vec<RunId> {
    store
        .list_run_ids_page(RunStatus::Pending, None, 10)
        .await
        .unwrap()
        .ids
}

/// Seed 4609 of session 30's deployment survey: a creator wrote its run's
/// `Pending` hint, a tidying listing deleted it (no pointer yet), the
/// creator wrote the pointer and died before its check that puts the hint
/// back. Only a creation of the same run (the same input) ran that check;
/// every later caller brought another input (the id reused), was refused,
/// and no listing by status, so no `recover`, ever found the run. A
/// refused creation puts the hint of a run not started back too.
#[tokio::test]
async fn a_creation_refused_for_another_input_puts_back_the_pending_hint_of_a_run_not_started() {
    let objects: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let creator = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    let run_id = run("order-4609");
    let created = creator.create_run(order(&run_id)).await.unwrap();
    assert_eq!(pending(&creator).await, vec![run_id.clone()]);
    let hint = Path::from(format!(
        "runs/runs-by-status/Pending/{run_id}.{}",
        created.incarnation
    ));
    objects.delete(&hint).await.unwrap();
    let other = ObjectStoreRuntimeStore::new(objects.clone(), "runs");
    assert!(pending(&other).await.is_empty());

    let mut another = order(&run_id);
    another.input = Bytes::from_static(b"another order");
    let refused = other.create_run(another).await;
    assert!(
        matches!(refused, Err(Error::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(pending(&other).await, vec![run_id]);
}

/// A creation of `run_id` over `objects` (`wrap`ped: a process's own
/// store), stopped at its `Pending` hint once its listing found the id
/// new: its answer, and the sender that lets it go on.
async fn creation_stopped_at_its_hint(
    objects: Arc<dyn ObjectStore>,
    wrap: impl FnOnce(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore>,
    run_id: &RunId,
) -> (JoinHandle<Result<RunRecord, Error>>, oneshot::Sender<()>) {
    let (paused, pause) = Pauses::new(objects, Held::Put, Path::from("runs/runs-by-status"));
    let creator = ObjectStoreRuntimeStore::new(wrap(Arc::new(paused)), "runs");
    let answer = tokio::spawn({
        let run_id = run_id.clone();
        async move { creator.create_run(order(&run_id)).await }
    });
    wait_reached(pause.reached, "the creator's Pending hint").await;
    (answer, pause.release)
}

/// A store whose first conditional create of `pointer` that finds it
/// taken deletes it from `shared` before answering: a stale deletion's
/// unconditional delete of the pointer that lands between a creator's
/// create and its read of what it found.
struct LosesThePointer {
    inner: Arc<dyn ObjectStore>,
    shared: Arc<dyn ObjectStore>,
    pointer: Path,
    lost: std::sync::atomic::AtomicBool,
}

shown_by_path!(LosesThePointer, pointer);

#[async_trait::async_trait]
impl ObjectStore for LosesThePointer {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await;
        if *location == self.pointer
            && matches!(put, Err(object_store::Error::AlreadyExists { .. }))
            && !self.lost.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            self.shared.delete(&self.pointer).await.unwrap();
        }
        put
    }

    memo_runtime::testing::forward_object_store!(self.inner => put_multipart_opts, get_opts,
        get_ranges, delete_stream, list, list_with_offset, list_with_delimiter, copy_opts,
        rename_opts);
}

/// Seed 9071 of session 42's survey: two deliveries of a deleted run's id
/// create it at once. The first creates its run (pointer, record: the run
/// exists, and its creation is acknowledged); the second, whose listing of
/// the id's folder came before, finds the pointer taken, and a stale
/// deletion of the id's earlier run removes that pointer before the
/// second reads it. The second must not create its own run in its place
/// (it did: the create was tried again, and the first run, restorable from
/// its record, came back once the second's was deleted, to run again): it
/// reads the id again, restores the first run's pointer from its record,
/// and answers with that run.
#[tokio::test]
async fn a_creator_that_finds_the_pointer_taken_and_then_gone_answers_with_the_run_it_held() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-91");
        let pointer = Path::from("runs/runs/order-91/run");
        // The second creator stops at its `Pending` hint, after its
        // listing found the id new.
        let loses = |paused| -> Arc<dyn ObjectStore> {
            Arc::new(LosesThePointer {
                inner: paused,
                shared: backend.objects(),
                pointer: pointer.clone(),
                lost: std::sync::atomic::AtomicBool::new(false),
            })
        };
        let (answer, release) = creation_stopped_at_its_hint(backend.open(), loses, &run_id).await;

        let first = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let created = first.create_run(order(&run_id)).await.unwrap();

        release.send(()).unwrap();
        let answered = answer.await.unwrap().unwrap();
        assert_eq!(
            (answered.incarnation, answered.status),
            (created.incarnation, RunStatus::Pending),
            "{name}: the second creator answers with the run the first created"
        );
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let current = fresh.load_run(&run_id).await.unwrap().unwrap();
        assert_eq!(current.incarnation, created.incarnation, "{name}");
        assert_eq!(
            pending(&fresh).await,
            std::slice::from_ref(&run_id),
            "{name}: one Pending run, the first's"
        );
        let hints = stored_under(backend.objects().as_ref(), "runs/runs-by-status").await;
        assert_eq!(
            hints.len(),
            1,
            "{name}: the second creator's hint is dropped: {hints:?}"
        );
    }
}

/// Seed 9071's window, one round trip earlier (session 43): the stale
/// deletion's delete of the pointer lands after the first creator's run
/// stood and before the second creator's create, whose listing of the
/// id's folder, like the first's, found the id new. The second's create
/// then finds the path free; it must not answer with a run of its own
/// beside the first (whose creation was acknowledged, and which may be
/// running): its check after its record lists the id's folder, finds the
/// first run's record, gives its own run up and answers with the first.
#[tokio::test]
async fn a_creator_whose_create_finds_a_free_path_beside_a_standing_run_answers_with_that_run() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-92");
        let pointer = Path::from("runs/runs/order-92/run");
        let (answer, release) = creation_stopped_at_its_hint(backend.open(), |s| s, &run_id).await;

        // The first creates the run, and starts it.
        let first = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let created = first.create_run(order(&run_id)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 2);
        first.atomic_apply(&run_id, start).await.unwrap();
        // The stale deletion's delete lands.
        backend.objects().delete(&pointer).await.unwrap();

        release.send(()).unwrap();
        let answered = answer.await.unwrap().unwrap();
        assert_eq!(
            (answered.incarnation, answered.status),
            (created.incarnation, RunStatus::Running),
            "{name}: the second creator answers with the run the first created"
        );
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let current = fresh.load_run(&run_id).await.unwrap().unwrap();
        assert_eq!(current.incarnation, created.incarnation, "{name}");
        let records: Vec<_> = stored_under(backend.objects().as_ref(), "runs/runs/order-92")
            .await
            .into_iter()
            .filter(|path| path.ends_with("/run") && path.as_str() != pointer.as_ref())
            .collect();
        assert_eq!(
            records.len(),
            1,
            "{name}: the second creator's record is taken back: {records:?}"
        );
        assert!(
            pending(&fresh).await.is_empty(),
            "{name}: no Pending run: the second creator's hint is dropped"
        );
    }
}

/// The check after the record gives the new run up only for another
/// incarnation's record that is not buried: the record of a deleted run,
/// put back by a late writer and waiting for its recheck, stands beside the
/// tombstone its deletion left, and a creation of the id beside it keeps
/// its run (it is not given up and created again, which would have taken
/// that record back on the way: the next creation's listing restores
/// nothing from it and deletes it).
#[tokio::test]
async fn a_buried_record_beside_a_new_run_does_not_make_its_creator_give_it_up() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-93");
        let (answer, release) = creation_stopped_at_its_hint(backend.open(), |s| s, &run_id).await;

        // A deleted run's record, put back late, and its tombstone: the
        // record of a run of the id made under another prefix, copied.
        let elsewhere = ObjectStoreRuntimeStore::new(backend.open(), "elsewhere");
        let deleted = elsewhere.create_run(order(&run_id)).await.unwrap();
        let deleted = deleted.incarnation;
        let objects = backend.objects();
        let made = Path::from(format!("elsewhere/runs/order-93/{deleted}/run"));
        let bytes = objects.get(&made).await.unwrap().bytes().await.unwrap();
        let record = Path::from(format!("runs/runs/order-93/{deleted}/run"));
        objects.put(&record, bytes.into()).await.unwrap();
        let tombstone = Path::from(format!("runs/tombstones/order-93.{deleted}"));
        objects.put(&tombstone, PutPayload::new()).await.unwrap();

        release.send(()).unwrap();
        let created = answer.await.unwrap().unwrap();
        assert_ne!(created.incarnation, deleted, "{name}");
        assert!(
            objects.head(&record).await.is_ok(),
            "{name}: the creator kept its run: no second turn took the buried record back"
        );
    }
}

/// A creation whose create of the pointer lands and is reported failed (a
/// lost acknowledgement) reads the pointer back, finds its own bytes, and
/// has no entity tag of its create to check the listing by: its check
/// after the record reads the pointer instead, and the run is created
/// once and answered, by one create of the pointer.
#[tokio::test]
async fn a_creation_whose_pointer_create_lost_its_acknowledgement_creates_the_run_once() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-95");
        let pointer = Path::from("runs/runs/order-95/run");
        let faults = FaultInjectingStore::new(backend.open());
        faults.inject(
            FaultRule::fail_after(RequestKind::Create)
                .matching({
                    let pointer = pointer.clone();
                    move |path| *path == pointer
                })
                .times(1),
        );
        let counting = Arc::new(CountingStore::new(faults));
        let creator = ObjectStoreRuntimeStore::new(counting.clone(), "runs");
        let created = creator.create_run(order(&run_id)).await.unwrap();
        assert_eq!(created.status, RunStatus::Pending, "{name}");
        let counts = counting.counts();
        // The hint, the pointer (once) and the record; the read back of the
        // pointer after the failed create, and the check's read of it.
        assert_eq!((counts.creates, counts.gets), (3, 2), "{name}: {counts:?}");

        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let current = fresh.load_run(&run_id).await.unwrap().unwrap();
        assert_eq!(current.incarnation, created.incarnation, "{name}");
        assert_eq!(pending(&fresh).await, vec![run_id], "{name}");
    }
}
