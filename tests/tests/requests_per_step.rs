//! What a durable step and a short run cost in requests, counted on
//! `InMemory` (issue 25, items 1 and 5): today's figures pinned as upper
//! bounds, by request kind, so that a change that adds a request fails here
//! and a change that removes one lowers the bound (BENCHMARKS.md, "A fleet
//! of workers on one store", states the model these figures come from).
//!
//! The runtime is what a process builds: a memo store and an object-store
//! runtime store over one object store, the conditional-create probe off
//! (it is a create and a delete once per process, not per step).

use std::sync::Arc;

use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{GetOptions, GetResult, ObjectStore, Result as ObjectResult};
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::testing::{CountingStore, RequestCounts, forward_object_store};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, Memo, MemoStore, memoized};
use memo_tests::fixtures::run;

/// Requests by kind, as the bounds below name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Requests {
    creates: u64,
    overwrites: u64,
    gets: u64,
    heads: u64,
    lists: u64,
    deletes: u64,
}

impl Requests {
    fn of(c: RequestCounts) -> Requests {
        Requests {
            creates: c.creates,
            overwrites: c.puts + c.multipart_uploads + c.copies + c.renames,
            gets: c.gets + c.get_ranges,
            heads: c.heads,
            lists: c.lists + c.lists_with_offset + c.lists_with_delimiter,
            deletes: c.delete_paths,
        }
    }

    fn total(self) -> u64 {
        self.creates + self.overwrites + self.gets + self.heads + self.lists + self.deletes
    }

    fn minus(self, o: Requests) -> Requests {
        Requests {
            creates: self.creates - o.creates,
            overwrites: self.overwrites - o.overwrites,
            gets: self.gets - o.gets,
            heads: self.heads - o.heads,
            lists: self.lists - o.lists,
            deletes: self.deletes - o.deletes,
        }
    }

    /// Fails unless every kind is at most `bound`'s.
    fn assert_at_most(self, bound: Requests, what: &str) {
        let within = self.creates <= bound.creates
            && self.overwrites <= bound.overwrites
            && self.gets <= bound.gets
            && self.heads <= bound.heads
            && self.lists <= bound.lists
            && self.deletes <= bound.deletes;
        assert!(
            within,
            "{what}: {self:?} ({} requests) is over the bound {bound:?} ({} requests)",
            self.total(),
            bound.total()
        );
    }
}

fn counted() -> (Arc<CountingStore<InMemory>>, Runtime) {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let runtime = process(&counting);
    (counting, runtime)
}

/// A process's runtime over `counting`'s objects.
fn process(counting: &Arc<CountingStore<InMemory>>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(counting.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            counting.clone(),
            "runs",
        )))
        .check_conditional_create(false)
        .build()
        .unwrap()
}

/// A workflow of `steps` durable steps, each returning a short string.
fn steps_workflow() -> Workflow<impl Fn(Context, u64) -> StepsRun + Clone + Send + Sync> {
    Workflow::new("steps", |ctx: Context, steps: u64| -> StepsRun {
        Box::pin(async move {
            for n in 0..steps {
                ctx.step(format!("step-{n}"), move |_memo| async move {
                    Ok::<_, Error>(format!("output of step {n}"))
                })
                .await?;
            }
            Ok(steps)
        })
    })
}

type StepsRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// The requests of one new run of `steps_workflow` with `steps` steps.
async fn run_of(steps: u64) -> Requests {
    let (counting, runtime) = counted();
    let out = runtime
        .run(&run(&format!("steps-{steps}")), &steps, &steps_workflow())
        .await
        .unwrap();
    assert_eq!(out, steps);
    Requests::of(counting.counts())
}

#[tokio::test]
async fn a_durable_step_while_a_run_runs_costs_at_most_todays_requests() {
    // The difference between runs of 1,010 and 10 steps: 1,000 steps of a
    // running run, without the run's creation and end.
    let per_1000 = run_of(1_010).await.minus(run_of(10).await);
    // Today (1.36 a step, 2.55 before): 1,272 creates (a log entry per
    // step, a checkpoint delta every 4 entries once the run has a base, 5
    // before, its base every 2·√entries), 63 GETs (the run pointer, read by
    // every 16th step commit in a row: the others are acknowledged on their
    // attempt's live lease; 1,000 before, one per commit) and 22 deletes (bases a newer one replaced; deltas are
    // kept until the run's deletion: 272 before, each replaced delta).
    let today = Requests {
        creates: 1_272,
        overwrites: 0,
        gets: 63,
        heads: 0,
        lists: 0,
        deletes: 22,
    };
    per_1000.assert_at_most(today, "1,000 durable steps");
    assert!(
        per_1000.total() <= 1_500,
        "at most 1.5 requests a durable step (issue 25, item 5): {per_1000:?}"
    );
    assert!(
        per_1000.creates >= 1_000,
        "a step commit is at least one conditional create: {per_1000:?}"
    );
}

#[tokio::test]
async fn a_three_step_run_costs_at_most_todays_requests() {
    let requests = run_of(3).await;
    // Today: 13 creates, 2 GETs (the 3 step commits read none; the attempt
    // reads none before its workflow runs: its start answers with the
    // receipts and inputs it folded, `atomic_apply_and_load`), 1 HEAD, 2
    // LISTs (the id's folder before the creation's create and after its
    // record: the check after the record lists, where it read the pointer,
    // to see another run's record too, session 43) and 3 deletes: 21.
    // Before: 23 (a checkpoint delta after the
    // fourth entry, one entry before the terminal one: a delta that names
    // no base waits 5 entries now; and the creation read the pointer before
    // it listed the id's folder, which one listing answers for a new id),
    // 25 (the attempt's cost ledger entry a record of its own, a create and
    // the pointer read that takes it back if the run was deleted
    // meanwhile; it is in the commit that ends the run now), 27 (the attempt read the run again after its start, the
    // pointer and the log's next position), 29 (the receipts and the inputs
    // read apart), 33 (a pointer read per step commit, and the superseded
    // delta deleted). The minimum is about one create per step plus the
    // run's creation and its end.
    let today = Requests {
        creates: 13,
        overwrites: 0,
        gets: 2,
        heads: 1,
        lists: 2,
        deletes: 3,
    };
    requests.assert_at_most(today, "a 3-step run");
}

#[tokio::test]
async fn a_new_ids_creation_lists_its_folder_before_and_after_and_an_id_in_use_reads_its_pointer_once()
 {
    let (counting, runtime) = counted();
    let run_id = run("steps-3");
    runtime.run(&run_id, &3, &steps_workflow()).await.unwrap();
    let first = Requests::of(counting.counts());
    // The new id: one listing of its folder, which holds neither a pointer
    // nor an incarnation's folder (where a record to restore a pointer from
    // would be), and no read of the pointer before its create; and one
    // listing after its record, which shows the pointer with the tag of its
    // create (unread) and no other incarnation's folder.
    assert_eq!(first.lists, 2, "{first:?}");
    assert_eq!(first.gets, 2, "{first:?}");
    assert_eq!(first.heads, 1, "{first:?}");

    // Delivered again to a process that never saw it: the listing finds
    // the run, whose pointer is read once, and nothing is created. Then
    // the run from the pointer read: its terminal delta (the delta folder
    // listed, the newest read), no second read of the pointer (3 GETs
    // before session 45: the run's read began with its own).
    let fresh = process(&counting);
    counting.reset();
    assert_eq!(fresh.run(&run_id, &3, &steps_workflow()).await.unwrap(), 3);
    let again = Requests::of(counting.counts());
    assert_eq!((again.creates, again.overwrites), (0, 0), "{again:?}");
    assert_eq!(
        (again.lists, again.gets, again.heads),
        (2, 2, 0),
        "{again:?}"
    );
}

/// A deleted run's id used again (a redelivery after the sweep, before
/// the deletion's recheck): the listing shows the vacated pointer and no
/// incarnation's folder, one read of it gives the version the new
/// pointer's update replaces; no create that finds the path taken, no
/// second listing for a record to restore, no read after. 7 requests, one
/// more than a new id's creation (the read).
#[tokio::test]
async fn a_deleted_ids_next_creation_reads_its_vacated_pointer_once_and_updates_it() {
    use memo_runtime::runtime_store::{Commit, NewRun, RuntimeStore, StatusChange};

    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let runs = ObjectStoreRuntimeStore::new(counting.clone(), "runs");
    let run_id = run("used-again");
    let order = || NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: memo_runtime::Bytes::new(),
        created_at_ms: 0,
        workflow_version: None,
    };
    runs.create_run(order()).await.unwrap();
    let failed = Commit::status(StatusChange::Failed { error: "e".into() }, 1);
    let old = runs
        .atomic_apply(&run_id, failed)
        .await
        .unwrap()
        .incarnation;
    assert!(runs.delete_run(&run_id, old).await.unwrap());

    counting.reset();
    let again = runs.create_run(order()).await.unwrap();
    assert_ne!(again.incarnation, old);
    let c = Requests::of(counting.counts());
    assert_eq!(
        (c.lists, c.gets, c.overwrites, c.creates, c.heads, c.deletes),
        (2, 1, 1, 2, 1, 0),
        "listings before and after, the vacated pointer's read and update, \
         the hint's and the record's creates, the hint's HEAD: {c:?}"
    );
}

/// A model's reply, memoized./// A model's reply, memoized.
#[memoized]
async fn complete(memo: &Memo, prompt: &str) -> Result<String, Error> {
    Ok(format!("reply to {prompt}"))
}

/// A label for a reply, memoized.
#[memoized]
async fn classify(memo: &Memo, text: &str) -> Result<String, Error> {
    Ok(format!("{}", text.len() % 7))
}

type CallsRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// A workflow of `steps` durable steps of two memoized calls each, as the
/// fleet benchmark's.
fn calls_workflow() -> Workflow<impl Fn(Context, u64) -> CallsRun + Clone + Send + Sync> {
    Workflow::new("calls", |ctx: Context, steps: u64| -> CallsRun {
        Box::pin(async move {
            let mut last = String::from("ticket");
            for n in 0..steps {
                last = ctx
                    .step_with(format!("step-{n}"), &last, |memo, last| async move {
                        let reply = complete(&memo, last).await?;
                        let label = classify(&memo, &reply).await?;
                        Ok::<_, Error>(format!("{label}:{n}"))
                    })
                    .await?;
            }
            Ok(last)
        })
    })
}

#[tokio::test]
async fn two_memoized_calls_add_at_most_a_read_and_a_create_each_to_a_step() {
    let (counting, runtime) = counted();
    runtime
        .run(&run("calls-110"), &110u64, &calls_workflow())
        .await
        .unwrap();
    let long = Requests::of(counting.counts());
    let (counting, runtime) = counted();
    runtime
        .run(&run("calls-10"), &10u64, &calls_workflow())
        .await
        .unwrap();
    let short = Requests::of(counting.counts());
    let per_100 = long.minus(short);
    let steps_alone = run_of(110).await.minus(run_of(10).await);
    let calls = per_100.minus(steps_alone);
    // Two calls that miss: each reads its entry once and creates it once.
    // No flight of the store ends between a call's read and its entry into
    // its own flight (the calls run one after the other), so none reads
    // again under its flight; 400 GETs while every miss read twice.
    let today = Requests {
        creates: 200,
        overwrites: 0,
        gets: 200,
        heads: 0,
        lists: 0,
        deletes: 0,
    };
    calls.assert_at_most(today, "100 steps' memoized calls");
    assert_eq!(
        calls.creates, 200,
        "a create per memoized result: {calls:?}"
    );
}

/// An object store whose first read returns its answer only when `gate`
/// opens: the read is made, then held.
#[derive(Debug)]
struct HeldFirstRead {
    inner: InMemory,
    held: std::sync::atomic::AtomicBool,
    gate: Arc<tokio::sync::Notify>,
}

impl std::fmt::Display for HeldFirstRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeldFirstRead({})", self.inner)
    }
}

#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for HeldFirstRead {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> ObjectResult<GetResult> {
        let answer = self.inner.get_opts(location, options).await;
        if !self.held.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.gate.notified().await;
        }
        answer
    }

    forward_object_store!(self.inner => put_opts, put_multipart_opts, get_ranges,
        delete_stream, list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

/// How often `counted_body`'s body ran.
static BODIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[memoized]
async fn counted_body(memo: &Memo, prompt: &str) -> Result<String, Error> {
    let n = BODIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    Ok(format!("{prompt}: body run {n}"))
}

#[tokio::test]
async fn a_call_whose_read_missed_before_another_call_committed_finds_that_commit() {
    // The first call's read misses and is held; meanwhile an identical call
    // reads, runs the body, commits and leaves the flight. The first call
    // then enters the flight uncontended: it must read again and return the
    // committed value, not run the body a second time: a flight of the
    // store ended since its read, so it reads again under its own.
    let gate = Arc::new(tokio::sync::Notify::new());
    let store = Arc::new(HeldFirstRead {
        inner: InMemory::new(),
        held: false.into(),
        gate: gate.clone(),
    });
    let memo = MemoStore::new(store, "memo").new_memo(&run("held-read"), 0);
    let overtaken = counted_body(&memo, "ticket");
    let overtaking = async {
        tokio::task::yield_now().await;
        let value = counted_body(&memo, "ticket").await;
        gate.notify_one();
        value
    };
    let (overtaken, overtaking) = tokio::join!(overtaken, overtaking);
    assert_eq!(overtaking.unwrap(), "ticket: body run 1");
    assert_eq!(
        overtaken.unwrap(),
        "ticket: body run 1",
        "the commit is found"
    );
    assert_eq!(BODIES.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// An `InMemory` whose reads of run pointers (`…/run` under `runs/runs/`)
/// each wait for the test's release, telling it when one arrives.
#[derive(Debug)]
struct HeldPointerReads {
    inner: InMemory,
    arrived: Arc<tokio::sync::Semaphore>,
    release: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Display for HeldPointerReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeldPointerReads({})", self.inner)
    }
}

#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for HeldPointerReads {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> ObjectResult<GetResult> {
        let path = location.as_ref();
        if path.starts_with("runs/runs/") && path.ends_with("/run") {
            self.arrived.add_permits(1);
            self.release.acquire().await.expect("open").forget();
        }
        self.inner.get_opts(location, options).await
    }

    forward_object_store!(self.inner => put_opts, put_multipart_opts, get_ranges,
        delete_stream, list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

/// The status hints under `status` in `store`.
async fn hints(store: &InMemory, status: &str) -> usize {
    use futures::TryStreamExt;
    let folder = Path::from(format!("runs/runs-by-status/{status}"));
    let listed: Vec<_> = store.list(Some(&folder)).try_collect().await.unwrap();
    listed.len()
}

#[tokio::test]
async fn a_status_change_drops_the_hint_the_run_left_while_its_pointer_is_read() {
    // The hint of the status a run leaves (`Pending` at its start,
    // `Running` at its end) is deleted while the change's pointer check is
    // in flight, not after it: one round trip fewer at each. Each check
    // here is held until the old hint is gone, which never happens if the
    // delete waits for the check.
    let (arrived, release) = (
        Arc::new(tokio::sync::Semaphore::new(0)),
        Arc::new(tokio::sync::Semaphore::new(0)),
    );
    let store = Arc::new(HeldPointerReads {
        inner: InMemory::new(),
        arrived: arrived.clone(),
        release: release.clone(),
    });
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(store.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            store.clone(),
            "runs",
        )))
        .check_conditional_create(false)
        .build()
        .unwrap();
    let running = tokio::spawn(async move {
        let id = run("held-checks");
        runtime.run(&id, &3, &steps_workflow()).await
    });
    for (left, entered) in [("Pending", "Running"), ("Running", "Completed")] {
        let held = tokio::time::timeout(std::time::Duration::from_secs(5), arrived.acquire());
        held.await.expect("a pointer check").unwrap().forget();
        assert_eq!(hints(&store.inner, entered).await, 1, "{entered}: hinted");
        let gone = async {
            while hints(&store.inner, left).await > 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), gone)
            .await
            .unwrap_or_else(|_| panic!("the {left} hint is still there while the check is held"));
        release.add_permits(1);
    }
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), running);
    assert_eq!(ended.await.expect("two checks in all").unwrap().unwrap(), 3);
    assert_eq!(hints(&store.inner, "Running").await, 0);
}

#[tokio::test]
async fn a_start_whose_pointer_check_fails_leaves_no_pending_hint_behind() {
    // The start's entry is in the log when its check of the run pointer
    // fails (here every read of the pointer the check makes): the run has
    // left `Pending` unless its incarnation is gone, so the `Pending` hint
    // goes all the same (it stayed, for a listing to tidy). The next
    // delivery, once the stopped attempt's lease expired, settles the
    // unconfirmed start and ends the run.
    use memo_runtime::clock::ManualClock;
    use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
    let store = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let clock = Arc::new(ManualClock::new(1_000_000));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(store.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            store.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .lease(std::time::Duration::from_secs(30))
        .check_conditional_create(false)
        .build()
        .unwrap();
    store.inject(
        FaultRule::fail_before(RequestKind::Get)
            .matching(|p| p.as_ref() == "runs/runs/unchecked/run"),
    );
    let id = run("unchecked");
    let failed = runtime.run(&id, &3, &steps_workflow()).await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(store.faults_injected() > 0);
    assert_eq!(
        (
            hints(store.inner(), "Pending").await,
            hints(store.inner(), "Running").await
        ),
        (0, 1)
    );
    store.clear_faults();
    clock.advance_ms(31_000);
    assert_eq!(runtime.run(&id, &3, &steps_workflow()).await.unwrap(), 3);
    let left: Vec<usize> = futures::future::join_all(
        ["Pending", "Running", "Completed"].map(|status| hints(store.inner(), status)),
    )
    .await;
    assert_eq!(left, [0, 0, 1]);
}

/// A signal learns whether the run's lease was held when it was recorded
/// from the run the append folded: `append_input_and_load` costs what
/// `append_input` costs, with no read of the run after it.
#[tokio::test]
async fn an_input_appended_with_its_run_costs_what_the_append_costs() {
    use memo_runtime::runtime_store::{NewInput, RuntimeStore};
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let store = ObjectStoreRuntimeStore::new(counting.clone(), "runs");
    let input = |name: &str| NewInput {
        input_id: name.into(),
        name: name.into(),
        payload: bytes::Bytes::from_static(b"p"),
        accepted_at_ms: 1_000,
    };
    let id = run("appended");
    store
        .create_run(memo_tests::fixtures::new_run(&id))
        .await
        .unwrap();
    let before = Requests::of(counting.counts());
    store.append_input(&id, input("first")).await.unwrap();
    let appended = Requests::of(counting.counts());
    let (_, record) = store
        .append_input_and_load(&id, input("second"))
        .await
        .unwrap();
    let loaded = Requests::of(counting.counts());
    assert_eq!(record.expect("the run").run_id, id);
    let (append, with_run) = (appended.minus(before), loaded.minus(appended));
    assert!(append.total() > 0);
    assert_eq!(with_run, append, "an append with its run, beside one alone");
}
