//! The operator beside the workers (as `memoctl` is): through its own
//! store instances it lists runs by status, reads runs, lists markers,
//! sends signals and sweeps, at random moments; what it reads is checked
//! against the truth before and after each read.

use crate::run_id::RunId;
use crate::runtime_store::{RunStatus, RuntimeStore};
use crate::workflow::Runtime;

use super::checker::{Checker, Truth};

/// What an operator does in one visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Visit {
    /// Lists the runs in one status (`memoctl runs --status`).
    List(RunStatus),
    /// Reads one run: its record, receipts, inputs (`memoctl show`).
    Read,
    /// Lists the terminal markers (`memoctl markers`).
    Markers,
}

fn truth(checker: &Checker, run_id: &RunId) -> Truth {
    checker.truth(run_id)
}

/// How many runs a page of the operator's listing holds: small, so that a
/// listing of the few runs of a history crosses pages.
const PAGE: usize = 2;

/// More pages than a history's runs and their incarnations fill: a listing
/// that goes on past them is going round.
const MAX_PAGES: usize = 10_000;

/// Lists the runs in `status`, a page at a time as `memoctl runs` does
/// (each page from the cursor the one before returned), and checks the
/// listing: every listed run is an incarnation that existed, and every run
/// of `run_ids` that was in `status` before and after the listing (the
/// same incarnation), its creation answered before it, is listed (see
/// [`Checker::check_listing`]).
pub(super) async fn list(
    checker: Checker,
    runtime: Runtime,
    run_ids: Vec<RunId>,
    status: RunStatus,
) -> crate::Result<()> {
    let mark = checker.creation_mark();
    let before: Vec<Truth> = run_ids.iter().map(|id| truth(&checker, id)).collect();
    let store = runtime.runtime_store();
    let mut listed = Vec::new();
    let mut after: Option<RunId> = None;
    for pages in 1.. {
        let page = store.list_runs_page(status, after.as_ref(), PAGE).await?;
        if pages > MAX_PAGES {
            checker.violation(
                "a listing's pages come to an end",
                format!("listing {status} runs gave {MAX_PAGES} pages and a cursor past them"),
            );
            break;
        }
        listed.extend(page.runs);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    for summary in &listed {
        let incarnation = summary.incarnation.as_u64();
        // A run's pointer names no incarnation in its path: one that only
        // its pointer holds is known by the truth after the listing.
        let current = truth(&checker, &summary.run_id).is_some_and(|t| t.0 == incarnation);
        if !current && !checker.written_since(&summary.run_id, incarnation, None) {
            checker.violation(
                "an operator never reads a run as another incarnation than existed",
                format!(
                    "listing {status} runs showed {} as incarnation {}, which no worker wrote",
                    summary.run_id, summary.incarnation
                ),
            );
        }
    }
    checker.check_listing(status, &run_ids, before, mark, &listed);
    Ok(())
}

/// Reads `run_id` as `memoctl show` does and checks the read: a run that
/// existed throughout is never read as absent, and a run is read as an
/// incarnation that existed when the read started or was written during
/// it (its last state, or a later one), never another.
pub(super) async fn read(checker: Checker, runtime: Runtime, run_id: RunId) -> crate::Result<()> {
    let mark = checker.write_mark();
    let before = truth(&checker, &run_id);
    let store = runtime.runtime_store();
    let read = store.load_run(&run_id).await?;
    let after = truth(&checker, &run_id);
    match read {
        None if before.is_some() && before.map(|t| t.0) == after.map(|t| t.0) => {
            checker.violation(
                "an operator never reads a run that exists as absent",
                format!("run {run_id} existed throughout a read that found nothing"),
            );
        }
        Some(run) => {
            let incarnation = run.incarnation.as_u64();
            // A run that existed throughout is read as that incarnation (or
            // one written since); else, as any incarnation that existed (a
            // deleted run's last state is fine), never as one that did not.
            let throughout = before.filter(|_| before.map(|t| t.0) == after.map(|t| t.0));
            let known = match throughout {
                Some((current, _)) => {
                    current == incarnation
                        || checker.written_since(&run_id, incarnation, Some(mark))
                }
                None => {
                    [before, after].iter().flatten().any(|t| t.0 == incarnation)
                        || checker.written_since(&run_id, incarnation, None)
                }
            };
            if !known {
                checker.violation(
                    "an operator never reads a run as another incarnation than existed",
                    format!(
                        "run {run_id} read as incarnation {} ({}, attempt {}); it was {before:?} before the read, {after:?} after",
                        run.incarnation, run.status, run.attempts
                    ),
                );
            }
            store.load_receipts(&run_id, None).await?;
            store.load_inputs(&run_id).await?;
        }
        None => {}
    }
    Ok(())
}

/// Lists the terminal markers.
pub(super) async fn markers(runtime: Runtime) -> crate::Result<()> {
    runtime.memo_store().markers().list().await.map(drop)
}
