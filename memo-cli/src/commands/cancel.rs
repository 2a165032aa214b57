//! `memoctl cancel RUN --reason TEXT`: what `Runtime::cancel` does.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use memo_runtime::RunId;
use memo_runtime::workflow::{Cancellation, Runtime};
use serde_json::json;

use super::{existing_run, run_id};
use crate::output::{outln, print_json};
use crate::store::Store;

/// Cancels run `run` with `reason`, through `Runtime::cancel` itself: an
/// idle run ends `Cancelled` at once (with its terminal marker); a run that
/// a worker is running ends at that worker's next step boundary or wait.
pub(crate) async fn cancel(
    store: &Store,
    run: &str,
    reason: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let run_id = run_id(run)?;
    let outcome = request_cancel(store, &run_id, reason).await?;
    let (state, lease) = match &outcome {
        Cancellation::Requested { lease } => ("requested", Some(lease)),
        _ => ("cancelled", None),
    };
    if json {
        print_json(&json!({
            "run_id": run_id.as_str(),
            "reason": reason,
            "outcome": state,
            "held_by": lease.map(|l| l.owner.clone()),
        }));
    } else if let Some(lease) = lease {
        outln!(
            "cancellation of run {run_id} recorded; worker {} (attempt {}) ends it at its next step",
            lease.owner,
            lease.attempt
        );
    } else {
        outln!("cancelled run {run_id}: {reason}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Cancels the open run `run_id` through `Runtime::cancel`. `memoctl cancel`
/// and the inspector's cancel action both cancel through here.
pub(crate) async fn request_cancel(
    store: &Store,
    run_id: &RunId,
    reason: &str,
) -> anyhow::Result<Cancellation> {
    let record = existing_run(store, run_id).await?;
    if record.status.is_terminal() {
        anyhow::bail!(
            "run {run_id} has already ended ({}); only an open run can be cancelled",
            record.status
        );
    }
    let runtime = Runtime::builder()
        .memo_store(store.memo.clone())
        .runtime_store(Arc::clone(&store.runs) as _)
        .build()?;
    runtime
        .cancel(run_id, reason)
        .await
        .with_context(|| format!("cannot cancel run {run_id}"))
}
