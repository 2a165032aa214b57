//! What a run waits for, read from its receipts: the timers and signal
//! deadlines it recorded (`memo.sleep`, `memo.signal-deadline:<name>`,
//! `memo.select`) and the wait it suspended in, if any.

use memo_runtime::runtime_store::StepReceipt;

use crate::output::{duration, time};

/// A timer or deadline the run recorded.
pub(super) struct Timer {
    /// The receipt's position.
    pub(super) sequence: u64,
    /// `sleep`, `signal <name>`, `first of <names>`.
    pub(super) what: String,
    /// When it is (was) due; `None` for a select without a deadline.
    pub(super) at_ms: Option<u64>,
    /// Whether the run went past it (a later receipt exists).
    pub(super) done: bool,
}

/// Every timer and deadline in `receipts`, in order.
pub(super) fn timers(receipts: &[StepReceipt]) -> Vec<Timer> {
    let last = receipts.last().map(|r| r.sequence);
    receipts
        .iter()
        .filter_map(|r| {
            let (what, at_ms) = recorded(r)?;
            let done = last.is_some_and(|last| last > r.sequence);
            Some(Timer {
                sequence: r.sequence,
                what,
                at_ms,
                done,
            })
        })
        .collect()
}

/// What the run waits for now, if its last receipt is a wait: (what, until).
pub(super) fn waiting(receipts: &[StepReceipt]) -> Option<(String, Option<u64>)> {
    let last = receipts.last().filter(|r| r.error.is_none())?;
    if let Some(name) = last.step.strip_prefix("memo.wait:") {
        return Some((format!("signal {name:?}"), None));
    }
    recorded(last)
}

/// The timer or deadline a receipt records.
fn recorded(receipt: &StepReceipt) -> Option<(String, Option<u64>)> {
    if receipt.error.is_some() {
        return None;
    }
    let output = crate::output::payload(&receipt.output);
    if receipt.step == "memo.sleep" {
        return Some(("sleep".into(), output.as_u64()));
    }
    if let Some(name) = receipt.step.strip_prefix("memo.signal-deadline:") {
        return Some((format!("signal {name:?}"), output.as_u64()));
    }
    if receipt.step == "memo.select" {
        let at = output.get(0).and_then(serde_json::Value::as_u64);
        let names = output.get(1).map(ToString::to_string).unwrap_or_default();
        return Some((format!("first of {names}"), at.filter(|&at| at != u64::MAX)));
    }
    None
}

/// `<time> (in 2h 3m)` or `<time> (passed)`; `no deadline`.
pub(super) fn when(at_ms: Option<u64>, now: u64) -> String {
    match at_ms {
        None => "no deadline".into(),
        Some(at) if at > now => format!("{} (in {})", time(at), duration(at - now)),
        Some(at) => format!("{} (passed)", time(at)),
    }
}
