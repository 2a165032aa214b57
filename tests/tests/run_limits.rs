//! What a runtime store takes from its callers (issue 20 item 8, issue 21
//! item 5): every value a run stores (its input, signal payloads, step
//! outputs, snapshots, its output or error) has a configurable size limit
//! with the error an oversize memo value gets, and a run holds a bounded
//! number of pending signals; a refused value changes nothing, on every
//! backend.

use std::sync::Arc;

use memo_runtime::runtime_store::{
    Commit, InputPhase, NewInput, NewRun, RunLimits, StatusChange, StepReceipt,
};
use memo_runtime::{
    Bytes, Error, RunId,
    runtime_store::{InMemoryRuntimeStore, ObjectStoreRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::{Backend, run};

const LIMIT: usize = 64;

fn limits() -> RunLimits {
    RunLimits::default()
        .with_max_value_size(LIMIT)
        .with_max_pending_inputs(3)
}

/// Each backend, with the small limits above (and the backend, which
/// keeps a local folder alive while it is held).
fn stores() -> Vec<(&'static str, Arc<dyn RuntimeStore>, Option<Backend>)> {
    let mut stores: Vec<(&'static str, Arc<dyn RuntimeStore>, Option<Backend>)> = vec![(
        "in-memory store",
        Arc::new(InMemoryRuntimeStore::new().with_limits(limits())),
        None,
    )];
    for backend in Backend::all() {
        let store = ObjectStoreRuntimeStore::new(backend.open(), "memo").with_limits(limits());
        stores.push((backend.name(), Arc::new(store), Some(backend)));
    }
    stores
}

fn new_run(run_id: &RunId, input: usize) -> NewRun {
    NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: Bytes::from(vec![1; input]),
        created_at_ms: 0,
        workflow_version: None,
    }
}

fn signal(id: &str, payload: usize) -> NewInput {
    NewInput {
        input_id: id.into(),
        name: "s".into(),
        payload: Bytes::from(vec![2; payload]),
        accepted_at_ms: 1,
    }
}

fn step(run_id: &RunId, sequence: u64, output: usize) -> Commit {
    let receipt = StepReceipt {
        run_id: run_id.clone(),
        sequence,
        step: "step".into(),
        output: Bytes::from(vec![3; output]),
        recorded_at_ms: 2,
        error: None,
        retries: 0,
        last_retried_error: None,
    };
    Commit::step(receipt, 2)
}

#[track_caller]
fn assert_too_large<T: std::fmt::Debug>(result: memo_runtime::Result<T>, key: &str, case: &str) {
    match result {
        Err(Error::TooLarge { key: k, limit, .. }) => {
            assert_eq!((k.as_str(), limit), (key, LIMIT), "{case}");
        }
        other => panic!("{case}: expected TooLarge for {key}, got {other:?}"),
    }
}

#[tokio::test]
async fn every_value_a_run_stores_over_the_limit_is_refused_as_too_large_and_changes_nothing() {
    for (name, store, _backend) in stores() {
        let run_id = run("limits");
        let refused = store.create_run(new_run(&run_id, LIMIT + 1)).await;
        assert_too_large(refused, "run limits input", name);
        assert!(store.load_run(&run_id).await.unwrap().is_none(), "{name}");

        store.create_run(new_run(&run_id, LIMIT)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 1);
        store.atomic_apply(&run_id, start).await.unwrap();

        // The id and name are stored with the payload, and count.
        let refused = store.append_input(&run_id, signal("big", LIMIT)).await;
        assert_too_large(refused, "run limits input \"big\"", name);
        let refused = store
            .atomic_apply(&run_id, step(&run_id, 0, LIMIT + 1))
            .await;
        assert_too_large(refused, "run limits step 0 output", name);
        let snapshot = step(&run_id, 0, 1).with_snapshot(Bytes::from(vec![4; LIMIT + 1]));
        let refused = store.atomic_apply(&run_id, snapshot).await;
        assert_too_large(refused, "run limits snapshot", name);
        let output = Bytes::from(vec![5; LIMIT + 1]);
        let done = Commit::status(StatusChange::Completed { output }, 3);
        let refused = store.atomic_apply(&run_id, done).await;
        assert_too_large(refused, "run limits output", name);
        let failed = Commit::status(
            StatusChange::Failed {
                error: "e".repeat(LIMIT + 1),
            },
            3,
        );
        assert_too_large(
            store.atomic_apply(&run_id, failed).await,
            "run limits error",
            name,
        );

        assert!(
            store.load_inputs(&run_id).await.unwrap().is_empty(),
            "{name}"
        );
        assert!(
            store.load_receipts(&run_id, None).await.unwrap().is_empty(),
            "{name}"
        );
        assert!(
            store.load_snapshot(&run_id).await.unwrap().is_none(),
            "{name}"
        );
        let record = store.load_run(&run_id).await.unwrap().unwrap();
        assert!(!record.status.is_terminal(), "{name}");
        // Values at the limit are taken.
        let at_limit = signal("at-limit", LIMIT - "at-limit".len() - 1);
        store.append_input(&run_id, at_limit).await.unwrap();
        store
            .atomic_apply(&run_id, step(&run_id, 0, LIMIT))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_run_holds_a_bounded_number_of_pending_signals_and_takes_more_once_one_is_consumed() {
    for (name, store, _backend) in stores() {
        let run_id = run("flooded");
        store.create_run(new_run(&run_id, 1)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 1);
        store.atomic_apply(&run_id, start).await.unwrap();
        for i in 0..3 {
            store
                .append_input(&run_id, signal(&format!("s{i}"), 1))
                .await
                .unwrap();
        }
        match store.append_input(&run_id, signal("s3", 1)).await {
            Err(Error::Conflict { what, reason }) => {
                assert!(
                    what.contains("\"s3\"") && reason.contains("3 pending inputs"),
                    "{name}: {reason}"
                );
            }
            other => {
                panic!("{name}: expected a Conflict for a fourth pending signal, got {other:?}")
            }
        }
        // A retry of a signal the run holds is not a new one.
        store.append_input(&run_id, signal("s0", 1)).await.unwrap();
        assert_eq!(store.load_inputs(&run_id).await.unwrap().len(), 3, "{name}");

        let consume = step(&run_id, 0, 1).with_input_update("s0", InputPhase::Consumed);
        store.atomic_apply(&run_id, consume).await.unwrap();
        store.append_input(&run_id, signal("s3", 1)).await.unwrap();
        assert_eq!(store.load_inputs(&run_id).await.unwrap().len(), 4, "{name}");
    }
}

#[tokio::test]
async fn a_lower_limit_leaves_every_stored_run_readable() {
    let backend = Backend::in_memory();
    let writer = backend.runtime_store("memo");
    let run_id = run("stored-large");
    writer.create_run(new_run(&run_id, 1_000)).await.unwrap();
    writer
        .append_input(&run_id, signal("s", 1_000))
        .await
        .unwrap();
    let reader = ObjectStoreRuntimeStore::new(backend.objects(), "memo").with_limits(limits());
    assert_eq!(
        reader.load_run(&run_id).await.unwrap().unwrap().input.len(),
        1_000
    );
    assert_eq!(
        reader.load_inputs(&run_id).await.unwrap()[0].payload.len(),
        1_000
    );
    // And a retry of what it holds is still an idempotent success.
    reader
        .append_input(&run_id, signal("s", 1_000))
        .await
        .unwrap();
}
