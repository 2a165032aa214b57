//! `memoctl show RUN`: one run, its steps, signals, memo entries and cost
//! ledger.

use std::process::ExitCode;

use anyhow::Context as _;
use memo_runtime::runtime_store::{InputPhase, InputRecord, RunRecord, RunStatus, RuntimeStore};
use memo_runtime::workflow::CANCEL_SIGNAL;
use memo_runtime::{Incarnation, RunId};
use serde_json::{Value, json};

use super::{cost, existing_run, run_id, waits};
use crate::output::{
    Table, duration, now_ms, outln, payload, payload_line, print_fields, print_json, time,
};
use crate::store::Store;

/// One stored entry of the run.
struct Entry {
    kind: &'static str,
    step: String,
    digest: String,
    size: u64,
}

pub(crate) async fn show(store: &Store, run: &str, json: bool) -> anyhow::Result<ExitCode> {
    let run_id = run_id(run)?;
    let record = existing_run(store, &run_id).await?;
    let context = || format!("cannot read run {run_id} in {}", store.url);
    let receipts = store
        .runs
        .load_receipts(&run_id, None)
        .await
        .with_context(context)?;
    let inputs = store
        .runs
        .load_inputs(&run_id)
        .await
        .with_context(context)?;
    let entries = entries(store, &run_id, record.incarnation).await?;
    let costs = cost::ledger(store, &run_id, record.incarnation).await?;
    let now = now_ms();
    let timers = waits::timers(&receipts);
    if json {
        print_json(&json!({
            "run": record_json(&record, now),
            "steps": receipts.iter().map(|r| json!({
                "sequence": r.sequence,
                "step": r.step,
                "recorded_at_ms": r.recorded_at_ms,
                "output_bytes": r.output.len(),
                "output": r.error.is_none().then(|| payload(&r.output)),
                "error": r.error,
                "tries": u64::from(r.retries) + 1,
                "last_retried_error": r.last_retried_error,
            })).collect::<Vec<_>>(),
            "signals": inputs.iter().map(|i| json!({
                "input_id": i.input_id,
                "name": i.name,
                "phase": format!("{:?}", i.phase),
                "pending": is_pending(i, &record),
                "consumed_by": i.consumed_by,
                "accepted_at_ms": i.accepted_at_ms,
                "payload": payload(&i.payload),
            })).collect::<Vec<_>>(),
            "timers": timers.iter().map(|t| json!({
                "sequence": t.sequence,
                "waits_for": t.what,
                "due_at_ms": t.at_ms,
                "passed": t.done || t.at_ms.is_some_and(|at| at <= now),
                "done": t.done,
            })).collect::<Vec<_>>(),
            "entries": entries.iter().map(|e| json!({
                "kind": e.kind, "step": e.step, "digest": e.digest, "size": e.size,
            })).collect::<Vec<_>>(),
            "cost": cost::to_json(&costs),
        }));
        return Ok(ExitCode::SUCCESS);
    }
    print_record(&record, now);
    outln!("\nsteps");
    let mut steps = Table::new(&["SEQ", "STEP", "RECORDED", "TRIES", "OUTPUT"]);
    for r in &receipts {
        let output = match &r.error {
            Some(error) => format!("failed: {error}"),
            None => format!("{} bytes {}", r.output.len(), payload_line(&r.output, 60)),
        };
        // The tries of the attempt that recorded the step, and why the
        // last retried one failed.
        let tries = match &r.last_retried_error {
            Some(error) => format!(
                "{} (last retried: {})",
                u64::from(r.retries) + 1,
                clip(error, 40)
            ),
            None => (u64::from(r.retries) + 1).to_string(),
        };
        steps.row(vec![
            r.sequence.to_string(),
            r.step.clone(),
            time(r.recorded_at_ms),
            tries,
            output,
        ]);
    }
    steps.print_or("  (none)");
    outln!("\ntimers and deadlines");
    let mut table = Table::new(&["SEQ", "WAITS FOR", "DUE", "STATE"]);
    for t in &timers {
        let state = if t.done {
            "went past it"
        } else if record.status.is_terminal() {
            "run ended"
        } else {
            "waiting"
        };
        table.row(vec![
            t.sequence.to_string(),
            t.what.clone(),
            waits::when(t.at_ms, now),
            state.into(),
        ]);
    }
    table.print_or("  (none)");
    outln!("\nsignals");
    let mut signals = Table::new(&["NAME", "PHASE", "ACCEPTED", "PAYLOAD", "INPUT ID"]);
    for i in &inputs {
        let phase = match (i.phase, i.consumed_by) {
            (InputPhase::Consumed, Some(step)) => format!("Consumed by step {step}"),
            _ if cancelled_the_run(i, &record) => "Cancelled the run".into(),
            (phase, _) if is_pending(i, &record) => format!("{phase:?} (pending)"),
            (phase, _) if is_waiting(phase) => format!("{phase:?} (never read: the run ended)"),
            (phase, _) => format!("{phase:?}"),
        };
        signals.row(vec![
            i.name.clone(),
            phase,
            time(i.accepted_at_ms),
            payload_line(&i.payload, 40),
            i.input_id.clone(),
        ]);
    }
    signals.print_or("  (none)");
    outln!("\nentries");
    let mut table = Table::new(&["KIND", "STEP", "DIGEST", "SIZE"]);
    for e in &entries {
        table.row(vec![
            e.kind.into(),
            e.step.clone(),
            e.digest.clone(),
            format!("{} B", e.size),
        ]);
    }
    table.print_or("  (none)");
    cost::print(&costs);
    Ok(ExitCode::SUCCESS)
}

/// Whether `input` still waits for the run to read it: accepted or
/// queued, and the run has not ended (an ended run reads nothing more).
fn is_pending(input: &InputRecord, record: &RunRecord) -> bool {
    is_waiting(input.phase) && !record.status.is_terminal()
}

fn is_waiting(phase: InputPhase) -> bool {
    matches!(phase, InputPhase::Accepted | InputPhase::Queued)
}

/// Whether `input` is the cancellation request that ended the run: the
/// runtime honours it without a step consuming it.
fn cancelled_the_run(input: &InputRecord, record: &RunRecord) -> bool {
    input.name == CANCEL_SIGNAL && record.status == RunStatus::Cancelled
}

fn print_record(record: &RunRecord, now: u64) {
    let mut lines = vec![
        ("run", record.run_id.to_string()),
        ("incarnation", record.incarnation.to_string()),
        ("workflow", record.workflow.clone()),
        ("status", record.status.to_string()),
        ("attempts", record.attempts.to_string()),
        ("created", time(record.created_at_ms)),
        ("last change", time(record.updated_at_ms)),
    ];
    if let Some(at) = record.terminal_at_ms {
        lines.push(("ended", time(at)));
    }
    lines.push(("lease", lease_line(record, now)));
    lines.push(("input", payload_line(&record.input, 100)));
    if let Some(output) = &record.output {
        lines.push(("output", payload_line(output, 100)));
    }
    if let Some(error) = &record.error {
        lines.push(("error", error.clone()));
    }
    print_fields(&lines);
}

fn lease_line(record: &RunRecord, now: u64) -> String {
    match &record.lease {
        None => "none".into(),
        Some(lease) if lease.until_ms > now => format!(
            "held by {:?} (attempt {}) until {}, {} from now",
            lease.owner,
            lease.attempt,
            time(lease.until_ms),
            duration(lease.until_ms - now)
        ),
        Some(lease) => format!(
            "not held (expired or released at {}; last held by {:?}, attempt {})",
            time(lease.until_ms),
            lease.owner,
            lease.attempt
        ),
    }
}

fn record_json(record: &RunRecord, now: u64) -> Value {
    json!({
        "run_id": record.run_id.as_str(),
        "incarnation": record.incarnation.to_string(),
        "workflow": record.workflow,
        "status": record.status.to_string(),
        "attempts": record.attempts,
        "created_at_ms": record.created_at_ms,
        "updated_at_ms": record.updated_at_ms,
        "terminal_at_ms": record.terminal_at_ms,
        "input": payload(&record.input),
        "output": record.output.as_deref().map(payload),
        "error": record.error,
        "lease": record.lease.as_ref().map(|l| json!({
            "owner": l.owner,
            "attempt": l.attempt,
            "until_ms": l.until_ms,
            "live": l.until_ms > now,
        })),
    })
}

/// The memo entries (and step-output entries of the previous layout) of one
/// incarnation of the run, with their sizes, by kind, step and digest.
async fn entries(
    store: &Store,
    run_id: &RunId,
    incarnation: Incarnation,
) -> anyhow::Result<Vec<Entry>> {
    let listed = store
        .memo
        .list_entries(run_id, incarnation)
        .await
        .with_context(|| format!("cannot list the entries of run {run_id} in {}", store.url))?;
    Ok(listed
        .into_iter()
        .map(|e| Entry {
            kind: e.kind.as_str(),
            step: e.step.to_string(),
            digest: e.digest,
            size: e.size,
        })
        .collect())
}

/// `text` cut to `max` characters, with `…` where it was cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        text.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    }
}
