//! What 1,000,000 durable steps cost in object-storage requests, measured
//! by the cost ledger itself, beside what their LLM calls cost when paid
//! twice (a retry without memo). BENCHMARKS.md, "The cost ledger", holds
//! its output.
//!
//! ```text
//! cargo bench -p memo-runtime --bench cost_ledger
//! ```
//!
//! It runs one run of `STEPS` durable steps of two memoized calls each (as
//! the fleet benchmark's workflow) on `InMemory`, reads the run's ledger,
//! checks it against a counting store, and scales the figures per step to a
//! million steps at S3 Standard's list prices. Requests do not depend on the
//! backend (a folder or a bucket makes the same ones), so `InMemory` is
//! enough to count them.

use std::sync::Arc;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RuntimeStore, Usage};
use memo_runtime::testing::CountingStore;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, Memo, MemoStore, RunId, memoized};

/// Steps in the measured run.
const STEPS: u64 = 1_000;
/// The steps the figures are scaled to.
const SCALE: f64 = 1_000_000.0;
/// The assumed price of one LLM call, in dollars: about 2,000 input and 500
/// output tokens on a mid-size hosted model.
const LLM_CALL: f64 = 0.01;
/// S3 Standard list prices (US East, N. Virginia, as listed on 2026-12-02):
/// per 1,000 PUT, COPY, POST or LIST requests; per 1,000 GET requests; per
/// GB-month stored. DELETE is free.
const PUT_PER_1000: f64 = 0.005;
const GET_PER_1000: f64 = 0.0004;
const GB_MONTH: f64 = 0.023;

#[memoized(cost = LLM_CALL)]
async fn complete(memo: &Memo, prompt: &str) -> Result<String, Error> {
    Ok(format!("a reply of some length to the prompt {prompt}"))
}

#[memoized(cost = LLM_CALL)]
async fn classify(memo: &Memo, text: &str) -> Result<String, Error> {
    Ok(format!("label-{}", text.len() % 7))
}

type Run = futures::future::BoxFuture<'static, Result<String, Error>>;

fn workflow() -> Workflow<impl Fn(Context, u64) -> Run + Clone + Send + Sync> {
    Workflow::new("calls", |ctx: Context, steps: u64| -> Run {
        Box::pin(async move {
            let mut last = String::from("ticket");
            for n in 0..steps {
                last = ctx
                    .step_with(format!("step-{n}"), &last, |memo, last| async move {
                        let reply = complete(&memo, last).await?;
                        let label = classify(&memo, &reply).await?;
                        Ok::<_, Error>(format!("{label}:{n}"))
                    })
                    .await?;
            }
            Ok(last)
        })
    })
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(measure());
}

async fn measure() {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(counting.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            counting.clone(),
            "runs",
        )))
        .check_conditional_create(false)
        .build()
        .unwrap();
    let run_id = RunId::new("calls").unwrap();
    runtime.run(&run_id, &STEPS, &workflow()).await.unwrap();
    let seen = counting.counts();
    let store = runtime.runtime_store();
    let record = store.load_run(&run_id).await.unwrap().unwrap();
    let costs = store
        .load_attempt_costs(&run_id, record.incarnation)
        .await
        .unwrap();
    let usage = Usage::total(&costs);
    // What the counting store saw of the run: what the ledger counts, and
    // what follows its count (the commit that ends the run and carries the
    // entry, the terminal marker, the due entry's removal).
    let seen_requests = seen.gets
        + seen.get_ranges
        + seen.heads
        + seen.puts
        + seen.creates
        + seen.lists
        + seen.lists_with_offset
        + seen.lists_with_delimiter
        + seen.delete_paths;
    let after = seen_requests - usage.requests();
    assert!(after <= 8, "{seen:?} {usage:?}");
    let stored: u64 = {
        use futures::TryStreamExt;
        let objects: Vec<_> = counting.list(None).try_collect().await.unwrap();
        objects.iter().map(|o| o.size).sum()
    };

    let per_step = |n: u64| n as f64 / STEPS as f64;
    let scaled = |n: u64| per_step(n) * SCALE;
    println!("one run of {STEPS} steps, two memoized calls each, as its ledger records it:");
    println!(
        "  {} GET, {} PUT, {} LIST, {} DELETE ({:.2} requests a step); {} memo entries, \
         {} bytes uploaded, {} bytes stored at the end",
        usage.gets,
        usage.puts,
        usage.lists,
        usage.deletes,
        per_step(usage.requests()),
        usage.entries_written,
        usage.bytes_written,
        stored
    );
    println!(
        "  calls run {}, declared cost ${:.2}; a counting store saw {seen_requests} requests: \
         the {} the ledger counts and {after} after it (the commit that ends the run, which \
         carries it, the terminal marker, the due entry's removal)",
        usage.calls_run,
        usage.paid_dollars(),
        usage.requests()
    );
    let puts = scaled(usage.puts + usage.lists) * PUT_PER_1000 / 1000.0;
    let gets = scaled(usage.gets) * GET_PER_1000 / 1000.0;
    let storage = scaled(stored) / 1e9 * GB_MONTH;
    let llm_once = scaled(usage.calls_run) * LLM_CALL;
    println!();
    println!("| for {SCALE:.0} steps | requests | dollars |");
    println!("|---|---|---|");
    println!(
        "| PUT and LIST (${PUT_PER_1000} per 1,000) | {:.0} | ${puts:.2} |",
        scaled(usage.puts + usage.lists)
    );
    println!(
        "| GET (${GET_PER_1000} per 1,000) | {:.0} | ${gets:.2} |",
        scaled(usage.gets)
    );
    println!("| DELETE (free) | {:.0} | $0.00 |", scaled(usage.deletes));
    println!(
        "| storage, one month (${GB_MONTH} per GB-month) | {:.2} GB | ${storage:.2} |",
        scaled(stored) / 1e9
    );
    println!(
        "| **memo in all** | {:.0} | **${:.2}** |",
        scaled(usage.requests()),
        puts + gets + storage
    );
    println!(
        "| the steps' LLM calls, paid once (${LLM_CALL} a call) | {:.0} calls | ${llm_once:.2} |",
        scaled(usage.calls_run)
    );
    println!(
        "| **the same calls paid twice** (every step retried without memo) | {:.0} calls | **${:.2}** |",
        2.0 * scaled(usage.calls_run),
        2.0 * llm_once
    );
}
