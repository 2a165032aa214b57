//! A worker that runs one long workflow run, for killing at random moments:
//! `examples/tests/crash_loop.rs` starts it, kills it with SIGKILL, and
//! starts it again until the run completes.
//!
//! The run `--run` (default `crash-loop`) has `--steps` steps; step `i` makes one memoized
//! side effect. Every execution is logged to the append-only `--effects`
//! file, one line per write:
//!
//! - `check <step> <token>` before the memoized call reads its memo entry,
//! - `exec <step> <token>` when the side effect runs (a memo miss),
//! - `committed <step> <token>` once that execution's value is the
//!   committed one,
//!
//! where `<token>` names one call in one process. A `check` written after
//! the step's `committed` line read the memo after the entry had landed, so
//! its side effect must not run. A restarted worker waits for the killed
//! one's lease (`--lease-ms`) to expire. When the run completes it prints
//! `output <value of step 0>,<value of step 1>,...`.
//!
//! ```text
//! cargo run -p memo-examples --bin crash_loop_worker -- \
//!     --store file:///tmp/memo-crash-loop --effects /tmp/effects.log --steps 40
//! ```

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use memo_examples::open_store_with;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, ErrorKind, Memo, RunId, memoized};

/// Runs the `crash-loop` run to completion, resuming it if it exists.
#[derive(Parser)]
struct Args {
    /// Store URL: `file:///path`, `s3://bucket/prefix`, ...
    #[arg(long)]
    store: String,
    /// Store option `key=value` (for example `fsync=false`).
    #[arg(long = "option", value_parser = parse_option)]
    options: Vec<(String, String)>,
    /// The append-only file every execution is logged to.
    #[arg(long)]
    effects: PathBuf,
    /// The run's id.
    #[arg(long, default_value = "crash-loop")]
    run: String,
    /// How many steps the run has.
    #[arg(long, default_value_t = 40)]
    steps: u32,
    /// The attempt lease, in milliseconds: a killed worker's lease must
    /// expire before the next one takes the run over.
    #[arg(long, default_value_t = 100)]
    lease_ms: u64,
    /// How long each side effect takes, in milliseconds: the window between
    /// running it and committing its value.
    #[arg(long, default_value_t = 1)]
    effect_ms: u64,
}

/// The effects log and this process's call counter.
struct Effects {
    log: Mutex<File>,
    calls: AtomicU64,
    duration: Duration,
}

impl Effects {
    fn log(&self, line: String) {
        let mut file = self.log.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(format!("{line}\n").as_bytes())
            .expect("append to the effects log");
    }

    fn token(&self) -> String {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        format!("{}.{n}", std::process::id())
    }
}

/// The side effect of step `step`: logged, slow, and memoized.
#[memoized(skip(effects, token))]
async fn effect(memo: &Memo, effects: &Effects, token: &str, step: u32) -> Result<String, Error> {
    effects.log(format!("exec {step} {token}"));
    tokio::time::sleep(effects.duration).await;
    Ok(token.to_string())
}

/// One step: check, call, and say whether this call's value committed.
async fn step(memo: Memo, effects: Arc<Effects>, step: u32) -> Result<String, Error> {
    let token = effects.token();
    effects.log(format!("check {step} {token}"));
    let value = effect(&memo, &effects, &token, step).await?;
    if value == token {
        effects.log(format!("committed {step} {token}"));
    }
    Ok(value)
}

fn parse_option(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected key=value, got {s:?}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stores = open_store_with(&args.store, &args.options)?;
    let runtime = Runtime::builder()
        .memo_store(stores.memo)
        .runtime_store(stores.runs)
        .lease(Duration::from_millis(args.lease_ms))
        .build()?;
    let effects = Arc::new(Effects {
        log: Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&args.effects)
                .with_context(|| format!("opening {}", args.effects.display()))?,
        ),
        calls: AtomicU64::new(0),
        duration: Duration::from_millis(args.effect_ms),
    });
    let workflow = Workflow::new("crash-loop", move |ctx: Context, steps: u32| {
        let effects = Arc::clone(&effects);
        async move {
            let mut outputs = Vec::new();
            for i in 0..steps {
                let effects = Arc::clone(&effects);
                let name = format!("step-{i}");
                outputs.push(
                    ctx.step(name, move |memo| step(memo, Arc::clone(&effects), i))
                        .await?,
                );
            }
            Ok::<_, Error>(outputs)
        }
    });
    let run = RunId::new(args.run)?;
    loop {
        match runtime.run(&run, &args.steps, &workflow).await {
            Ok(outputs) => {
                println!("output {}", outputs.join(","));
                return Ok(());
            }
            // The killed worker's lease (wait for it to expire), or this
            // attempt's own, lost on a machine slow enough for the short
            // lease to expire under it: as a queue would, deliver again.
            Err(e) if e.kind() == ErrorKind::Lease => {
                tokio::time::sleep(Duration::from_millis(args.lease_ms / 4 + 1)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
