//! `memoctl sweep --retention 7d [--dry-run]`: clear expired runs, and
//! expired entries of the shared scope (`#[memoized(scope = shared)]`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::{TryStreamExt, future};
use memo_runtime::retention::{RetentionSweeper, SweepReport};
use memo_runtime::shared::SharedSweep;
use serde_json::json;

use crate::output::{self, now_ms, outln, print_json, time};
use crate::progress::Progress;
use crate::store::Store;

/// Sweeps the runs whose terminal marker is older than `retention`: their
/// memo entries, step outputs, runtime records, then their marker, with the
/// runtime store's check that each run is terminal there. Then the shared
/// entries whose time to live ran out (their own expiry, whatever
/// `retention` says). Fails (after reporting) if any run or shared entry
/// could not be cleared; its marker is kept for the next sweep.
pub(crate) async fn sweep(
    store: &Store,
    retention: Duration,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let sweeper = sweeper(store, retention, dry_run);
    let now = now_ms();
    let cutoff = sweeper.cutoff_ms(now);
    // Counted as they stream by, so that sizing the bar holds one listing
    // page, not every expired marker of a bucket with millions of them.
    let expired = store
        .memo
        .markers()
        .expired(cutoff)
        .try_fold(0, |n, _| future::ready(Ok(n + 1)))
        .await
        .with_context(|| format!("cannot list expired markers in {}", store.url))?;
    let progress = Progress::new(expired, if dry_run { "counting" } else { "sweeping" });
    progress.listen()?;
    let report = sweeper.sweep_once(now).await;
    progress.finish();
    let report = report.with_context(|| format!("the sweep of {} stopped", store.url))?;
    // The pass swept the shared scope too, at `now` (each entry has its own
    // time to live, whatever `retention` says).
    let shared = shared_of(&report, now);
    if json {
        let mut out = report_json(&report, retention);
        out["shared"] = shared_json(&shared);
        print_json(&out);
    } else {
        print_report(&report, retention);
        print_shared(&shared, report.dry_run);
    }
    Ok(if report.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The sweeper of `memoctl sweep` and of the inspector's sweep action and
/// dry run: the memo store's expired runs, with the runtime store's records
/// and its check that each run is terminal there.
pub(crate) fn sweeper(store: &Store, retention: Duration, dry_run: bool) -> RetentionSweeper {
    RetentionSweeper::builder(store.memo.clone(), retention)
        .runtime_store(Arc::clone(&store.runs) as _)
        .dry_run(dry_run)
        .build()
}

/// What the pass at `now_ms` did to the shared entries expired by then.
fn shared_of(report: &SweepReport, now_ms: u64) -> SharedSweep {
    let mut shared = SharedSweep::default();
    shared.cutoff_ms = now_ms;
    shared.markers_expired = report.shared_markers_expired;
    shared.entries_deleted = report.shared_entries_deleted;
    shared.failures = report.shared_failures;
    shared
}

fn print_shared(shared: &SharedSweep, dry_run: bool) {
    let deleted = if dry_run {
        "shared entries to delete"
    } else {
        "shared entries deleted"
    };
    outln!(
        "shared entries that expired before {}:",
        time(shared.cutoff_ms)
    );
    let lines = [
        ("expired shared markers", shared.markers_expired),
        (
            deleted,
            if dry_run {
                shared.markers_expired
            } else {
                shared.entries_deleted
            },
        ),
        ("shared failures", shared.failures),
    ];
    for (what, n) in lines {
        outln!("{what:<26} {n}");
    }
}

fn shared_json(shared: &SharedSweep) -> serde_json::Value {
    json!({
        "cutoff_ms": shared.cutoff_ms,
        "markers_expired": shared.markers_expired,
        "entries_deleted": shared.entries_deleted,
        "failures": shared.failures,
    })
}

fn print_report(report: &SweepReport, retention: Duration) {
    let (cleared, deleted) = if report.dry_run {
        ("runs to clear", "entries to delete")
    } else {
        ("runs cleared", "entries deleted")
    };
    let runtime = if report.dry_run {
        "runtime records to delete"
    } else {
        "runtime records deleted"
    };
    outln!(
        "retention {}: runs that ended before {} are expired{}",
        output::retention(retention),
        time(report.cutoff_ms),
        if report.dry_run {
            " (dry run: nothing deleted)"
        } else {
            ""
        }
    );
    let lines = [
        ("expired markers", report.markers_expired),
        (cleared, report.runs_cleared),
        (deleted, report.entries_deleted),
        (runtime, report.runtime_runs_deleted),
        ("failures", report.failures.len()),
        ("swept runs rechecked", report.rechecks_due),
        ("late objects deleted", report.late_objects_deleted),
        ("recheck failures", report.recheck_failures),
    ];
    for (what, n) in lines {
        outln!("{what:<26} {n}");
    }
    for failure in &report.failures {
        outln!(
            "failed: run {}: {} (its marker is kept)",
            failure.run_id,
            failure.message
        );
    }
}

fn report_json(report: &SweepReport, retention: Duration) -> serde_json::Value {
    json!({
        "retention": output::retention(retention),
        "cutoff_ms": report.cutoff_ms,
        "dry_run": report.dry_run,
        "markers_expired": report.markers_expired,
        "runs_cleared": report.runs_cleared,
        "entries_deleted": report.entries_deleted,
        "runtime_runs_deleted": report.runtime_runs_deleted,
        "rechecks_due": report.rechecks_due,
        "late_objects_deleted": report.late_objects_deleted,
        "recheck_failures": report.recheck_failures,
        "failures": report.failures.iter().map(|f| json!({
            "run_id": f.run_id.as_str(),
            "terminal_at_ms": f.terminal_at_ms,
            "message": f.message,
        })).collect::<Vec<_>>(),
    })
}
