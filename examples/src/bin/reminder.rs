//! A durable reminder: a run that sleeps, across process restarts, and then
//! sends its reminder exactly once.
//!
//! The first invocation starts the run: it records its wake time in the run
//! and suspends (no process needs to stay up). Any later invocation, on any
//! machine that shares the store, runs one pass of the worker loop: before
//! the wake time it finds nothing due and writes nothing; after it, the run
//! continues past its sleep and the reminder goes out, once.
//!
//! ```text
//! cargo run -p memo-examples --bin reminder -- --in 10s   # starts the run, which sleeps
//! cargo run -p memo-examples --bin reminder               # before 10 s: still sleeping
//! cargo run -p memo-examples --bin reminder               # after: the reminder goes out
//! cargo run -p memo-examples --bin reminder -- --run r-2 --in 5s --wait   # stays up until it is sent
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use futures::TryStreamExt;
use memo_examples::{DEFAULT_STORE, open_store};
use memo_runtime::runtime_store::RunStatus;
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, RunId};

/// Starts, or wakes, a reminder that sleeps durably.
#[derive(Parser)]
struct Args {
    /// Where the runs and memo entries live: a folder, or a store URL.
    #[arg(long, default_value = DEFAULT_STORE)]
    store: String,
    /// The reminder's run.
    #[arg(long, default_value = "remind-ada")]
    run: String,
    /// How long the reminder sleeps (recorded when the run starts; later
    /// invocations keep the recorded wake time).
    #[arg(long = "in", value_parser = humantime::parse_duration, default_value = "10s")]
    sleep: Duration,
    /// Keep the worker loop up until the reminder is sent.
    #[arg(long)]
    wait: bool,
}

/// Whether this process sent the reminder.
static SENT_HERE: AtomicBool = AtomicBool::new(false);

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stores = open_store(&args.store)?;
    let url = stores.url.clone();
    // A timer wait of zero: every sleep suspends its run at once, and the
    // process holds nothing while the run sleeps.
    let runtime = Runtime::builder()
        .memo_store(stores.memo)
        .runtime_store(stores.runs)
        .timer_wait(Duration::ZERO)
        .build()?;
    let reminder = Workflow::new(
        "reminder",
        |ctx: Context, (who, ms): (String, u64)| async move {
            ctx.sleep(Duration::from_millis(ms)).await?;
            ctx.step_with("send", &who, |_memo, who| async move {
                SENT_HERE.store(true, Ordering::SeqCst);
                Ok::<_, Error>(format!("reminded {who}"))
            })
            .await
        },
    );
    let run = RunId::new(&args.run)?;
    println!("run {run} on {url}");
    let worker = Worker::builder(runtime.clone()).workflow(&reminder).build();
    if runtime.status(&run).await?.is_none() {
        let ms = u64::try_from(args.sleep.as_millis()).unwrap_or(u64::MAX);
        worker
            .submit(&reminder, &run, &("ada".to_string(), ms))
            .await?;
    }
    loop {
        // One pass of the worker loop: whatever is due now runs now.
        while worker.wake_due().await?.entries > 0 {}
        let record = runtime.status(&run).await?;
        let ended = record.as_ref().is_some_and(|r| r.status.is_terminal());
        if ended || !args.wait {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    match runtime.status(&run).await?.map(|r| r.status) {
        Some(RunStatus::Completed) if SENT_HERE.load(Ordering::SeqCst) => {
            println!("the reminder went out now: reminded ada");
        }
        Some(RunStatus::Completed) => println!("the reminder went out before; nothing to do"),
        Some(status) if status.is_terminal() => println!("the run ended {status}"),
        _ => {
            // The due-run index says until when the run sleeps.
            let entries: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await?;
            let wake = entries
                .iter()
                .filter(|due| due.run_id == run)
                .map(|due| due.due_at_ms)
                .max();
            match wake {
                Some(at) => {
                    let left = Duration::from_millis(at.saturating_sub(now_ms()) / 1000 * 1000);
                    let left = humantime::format_duration(left);
                    println!("still sleeping: due in about {left}; run this again after that");
                }
                None => println!("still sleeping; run this again later"),
            }
        }
    }
    Ok(())
}
