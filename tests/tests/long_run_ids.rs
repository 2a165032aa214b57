//! The longest valid run ids of every shape on a real local folder: each
//! runs its whole life (creation, steps with memo entries, completion, its
//! terminal marker, recovery, the status listing, a sweep), because every
//! name memo builds for it fits the folder's 255-byte file names.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::path::Path;
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Error, MemoStore, RunId, clock::ManualClock, limits::MAX_RUN_ID_LEN,
    runtime_store::RuntimeStore,
};
use memo_tests::fixtures::{self, run};

/// The longest ids of every shape, and the shapes around the short form's
/// bound (68 and 69 capitals in a 128-byte id).
fn longest_ids() -> Vec<RunId> {
    let len = MAX_RUN_ID_LEN;
    [
        "A".repeat(len),
        "a".repeat(len),
        "-".repeat(len),
        "_".repeat(len),
        "-_".repeat(len / 2),
        "Z9".repeat(len / 2),
        format!("{}{}", "Q".repeat(68), "q".repeat(len - 68)),
        format!("{}{}", "Q".repeat(69), "q".repeat(len - 69)),
        format!("{}{}", "Q".repeat(103), "x".repeat(len - 103)),
    ]
    .iter()
    .map(|id| run(id))
    .collect()
}

/// Two steps, each with a memo entry.
async fn two_steps(ctx: Context, n: u64) -> Result<u64, Error> {
    let a: u64 = ctx
        .step("first", |memo| async move {
            memo.put("a", n.to_le_bytes()).await?;
            Ok::<_, Error>(n + 1)
        })
        .await?;
    ctx.step("second", |memo| async move {
        memo.content_put(&("b", a), a.to_le_bytes()).await?;
        Ok::<_, Error>(a * 2)
    })
    .await
}

async fn objects_under(objects: &Arc<dyn ObjectStore>, folder: &str) -> usize {
    objects
        .list(Some(&Path::from(folder)))
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_run_ids_of_every_shape_live_their_whole_life_on_a_local_folder() {
    let folder = fixtures::Backend::local_folder();
    let objects = folder.objects();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let records: Arc<dyn RuntimeStore> = Arc::new(folder.runtime_store("runs"));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(records.clone())
        .clock(clock.clone())
        .retention(Duration::from_secs(10))
        .build()
        .unwrap();
    let workflow = Workflow::new("two-steps", two_steps);
    let ids = longest_ids();
    for (i, id) in ids.iter().enumerate() {
        let out = runtime.run(id, &(i as u64), &workflow).await;
        assert_eq!(out.unwrap(), (i as u64 + 1) * 2, "{id}");
    }
    assert_eq!(objects_under(&objects, "memo/memos").await, 2 * ids.len());

    // Every run got its marker, so recovery has nothing to mark again.
    let mut marked: Vec<_> = runtime
        .memo_store()
        .markers()
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.run_id)
        .collect();
    marked.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(marked, expected);
    let recovery = runtime.recover(&workflow).await.unwrap();
    assert_eq!(
        (recovery.remarked, recovery.skipped.len()),
        (0, 0),
        "{recovery:?}"
    );
    let mut listed: Vec<_> = records
        .list_runs(RunStatus::Completed)
        .await
        .unwrap()
        .into_iter()
        .map(|summary| summary.run_id)
        .collect();
    listed.sort();
    assert_eq!(listed, expected);

    clock.advance_ms(20_000);
    let report = runtime.retention_sweeper().sweep_now().await.unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(
        (report.runs_cleared, report.runtime_runs_deleted),
        (ids.len(), ids.len())
    );
    for id in &ids {
        assert!(runtime.status(id).await.unwrap().is_none(), "{id}");
    }
    assert_eq!(objects_under(&objects, "memo/memos").await, 0);
    assert_eq!(objects_under(&objects, "memo/terminals").await, 0);
}
