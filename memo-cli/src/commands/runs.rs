//! `memoctl runs`: a table of runs.

use std::process::ExitCode;

use anyhow::Context as _;
use memo_runtime::runtime_store::{RunRecord, RunStatus, RuntimeStore};
use serde_json::json;

use crate::output::{Table, print_json, time};
use crate::store::Store;

/// A listed run and how many steps it committed.
struct Listed {
    record: RunRecord,
    steps: usize,
}

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
        let ids = store
            .runs
            .list_run_ids(status)
            .await
            .with_context(|| format!("cannot list {status} runs in {}", store.url))?;
        for run_id in ids {
            match load(store, &run_id).await {
                // The status listing is a hint: a run that moved on is listed
                // under its new status instead.
                Ok(Some(run)) if run.record.status == status => {
                    if workflow.is_none_or(|w| w == run.record.workflow) {
                        listed.push(run);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("memoctl: error: cannot load run {run_id}: {e:#}");
                    damaged += 1;
                }
            }
        }
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
        for Listed { record, steps } in &listed {
            table.row(vec![
                record.run_id.to_string(),
                record.workflow.clone(),
                record.status.to_string(),
                record.attempts.to_string(),
                steps.to_string(),
                time(record.updated_at_ms),
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

async fn load(store: &Store, run_id: &memo_runtime::RunId) -> anyhow::Result<Option<Listed>> {
    let Some(record) = store.runs.load_run(run_id).await? else {
        return Ok(None);
    };
    let steps = store.runs.load_receipts(run_id, None).await?.len();
    Ok(Some(Listed { record, steps }))
}

fn run_json(run: &Listed) -> serde_json::Value {
    let record = &run.record;
    json!({
        "run_id": record.run_id.as_str(),
        "incarnation": record.incarnation.to_string(),
        "workflow": record.workflow,
        "status": record.status.to_string(),
        "attempts": record.attempts,
        "steps": run.steps,
        "created_at_ms": record.created_at_ms,
        "updated_at_ms": record.updated_at_ms,
        "terminal_at_ms": record.terminal_at_ms,
    })
}
