//! The driver: seeds the retained runs, starts the worker processes of each
//! configuration, relays completions to the worker that submitted each run,
//! and prints the table.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use memo_runtime::runtime_store::{
    Commit, NewRun, ObjectStoreRuntimeStore, RuntimeStore, StatusChange,
};
use memo_runtime::{Bytes, RunId};

use crate::worker::{STEPS, Shape};
use crate::{Counts, StoreArgs, WorkerReport, under};

/// How long a configuration may go without a run completing before the
/// driver gives up on it.
const STALL: Duration = Duration::from_secs(120);

/// `memo-fleet-bench run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The numbers of worker processes to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    workers: Vec<usize>,
    /// Runs per configuration, shared among its workers.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Finished runs in the store before the first configuration of each
    /// level (each level gets a fresh prefix).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    retained: Vec<usize>,
    #[command(flatten)]
    shape: Shape,
}

pub(crate) fn main(args: RunArgs) -> anyhow::Result<()> {
    // Unique to this invocation: one that started in the same second with
    // the same stamp found its predecessor's runs (the same ids) completed,
    // so their submits started nothing and the driver waited for
    // completions that never came (or came a lease later).
    let stamp = format!(
        "{}-{}",
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs(),
        std::process::id()
    );
    println!(
        "store {:?} (+{} ms a request), {} runs of {} steps per configuration, \
         {} in flight per worker, a signal on 1 run in {}, memoized calls {} ms; load {}",
        args.store.store,
        args.store.latency().as_millis(),
        args.runs,
        STEPS.len(),
        args.shape.inflight,
        args.shape.signal_every,
        args.shape.call_ms,
        load()
    );
    println!("{HEADER}");
    let mut breakdowns = Vec::new();
    for &retained in &args.retained {
        let base = format!("fleet-{stamp}-r{retained}");
        if retained > 0 {
            let started = Instant::now();
            seed(&args.store, &base, retained)?;
            eprintln!(
                "seeded {retained} finished runs in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        for &workers in &args.workers {
            let row = measure(&args, &base, retained, workers.max(1))?;
            println!("{}", row.markdown());
            breakdowns.push(row);
        }
        // The level's configurations share its retained runs, so its data
        // goes once they are all measured.
        args.store.remove(&base)?;
    }
    println!("load at the end {}", load());
    for row in &breakdowns {
        println!("{}", row.breakdown_markdown());
    }
    Ok(())
}

/// The machine's load average (1, 5, 15 minutes).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Writes `count` finished runs (created, started, completed; no steps)
/// through the runtime store directly, 32 at a time, without the latency
/// and, on a folder, without `fsync` (the seeding is not measured).
fn seed(store: &StoreArgs, base: &str, count: usize) -> anyhow::Result<()> {
    let unsynced = StoreArgs {
        no_fsync: true,
        ..store.clone()
    };
    let opened = unsynced.open(base)?;
    let runs = ObjectStoreRuntimeStore::new(opened.store, under(&opened.prefix, "runs"));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    tokio.block_on(
        futures::stream::iter(0..count)
            .map(|k| {
                let runs = &runs;
                async move {
                    let run_id = RunId::new(format!("retained-{k}"))?;
                    let new = NewRun {
                        run_id: run_id.clone(),
                        workflow: "support".into(),
                        input: Bytes::from_static(b"\x80"),
                        created_at_ms: now,
                        workflow_version: None,
                    };
                    runs.create_run(new).await?;
                    let start = Commit::status(StatusChange::start_attempt(1), now);
                    runs.atomic_apply(&run_id, start).await?;
                    let output = Bytes::from_static(b"\xa0");
                    let done = Commit::status(StatusChange::Completed { output }, now);
                    runs.atomic_apply(&run_id, done).await?;
                    Ok::<_, anyhow::Error>(())
                }
            })
            .buffer_unordered(32)
            .try_collect::<()>(),
    )
}

/// A running worker process.
struct Process {
    child: Child,
    stdin: ChildStdin,
}

impl Process {
    fn tell(&mut self, line: &str) {
        // A worker that died is reported by its exit status below.
        let _ = writeln!(self.stdin, "{line}");
        let _ = self.stdin.flush();
    }
}

/// Runs one configuration: `workers` processes, `args.runs` runs.
fn measure(args: &RunArgs, base: &str, retained: usize, workers: usize) -> anyhow::Result<Row> {
    let tag = format!("n{workers}");
    let exe = std::env::current_exe()?;
    let (lines_tx, lines) = mpsc::channel::<(usize, String)>();
    let mut processes = Vec::with_capacity(workers);
    for index in 0..workers {
        let share = args.runs / workers + usize::from(index < args.runs % workers);
        let shape = &args.shape;
        let mut child = Command::new(&exe)
            .arg("worker")
            .args(args.store.to_args())
            .args(["--prefix", base, "--tag", &tag])
            .args(["--index", &index.to_string(), "--runs", &share.to_string()])
            .args(["--inflight", &shape.inflight.to_string()])
            .args(["--concurrency", &shape.concurrency.to_string()])
            .args(["--poll-ms", &shape.poll_ms.to_string()])
            .args(["--signal-every", &shape.signal_every.to_string()])
            .args(["--signal-after-ms", &shape.signal_after_ms.to_string()])
            .args(["--call-ms", &shape.call_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let tx = lines_tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((index, line)).is_err() {
                    break;
                }
            }
        });
        processes.push(Process { child, stdin });
    }
    drop(lines_tx);

    let result = drive(&mut processes, &lines, args.runs, workers);
    for process in &mut processes {
        if result.is_err() {
            let _ = process.child.kill();
        }
        let _ = process.child.wait();
    }
    let (elapsed, reports, completed_by) = result?;
    Ok(Row::new(
        args,
        retained,
        workers,
        elapsed,
        &reports,
        &completed_by,
    ))
}

type Driven = (Duration, Vec<WorkerReport>, Vec<usize>);

/// Starts the workers together, relays completions, stops them once every
/// run completed and collects their reports.
fn drive(
    processes: &mut [Process],
    lines: &mpsc::Receiver<(usize, String)>,
    runs: usize,
    workers: usize,
) -> anyhow::Result<Driven> {
    let next = || {
        lines
            .recv_timeout(STALL)
            .map_err(|_| anyhow::anyhow!("no word from the workers for {STALL:?}"))
    };
    let mut ready = 0;
    while ready < workers {
        if next()?.1 == "ready" {
            ready += 1;
        }
    }
    let started = Instant::now();
    for process in processes.iter_mut() {
        process.tell("go");
    }
    let mut done = HashSet::new();
    let mut completed_by = vec![0; workers];
    while done.len() < runs {
        let (index, line) = next()?;
        let Some(run) = line.strip_prefix("done ") else {
            continue;
        };
        if done.insert(run.to_string()) {
            completed_by[index] += 1;
            let owner = submitter(run).ok_or_else(|| anyhow::anyhow!("a run id: {run}"))?;
            processes[owner].tell(&line);
        }
    }
    let elapsed = started.elapsed();
    for process in processes.iter_mut() {
        process.tell("stop");
    }
    let mut reports = Vec::with_capacity(workers);
    while reports.len() < workers {
        let (_, line) = next()?;
        if let Some(json) = line.strip_prefix("report ") {
            reports.push(serde_json::from_str(json)?);
        }
    }
    Ok((elapsed, reports, completed_by))
}

/// The worker that submitted `run` (`<tag>-w<index>-r<number>`).
fn submitter(run: &str) -> Option<usize> {
    let (rest, _) = run.rsplit_once("-r")?;
    let (_, index) = rest.rsplit_once("-w")?;
    index.parse().ok()
}

const HEADER: &str = "| store | retained | N | runs/s | runs/s/worker | steps/s | \
steps/s/worker | step p50 | step p99 | run p50 | run p99 | GET | PUT (create) | \
PUT (overwrite) | LIST | DELETE | HEAD | all | KB up | KB down | runs driven per worker |\n\
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// One configuration's figures.
struct Row {
    store: String,
    retained: usize,
    workers: usize,
    runs_per_s: f64,
    steps_per_s: f64,
    step_ms: (f64, f64),
    run_ms: (f64, f64),
    per_step: Counts,
    steps: f64,
    driven: (usize, usize),
    breakdown: BTreeMap<(String, String), u64>,
}

impl Row {
    fn new(
        args: &RunArgs,
        retained: usize,
        workers: usize,
        elapsed: Duration,
        reports: &[WorkerReport],
        completed_by: &[usize],
    ) -> Row {
        let mut total = Counts::default();
        let (mut step_us, mut run_us) = (Vec::new(), Vec::new());
        let mut breakdown = BTreeMap::new();
        for report in reports {
            total.add(&report.counts);
            for (request, object, n) in &report.breakdown {
                *breakdown
                    .entry((request.clone(), object.clone()))
                    .or_default() += n;
            }
            step_us.extend(&report.step_us);
            run_us.extend(&report.run_us);
        }
        let steps = (args.runs * STEPS.len()) as f64;
        let seconds = elapsed.as_secs_f64();
        let latency = args.store.latency().as_millis();
        Row {
            store: format!("{:?} +{latency} ms", args.store.store).to_lowercase(),
            retained,
            workers,
            runs_per_s: args.runs as f64 / seconds,
            steps_per_s: steps / seconds,
            step_ms: percentiles(&mut step_us),
            run_ms: percentiles(&mut run_us),
            per_step: total,
            steps,
            driven: (
                completed_by.iter().copied().min().unwrap_or(0),
                completed_by.iter().copied().max().unwrap_or(0),
            ),
            breakdown,
        }
    }

    /// The requests per step by request kind and object kind, most first.
    fn breakdown_markdown(&self) -> String {
        let mut rows: Vec<_> = self.breakdown.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut out = format!(
            "\n{}, {} retained, N = {}: requests per step by object\n\n\
             | request | object | per step |\n|---|---|---|\n",
            self.store, self.retained, self.workers
        );
        for ((request, object), n) in rows {
            let per = *n as f64 / self.steps;
            out.push_str(&format!("| {request} | {object} | {per:.3} |\n"));
        }
        out
    }

    fn markdown(&self) -> String {
        let n = self.workers as f64;
        let c = &self.per_step;
        let per = |x: u64| x as f64 / self.steps;
        format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} ms | {:.1} ms | {:.0} ms | \
             {:.0} ms | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | **{:.2}** | {:.2} | {:.2} | {}–{} |",
            self.store,
            self.retained,
            self.workers,
            self.runs_per_s,
            self.runs_per_s / n,
            self.steps_per_s,
            self.steps_per_s / n,
            self.step_ms.0,
            self.step_ms.1,
            self.run_ms.0,
            self.run_ms.1,
            per(c.gets),
            per(c.creates),
            per(c.overwrites),
            per(c.lists),
            per(c.deletes),
            per(c.heads),
            per(c.requests()),
            per(c.bytes_put) / 1024.0,
            per(c.bytes_read) / 1024.0,
            self.driven.0,
            self.driven.1,
        )
    }
}

/// The p50 and p99 of `samples` (µs), in ms.
fn percentiles(samples: &mut [u64]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort_unstable();
    let at = |q: f64| {
        let index = ((samples.len() - 1) as f64 * q).round() as usize;
        samples[index] as f64 / 1000.0
    };
    (at(0.50), at(0.99))
}
