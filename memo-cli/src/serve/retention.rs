//! The retention page: terminal markers by time, what a sweep would remove
//! (a dry run), and the sweep itself, through the sweeper `memoctl sweep`
//! builds.

use anyhow::Context as _;
use axum::Form;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use futures::{StreamExt as _, TryStreamExt as _};
use maud::{Markup, html};
use memo_runtime::retention::{SweepReport, TerminalMarker};
use serde::Deserialize;

use super::page::{Failure, frame, when};
use super::{Inspector, Shared};
use crate::commands::sweeper;
use crate::output::{self, now_ms};

/// Markers one page lists at most.
pub(crate) const MARKERS_SHOWN: usize = 100;

/// The retention page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RetentionQuery {
    /// `all`: every marker, oldest first; otherwise the expired ones.
    markers: String,
    /// Non-empty: count what a sweep would remove (a dry run).
    count: String,
}

/// The sweep's form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SweepForm {
    csrf: String,
}

/// `GET /retention`.
pub(crate) async fn show(
    State(inspector): State<Shared>,
    Query(query): Query<RetentionQuery>,
) -> Result<Markup, Failure> {
    let now = now_ms();
    let retention = inspector.retention;
    let cutoff = sweeper(&inspector.store, retention, true).cutoff_ms(now);
    let all = query.markers == "all";
    // Markers stream hour partition by hour partition, oldest first, and a
    // partition is listed only when reached: a page costs what it shows.
    let (markers, more) = markers_before(&inspector, if all { u64::MAX } else { cutoff }).await?;
    let dry_run = if query.count.is_empty() {
        None
    } else {
        Some(dry_run(&inspector).await?)
    };
    let body = html! {
        h1 { "Retention" }
        p {
            "Terminal runs are kept for " strong { (output::retention(retention)) }
            " (memoctl serve --retention): runs that ended before " (when(cutoff))
            " are expired, and a sweep clears their memo entries, step outputs and runtime records."
        }
        section.sweep {
            h2 { "What a sweep would remove" }
            @if let Some(report) = &dry_run {
                (report_table(report))
            } @else {
                p { a.button href="/retention?count=1" { "Count (dry run)" }
                    " lists every expired marker and counts each run's entries; it deletes nothing." }
            }
            @if !inspector.access.read_only() {
                p { a.button.danger href="/retention/sweep" { "Sweep expired runs…" } }
            }
        }
        section {
            h2 {
                @if all { "Terminal markers, oldest first" } @else { "Expired markers, oldest first" }
            }
            p.filters {
                @if all { a href="/retention" { "Show only expired markers" } }
                @else { a href="/retention?markers=all" { "Show all markers" } }
            }
            @if markers.is_empty() {
                p.empty { @if all { "No terminal markers." } @else { "No expired markers." } }
            } @else {
                (markers_table(&markers, cutoff))
                @if more { p.truncated { "Only the oldest " (MARKERS_SHOWN) " are listed." } }
            }
        }
    };
    Ok(frame("Retention", &inspector.store.url, body))
}

/// `GET /retention/sweep`: the dry run's counts and the form that sweeps.
pub(crate) async fn confirm_sweep(State(inspector): State<Shared>) -> Result<Markup, Failure> {
    inspector.access.check_acts()?;
    let report = dry_run(&inspector).await?;
    let body = html! {
        h1 { "Sweep expired runs?" }
        p { "A sweep now, with the retention of " (output::retention(inspector.retention)) ", would remove:" }
        (report_table(&report))
        form.confirm method="post" action="/retention/sweep" {
            input type="hidden" name="csrf" value=(inspector.access.csrf());
            button.confirm.danger type="submit" { "Sweep" }
            " " a href="/retention" { "Back" }
        }
    };
    Ok(frame("Sweep expired runs?", &inspector.store.url, body))
}

/// `POST /retention/sweep`: sweeps, and shows what the sweep did.
pub(crate) async fn sweep(
    State(inspector): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<SweepForm>,
) -> Result<Markup, Failure> {
    inspector.access.check_action(&headers, &form.csrf)?;
    let report = sweeper(&inspector.store, inspector.retention, false)
        .sweep_once(now_ms())
        .await
        .with_context(|| format!("the sweep of {} stopped", inspector.store.url))?;
    let body = html! {
        h1 { "Swept" }
        (report_table(&report))
        p { a href="/retention" { "Back to retention" } }
    };
    Ok(frame("Swept", &inspector.store.url, body))
}

async fn dry_run(inspector: &Inspector) -> anyhow::Result<SweepReport> {
    sweeper(&inspector.store, inspector.retention, true)
        .sweep_once(now_ms())
        .await
        .with_context(|| format!("the dry run of a sweep of {} stopped", inspector.store.url))
}

/// The markers of runs that ended before `before`, oldest partition first
/// (at most [`MARKERS_SHOWN`], sorted by time), and whether there are more.
async fn markers_before(
    inspector: &Inspector,
    before: u64,
) -> anyhow::Result<(Vec<TerminalMarker>, bool)> {
    let store = &inspector.store;
    let mut markers: Vec<_> = store
        .memo
        .markers()
        .expired(before)
        .take(MARKERS_SHOWN + 1)
        .try_collect()
        .await
        .with_context(|| format!("cannot list terminal markers in {}", store.url))?;
    let more = markers.len() > MARKERS_SHOWN;
    markers.truncate(MARKERS_SHOWN);
    markers.sort_by(|a, b| (a.terminal_at_ms, &a.run_id).cmp(&(b.terminal_at_ms, &b.run_id)));
    Ok((markers, more))
}

fn markers_table(markers: &[TerminalMarker], cutoff: u64) -> Markup {
    html! {
        table.markers {
            thead { tr { th { "Run" } th { "Incarnation" } th { "Ended" } th { "Expired" } } }
            tbody {
                @for marker in markers {
                    tr {
                        td { a.run href={ "/runs/" (marker.run_id) } { (marker.run_id) } }
                        td { code { (marker.incarnation) } }
                        td { (when(marker.terminal_at_ms)) }
                        td { @if marker.terminal_at_ms < cutoff { "yes" } @else { "no" } }
                    }
                }
            }
        }
    }
}

fn report_table(report: &SweepReport) -> Markup {
    let (runs, entries, records) = if report.dry_run {
        (
            "Runs to clear",
            "Entries to delete",
            "Runtime records to delete",
        )
    } else {
        ("Runs cleared", "Entries deleted", "Runtime records deleted")
    };
    html! {
        table.report {
            tbody {
                tr { th { "Ended before" } td { (when(report.cutoff_ms)) } }
                tr { th { "Expired markers" } td.num { (report.markers_expired) } }
                tr { th { (runs) } td.num.runs { (report.runs_cleared) } }
                tr { th { (entries) } td.num { (report.entries_deleted) } }
                tr { th { (records) } td.num { (report.runtime_runs_deleted) } }
                tr { th { "Failures" } td.num { (report.failures.len()) } }
            }
        }
        @if !report.failures.is_empty() {
            ul.failures {
                @for failure in &report.failures {
                    li { "run " (failure.run_id) ": " (failure.message) " (its marker is kept)" }
                }
            }
        }
    }
}
