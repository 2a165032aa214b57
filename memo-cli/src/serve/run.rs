//! The run page: the record and lease, input and outcome, what the run waits
//! for, its steps as a timeline with the memo entries each committed, and
//! its signals.

use std::collections::BTreeMap;

use anyhow::Context as _;
use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use memo_runtime::runtime_store::{InputPhase, InputRecord, RunRecord, RuntimeStore, StepReceipt};
use memo_runtime::workflow::CANCEL_SIGNAL;
use memo_runtime::{EntryKind, Incarnation, RunId};
use serde::Deserialize;

use super::page::{Failure, bytes_size, frame, link, payload, status_tag, when};
use super::{Inspector, Shared};
use crate::output::now_ms;

/// Steps shown on one page of a run; `?steps_from=N` shows the next ones.
pub(crate) const STEPS_PER_PAGE: usize = 200;

/// Memo and step-output entries listed for one run at most.
pub(crate) const ENTRIES_SHOWN: usize = 1_000;

/// What the workflow runtime names the steps it records for timers and
/// signal waits (see memo-runtime's `workflow/context.rs`).
const SLEEP_STEP: &str = "memo.sleep";
const WAIT_STEP_PREFIX: &str = "memo.wait:";
const DEADLINE_STEP_PREFIX: &str = "memo.signal-deadline:";
const TIMEOUT_STEP_PREFIX: &str = "memo.signal-timeout:";
const SIGNAL_STEP_PREFIX: &str = "signal:";

/// The run page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RunQuery {
    /// The first step shown.
    steps_from: u64,
    /// The action just done, for the notice at the top.
    done: String,
}

/// What a recorded step is, read from its name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StepKind<'a> {
    /// A step of the workflow's own.
    Step,
    /// A durable timer; its output is the wake time.
    Sleep { wake_ms: Option<u64> },
    /// A signal wait that suspended the run.
    WaitMark { signal: &'a str },
    /// A signal wait's deadline.
    Deadline {
        signal: &'a str,
        deadline_ms: Option<u64>,
    },
    /// A signal wait that timed out.
    Timeout { signal: &'a str },
    /// A signal consumed; its output is the payload.
    Signal { signal: &'a str },
}

impl<'a> StepKind<'a> {
    pub(crate) fn of(receipt: &'a StepReceipt) -> StepKind<'a> {
        let name = receipt.step.as_str();
        let time = || rmp_serde::from_slice::<u64>(&receipt.output).ok();
        if name == SLEEP_STEP {
            StepKind::Sleep { wake_ms: time() }
        } else if let Some(signal) = name.strip_prefix(WAIT_STEP_PREFIX) {
            StepKind::WaitMark { signal }
        } else if let Some(signal) = name.strip_prefix(DEADLINE_STEP_PREFIX) {
            StepKind::Deadline {
                signal,
                deadline_ms: time(),
            }
        } else if let Some(signal) = name.strip_prefix(TIMEOUT_STEP_PREFIX) {
            StepKind::Timeout { signal }
        } else if let Some(signal) = name.strip_prefix(SIGNAL_STEP_PREFIX) {
            StepKind::Signal { signal }
        } else {
            StepKind::Step
        }
    }
}

/// What an open run waits for, read from its last step.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waiting<'a> {
    /// A signal, until a deadline or for ever.
    Signal {
        name: &'a str,
        deadline_ms: Option<u64>,
    },
    /// A timer.
    Timer { wake_ms: u64 },
}

/// What run `record`, whose last receipt is `last`, waits for now.
pub(crate) fn waiting<'a>(
    record: &RunRecord,
    last: Option<&'a StepReceipt>,
) -> Option<Waiting<'a>> {
    if record.status.is_terminal() {
        return None;
    }
    match StepKind::of(last?) {
        StepKind::WaitMark { signal } => Some(Waiting::Signal {
            name: signal,
            deadline_ms: None,
        }),
        StepKind::Deadline {
            signal,
            deadline_ms,
        } => Some(Waiting::Signal {
            name: signal,
            deadline_ms,
        }),
        StepKind::Sleep {
            wake_ms: Some(wake_ms),
        } if wake_ms > now_ms() => Some(Waiting::Timer { wake_ms }),
        _ => None,
    }
}

/// One stored entry of the run.
struct Entry {
    kind: &'static str,
    digest: String,
    size: u64,
}

/// `GET /runs/{run}`.
pub(crate) async fn show(
    State(inspector): State<Shared>,
    Path(run): Path<String>,
    Query(query): Query<RunQuery>,
) -> Result<Markup, Failure> {
    let run_id = parse_run(&run)?;
    let record = load(&inspector, &run_id).await?;
    let store = &inspector.store;
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
    let (entries, more_entries) = entries(&inspector, &run_id, record.incarnation).await?;
    let body = html! {
        h1 { "Run " span.run-id { (run_id) } " " (status_tag(record.status)) }
        (notice(&query.done))
        (record_section(&record))
        (waiting_section(&inspector, &record, &receipts))
        (payloads_section(&record))
        (timeline(&run_id, &record, &receipts, &entries, more_entries, query.steps_from))
        (signals_section(&inputs))
    };
    Ok(frame(&format!("Run {run_id}"), &store.url, body))
}

pub(crate) fn parse_run(run: &str) -> Result<RunId, Failure> {
    RunId::new(run).map_err(|e| Failure::bad_request(format!("{e}")))
}

/// Loads run `run_id`; a 404 page if it does not exist.
pub(crate) async fn load(inspector: &Inspector, run_id: &RunId) -> Result<RunRecord, Failure> {
    let store = &inspector.store;
    store
        .runs
        .load_run(run_id)
        .await
        .with_context(|| format!("cannot load run {run_id} from {}", store.url))?
        .ok_or_else(|| Failure::not_found(format!("no run {run_id} in {}", store.url)))
}

fn notice(done: &str) -> Markup {
    let text = match done {
        "signal" => "Signal sent.",
        "cancelled" => "Run cancelled.",
        "cancel-requested" => {
            "Cancellation recorded: the worker running the run ends it at its next step."
        }
        _ => return html! {},
    };
    html! { p.notice { (text) } }
}

fn record_section(record: &RunRecord) -> Markup {
    let now = now_ms();
    html! {
        section {
            h2 { "Record" }
            dl.record {
                dt { "Workflow" } dd { (record.workflow) }
                dt { "Incarnation" } dd { code { (record.incarnation) } }
                dt { "Attempts" } dd { (record.attempts) }
                dt { "Created" } dd { (when(record.created_at_ms)) }
                dt { "Last change" } dd { (when(record.updated_at_ms)) }
                @if let Some(at) = record.terminal_at_ms {
                    dt { "Ended" } dd { (when(at)) }
                }
                dt { "Lease" }
                dd.lease {
                    @match &record.lease {
                        None => { "none" }
                        Some(lease) => {
                            @if lease.is_live_at(now) { "held by " } @else { "not held (expired); last held by " }
                            code { (lease.owner) } ", attempt " (lease.attempt) ", until "
                            @if lease.until_ms == u64::MAX { "never expires" } @else { (when(lease.until_ms)) }
                        }
                    }
                }
            }
        }
    }
}

fn waiting_section(inspector: &Inspector, record: &RunRecord, receipts: &[StepReceipt]) -> Markup {
    let acts = !inspector.access.read_only() && !record.status.is_terminal();
    let run_id = &record.run_id;
    let signal_link = |name: &str, value: &str| {
        link(
            &format!("/runs/{run_id}/signal"),
            &[("name", name), ("payload", value)],
        )
    };
    html! {
        @match waiting(record, receipts.last()) {
            Some(Waiting::Signal { name, deadline_ms }) => {
                section.waiting {
                    h2 { "Waiting" }
                    p {
                        "Waits for the signal " code { (name) }
                        @if let Some(deadline) = deadline_ms { " until " (when(deadline)) }
                        "."
                    }
                    @if acts {
                        p.decide {
                            a.button.approve href=(signal_link(name, "true")) { "Approve" }
                            " "
                            a.button.reject href=(signal_link(name, "false")) { "Reject" }
                            " "
                            span.hint { "(send " code { (name) } " with " code { "true" } " or " code { "false" } ")" }
                        }
                    }
                }
            }
            Some(Waiting::Timer { wake_ms }) => {
                section.waiting { h2 { "Waiting" } p { "Sleeps until " (when(wake_ms)) "." } }
            }
            None => {}
        }
        @if acts {
            section.actions {
                h2 { "Act" }
                form.signal method="get" action={ "/runs/" (run_id) "/signal" } {
                    label { "Signal " input type="text" name="name" required; }
                    label { "Payload (JSON) " input type="text" name="payload" value="null"; }
                    button type="submit" { "Send a signal…" }
                }
                p { a.button.danger href={ "/runs/" (run_id) "/cancel" } { "Cancel the run…" } }
            }
        }
    }
}

fn payloads_section(record: &RunRecord) -> Markup {
    html! {
        section.payloads {
            h2 { "Input" }
            div.input { (payload(&record.input)) }
            @if let Some(output) = &record.output {
                h2 { "Output" }
                div.output { (payload(output)) }
            }
            @if let Some(error) = &record.error {
                h2 { "Error" }
                pre.error { (error) }
            }
        }
    }
}

fn timeline(
    run_id: &RunId,
    record: &RunRecord,
    receipts: &[StepReceipt],
    entries: &BTreeMap<u64, Vec<Entry>>,
    more_entries: bool,
    from: u64,
) -> Markup {
    let start = usize::try_from(from)
        .unwrap_or(usize::MAX)
        .min(receipts.len());
    let shown = &receipts[start..receipts.len().min(start.saturating_add(STEPS_PER_PAGE))];
    let after_shown = start + shown.len();
    // Entries of steps with no receipt: the step in flight, or left by an
    // attempt that crashed before its commit.
    let unreceipted: Vec<_> = entries
        .iter()
        .filter(|(step, _)| usize::try_from(**step).is_ok_and(|s| s >= receipts.len()))
        .collect();
    html! {
        section {
            h2 { "Steps (" (receipts.len()) ")" }
            @if receipts.is_empty() { p.empty { "No step recorded yet." } }
            ol.timeline start=(start + 1) {
                @for (i, receipt) in shown.iter().enumerate() {
                    @let previous = (start + i).checked_sub(1).map_or(record.created_at_ms, |p| receipts[p].recorded_at_ms);
                    (step_item(receipt, previous, entries.get(&receipt.sequence)))
                }
            }
            p.paging {
                @if start > 0 { a href={ "/runs/" (run_id) } { "First steps" } " " }
                @if after_shown < receipts.len() {
                    a href={ "/runs/" (run_id) "?steps_from=" (after_shown) } { "Next steps" }
                }
            }
            @if !unreceipted.is_empty() {
                h3 { "Entries of steps without a receipt (in flight, or from a crashed attempt)" }
                @for (step, entries) in unreceipted {
                    p { "Step " (step) } (entries_table(entries))
                }
            }
            @if more_entries {
                p.truncated { "Only the first " (ENTRIES_SHOWN) " entries of each kind are listed." }
            }
        }
    }
}

fn step_item(receipt: &StepReceipt, previous_ms: u64, entries: Option<&Vec<Entry>>) -> Markup {
    let kind = StepKind::of(receipt);
    let (tag, class) = match kind {
        StepKind::Step => ("step", "step"),
        StepKind::Sleep { .. } => ("timer", "timer"),
        StepKind::WaitMark { .. } => ("suspended in a wait", "wait"),
        StepKind::Deadline { .. } => ("signal deadline", "timer"),
        StepKind::Timeout { .. } => ("timed out", "wait"),
        StepKind::Signal { .. } => ("signal", "signal"),
    };
    let took = receipt.recorded_at_ms.saturating_sub(previous_ms);
    html! {
        li class={ "step " (class) } id={ "step-" (receipt.sequence) } {
            div.head {
                span.seq { "#" (receipt.sequence) } " "
                span.name { (receipt.step) } " "
                span class={ "kind " (class) } { (tag) } " "
                span.at { (when(receipt.recorded_at_ms)) }
                " " span.took title="since the previous step (or the run's creation)" {
                    "+" (crate::output::duration(took))
                }
                @if receipt.retries > 0 {
                    " " span.tries title="tries of the body in the attempt that recorded the step" {
                        (tries(receipt.retries)) " tries"
                    }
                }
            }
            @if let Some(retried) = &receipt.last_retried_error {
                div.retried { "last retried failure: " pre.error { (retried) } }
            }
            @match kind {
                StepKind::Sleep { wake_ms: Some(at) } => { p { "wakes at " (when(at)) } }
                StepKind::Deadline { deadline_ms: Some(at), .. } => { p { "deadline " (when(at)) } }
                StepKind::WaitMark { signal } => { p { "the run suspended here, waiting for " code { (signal) } } }
                _ => {}
            }
            @if let Some(error) = &receipt.error {
                div.failure { "failed: " pre.error { (error) } }
            } @else if !matches!(kind, StepKind::WaitMark { .. }) {
                div.output { (payload(&receipt.output)) }
            }
            @if let Some(entries) = entries { (entries_table(entries)) }
        }
    }
}

/// The tries of a step's body: its retries and the try that was recorded.
fn tries(retries: u32) -> u64 {
    u64::from(retries) + 1
}

fn entries_table(entries: &[Entry]) -> Markup {
    html! {
        table.entries {
            thead { tr { th { "Entry" } th { "Digest" } th { "Size" } } }
            tbody {
                @for entry in entries {
                    tr { td { (entry.kind) } td { code { (entry.digest) } } td.num { (bytes_size(entry.size)) } }
                }
            }
        }
    }
}

fn signals_section(inputs: &[InputRecord]) -> Markup {
    html! {
        section {
            h2 { "Signals (" (inputs.len()) ")" }
            @if inputs.is_empty() { p.empty { "No signal sent." } } @else {
                table.signals {
                    thead { tr { th { "Name" } th { "State" } th { "Accepted" } th { "Payload" } } }
                    tbody {
                        @for input in inputs {
                            tr {
                                td { code { (input.name) } @if input.name == CANCEL_SIGNAL { " (cancellation)" } }
                                td { (phase(input)) }
                                td { (when(input.accepted_at_ms)) }
                                td { (payload(&input.payload)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn phase(input: &InputRecord) -> String {
    match (input.phase, input.consumed_by) {
        (InputPhase::Consumed, Some(step)) => format!("consumed by step {step}"),
        (InputPhase::Consumed, None) => "consumed".into(),
        (InputPhase::Accepted | InputPhase::Queued, _) => "pending".into(),
        (InputPhase::Abandoned, _) => "refused (its payload did not decode)".into(),
    }
}

/// The run incarnation's memo and step-output entries by step (at most
/// [`ENTRIES_SHOWN`] of each kind), and whether there were more: as
/// [`MemoStore::list_entries`](memo_runtime::MemoStore::list_entries) lists
/// them (blobs left out), so the inspector builds no stored path.
async fn entries(
    inspector: &Inspector,
    run_id: &RunId,
    incarnation: Incarnation,
) -> anyhow::Result<(BTreeMap<u64, Vec<Entry>>, bool)> {
    let store = &inspector.store;
    let listed = store
        .memo
        .list_entries(run_id, incarnation)
        .await
        .with_context(|| format!("cannot list the entries of run {run_id} in {}", store.url))?;
    let mut by_step: BTreeMap<u64, Vec<Entry>> = BTreeMap::new();
    let mut shown: BTreeMap<EntryKind, usize> = BTreeMap::new();
    let mut more = false;
    for entry in listed {
        let count = shown.entry(entry.kind).or_default();
        if *count == ENTRIES_SHOWN {
            more = true;
            continue;
        }
        *count += 1;
        by_step
            .entry(u64::from(entry.step))
            .or_default()
            .push(Entry {
                kind: entry.kind.as_str(),
                digest: entry.digest,
                size: entry.size,
            });
    }
    for entries in by_step.values_mut() {
        entries.sort_by(|a, b| (a.kind, &a.digest).cmp(&(b.kind, &b.digest)));
    }
    Ok((by_step, more))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memo_runtime::Bytes;

    fn receipt(step: &str, output: Vec<u8>) -> StepReceipt {
        StepReceipt {
            run_id: RunId::new("r").unwrap(),
            sequence: 0,
            step: step.into(),
            output: Bytes::from(output),
            recorded_at_ms: 0,
            error: None,
            retries: 0,
            last_retried_error: None,
        }
    }

    #[test]
    fn timer_and_signal_steps_are_read_from_their_names() {
        let at = rmp_serde::to_vec(&1_700_000_000_000_u64).unwrap();
        assert_eq!(
            StepKind::of(&receipt("memo.sleep", at.clone())),
            StepKind::Sleep {
                wake_ms: Some(1_700_000_000_000)
            }
        );
        assert_eq!(
            StepKind::of(&receipt("memo.signal-deadline:ok", at)),
            StepKind::Deadline {
                signal: "ok",
                deadline_ms: Some(1_700_000_000_000)
            }
        );
        assert_eq!(
            StepKind::of(&receipt("memo.wait:approval", vec![])),
            StepKind::WaitMark { signal: "approval" }
        );
        assert_eq!(
            StepKind::of(&receipt("memo.signal-timeout:ok", vec![0xc0])),
            StepKind::Timeout { signal: "ok" }
        );
        assert_eq!(
            StepKind::of(&receipt("signal:ok", vec![0xc3])),
            StepKind::Signal { signal: "ok" }
        );
        assert_eq!(StepKind::of(&receipt("charge", vec![])), StepKind::Step);
    }
}
