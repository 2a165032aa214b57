//! A `#[memoized]` call in its run's first attempt reads no entry while
//! the attempt holds its lease with half its length left: no other attempt
//! can have committed one (another starts only once that lease expired),
//! so the read would miss. Every other call reads as before: one the
//! attempt made already (a second call of the key, a retried try of the
//! step), one in a later attempt, one whose lease is short of that half
//! (`attempt_leases` and `committed_effects` stage those), and every call
//! outside a workflow.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow};
use memo_runtime::{Error, Memo, MemoStore, memoized};
use memo_tests::fixtures::run;

const LEASE: Duration = Duration::from_secs(60);

/// A side effect: counts its runs, returns its number.
#[memoized(skip(effects))]
async fn effect(memo: &Memo, effects: &AtomicU64, what: &str) -> Result<u64, Error> {
    let _ = what;
    Ok(effects.fetch_add(1, Ordering::SeqCst) + 1)
}

type Ran = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// A process whose memo store counts its requests (the runs are kept apart,
/// so the counts are the memo entries' alone).
fn process(memo: &Arc<CountingStore<InMemory>>, runs: &Arc<InMemory>) -> Runtime {
    let runs: Arc<dyn ObjectStore> = runs.clone();
    Runtime::builder()
        .memo_store(MemoStore::new(memo.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(runs, "runs")))
        .clock(Arc::new(ManualClock::new(1_000_000)))
        .lease(LEASE)
        .build()
        .unwrap()
}

fn counted() -> (Arc<CountingStore<InMemory>>, Arc<InMemory>, Runtime) {
    let memo = Arc::new(CountingStore::new(InMemory::new()));
    let runs = Arc::new(InMemory::new());
    let runtime = process(&memo, &runs);
    (memo, runs, runtime)
}

/// The memo store's reads of any object (the runs are elsewhere; its other
/// objects, due-run entries and markers, are written and listed, not read).
fn reads(counts: &RequestCounts) -> u64 {
    counts.gets + counts.get_ranges + counts.heads
}

/// The memo entries stored.
async fn entries(memo: &CountingStore<InMemory>) -> usize {
    use futures::TryStreamExt;
    let folder = memo_runtime::object_store::path::Path::from("memo/memos");
    let listed: Vec<_> = memo
        .inner()
        .list(Some(&folder))
        .try_collect()
        .await
        .unwrap();
    listed.len()
}

#[tokio::test]
async fn a_first_attempts_call_reads_no_entry_while_half_its_lease_is_left() {
    let (memo, _, runtime) = counted();
    let effects = Arc::new(AtomicU64::new(0));
    let two_calls = {
        let effects = effects.clone();
        Workflow::new("two-calls", move |ctx: Context, (): ()| {
            let effects = effects.clone();
            Box::pin(async move {
                ctx.step("calls", move |memo| {
                    let effects = effects.clone();
                    async move {
                        effect(&memo, &effects, "draft").await?;
                        effect(&memo, &effects, "review").await
                    }
                })
                .await
            }) as Ran
        })
    };
    let out = runtime.run(&run("first"), &(), &two_calls).await.unwrap();
    assert_eq!(out, 2);
    let counts = memo.counts();
    assert_eq!(reads(&counts), 0, "{counts:?}");
    assert_eq!(entries(&memo).await, 2, "two calls, two entries");
}

#[tokio::test]
async fn a_key_the_attempt_wrote_is_read_again_and_its_body_never_runs_twice() {
    // The same call twice in one try, and again in a retried try of the
    // step: the body runs once, its entry read (or found in the entry
    // cache) for the others.
    let (memo, _, runtime) = counted();
    let effects = Arc::new(AtomicU64::new(0));
    let tries = Arc::new(AtomicU64::new(0));
    let again = {
        let (effects, tries) = (effects.clone(), tries.clone());
        Workflow::new("again", move |ctx: Context, (): ()| {
            let (effects, tries) = (effects.clone(), tries.clone());
            Box::pin(async move {
                ctx.step("twice, and retried", move |memo| {
                    let (effects, tries) = (effects.clone(), tries.clone());
                    async move {
                        let first = effect(&memo, &effects, "once").await?;
                        let second = effect(&memo, &effects, "once").await?;
                        assert_eq!(first, second);
                        if tries.fetch_add(1, Ordering::SeqCst) == 0 {
                            return Err(Error::InvalidWrite {
                                run_id: "again".into(),
                                reason: "the first try fails after its calls".into(),
                            });
                        }
                        Ok(second)
                    }
                })
                .retry(RetryPolicy::attempts(2).with_min_delay(Duration::from_millis(1)))
                .await
            }) as Ran
        })
    };
    let out = runtime.run(&run("again"), &(), &again).await.unwrap();
    assert_eq!(out, 1);
    assert_eq!(tries.load(Ordering::SeqCst), 2);
    assert_eq!(effects.load(Ordering::SeqCst), 1, "the body ran once");
    assert_eq!(entries(&memo).await, 1);
}

#[tokio::test]
async fn a_later_attempt_reads_what_the_first_committed() {
    // The first attempt commits the call's entry and stops before its step
    // commits (its process dies, here a panic in the step after the call);
    // the second reads the entry and the body does not run again.
    let (memo, runs, runtime) = counted();
    let effects = Arc::new(AtomicU64::new(0));
    let dies = Arc::new(AtomicU64::new(1));
    let dying = {
        let (effects, dies) = (effects.clone(), dies.clone());
        Workflow::new("dying", move |ctx: Context, (): ()| {
            let (effects, dies) = (effects.clone(), dies.clone());
            Box::pin(async move {
                ctx.step("call, then die", move |memo| {
                    let (effects, dies) = (effects.clone(), dies.clone());
                    async move {
                        let charged = effect(&memo, &effects, "charge").await?;
                        if dies.fetch_sub(1, Ordering::SeqCst) == 1 {
                            panic!("the process dies after the call committed");
                        }
                        Ok(charged)
                    }
                })
                .await
            }) as Ran
        })
    };
    let id = run("dies-once");
    let first = runtime.run(&id, &(), &dying).await;
    assert!(first.is_err(), "{first:?}");
    let before = memo.counts();
    assert_eq!(reads(&before), 0, "{before:?}");

    // Another process, once the first attempt let go of its lease.
    let other = process(&memo, &runs);
    assert_eq!(other.run(&id, &(), &dying).await.unwrap(), 1);
    assert_eq!(effects.load(Ordering::SeqCst), 1, "the body ran once");
    let after = memo.counts();
    assert!(reads(&after) > reads(&before), "{after:?}");
    assert_eq!(entries(&memo).await, 1);
}

#[tokio::test]
async fn a_call_outside_a_workflow_reads_its_entry() {
    let memo = Arc::new(CountingStore::new(InMemory::new()));
    let store = MemoStore::new(memo.clone(), "memo");
    let effects = AtomicU64::new(0);
    let standalone = store.new_memo(&run("standalone"), 0);
    assert_eq!(effect(&standalone, &effects, "x").await.unwrap(), 1);
    assert_eq!(reads(&memo.counts()), 1, "{:?}", memo.counts());
}
