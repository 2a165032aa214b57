//! A run's cost ledger as memoctl shows it: each attempt's requests,
//! uploads, memo entries and memoized calls, and what they come to in
//! dollars at S3 Standard's list prices.

use anyhow::Context as _;
use memo_runtime::runtime_store::{AttemptCost, RuntimeStore, Usage};
use memo_runtime::{Incarnation, RunId};
use serde_json::{Value, json};

use crate::output::{Table, outln, time};
use crate::store::Store;

/// S3 Standard's list price of 1,000 `PUT`, `COPY`, `POST` or `LIST`
/// requests (US East, N. Virginia, as listed on 2026-12-02).
pub(crate) const PUT_OR_LIST_PER_1000: f64 = 0.005;
/// S3 Standard's list price of 1,000 `GET` (or `HEAD`) requests (the same
/// list). `DELETE` requests are free.
pub(crate) const GET_PER_1000: f64 = 0.0004;

/// What `usage`'s requests cost at S3 Standard's list prices, in dollars.
pub(crate) fn request_dollars(usage: &Usage) -> f64 {
    (usage.puts + usage.lists) as f64 * PUT_OR_LIST_PER_1000 / 1000.0
        + usage.gets as f64 * GET_PER_1000 / 1000.0
}

/// What a run cost, for ordering runs: its requests at S3 Standard's list
/// prices plus the declared cost of the memoized calls whose body ran.
pub(crate) fn run_dollars(usage: &Usage) -> f64 {
    request_dollars(usage) + usage.paid_dollars()
}

/// The ledger of one incarnation of the run (empty for a run with none).
pub(crate) async fn ledger(
    store: &Store,
    run_id: &RunId,
    incarnation: Incarnation,
) -> anyhow::Result<Vec<AttemptCost>> {
    store
        .runs
        .load_attempt_costs(run_id, incarnation)
        .await
        .with_context(|| {
            format!(
                "cannot read the cost ledger of run {run_id} in {}",
                store.url
            )
        })
}

/// Dollars, with enough digits for a fraction of a cent.
pub(crate) fn dollars(amount: f64) -> String {
    format!("${amount:.6}")
}

fn usage_cells(usage: &Usage) -> Vec<String> {
    vec![
        usage.gets.to_string(),
        usage.puts.to_string(),
        usage.lists.to_string(),
        usage.deletes.to_string(),
        format!("{} B", usage.bytes_written),
        format!("{} ({} B)", usage.entries_written, usage.entry_bytes),
        format!("{} run, {} reused", usage.calls_run, usage.calls_reused),
        dollars(usage.paid_dollars()),
        dollars(usage.saved_dollars()),
    ]
}

/// Prints the ledger: a row per attempt, the run's total, and its requests
/// in dollars.
pub(crate) fn print(costs: &[AttemptCost]) {
    outln!("\ncost");
    if costs.is_empty() {
        outln!(
            "  (no ledger: no attempt of this run has ended yet, or it ran before memo kept one)"
        );
        return;
    }
    let mut table = Table::new(&[
        "ATTEMPT", "RECORDED", "GET", "PUT", "LIST", "DELETE", "UPLOADED", "ENTRIES", "CALLS",
        "PAID", "SAVED",
    ]);
    for cost in costs {
        let mut row = vec![cost.attempt.to_string(), time(cost.recorded_at_ms)];
        row.extend(usage_cells(&cost.usage));
        table.row(row);
    }
    let total = Usage::total(costs);
    let mut row = vec!["total".to_string(), String::new()];
    row.extend(usage_cells(&total));
    table.row(row);
    table.print_or("");
    outln!(
        "  {} requests: {} at S3 Standard list prices (${PUT_OR_LIST_PER_1000} per 1,000 PUT or \
         LIST, ${GET_PER_1000} per 1,000 GET, DELETE free); declared cost of the calls run {}, \
         saved by reuse {}",
        total.requests(),
        dollars(request_dollars(&total)),
        dollars(total.paid_dollars()),
        dollars(total.saved_dollars()),
    );
}

fn usage_json(usage: &Usage) -> Value {
    json!({
        "gets": usage.gets,
        "puts": usage.puts,
        "lists": usage.lists,
        "deletes": usage.deletes,
        "requests": usage.requests(),
        "bytes_written": usage.bytes_written,
        "entries_written": usage.entries_written,
        "entry_bytes": usage.entry_bytes,
        "calls_run": usage.calls_run,
        "calls_reused": usage.calls_reused,
        "paid_dollars": usage.paid_dollars(),
        "saved_dollars": usage.saved_dollars(),
        "s3_request_dollars": request_dollars(usage),
    })
}

/// The ledger as JSON: `null` for a run with none.
pub(crate) fn to_json(costs: &[AttemptCost]) -> Value {
    if costs.is_empty() {
        return Value::Null;
    }
    json!({
        "attempts": costs.iter().map(|cost| json!({
            "attempt": cost.attempt,
            "recorded_at_ms": cost.recorded_at_ms,
            "usage": usage_json(&cost.usage),
        })).collect::<Vec<_>>(),
        "total": usage_json(&Usage::total(costs)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_priced_at_s3_standard_list_prices() {
        let mut usage = Usage::default();
        usage.puts = 1_000;
        usage.lists = 1_000;
        usage.gets = 10_000;
        usage.deletes = 1_000_000;
        assert!((request_dollars(&usage) - (0.01 + 0.004)).abs() < 1e-12);
    }
}
