//! Benchmarks of loading a run the object-store runtime store has not
//! cached (a fresh process reading or resuming a run), for runs of 10,
//! 1,000 and 10,000 steps, finished and open; each prints the requests one
//! load makes, counted with `CountingStore`.
//!
//! ```text
//! cargo bench -p memo-runtime --bench runs
//! ```
//!
//! A load is `load_run` then `load_receipts` on a fresh instance over an
//! `InMemory` store, so the figures are the store's own work (decoding a
//! checkpoint, folding the entries after it) without network round trips;
//! on S3 each counted request is also a round trip.
//!
//! `write_finished_run` times writing a finished run of 100, 1,000 and 10,000
//! steps and prints the bytes uploaded, with checkpoints at the default
//! interval and with only the final one: what checkpoints cost a writer.

use std::sync::Arc;

use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{Commit, NewRun, StatusChange, StepReceipt};
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::{
    Bytes, RunId,
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
};

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a Tokio runtime")
}

/// A run of `steps` steps with 64-byte outputs, finished or left open, in a
/// bucket of its own.
fn stored_run(
    rt: &tokio::runtime::Runtime,
    steps: u64,
    finished: bool,
) -> (Arc<CountingStore<InMemory>>, RunId) {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let store = ObjectStoreRuntimeStore::new(counting.clone(), "memo");
    let run_id = write_run(rt, &store, steps, 64, finished);
    (counting, run_id)
}

/// Writes a run of `steps` steps with outputs of `output_bytes` bytes
/// through `store`, finished or left open.
fn write_run(
    rt: &tokio::runtime::Runtime,
    store: &ObjectStoreRuntimeStore,
    steps: u64,
    output_bytes: usize,
    finished: bool,
) -> RunId {
    let run_id = RunId::new("bench").expect("a run id");
    rt.block_on(async {
        let new = NewRun {
            run_id: run_id.clone(),
            workflow: "w".into(),
            input: Bytes::from_static(b"input"),
            created_at_ms: 0,
            workflow_version: None,
        };
        store.create_run(new).await.expect("create");
        let start = Commit::status(StatusChange::start_attempt(1), 1);
        store.atomic_apply(&run_id, start).await.expect("start");
        for sequence in 0..steps {
            let receipt = StepReceipt {
                run_id: run_id.clone(),
                sequence,
                step: "step".into(),
                output: Bytes::from(vec![7u8; output_bytes]),
                recorded_at_ms: 2,
                error: None,
                retries: 0,
                last_retried_error: None,
            };
            let commit = Commit::step(receipt, 2);
            store.atomic_apply(&run_id, commit).await.expect("step");
        }
        if finished {
            let done = Commit::status(
                StatusChange::Completed {
                    output: Bytes::from_static(b"out"),
                },
                3,
            );
            store.atomic_apply(&run_id, done).await.expect("finish");
        }
    });
    run_id
}

/// What a fresh process does first: load the run and its history.
async fn load_fresh(counting: &Arc<CountingStore<InMemory>>, run_id: &RunId) -> usize {
    let fresh = ObjectStoreRuntimeStore::new(counting.clone(), "memo");
    fresh
        .load_run(run_id)
        .await
        .expect("load")
        .expect("the run");
    fresh
        .load_receipts(run_id, None)
        .await
        .expect("receipts")
        .len()
}

fn requests(c: RequestCounts) -> u64 {
    c.gets + c.heads + c.lists + c.lists_with_offset + c.creates + c.puts + c.delete_streams
}

fn bench_load(bencher: divan::Bencher, steps: u64, finished: bool) {
    let rt = runtime();
    let (counting, run_id) = stored_run(&rt, steps, finished);
    counting.reset();
    assert_eq!(rt.block_on(load_fresh(&counting, &run_id)) as u64, steps);
    let c = counting.counts();
    let state = if finished { "finished" } else { "open" };
    println!(
        "load of an uncached {state} run of {steps} steps: {} requests \
         ({} GET, {} LIST, {} objects listed)",
        requests(c),
        c.gets,
        c.lists + c.lists_with_offset,
        c.objects_listed
    );
    bencher.bench_local(|| rt.block_on(load_fresh(&counting, &run_id)));
}

/// Loading a finished run: what reading its output costs.
#[divan::bench(args = [10, 1_000, 10_000], sample_count = 20)]
fn load_finished_run(bencher: divan::Bencher, steps: u64) {
    bench_load(bencher, steps, true);
}

/// Loading an open run: what resuming it costs before its next step.
#[divan::bench(args = [10, 1_000, 10_000], sample_count = 20)]
fn load_open_run(bencher: divan::Bencher, steps: u64) {
    bench_load(bencher, steps, false);
}

/// Writing a finished run of 256-byte step outputs: the time, and the bytes
/// uploaded with checkpoint deltas every 4 entries and bases every
/// `2·√receipts` (the default) against only the final delta (the log alone,
/// plus one copy of the run).
#[divan::bench(args = [100, 1_000, 10_000], sample_count = 10)]
fn write_finished_run(bencher: divan::Bencher, steps: u64) {
    let rt = runtime();
    let bytes_put = |interval: u64| {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let store = ObjectStoreRuntimeStore::new(counting.clone(), "memo")
            .with_checkpoint_interval(interval);
        write_run(&rt, &store, steps, 256, true);
        counting.counts().bytes_put
    };
    let (checkpointed, final_only) = (bytes_put(4), bytes_put(u64::MAX));
    println!(
        "writing a finished run of {steps} steps (256-byte outputs): {:.1} MB uploaded \
         with checkpoints (deltas every 4 entries), {:.1} MB with the final one only ({:.1}x)",
        checkpointed as f64 / 1e6,
        final_only as f64 / 1e6,
        checkpointed as f64 / final_only as f64
    );
    bencher.bench_local(|| {
        let store = ObjectStoreRuntimeStore::new(Arc::new(InMemory::new()), "memo");
        write_run(&rt, &store, steps, 256, true)
    });
}
