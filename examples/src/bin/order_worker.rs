//! A queue worker for order runs, for running many of them at once on one
//! store: each order is a workflow of three steps, and each step does one
//! side effect (reserve stock, charge the card, send an e-mail) that is
//! memoized, so it commits once however many workers race on the order.
//!
//! Every worker is handed the same orders (as an at-least-once queue would
//! redeliver them) and works through them until each one has completed,
//! printing `completed <run> <outputs>` per order. The fake side effects log
//! to `--effects`, which all workers share:
//!
//! - `check <run> <step> <token>` before the memo is read,
//! - `exec <run> <step> <token>` when the side effect runs (a memo miss),
//! - `committed <run> <step> <token>` when that execution's result is the one
//!   committed,
//!
//! where `<token>` names one execution attempt. A `check` written after the
//! step's `committed` line started reading after the commit had landed, so
//! its side effect must not run.
//!
//! ```text
//! cargo run -p memo-examples --bin order_worker -- \
//!     --store file:///tmp/memo-orders --effects /tmp/effects.log --worker a --orders 8
//! ```
//!
//! S3 settings come from the usual `AWS_*` variables (`AWS_ENDPOINT`,
//! `AWS_REGION`, credentials) or `--option key=value`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser;
use memo_runtime::workflow::{Context, Runtime, Workflow, WorkflowFn};
use memo_runtime::{
    Error, ErrorKind, Memo, MemoStore, RunId, runtime_store::ObjectStoreRuntimeStore,
    store::store_from_url,
};

/// Works through the same order runs as every other worker on the store.
#[derive(Parser)]
struct Args {
    /// Store URL shared by all workers: `file:///path`, `s3://bucket/prefix`, ...
    #[arg(long)]
    store: String,
    /// Store option `key=value` (for example `endpoint=http://127.0.0.1:9000`).
    #[arg(long = "option", value_parser = parse_option)]
    options: Vec<(String, String)>,
    /// File every worker appends its side-effect log to.
    #[arg(long)]
    effects: PathBuf,
    /// This worker's name, written into its tokens.
    #[arg(long)]
    worker: String,
    /// How many orders (`order-0` ... `order-N-1`) to work through.
    #[arg(long, default_value_t = 8)]
    orders: u32,
    /// Start at this order and wrap around, so workers collide in different
    /// places.
    #[arg(long, default_value_t = 0)]
    start: u32,
    /// Crash (exit with status 3) right after this many side effects have
    /// run, before the last one's memo entry commits.
    #[arg(long)]
    crash_after_effects: Option<u64>,
    /// Crash (exit with status 3) right after this many memo entries have
    /// committed, before the last one's step commits: whoever resumes the
    /// step must find the entry, not run the side effect again.
    #[arg(long)]
    crash_after_commits: Option<u64>,
    /// How long each side effect takes, in milliseconds: the window in which
    /// racing workers both miss.
    #[arg(long, default_value_t = 0)]
    effect_ms: u64,
    /// How long a worker's attempt holds an order's run without renewing,
    /// in milliseconds: a crashed worker's orders are taken over after this.
    #[arg(long, default_value_t = 60_000)]
    lease_ms: u64,
    /// Wait until this file exists before starting, so that workers started
    /// one by one begin together.
    #[arg(long)]
    go: Option<PathBuf>,
}

fn parse_option(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected key=value, got {s:?}"))
}

/// How often a worker retries an order that another worker holds.
const MAX_TRIES_PER_ORDER: u32 = 400;

const STEPS: [&str; 3] = ["reserve", "charge", "email"];

/// The shared side-effect log and this worker's execution counter.
struct Effects {
    worker: String,
    log: Mutex<File>,
    /// Numbers the tokens: one per memo read.
    checks: AtomicU64,
    executions: AtomicU64,
    commits: AtomicU64,
    crash_after_effects: Option<u64>,
    crash_after_commits: Option<u64>,
    duration: Duration,
}

impl Effects {
    /// One line per write: appends of one small write never interleave.
    fn log(&self, line: String) {
        let mut file = self.log.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(format!("{line}\n").as_bytes())
            .expect("append to the effects log");
    }

    /// Does step `step` of `run` once: the memoized side effect.
    async fn perform(&self, memo: &Memo, step: &str) -> memo_runtime::Result<String> {
        let run = memo.run_id();
        let n = self.checks.fetch_add(1, Ordering::Relaxed);
        let token = format!("{}.{}.{n}", self.worker, std::process::id());
        let key = (step, run.as_str());
        self.log(format!("check {run} {step} {token}"));
        if let Some(committed) = memo.content_get(&key).await? {
            return Ok(String::from_utf8_lossy(&committed).into_owned());
        }
        let ran = self.executions.fetch_add(1, Ordering::Relaxed) + 1;
        self.log(format!("exec {run} {step} {token}"));
        tokio::time::sleep(self.duration).await;
        if self.crash_after_effects == Some(ran) {
            // The side effect happened; its result never commits.
            std::process::exit(3);
        }
        let committed = memo.content_put(&key, token.as_bytes()).await?;
        let committed = String::from_utf8_lossy(&committed).into_owned();
        if committed == token {
            self.log(format!("committed {run} {step} {token}"));
            let commits = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
            if self.crash_after_commits == Some(commits) {
                std::process::exit(3);
            }
        }
        Ok(committed)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let opened = store_from_url(&args.store, args.options.clone())
        .with_context(|| format!("opening {}", args.store))?;
    memo_runtime::store::probe_conditional_create(opened.store.as_ref(), &opened.prefix).await?;
    let runtime = Runtime::builder()
        .memo_store(
            MemoStore::new(opened.store.clone(), opened.prefix.clone().join("memo"))
                .with_seal(opened.seal.clone()),
        )
        .runtime_store(Arc::new(
            ObjectStoreRuntimeStore::new(opened.store, opened.prefix.join("runtime"))
                .with_seal(opened.seal),
        ))
        .lease(Duration::from_millis(args.lease_ms))
        .worker_id(args.worker.clone())
        .build()?;
    let effects = Arc::new(Effects {
        worker: args.worker.clone(),
        log: Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&args.effects)
                .with_context(|| format!("opening {}", args.effects.display()))?,
        ),
        checks: AtomicU64::new(0),
        executions: AtomicU64::new(0),
        commits: AtomicU64::new(0),
        crash_after_effects: args.crash_after_effects,
        crash_after_commits: args.crash_after_commits,
        duration: Duration::from_millis(args.effect_ms),
    });
    if let Some(go) = &args.go {
        while !go.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let order = Workflow::new("order", move |ctx: Context, _order: u32| {
        let effects = Arc::clone(&effects);
        async move {
            let mut outputs = Vec::new();
            for step in STEPS {
                let out = ctx
                    .step_with(step, &*effects, |memo, effects| async move {
                        effects.perform(&memo, step).await
                    })
                    .await?;
                outputs.push(out);
            }
            Ok::<_, Error>(outputs)
        }
    });

    for i in (0..args.orders).map(|i| (i + args.start) % args.orders) {
        let run = RunId::new(format!("order-{i}"))?;
        let outputs = complete(&runtime, &run, i, &order).await?;
        println!("completed {run} {}", outputs.join(","));
    }
    Ok(())
}

/// Runs `run` until it has completed, waiting while another worker holds it.
async fn complete(
    runtime: &Runtime,
    run: &RunId,
    input: u32,
    order: &Workflow<impl WorkflowFn<u32, Output = Vec<String>, Error = Error>>,
) -> anyhow::Result<Vec<String>> {
    for _ in 0..MAX_TRIES_PER_ORDER {
        match runtime.run(run, &input, order).await {
            Ok(outputs) => return Ok(outputs),
            // Another worker holds the run (its lease is live, or it started
            // this attempt or committed a step first), or took it over from
            // us: the run goes on there; look again shortly.
            Err(e) if matches!(e.kind(), ErrorKind::Conflict | ErrorKind::Lease) => {
                tokio::time::sleep(Duration::from_millis(25)).await
            }
            Err(e) => return Err(e).with_context(|| format!("running {run}")),
        }
    }
    bail!("{run} did not complete after {MAX_TRIES_PER_ORDER} tries")
}
