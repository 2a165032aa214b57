//! An operator's listing writes nothing: a runtime store with read-only
//! listings lists runs past stale status hints without deleting them, so it
//! lists even on a store that refuses every write.

use std::sync::Arc;

use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Error, MemoStore,
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::run;

/// Every kind of request that writes.
const WRITES: [RequestKind; 6] = [
    RequestKind::Put,
    RequestKind::Create,
    RequestKind::Multipart,
    RequestKind::Delete,
    RequestKind::Copy,
    RequestKind::Rename,
];

async fn one_step(ctx: Context, n: u64) -> Result<u64, Error> {
    ctx.step("double", |_memo| async move { Ok::<_, Error>(n * 2) })
        .await
}

/// A store holding the completed run `done-1` and a stale `Running` hint of
/// it (as a worker that crashed between the commit and the hint's deletion
/// leaves one), and the hint's path.
async fn store_with_a_stale_hint() -> (Arc<InMemory>, Path) {
    let objects = Arc::new(InMemory::new());
    let records = Arc::new(ObjectStoreRuntimeStore::new(objects.clone(), "rt"));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(records.clone())
        .build()
        .unwrap();
    let out = runtime
        .run(&run("done-1"), &21u64, &Workflow::new("double", one_step))
        .await
        .unwrap();
    assert_eq!(out, 42);
    let incarnation = records
        .load_run(&run("done-1"))
        .await
        .unwrap()
        .unwrap()
        .incarnation;
    let hint = Path::from(format!("rt/runs-by-status/Running/done-1.{incarnation}"));
    objects.put(&hint, "done-1".into()).await.unwrap();
    (objects, hint)
}

/// An operator's store over `objects` that refuses every write.
fn refusing_writes(objects: &Arc<InMemory>) -> Arc<FaultInjectingStore<Arc<dyn ObjectStore>>> {
    let faults = Arc::new(FaultInjectingStore::new(
        objects.clone() as Arc<dyn ObjectStore>
    ));
    for kind in WRITES {
        faults.inject(FaultRule::fail_before(kind));
    }
    faults
}

#[tokio::test]
async fn a_read_only_listing_lists_past_stale_hints_on_a_store_that_refuses_writes() {
    let (objects, hint) = store_with_a_stale_hint().await;
    let faults = refusing_writes(&objects);
    let operator = ObjectStoreRuntimeStore::new(faults.clone(), "rt").with_read_only_listings();

    assert_eq!(operator.list_runs(RunStatus::Running).await.unwrap(), []);
    let completed = operator.list_runs(RunStatus::Completed).await.unwrap();
    let ids: Vec<_> = completed.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["done-1"]);
    assert_eq!(faults.faults_injected(), 0, "the listing tried to write");
    objects
        .head(&hint)
        .await
        .expect("the stale hint is left in place");
}

#[tokio::test]
async fn a_workers_listing_deletes_the_stale_hints_it_reads() {
    let (objects, hint) = store_with_a_stale_hint().await;
    // The default: the listing tidies, so it needs to write...
    let faults = refusing_writes(&objects);
    let refused = ObjectStoreRuntimeStore::new(faults.clone(), "rt")
        .list_runs(RunStatus::Running)
        .await;
    assert!(matches!(refused, Err(Error::Store { .. })), "{refused:?}");
    // ...and where it can, the next listing no longer reads the hint.
    let worker = ObjectStoreRuntimeStore::new(objects.clone(), "rt");
    assert_eq!(worker.list_runs(RunStatus::Running).await.unwrap(), []);
    assert!(objects.head(&hint).await.is_err(), "the stale hint is kept");
}
