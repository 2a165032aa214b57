//! The run actions: send a signal, cancel. Each is a confirmation page
//! (`GET`) whose form posts the action (`POST`, with the CSRF token), which
//! goes through the same calls as `memoctl signal` and `memoctl cancel`.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Redirect;
use maud::{Markup, html};
use memo_runtime::runtime_store::RunRecord;
use memo_runtime::workflow::Cancellation;
use serde::Deserialize;
use serde_json::Value;

use super::page::{Failure, frame, status_tag};
use super::run::{load, parse_run};
use super::{Inspector, Shared};
use crate::commands::{request_cancel, send_signal};

/// The reason a cancellation from the inspector records unless the operator
/// writes one.
const DEFAULT_REASON: &str = "cancelled from the memo inspector";

/// A signal to send: its name and its payload as JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SignalForm {
    name: String,
    payload: String,
    csrf: String,
}

/// A cancellation: its reason.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CancelForm {
    reason: String,
    csrf: String,
}

/// `GET /runs/{run}/signal?name=&payload=`: asks to confirm the signal.
pub(crate) async fn confirm_signal(
    State(inspector): State<Shared>,
    Path(run): Path<String>,
    Query(form): Query<SignalForm>,
) -> Result<Markup, Failure> {
    inspector.access.check_acts()?;
    let record = open_run(&inspector, &run).await?;
    let payload = parse_signal(&form)?;
    let run_id = &record.run_id;
    let body = html! {
        h1 { "Send a signal?" }
        (run_line(&record))
        p { "Signal " code.signal-name { (form.name) } " with the payload " code.payload { (payload) } "." }
        form.confirm method="post" action={ "/runs/" (run_id) "/signal" } {
            input type="hidden" name="name" value=(form.name);
            input type="hidden" name="payload" value=(form.payload);
            input type="hidden" name="csrf" value=(inspector.access.csrf());
            button.confirm type="submit" { "Send the signal" }
            " " a href={ "/runs/" (run_id) } { "Back" }
        }
    };
    Ok(frame("Send a signal?", &inspector.store.url, body))
}

/// `POST /runs/{run}/signal`: sends the signal, then back to the run.
pub(crate) async fn signal(
    State(inspector): State<Shared>,
    Path(run): Path<String>,
    headers: HeaderMap,
    Form(form): Form<SignalForm>,
) -> Result<Redirect, Failure> {
    inspector.access.check_action(&headers, &form.csrf)?;
    let record = open_run(&inspector, &run).await?;
    let payload = parse_signal(&form)?;
    send_signal(&inspector.store, &record.run_id, &form.name, &payload).await?;
    Ok(Redirect::to(&format!(
        "/runs/{}?done=signal",
        record.run_id
    )))
}

/// `GET /runs/{run}/cancel`: asks to confirm the cancellation, with a reason.
pub(crate) async fn confirm_cancel(
    State(inspector): State<Shared>,
    Path(run): Path<String>,
) -> Result<Markup, Failure> {
    inspector.access.check_acts()?;
    let record = open_run(&inspector, &run).await?;
    let run_id = &record.run_id;
    let body = html! {
        h1 { "Cancel the run?" }
        (run_line(&record))
        p {
            "An idle run ends at once; a run a worker is running ends at that worker's next step \
             boundary or wait. A cancelled run does not start again."
        }
        form.confirm method="post" action={ "/runs/" (run_id) "/cancel" } {
            label { "Reason " input type="text" name="reason" value=(DEFAULT_REASON); }
            input type="hidden" name="csrf" value=(inspector.access.csrf());
            button.confirm.danger type="submit" { "Cancel the run" }
            " " a href={ "/runs/" (run_id) } { "Back" }
        }
    };
    Ok(frame("Cancel the run?", &inspector.store.url, body))
}

/// `POST /runs/{run}/cancel`: cancels the run, then back to it.
pub(crate) async fn cancel(
    State(inspector): State<Shared>,
    Path(run): Path<String>,
    headers: HeaderMap,
    Form(form): Form<CancelForm>,
) -> Result<Redirect, Failure> {
    inspector.access.check_action(&headers, &form.csrf)?;
    let record = open_run(&inspector, &run).await?;
    let reason = if form.reason.trim().is_empty() {
        DEFAULT_REASON
    } else {
        form.reason.as_str()
    };
    let done = match request_cancel(&inspector.store, &record.run_id, reason).await? {
        Cancellation::Requested { .. } => "cancel-requested",
        _ => "cancelled",
    };
    Ok(Redirect::to(&format!(
        "/runs/{}?done={done}",
        record.run_id
    )))
}

/// Loads run `run`, which must be open for an action.
async fn open_run(inspector: &Inspector, run: &str) -> Result<RunRecord, Failure> {
    let record = load(inspector, &parse_run(run)?).await?;
    if record.status.is_terminal() {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "Run ended",
            format!(
                "run {} has ended ({}): it takes no more signals and cannot be cancelled",
                record.run_id, record.status
            ),
        ));
    }
    Ok(record)
}

fn parse_signal(form: &SignalForm) -> Result<Value, Failure> {
    if form.name.is_empty() {
        return Err(Failure::bad_request("a signal needs a name"));
    }
    serde_json::from_str(&form.payload).map_err(|e| {
        Failure::bad_request(format!(
            "the payload is not JSON ({e}): write true, 42, \"text\" or {{\"key\": 1}}"
        ))
    })
}

fn run_line(record: &RunRecord) -> Markup {
    html! {
        p.run-line {
            "Run " a href={ "/runs/" (record.run_id) } { (record.run_id) }
            " of workflow " code { (record.workflow) } ", " (status_tag(record.status))
        }
    }
}
