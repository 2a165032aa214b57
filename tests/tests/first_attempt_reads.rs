//! A `#[memoized]` call in its run's first attempt reads no entry while
//! more of the attempt's lease is left than the clock skew the runtime
//! allows (`RuntimeBuilder::max_clock_skew`, by default half the lease): no
//! other attempt can have committed one (another starts only once that
//! lease expired), so the read would miss. Every other call reads as
//! before: one the attempt made already (a second call of the key, a
//! retried try of the step), one in a later attempt, one with no more than
//! the skew left of its lease (here, and as `attempt_leases` and
//! `committed_effects` stage it), every call of a runtime told a skew as
//! long as the lease, and every call outside a workflow. Clocks further
//! apart than the skew the runtime assumes break the rule, and telling it
//! mends that: two processes stage both.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow, WorkflowFn};
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
    told(memo, runs, Arc::new(ManualClock::new(1_000_000)), None)
}

/// A process on `clock`, told the clocks' skew if `skew` is set.
fn told(
    memo: &Arc<CountingStore<InMemory>>,
    runs: &Arc<InMemory>,
    clock: Arc<ManualClock>,
    skew: Option<Duration>,
) -> Runtime {
    let runs: Arc<dyn ObjectStore> = runs.clone();
    let builder = Runtime::builder()
        .memo_store(MemoStore::new(memo.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(runs, "runs")))
        .clock(clock)
        .lease(LEASE);
    match skew {
        Some(skew) => builder.max_clock_skew(skew),
        None => builder,
    }
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
async fn a_first_attempts_call_reads_no_entry_while_more_than_the_skew_is_left() {
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

/// A workflow of one step that makes a call, moves the clock `late` ms
/// on, makes another, moves it a second on and makes a third: the calls'
/// results summed.
fn calls_then_late_ones(
    effects: &Arc<AtomicU64>,
    clock: &Arc<ManualClock>,
    late: u64,
) -> Workflow<impl WorkflowFn<(), Output = u64, Error = Error>> {
    let (effects, clock) = (effects.clone(), clock.clone());
    Workflow::new("late-calls", move |ctx: Context, (): ()| {
        let (effects, clock) = (effects.clone(), clock.clone());
        Box::pin(async move {
            ctx.step("early and late", move |memo| {
                let (effects, clock) = (effects.clone(), clock.clone());
                async move {
                    let early = effect(&memo, &effects, "early").await?;
                    clock.advance_ms(late);
                    let late = effect(&memo, &effects, "late").await?;
                    clock.advance_ms(1_000);
                    let later = effect(&memo, &effects, "later").await?;
                    Ok(early + late + later)
                }
            })
            .await
        }) as Ran
    })
}

/// The memo store's reads when a run of `calls_then_late_ones` moves the
/// clock to 11 s, then 10 s, before the end of its 60 s lease, on a
/// runtime told `skew` (or at the default).
async fn reads_of_late_calls(skew: Option<Duration>) -> u64 {
    let memo = Arc::new(CountingStore::new(InMemory::new()));
    let clock = Arc::new(ManualClock::new(1_000_000));
    let runtime = told(&memo, &Arc::new(InMemory::new()), clock.clone(), skew);
    let effects = Arc::new(AtomicU64::new(0));
    let late = (LEASE - Duration::from_secs(11)).as_millis() as u64;
    let workflow = calls_then_late_ones(&effects, &clock, late);
    let out = runtime.run(&run("late"), &(), &workflow).await.unwrap();
    assert_eq!(out, 6, "each call's body ran once");
    reads(&memo.counts())
}

#[tokio::test]
async fn a_call_reads_its_entry_once_no_more_than_the_skew_is_left_of_the_lease() {
    // Told a skew of 10 s: the call with 11 s of the lease left skips its
    // read, the one with 10 s left reads.
    assert_eq!(reads_of_late_calls(Some(Duration::from_secs(10))).await, 1);
    // At the default skew, half the lease (30 s), both late calls read.
    assert_eq!(reads_of_late_calls(None).await, 2);
}

#[tokio::test]
async fn a_runtime_told_a_skew_as_long_as_the_lease_reads_before_every_call() {
    // An entry put into the run's step folder from outside the run
    // (`MemoStore::memo_for`) before its first attempt calls the key: the
    // default skips the read, runs the body and gets the entry from its
    // commit; told the skew is the lease, the call reads and finds it, and
    // the body never runs.
    for (skew, ran) in [(None, 1), (Some(LEASE), 0)] {
        let memo = Arc::new(CountingStore::new(InMemory::new()));
        let runs = Arc::new(InMemory::new());
        let runtime = told(&memo, &runs, Arc::new(ManualClock::new(1_000_000)), skew);
        let effects = Arc::new(AtomicU64::new(0));
        let seeded = Arc::new(std::sync::Mutex::new(None));
        let workflow = {
            let (effects, seeded, store) = (
                effects.clone(),
                seeded.clone(),
                MemoStore::new(memo.clone(), "memo"),
            );
            Workflow::new("seeded", move |ctx: Context, (): ()| {
                let (effects, seeded, store) = (effects.clone(), seeded.clone(), store.clone());
                Box::pin(async move {
                    let (run_id, incarnation) = (ctx.run_id().clone(), ctx.incarnation());
                    ctx.step("call", move |memo| {
                        let (effects, seeded, store) =
                            (effects.clone(), seeded.clone(), store.clone());
                        let (run_id, incarnation) = (run_id.clone(), incarnation);
                        async move {
                            // The same call, committed from outside the run.
                            let outside = store.memo_for(&run_id, incarnation, 0);
                            let other = AtomicU64::new(41);
                            let put = effect(&outside, &other, "seeded").await?;
                            *seeded.lock().unwrap() = Some(put);
                            effect(&memo, &effects, "seeded").await
                        }
                    })
                    .await
                }) as Ran
            })
        };
        let out = runtime.run(&run("seeded"), &(), &workflow).await.unwrap();
        assert_eq!(Some(out), *seeded.lock().unwrap(), "the committed value");
        assert_eq!(effects.load(Ordering::SeqCst), ran, "skew {skew:?}");
    }
}

#[tokio::test]
async fn told_the_skew_a_first_attempt_reads_what_a_process_whose_clock_is_ahead_committed() {
    // Two processes on one store. A starts the run and stops in its step,
    // before its call, with 35 s of its 60 s lease left by its clock. B's
    // clock is 36 s ahead: the lease expired by it, so B takes the run
    // over and commits the call's entry. Then A makes the call. Left at
    // the default skew (30 s, under the clocks' 36), A skips the read and
    // runs the body a second time (the trade the durability guide states);
    // told the skew (40 s), A reads B's entry and the body ran once.
    const T: u64 = 1_000_000;
    for (skew, ran) in [(None, 2), (Some(Duration::from_secs(40)), 1)] {
        let memo = Arc::new(CountingStore::new(InMemory::new()));
        let runs = Arc::new(InMemory::new());
        let (clock_a, clock_b) = (Arc::new(ManualClock::new(T)), Arc::new(ManualClock::new(T)));
        let a = told(&memo, &runs, clock_a.clone(), skew);
        let b = told(&memo, &runs, clock_b.clone(), skew);
        let effects = Arc::new(AtomicU64::new(0));
        let (arrived, go) = (
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(tokio::sync::Notify::new()),
        );
        let gated = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let workflow = {
            let (effects, arrived, go, gated) =
                (effects.clone(), arrived.clone(), go.clone(), gated.clone());
            Workflow::new("taken-over", move |ctx: Context, (): ()| {
                let (effects, arrived, go, gated) =
                    (effects.clone(), arrived.clone(), go.clone(), gated.clone());
                Box::pin(async move {
                    ctx.step("charge", move |memo| {
                        let (effects, arrived, go, gated) =
                            (effects.clone(), arrived.clone(), go.clone(), gated.clone());
                        async move {
                            // A's try stops here until B has run; B's goes on.
                            if gated.swap(false, Ordering::SeqCst) {
                                arrived.notify_one();
                                go.notified().await;
                            }
                            effect(&memo, &effects, "charge").await
                        }
                    })
                    .await
                }) as Ran
            })
        };
        let id = run("taken-over");
        let first = tokio::spawn({
            let (a, id, workflow) = (a.clone(), id.clone(), workflow.clone());
            async move { a.run(&id, &(), &workflow).await }
        });
        tokio::time::timeout(Duration::from_secs(10), arrived.notified())
            .await
            .unwrap();
        clock_a.advance_ms(25_000);
        clock_b.advance_ms(61_000);
        let out = tokio::time::timeout(Duration::from_secs(10), b.run(&id, &(), &workflow))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(out, 1, "B's attempt ran the call");
        go.notify_one();
        let stale = tokio::time::timeout(Duration::from_secs(10), first)
            .await
            .unwrap()
            .unwrap();
        assert!(stale.is_err(), "A lost the run: {stale:?}");
        assert_eq!(effects.load(Ordering::SeqCst), ran, "skew {skew:?}");
    }
}
