//! `memoctl runs`: a table of runs.

use std::process::ExitCode;

use anyhow::Context as _;
use memo_runtime::RunId;
use memo_runtime::runtime_store::{RunStatus, RunSummary, RuntimeStore};
use serde_json::json;

use crate::output::{Table, errln, print_json, time};
use crate::store::Store;

/// Lists the runs in `status` (every status if `None`) of `workflow` (every
/// workflow if `None`), in status then run-id order. A run that cannot be
/// loaded is reported on stderr and fails the command, after the others are
/// printed.
pub(crate) async fn runs(
    store: &Store,
    status: Option<RunStatus>,
    workflow: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let statuses = status.map_or(RunStatus::ALL.to_vec(), |s| vec![s]);
    let mut listed = Vec::new();
    let mut damaged = 0;
    for status in statuses {
        let runs = match store.runs.list_runs(status).await {
            Ok(runs) => runs,
            // Some run cannot be loaded: find which, run by run.
            Err(_) => one_by_one(store, status, &mut damaged).await?,
        };
        listed.extend(
            runs.into_iter()
                .filter(|run| workflow.is_none_or(|w| w == run.workflow)),
        );
    }
    if json {
        print_json(&json!(listed.iter().map(run_json).collect::<Vec<_>>()));
    } else {
        let mut table = Table::new(&[
            "RUN",
            "WORKFLOW",
            "STATUS",
            "ATTEMPTS",
            "STEPS",
            "LAST CHANGE",
        ]);
        for run in &listed {
            table.row(vec![
                run.run_id.to_string(),
                run.workflow.clone(),
                run.status.to_string(),
                run.attempts.to_string(),
                run.steps.to_string(),
                time(run.updated_at_ms),
            ]);
        }
        table.print_or("no runs");
    }
    Ok(if damaged == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The runs in `status`, each listed on its own, so that the ones that
/// cannot be loaded are reported (and counted in `damaged`) while the others
/// are listed.
async fn one_by_one(
    store: &Store,
    status: RunStatus,
    damaged: &mut usize,
) -> anyhow::Result<Vec<RunSummary>> {
    let ids = store
        .runs
        .list_run_ids(status)
        .await
        .with_context(|| format!("cannot list {status} runs in {}", store.url))?;
    let mut runs = Vec::new();
    for run_id in ids {
        match load(store, &run_id).await {
            // The status listing is a hint: a run that moved on is listed
            // under its new status instead.
            Ok(Some(run)) if run.status == status => runs.push(run),
            Ok(_) => {}
            Err(e) => {
                errln!("memoctl: error: cannot load run {run_id}: {e:#}");
                *damaged += 1;
            }
        }
    }
    Ok(runs)
}

async fn load(store: &Store, run_id: &RunId) -> anyhow::Result<Option<RunSummary>> {
    let Some(record) = store.runs.load_run(run_id).await? else {
        return Ok(None);
    };
    let steps = store.runs.load_receipts(run_id, None).await?.len() as u64;
    Ok(Some(RunSummary::new(&record, steps)))
}

fn run_json(record: &RunSummary) -> serde_json::Value {
    json!({
        "run_id": record.run_id.as_str(),
        "incarnation": record.incarnation.to_string(),
        "workflow": record.workflow,
        "status": record.status.to_string(),
        "attempts": record.attempts,
        "steps": record.steps,
        "created_at_ms": record.created_at_ms,
        "updated_at_ms": record.updated_at_ms,
        "terminal_at_ms": record.terminal_at_ms,
    })
}
