//! What a retention pass deletes together: the terminal markers of a
//! page's cleared runs, the recheck markers and tombstones of a pass's
//! rechecks and the stale due-run entries each go in one `delete_stream`
//! (on S3 one `DeleteObjects` request per 1,000 paths, where each was a
//! request of its own), a marker whose delete fails fails its run alone,
//! and the due-run index's runs are read several at once; and what it does
//! not ask: a recheck sends no `HEAD` for status hints, and a pass lists
//! no run's step-output folder in a store that holds none.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt};
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{
    self, GetOptions, GetResult, ObjectMeta, ObjectStore, ObjectStoreExt,
};
use memo_runtime::retention::{MARKER_PARTITION_MS, RetentionSweeper, TerminalMarker};
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::testing::{
    FaultInjectingStore, FaultRule, RequestKind, forward_object_store, write_legacy_step_output,
};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, MemoStore, RunId};
use memo_tests::fixtures::{run, stored_entries, stored_under};

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
    /// The prefix of each listing, in order.
    lists: Mutex<Vec<String>>,
    /// The path of each `HEAD`, in order.
    heads: Mutex<Vec<String>>,
    reads_in_flight: AtomicUsize,
    most_reads_in_flight: AtomicUsize,
}

impl Recorder {
    fn new(inner: impl ObjectStore) -> Arc<Recorder> {
        Arc::new(Recorder {
            inner: Arc::new(inner),
            deletes: Arc::default(),
            lists: Mutex::default(),
            heads: Mutex::default(),
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

    /// The listings whose prefix starts with `prefix`.
    fn lists_under(&self, prefix: &str) -> Vec<String> {
        let lists = self.lists.lock().unwrap();
        lists
            .iter()
            .filter(|p| p.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// The `HEAD`s of paths that start with `prefix`.
    fn heads_under(&self, prefix: &str) -> Vec<String> {
        let heads = self.heads.lock().unwrap();
        heads
            .iter()
            .filter(|p| p.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Forgets what was recorded so far.
    fn reset(&self) {
        self.deletes.lock().unwrap().clear();
        self.lists.lock().unwrap().clear();
        self.heads.lock().unwrap().clear();
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
        if options.head {
            self.heads.lock().unwrap().push(location.to_string());
        }
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

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let listed = prefix.map(ToString::to_string).unwrap_or_default();
        self.lists.lock().unwrap().push(listed);
        self.inner.list(prefix)
    }

    forward_object_store!(self.inner => put_opts, put_multipart_opts, get_ranges,
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

/// Puts an empty object at `path`, as a late writer's object stands in
/// for the listing and the deletes that find it.
async fn plant(objects: &dyn ObjectStore, path: &str) {
    objects
        .put(&Path::from(path), Vec::<u8>::new().into())
        .await
        .unwrap();
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
    // Their deletions' tombstones went together too, before the markers
    // (a failure keeps the marker), and no recheck asked for a status hint
    // one `HEAD` at a time.
    let tombstones = recorder.deletes_in("tombstones");
    assert_eq!(tombstones.len(), 1, "{tombstones:?}");
    assert_eq!(tombstones[0].len(), 7, "{tombstones:?}");
    let calls = recorder.deletes.lock().unwrap().clone();
    let position = |folder: &str| {
        calls
            .iter()
            .position(|call| call.iter().any(|p| p.as_ref().contains(folder)))
            .unwrap()
    };
    assert!(
        position("/tombstones/") < position("/rechecks/"),
        "{calls:?}"
    );
    assert_eq!(
        recorder.heads_under("runtime/"),
        Vec::<String>::new(),
        "a recheck that finds nothing reads no status hint"
    );
    assert!(
        stored_under(recorder.inner.as_ref(), "runtime/tombstones/")
            .await
            .is_empty()
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

/// Seed 5988's world, from the runtime store's side: a stale attempt of a
/// swept run wrote a log entry and a status hint of the deleted
/// incarnation after its deletion, and died before taking them back. The
/// recheck deletes both with one listing of the incarnation's folder and
/// one `delete_stream` (the hints with it, asked for by no `HEAD`: it
/// counts the entry it found, not the hint it cannot know it deleted), and
/// leaves the run created again under the id alone.
#[tokio::test]
async fn a_recheck_deletes_a_stale_writers_runtime_objects_and_hints_without_a_head_each() {
    let recorder = Recorder::new(InMemory::new());
    let (runtime, clock, memo) = runtime_over(recorder.clone());
    let run_id = ended_run(&runtime, &clock, "order-1", DAY).await;
    let incarnation = memo.markers().list().await.unwrap()[0].incarnation;
    let now = 9 * DAY;
    let sweeper = runtime
        .retention_sweeper_builder()
        .recheck_after(Duration::from_secs(3600))
        .build();
    let swept = sweeper.sweep_once(now).await.unwrap();
    assert_eq!(
        (swept.runs_cleared, swept.failures.len()),
        (1, 0),
        "{swept:?}"
    );

    let folder = format!("runtime/runs/order-1/{incarnation}");
    let late_entry = format!("{folder}/log/late");
    let late_hint = format!("runtime/runs-by-status/Completed/order-1.{incarnation}");
    plant(recorder.inner.as_ref(), &late_entry).await;
    plant(recorder.inner.as_ref(), &late_hint).await;
    // The id used again: another incarnation, retained.
    ended_run(&runtime, &clock, "order-1", now + HOUR).await;
    let again = runtime.status(&run_id).await.unwrap().unwrap();
    assert_ne!(again.incarnation, incarnation);

    recorder.reset();
    let rechecked = sweeper.sweep_once(now + 2 * HOUR).await.unwrap();
    assert_eq!(
        (
            rechecked.rechecks_due,
            rechecked.late_objects_deleted,
            rechecked.recheck_failures
        ),
        (1, 1, 0),
        "{rechecked:?}"
    );
    assert_eq!(
        stored_under(recorder.inner.as_ref(), &folder).await,
        Vec::<String>::new()
    );
    let hints = stored_under(recorder.inner.as_ref(), "runtime/runs-by-status").await;
    assert!(!hints.contains(&late_hint), "{hints:?}");
    assert_eq!(
        recorder.heads_under("runtime/runs-by-status"),
        Vec::<String>::new()
    );
    assert_eq!(
        recorder.lists_under(&folder),
        std::slice::from_ref(&folder),
        "one listing of the incarnation's folder"
    );
    let deletes = recorder.deletes_in("runs-by-status");
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert!(
        deletes[0].contains(&late_entry) && deletes[0].contains(&late_hint),
        "the folder's objects and the hints in one batch: {deletes:?}"
    );
    let status = runtime.status(&run_id).await.unwrap().unwrap();
    assert_eq!(
        (status.incarnation, status.status),
        (again.incarnation, again.status),
        "the run of the id now is untouched"
    );
}

/// Step-output entries are no longer written: a pass asks once whether
/// the store holds any (one listing, the first time it clears or rechecks
/// a run), and lists no run's step-output folder if it holds none; a pass
/// with nothing to clear does not ask. Once the store holds one (written
/// by an older release), the next pass lists each run's folder again and
/// clears it.
#[tokio::test]
async fn a_pass_lists_no_runs_step_output_folder_in_a_store_that_holds_none() {
    let recorder = Recorder::new(InMemory::new());
    let (runtime, clock, memo) = runtime_over(recorder.clone());
    for i in 0..3 {
        ended_run(&runtime, &clock, &format!("r{i}"), DAY + i * HOUR).await;
    }
    let now = 9 * DAY;
    let sweeper = runtime
        .retention_sweeper_builder()
        .recheck_after(Duration::from_secs(3600))
        .build();
    let probe = ["memo/step-outputs".to_string()];

    recorder.reset();
    let swept = sweeper.sweep_once(now).await.unwrap();
    assert_eq!(
        (swept.runs_cleared, swept.entries_deleted),
        (3, 3),
        "{swept:?}"
    );
    assert_eq!(recorder.lists_under("memo/step-outputs"), probe);
    assert_eq!(recorder.lists_under("memo/memos/").len(), 3);

    recorder.reset();
    let idle = sweeper.sweep_once(now + 1).await.unwrap();
    assert_eq!(idle.runs_cleared + idle.rechecks_due, 0, "{idle:?}");
    assert_eq!(
        recorder.lists_under("memo/step-outputs"),
        Vec::<String>::new()
    );

    recorder.reset();
    let rechecked = sweeper.sweep_once(now + 2 * HOUR).await.unwrap();
    assert_eq!(rechecked.rechecks_due, 3, "{rechecked:?}");
    assert_eq!(recorder.lists_under("memo/step-outputs"), probe);

    // An older release's step output, in a run swept later.
    let old = ended_run(&runtime, &clock, "old", 2 * DAY).await;
    let incarnation = runtime.status(&old).await.unwrap().unwrap().incarnation;
    write_legacy_step_output(&memo, &old, incarnation, 0, b"payload", b"output")
        .await
        .unwrap();
    recorder.reset();
    let legacy = sweeper.sweep_once(now + 3 * HOUR).await.unwrap();
    assert_eq!(
        (legacy.runs_cleared, legacy.entries_deleted),
        (1, 2),
        "the memo entry and the step output: {legacy:?}"
    );
    assert_eq!(
        recorder.lists_under("memo/step-outputs"),
        [
            "memo/step-outputs".to_string(),
            format!("memo/step-outputs/old/{incarnation}")
        ]
    );
    assert_eq!(
        stored_under(recorder.inner.as_ref(), "memo/step-outputs").await,
        Vec::<String>::new()
    );
}
