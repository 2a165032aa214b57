//! A four-step workflow (research, outline, write, publish) that survives a
//! crash: `--crash-at STEP` aborts the process inside that step, right after
//! its first memoized call committed. Run it again and it resumes: the
//! finished steps are replayed from their receipts, the crashed step runs
//! again, and its committed call is answered by the memo, not repeated.
//!
//! ```text
//! cargo run -p memo-examples --bin crash_resume -- --crash-at write   # aborts
//! cargo run -p memo-examples --bin crash_resume                      # resumes
//! ```
//!
//! A crashed process cannot release its run's lease, so the next run waits
//! for it to expire (`--lease-ms`, 2 s here; a real worker's is longer)
//! before taking the run over.

use std::io::Write;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use memo_examples::{CallLog, DEFAULT_STORE, Price, Report, open_store};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Error, Memo, RunId,
    clock::{Clock, SystemClock},
    memoized,
};

/// Runs (or resumes) a report workflow, optionally crashing inside a step.
#[derive(Parser)]
struct Args {
    /// Where the runs and memo entries live: a folder, or a store URL.
    #[arg(long, default_value = DEFAULT_STORE)]
    store: String,
    /// The run to start or resume.
    #[arg(long, default_value = "report-1")]
    run: String,
    /// Abort the process inside this step, after its first memoized call
    /// committed (only if that call ran in this process, so a resumed run
    /// goes on).
    #[arg(long, value_enum)]
    crash_at: Option<StepName>,
    /// How long an attempt holds the run without renewing, in ms: how long
    /// the run after a crash waits before taking it over.
    #[arg(long, default_value_t = 2000)]
    lease_ms: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StepName {
    Research,
    Outline,
    Write,
    Publish,
}

/// Every step with its expensive calls, in order: what the table lists.
const PLAN: [(&str, &str, Price); 5] = [
    ("research", "search_web", Price::new(50, 2000)),
    ("outline", "llm_outline", Price::new(30, 1500)),
    ("write", "llm_write(section 1)", Price::new(40, 3000)),
    ("write", "llm_write(section 2)", Price::new(40, 3000)),
    ("publish", "send_newsletter", Price::new(10, 300)),
];

static CALLS: CallLog = CallLog::new();

#[memoized]
async fn search_web(memo: &Memo, topic: &str) -> Result<Vec<String>, Error> {
    CALLS.call_ran("search_web");
    Ok(vec![
        format!("{topic}: a survey"),
        format!("{topic} in practice"),
    ])
}

#[memoized]
async fn llm_outline(memo: &Memo, sources: &[String]) -> Result<Vec<String>, Error> {
    CALLS.call_ran("llm_outline");
    Ok(sources.iter().map(|s| format!("on {s}")).collect())
}

#[memoized]
async fn llm_write(memo: &Memo, section: usize, heading: &str) -> Result<String, Error> {
    CALLS.call_ran(format!("llm_write(section {section})"));
    Ok(format!("{section}. {heading}: ..."))
}

#[memoized]
async fn send_newsletter(memo: &Memo, report: &[String]) -> Result<String, Error> {
    CALLS.call_ran("send_newsletter");
    Ok(format!("sent {} sections to 1,200 readers", report.len()))
}

/// Aborts the process, as a crash would, if `--crash-at` names `step` and
/// `call` (the step's first) just ran and committed in this process.
fn crash_point(crash_at: Option<StepName>, step: StepName, name: &str, call: &str) {
    if crash_at == Some(step) && CALLS.runs_of(call) > 0 {
        println!(
            "crash: aborting inside step {name:?}, after {call} committed; run again to resume"
        );
        std::io::stdout().flush().ok();
        std::process::abort();
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stores = open_store(&args.store)?;
    let runtime = Runtime::builder()
        .memo_store(stores.memo)
        .runtime_store(stores.runs)
        .lease(Duration::from_millis(args.lease_ms))
        .build()?;
    let crash_at = args.crash_at;
    let report = Workflow::new("report", move |ctx: Context, topic: String| async move {
        println!("attempt {} of run {}", ctx.attempt(), ctx.run_id());
        let topic = &topic;
        let sources = ctx
            .step_with("research", topic, |memo, topic| async move {
                CALLS.step_ran("research");
                let found = search_web(&memo, topic).await?;
                crash_point(crash_at, StepName::Research, "research", "search_web");
                Ok::<_, Error>(found)
            })
            .await?;
        let outline = ctx
            .step_with("outline", &sources, |memo, sources| async move {
                CALLS.step_ran("outline");
                let outline = llm_outline(&memo, sources).await?;
                crash_point(crash_at, StepName::Outline, "outline", "llm_outline");
                Ok::<_, Error>(outline)
            })
            .await?;
        let sections = ctx
            .step_with("write", &outline, |memo, outline| async move {
                CALLS.step_ran("write");
                let mut sections = Vec::new();
                for (i, heading) in outline.iter().enumerate() {
                    sections.push(llm_write(&memo, i + 1, heading).await?);
                    let call = format!("llm_write(section {})", i + 1);
                    if i == 0 {
                        crash_point(crash_at, StepName::Write, "write", &call);
                    }
                }
                Ok::<_, Error>(sections)
            })
            .await?;
        ctx.step_with("publish", &sections, |memo, sections| async move {
            CALLS.step_ran("publish");
            let sent = send_newsletter(&memo, sections).await?;
            crash_point(crash_at, StepName::Publish, "publish", "send_newsletter");
            Ok::<_, Error>(sent)
        })
        .await
    });

    let run = RunId::new(&args.run)?;
    println!("run {run} on {}", stores.url);
    let sent = loop {
        match runtime
            .run(&run, &"durable execution".to_string(), &report)
            .await
        {
            Ok(sent) => break sent,
            // The crashed process still holds the run until its lease expires.
            Err(Error::LeaseHeld {
                owner, until_ms, ..
            }) => {
                let wait = until_ms.saturating_sub(SystemClock.now_ms()) + 50;
                println!(
                    "the run's lease is held by {owner} (crashed?); waiting {wait} ms for it to expire"
                );
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };

    let mut table = Report::new();
    for (step, call, price) in PLAN {
        table.call(step, call, CALLS.outcome(step, call), price);
    }
    println!("\n{sent}\n");
    table.print();
    Ok(())
}
