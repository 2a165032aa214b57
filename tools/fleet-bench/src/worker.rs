//! One worker process of the fleet: a `workflow::Worker` over its own store
//! instances, as a user's process has, submitting its share of the runs
//! and driving whichever runs its polls find due.
//!
//! It talks to the driver over its stdin and stdout, one line per message:
//! it writes `ready`, waits for `go`, writes `done <run>` as each run it
//! drove completes, reads `done <run>` for each of its own runs that any
//! worker completed (that frees a place among the runs it keeps in flight),
//! and on `stop` shuts its worker down and writes `report <json>`.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::testing::CountingStore;
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, Memo, MemoStore, RunId, memoized};
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, mpsc};

use crate::stores::{Completions, CountsCalls, Distant};
use crate::{Counts, StoreArgs, WorkerReport, under};

/// The steps of the benchmark's workflow, in order; a run that needs an
/// approval waits for its signal before the third.
pub(crate) const STEPS: [&str; 5] = ["fetch", "draft", "review", "send", "log"];

/// What a worker process is told on its command line.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// The prefix of this configuration's objects in the store.
    #[arg(long)]
    pub(crate) prefix: String,
    /// This worker's number, part of its runs' ids.
    #[arg(long)]
    pub(crate) index: usize,
    /// How many runs this worker submits.
    #[arg(long)]
    pub(crate) runs: usize,
    /// A name for this configuration, part of its runs' ids.
    #[arg(long)]
    pub(crate) tag: String,
    #[command(flatten)]
    pub(crate) shape: Shape,
}

/// The load each worker puts on the fleet.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Shape {
    /// How many of its own runs each worker keeps submitted and not yet
    /// completed.
    #[arg(long, default_value_t = 8)]
    pub(crate) inflight: usize,
    /// Runs each worker drives at once (`WorkerBuilder::concurrency`).
    #[arg(long, default_value_t = 8)]
    pub(crate) concurrency: usize,
    /// How often each worker polls the due-run index, in ms.
    #[arg(long, default_value_t = 200)]
    pub(crate) poll_ms: u64,
    /// One run in this many waits for an approval signal before its third
    /// step (0: none).
    #[arg(long, default_value_t = 4)]
    pub(crate) signal_every: usize,
    /// How long after submitting such a run its worker sends the signal,
    /// in ms.
    #[arg(long, default_value_t = 20)]
    pub(crate) signal_after_ms: u64,
    /// What each memoized call's body costs (a sleep standing in for the
    /// model call), in ms.
    #[arg(long, default_value_t = 0)]
    pub(crate) call_ms: u64,
}

/// A support ticket: the workflow's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ticket {
    body: String,
    needs_approval: bool,
}

/// How long the bodies of memoized calls take (`--call-ms`).
static CALL_MS: AtomicU64 = AtomicU64::new(0);

/// The durations of the durable steps whose body ran in this process, µs.
static STEP_US: Mutex<Vec<u64>> = Mutex::new(Vec::new());

async fn model_call() {
    let ms = CALL_MS.load(Ordering::Relaxed);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// A model's reply to `prompt`: 256 bytes.
#[memoized]
async fn complete(memo: &Memo, prompt: &str) -> Result<String, Error> {
    model_call().await;
    let head: String = prompt.chars().take(64).collect();
    Ok(format!("{:<256}", format!("reply to {head}")))
}

/// A label for `text`: 32 bytes.
#[memoized]
async fn classify(memo: &Memo, text: &str) -> Result<String, Error> {
    model_call().await;
    Ok(format!("{:<32}", text.len() % 7))
}

/// A durable step of two memoized calls; its duration is recorded when its
/// body ran (not when it was replayed from the run's history).
async fn durable_step(ctx: &Context, name: &'static str, input: &str) -> Result<String, Error> {
    let ran = AtomicBool::new(false);
    let started = Instant::now();
    let output = ctx
        .step_with(name, input, |memo, input| {
            ran.store(true, Ordering::Relaxed);
            async move {
                let reply = complete(&memo, input).await?;
                let label = classify(&memo, &reply).await?;
                Ok::<_, Error>(format!("{name}:{}:{}", label.trim(), &reply[..64]))
            }
        })
        .await?;
    if ran.load(Ordering::Relaxed) {
        let micros = started.elapsed().as_micros() as u64;
        STEP_US.lock().expect("step times").push(micros);
    }
    Ok(output)
}

async fn support(ctx: Context, ticket: Ticket) -> Result<String, Error> {
    let mut last = ticket.body;
    for (number, name) in STEPS.into_iter().enumerate() {
        if number == 2 && ticket.needs_approval {
            ctx.wait_for_signal::<bool>("approve").await?;
        }
        last = durable_step(&ctx, name, &last).await?;
    }
    Ok(last)
}

/// Writes one line to the driver.
fn tell(line: &str) {
    let mut out = std::io::stdout().lock();
    // The driver gone is the end of the benchmark: nothing to report to.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Runs the worker process until the driver says `stop`.
pub(crate) fn main(args: WorkerArgs) -> anyhow::Result<()> {
    CALL_MS.store(args.shape.call_ms, Ordering::Relaxed);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    tokio.block_on(work(args))
}

async fn work(args: WorkerArgs) -> anyhow::Result<()> {
    let opened = args.store.open(&args.prefix)?;
    let distant = Arc::new(Distant::new(opened.store, args.store.latency()));
    let counting = Arc::new(CountingStore::new(distant.clone()));
    let objects: Arc<dyn ObjectStore> = counting.clone();
    let runs = ObjectStoreRuntimeStore::new(objects.clone(), under(&opened.prefix, "runs"));
    let completions = Arc::new(Completions::new(Arc::new(runs), |run: &RunId| {
        tell(&format!("done {run}"))
    }));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(objects, under(&opened.prefix, "memo")))
        .runtime_store(completions.clone())
        .build()?;
    let workflow = Workflow::new("support", support);
    let shape = &args.shape;
    let handle = Worker::builder(runtime)
        .workflow(&workflow)
        .concurrency(shape.concurrency)
        .poll_interval(Duration::from_millis(shape.poll_ms))
        .sweep_interval(None)
        .spawn();
    let worker = handle.worker().clone();

    let (lines_tx, mut lines) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    tell("ready");
    while lines.recv().await.as_deref() != Some("go") {}
    counting.reset();
    distant.reset();
    completions.reset();
    STEP_US.lock().expect("step times").clear();

    let in_flight = Arc::new(Semaphore::new(shape.inflight.max(1)));
    let submitted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let submitter = tokio::spawn(submit_all(
        worker.clone(),
        workflow,
        args.tag.clone(),
        args.index,
        args.runs,
        shape.clone(),
        in_flight.clone(),
        submitted.clone(),
    ));
    let mut run_us = Vec::new();
    while let Some(line) = lines.recv().await {
        if let Some(run) = line.strip_prefix("done ") {
            if let Some(at) = submitted.lock().expect("submitted").remove(run) {
                run_us.push(at.elapsed().as_micros() as u64);
                in_flight.add_permits(1);
            }
        } else if line == "stop" {
            break;
        }
    }
    submitter.abort();
    handle.shutdown(Duration::from_secs(10)).await;
    let report = WorkerReport {
        counts: Counts::from_store(counting.counts(), distant.bytes_read()),
        step_us: std::mem::take(&mut *STEP_US.lock().expect("step times")),
        run_us,
        breakdown: distant
            .breakdown()
            .into_iter()
            .map(|((request, object), n)| (request, object, n))
            .chain(
                completions
                    .calls()
                    .into_iter()
                    .map(|(method, n)| ("RuntimeStore".into(), method.into(), n)),
            )
            .collect(),
    };
    tell(&format!("report {}", serde_json::to_string(&report)?));
    Ok(())
}

/// Submits this worker's runs, at most `shape.inflight` not yet completed,
/// and sends the approval signal of those that wait for one.
#[allow(clippy::too_many_arguments)]
async fn submit_all<F, Fut>(
    worker: Worker,
    workflow: Workflow<F>,
    tag: String,
    index: usize,
    runs: usize,
    shape: Shape,
    in_flight: Arc<Semaphore>,
    submitted: Arc<Mutex<HashMap<String, Instant>>>,
) where
    F: Fn(Context, Ticket) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<String, Error>> + Send + 'static,
{
    for number in 0..runs {
        let Ok(permit) = in_flight.acquire().await else {
            return;
        };
        permit.forget();
        let id = format!("{tag}-w{index}-r{number}");
        let run = RunId::new(&id).expect("a valid run id");
        let needs_approval = shape.signal_every > 0 && number % shape.signal_every == 0;
        let ticket = Ticket {
            body: format!("ticket {id}: where is my refund? {}", "x".repeat(128)),
            needs_approval,
        };
        submitted
            .lock()
            .expect("submitted")
            .insert(id.clone(), Instant::now());
        // A failed submit is submitted again, as the docs tell callers to.
        while let Err(e) = worker.submit(&workflow, &run, &ticket).await {
            eprintln!("submit of {id} failed, again: {e}");
        }
        if needs_approval {
            let worker = worker.clone();
            let after = Duration::from_millis(shape.signal_after_ms);
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                while let Err(e) = worker.runtime().signal(&run, "approve", &true).await {
                    eprintln!("signal to {run} failed, again: {e}");
                }
            });
        }
    }
}
