//! `memoctl signal RUN NAME --payload JSON`: what `Runtime::signal` sends.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use memo_runtime::content_key;
use memo_runtime::workflow::Runtime;
use serde_json::{Value, json};

use super::{existing_run, run_id};
use crate::output::{outln, print_json};
use crate::store::Store;

/// Sends signal `name` with the JSON `payload` to run `run`, through
/// `Runtime::signal` itself, so the signal's id (and so its idempotency: the
/// same signal sent twice is recorded once) and its encoding are the ones a
/// worker's own `signal` call gives.
pub(crate) async fn signal(
    store: &Store,
    run: &str,
    name: &str,
    payload: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let run_id = run_id(run)?;
    let payload: Value = serde_json::from_str(payload)
        .with_context(|| format!("--payload is not JSON: {payload:?}"))?;
    let record = existing_run(store, &run_id).await?;
    if record.status.is_terminal() {
        anyhow::bail!(
            "run {run_id} is {} and takes no more signals",
            record.status
        );
    }
    let runtime = Runtime::builder()
        .memo_store(store.memo.clone())
        .runtime_store(Arc::clone(&store.runs) as _)
        .build()?;
    runtime
        .signal(&run_id, name, &payload)
        .await
        .with_context(|| format!("cannot send signal {name:?} to run {run_id}"))?;
    let input_id = content_key(&(name, &payload))?;
    if json {
        print_json(&json!({
            "run_id": run_id.as_str(),
            "name": name,
            "payload": payload,
            "input_id": input_id,
        }));
    } else {
        outln!("sent signal {name:?} to run {run_id} (payload {payload}, input id {input_id})");
    }
    Ok(ExitCode::SUCCESS)
}
