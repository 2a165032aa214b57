//! A run not started yet stays findable by a listing of `Pending` runs (and
//! so by recovery) whatever a tidying listing did while it was created.
//! Found by the simulator's "an operator never lists a run that exists as
//! absent" (seeds 58 and 5631 of the deployment world).

use std::sync::Arc;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::runtime_store::{NewRun, ObjectStoreRuntimeStore, RunStatus, RuntimeStore};
use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::{Bytes, RunId};
use memo_tests::fixtures::run;
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

/// A creator writes its `Pending` hint and stalls before its pointer; a
/// tidying listing finds the hint's incarnation unborn and deletes it; the
/// creator then writes its pointer and record and stops for good before
/// its check of the hint (here: the check fails, and `create_run` with
/// it). The run exists, `Pending`, with no hint. The caller's retry (a
/// queue's redelivery) answers for the run that exists: it must write the
/// hint back, or no listing of `Pending` runs, and no recovery, ever finds
/// the run.
#[tokio::test]
async fn a_retried_create_of_a_run_whose_hint_was_tidied_while_its_creator_stalled_lists_it() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let run_id = run("order-58");
    let (paused, pause) = Pauses::new(
        Arc::clone(&objects),
        Held::Put,
        Path::from("runs/runs/order-58/run"),
    );
    let creator_objects = FaultInjectingStore::new(Arc::new(paused) as Arc<dyn ObjectStore>);
    creator_objects
        .inject(FaultRule::fail_before(RequestKind::Head).at_prefix("runs/runs-by-status/Pending"));
    let creator = ObjectStoreRuntimeStore::new(Arc::new(creator_objects), "runs");
    let run_c = run_id.clone();
    let creation = tokio::spawn(async move { creator.create_run(order(&run_c)).await });
    wait_reached(pause.reached, "the creator writes its pointer").await;

    let lister = ObjectStoreRuntimeStore::new(Arc::clone(&objects), "runs");
    assert!(
        lister
            .list_run_ids(RunStatus::Pending)
            .await
            .unwrap()
            .is_empty(),
        "no run yet: the hint is tidied"
    );
    pause.release.send(()).unwrap();
    let stopped = creation.await.unwrap();
    assert!(
        stopped.is_err(),
        "the creator stops at its check: {stopped:?}"
    );
    let exists = lister
        .load_run(&run_id)
        .await
        .unwrap()
        .expect("the run exists");
    assert_eq!(exists.status, RunStatus::Pending);

    let retry = ObjectStoreRuntimeStore::new(Arc::clone(&objects), "runs");
    let answered = retry.create_run(order(&run_id)).await.unwrap();
    assert_eq!(answered.incarnation, exists.incarnation);

    assert_eq!(
        lister.list_run_ids(RunStatus::Pending).await.unwrap(),
        vec![run_id.clone()],
        "a run whose creation was answered is listed"
    );
    let listed = lister.list_runs(RunStatus::Pending).await.unwrap();
    assert_eq!(
        listed.iter().map(|r| &r.run_id).collect::<Vec<_>>(),
        vec![&run_id]
    );
}
