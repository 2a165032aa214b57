//! The retention page: terminal markers by time, what a sweep would remove
//! (a dry run), and the sweep itself, through the sweeper `memoctl sweep`
//! builds.

use anyhow::Context as _;
use axum::Form;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use maud::{Markup, html};
use memo_runtime::retention::{MarkerPage, SweepReport, TerminalMarker};
use serde::Deserialize;

use super::page::{Failure, frame, link, when};
use super::{Inspector, Shared};
use crate::commands::markers::{self, cursor};
use crate::commands::sweeper;
use crate::output::{self, now_ms};

/// Markers one page lists at most.
pub(crate) const MARKERS_PER_PAGE: usize = 100;

/// The retention page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RetentionQuery {
    /// `all`: every marker, oldest first; otherwise the expired ones.
    markers: String,
    /// Non-empty: count what a sweep would remove (a dry run).
    count: String,
    /// The page starts after this marker: `<ended ms>.<run id>.<incarnation>`
    /// (see [`cursor`]).
    after: String,
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
    let after = parse_cursor(&query.after)?;
    // A page lists the hour partitions from its cursor's on, as far as it
    // shows: it costs what it shows, whatever the number of markers.
    let before = if all { u64::MAX } else { cutoff };
    let page = inspector
        .store
        .memo
        .markers()
        .expired_page(before, after.as_ref(), MARKERS_PER_PAGE)
        .await
        .with_context(|| format!("cannot list terminal markers in {}", inspector.store.url))?;
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
            @if page.markers.is_empty() {
                p.empty { @if all { "No terminal markers." } @else { "No expired markers." } }
            } @else {
                (markers_table(&page.markers, cutoff))
            }
            (paging(&query, after.is_some(), &page))
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

fn parse_cursor(text: &str) -> Result<Option<TerminalMarker>, Failure> {
    if text.is_empty() {
        return Ok(None);
    }
    markers::parse_cursor(text)
        .map(Some)
        .map_err(|_| Failure::bad_request(format!("not a marker cursor: {text:?}")))
}

fn paging(query: &RetentionQuery, paged: bool, page: &MarkerPage) -> Markup {
    let first = link("/retention", &[("markers", &query.markers)]);
    let next = page.next.as_ref().map(|last| {
        link(
            "/retention",
            &[("markers", &query.markers), ("after", &cursor(last))],
        )
    });
    html! {
        p.paging {
            @if paged { a href=(first) { "First page" } " " }
            @if let Some(next) = next { a.next href=(next) { "Next page" } }
        }
        p.cost {
            (MARKERS_PER_PAGE) " markers a page, oldest first; a page lists the hours of markers from where it starts, as far as it shows."
        }
    }
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
                tr { th { "Swept runs rechecked" } td.num { (report.rechecks_due) } }
                tr { th { "Late objects deleted" } td.num { (report.late_objects_deleted) } }
                tr { th { "Recheck failures" } td.num { (report.recheck_failures) } }
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
