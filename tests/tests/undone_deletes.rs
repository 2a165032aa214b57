//! A local folder acknowledges a status hint's and a due-run entry's
//! delete without syncing it (`store::LocalFolder`, "Durability"), so a
//! power loss may bring such an object back after memo saw it deleted.
//! Both are states memo resolves: here every hint and due-run entry that a
//! run's life deleted is put back once the run ended, and the run is not
//! run again, is listed only in the status it ended in, and the objects put
//! back are cleared by the listings and the poll that meet them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt};
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{self, ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunStatus};
use memo_runtime::store::LocalFolder;
use memo_runtime::testing::forward_object_store;
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

/// A store that records the objects it deleted.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ObjectStore>,
    deleted: Arc<Mutex<Vec<Path>>>,
}

impl std::fmt::Display for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recording({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Recording {
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let deleted = Arc::clone(&self.deleted);
        self.inner
            .delete_stream(locations)
            .inspect(move |done| {
                if let Ok(path) = done {
                    deleted.lock().unwrap().push(path.clone());
                }
            })
            .boxed()
    }

    forward_object_store!(self.inner => put_opts, put_multipart_opts, get_opts, get_ranges,
        list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

/// The clock starts at the beginning of an hour.
const START_MS: u64 = 24 * 3_600_000;

type Steps = futures::future::BoxFuture<'static, Result<usize, Error>>;

/// Three steps, each a counted side effect.
fn three_steps(
    effects: Arc<AtomicUsize>,
) -> Workflow<impl Fn(Context, ()) -> Steps + Clone + Send + Sync> {
    Workflow::new("three", move |ctx: Context, ()| {
        let effects = Arc::clone(&effects);
        Box::pin(async move {
            let mut done = 0;
            for n in 0..3 {
                let effects = Arc::clone(&effects);
                done += ctx
                    .step(format!("step-{n}"), move |_memo| {
                        effects.fetch_add(1, Ordering::SeqCst);
                        async { Ok::<_, Error>(1usize) }
                    })
                    .await?;
            }
            Ok(done)
        }) as Steps
    })
}

#[tokio::test]
async fn hints_and_due_entries_a_power_loss_brings_back_are_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let folder: Arc<dyn ObjectStore> = Arc::new(LocalFolder::new(dir.path()).unwrap());
    let deleted = Arc::new(Mutex::new(Vec::new()));
    let objects: Arc<dyn ObjectStore> = Arc::new(Recording {
        inner: Arc::clone(&folder),
        deleted: Arc::clone(&deleted),
    });
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .build()
        .unwrap();
    let effects = Arc::new(AtomicUsize::new(0));
    let workflow = three_steps(Arc::clone(&effects));
    let id = RunId::new("order-1").unwrap();
    assert_eq!(runtime.run(&id, &(), &workflow).await.unwrap(), 3);

    // What the run's life deleted without a sync: its `Pending` and
    // `Running` hints and its due-run entry. A power loss brings them back.
    let undone: Vec<Path> = deleted
        .lock()
        .unwrap()
        .iter()
        .filter(|path| {
            let path = path.as_ref();
            path.contains("/runs-by-status/") || path.starts_with("memo/due/")
        })
        .cloned()
        .collect();
    let hints: Vec<&Path> = undone
        .iter()
        .filter(|p| p.as_ref().contains("/runs-by-status/"))
        .collect();
    assert_eq!(undone.len(), 3, "{undone:?}");
    assert_eq!(hints.len(), 2, "{undone:?}");
    for path in &undone {
        // A hint holds its run id; a due-run entry nothing.
        let content = if hints.contains(&path) {
            id.as_str().as_bytes().to_vec()
        } else {
            Vec::new()
        };
        folder.put(path, content.into()).await.unwrap();
    }

    // The run is listed in the status it ended in only, and the listings
    // delete the hints put back.
    for (status, listed) in [
        (RunStatus::Pending, vec![]),
        (RunStatus::Running, vec![]),
        (RunStatus::Completed, vec![id.clone()]),
    ] {
        let runs_listed: Vec<RunId> = runtime
            .runtime_store()
            .list_runs(status)
            .await
            .unwrap()
            .into_iter()
            .map(|summary| summary.run_id)
            .collect();
        assert_eq!(runs_listed, listed, "{status}");
    }
    for hint in &hints {
        assert!(folder.head(hint).await.is_err(), "{hint} is tidied");
    }

    // A recovery meets the due-run entry put back, and the hints if no
    // listing had: the run ended, so it resumes nothing. A worker's poll
    // finds the entry stale and deletes it, running nothing.
    for path in &hints {
        let content = id.as_str().as_bytes().to_vec();
        folder.put(path, content.into()).await.unwrap();
    }
    let recovery = runtime.recover(&workflow).await.unwrap();
    assert!(recovery.resumed.is_empty(), "{recovery:?}");
    assert!(recovery.skipped.is_empty(), "{recovery:?}");
    assert!(recovery.busy.is_empty(), "{recovery:?}");
    // Past the attempt's lease, when its entry is due.
    clock.advance_ms(3_600_000);
    let worker = Worker::builder(runtime.clone()).workflow(&workflow).build();
    let report = worker.wake_due().await.unwrap();
    assert_eq!(
        (report.entries, report.stale, report.resumed),
        (1, 1, 0),
        "{report:?}"
    );
    let entry = undone.iter().find(|p| p.as_ref().starts_with("memo/due/"));
    assert!(
        folder.head(entry.unwrap()).await.is_err(),
        "the due entry is deleted"
    );

    // Nor does the same run id asked again run anything.
    assert_eq!(runtime.run(&id, &(), &workflow).await.unwrap(), 3);
    assert_eq!(effects.load(Ordering::SeqCst), 3, "each step ran once");
}
