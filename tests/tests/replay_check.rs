//! The replay check (issue 24, items 3 and 5): stored runs made by the old
//! code are replayed against new code without running anything; each kind of
//! break is found at its position, compatible changes report nothing, and the
//! check writes nothing (the store it reads fails every write).
//!
//! The old code: `charge` (a `u64`), `ship` (a `Shipment`), a wait for the
//! signal "delivered", `close`. Two runs are left open (waiting for the
//! signal) and one completed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use memo_runtime::Incarnation;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{
    Commit, InMemoryRuntimeStore, InputRecord, NewInput, NewRun, RunRecord, RunStatus, RunSummary,
    RuntimeStore, StepReceipt,
};
use memo_runtime::workflow::{
    Context, ReplayCheck, ReplayOutcome, ReplayReport, Runtime, Workflow,
};
use memo_runtime::{Error, MemoStore, Result, RunId};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Shipment {
    carrier: String,
}

/// The new code's shipment: a field with a serde default is compatible.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ShipmentV2 {
    carrier: String,
    #[serde(default)]
    tracking: Option<String>,
}

type BoxedRun<O> = futures::future::BoxFuture<'static, Result<O, Error>>;
type Code<I, O> = Workflow<Box<dyn Fn(Context, I) -> BoxedRun<O> + Send + Sync>>;

fn code<I: Send + 'static, O: 'static>(
    run: impl Fn(Context, I) -> BoxedRun<O> + Send + Sync + 'static,
) -> Code<I, O> {
    Workflow::new("order", Box::new(run) as Box<_>)
}

thread_local! {
    /// Counts the step bodies run on this test's thread (each test has its
    /// own current-thread runtime): the check must run none.
    static BODIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

async fn body<T>(value: T) -> Result<T, Error> {
    BODIES.set(BODIES.get() + 1);
    Ok(value)
}

fn old_code() -> Code<u64, String> {
    code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            let charged = ctx.step("charge", |_m| body(cents)).await?;
            let shipment = ctx
                .step("ship", |_m| {
                    body(Shipment {
                        carrier: "post".into(),
                    })
                })
                .await?;
            ctx.wait_for_signal::<()>("delivered").await?;
            ctx.step("close", |_m| body(())).await?;
            Ok(format!("{charged} via {}", shipment.carrier))
        })
    })
}

/// The old code with the patch "audit" between `ship` and the wait.
fn patched_code() -> Code<u64, String> {
    code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            let charged = ctx.step("charge", |_m| body(cents)).await?;
            let shipment = ctx
                .step("ship", |_m| {
                    body(ShipmentV2 {
                        carrier: "post".into(),
                        tracking: None,
                    })
                })
                .await?;
            if ctx.patched("audit").await? {
                ctx.step("audit", |_m| body(())).await?;
            }
            ctx.wait_for_signal::<()>("delivered").await?;
            ctx.step("close", |_m| body(())).await?;
            Ok(format!("{charged} via {}", shipment.carrier))
        })
    })
}

/// A store with runs made by `code`: "open-1" and "open-2" wait for
/// "delivered", "done" completed.
async fn runs_of(made_by: &Code<u64, String>) -> Arc<dyn RuntimeStore> {
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
        .runtime_store(Arc::clone(&store))
        .signal_wait(Duration::ZERO)
        .build()
        .unwrap();
    for run in ["open-1", "open-2", "done"] {
        let run_id = RunId::new(run).unwrap();
        let first = runtime.run(&run_id, &250u64, made_by).await;
        assert!(matches!(first, Err(Error::Suspended { .. })), "{first:?}");
        if run == "done" {
            runtime.signal(&run_id, "delivered", &()).await.unwrap();
            runtime.run(&run_id, &250u64, made_by).await.unwrap();
        }
    }
    store
}

async fn check<I, O>(store: &Arc<dyn RuntimeStore>, new: &Code<I, O>) -> ReplayReport
where
    I: serde::de::DeserializeOwned + Send + 'static,
    O: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    let before = BODIES.get();
    let report = ReplayCheck::new(Arc::clone(store)).run(new).await.unwrap();
    assert_eq!(BODIES.get(), before, "the check ran a step body");
    report
}

fn outcome<'r>(report: &'r ReplayReport, run: &str) -> &'r ReplayOutcome {
    let found = report.runs().iter().find(|r| r.run_id.as_str() == run);
    &found
        .unwrap_or_else(|| panic!("{run} not checked: {report}"))
        .outcome
}

#[tokio::test]
async fn compatible_changes_report_nothing() {
    let store = runs_of(&old_code()).await;

    let same = check(&store, &old_code()).await;
    let patched = check(&store, &patched_code()).await;

    assert!(same.is_clean(), "{same}");
    assert_eq!(same.runs().len(), 3);
    assert!(patched.is_clean(), "{patched}");
    assert_eq!(patched.runs().len(), 3);
    assert_eq!(
        outcome(&patched, "open-1"),
        &ReplayOutcome::Replays { steps: 3 }
    );
    assert_eq!(
        outcome(&patched, "done"),
        &ReplayOutcome::Replays { steps: 5 }
    );
}

#[tokio::test]
async fn a_renamed_step_is_non_determinism_at_its_position() {
    let store = runs_of(&old_code()).await;
    let renamed = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            let charged = ctx.step("bill", |_m| body(cents)).await?;
            Ok(charged.to_string())
        })
    });

    let report = check(&store, &renamed).await;

    assert_eq!(report.problems().count(), 3, "{report}");
    assert_eq!(
        outcome(&report, "open-1"),
        &ReplayOutcome::NonDeterminism {
            sequence: 0,
            recorded: "charge".into(),
            called: "bill".into()
        }
    );
}

#[tokio::test]
async fn an_inserted_step_is_non_determinism_at_its_position() {
    let store = runs_of(&old_code()).await;
    let inserted = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("charge", |_m| body(cents)).await?;
            ctx.step("fraud-check", |_m| body(true)).await?;
            ctx.step("ship", |_m| {
                body(Shipment {
                    carrier: "post".into(),
                })
            })
            .await?;
            Ok(String::new())
        })
    });

    let report = check(&store, &inserted).await;

    assert_eq!(
        outcome(&report, "open-2"),
        &ReplayOutcome::NonDeterminism {
            sequence: 1,
            recorded: "ship".into(),
            called: "fraud-check".into()
        }
    );
}

#[tokio::test]
async fn a_removed_step_is_found_in_the_middle_and_at_the_end() {
    let store = runs_of(&old_code()).await;
    let without_ship = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("charge", |_m| body(cents)).await?;
            ctx.wait_for_signal::<()>("delivered").await?;
            ctx.step("close", |_m| body(())).await?;
            Ok(String::new())
        })
    });
    let without_close = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("charge", |_m| body(cents)).await?;
            ctx.step("ship", |_m| {
                body(Shipment {
                    carrier: "post".into(),
                })
            })
            .await?;
            ctx.wait_for_signal::<()>("delivered").await?;
            Ok(String::new())
        })
    });

    let middle = check(&store, &without_ship).await;
    let end = check(&store, &without_close).await;

    assert_eq!(
        outcome(&middle, "open-1"),
        &ReplayOutcome::NonDeterminism {
            sequence: 1,
            recorded: "ship".into(),
            called: "signal:delivered".into()
        }
    );
    assert_eq!(
        outcome(&end, "done"),
        &ReplayOutcome::UncalledStep {
            sequence: 4,
            recorded: "close".into()
        }
    );
    // The open runs never recorded `close`: they replay.
    assert!(outcome(&end, "open-1").replays(), "{end}");
}

#[tokio::test]
async fn a_changed_output_type_does_not_decode() {
    let store = runs_of(&old_code()).await;
    let changed = code(|ctx: Context, _cents: u64| {
        Box::pin(async move {
            let charged: String = ctx.step("charge", |_m| body("ch_1".to_string())).await?;
            Ok(charged)
        })
    });

    let report = check(&store, &changed).await;

    assert!(
        matches!(outcome(&report, "open-1"), ReplayOutcome::UndecodableOutput { what, .. } if what.contains("\"charge\"")),
        "{report}"
    );
}

#[tokio::test]
async fn a_changed_input_type_does_not_decode() {
    let store = runs_of(&old_code()).await;
    let changed = code(|ctx: Context, order: String| {
        Box::pin(async move { ctx.step("charge", move |_m| body(order.clone())).await })
    });

    let report = check(&store, &changed).await;

    assert_eq!(report.problems().count(), 3, "{report}");
    assert!(
        matches!(
            outcome(&report, "open-1"),
            ReplayOutcome::UndecodableInput { .. }
        ),
        "{report}"
    );
}

#[tokio::test]
async fn reordered_steps_are_non_determinism_at_the_first() {
    let store = runs_of(&old_code()).await;
    let reordered = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("ship", |_m| {
                body(Shipment {
                    carrier: "post".into(),
                })
            })
            .await?;
            ctx.step("charge", |_m| body(cents)).await?;
            Ok(String::new())
        })
    });

    let report = check(&store, &reordered).await;

    assert_eq!(
        outcome(&report, "done"),
        &ReplayOutcome::NonDeterminism {
            sequence: 0,
            recorded: "charge".into(),
            called: "ship".into()
        }
    );
}

#[tokio::test]
async fn a_patch_removed_too_early_is_reported_as_such() {
    // Runs made by the patched code took the patch.
    let store = runs_of(&patched_code()).await;

    let report = check(&store, &old_code()).await;

    assert_eq!(
        outcome(&report, "open-1"),
        &ReplayOutcome::PatchRemoved {
            sequence: 2,
            patch: "audit".into(),
            called: "signal:delivered".into()
        }
    );
    assert!(
        report
            .to_string()
            .contains("patch \"audit\" removed too early")
    );
}

#[tokio::test]
async fn the_report_lists_the_open_runs_on_each_branch_of_a_patch() {
    let store = runs_of(&old_code()).await;

    let report = check(&store, &patched_code()).await;

    let mut old_branch: Vec<_> = report
        .open_runs_on_old_branch("audit")
        .into_iter()
        .map(|r| r.as_str())
        .collect();
    old_branch.sort_unstable();
    assert_eq!(old_branch, ["open-1", "open-2"]);
    assert!(report.open_runs_with_marker("audit").is_empty());

    // Runs made by the patched code all took it: the old branch can go.
    let patched_runs = runs_of(&patched_code()).await;
    let report = check(&patched_runs, &patched_code()).await;
    assert!(report.open_runs_on_old_branch("audit").is_empty());
    assert_eq!(report.open_runs_with_marker("audit").len(), 2);
}

#[tokio::test]
async fn a_signal_the_new_code_no_longer_reads_is_reported() {
    let store = runs_of(&old_code()).await;
    let no_wait = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("charge", |_m| body(cents)).await?;
            ctx.step("ship", |_m| {
                body(Shipment {
                    carrier: "post".into(),
                })
            })
            .await?;
            ctx.step("close", |_m| body(())).await?;
            Ok(String::new())
        })
    });

    let report = check(&store, &no_wait).await;

    assert_eq!(
        outcome(&report, "open-1"),
        &ReplayOutcome::SignalNotRead {
            sequence: 2,
            signal: "delivered".into(),
            called: "close".into()
        }
    );
}

#[tokio::test]
async fn the_check_chooses_runs_by_status_and_by_count() {
    let store = runs_of(&old_code()).await;

    let open = ReplayCheck::new(Arc::clone(&store))
        .open_runs()
        .run(&old_code())
        .await
        .unwrap();
    let completed = ReplayCheck::new(Arc::clone(&store))
        .statuses([RunStatus::Completed])
        .run(&old_code())
        .await
        .unwrap();
    let sample = ReplayCheck::new(Arc::clone(&store))
        .limit(2)
        .run(&old_code())
        .await
        .unwrap();
    let other = ReplayCheck::new(Arc::clone(&store))
        .run(&Workflow::new("other", |_ctx: Context, _: u64| async {
            Ok::<_, Error>(())
        }))
        .await
        .unwrap();

    assert_eq!(open.runs().len(), 2);
    assert!(open.runs().iter().all(|r| r.status == RunStatus::Running));
    assert_eq!(completed.runs().len(), 1);
    assert_eq!(completed.runs()[0].run_id.as_str(), "done");
    assert_eq!(sample.runs().len(), 2);
    assert_eq!((other.runs().len(), other.other_workflows()), (0, 3));
}

/// Reads through to the stored runs; fails every write, and counts the
/// writes asked of it.
#[derive(Debug)]
struct FailsEveryWrite {
    inner: Arc<dyn RuntimeStore>,
    writes: AtomicU64,
}

impl FailsEveryWrite {
    fn refuse<T>(&self) -> Result<T> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        Err(Error::Aborted {
            run_id: String::new(),
            reason: "this store fails every write".into(),
            cause: None,
        })
    }
}

#[async_trait]
impl RuntimeStore for FailsEveryWrite {
    async fn create_run(&self, _run: NewRun) -> Result<RunRecord> {
        self.refuse()
    }
    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.inner.load_run(run_id).await
    }
    async fn atomic_apply(&self, _run_id: &RunId, _commit: Commit) -> Result<RunRecord> {
        self.refuse()
    }
    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        self.inner.load_receipts(run_id, after).await
    }
    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        self.inner.load_snapshot(run_id).await
    }
    async fn append_input(&self, _run_id: &RunId, _input: NewInput) -> Result<InputRecord> {
        self.refuse()
    }
    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        self.inner.load_inputs(run_id).await
    }
    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        self.inner.list_runs(status).await
    }
    async fn delete_run(&self, _run_id: &RunId, _incarnation: Incarnation) -> Result<bool> {
        self.refuse()
    }
}

#[tokio::test]
async fn the_check_writes_nothing() {
    let stored = runs_of(&old_code()).await;
    // A run created and never attempted: its history is empty.
    stored
        .create_run(NewRun {
            run_id: RunId::new("pending").unwrap(),
            workflow: "order".into(),
            input: rmp_serde::to_vec_named(&9u64).unwrap().into(),
            created_at_ms: 0,
            workflow_version: None,
        })
        .await
        .unwrap();
    let read_only = Arc::new(FailsEveryWrite {
        inner: stored,
        writes: AtomicU64::new(0),
    });
    let store: Arc<dyn RuntimeStore> = read_only.clone();
    // New code that goes on past the end of every history: the pending run's
    // first call is a patch (which its attempt would record), the open runs'
    // next attempt would consume the signal, and the completed run's code
    // now has a step after `close`.
    let longer = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            if ctx.patched("first").await? {
                ctx.step("greet", |_m| body(())).await?;
            }
            ctx.step("charge", |_m| body(cents)).await?;
            ctx.step("ship", |_m| {
                body(Shipment {
                    carrier: "post".into(),
                })
            })
            .await?;
            ctx.wait_for_signal::<()>("delivered").await?;
            ctx.step("close", |_m| body(())).await?;
            ctx.step("archive", |_m| body(())).await?;
            Ok(String::new())
        })
    });

    let report = check(&store, &longer).await;

    assert!(report.is_clean(), "{report}");
    assert_eq!(report.runs().len(), 4);
    assert_eq!(
        outcome(&report, "pending"),
        &ReplayOutcome::Replays { steps: 0 }
    );
    assert_eq!(read_only.writes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_run_asleep_replays_up_to_its_timer_and_a_step_before_it_is_found() {
    let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
        .runtime_store(Arc::clone(&store))
        .build()
        .unwrap();
    let sleeper = |extra: bool| {
        code(move |ctx: Context, cents: u64| {
            Box::pin(async move {
                ctx.step("charge", |_m| body(cents)).await?;
                if extra {
                    ctx.step("remind", |_m| body(())).await?;
                }
                ctx.sleep(Duration::from_secs(24 * 3600)).await?;
                ctx.step("close", |_m| body(())).await?;
                Ok(String::new())
            })
        })
    };
    let asleep = runtime
        .run(&RunId::new("asleep").unwrap(), &1u64, &sleeper(false))
        .await;
    assert!(
        matches!(
            asleep,
            Err(Error::Suspended {
                until_ms: Some(_),
                ..
            })
        ),
        "{asleep:?}"
    );

    let same = check(&store, &sleeper(false)).await;
    let inserted = check(&store, &sleeper(true)).await;

    assert_eq!(
        outcome(&same, "asleep"),
        &ReplayOutcome::Replays { steps: 2 }
    );
    assert_eq!(
        outcome(&inserted, "asleep"),
        &ReplayOutcome::NonDeterminism {
            sequence: 1,
            recorded: "memo.sleep".into(),
            called: "remind".into()
        }
    );
}

#[tokio::test]
async fn a_run_in_a_select_replays_up_to_it_and_writes_nothing() {
    let stored: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
        .runtime_store(Arc::clone(&stored))
        .signal_wait(Duration::ZERO)
        .build()
        .unwrap();
    let chooser = code(|ctx: Context, cents: u64| {
        Box::pin(async move {
            ctx.step("charge", |_m| body(cents)).await?;
            ctx.select(&["approve", "reject"], None).await?;
            ctx.step("close", |_m| body(())).await?;
            Ok(String::new())
        })
    });
    let waiting = runtime
        .run(&RunId::new("choosing").unwrap(), &1u64, &chooser)
        .await;
    assert!(
        matches!(waiting, Err(Error::Suspended { .. })),
        "{waiting:?}"
    );
    // A signal has come: the run's next attempt would consume it.
    runtime
        .signal(&RunId::new("choosing").unwrap(), "approve", &())
        .await
        .unwrap();
    let read_only = Arc::new(FailsEveryWrite {
        inner: stored,
        writes: AtomicU64::new(0),
    });
    let store: Arc<dyn RuntimeStore> = read_only.clone();

    let report = check(&store, &chooser).await;

    assert!(report.is_clean(), "{report}");
    assert_eq!(read_only.writes.load(Ordering::SeqCst), 0);
}
