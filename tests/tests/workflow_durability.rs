//! The durability promise of workflow runs under what production brings:
//! store faults inside steps, handled step failures, inputs redelivered in
//! another map order, a bad run among many at recovery, and a backend that
//! ignores conditional creates. Two processes are modelled as two runtimes
//! over separate store instances on one local folder.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memo_runtime::object_store::local::LocalFileSystem;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::testing::{
    FaultInjectingStore, FaultRule, IgnoresConditionalCreates, RequestKind,
};
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, RuntimeBuilder, Workflow};
use memo_runtime::{
    Error, Memo, MemoStore, RunId,
    clock::ManualClock,
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::run;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// One local folder that several "processes" open on their own.
struct Folder {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
}

impl Folder {
    fn new() -> Folder {
        Folder {
            dir: tempfile::tempdir().unwrap(),
            clock: Arc::new(ManualClock::new(1_000)),
        }
    }

    /// A fresh store instance over the folder, as a new process opens it.
    fn objects(&self) -> Arc<dyn ObjectStore> {
        Arc::new(LocalFileSystem::new_with_prefix(self.dir.path()).unwrap())
    }

    fn records(&self) -> ObjectStoreRuntimeStore {
        ObjectStoreRuntimeStore::new(self.objects(), "runs")
    }

    /// A builder for a process whose memo entries go through `objects`.
    fn builder_over(&self, objects: Arc<dyn ObjectStore>) -> RuntimeBuilder {
        Runtime::builder()
            .memo_store(MemoStore::new(objects, "memo"))
            .runtime_store(Arc::new(self.records()))
            .clock(self.clock.clone())
            .marker_retry(RetryPolicy::attempts(1))
    }

    /// A new process on the folder.
    fn process(&self) -> Runtime {
        self.builder_over(self.objects()).build().unwrap()
    }
}

/// The workflows' own error type: memo errors are converted into it.
#[derive(Debug)]
struct AppError(String);

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError(format!("memo: {e}"))
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A side effect made retry-safe with the memo: it runs at most once per
/// (run, step, input).
async fn charge(memo: &Memo, cents: u64, charges: &AtomicUsize) -> memo_runtime::Result<String> {
    if let Some(hit) = memo.content_get(&("charge", cents)).await? {
        return Ok(String::from_utf8(hit.to_vec()).unwrap());
    }
    charges.fetch_add(1, Ordering::SeqCst);
    let committed = memo
        .content_put(&("charge", cents), format!("ch_{cents}"))
        .await?;
    Ok(String::from_utf8(committed.to_vec()).unwrap())
}

async fn status(runtime: &Runtime, run_id: &RunId) -> RunStatus {
    runtime.status(run_id).await.unwrap().unwrap().status
}

// Case 5: store faults interrupt the attempt; they never fail the run.

/// A checkout whose step converts every memo error into the workflow's own
/// error, as users' code does.
fn checkout(
    charges: Arc<AtomicUsize>,
) -> Workflow<impl Fn(Context, u64) -> futures::future::BoxFuture<'static, Result<String, AppError>>>
{
    Workflow::new("checkout", move |ctx: Context, cents: u64| {
        let charges = charges.clone();
        Box::pin(async move {
            ctx.step("charge", |memo| {
                let charges = charges.clone();
                async move {
                    charge(&memo, cents, &charges)
                        .await
                        .map_err(|e| AppError(format!("payment failed: {e}")))
                }
            })
            .await
        }) as futures::future::BoxFuture<'static, Result<String, AppError>>
    })
}

#[tokio::test(start_paused = true)]
async fn a_store_fault_converted_into_the_workflows_error_leaves_the_run_open() {
    let folder = Folder::new();
    let charges = Arc::new(AtomicUsize::new(0));
    let workflow = checkout(charges.clone());
    let faulty = Arc::new(FaultInjectingStore::new(folder.objects()));
    faulty.inject(FaultRule::fail_before(RequestKind::Get).at_prefix("memo/memos"));
    let first = folder.builder_over(faulty.clone()).build().unwrap();
    let run_id = run("order-1");

    let stopped = first.run(&run_id, &250, &workflow).await;
    assert!(stopped.is_err(), "{stopped:?}");
    assert_eq!(status(&first, &run_id).await, RunStatus::Running);
    assert_eq!(charges.load(Ordering::SeqCst), 0);

    // Once the store recovers, another process finishes the run.
    let second = folder.process();
    let out = second.run(&run_id, &250, &workflow).await.unwrap();
    assert_eq!(out, "ch_250");
    assert_eq!(status(&second, &run_id).await, RunStatus::Completed);
    assert_eq!(charges.load(Ordering::SeqCst), 1);
}

static QUOTES: AtomicUsize = AtomicUsize::new(0);

/// The first deployment's quote: a `String`.
#[memo_runtime::memoized(name = "quote")]
async fn quote_v1(memo: &Memo, cents: u64) -> Result<String, AppError> {
    QUOTES.fetch_add(1, Ordering::SeqCst);
    Ok(format!("q{cents}"))
}

/// A later deployment changed the type by mistake: the committed quote no
/// longer decodes.
#[memo_runtime::memoized(name = "quote")]
async fn quote_v2(memo: &Memo, cents: u64) -> Result<u64, AppError> {
    QUOTES.fetch_add(1, Ordering::SeqCst);
    Ok(cents)
}

#[tokio::test(start_paused = true)]
async fn a_memoized_value_that_no_longer_decodes_leaves_the_run_open_for_a_fix() {
    let folder = Folder::new();
    let run_id = run("quoted");
    type Boxed = futures::future::BoxFuture<'static, Result<String, AppError>>;
    // Deployment 1 quotes, then dies before the step commits.
    let crashing = Workflow::new("pricing", |ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("quote", |memo| async move {
                quote_v1(&memo, cents).await?;
                panic!("the worker dies before the step commits");
            })
            .await
        }) as Boxed
    });
    assert!(folder.process().run(&run_id, &7, &crashing).await.is_err());
    assert_eq!(QUOTES.load(Ordering::SeqCst), 1);

    // Deployment 2 cannot read the committed quote; the step turns the
    // decode error into its own, and the workflow returns it.
    let broken = Workflow::new("pricing", |ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("quote", |memo| async move {
                quote_v2(&memo, cents).await.map(|q| q.to_string())
            })
            .await
        }) as Boxed
    });
    let second = folder.process();
    assert!(second.run(&run_id, &7, &broken).await.is_err());
    assert_eq!(
        status(&second, &run_id).await,
        RunStatus::Running,
        "an undecodable memo value failed the run for good"
    );
    assert_eq!(
        QUOTES.load(Ordering::SeqCst),
        1,
        "the side effect ran again"
    );

    // The fix (deployment 3) reads the quote and finishes the run.
    let fixed = Workflow::new("pricing", |ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("quote", |memo| async move { quote_v1(&memo, cents).await })
                .await
        }) as Boxed
    });
    let third = folder.process();
    assert_eq!(third.run(&run_id, &7, &fixed).await.unwrap(), "q7");
    assert_eq!(QUOTES.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_value_over_the_size_limit_fails_the_run_instead_of_being_retried_for_ever() {
    let folder = Folder::new();
    let charges = Arc::new(AtomicUsize::new(0));
    let workflow = checkout(charges.clone());
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(folder.objects(), "memo").with_max_value_size(4))
        .runtime_store(Arc::new(folder.records()))
        .clock(folder.clock.clone())
        .build()
        .unwrap();
    let run_id = run("order-2");

    let failed = runtime.run(&run_id, &250, &workflow).await.unwrap_err();
    assert!(failed.0.contains("over the limit"), "{failed}");
    assert_eq!(status(&runtime, &run_id).await, RunStatus::Failed);
}

/// A value whose encoding always fails: a permanent error.
#[derive(Debug, serde::Deserialize)]
struct Unencodable;

impl Serialize for Unencodable {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("this value cannot be encoded"))
    }
}

#[tokio::test(start_paused = true)]
async fn a_step_output_that_cannot_be_encoded_fails_the_run_instead_of_leaving_it_open() {
    let folder = Folder::new();
    let workflow = Workflow::new("unencodable-step", |ctx: Context, _: ()| async move {
        ctx.step("make", |_memo| async { Ok::<_, AppError>(Unencodable) })
            .await?;
        Ok::<_, AppError>(())
    });
    let runtime = folder.process();
    let run_id = run("unencodable-1");
    let failed = runtime.run(&run_id, &(), &workflow).await.unwrap_err();
    assert!(failed.0.contains("cannot be encoded"), "{failed}");
    assert_eq!(status(&runtime, &run_id).await, RunStatus::Failed);
}

#[tokio::test(start_paused = true)]
async fn a_workflow_output_that_cannot_be_encoded_fails_the_run_instead_of_leaving_it_open() {
    let folder = Folder::new();
    let workflow = Workflow::new("unencodable-output", |_ctx: Context, _: ()| async move {
        Ok::<_, AppError>(Unencodable)
    });
    let runtime = folder.process();
    let run_id = run("unencodable-2");
    let failed = runtime.run(&run_id, &(), &workflow).await.unwrap_err();
    assert!(failed.0.contains("cannot be encoded"), "{failed}");
    assert_eq!(status(&runtime, &run_id).await, RunStatus::Failed);
}

// Case 6: every step call consumes its position.

#[tokio::test(start_paused = true)]
async fn a_handled_step_failure_and_its_fallback_replay_in_every_later_attempt() {
    let folder = Folder::new();
    let primaries = Arc::new(AtomicUsize::new(0));
    let fallbacks = Arc::new(AtomicUsize::new(0));
    let workflow = {
        let (primaries, fallbacks) = (primaries.clone(), fallbacks.clone());
        Workflow::new("notify", move |ctx: Context, _: ()| {
            let (primaries, fallbacks) = (primaries.clone(), fallbacks.clone());
            async move {
                let primary = ctx
                    .step("primary", |_memo| {
                        primaries.fetch_add(1, Ordering::SeqCst);
                        async { Err::<String, _>(AppError("primary is down".into())) }
                    })
                    .await;
                let via = match primary {
                    Ok(via) => via,
                    Err(_) => {
                        ctx.step("fallback", |_memo| {
                            fallbacks.fetch_add(1, Ordering::SeqCst);
                            async { Ok::<_, AppError>("fallback".to_string()) }
                        })
                        .await?
                    }
                };
                let approved: bool = ctx.wait_for_signal("approval").await?;
                Ok::<_, AppError>(format!("{via} {approved}"))
            }
        })
    };
    let run_id = run("notice-1");
    let first = folder.process();
    first.run(&run_id, &(), &workflow).await.unwrap_err();
    assert_eq!(status(&first, &run_id).await, RunStatus::Running);

    let second = folder.process();
    second.signal(&run_id, "approval", &true).await.unwrap();
    let out = second.run(&run_id, &(), &workflow).await.unwrap();
    assert_eq!(out, "fallback true");
    assert_eq!(primaries.load(Ordering::SeqCst), 1);
    assert_eq!(fallbacks.load(Ordering::SeqCst), 1);
}

// Case 7: inputs and signals compare canonically.

/// A map that serializes its entries in the order given, as a `HashMap` does
/// in whatever order its hasher picks.
#[derive(Debug, Clone, PartialEq)]
struct Entries(Vec<(String, u64)>);

impl Entries {
    fn of(pairs: &[(&str, u64)]) -> Entries {
        Entries(pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }
}

impl Serialize for Entries {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

fn basket_workflow()
-> Workflow<impl Fn(Context, Entries) -> futures::future::BoxFuture<'static, Result<u64, AppError>>>
{
    Workflow::new("basket", |ctx: Context, basket: Entries| {
        Box::pin(async move {
            let approved: bool = ctx.wait_for_signal("approval").await?;
            Ok(if approved {
                basket.0.iter().map(|(_, n)| n).sum()
            } else {
                0
            })
        }) as futures::future::BoxFuture<'static, Result<u64, AppError>>
    })
}

#[tokio::test(start_paused = true)]
async fn a_map_input_redelivered_in_another_order_resumes_the_run() {
    let folder = Folder::new();
    let workflow = basket_workflow();
    let run_id = run("basket-1");
    let first = folder.process();
    let suspended = first
        .run(
            &run_id,
            &Entries::of(&[("apples", 2), ("pears", 3)]),
            &workflow,
        )
        .await
        .unwrap_err();
    assert!(suspended.0.contains("waiting for signal"), "{suspended}");

    let second = folder.process();
    second.signal(&run_id, "approval", &true).await.unwrap();
    let out = second
        .run(
            &run_id,
            &Entries::of(&[("pears", 3), ("apples", 2)]),
            &workflow,
        )
        .await
        .unwrap();
    assert_eq!(out, 5);
}

#[tokio::test(start_paused = true)]
async fn one_signal_sent_again_with_its_map_in_another_order_is_recorded_once() {
    let folder = Folder::new();
    let run_id = run("basket-2");
    let first = folder.process();
    first
        .run(&run_id, &Entries::of(&[("apples", 2)]), &basket_workflow())
        .await
        .unwrap_err();

    let payload = Entries::of(&[("by", 1), ("at", 2)]);
    first.signal(&run_id, "audit", &payload).await.unwrap();
    let redelivered = Entries::of(&[("at", 2), ("by", 1)]);
    folder
        .process()
        .signal(&run_id, "audit", &redelivered)
        .await
        .unwrap();
    let inputs = folder.records().load_inputs(&run_id).await.unwrap();
    assert_eq!(inputs.len(), 1, "{inputs:?}");
}

// Case 8: recovery in isolation.

fn review_workflow() -> Workflow<
    impl Fn(Context, String) -> futures::future::BoxFuture<'static, Result<String, AppError>>,
> {
    Workflow::new("review", |ctx: Context, input: String| {
        Box::pin(async move {
            let go: bool = ctx.wait_for_signal("go").await?;
            assert!(!(go && input == "buggy"), "a bug in the review of {input}");
            Ok(input)
        }) as futures::future::BoxFuture<'static, Result<String, AppError>>
    })
}

#[tokio::test(start_paused = true)]
async fn recovery_resumes_the_other_runs_when_one_panics_and_one_is_corrupt() {
    let folder = Folder::new();
    let workflow = review_workflow();
    let first = folder.process();
    for id in ["buggy", "corrupt", "fine"] {
        first
            .run(&run(id), &id.to_string(), &workflow)
            .await
            .unwrap_err();
        first.signal(&run(id), "go", &true).await.unwrap();
    }
    let records = folder.records();
    let creation = records.run_folder(&run("corrupt")).join("run");
    folder
        .objects()
        .put(&creation, PutPayload::from_static(b"not a run record"))
        .await
        .unwrap();

    let second = folder.process();
    let recovery = second.recover(&workflow).await.unwrap();
    let outcomes: Vec<_> = recovery
        .resumed
        .iter()
        .map(|(id, outcome)| (id.as_str(), outcome.as_ref().map_err(|e| e.0.clone())))
        .collect();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(outcomes[1], ("fine", Ok(&"fine".to_string())));
    let (id, panicked) = &outcomes[0];
    assert_eq!(*id, "buggy");
    assert!(
        panicked.as_ref().unwrap_err().contains("panicked"),
        "{panicked:?}"
    );
    assert_eq!(status(&second, &run("buggy")).await, RunStatus::Running);
    let skipped: Vec<_> = recovery.skipped.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(skipped, ["corrupt"]);
}

#[tokio::test(start_paused = true)]
async fn recovery_drives_at_most_the_configured_number_of_runs_at_once() {
    let folder = Folder::new();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let workflow = {
        let (in_flight, most) = (in_flight.clone(), most.clone());
        Workflow::new("slow", move |ctx: Context, _: u32| {
            let (in_flight, most) = (in_flight.clone(), most.clone());
            async move {
                let _go: bool = ctx.wait_for_signal("go").await?;
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, AppError>(())
            }
        })
    };
    let first = folder.process();
    for n in 0..5 {
        let id = run(&format!("slow-{n}"));
        first.run(&id, &n, &workflow).await.unwrap_err();
        first.signal(&id, "go", &true).await.unwrap();
    }
    let second = folder
        .builder_over(folder.objects())
        .recovery_concurrency(2)
        .build()
        .unwrap();
    let recovery = second.recover(&workflow).await.unwrap();
    assert_eq!(recovery.resumed.len(), 5);
    assert!(recovery.resumed.iter().all(|(_, outcome)| outcome.is_ok()));
    assert_eq!(most.load(Ordering::SeqCst), 2);
}

// Case 10: conditional creates are checked before the first write.

#[tokio::test(start_paused = true)]
async fn a_backend_that_ignores_conditional_creates_is_refused_before_the_first_write() {
    let folder = Folder::new();
    let charges = Arc::new(AtomicUsize::new(0));
    let workflow = checkout(charges.clone());
    let careless: Arc<dyn ObjectStore> = Arc::new(IgnoresConditionalCreates::new(
        LocalFileSystem::new_with_prefix(folder.dir.path()).unwrap(),
    ));
    let runtime = folder.builder_over(careless.clone()).build().unwrap();
    let run_id = run("order-3");

    let refused = runtime.run(&run_id, &250, &workflow).await.unwrap_err();
    assert!(refused.0.contains("conditional puts"), "{refused}");
    assert_eq!(runtime.status(&run_id).await.unwrap(), None);
    assert_eq!(charges.load(Ordering::SeqCst), 0);

    // The documented opt-out, for a store known to be safe.
    let unchecked = folder
        .builder_over(careless)
        .check_conditional_create(false)
        .build()
        .unwrap();
    assert_eq!(
        unchecked.run(&run_id, &250, &workflow).await.unwrap(),
        "ch_250"
    );
}
