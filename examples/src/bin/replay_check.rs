//! The pre-deploy replay check: replays the stored runs of a workflow against
//! new code, reads only, and exits 1 if a run would not replay.
//!
//! `seed` leaves runs of the old code open (each sent its welcome e-mail and
//! waits for the signal "verified"); `check` replays them against the new
//! code, which sends an SMS too behind the patch "sms" (compatible), or with
//! `--broken` renames the welcome step without a patch (every run breaks):
//!
//! ```text
//! cargo run -p memo-examples --bin replay_check -- --store target/memo-replay seed
//! cargo run -p memo-examples --bin replay_check -- --store target/memo-replay check
//! cargo run -p memo-examples --bin replay_check -- --store target/memo-replay check --broken
//! ```
//!
//! `--store` takes a folder or a URL (`file:///...`, `s3://bucket/prefix` with
//! the `aws` feature): in CI, point it at a copy of production's runs.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use clap::{Parser, Subcommand};
use memo_examples::open_store;
use memo_runtime::workflow::{Context, ReplayCheck, Runtime, Workflow};
use memo_runtime::{Error, RunId};

#[derive(Parser)]
struct Args {
    /// A folder, or a store URL (`file:///path`, `s3://bucket/prefix`, ...).
    #[arg(long, default_value = "target/memo-replay")]
    store: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts runs of the old code; each stays open, waiting for a signal.
    Seed {
        /// How many runs.
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
    /// Replays the open runs against the new code.
    Check {
        /// Check a change that renames a step without a patch.
        #[arg(long)]
        broken: bool,
    },
}

/// A run of the workflow, boxed so that every version of the code has one type.
type Running = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// Which code the workflow "onboarding" runs.
#[derive(Clone, Copy)]
enum Code {
    /// welcome, wait for "verified", done.
    Old,
    /// welcome, `patched("sms")` → sms, wait for "verified", done.
    Patched,
    /// greet (renamed from welcome, no patch), wait for "verified", done.
    Broken,
}

fn onboarding(code: Code) -> Workflow<impl Fn(Context, String) -> Running + Send + Sync + Clone> {
    Workflow::new("onboarding", move |ctx: Context, user: String| -> Running {
        Box::pin(async move {
            let first = if matches!(code, Code::Broken) {
                "greet"
            } else {
                "welcome"
            };
            ctx.step_with(first, &user, |_memo, user| async move {
                Ok::<_, Error>(format!("e-mailed {user}"))
            })
            .await?;
            if matches!(code, Code::Patched) && ctx.patched("sms").await? {
                ctx.step_with("sms", &user, |_memo, user| async move {
                    Ok::<_, Error>(format!("texted {user}"))
                })
                .await?;
            }
            ctx.wait_for_signal::<()>("verified").await?;
            ctx.step("done", |_memo| async move { Ok::<_, Error>(()) })
                .await
        })
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stores = open_store(&args.store)?;
    match args.command {
        Command::Seed { runs } => {
            let runtime = Runtime::builder()
                .memo_store(stores.memo)
                .runtime_store(stores.runs)
                .signal_wait(Duration::ZERO)
                .build()?;
            let old = onboarding(Code::Old);
            for i in 0..runs {
                let run = RunId::new(format!("onboarding-{i}"))?;
                match runtime.run(&run, &format!("user-{i}"), &old).await {
                    Err(Error::Suspended { .. }) => {
                        println!("{run}: open, waiting for \"verified\"")
                    }
                    other => println!("{run}: {other:?}"),
                }
            }
        }
        Command::Check { broken } => {
            let new = onboarding(if broken { Code::Broken } else { Code::Patched });
            let report = ReplayCheck::new(stores.runs).open_runs().run(&new).await?;
            print!("{report}");
            let old_branch = report.open_runs_on_old_branch("sms");
            println!(
                "open runs on the old branch of patch \"sms\": {}",
                old_branch.len()
            );
            if !report.is_clean() {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}
