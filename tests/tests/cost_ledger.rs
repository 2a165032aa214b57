//! The cost ledger (issue 25, item 4): each attempt of a run records what it
//! cost, and the record matches what a counting store saw of the attempt;
//! a retried attempt adds its own record; a declared cost is paid when a
//! memoized body runs and saved when a committed value answers; a swept
//! run leaves no ledger behind. The attempt that ends the run hands its
//! entry to the commit that ends it (no object of its own); one that stops
//! before the end writes a record in the incarnation's `cost/` folder.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::TryStreamExt;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{
    ObjectStore, PutOptions, PutPayload, PutResult, Result as OsResult,
};
use memo_runtime::runtime_store::{AttemptCost, ObjectStoreRuntimeStore, RuntimeStore, Usage};
use memo_runtime::testing::{CountingStore, RequestCounts, forward_object_store};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, Memo, MemoStore, RunId, memoized};
use memo_tests::fixtures::{Backend, run};

/// What one completion is declared to cost, in dollars.
const COMPLETION: f64 = 0.0125;

/// A model's reply, memoized, declared to cost [`COMPLETION`].
#[memoized(cost = COMPLETION)]
async fn complete(memo: &Memo, prompt: &str) -> Result<String, Error> {
    Ok(format!("reply to {prompt}"))
}

/// A label for a reply, memoized, no cost declared.
#[memoized]
async fn classify(memo: &Memo, text: &str) -> Result<u64, Error> {
    Ok(text.len() as u64 % 7)
}

/// A counting store that also keeps its counts as they stood where each
/// ledger entry's count ends: just before an attempt's cost record is
/// written, and just before the first request of the commit that ends the
/// run (its status hint's create).
#[derive(Debug)]
struct Watched {
    inner: Arc<CountingStore<InMemory>>,
    entry_ends: Mutex<Vec<RequestCounts>>,
}

impl std::fmt::Display for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Watched({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Watched {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> OsResult<PutResult> {
        let ends_an_entry = location.as_ref().contains("/cost/")
            || location.as_ref().contains("/runs-by-status/Completed/");
        if ends_an_entry {
            self.entry_ends.lock().unwrap().push(self.inner.counts());
        }
        self.inner.put_opts(location, payload, opts).await
    }

    forward_object_store!(self.inner => put_multipart_opts, get_opts, get_ranges,
        delete_stream, list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

/// A runtime whose memo store and runtime store share one watched,
/// counting object store (the probe off: it is not a run's request).
fn watched_runtime() -> (Arc<Watched>, Runtime) {
    let watched = Arc::new(Watched {
        inner: Arc::new(CountingStore::new(InMemory::new())),
        entry_ends: Mutex::default(),
    });
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(watched.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            watched.clone(),
            "runs",
        )))
        .check_conditional_create(false)
        .build()
        .unwrap();
    (watched, runtime)
}

/// The requests between two counts, by the ledger's kinds.
fn usage_between(from: RequestCounts, to: RequestCounts) -> (u64, u64, u64, u64, u64) {
    let gets = |c: RequestCounts| c.gets + c.get_ranges + c.heads;
    let puts = |c: RequestCounts| c.puts + c.creates + c.multipart_uploads + c.copies + c.renames;
    let lists = |c: RequestCounts| c.lists + c.lists_with_offset + c.lists_with_delimiter;
    (
        gets(to) - gets(from),
        puts(to) - puts(from),
        lists(to) - lists(from),
        to.delete_paths - from.delete_paths,
        to.bytes_put - from.bytes_put,
    )
}

fn requests_of(usage: &Usage) -> (u64, u64, u64, u64, u64) {
    (
        usage.gets,
        usage.puts,
        usage.lists,
        usage.deletes,
        usage.bytes_written,
    )
}

type StepsRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// Three durable steps of two memoized calls each; the first call of step
/// 1 panics once if `panic_once` is still set (after its memoized call
/// committed).
fn three_steps(
    panic_once: Arc<AtomicBool>,
) -> Workflow<impl Fn(Context, String) -> StepsRun + Clone + Send + Sync> {
    Workflow::new(
        "three-steps",
        move |ctx: Context, ticket: String| -> StepsRun {
            let panic_once = panic_once.clone();
            Box::pin(async move {
                let mut total = 0;
                for n in 0..3u64 {
                    let prompt = format!("{ticket} {n}");
                    let panic_once = panic_once.clone();
                    total += ctx
                        .step_with(format!("step-{n}"), &prompt, move |memo, prompt| {
                            let panic_once = panic_once.clone();
                            async move {
                                let reply = complete(&memo, prompt).await?;
                                if n == 1 && panic_once.swap(false, Ordering::SeqCst) {
                                    panic!("the worker died after the completion");
                                }
                                classify(&memo, &reply).await
                            }
                        })
                        .await?;
                }
                Ok(total)
            })
        },
    )
}

async fn ledger(runtime: &Runtime, run_id: &RunId) -> Vec<AttemptCost> {
    let store = runtime.runtime_store();
    let record = store.load_run(run_id).await.unwrap().unwrap();
    store
        .load_attempt_costs(run_id, record.incarnation)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_ledger_of_a_three_step_run_counts_the_requests_a_counting_store_saw() {
    let (watched, runtime) = watched_runtime();
    let run_id = run("three-steps");
    let workflow = three_steps(Arc::new(AtomicBool::new(false)));
    runtime
        .run(&run_id, &"ticket".to_string(), &workflow)
        .await
        .unwrap();
    let costs = ledger(&runtime, &run_id).await;
    assert_eq!(costs.len(), 1, "{costs:?}");
    let only = &costs[0];
    assert_eq!(only.attempt, 1);
    // Everything from the run's creation to the commit that ends it, which
    // carries the entry.
    let ends = watched.entry_ends.lock().unwrap().clone();
    assert_eq!(ends.len(), 1, "the run's end, and no record of its own");
    assert_eq!(
        requests_of(&only.usage),
        usage_between(RequestCounts::default(), ends[0]),
        "{only:?}"
    );
    assert!(only.usage.puts >= 3, "a create per step at least: {only:?}");
    let usage = &only.usage;
    assert_eq!((usage.calls_run, usage.calls_reused), (6, 0));
    assert_eq!(usage.entries_written, 6);
    assert!(usage.entry_bytes > 0);
    assert_eq!(usage.paid_nanodollars, 3 * 12_500_000, "three completions");
    assert_eq!(usage.saved_nanodollars, 0);
}

#[tokio::test]
async fn a_retried_attempt_adds_its_own_record_and_never_counts_the_first_twice() {
    let (watched, runtime) = watched_runtime();
    let run_id = run("retried");
    let workflow = three_steps(Arc::new(AtomicBool::new(true)));
    let input = "ticket".to_string();
    let first = runtime.run(&run_id, &input, &workflow).await;
    assert!(matches!(first, Err(Error::Aborted { .. })), "{first:?}");
    let between = watched.inner.counts();
    runtime.run(&run_id, &input, &workflow).await.unwrap();

    let costs = ledger(&runtime, &run_id).await;
    let attempts: Vec<u32> = costs.iter().map(|c| c.attempt).collect();
    assert_eq!(attempts, [1, 2]);
    // The first attempt's record, then the second's end.
    let ends = watched.entry_ends.lock().unwrap().clone();
    assert_eq!(ends.len(), 2);
    assert_eq!(
        requests_of(&costs[0].usage),
        usage_between(RequestCounts::default(), ends[0])
    );
    // The second entry counts the second call alone, from its own start.
    assert_eq!(
        requests_of(&costs[1].usage),
        usage_between(between, ends[1])
    );
    // The first attempt paid for step 0's and step 1's completions and
    // step 0's label; the second found those committed: step 0 replays from
    // its receipt, step 1's completion is a hit (saved), its label and step
    // 2's calls run.
    let (one, two) = (&costs[0].usage, &costs[1].usage);
    assert_eq!((one.calls_run, one.calls_reused), (3, 0));
    assert_eq!(one.paid_nanodollars, 2 * 12_500_000);
    assert_eq!((two.calls_run, two.calls_reused), (3, 1));
    assert_eq!(two.paid_nanodollars, 12_500_000);
    assert_eq!(two.saved_nanodollars, 12_500_000);
    let total = Usage::total(&costs);
    assert_eq!(total.calls_run, 6);
    assert_eq!(total.entries_written, 6, "each entry written once");
}

#[tokio::test]
async fn a_swept_run_leaves_no_ledger_behind() {
    for backend in Backend::all() {
        let name = backend.name();
        let runtime = Runtime::builder()
            .memo_store(backend.memo_store("memo"))
            .runtime_store(Arc::new(backend.runtime_store("runs")))
            .retention(Duration::ZERO)
            .build()
            .unwrap();
        let run_id = run("swept");
        let workflow = three_steps(Arc::new(AtomicBool::new(true)));
        let input = "ticket".to_string();
        runtime.run(&run_id, &input, &workflow).await.unwrap_err();
        runtime.run(&run_id, &input, &workflow).await.unwrap();
        let record = runtime
            .runtime_store()
            .load_run(&run_id)
            .await
            .unwrap()
            .unwrap();
        let costs_folder = Path::from(format!(
            "runs/runs/{}/{}/cost",
            run_id.as_str(),
            record.incarnation
        ));
        let objects = backend.objects();
        let stored = |objects: Arc<dyn ObjectStore>| {
            let folder = costs_folder.clone();
            async move {
                objects
                    .list(Some(&folder))
                    .try_collect::<Vec<_>>()
                    .await
                    .unwrap()
                    .len()
            }
        };
        // The first attempt's record; the second's is in the run's end.
        assert_eq!(stored(objects.clone()).await, 1, "{name}: one record");
        let before = runtime
            .runtime_store()
            .load_attempt_costs(&run_id, record.incarnation)
            .await
            .unwrap();
        let attempts: Vec<u32> = before.iter().map(|c| c.attempt).collect();
        assert_eq!(attempts, [1, 2], "{name}");
        // A minute past the run's end: its marker has expired.
        let later = runtime.clock().now_ms() + 60_000;
        let report = runtime.retention_sweeper().sweep_once(later).await.unwrap();
        assert_eq!(report.runs_cleared, 1, "{name}: {report:?}");
        assert_eq!(stored(objects.clone()).await, 0, "{name}");
        let left = runtime
            .runtime_store()
            .load_attempt_costs(&run_id, record.incarnation)
            .await
            .unwrap();
        assert!(left.is_empty(), "{name}: {left:?}");
    }
}

#[tokio::test]
async fn a_runtime_with_the_ledger_off_records_nothing() {
    let store = Arc::new(InMemory::new());
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(store.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(store, "runs")))
        .cost_ledger(false)
        .build()
        .unwrap();
    let run_id = run("unmetered");
    let workflow = three_steps(Arc::new(AtomicBool::new(false)));
    runtime
        .run(&run_id, &"ticket".to_string(), &workflow)
        .await
        .unwrap();
    assert!(ledger(&runtime, &run_id).await.is_empty());
}
