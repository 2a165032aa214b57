//! Regressions in the runtime stores found by the workflow runtime.

use std::sync::Arc;

use memo_runtime::runtime_store::{Commit, NewRun, StatusChange};
use memo_runtime::{
    Bytes,
    runtime_store::{InMemoryRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::{Backend, run};

/// A store's name, the first process's instance and the second's.
type Pair = (&'static str, Arc<dyn RuntimeStore>, Arc<dyn RuntimeStore>);

/// A second process re-creating a run with byte-identical creation data (the
/// same input at the same millisecond) was answered with the run as created,
/// attempts 0, so it re-started attempt 1 "idempotently" alongside the first.
#[tokio::test]
async fn regression_recreating_an_advanced_run_returns_its_current_state() {
    let shared: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    let mut pairs: Vec<Pair> = vec![("in-memory store", shared.clone(), shared)];
    // Held to the end: a backend keeps its local folder alive.
    let backends = Backend::all();
    for backend in &backends {
        pairs.push((
            backend.name(),
            Arc::new(backend.runtime_store("runs")),
            Arc::new(backend.runtime_store("runs")),
        ));
    }
    for (name, first, second) in pairs {
        let run_id = run("advanced");
        let new_run = NewRun {
            run_id: run_id.clone(),
            workflow: "w".into(),
            input: Bytes::from_static(b"input"),
            created_at_ms: 1_000,
            workflow_version: None,
        };
        first.create_run(new_run.clone()).await.unwrap();
        first
            .atomic_apply(
                &run_id,
                Commit::status(StatusChange::start_attempt(1), 1_000),
            )
            .await
            .unwrap();
        let seen = second.create_run(new_run).await.unwrap();
        assert_eq!(seen.attempts, 1, "{name}");
    }
}
