//! How workflow code reads: steps awaited together with `join!`, step bodies
//! handed the workflow's values without clones, step bodies that use `?` on
//! any error (`step_boxed`), a workflow returned from a
//! function, a suspended run told apart whatever the workflow's error type,
//! a sweeper customised from the runtime (its retention too), and what a
//! dropped background sweeper does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memo_runtime::object_store::memory::InMemory;
use memo_runtime::workflow::{
    BoxError, Context, RetryPolicy, RunOutcome, Runtime, Workflow, WorkflowFn,
};
use memo_runtime::{
    Error, Memo, MemoStore,
    clock::{Clock, ManualClock},
    runtime_store::{InMemoryRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::run;

const HOUR_MS: u64 = 3_600_000;
const START_MS: u64 = 1_000 * HOUR_MS;

fn runtime(clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
        .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
        .clock(clock.clone())
        .retention(Duration::from_secs(3600))
        .build()
        .unwrap()
}

/// Counts how often each of two step bodies ran.
#[derive(Default)]
struct Calls {
    left: AtomicUsize,
    right: AtomicUsize,
}

#[tokio::test]
async fn steps_go_straight_into_join_and_replay_in_the_order_first_polled() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    let calls = Arc::new(Calls::default());
    let workflow = Workflow::new("pair", {
        let calls = calls.clone();
        move |ctx: Context, n: u64| {
            let calls = calls.clone();
            async move {
                let (left, right) = (&calls.left, &calls.right);
                // No `.into_future()`: a step is a future.
                let (a, b) = futures::join!(
                    ctx.step("left", |_memo| async move {
                        left.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, Error>(n)
                    }),
                    ctx.step("right", |_memo| async move {
                        right.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, Error>(n * 10)
                    }),
                );
                let (a, b) = (a?, b?);
                let (c, d) = futures::try_join!(
                    ctx.step("left-again", |_memo| async move { Ok::<_, Error>(a + 1) }),
                    ctx.step("right-again", |_memo| async move { Ok::<_, Error>(b + 1) }),
                )?;
                let go: bool = ctx.wait_for_signal("go").await?;
                Ok::<_, Error>((c, d, go))
            }
        }
    });

    let first = runtime.run(&run("pair-1"), &7, &workflow).await;
    assert!(matches!(first, Err(Error::Suspended { .. })), "{first:?}");
    runtime.signal(&run("pair-1"), "go", &true).await.unwrap();
    let resumed: (u64, u64, bool) = runtime.run(&run("pair-1"), &7, &workflow).await.unwrap();

    assert_eq!(resumed, (8, 71, true));
    // The resumed attempt replayed all four steps, each at the position it
    // took in the first attempt (a mismatch would be NonDeterminism).
    assert_eq!(calls.left.load(Ordering::SeqCst), 1);
    assert_eq!(calls.right.load(Ordering::SeqCst), 1);
    let steps: Vec<String> = runtime
        .runtime_store()
        .load_receipts(&run("pair-1"), None)
        .await
        .unwrap()
        .into_iter()
        .map(|receipt| receipt.step)
        .collect();
    assert_eq!(
        steps,
        [
            "left",
            "right",
            "left-again",
            "right-again",
            "memo.wait:go",
            "signal:go"
        ]
    );
}

/// A value the workflow owns and cannot clone.
#[derive(Debug, serde::Serialize)]
struct Ticket {
    id: u32,
    body: String,
}

#[memo_runtime::memoized]
async fn draft(memo: &Memo, ticket: &Ticket, tone: &str) -> Result<String, Error> {
    Ok(format!("({tone}) re #{}: {}", ticket.id, ticket.body))
}

#[tokio::test(start_paused = true)]
async fn step_with_hands_every_try_the_workflows_values_without_cloning_them() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    let tries = Arc::new(AtomicUsize::new(0));
    let workflow = Workflow::new("support", {
        let tries = tries.clone();
        move |ctx: Context, body: String| {
            let tries = tries.clone();
            async move {
                let ticket = Ticket { id: 42, body };
                let tone = String::from("warm");
                let tries = &tries;
                let reply = ctx
                    .step_with(
                        "draft",
                        (&ticket, &tone),
                        |memo, (ticket, tone)| async move {
                            // The first two tries fail; each gets the input again.
                            if tries.fetch_add(1, Ordering::SeqCst) < 2 {
                                return Err(Error::Aborted {
                                    run_id: memo.run_id().to_string(),
                                    reason: "flaky".into(),
                                    cause: None,
                                });
                            }
                            draft(&memo, ticket, tone).await
                        },
                    )
                    .retry(RetryPolicy::attempts(3).without_jitter())
                    .await?;
                // Both values are still the workflow's after the step.
                Ok::<_, Error>(format!("{reply} / {} / {tone}", ticket.body.len()))
            }
        }
    });

    let out: String = runtime
        .run(&run("ticket-42"), &"refund?".to_string(), &workflow)
        .await
        .unwrap();

    assert_eq!(out, "(warm) re #42: refund? / 7 / warm");
    assert_eq!(tries.load(Ordering::SeqCst), 3);
}

/// Runs a one-step workflow to completion at the clock's current time.
async fn finish_run(runtime: &Runtime, id: &str) {
    let done = Workflow::new("done", |ctx: Context, n: u32| async move {
        ctx.step("only", |memo| async move {
            memo.put("k", b"v").await?;
            Ok::<_, Error>(n)
        })
        .await
    });
    let out: u32 = runtime.run(&run(id), &1, &done).await.unwrap();
    assert_eq!(out, 1);
}

#[tokio::test]
async fn a_sweeper_customised_from_the_runtime_keeps_its_clock_retention_and_stores() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    finish_run(&runtime, "old").await;
    clock.advance_ms(2 * HOUR_MS);
    finish_run(&runtime, "recent").await;
    clock.advance_ms(HOUR_MS / 2);

    assert_eq!(runtime.retention(), Duration::from_secs(3600));
    assert_eq!(runtime.clock().now_ms(), clock.now_ms());
    let preview = runtime
        .retention_sweeper_builder()
        .dry_run(true)
        .page_size(1)
        .build();
    assert_eq!(preview.retention(), runtime.retention());
    let report = preview.sweep_now().await.unwrap();

    // At the runtime's clock, with its retention, only "old" is expired; the
    // runtime store is part of the sweep (its record would be deleted), and
    // a dry run deletes nothing.
    assert!(report.dry_run);
    assert_eq!(report.cutoff_ms, clock.now_ms() - HOUR_MS);
    assert_eq!(report.markers_expired, 1);
    assert_eq!((report.runs_cleared, report.runtime_runs_deleted), (1, 1));
    assert!(report.entries_deleted >= 1, "{report:?}");
    assert!(runtime.status(&run("old")).await.unwrap().is_some());

    let swept = runtime.retention_sweeper().sweep_now().await.unwrap();
    assert_eq!((swept.runs_cleared, swept.runtime_runs_deleted), (1, 1));
    assert!(runtime.status(&run("old")).await.unwrap().is_none());
    assert!(runtime.status(&run("recent")).await.unwrap().is_some());
}

/// What the README's `runtime.retention_sweeper().spawn(..)` does with the
/// handle it drops: the sweeper is detached, not stopped, and clears runs
/// that expire later.
#[tokio::test(start_paused = true)]
async fn a_dropped_runtime_sweeper_handle_keeps_sweeping_runs_that_expire_later() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    let handle = runtime.retention_sweeper().spawn(Duration::from_secs(60));
    let mut progress = handle.subscribe();
    progress.wait_for(|s| s.passes >= 1).await.unwrap();
    drop(handle);

    finish_run(&runtime, "late").await;
    clock.advance_ms(2 * HOUR_MS);
    let summary = tokio::time::timeout(
        Duration::from_secs(600),
        progress.wait_for(|s| s.runs_cleared >= 1),
    )
    .await
    .expect("the detached sweeper stopped sweeping")
    .unwrap()
    .clone();

    assert!(summary.passes >= 2, "{summary:?}");
    assert!(runtime.status(&run("late")).await.unwrap().is_none());
}

/// A workflow built by a function, as an application's module would export
/// it: `WorkflowFn` names the type that `impl Fn(..) -> impl Future` cannot.
fn scaled(
    factor: u64,
    calls: Arc<Calls>,
) -> Workflow<impl WorkflowFn<u64, Output = u64, Error = Error>> {
    Workflow::new("scaled", move |ctx: Context, n: u64| {
        let calls = calls.clone();
        async move {
            ctx.step("scale", |_memo| async {
                calls.left.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>(n * factor)
            })
            .await
        }
    })
}

#[tokio::test]
async fn a_workflow_returned_from_a_function_runs_and_replays() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    let calls = Arc::new(Calls::default());
    let workflow = scaled(3, calls.clone());

    assert_eq!(workflow.name(), "scaled");
    assert_eq!(
        runtime.run(&run("scaled-1"), &14, &workflow).await.unwrap(),
        42
    );
    // A new copy of the workflow finds the run completed: nothing runs again.
    let again = scaled(3, calls.clone());
    assert_eq!(
        runtime.run(&run("scaled-1"), &14, &again).await.unwrap(),
        42
    );
    assert_eq!(calls.left.load(Ordering::SeqCst), 1);
    let recovery = runtime.recover(&again).await.unwrap();
    assert!(recovery.resumed.is_empty());
}

#[tokio::test]
async fn a_suspended_run_is_told_apart_whatever_the_workflow_error_type() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    // anyhow, as the README's workflows use it.
    let approval = Workflow::new("approval", |ctx: Context, amount: u64| async move {
        let approved: bool = ctx.wait_for_signal("approve").await?;
        anyhow::ensure!(amount < 100, "too much");
        Ok(approved)
    });
    let waits = runtime.run(&run("approval-1"), &5, &approval).await;
    let waiting_for = waits.suspension().map(|s| (s.signal, s.until_ms));
    assert_eq!(waiting_for, Some((Some("approve"), None)), "{waits:?}");
    runtime
        .signal(&run("approval-1"), "approve", &true)
        .await
        .unwrap();
    let done = runtime.resume(&run("approval-1"), &approval).await;
    assert!(!done.is_suspended());
    assert!(done.unwrap());
    // A failed run is not a suspended one.
    let too_much = runtime.run(&run("approval-2"), &500, &approval).await;
    assert!(too_much.is_suspended());
    runtime
        .signal(&run("approval-2"), "approve", &true)
        .await
        .unwrap();
    let failed = runtime.run(&run("approval-2"), &500, &approval).await;
    assert!(failed.is_err() && !failed.is_suspended(), "{failed:?}");

    // memo's own error, a timer, and a recovery's outcomes.
    let nap = Workflow::new("nap", |ctx: Context, _: ()| async move {
        ctx.sleep(Duration::from_secs(24 * 3600)).await?;
        Ok::<_, Error>(())
    });
    let sleeps = runtime.run(&run("nap-1"), &(), &nap).await;
    let wake = START_MS + 24 * HOUR_MS;
    assert_eq!(
        sleeps.suspension().map(|s| (s.signal, s.until_ms)),
        Some((None, Some(wake)))
    );
    let still_waits = runtime.run(&run("approval-3"), &1, &approval).await;
    assert!(still_waits.is_suspended());
    let recovery = runtime.recover(&approval).await.unwrap();
    let [(id, outcome)] = &recovery.resumed[..] else {
        panic!("{:?}", recovery.resumed);
    };
    assert_eq!((id, outcome.is_suspended()), (&run("approval-3"), true));
}

#[tokio::test]
async fn the_runtimes_sweeper_builder_can_change_the_retention() {
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    finish_run(&runtime, "ended").await;
    clock.advance_ms(HOUR_MS / 2);

    // The runtime keeps runs an hour: nothing has expired yet.
    let kept = runtime.retention_sweeper().sweep_now().await.unwrap();
    assert_eq!(kept.runs_cleared, 0);
    let sooner = runtime
        .retention_sweeper_builder()
        .retention(Duration::from_secs(60))
        .build();
    assert_eq!(sooner.retention(), Duration::from_secs(60));
    let swept = sooner.sweep_now().await.unwrap();
    assert_eq!(swept.cutoff_ms, clock.now_ms() - 60_000);
    assert_eq!((swept.runs_cleared, swept.runtime_runs_deleted), (1, 1));
    assert!(runtime.status(&run("ended")).await.unwrap().is_none());
}

/// A workflow whose one step parses its input with `?` on the parser's own
/// error, through `step_boxed`.
fn doubler() -> Workflow<impl WorkflowFn<String, Output = u32, Error = BoxError>> {
    Workflow::new("doubler", |ctx: Context, text: String| async move {
        let doubled = ctx
            .step_boxed("parse", |_memo| {
                let text = text.clone();
                async move { Ok(text.trim().parse::<u32>()? * 2) }
            })
            .await?;
        Ok::<_, BoxError>(doubled)
    })
}

#[tokio::test]
async fn a_step_body_uses_question_mark_on_any_error_and_its_failure_keeps_the_message() {
    let runtime = runtime(&Arc::new(ManualClock::new(START_MS)));
    let doubler = doubler();
    let doubled = runtime
        .run(&run("doubled"), &" 21 ".to_string(), &doubler)
        .await;
    assert_eq!(doubled.unwrap(), 42);

    let failed = runtime
        .run(&run("not-a-number"), &"twenty".to_string(), &doubler)
        .await
        .unwrap_err();
    let step_failed = failed.downcast_ref::<Error>().expect("the step's failure");
    assert!(
        matches!(step_failed, Error::StepFailed { message, .. } if message.contains("invalid digit")),
        "{step_failed:?}"
    );
    let status = runtime.status(&run("not-a-number")).await.unwrap().unwrap();
    assert_eq!(
        status.status,
        memo_runtime::runtime_store::RunStatus::Failed
    );
}

/// Calls of [`overlapping`] in flight now, and the most at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl InFlight {
    async fn during(&self, work: impl std::future::Future<Output = ()>) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        work.await;
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Yields a few times, so that calls awaited together overlap if they can.
async fn a_while() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[memo_runtime::memoized(skip(in_flight))]
async fn overlapping(memo: &Memo, in_flight: &InFlight, n: u64) -> Result<u64, Error> {
    in_flight.during(a_while()).await;
    Ok(n * 2)
}

#[tokio::test]
async fn steps_joined_execute_one_at_a_time_and_memoized_calls_joined_in_one_step_at_once() {
    // The guide's claim: steps awaited together take their positions in
    // the order first polled and execute one after another (a step holds
    // the run's position until it commits); calls that should run at once
    // are `#[memoized]` calls joined inside one step's body.
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    let steps = Arc::new(InFlight::default());
    let calls = Arc::new(InFlight::default());
    let workflow = Workflow::new("fan-out", {
        let (steps, calls) = (steps.clone(), calls.clone());
        move |ctx: Context, n: u64| {
            let (steps, calls) = (steps.clone(), calls.clone());
            async move {
                let (steps, calls) = (&*steps, &*calls);
                let (a, b) = futures::try_join!(
                    ctx.step("left", |_memo| async move {
                        steps.during(a_while()).await;
                        Ok::<_, Error>(n)
                    }),
                    ctx.step("right", |_memo| async move {
                        steps.during(a_while()).await;
                        Ok::<_, Error>(n + 1)
                    }),
                )?;
                let (c, d) = ctx
                    .step("both", |memo| async move {
                        futures::try_join!(
                            overlapping(&memo, calls, a),
                            overlapping(&memo, calls, b)
                        )
                    })
                    .await?;
                Ok::<_, Error>(c + d)
            }
        }
    });

    let out: u64 = runtime.run(&run("fan-out-1"), &7, &workflow).await.unwrap();

    assert_eq!(out, 14 + 16);
    assert_eq!(
        steps.most.load(Ordering::SeqCst),
        1,
        "joined steps ran one at a time"
    );
    assert_eq!(
        calls.most.load(Ordering::SeqCst),
        2,
        "joined calls in one step ran at once"
    );
}

#[tokio::test]
async fn a_step_joined_with_one_that_fails_for_good_takes_no_position_and_the_fallback_replays() {
    // `try_join!` drops the second step once the first fails; executed one
    // at a time, the second never took a position, so the compensation
    // after the join takes the next one in this attempt and in every
    // replay, where the failure returns at once.
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = runtime(&clock);
    let calls = Arc::new(Calls::default());
    let workflow = Workflow::new("order", {
        let calls = calls.clone();
        move |ctx: Context, n: u64| {
            let calls = calls.clone();
            async move {
                let reserved = &calls.right;
                let joined = futures::try_join!(
                    ctx.step("charge", |_memo| async move {
                        a_while().await;
                        Err::<u64, _>(std::io::Error::other("card declined"))
                    }),
                    ctx.step("reserve", |_memo| async move {
                        reserved.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, std::io::Error>(n)
                    }),
                );
                if joined.is_err() {
                    ctx.step("release", |_memo| async move { Ok::<_, Error>(()) })
                        .await?;
                }
                let go: bool = ctx.wait_for_signal("go").await?;
                Ok::<_, BoxError>(go)
            }
        }
    });

    let first = runtime.run(&run("order-1"), &7, &workflow).await;
    assert!(
        matches!(&first, Err(e) if e.downcast_ref::<Error>().is_some_and(|e| matches!(e, Error::Suspended { .. }))),
        "{first:?}"
    );
    runtime.signal(&run("order-1"), "go", &true).await.unwrap();
    let resumed = runtime.run(&run("order-1"), &7, &workflow).await;

    assert!(matches!(resumed, Ok(true)), "{resumed:?}");
    assert_eq!(calls.right.load(Ordering::SeqCst), 0, "reserve never ran");
    let steps: Vec<String> = runtime
        .runtime_store()
        .load_receipts(&run("order-1"), None)
        .await
        .unwrap()
        .into_iter()
        .map(|receipt| receipt.step)
        .collect();
    assert_eq!(steps, ["charge", "release", "memo.wait:go", "signal:go"]);
}
