//! `memoctl signal RUN NAME --payload JSON`: what `Runtime::signal` sends.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use memo_runtime::workflow::Runtime;
use memo_runtime::{RunId, content_key};
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
    let input_id = send_signal(store, &run_id, name, &payload).await?;
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

/// Sends signal `name` with `payload` to the open run `run_id` through
/// `Runtime::signal`, and returns the signal's input id. `memoctl signal`
/// and the inspector's signal action both send through here.
pub(crate) async fn send_signal(
    store: &Store,
    run_id: &RunId,
    name: &str,
    payload: &Value,
) -> anyhow::Result<String> {
    let record = existing_run(store, run_id).await?;
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
        .signal(run_id, name, payload)
        .await
        .with_context(|| format!("cannot send signal {name:?} to run {run_id}"))?;
    Ok(content_key(&(name, payload))?)
}
