//! An agent that asks a human first: it drafts an action (a refund) with an
//! LLM call, waits for an approval signal, and only then executes it,
//! exactly once however often it is resumed or approved. Rejecting ends the
//! run without executing anything. Nobody answering is an answer too: after
//! `--remind-after` (default 1 h) the agent sends a reminder, after
//! `--reject-after` (default 48 h, from the start of the wait) it rejects the
//! action by itself. Both deadlines are recorded in the run when first
//! reached, so a restart, another worker or a changed flag sees the same.
//!
//! The run is driven by a `Worker`, the loop that starts submitted runs and
//! wakes due ones (a signal, a reminder, the deadline): by default one pass
//! of it in the foreground, or, with `--serve DURATION`, the loop itself for
//! that long.
//!
//! ```text
//! cargo run -p memo-examples --bin agent_approval                        # drafts, then waits
//! cargo run -p memo-examples --bin agent_approval -- --approve refund-1042   # executes once
//! cargo run -p memo-examples --bin agent_approval -- --reject refund-1042    # ends the run
//! cargo run -p memo-examples --bin agent_approval -- --run r-2 --remind-after 5s --reject-after 20s --serve 30s
//! ```
//!
//! The signal can come from anywhere: `memoctl --store URL signal refund-1042
//! approval --payload true`, then run this example again (or keep one
//! serving) to resume the run.

use std::sync::Mutex;
use std::time::Duration;

use clap::Parser;
use memo_examples::{CallLog, DEFAULT_STORE, Outcome, Price, Report, open_store};
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, Memo, RunId, memoized};
use serde::{Deserialize, Serialize};

/// Starts or resumes an agent run that needs a human's approval.
#[derive(Parser)]
struct Args {
    /// Where the runs and memo entries live: a folder, or a store URL.
    #[arg(long, default_value = DEFAULT_STORE)]
    store: String,
    /// The run to start or resume.
    #[arg(long, default_value = "refund-1042")]
    run: String,
    /// Approve run RUN's action, then resume it.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["reject", "run"])]
    approve: Option<String>,
    /// Reject run RUN's action, then resume it: the run ends.
    #[arg(long, value_name = "RUN", conflicts_with = "run")]
    reject: Option<String>,
    /// How long the agent waits for an answer before it sends a reminder.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1h")]
    remind_after: Duration,
    /// How long the agent waits for an answer in all before it rejects the
    /// action by itself.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "48h")]
    reject_after: Duration,
    /// Keep the worker loop running for this long, so that the reminder and
    /// the automatic rejection happen on time, and signals sent meanwhile
    /// (`memoctl signal`) are taken at once; then stop it gracefully.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    serve: Option<Duration>,
}

/// The input the run's deadlines come from (recorded with the run).
#[derive(Serialize, Deserialize, Clone, Copy)]
struct Deadlines {
    remind_after_ms: u64,
    reject_after_ms: u64,
}

/// What the customer asked for: the run's input.
#[derive(Serialize, Deserialize)]
struct Request {
    order: String,
    complaint: String,
    deadlines: Deadlines,
}

/// The action the agent proposes.
#[derive(Serialize, Deserialize, Clone)]
struct Action {
    order: String,
    refund_cents: u64,
    reason: String,
}

/// How the run ended: its output.
#[derive(Serialize, Deserialize)]
enum Decision {
    Executed {
        action: String,
        receipt: String,
    },
    Rejected {
        action: String,
    },
    /// Nobody answered by the deadline: rejected by the agent itself.
    Expired {
        action: String,
    },
}

const PLAN_ACTION: Price = Price::new(50, 2500);
const ISSUE_REFUND: Price = Price::new(3, 800);

static CALLS: CallLog = CallLog::new();

/// The drafted action, as the workflow last saw it (run or replayed).
static PROPOSED: Mutex<Option<String>> = Mutex::new(None);

/// The agent's LLM call: drafts the action.
#[memoized]
async fn plan_action(memo: &Memo, request: &Request) -> Result<Action, Error> {
    CALLS.call_ran("plan_action");
    Ok(Action {
        order: request.order.clone(),
        refund_cents: 4_200,
        reason: format!("customer says: {}", request.complaint),
    })
}

/// The irreversible part: the payment provider refunds once per
/// idempotency key, and the memo makes sure we ask once.
#[memoized]
async fn issue_refund(memo: &Memo, action: &Action) -> Result<String, Error> {
    CALLS.call_ran("issue_refund");
    let key = memo.idempotency_key(&("refund", &action.order))?;
    Ok(format!("re_{}", &key[..12]))
}

fn describe(action: &Action) -> String {
    let (dollars, cents) = (action.refund_cents / 100, action.refund_cents % 100);
    format!(
        "refund ${dollars}.{cents:02} on order {} ({})",
        action.order, action.reason
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stores = open_store(&args.store)?;
    let url = stores.url.clone();
    let runtime = Runtime::builder()
        .memo_store(stores.memo)
        .runtime_store(stores.runs)
        .build()?;
    let agent = Workflow::new(
        "refund-agent",
        |ctx: Context, request: Request| async move {
            let action = ctx
                .step_with("draft", &request, |memo, request| async move {
                    CALLS.step_ran("draft");
                    plan_action(&memo, request).await
                })
                .await?;
            *PROPOSED.lock().unwrap_or_else(|e| e.into_inner()) = Some(describe(&action));
            let Deadlines {
                remind_after_ms,
                reject_after_ms,
            } = request.deadlines;
            let ms = Duration::from_millis;
            let mut answer = ctx
                .wait_for_signal_timeout::<bool>("approval", ms(remind_after_ms))
                .await?;
            if answer.is_none() {
                ctx.step("remind", |_memo| async {
                    CALLS.step_ran("remind");
                    println!("reminder: a refund waits for your approval");
                    Ok::<_, Error>(())
                })
                .await?;
                let rest = reject_after_ms.saturating_sub(remind_after_ms);
                answer = ctx
                    .wait_for_signal_timeout::<bool>("approval", ms(rest))
                    .await?;
            }
            let Some(approved) = answer else {
                return Ok(Decision::Expired {
                    action: describe(&action),
                });
            };
            if !approved {
                return Ok(Decision::Rejected {
                    action: describe(&action),
                });
            }
            let receipt = ctx
                .step_with("execute", &action, |memo, action| async move {
                    CALLS.step_ran("execute");
                    issue_refund(&memo, action).await
                })
                .await?;
            Ok::<_, Error>(Decision::Executed {
                action: describe(&action),
                receipt,
            })
        },
    );

    let (run, decision) = match (&args.approve, &args.reject) {
        (Some(run), _) => (RunId::new(run)?, Some(true)),
        (None, Some(run)) => (RunId::new(run)?, Some(false)),
        (None, None) => (RunId::new(&args.run)?, None),
    };
    println!("run {run} on {url}");
    if let Some(approved) = decision {
        match runtime.status(&run).await? {
            None => anyhow::bail!("there is no run {run} to decide on; start it first"),
            Some(record) if record.status.is_terminal() => {
                let status = record.status.to_string().to_lowercase();
                println!("run {run} has already ended ({status}); nothing sent");
            }
            Some(_) => {
                // The same signal `memoctl signal RUN approval --payload true` sends.
                runtime.signal(&run, "approval", &approved).await?;
                let verb = if approved { "approved" } else { "rejected" };
                println!("{verb} run {run}");
            }
        }
    }

    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let request = Request {
        order: "A-1042".into(),
        complaint: "the parcel arrived broken".into(),
        deadlines: Deadlines {
            remind_after_ms: millis(args.remind_after),
            reject_after_ms: millis(args.reject_after),
        },
    };
    let worker = Worker::builder(runtime.clone()).workflow(&agent).build();
    if runtime.status(&run).await?.is_none() {
        worker.submit(&agent, &run, &request).await?;
    }
    if let Some(serve) = args.serve {
        let shown = humantime::format_duration(serve);
        println!("serving for {shown}: the worker wakes the run when it is due");
        let serving = worker.spawn();
        tokio::time::sleep(serve).await;
        serving.shutdown(Duration::from_secs(10)).await;
    } else {
        // One pass of the worker loop: what is due now (the new run, a
        // signal sent, a reminder or deadline that has passed) runs now.
        while worker.wake_due().await?.entries > 0 {}
    }
    // The run's outcome: a run that has ended returns it; one that waits
    // says so without starting anything or writing.
    let outcome = runtime.resume(&run, &agent).await;
    let mut report = Report::new();
    report.call(
        "draft",
        "plan_action",
        CALLS.outcome("draft", "plan_action"),
        PLAN_ACTION,
    );
    let ended = match outcome {
        Ok(Decision::Executed { action, receipt }) => {
            report.note("approval", "signal \"approval\"", "approved");
            let executed = CALLS.outcome("execute", "issue_refund");
            report.call("execute", "issue_refund", executed, ISSUE_REFUND);
            format!("executed: {action}; refund {receipt}")
        }
        Ok(Decision::Rejected { action }) => {
            report.note("approval", "signal \"approval\"", "rejected");
            let skipped = Outcome::Not("skipped: rejected".into());
            report.call("execute", "issue_refund", skipped, ISSUE_REFUND);
            format!("rejected: {action}; nothing executed, the run has ended")
        }
        Ok(Decision::Expired { action }) => {
            report.note("approval", "signal \"approval\"", "no answer in time");
            let skipped = Outcome::Not("skipped: rejected by the deadline".into());
            report.call("execute", "issue_refund", skipped, ISSUE_REFUND);
            format!("rejected automatically: {action}; nobody answered in time, the run has ended")
        }
        Err(Error::Suspended { .. }) => {
            report.note("approval", "signal \"approval\"", "waiting");
            let waiting = Outcome::Not("not reached: waiting".into());
            report.call("execute", "issue_refund", waiting, ISSUE_REFUND);
            let proposed = PROPOSED.lock().unwrap_or_else(|e| e.into_inner()).take();
            format!(
                "proposed: {}\nwaiting for approval. Decide with one of:\n  \
                 cargo run -p memo-examples --bin agent_approval -- --store {url} --approve {run}\n  \
                 cargo run -p memo-examples --bin agent_approval -- --store {url} --reject {run}\n  \
                 memoctl --store {url} signal {run} approval --payload true   (then run this example again)",
                proposed.unwrap_or_default()
            )
        }
        Err(e) => return Err(e.into()),
    };
    println!();
    report.print();
    println!("\n{ended}");
    Ok(())
}
