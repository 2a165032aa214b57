//! A creation of a run id racing a stale deletion of the id's earlier run
//! (issue 20; seed 1778 of session 24's survey). A creator writes its new
//! run's pointer and then its record; a sweeper that checked the earlier
//! run before deletes the pointer in between (object stores delete
//! unconditionally), so the creator finds no pointer once its record
//! stands. A reader that looks meanwhile restores the pointer from the
//! record and may act on the run; the creator must then not remove what
//! that reader acted on. Each interleaving is staged deterministically:
//! a process's store pauses at a chosen request until the test lets it go.

use std::sync::{Arc, Mutex};

use futures::TryStreamExt;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{self, ObjectStore, PutOptions, PutPayload, PutResult};
use memo_runtime::runtime_store::{
    Commit, NewInput, NewRun, ObjectStoreRuntimeStore, RuntimeStore, StatusChange,
};
use memo_runtime::{Bytes, RunId};
use memo_tests::fixtures::{Backend, run};
use memo_tests::pause::{Held, Pauses};
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

/// A store that, once the first put of `path` is done, tells the test and
/// waits for it before answering: the creator stalls between its pointer
/// and its record.
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

impl std::fmt::Debug for AfterPut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AfterPut({})", self.path)
    }
}

impl std::fmt::Display for AfterPut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

#[async_trait::async_trait]
impl ObjectStore for AfterPut {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await;
        let gate = (*location == self.path)
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

/// Seed 1778's interleaving. Sweeper A checks the expired run and stalls
/// at its pointer delete; sweeper B deletes the run in full; a redelivery
/// (the creator) writes the new run's pointer and stalls before its
/// record; A's delete then removes the new pointer. The creator writes its
/// record, finds no pointer, and stalls at its take-back. A signal to the
/// run (another process) finds the record, restores the pointer and is
/// accepted into the new run. Then the creator goes on.
///
/// The signal was acknowledged, so the run it went into must stand: a
/// fresh instance reads it with the signal, the creator answers with it,
/// and once the run ends and is deleted nothing of it is left in the
/// store. Before the fix the creator's take-back removed the restored
/// pointer too and created a third run: the signal was lost and its log
/// entry left with nothing naming it.
#[tokio::test]
async fn a_creator_whose_pointer_a_stale_deletion_removed_keeps_the_run_a_signal_restored() {
    for backend in Backend::all() {
        let name = backend.name();
        let run_id = run("order-17");
        let folder = Path::from("runs/runs/order-17");
        let pointer = Path::from("runs/runs/order-17/run");
        let worker = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        worker.create_run(order(&run_id)).await.unwrap();
        let old = worker.atomic_apply(&run_id, completed()).await.unwrap();

        // Sweeper A checks the run; its pointer delete is held.
        let (paused, stale) = Pauses::new(backend.open(), Held::Delete, pointer.clone());
        let sweeper_a = ObjectStoreRuntimeStore::new(Arc::new(paused), "runs");
        let (run_a, old_a) = (run_id.clone(), old.incarnation);
        let deletion_a = tokio::spawn(async move { sweeper_a.delete_run(&run_a, old_a).await });
        stale.reached.await.unwrap();

        // Sweeper B deletes it in full.
        let sweeper_b = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        assert!(
            sweeper_b
                .delete_run(&run_id, old.incarnation)
                .await
                .unwrap(),
            "{name}"
        );

        // The redelivery writes the new pointer and stalls; A's delete
        // removes it.
        let (after_pointer, pointer_written, go) = AfterPut::new(backend.open(), pointer.clone());
        // Its first delete under the run's folder is its take-back of the
        // record it wrote.
        let (held, take_back) = Pauses::new(Arc::new(after_pointer), Held::Delete, folder.clone());
        let creator = ObjectStoreRuntimeStore::new(Arc::new(held), "runs");
        let new_run = order(&run_id);
        let answer = tokio::spawn(async move { creator.create_run(new_run).await });
        pointer_written.await.unwrap();
        stale.release.send(()).unwrap();
        deletion_a.await.unwrap().unwrap();
        go.send(()).unwrap();
        take_back.reached.await.unwrap();

        // A signal finds the record, restores the pointer and is accepted.
        let signaller = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        signaller.append_input(&run_id, paid()).await.unwrap();
        let signalled = signaller.load_run(&run_id).await.unwrap().unwrap();
        assert_ne!(signalled.incarnation, old.incarnation, "{name}");
        take_back.release.send(()).unwrap();

        let created = answer.await.unwrap().unwrap();
        assert_eq!(
            created.incarnation, signalled.incarnation,
            "{name}: the creator answered with another run than the one signalled"
        );
        let fresh = ObjectStoreRuntimeStore::new(backend.open(), "runs");
        let seen = fresh.load_run(&run_id).await.unwrap();
        assert_eq!(
            seen.map(|r| r.incarnation),
            Some(signalled.incarnation),
            "{name}: the run the signal went into is gone"
        );
        let inputs = fresh.load_inputs(&run_id).await.unwrap();
        assert_eq!(
            inputs.iter().map(|i| &i.input_id[..]).collect::<Vec<_>>(),
            ["payment-1"],
            "{name}: the acknowledged signal was lost"
        );

        // The run ends and is deleted: nothing of the id is left.
        fresh.atomic_apply(&run_id, completed()).await.unwrap();
        assert!(
            fresh
                .delete_run(&run_id, signalled.incarnation)
                .await
                .unwrap(),
            "{name}"
        );
        let left: Vec<Path> = backend
            .open()
            .list(Some(&folder))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await
            .unwrap();
        assert!(
            left.is_empty(),
            "{name}: left with nothing naming it: {left:?}"
        );
    }
}
