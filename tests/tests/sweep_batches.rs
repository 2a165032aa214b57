//! What a retention pass deletes together: the terminal markers of a
//! page's cleared runs, the recheck markers of a pass's rechecks and the
//! stale due-run entries each go in one `delete_stream` (on S3 one
//! `DeleteObjects` request per 1,000 paths, where each was a request of its
//! own), a marker whose delete fails fails its run alone, and the due-run
//! index's runs are read several at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt};
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{self, GetOptions, GetResult, ObjectStore};
use memo_runtime::retention::{MARKER_PARTITION_MS, RetentionSweeper, TerminalMarker};
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind, forward_object_store};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, MemoStore, RunId};
use memo_tests::fixtures::{run, stored_entries};

const HOUR: u64 = MARKER_PARTITION_MS;
const DAY: u64 = 24 * HOUR;
const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A store that records the paths of each `delete_stream` call, and how
/// many reads were in flight at most.
#[derive(Debug)]
struct Recorder {
    inner: Arc<dyn ObjectStore>,
    /// One list per `delete_stream` call: the paths that flowed into it.
    deletes: Arc<Mutex<Vec<Vec<Path>>>>,
    reads_in_flight: AtomicUsize,
    most_reads_in_flight: AtomicUsize,
}

impl Recorder {
    fn new(inner: impl ObjectStore) -> Arc<Recorder> {
        Arc::new(Recorder {
            inner: Arc::new(inner),
            deletes: Arc::default(),
            reads_in_flight: AtomicUsize::new(0),
            most_reads_in_flight: AtomicUsize::new(0),
        })
    }

    /// The `delete_stream` calls that deleted anything under `folder` (a
    /// segment such as `terminals`), each as the paths it was given.
    fn deletes_in(&self, folder: &str) -> Vec<Vec<String>> {
        let segment = format!("/{folder}/");
        self.deletes
            .lock()
            .unwrap()
            .iter()
            .filter(|call| call.iter().any(|p| p.as_ref().contains(&segment)))
            .map(|call| call.iter().map(ToString::to_string).collect())
            .collect()
    }

    /// Forgets what was recorded so far.
    fn reset(&self) {
        self.deletes.lock().unwrap().clear();
        self.most_reads_in_flight.store(0, Ordering::SeqCst);
    }
}

impl std::fmt::Display for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recorder({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Recorder {
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let deletes = Arc::clone(&self.deletes);
        let call = {
            let mut deletes = deletes.lock().unwrap();
            deletes.push(Vec::new());
            deletes.len() - 1
        };
        let recorded = locations.inspect(move |location| {
            if let Ok(path) = location {
                deletes.lock().unwrap()[call].push(path.clone());
            }
        });
        self.inner.delete_stream(recorded.boxed())
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let now = self.reads_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_reads_in_flight.fetch_max(now, Ordering::SeqCst);
        // Give the other reads the caller allows a chance to overlap.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        let read = self.inner.get_opts(location, options).await;
        self.reads_in_flight.fetch_sub(1, Ordering::SeqCst);
        read
    }

    forward_object_store!(self.inner => put_opts, put_multipart_opts, get_ranges, list,
        list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

/// A workflow run `id` of one step, ended at `at_ms` with a memo entry and
/// its terminal marker, through `runtime`.
async fn ended_run(runtime: &Runtime, clock: &ManualClock, id: &str, at_ms: u64) -> RunId {
    clock.set_ms(at_ms);
    let one_step = Workflow::new("one-step", |ctx: Context, _: ()| async move {
        ctx.step("only", |memo| async move {
            memo.put("key", b"value").await?;
            Ok::<_, Error>(1u32)
        })
        .await
    });
    let run_id = run(id);
    assert_eq!(runtime.run(&run_id, &(), &one_step).await.unwrap(), 1);
    run_id
}

/// A runtime over `objects` (memo store `memo`, runtime store `runtime`)
/// on a manual clock.
fn runtime_over(objects: Arc<dyn ObjectStore>) -> (Runtime, Arc<ManualClock>, MemoStore) {
    let clock = Arc::new(ManualClock::new(DAY));
    let memo = MemoStore::new(Arc::clone(&objects), "memo");
    let runtime = Runtime::builder()
        .memo_store(memo.clone())
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, "runtime")))
        .clock(clock.clone())
        .retention(RETENTION)
        .build()
        .unwrap();
    (runtime, clock, memo)
}

#[tokio::test]
async fn a_pass_deletes_the_markers_of_each_page_in_one_batch_and_its_rechecks_in_one() {
    let recorder = Recorder::new(InMemory::new());
    let (runtime, clock, memo) = runtime_over(recorder.clone());
    let mut runs = Vec::new();
    for i in 0..7 {
        runs.push(ended_run(&runtime, &clock, &format!("r{i}"), DAY + i * HOUR).await);
    }
    let now = 9 * DAY;
    let sweeper = runtime
        .retention_sweeper_builder()
        .page_size(3)
        .concurrency(2)
        .recheck_after(Duration::from_secs(3600))
        .build();
    recorder.reset();

    let report = sweeper.sweep_once(now).await.unwrap();
    assert_eq!(
        (report.pages, report.runs_cleared, report.failures.len()),
        (3, 7, 0),
        "{report:?}"
    );
    let batches = recorder.deletes_in("terminals");
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, [3, 3, 1], "one delete_stream per page: {batches:?}");
    assert!(
        batches
            .iter()
            .flatten()
            .all(|p| p.starts_with("memo/terminals/")),
        "a page's batch holds its markers and nothing else: {batches:?}"
    );
    assert!(memo.markers().list().await.unwrap().is_empty());
    for run_id in &runs {
        assert!(runtime.status(run_id).await.unwrap().is_none(), "{run_id}");
        assert_eq!(stored_entries(&memo, run_id).await, 0, "{run_id}");
    }

    // An hour on, the pass rechecks the 7 runs and deletes their recheck
    // markers together.
    recorder.reset();
    let later = sweeper.sweep_once(now + 2 * HOUR).await.unwrap();
    assert_eq!(
        (later.rechecks_due, later.recheck_failures),
        (7, 0),
        "{later:?}"
    );
    let rechecks = recorder.deletes_in("rechecks");
    assert_eq!(rechecks.len(), 1, "{rechecks:?}");
    assert_eq!(rechecks[0].len(), 7, "{rechecks:?}");
    assert!(
        rechecks[0].iter().all(|p| p.starts_with("memo/rechecks/")),
        "{rechecks:?}"
    );
    let again = sweeper.sweep_once(now + 4 * HOUR).await.unwrap();
    assert_eq!(
        again.rechecks_due, 0,
        "every recheck marker is gone: {again:?}"
    );
}

#[tokio::test]
async fn a_marker_whose_delete_fails_fails_its_run_alone_and_the_next_pass_deletes_it() {
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let memo = MemoStore::new(faults.clone(), "memo");
    let terminal_at = 2 * DAY;
    for id in ["a", "b", "c", "d"] {
        memo.new_memo(&run(id), 0).put("key", b"v").await.unwrap();
        memo.markers()
            .write_standalone(&run(id), terminal_at)
            .await
            .unwrap();
    }
    // A marker inside the page's batch, which holds an even number of
    // them: no marker stands where its results would, read the other way.
    faults.inject(
        FaultRule::fail_before(RequestKind::Delete)
            .matching(|p| {
                p.as_ref().starts_with("memo/terminals/")
                    && p.as_ref().ends_with("_b.0000000000000000")
            })
            .times(1),
    );
    let sweeper = RetentionSweeper::builder(memo.clone(), RETENTION).build();
    let now = 10 * DAY;

    let first = sweeper.sweep_once(now).await.unwrap();
    assert_eq!(first.runs_cleared, 3, "{first:?}");
    assert_eq!(
        first.entries_deleted, 4,
        "every run's entries went: {first:?}"
    );
    let failed: Vec<&str> = first.failures.iter().map(|f| f.run_id.as_str()).collect();
    assert_eq!(failed, ["b"], "{first:?}");
    let left: Vec<TerminalMarker> = memo.markers().list().await.unwrap();
    assert_eq!(
        left.iter().map(|m| m.run_id.as_str()).collect::<Vec<_>>(),
        ["b"]
    );

    let second = sweeper.sweep_once(now).await.unwrap();
    assert_eq!(
        (second.runs_cleared, second.failures.len()),
        (1, 0),
        "{second:?}"
    );
    assert!(memo.markers().list().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_pass_reads_the_due_index_runs_several_at_once_and_deletes_stale_entries_together() {
    let recorder = Recorder::new(InMemory::new());
    let (runtime, clock, _) = runtime_over(recorder.clone());
    let approval = Workflow::new("approval", |ctx: Context, _: ()| async move {
        let yes: bool = ctx.wait_for_signal("go").await?;
        Ok::<_, Error>(yes)
    });
    // Runs that wait, get their signal (an entry due now) and are run to
    // their end by a redelivery, not by a worker: each entry is stale.
    for i in 0..5 {
        let id = run(&format!("ended-{i}"));
        assert!(runtime.run(&id, &(), &approval).await.is_err());
        runtime.signal(&id, "go", &true).await.unwrap();
        assert!(runtime.run(&id, &(), &approval).await.unwrap());
    }
    // And one asleep: its timer's entry is due by then, and kept.
    let nap = Workflow::new("nap", |ctx: Context, _: ()| async move {
        ctx.sleep(Duration::from_secs(3600)).await?;
        Ok::<_, Error>(true)
    });
    let waiting = run("asleep");
    assert!(runtime.run(&waiting, &(), &nap).await.is_err());
    clock.advance_ms(2 * HOUR);
    let stale = runtime.due_runs(u64::MAX).collect::<Vec<_>>().await.len();
    let sweeper = runtime.retention_sweeper_builder().concurrency(3).build();
    recorder.reset();

    let report = sweeper.sweep_now().await.unwrap();
    assert_eq!(report.due_entries_deleted, stale - 1, "{report:?}");
    let batches = recorder.deletes_in("due");
    assert_eq!(batches.len(), 1, "one delete_stream: {batches:?}");
    assert_eq!(batches[0].len(), stale - 1, "{batches:?}");
    let most = recorder.most_reads_in_flight.load(Ordering::SeqCst);
    assert!(
        (2..=3).contains(&most),
        "the runs are read up to 3 at once: {most} reads in flight at most"
    );
    let left: Vec<RunId> = runtime
        .due_runs(u64::MAX)
        .map(|due| due.unwrap().run_id)
        .collect()
        .await;
    assert!(left.iter().all(|id| *id == waiting), "{left:?}");
    assert!(!left.is_empty(), "the run asleep keeps its entry");
}
