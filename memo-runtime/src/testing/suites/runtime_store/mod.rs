//! The conformance suite of [`RuntimeStore`]: one set of promises, checked
//! against every backend.
//!
//! Each check is a `pub async fn` that panics (like `assert!`, saying which
//! promise broke) if the store breaks a promise. Most take a
//! `&dyn RuntimeStore`; those about several instances over the same storage
//! (races, reopening) take a factory that returns a new instance over the
//! same records each time it is called, as another process would build it.
//! The object-storage checks ([`corrupt_records_are_errors`],
//! [`an_unfinished_deletion_is_finished_not_inherited`],
//! [`faults_never_leave_a_partial_commit`]) take the concrete
//! [`ObjectStoreRuntimeStore`] factory and the fault-injecting wrapper.
//!
//! A backend runs the suite through one entry point: [`run_suite`] for any
//! [`RuntimeStore`], [`run_object_store_suite`] for an
//! [`ObjectStoreRuntimeStore`] (which runs everything [`run_suite`] does).
//! A new check goes into one of the two, so it reaches every backend.
//!
//! Every check works in runs of its own, named with [`unique_run_id`], so
//! checks can share one store, run in parallel, and run against a shared
//! bucket that earlier test runs left records in.
//!
//! ```
//! use memo_runtime::runtime_store::InMemoryRuntimeStore;
//! use memo_runtime::testing::runtime_store as suite;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let store = InMemoryRuntimeStore::new();
//! // Clones share the runs: "another instance over the same storage".
//! suite::run_suite(|| store.clone()).await;
//! # }
//! ```

mod commits;
mod instances;
mod listing;
mod object;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::error::Error;
use crate::run_id::RunId;
use crate::runtime_store::ObjectStoreRuntimeStore;
use crate::runtime_store::{
    Commit, NewInput, NewRun, RunRecord, RuntimeStore, StatusChange, StepReceipt,
};

pub use commits::{
    conflicting_commits_apply_nothing, repeated_writes_are_idempotent, runs_round_trip,
    step_commits_round_trip,
};
pub use instances::{
    a_reused_run_id_is_a_new_run_everywhere, racing_committers_of_one_sequence_have_one_winner,
    reopened_store_sees_every_acknowledged_commit,
};
pub use listing::{
    a_runs_cost_ledger_is_kept_once_and_deleted_with_it, deleting_a_run_removes_only_that_run,
    runs_are_listed_by_status,
};
pub use object::{
    an_unfinished_deletion_is_finished_not_inherited, corrupt_records_are_errors,
    faults_never_leave_a_partial_commit,
};

/// A run id no other call (in this process or, by its time stamp, in an
/// earlier one) returns: `<label>-<nanoseconds since the epoch>-<counter>`.
///
/// # Panics
///
/// If `label` is not a valid run-id prefix (`[A-Za-z0-9_-]`, at most 80 bytes).
pub fn unique_run_id(label: &str) -> RunId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    assert!(label.len() <= 80, "run-id label {label:?} is over 80 bytes");
    RunId::new(format!("{label}-{nanos}-{n}")).expect("a valid run-id label")
}

fn new_run(run_id: &RunId, input: &'static [u8]) -> NewRun {
    NewRun {
        run_id: run_id.clone(),
        workflow: "conformance".into(),
        input: Bytes::from_static(input),
        created_at_ms: 1_000,
        workflow_version: None,
    }
}

fn receipt(run_id: &RunId, sequence: u64, output: impl Into<Bytes>) -> StepReceipt {
    StepReceipt {
        run_id: run_id.clone(),
        sequence,
        step: format!("step-{sequence}"),
        output: output.into(),
        recorded_at_ms: 2_000 + sequence,
        error: None,
        retries: 0,
        last_retried_error: None,
    }
}

fn input(id: &str, payload: &'static [u8]) -> NewInput {
    NewInput {
        input_id: id.into(),
        name: "signal".into(),
        payload: Bytes::from_static(payload),
        accepted_at_ms: 1_500,
    }
}

/// Runs every check that holds for any backend: the one entry point for a
/// [`RuntimeStore`] that is not an [`ObjectStoreRuntimeStore`]. `make`
/// returns a new instance over the same records each time it is called.
pub async fn run_suite<S: RuntimeStore + 'static>(make: impl Fn() -> S) {
    runs_round_trip(&make()).await;
    step_commits_round_trip(&make()).await;
    repeated_writes_are_idempotent(&make()).await;
    conflicting_commits_apply_nothing(&make()).await;
    runs_are_listed_by_status(&make()).await;
    deleting_a_run_removes_only_that_run(&make()).await;
    a_runs_cost_ledger_is_kept_once_and_deleted_with_it(&make()).await;
    racing_committers_of_one_sequence_have_one_winner(&make).await;
    reopened_store_sees_every_acknowledged_commit(&make).await;
    a_reused_run_id_is_a_new_run_everywhere(&make).await;
}

/// Runs the whole suite on an [`ObjectStoreRuntimeStore`]: every check of
/// [`run_suite`], then the object-storage ones ([`corrupt_records_are_errors`],
/// [`an_unfinished_deletion_is_finished_not_inherited`] and
/// [`faults_never_leave_a_partial_commit`], under a [`FaultInjectingStore`]
/// over `objects()`). The one entry point for that backend, whatever object
/// store it runs on.
///
/// `objects` returns a client of the same storage each time it is called (a
/// clone of one `Arc`, or a new connection, as another process would make);
/// `open` builds the runtime store on it, as the backend under test is
/// configured (its prefix, its cache).
///
/// ```
/// use std::sync::Arc;
/// use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
/// use memo_runtime::object_store::{ObjectStore, memory::InMemory};
/// use memo_runtime::testing::runtime_store as suite;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
/// suite::run_object_store_suite(
///     || objects.clone(),
///     |objects| ObjectStoreRuntimeStore::new(objects, "memo"),
/// )
/// .await;
/// # }
/// ```
///
/// [`FaultInjectingStore`]: crate::testing::FaultInjectingStore
pub async fn run_object_store_suite(
    objects: impl Fn() -> Arc<dyn object_store::ObjectStore>,
    open: impl Fn(Arc<dyn object_store::ObjectStore>) -> ObjectStoreRuntimeStore,
) {
    let make = || open(objects());
    run_suite(make).await;
    corrupt_records_are_errors(&make).await;
    an_unfinished_deletion_is_finished_not_inherited(&make).await;
    let faults = Arc::new(crate::testing::FaultInjectingStore::new(objects()).with_seed(7));
    let over_faults = || open(faults.clone());
    faults_never_leave_a_partial_commit(&over_faults, &faults).await;
}

/// Everything a reader can see of a run, for before/after comparisons.
async fn snapshot_of(
    store: &dyn RuntimeStore,
    run_id: &RunId,
) -> (
    RunRecord,
    Vec<StepReceipt>,
    Option<Bytes>,
    Vec<crate::runtime_store::InputRecord>,
) {
    (
        load(store, run_id).await,
        store.load_receipts(run_id, None).await.expect("receipts"),
        store.load_snapshot(run_id).await.expect("snapshot"),
        store.load_inputs(run_id).await.expect("inputs"),
    )
}

/// Creates a run and starts its first attempt.
async fn running_run(store: &dyn RuntimeStore, label: &str) -> RunId {
    let run_id = unique_run_id(label);
    store
        .create_run(new_run(&run_id, b"input"))
        .await
        .expect("create a run");
    store
        .atomic_apply(
            &run_id,
            Commit::status(StatusChange::start_attempt(1), 1_100),
        )
        .await
        .expect("start attempt 1");
    run_id
}

async fn load(store: &dyn RuntimeStore, run_id: &RunId) -> RunRecord {
    store
        .load_run(run_id)
        .await
        .expect("load the run")
        .unwrap_or_else(|| panic!("run {run_id} is missing"))
}

#[track_caller]
fn assert_conflict<T: std::fmt::Debug>(result: crate::Result<T>, doing: &str) {
    match result {
        Err(Error::Conflict { .. }) => {}
        other => panic!("{doing}: expected Error::Conflict, got {other:?}"),
    }
}

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(result: crate::Result<T>, doing: &str) {
    match result {
        Err(Error::InvalidWrite { .. }) => {}
        other => panic!("{doing}: expected Error::InvalidWrite, got {other:?}"),
    }
}
