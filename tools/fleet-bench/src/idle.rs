//! `memo-fleet-bench idle`: what a fleet of idle workers costs, and how
//! soon one of them finds a run another process made due
//! (`WorkerBuilder::idle_poll_interval`).
//!
//! For each maximum in `--idle-max-ms` (0: the poll interval, idle or not)
//! `--workers` spawned workers, each over a store instance and runtime of
//! its own as separate processes have, poll one store for `--secs`
//! seconds with nothing to do but the probes: every `--secs / --probes`
//! seconds (the first after that much idling), another process submits a
//! run to a worker it does not spawn, so the run is due at once for the
//! fleet, and the time until it completes is taken. Prints one Markdown
//! row per maximum: the listings and all requests per worker-hour (those
//! of waking the probes included), what a month of them costs at S3
//! Standard's list prices, and each probe's latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunStatus};
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

use crate::stores::Distant;
use crate::{StoreArgs, under};

/// S3 Standard's list price of a PUT, COPY, POST or LIST, and of a GET, in
/// dollars per 1,000 requests (US East, 2026-12-02; BENCHMARKS.md, "The
/// cost ledger").
const PUT_OR_LIST: f64 = 0.005;
const GET: f64 = 0.0004;

/// What `idle` is told on its command line.
#[derive(Debug, clap::Args)]
pub(crate) struct IdleArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Workers polling the store.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Each worker's poll interval, in ms.
    #[arg(long, default_value_t = 1000)]
    poll_ms: u64,
    /// The idle maxima to measure, in ms, one configuration each (0: none).
    #[arg(long, value_delimiter = ',', default_values_t = [0, 8_000, 32_000])]
    idle_max_ms: Vec<u64>,
    /// How long each configuration runs, in seconds.
    #[arg(long, default_value_t = 240)]
    secs: u64,
    /// Runs made due by another process during it, evenly spaced.
    #[arg(long, default_value_t = 4)]
    probes: u32,
}

pub(crate) fn main(args: IdleArgs) -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "| workers | poll interval | idle maximum | LISTs a worker-hour | all requests a worker-hour | $ a worker-month (30 days) | probe found after (each) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let base = format!("idle-{}", std::process::id());
    for (i, max_ms) in args.idle_max_ms.iter().enumerate() {
        let prefix = format!("{base}-{i}");
        let row = tokio.block_on(measure(&args, &prefix, *max_ms))?;
        args.store.remove(&prefix)?;
        println!("{row}");
    }
    Ok(())
}

/// The requests of one process, counted.
type Counted = Arc<CountingStore<Arc<dyn ObjectStore>>>;

/// A runtime over its own instance of the store at `prefix`, its requests
/// counted.
fn process(args: &IdleArgs, prefix: &str) -> anyhow::Result<(Counted, Runtime)> {
    let opened = args.store.open(prefix)?;
    let distant: Arc<dyn ObjectStore> = Arc::new(Distant::new(opened.store, args.store.latency()));
    let counting = Arc::new(CountingStore::new(distant));
    let objects: Arc<dyn ObjectStore> = counting.clone();
    let runs = ObjectStoreRuntimeStore::new(objects.clone(), under(&opened.prefix, "runs"));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(objects, under(&opened.prefix, "memo")))
        .runtime_store(Arc::new(runs))
        .build()?;
    Ok((counting, runtime))
}

fn probe() -> Workflow<impl Fn(Context, u32) -> futures::future::Ready<Result<u32, Error>> + Clone>
{
    Workflow::new("probe", |_ctx: Context, n: u32| {
        futures::future::ready(Ok(n))
    })
}

async fn measure(args: &IdleArgs, prefix: &str, max_ms: u64) -> anyhow::Result<String> {
    let workflow = probe();
    let mut fleet = Vec::new();
    for _ in 0..args.workers {
        let (counting, runtime) = process(args, prefix)?;
        let mut builder = Worker::builder(runtime)
            .workflow(&workflow)
            .poll_interval(Duration::from_millis(args.poll_ms))
            .sweep_interval(None);
        if max_ms > 0 {
            builder = builder.idle_poll_interval(Duration::from_millis(max_ms));
        }
        fleet.push((counting, builder.spawn()));
    }
    let (_, operator) = process(args, prefix)?;
    let submitter = Worker::builder(operator.clone())
        .workflow(&workflow)
        .build();
    let started = Instant::now();
    let spacing = Duration::from_secs(args.secs) / args.probes.max(1);
    let mut found = Vec::new();
    for n in 0..args.probes {
        tokio::time::sleep_until((started + spacing * (n + 1)).into()).await;
        let run = RunId::new(format!("probe-{n}"))?;
        let submitted = Instant::now();
        submitter.submit(&workflow, &run, &n).await?;
        loop {
            let record = operator.status(&run).await?;
            if record.is_some_and(|r| r.status == RunStatus::Completed) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        found.push(submitted.elapsed());
    }
    tokio::time::sleep_until((started + Duration::from_secs(args.secs)).into()).await;
    let elapsed = started.elapsed();
    let mut total = RequestCounts::default();
    for (counting, handle) in fleet {
        handle.shutdown(Duration::from_secs(10)).await;
        let c = counting.counts();
        total.lists += c.lists + c.lists_with_offset + c.lists_with_delimiter;
        total.gets += c.gets + c.heads;
        total.creates += c.creates + c.puts;
        total.delete_paths += c.delete_paths;
    }
    let per_hour = |n: u64| n as f64 * 3600.0 / elapsed.as_secs_f64() / args.workers as f64;
    let lists = per_hour(total.lists);
    let all = per_hour(total.lists + total.gets + total.creates + total.delete_paths);
    let month = 24.0 * 30.0;
    let dollars = month
        * (per_hour(total.lists + total.creates) * PUT_OR_LIST + per_hour(total.gets) * GET)
        / 1000.0;
    let found: Vec<String> = found
        .iter()
        .map(|d| format!("{:.1} s", d.as_secs_f64()))
        .collect();
    let idle = match max_ms {
        0 => "none".to_string(),
        ms => format!("{} s", ms as f64 / 1000.0),
    };
    Ok(format!(
        "| {} | {} s | {idle} | {lists:.0} | {all:.0} | ${dollars:.2} | {} |",
        args.workers,
        args.poll_ms as f64 / 1000.0,
        found.join(", ")
    ))
}
