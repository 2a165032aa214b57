//! Retention: runs that ended at different (simulated) times, one that has
//! not ended, and a sweep with a short retention. The sweep removes what the
//! runs that ended before the cutoff left behind (memo entries, step
//! outputs, run records, terminal markers) and keeps everything else.
//!
//! ```text
//! cargo run -p memo-examples --bin retention
//! cargo run -p memo-examples --bin retention -- --retention 3d
//! ```
//!
//! Time is a `ManualClock` set to each run's end in turn, so the ages are
//! reproducible; a deployment uses the system clock and
//! `runtime.retention_sweeper().spawn(interval)`.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use clap::Parser;
use memo_examples::{DEFAULT_STORE, open_store, table};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, Memo, RunId, clock::ManualClock, memoized};

/// Runs a few workflows at simulated times, then sweeps.
#[derive(Parser)]
struct Args {
    /// Where the runs and memo entries live: a folder, or a store URL.
    #[arg(long, default_value = DEFAULT_STORE)]
    store: String,
    /// How long ended runs are kept (`36h`, `3d`).
    #[arg(long, default_value = "24h")]
    retention: String,
}

const HOUR_MS: u64 = 3_600_000;

/// The simulated "now" of the sweep: 2025-01-06 00:00 UTC, in the past, so
/// no run of the other examples sharing the store is ever older than the
/// cutoff.
const NOW_MS: u64 = 1_736_121_600_000;

/// The runs: their ids and how many hours before "now" each ended (`None`:
/// it waits for a signal and has not ended).
const RUNS: [(&str, Option<u64>); 5] = [
    ("nightly-2025-01-02", Some(96)),
    ("nightly-2025-01-03", Some(72)),
    ("nightly-2025-01-04", Some(30)),
    ("nightly-2025-01-05", Some(6)),
    ("review-2025-01-01", None),
];

#[memoized]
async fn summarize(memo: &Memo, day: &str) -> Result<String, Error> {
    Ok(format!("summary of {day}"))
}

fn date(ms: u64) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(time).to_string()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let retention = humantime::parse_duration(&args.retention)?;
    let stores = open_store(&args.store)?;
    let clock = Arc::new(ManualClock::new(NOW_MS));
    let runtime = Runtime::builder()
        .memo_store(stores.memo)
        .runtime_store(stores.runs)
        .clock(clock.clone())
        .retention(retention)
        .build()?;
    let nightly = Workflow::new("nightly", |ctx: Context, day: String| async move {
        let summary = ctx
            .step_with("summarize", &day, |memo, day| async move {
                summarize(&memo, day).await
            })
            .await?;
        if day.starts_with("review") {
            // Waits for a reviewer who never comes: the run stays open.
            let _: bool = ctx.wait_for_signal("reviewed").await?;
        }
        Ok::<_, Error>(summary)
    });

    println!("store {}", stores.url);
    for (id, ended_hours_ago) in RUNS {
        // An open run started five days ago; the others end at their time.
        clock.set_ms(NOW_MS - ended_hours_ago.unwrap_or(120) * HOUR_MS);
        match runtime
            .run(&RunId::new(id)?, &id.to_string(), &nightly)
            .await
        {
            Ok(_) | Err(Error::Suspended { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }

    clock.set_ms(NOW_MS);
    let preview = runtime.retention_sweeper_builder().dry_run(true).build();
    let would = preview.sweep_now().await?;
    let swept = runtime.retention_sweeper().sweep_now().await?;
    println!(
        "simulated now {}, retention {}: runs that ended before {} expire",
        date(NOW_MS),
        args.retention,
        date(swept.cutoff_ms),
    );
    println!(
        "dry run first: would remove {} runs ({} memo entries); then the sweep:\n",
        would.runs_cleared, would.entries_deleted
    );

    let mut rows = Vec::new();
    for (id, ended_hours_ago) in RUNS {
        let after = match runtime.status(&RunId::new(id)?).await? {
            None => "removed: memo entries, run record, marker".to_string(),
            Some(record) if record.status.is_terminal() => "kept: within the retention".into(),
            Some(record) => format!(
                "kept: not ended ({})",
                record.status.to_string().to_lowercase()
            ),
        };
        let ended = match ended_hours_ago {
            Some(hours) => format!("{} ({hours} h ago)", date(NOW_MS - hours * HOUR_MS)),
            None => "-".into(),
        };
        rows.push(vec![id.to_string(), ended, after]);
    }
    print!(
        "{}",
        table(&["run", "ended (simulated)", "after the sweep"], &rows)
    );
    println!(
        "\nremoved {} runs: {} memo entries and step outputs, {} run records; kept {}",
        swept.runs_cleared,
        swept.entries_deleted,
        swept.runtime_runs_deleted,
        RUNS.len() - swept.runs_cleared,
    );
    Ok(())
}
