//! Guarantees 1 and 3 at every crash point: a worker that dies after any
//! number of acknowledged writes (or right after a write whose
//! acknowledgement it never saw) leaves a run that another worker finishes
//! with the same result, and no side effect whose memo entry had committed
//! runs again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::path::Path;
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow};
use memo_runtime::{
    Error, Memo, MemoStore, RunId, clock::ManualClock, memoized,
    runtime_store::ObjectStoreRuntimeStore,
};
use memo_tests::fixtures::{Backend, run};

/// How a worker dies after its first `writes` acknowledged creates.
#[derive(Debug, Clone, Copy)]
enum Death {
    /// The next create never reaches the store.
    BeforeWrite,
    /// The next create is applied, but the worker dies before it learns so.
    AfterWrite,
}

#[derive(Default)]
struct Effects {
    charged: AtomicUsize,
    emailed: AtomicUsize,
}

/// Reserves stock: the first memoized side effect.
#[memoized(skip(effects))]
async fn charge(memo: &Memo, amount: u64, effects: &Effects) -> memo_runtime::Result<u64> {
    effects.charged.fetch_add(1, Ordering::SeqCst);
    Ok(amount * 10)
}

/// Sends the receipt: the second memoized side effect.
#[memoized(skip(effects))]
async fn email(memo: &Memo, charged: u64, effects: &Effects) -> memo_runtime::Result<u64> {
    effects.emailed.fetch_add(1, Ordering::SeqCst);
    Ok(charged * 10)
}

async fn order(ctx: Context, amount: u64, effects: Arc<Effects>) -> Result<u64, Error> {
    let charged = ctx
        .step("charge", |memo| {
            let effects = effects.clone();
            async move { charge(&memo, amount, &effects).await }
        })
        .await?;
    let emailed = ctx
        .step("email", |memo| {
            let effects = effects.clone();
            async move { email(&memo, charged, &effects).await }
        })
        .await?;
    ctx.step(
        "total",
        |_memo| async move { Ok::<_, Error>(charged + emailed) },
    )
    .await
}

/// A worker process at `now_ms`.
fn runtime_at(objects: Arc<dyn ObjectStore>, now_ms: u64) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, "records")))
        .clock(Arc::new(ManualClock::new(now_ms)))
        .marker_retry(RetryPolicy::attempts(1))
        .build()
        .unwrap()
}

/// Whether step `step` of `run` has a committed memo entry.
/// The dying worker's time, and the healthy one's: once the dead worker's
/// lease (the default) has expired.
const DIES_AT: u64 = 1_000;
const TAKES_OVER_AT: u64 = DIES_AT + memo_runtime::workflow::DEFAULT_LEASE.as_millis() as u64;

/// Whether a memo entry of `step` of the run (of any incarnation) exists.
async fn committed(objects: &Arc<dyn ObjectStore>, run: &RunId, step: u32) -> bool {
    let folder = Path::from(format!("memo/memos/{run}"));
    let entries: Vec<_> = objects.list(Some(&folder)).collect().await;
    entries.into_iter().any(|entry| {
        let location = entry.unwrap().location;
        let parts: Vec<_> = location.parts().collect();
        // memo/memos/<run>/<incarnation>/<step>/<digest>
        parts.len() == 6 && parts[4].as_ref() == step.to_string()
    })
}

/// Kills a worker after `writes` creates, then finishes the run with a
/// healthy one; returns whether the fault fired at all.
async fn crash_and_recover(objects: Arc<dyn ObjectStore>, writes: u64, death: Death) -> bool {
    let faulty = Arc::new(FaultInjectingStore::new(objects.clone()));
    if let Death::AfterWrite = death {
        faulty.inject(
            FaultRule::fail_after(RequestKind::Create)
                .skip(writes)
                .times(1),
        );
    }
    // Once dead, nothing more of this worker's lands. (Rules are tried in
    // order and each counts the creates it skips, so both skip `writes`.)
    faulty.inject(FaultRule::fail_before(RequestKind::Create).skip(writes));
    let effects = Arc::new(Effects::default());
    let run = run("order");
    let workflow = |effects: Arc<Effects>| {
        Workflow::new("order", move |ctx, amount| {
            order(ctx, amount, effects.clone())
        })
    };

    let first = runtime_at(faulty.clone(), DIES_AT)
        .run(&run, &7u64, &workflow(effects.clone()))
        .await;
    if faulty.faults_injected() == 0 {
        assert_eq!(first.unwrap(), 770);
        return false;
    }
    if let Ok(total) = first {
        // The worker died at the best-effort checkpoint or terminal marker,
        // after the run committed (a lost acknowledgement before it is
        // settled by reading back): recovery at the next start writes the
        // marker if it is missing.
        assert_eq!(total, 770);
        let healthy = runtime_at(objects.clone(), TAKES_OVER_AT);
        let had_marker = !(healthy.memo_store().markers().list().await)
            .unwrap()
            .is_empty();
        assert_eq!(
            healthy
                .recover(&workflow(effects.clone()))
                .await
                .unwrap()
                .remarked,
            usize::from(!had_marker)
        );
        assert_eq!(
            healthy.memo_store().markers().list().await.unwrap().len(),
            1
        );
        return true;
    }
    let charge_committed = committed(&objects, &run, 0).await;
    let email_committed = committed(&objects, &run, 1).await;
    let (charges, emails) = (
        effects.charged.load(Ordering::SeqCst),
        effects.emailed.load(Ordering::SeqCst),
    );

    let total = tokio::time::timeout(
        Duration::from_secs(20),
        runtime_at(objects.clone(), TAKES_OVER_AT).run(&run, &7u64, &workflow(effects.clone())),
    )
    .await
    .expect("the healthy worker finishes")
    .unwrap_or_else(|e| panic!("after {writes} writes ({death:?}): {e}"));
    assert_eq!(total, 770, "after {writes} writes ({death:?})");
    let context = format!("after {writes} writes ({death:?})");
    if charge_committed {
        assert_eq!(
            effects.charged.load(Ordering::SeqCst),
            charges,
            "{context}: a committed charge ran again"
        );
    }
    if email_committed {
        assert_eq!(
            effects.emailed.load(Ordering::SeqCst),
            emails,
            "{context}: a committed e-mail ran again"
        );
    }
    // Each effect ran at most once more than it had without committing.
    assert!(effects.charged.load(Ordering::SeqCst) <= 2, "{context}");
    assert!(effects.emailed.load(Ordering::SeqCst) <= 2, "{context}");
    let store = ObjectStoreRuntimeStore::new(objects, "records");
    use memo_runtime::runtime_store::RuntimeStore;
    let record = store.load_run(&run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed, "{context}");
    true
}

async fn every_crash_point(make: impl Fn() -> Backend) {
    for death in [Death::BeforeWrite, Death::AfterWrite] {
        let mut writes = 0;
        loop {
            let backend = make();
            let objects = backend.objects();
            if !crash_and_recover(objects, writes, death).await {
                break;
            }
            writes += 1;
            assert!(
                writes < 200,
                "the workflow never ran to the end without a fault"
            );
        }
        // The run makes a dozen or more creates: make sure the loop saw them.
        assert!(writes >= 10, "only {writes} crash points for {death:?}");
    }
}

#[tokio::test]
async fn every_crash_point_on_in_memory() {
    every_crash_point(Backend::in_memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_on_a_local_folder() {
    every_crash_point(Backend::local_folder).await;
}
