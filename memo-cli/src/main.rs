//! `memoctl`: look inside a memo store and operate it without writing code.
//!
//! Every command opens the store a URL names (`file:///var/lib/memo`,
//! `s3://bucket/prefix`, `gs://…`, `az://…`, as `memo_runtime::store::store_from_url`
//! reads them), finds the memo store and the runtime store under
//! `--memo-prefix` and `--runs-prefix` within it, and prints a table, or JSON
//! with `--json`. Errors go to stderr with a non-zero exit status.

// Every line goes through `output`'s macros, which never panic on a closed
// pipe.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod commands;
mod output;
mod progress;
mod serve;
mod store;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use memo_runtime::runtime_store::RunStatus;

use crate::output::errln;
use crate::store::StoreArgs;

/// Look inside a memo store and operate it: runs, signals, terminal markers,
/// retention sweeps.
#[derive(Debug, Parser)]
#[command(name = "memoctl", version)]
struct Cli {
    #[command(flatten)]
    store: StoreArgs,
    /// Print JSON (one document on stdout) instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Lists runs: id, workflow, status, attempts, steps, last change, and
    /// the workflow version each run started on (`-`: none).
    Runs {
        /// Only runs in this status (pending, running, completed, failed,
        /// cancelled).
        #[arg(long, value_parser = parse_status)]
        status: Option<RunStatus>,
        /// Only runs of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Only open runs suspended in a wait (a timer, a signal, a
        /// deadline), with what they wait for and until when.
        #[arg(long, conflicts_with = "status")]
        waiting: bool,
        /// List one page of at most this many runs (of `--status`, or of
        /// every status in turn; in the store's listing order), reading
        /// only those runs, and print the cursor of the next page.
        #[arg(long, conflicts_with = "waiting", value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        /// The page after this run (the cursor the page before printed).
        #[arg(long, requires = "limit", allow_hyphen_values = true)]
        after: Option<String>,
        /// Order the runs listed (the page, with `--limit`) by what they
        /// cost, most first: their cost ledger's requests at S3 Standard
        /// list prices plus the declared cost of their memoized calls that
        /// ran (one listing and a read per attempt for each run).
        #[arg(long, value_enum, conflicts_with = "waiting")]
        sort: Option<commands::Sort>,
    },
    /// Shows one run: its record and lease, its steps with their receipts,
    /// the signals delivered to it, its memo entries with their sizes, and
    /// its cost ledger (what each attempt cost).
    Show {
        /// The run id (one that starts with `-` too).
        #[arg(allow_hyphen_values = true)]
        run: String,
    },
    /// Sends a signal to a run, as `Runtime::signal` does.
    Signal {
        /// The run id (one that starts with `-` too).
        #[arg(allow_hyphen_values = true)]
        run: String,
        /// The signal's name (what the workflow's `wait_for_signal` waits for).
        name: String,
        /// The signal's payload as JSON (default: `null`).
        #[arg(long, default_value = "null")]
        payload: String,
    },
    /// Cancels a run, as `Runtime::cancel` does: an idle run ends at once; a
    /// running one at its worker's next step boundary or wait.
    Cancel {
        /// The run id.
        run: String,
        /// Why (recorded as the run's error).
        #[arg(long, default_value = "cancelled by memoctl")]
        reason: String,
    },
    /// Forgets an ended run: clears its entries and records, then deletes
    /// its data keys, so none of its data can be read again (even from
    /// bucket versions or a copy of the bucket), then clears what its
    /// earlier incarnations left. Needs per-run data keys
    /// (`--option data_key_store=URL --option key_encryption_key_file=PATH`).
    Forget {
        /// The run id.
        run: String,
    },
    /// Wraps every data key again with the current version of the
    /// key-encryption key file (the highest not marked `staged`), rewriting
    /// the key store only, never the data; afterwards older versions can be
    /// removed from the file. Fails, after rewrapping, if a process made
    /// keys with an older version meanwhile (it has not got the current one).
    Rewrap,
    /// Counts the store's objects by the encryption key they need (the
    /// key version of the store keyring each is sealed with, a read of each
    /// object's first bytes) and, with per-run data keys, the data keys by
    /// the key-encryption key version wrapping them: a version is dropped
    /// from a key file only once no object or data key needs it. Values
    /// stored in plaintext (before encryption was on) are counted apart
    /// from what memo never encrypts: `accept_plaintext` goes off once
    /// there are none.
    Keys,
    /// Lists terminal markers: which runs ended when, and which expired.
    Markers {
        /// Only markers older than the retention.
        #[arg(long)]
        expired: bool,
        #[command(flatten)]
        retention: Retention,
        /// List one page of at most this many markers (oldest first),
        /// listing only the hours of markers the page reaches, and print
        /// the cursor of the next page.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        /// The page after this marker (the cursor the page before printed).
        #[arg(long, requires = "limit")]
        after: Option<String>,
    },
    /// Clears the runs whose terminal marker is older than the retention:
    /// their memo entries, step outputs and runtime records.
    Sweep {
        /// How long terminal runs are kept (`7d`, `12h`, `30m`).
        #[arg(long, value_parser = humantime::parse_duration)]
        retention: Duration,
        /// Count what would be deleted; delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Copies chosen runs, with what their replay needs (records, logs,
    /// checkpoints, signals, memo entries), into a local folder, to keep
    /// as test fixtures: `--store file://DIR` reads the copy as a store.
    Export {
        /// The folder to copy into (created if missing).
        #[arg(long, value_name = "DIR")]
        to: std::path::PathBuf,
        /// Only these runs (every run if none is named).
        #[arg(allow_hyphen_values = true)]
        runs: Vec<String>,
        /// Only runs of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Only runs in this status (pending, running, completed, failed,
        /// cancelled).
        #[arg(long, value_parser = parse_status)]
        status: Option<RunStatus>,
    },
    /// Checks that the store refuses a second conditional create, which
    /// memo's write-once entries need.
    Probe,
    /// Serves a web inspector of the store: runs, their steps and signals,
    /// retention; and, unless `--read-only`, signals, cancellations and
    /// sweeps. Listens on 127.0.0.1 unless told otherwise.
    Serve(serve::ServeArgs),
}

#[derive(Debug, Args)]
struct Retention {
    /// How long terminal runs are kept (`7d`, `12h`, `30m`).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "7d")]
    retention: Duration,
}

fn parse_status(s: &str) -> Result<RunStatus, String> {
    RunStatus::ALL
        .into_iter()
        .find(|status| status.to_string().eq_ignore_ascii_case(s))
        .ok_or_else(|| {
            let known: Vec<_> = RunStatus::ALL
                .iter()
                .map(|s| s.to_string().to_lowercase())
                .collect();
            format!("expected one of {}", known.join(", "))
        })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&anyhow::Error::new(e).context("cannot start the async runtime")),
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

fn fail(error: &anyhow::Error) -> ExitCode {
    errln!("memoctl: error: {error:#}");
    ExitCode::FAILURE
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let store = cli.store.open()?;
    let json = cli.json;
    match cli.command {
        Command::Runs {
            status,
            workflow,
            waiting,
            limit,
            after,
            sort,
        } => match limit {
            Some(limit) => {
                let limit = usize::try_from(limit).unwrap_or(usize::MAX);
                let page = commands::Page {
                    status,
                    after: after.as_deref(),
                    limit,
                };
                commands::runs_page(&store, page, workflow.as_deref(), sort, json).await
            }
            None => {
                let listing = commands::Listing {
                    status,
                    workflow: workflow.as_deref(),
                    waiting,
                    sort,
                };
                commands::runs(&store, listing, json).await
            }
        },
        Command::Show { run } => commands::show(&store, &run, json).await,
        Command::Signal { run, name, payload } => {
            commands::signal(&store, &run, &name, &payload, json).await
        }
        Command::Cancel { run, reason } => commands::cancel(&store, &run, &reason, json).await,
        Command::Forget { run } => commands::forget(&store, &run, json).await,
        Command::Rewrap => commands::rewrap(&store, json).await,
        Command::Keys => commands::keys(&store, json).await,
        Command::Markers {
            expired,
            retention,
            limit,
            after,
        } => {
            let page = limit.map(|limit| commands::MarkersPage {
                after: after.as_deref(),
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            });
            commands::markers(&store, expired, retention.retention, page, json).await
        }
        Command::Sweep { retention, dry_run } => {
            commands::sweep(&store, retention, dry_run, json).await
        }
        Command::Export {
            to,
            runs,
            workflow,
            status,
        } => {
            let selection = commands::Selection {
                runs: &runs,
                workflow: workflow.as_deref(),
                status,
            };
            commands::export(&store, &to, selection, json).await
        }
        Command::Probe => commands::probe(&store, json).await,
        Command::Serve(args) => serve::serve(store, args).await,
    }
}
