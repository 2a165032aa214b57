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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::future::join_all;

use crate::error::Error;
use crate::run_id::RunId;
use crate::runtime_store::ObjectStoreRuntimeStore;
use crate::runtime_store::{
    Commit, InputPhase, NewInput, NewRun, RunRecord, RunStatus, RuntimeStore, StatusChange,
    StepReceipt,
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

/// Creating, loading and re-creating runs: a new run is `Pending`; creating
/// it again with the same input returns it unchanged, with another input is
/// a conflict; unknown runs load as absent and cannot be written.
pub async fn runs_round_trip(store: &dyn RuntimeStore) {
    let run_id = unique_run_id("create");
    let created = store
        .create_run(new_run(&run_id, b"in"))
        .await
        .expect("create");
    assert_eq!(created.run_id, run_id);
    assert_eq!(created.workflow, "conformance");
    assert_eq!(&created.input[..], b"in");
    assert_eq!(created.status, RunStatus::Pending);
    assert_eq!(created.attempts, 0);
    assert_eq!(
        (created.created_at_ms, created.updated_at_ms),
        (1_000, 1_000)
    );
    assert_eq!(created.terminal_at_ms, None);
    assert_eq!(load(store, &run_id).await, created);

    let retry = NewRun {
        created_at_ms: 9_999,
        ..new_run(&run_id, b"in")
    };
    let again = store.create_run(retry).await.expect("idempotent create");
    assert_eq!(again, created, "a repeated create keeps the first record");
    assert_conflict(
        store.create_run(new_run(&run_id, b"other")).await,
        "creating a run again with another input",
    );
    assert_eq!(load(store, &run_id).await, created);

    let unknown = unique_run_id("unknown");
    assert_eq!(store.load_run(&unknown).await.expect("load unknown"), None);
    assert!(
        store
            .load_receipts(&unknown, None)
            .await
            .expect("receipts")
            .is_empty()
    );
    assert!(
        store
            .load_inputs(&unknown)
            .await
            .expect("inputs")
            .is_empty()
    );
    assert_eq!(store.load_snapshot(&unknown).await.expect("snapshot"), None);
    let write = store
        .atomic_apply(&unknown, Commit::status(StatusChange::start_attempt(1), 1))
        .await;
    assert!(
        matches!(write, Err(Error::RunNotFound { .. })),
        "writing to an unknown run: {write:?}"
    );
    assert!(matches!(
        store.append_input(&unknown, input("i", b"x")).await,
        Err(Error::RunNotFound { .. })
    ));
    assert_eq!(store.load_run(&unknown).await.expect("load unknown"), None);
}

/// A run through its whole life: attempts, step commits with snapshots and
/// consumed inputs, receipts loaded whole and after a sequence, and a
/// completion whose output is kept in the run.
pub async fn step_commits_round_trip(store: &dyn RuntimeStore) {
    let run_id = running_run(store, "steps").await;
    let started = load(store, &run_id).await;
    assert_eq!((started.status, started.attempts), (RunStatus::Running, 1));
    assert_eq!(started.updated_at_ms, 1_100);

    let approval = store
        .append_input(&run_id, input("approval", b"yes"))
        .await
        .expect("append an input");
    assert_eq!(
        (approval.phase, approval.consumed_by),
        (InputPhase::Accepted, None)
    );

    for seq in 0..3u64 {
        let mut commit = Commit::step(receipt(&run_id, seq, format!("out-{seq}")), 2_000 + seq)
            .with_snapshot(Bytes::from(format!("snap-{seq}")));
        if seq == 0 {
            commit = commit.with_input_update("approval", InputPhase::Queued);
        }
        if seq == 2 {
            commit = commit.with_input_update("approval", InputPhase::Consumed);
        }
        store
            .atomic_apply(&run_id, commit)
            .await
            .expect("commit a step");
    }

    let receipts = store.load_receipts(&run_id, None).await.expect("receipts");
    let expected: Vec<_> = (0..3)
        .map(|s| receipt(&run_id, s, format!("out-{s}")))
        .collect();
    assert_eq!(receipts, expected);
    let after = store
        .load_receipts(&run_id, Some(0))
        .await
        .expect("receipts after 0");
    assert_eq!(after, expected[1..]);
    assert!(
        store
            .load_receipts(&run_id, Some(2))
            .await
            .expect("after 2")
            .is_empty()
    );
    assert_eq!(
        store.load_snapshot(&run_id).await.expect("snapshot"),
        Some(Bytes::from_static(b"snap-2"))
    );
    let inputs = store.load_inputs(&run_id).await.expect("inputs");
    assert_eq!(inputs.len(), 1);
    assert_eq!(
        (inputs[0].phase, inputs[0].consumed_by),
        (InputPhase::Consumed, Some(2))
    );
    assert_eq!(&inputs[0].payload[..], b"yes");

    let done = Commit::status(
        StatusChange::Completed {
            output: Bytes::from_static(b"result"),
        },
        3_000,
    );
    let finished = store.atomic_apply(&run_id, done).await.expect("complete");
    assert_eq!(finished, load(store, &run_id).await);
    assert_eq!(finished.status, RunStatus::Completed);
    assert_eq!(finished.terminal_at_ms, Some(3_000));
    assert_eq!(finished.updated_at_ms, 3_000);
    assert_eq!(finished.output, Some(Bytes::from_static(b"result")));
    assert_eq!(finished.attempts, 1);
    assert_eq!(finished.error, None);

    // Failed and cancelled runs keep their error or reason.
    let failed = running_run(store, "failed").await;
    let record = store
        .atomic_apply(
            &failed,
            Commit::status(
                StatusChange::Failed {
                    error: "boom".into(),
                },
                5,
            ),
        )
        .await
        .expect("fail");
    assert_eq!(
        (record.status, record.error.as_deref()),
        (RunStatus::Failed, Some("boom"))
    );
    let cancelled = unique_run_id("cancelled");
    store
        .create_run(new_run(&cancelled, b"i"))
        .await
        .expect("create");
    let cancel = StatusChange::Cancelled {
        reason: Some("user".into()),
    };
    let record = store
        .atomic_apply(&cancelled, Commit::status(cancel, 7))
        .await
        .expect("cancel a pending run");
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(
        (record.error.as_deref(), record.terminal_at_ms),
        (Some("user"), Some(7))
    );
}

/// Sending any write again after it was applied (a retry after a lost
/// acknowledgement) succeeds without applying it twice.
pub async fn repeated_writes_are_idempotent(store: &dyn RuntimeStore) {
    let run_id = unique_run_id("idempotent");
    let created = store
        .create_run(new_run(&run_id, b"in"))
        .await
        .expect("create");
    assert_eq!(
        store
            .create_run(new_run(&run_id, b"in"))
            .await
            .expect("again"),
        created
    );
    let start = Commit::status(StatusChange::start_attempt(1), 1_100);
    for _ in 0..3 {
        let record = store
            .atomic_apply(&run_id, start.clone())
            .await
            .expect("retry the start of attempt 1");
        assert_eq!(record.attempts, 1, "a repeated start is not a new attempt");
    }

    let first = store
        .append_input(&run_id, input("sig", b"p"))
        .await
        .expect("append");
    let retried = NewInput {
        accepted_at_ms: 9_999,
        ..input("sig", b"p")
    };
    assert_eq!(
        store
            .append_input(&run_id, retried)
            .await
            .expect("append again"),
        first
    );

    let commit = Commit::step(receipt(&run_id, 0, "out"), 2_000)
        .with_snapshot(Bytes::from_static(b"s0"))
        .with_input_update("sig", InputPhase::Consumed);
    let applied = store
        .atomic_apply(&run_id, commit.clone())
        .await
        .expect("commit");
    for _ in 0..3 {
        let again = store
            .atomic_apply(&run_id, commit.clone())
            .await
            .expect("recommit");
        assert_eq!(again, applied);
    }
    assert_eq!(
        store
            .load_receipts(&run_id, None)
            .await
            .expect("receipts")
            .len(),
        1
    );
    assert_eq!(store.load_inputs(&run_id).await.expect("inputs").len(), 1);

    let done = Commit::status(StatusChange::Completed { output: "r".into() }, 3_000);
    let completed = store
        .atomic_apply(&run_id, done.clone())
        .await
        .expect("complete");
    assert_eq!(
        store
            .atomic_apply(&run_id, done)
            .await
            .expect("complete again"),
        completed
    );
    // The step commit is still recognised after the run finished.
    assert_eq!(
        store
            .atomic_apply(&run_id, commit)
            .await
            .expect("late retry"),
        completed
    );
}

/// A write that contradicts what is committed is refused, and none of its
/// parts is applied.
pub async fn conflicting_commits_apply_nothing(store: &dyn RuntimeStore) {
    let run_id = running_run(store, "conflict").await;
    store
        .append_input(&run_id, input("a", b"1"))
        .await
        .expect("append a");
    store
        .append_input(&run_id, input("b", b"2"))
        .await
        .expect("append b");
    let commit = Commit::step(receipt(&run_id, 0, "first"), 2_000)
        .with_snapshot(Bytes::from_static(b"s0"))
        .with_input_update("a", InputPhase::Consumed);
    store
        .atomic_apply(&run_id, commit)
        .await
        .expect("commit step 0");
    let before = snapshot_of(store, &run_id).await;

    let rival = Commit::step(receipt(&run_id, 0, "second"), 2_001)
        .with_snapshot(Bytes::from_static(b"rival"))
        .with_input_update("b", InputPhase::Queued)
        .with_status(StatusChange::Completed { output: "x".into() });
    assert_conflict(
        store.atomic_apply(&run_id, rival).await,
        "a rival commit of step 0",
    );
    // A new step whose input update contradicts the committed phase.
    let backwards = Commit::step(receipt(&run_id, 1, "one"), 2_002)
        .with_snapshot(Bytes::from_static(b"s1"))
        .with_input_update("a", InputPhase::Queued);
    assert_conflict(
        store.atomic_apply(&run_id, backwards).await,
        "moving an input back",
    );
    let gap = Commit::step(receipt(&run_id, 2, "two"), 2_003);
    assert_invalid(
        store.atomic_apply(&run_id, gap).await,
        "skipping sequence 1",
    );
    let foreign = Commit::step(receipt(&unique_run_id("other"), 1, "x"), 2_004);
    assert_invalid(
        store.atomic_apply(&run_id, foreign).await,
        "another run's receipt",
    );
    let unknown = Commit::inputs(
        vec![crate::runtime_store::InputUpdate {
            input_id: "nope".into(),
            phase: InputPhase::Queued,
        }],
        2_005,
    );
    assert_invalid(
        store.atomic_apply(&run_id, unknown).await,
        "an unknown input",
    );
    let snapshot_alone = Commit::inputs(Vec::new(), 2_006).with_snapshot("s".into());
    assert_invalid(
        store.atomic_apply(&run_id, snapshot_alone).await,
        "a lone snapshot",
    );
    assert_conflict(
        store.append_input(&run_id, input("a", b"changed")).await,
        "re-appending an input with another payload",
    );
    assert_eq!(
        snapshot_of(store, &run_id).await,
        before,
        "a refused write changed the run"
    );

    // Attempts are fenced, terminal states are final.
    let restart = Commit::status(StatusChange::start_attempt(1), 1_234);
    assert_conflict(
        store.atomic_apply(&run_id, restart).await,
        "restarting attempt 1",
    );
    let skip = Commit::status(StatusChange::start_attempt(3), 1_235);
    assert_invalid(
        store.atomic_apply(&run_id, skip).await,
        "skipping attempt 2",
    );
    let fail = Commit::status(StatusChange::Failed { error: "e".into() }, 4_000);
    store
        .atomic_apply(&run_id, fail)
        .await
        .expect("fail the run");
    let terminal = snapshot_of(store, &run_id).await;
    let late_step = Commit::step(receipt(&run_id, 1, "late"), 4_001);
    assert_conflict(
        store.atomic_apply(&run_id, late_step).await,
        "a step after failing",
    );
    let complete = Commit::status(StatusChange::Completed { output: "o".into() }, 4_002);
    assert_conflict(
        store.atomic_apply(&run_id, complete).await,
        "completing a failed run",
    );
    let refail = Commit::status(StatusChange::Failed { error: "e".into() }, 4_003);
    assert_conflict(
        store.atomic_apply(&run_id, refail).await,
        "failing again, later",
    );
    assert_conflict(
        store.append_input(&run_id, input("late", b"x")).await,
        "an input to a finished run",
    );
    assert_eq!(
        snapshot_of(store, &run_id).await,
        terminal,
        "a refused write changed the run"
    );
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

/// Sixteen concurrent committers of one sequence, spread over four
/// instances: exactly one distinct commit wins, every other gets a
/// conflict, and identical commits all succeed. Concurrent attempt starts
/// and input appends behave the same way.
pub async fn racing_committers_of_one_sequence_have_one_winner<S: RuntimeStore + 'static>(
    make: &impl Fn() -> S,
) {
    let instances: Vec<Arc<S>> = (0..4).map(|_| Arc::new(make())).collect();
    let run_id = running_run(instances[0].as_ref(), "race").await;
    let racers = |commit: &dyn Fn(usize) -> Commit| {
        (0..16)
            .map(|i| {
                let store = Arc::clone(&instances[i % 4]);
                let (run_id, commit) = (run_id.clone(), commit(i));
                tokio::spawn(async move { store.atomic_apply(&run_id, commit).await })
            })
            .collect::<Vec<_>>()
    };
    let outcomes = join(racers(&|i| {
        Commit::step(receipt(&run_id, 0, format!("rival-{i}")), 2_000)
            .with_snapshot(Bytes::from(format!("snap-{i}")))
    }))
    .await;
    let winners: Vec<usize> = (0..16).filter(|&i| outcomes[i].is_ok()).collect();
    assert_eq!(
        winners.len(),
        1,
        "one winner among distinct commits: {outcomes:?}"
    );
    for (i, outcome) in outcomes.iter().enumerate() {
        if i != winners[0] {
            assert!(
                matches!(outcome, Err(Error::Conflict { .. })),
                "loser {i}: {outcome:?}"
            );
        }
    }
    let w = winners[0];
    let fresh = make();
    let receipts = fresh.load_receipts(&run_id, None).await.expect("receipts");
    assert_eq!(receipts, vec![receipt(&run_id, 0, format!("rival-{w}"))]);
    let snapshot = fresh.load_snapshot(&run_id).await.expect("snapshot");
    assert_eq!(
        snapshot,
        Some(Bytes::from(format!("snap-{w}"))),
        "the winner's snapshot"
    );

    let same = Commit::step(receipt(&run_id, 1, "same"), 2_001);
    for outcome in join(racers(&|_| same.clone())).await {
        assert!(
            outcome.is_ok(),
            "identical commits all succeed: {outcome:?}"
        );
    }
    assert_eq!(
        make()
            .load_receipts(&run_id, None)
            .await
            .expect("receipts")
            .len(),
        2
    );

    // Workers recovering the run at once, all in the same millisecond.
    let outcomes = join(racers(&|_| {
        Commit::status(StatusChange::start_attempt(2), 5_000)
    }))
    .await;
    let started = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(started, 1, "one start of attempt 2: {outcomes:?}");
    for outcome in &outcomes {
        assert!(
            matches!(outcome, Ok(_) | Err(Error::Conflict { .. })),
            "{outcome:?}"
        );
    }
    assert_eq!(load(&make(), &run_id).await.attempts, 2);

    let appends: Vec<_> = (0..16)
        .map(|i| {
            let store = Arc::clone(&instances[i % 4]);
            let run_id = run_id.clone();
            tokio::spawn(async move {
                store
                    .append_input(&run_id, input(&format!("in-{i}"), b"x"))
                    .await
            })
        })
        .collect();
    for outcome in join(appends).await {
        outcome.expect("distinct inputs all land");
    }
    assert_eq!(make().load_inputs(&run_id).await.expect("inputs").len(), 16);
}

async fn join<T: std::fmt::Debug>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    join_all(tasks)
        .await
        .into_iter()
        .map(|t| t.expect("a racer panicked"))
        .collect()
}

/// Every acknowledged change is seen by a fresh instance (a crash and a
/// restart), and by an instance that read the run before another instance
/// changed it; such a stale instance also commits correctly after them.
pub async fn reopened_store_sees_every_acknowledged_commit<S: RuntimeStore>(make: &impl Fn() -> S) {
    let first = make();
    let run_id = running_run(&first, "reopen").await;
    first
        .append_input(&run_id, input("sig", b"p"))
        .await
        .expect("append");
    let commits = [
        Commit::step(receipt(&run_id, 0, "a"), 2_000).with_snapshot("s0".into()),
        Commit::step(receipt(&run_id, 1, "b"), 2_001)
            .with_input_update("sig", InputPhase::Consumed),
    ];
    for commit in commits.clone() {
        first.atomic_apply(&run_id, commit).await.expect("commit");
    }
    let written = snapshot_of(&first, &run_id).await;
    drop(first);

    let reopened = make();
    assert_eq!(
        snapshot_of(&reopened, &run_id).await,
        written,
        "a fresh instance"
    );
    // A retry after the restart is still recognised as the same commit.
    for commit in commits {
        reopened
            .atomic_apply(&run_id, commit)
            .await
            .expect("retry after reopening");
    }
    assert_eq!(
        snapshot_of(&make(), &run_id).await,
        written,
        "a retry changed the run"
    );

    // `stale` reads the run now; `other` then moves it on.
    let stale = make();
    assert_eq!(snapshot_of(&stale, &run_id).await, written);
    let other = make();
    other
        .atomic_apply(&run_id, Commit::step(receipt(&run_id, 2, "c"), 2_002))
        .await
        .expect("commit elsewhere");
    other
        .append_input(&run_id, input("late", b"q"))
        .await
        .expect("append elsewhere");
    let moved = snapshot_of(&other, &run_id).await;
    assert_eq!(
        snapshot_of(&stale, &run_id).await,
        moved,
        "an instance that read before"
    );

    let behind = make();
    assert_eq!(load(&behind, &run_id).await.run_id, run_id);
    other
        .atomic_apply(&run_id, Commit::step(receipt(&run_id, 3, "d"), 2_003))
        .await
        .expect("commit elsewhere");
    // `behind` last saw three receipts; its commit of sequence 4 must land after 3.
    let done = Commit::step(receipt(&run_id, 4, "e"), 2_004).with_status(StatusChange::Completed {
        output: "out".into(),
    });
    let record = behind
        .atomic_apply(&run_id, done)
        .await
        .expect("commit from behind");
    assert_eq!(record.status, RunStatus::Completed);
    let finished = snapshot_of(&make(), &run_id).await;
    assert_eq!(finished.1.len(), 5);
    assert_eq!(finished.0, record);
    assert_eq!(snapshot_of(&other, &run_id).await, finished);
}

/// Once a finished run is deleted and a new run created under its id, every
/// instance sees only the new run, including one that read the old run
/// before; old commits do not apply to the new run.
pub async fn a_reused_run_id_is_a_new_run_everywhere<S: RuntimeStore>(make: &impl Fn() -> S) {
    let old = make();
    let run_id = running_run(&old, "reused").await;
    let old_step = Commit::step(receipt(&run_id, 0, "old"), 2_000).with_snapshot("old".into());
    old.atomic_apply(&run_id, old_step.clone())
        .await
        .expect("commit");
    let done = Commit::status(
        StatusChange::Completed {
            output: "old".into(),
        },
        3_000,
    );
    old.atomic_apply(&run_id, done).await.expect("complete");
    let finished = load(&old, &run_id).await;
    assert_eq!(finished.status, RunStatus::Completed);

    let other = make();
    assert!(
        other
            .delete_run(&run_id, finished.incarnation)
            .await
            .expect("delete")
    );
    let new = NewRun {
        workflow: "second".into(),
        ..new_run(&run_id, b"new")
    };
    other.create_run(new).await.expect("create again");
    let start = Commit::status(StatusChange::start_attempt(1), 5_000);
    other.atomic_apply(&run_id, start).await.expect("start");
    let new_step = Commit::step(receipt(&run_id, 0, "new"), 5_001);
    other.atomic_apply(&run_id, new_step).await.expect("commit");

    let seen = snapshot_of(&old, &run_id).await;
    assert_eq!(
        seen,
        snapshot_of(&make(), &run_id).await,
        "the instance that read the old run"
    );
    assert_eq!(
        (seen.0.workflow.as_str(), seen.0.status),
        ("second", RunStatus::Running)
    );
    assert_eq!(seen.1, vec![receipt(&run_id, 0, "new")]);
    assert_eq!(seen.2, None, "the old run's snapshot");
    assert_conflict(
        old.atomic_apply(&run_id, old_step).await,
        "an old commit on the new run",
    );
    let next = Commit::step(receipt(&run_id, 1, "next"), 5_002);
    old.atomic_apply(&run_id, next)
        .await
        .expect("commit to the new run");
    assert_eq!(
        make()
            .load_receipts(&run_id, None)
            .await
            .expect("receipts")
            .len(),
        2
    );
}

/// Listing by status finds exactly the runs in that status; listing run
/// ids finds every one of them.
pub async fn runs_are_listed_by_status(store: &dyn RuntimeStore) {
    let pending = unique_run_id("list-pending");
    store
        .create_run(new_run(&pending, b"i"))
        .await
        .expect("create");
    let running = running_run(store, "list-running").await;
    let completed = running_run(store, "list-completed").await;
    let done = Commit::status(StatusChange::Completed { output: "o".into() }, 9);
    store
        .atomic_apply(&completed, done)
        .await
        .expect("complete");
    let ours = [
        (&pending, RunStatus::Pending),
        (&running, RunStatus::Running),
        (&completed, RunStatus::Completed),
    ];
    for status in RunStatus::ALL {
        let listed = store.list_runs(status).await.expect("list runs");
        assert!(
            listed.iter().all(|r| r.status == status),
            "{status}: {listed:?}"
        );
        assert!(
            listed.windows(2).all(|w| w[0].run_id < w[1].run_id),
            "{status}: not in run-id order"
        );
        for (run_id, run_status) in ours {
            let found = listed.iter().any(|r| &r.run_id == run_id);
            assert_eq!(found, run_status == status, "{run_id} listed as {status}");
        }
        // The ids-only listing names at least every run in the status.
        let ids = store.list_run_ids(status).await.expect("list run ids");
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{status}: run ids not in order"
        );
        for record in &listed {
            assert!(
                ids.contains(&record.run_id),
                "{status}: {} not in the id listing",
                record.run_id
            );
        }
        for (run_id, run_status) in ours {
            if run_status == status {
                assert!(
                    ids.contains(run_id),
                    "{run_id} not in the {status} id listing"
                );
            }
        }
    }
}

/// Deleting a run removes all of it and nothing else, only once it is
/// terminal; the id can then be used again.
pub async fn deleting_a_run_removes_only_that_run(store: &dyn RuntimeStore) {
    let run_id = running_run(store, "delete").await;
    let neighbour = running_run(store, "delete").await;
    for id in [&run_id, &neighbour] {
        store
            .append_input(id, input("i", b"x"))
            .await
            .expect("append");
        let step = Commit::step(receipt(id, 0, "o"), 2_000).with_snapshot("s".into());
        store.atomic_apply(id, step).await.expect("commit");
    }
    let kept = snapshot_of(store, &neighbour).await;
    let incarnation = load(store, &run_id).await.incarnation;
    assert_conflict(
        store.delete_run(&run_id, incarnation).await,
        "deleting a running run",
    );
    let fail = Commit::status(StatusChange::Failed { error: "e".into() }, 3_000);
    store.atomic_apply(&run_id, fail).await.expect("fail");
    assert!(
        !store
            .delete_run(&run_id, crate::Incarnation::random())
            .await
            .expect("delete another incarnation"),
        "deleting another incarnation deletes nothing"
    );
    assert_eq!(load(store, &run_id).await.status, RunStatus::Failed);
    assert!(
        store
            .delete_run(&run_id, incarnation)
            .await
            .expect("delete")
    );
    assert_eq!(store.load_run(&run_id).await.expect("load"), None);
    assert!(
        store
            .load_receipts(&run_id, None)
            .await
            .expect("receipts")
            .is_empty()
    );
    assert!(store.load_inputs(&run_id).await.expect("inputs").is_empty());
    assert_eq!(store.load_snapshot(&run_id).await.expect("snapshot"), None);
    assert!(
        !store
            .delete_run(&run_id, incarnation)
            .await
            .expect("delete again")
    );
    for status in RunStatus::ALL {
        let listed = store.list_runs(status).await.expect("list");
        assert!(
            listed.iter().all(|r| r.run_id != run_id),
            "deleted run listed"
        );
    }
    assert_eq!(
        snapshot_of(store, &neighbour).await,
        kept,
        "the neighbour changed"
    );

    let reborn = store
        .create_run(new_run(&run_id, b"new"))
        .await
        .expect("re-create");
    assert_eq!(
        (reborn.status, &reborn.input[..]),
        (RunStatus::Pending, &b"new"[..])
    );
    assert!(
        store
            .load_receipts(&run_id, None)
            .await
            .expect("receipts")
            .is_empty()
    );
}

/// Damaged records of an [`ObjectStoreRuntimeStore`] (flipped bits,
/// truncation, foreign bytes, a valid frame around an undecodable record, a
/// missing or foreign log entry) are [`Error::Corrupt`] naming the object,
/// the run and the log position, on every read and write of the run; they
/// are never skipped, and the failed calls change nothing.
///
/// `make` returns a new instance over the same objects each time.
pub async fn corrupt_records_are_errors(
    make: &impl Fn() -> crate::runtime_store::ObjectStoreRuntimeStore,
) {
    use object_store::{ObjectStoreExt, PutPayload};

    let writer = make();
    let run_id = running_run(&writer, "corrupt").await;
    // Three log entries: fewer than the default checkpoint interval, so a
    // fresh instance reads every one of them.
    for seq in 0..2 {
        let commit = Commit::step(receipt(&run_id, seq, "o"), 2_000 + seq);
        writer.atomic_apply(&run_id, commit).await.expect("commit");
    }
    let intact = snapshot_of(&make(), &run_id).await;
    let objects = Arc::clone(writer.object_store());
    let folder = writer.run_folder(&run_id);
    let incarnation = intact.0.incarnation.to_string();
    let log = folder.clone().join(incarnation.as_str()).join("log");
    let log_entry = log.clone().join("00000000000000000002");
    let original = objects
        .get(&log_entry)
        .await
        .expect("log entry 2 exists where the layout says")
        .bytes()
        .await
        .expect("read log entry 2");

    let flipped = {
        let mut v = original.to_vec();
        let mid = v.len() / 2;
        v[mid] ^= 0x10;
        Bytes::from(v)
    };
    let seal = writer.seal();
    let mut damages: Vec<(&str, Bytes)> = vec![
        ("flipped", flipped),
        ("truncated", original.slice(..original.len() - 3)),
        ("foreign", Bytes::from_static(b"{\"not\": \"memo\"}")),
        (
            "undecodable",
            crate::envelope::seal(&log_entry, b"\xc1 not msgpack", seal),
        ),
    ];
    if seal.is_encrypted() {
        // Entry 1, a valid record of this run, moved to entry 2's path; and
        // entry 2's own record, written in the clear.
        let entry_1 = log.clone().join("00000000000000000001");
        let moved = objects
            .get(&entry_1)
            .await
            .expect("entry 1")
            .bytes()
            .await
            .expect("read entry 1");
        let payload = crate::envelope::open(&log_entry, original.clone(), seal, u64::MAX)
            .expect("entry 2 opens");
        let plaintext = crate::envelope::seal(&log_entry, &payload, &crate::seal::PLAIN);
        damages.push(("moved from entry 1", moved));
        damages.push(("plaintext", plaintext));
    }
    for (damage, bytes) in damages {
        objects
            .put(&log_entry, PutPayload::from(bytes))
            .await
            .expect("damage");
        expect_corrupt(&make(), &run_id, log_entry.as_ref(), damage).await;
        objects
            .put(&log_entry, PutPayload::from(original.clone()))
            .await
            .expect("repair");
        assert_eq!(
            snapshot_of(&make(), &run_id).await,
            intact,
            "{damage}: changed the run"
        );
    }

    // A hole in the log, and a foreign object in it.
    let middle = log.clone().join("00000000000000000001");
    let kept = objects
        .get(&middle)
        .await
        .expect("entry 1")
        .bytes()
        .await
        .expect("read");
    objects.delete(&middle).await.expect("delete entry 1");
    expect_corrupt(&make(), &run_id, middle.as_ref(), "missing").await;
    objects
        .put(&middle, PutPayload::from(kept))
        .await
        .expect("repair");
    let stray = log.clone().join("notes.txt");
    objects
        .put(&stray, PutPayload::from_static(b"hi"))
        .await
        .expect("stray");
    expect_corrupt(&make(), &run_id, stray.as_ref(), "stray").await;
    objects.delete(&stray).await.expect("remove stray");

    // The run's creation record.
    let created = folder.clone().join("run");
    let kept = objects
        .get(&created)
        .await
        .expect("run")
        .bytes()
        .await
        .expect("read");
    objects
        .put(&created, PutPayload::from_static(b"garbage"))
        .await
        .expect("damage");
    match make().load_run(&run_id).await {
        Err(Error::Corrupt { path, .. }) => assert_eq!(path, created.to_string()),
        other => panic!("a damaged creation record: expected Corrupt, got {other:?}"),
    }
    objects
        .put(&created, PutPayload::from(kept))
        .await
        .expect("repair");
    assert_eq!(
        snapshot_of(&make(), &run_id).await,
        intact,
        "the run changed"
    );
}

/// Every call on the run through a fresh instance fails with a `Corrupt`
/// error at `path` that names the run.
async fn expect_corrupt(store: &dyn RuntimeStore, run_id: &RunId, path: &str, damage: &str) {
    let check = |what: &str, result: crate::Result<()>| match result {
        Err(Error::Corrupt { path: p, reason }) => {
            assert_eq!(p, path, "{damage}/{what}: wrong path");
            assert!(
                reason.contains(run_id.as_str()),
                "{damage}/{what}: the reason does not name the run: {reason}"
            );
        }
        other => panic!("{damage}/{what}: expected Corrupt at {path}, got {other:?}"),
    };
    check("load_run", store.load_run(run_id).await.map(drop));
    check(
        "load_receipts",
        store.load_receipts(run_id, None).await.map(drop),
    );
    check("load_inputs", store.load_inputs(run_id).await.map(drop));
    let commit = Commit::step(receipt(run_id, 2, "x"), 9_000);
    check(
        "atomic_apply",
        store.atomic_apply(run_id, commit).await.map(drop),
    );
}

/// Requests that fail before they reach storage, acknowledgements lost
/// after a write, and seeded random faults of every kind never leave part
/// of a commit visible, and a retry of a commit whose outcome was unknown
/// applies it exactly once.
///
/// `make` returns a new instance over `faults` (and so over the same
/// objects) each time. Faults are injected only on paths of this check's
/// runs; `faults` is left with no rules and enabled.
pub async fn faults_never_leave_a_partial_commit<S: RuntimeStore, T: object_store::ObjectStore>(
    make: &impl Fn() -> S,
    faults: &crate::testing::FaultInjectingStore<T>,
) {
    use crate::testing::{FaultRule, RequestKind};

    let store = make();
    let run_id = running_run(&store, "faults").await;
    let rid = run_id.to_string();
    let ours = move |p: &object_store::path::Path| p.as_ref().contains(rid.as_str());
    let step = |seq: u64| {
        Commit::step(receipt(&run_id, seq, format!("o{seq}")), 2_000 + seq)
            .with_snapshot(Bytes::from(format!("s{seq}")))
            .with_input_update(format!("in-{seq}"), InputPhase::Consumed)
    };
    for seq in 0..4 {
        store
            .append_input(&run_id, input(&format!("in-{seq}"), b"x"))
            .await
            .expect("append");
    }

    // Writes that never reach storage: nothing is applied.
    faults.inject(FaultRule::fail_before(RequestKind::Create).matching(ours.clone()));
    let refused = store.atomic_apply(&run_id, step(0)).await;
    assert!(matches!(refused, Err(Error::Store { .. })), "{refused:?}");
    faults.clear_faults();
    assert_commits(&make(), &run_id, 0, &step).await;
    store.atomic_apply(&run_id, step(0)).await.expect("retry");
    assert_commits(&make(), &run_id, 1, &step).await;

    // A lost acknowledgement that a read-back settles: success, applied once.
    faults.inject(
        FaultRule::fail_after(RequestKind::Create)
            .matching(ours.clone())
            .times(1),
    );
    store
        .atomic_apply(&run_id, step(1))
        .await
        .expect("lost ack settled");
    assert_commits(&make(), &run_id, 2, &step).await;

    // A lost acknowledgement that cannot be settled: an error, then the
    // commit is whole or absent, and a retry applies it once.
    faults.inject(FaultRule::fail_after(RequestKind::Create).matching(ours.clone()));
    faults.inject(FaultRule::fail_before(RequestKind::Get).matching(ours.clone()));
    faults.inject(FaultRule::fail_before(RequestKind::Head).matching(ours.clone()));
    let unknown = store.atomic_apply(&run_id, step(2)).await;
    faults.clear_faults();
    assert!(unknown.is_err(), "every read-back failed, yet: {unknown:?}");
    let seen = receipts_len(&make(), &run_id).await;
    assert!(
        seen == 2 || seen == 3,
        "{seen} receipts after an unknown outcome"
    );
    assert_commits(&make(), &run_id, seen, &step).await;
    store
        .atomic_apply(&run_id, step(2))
        .await
        .expect("retry after unknown outcome");
    assert_commits(&make(), &run_id, 3, &step).await;

    // Seeded random faults on every request of the run.
    let before = faults.faults_injected();
    for kind in [
        RequestKind::Create,
        RequestKind::Get,
        RequestKind::Head,
        RequestKind::List,
    ] {
        for rule in [FaultRule::fail_before(kind), FaultRule::fail_after(kind)] {
            faults.inject(rule.matching(ours.clone()).with_probability(0.2));
        }
    }
    let chaotic = make();
    let mut applied = false;
    for _ in 0..200 {
        let outcome = chaotic.atomic_apply(&run_id, step(3)).await;
        faults.set_enabled(false);
        let seen = receipts_len(&make(), &run_id).await;
        assert!(seen == 3 || seen == 4, "{seen} receipts under faults");
        assert_commits(&make(), &run_id, seen, &step).await;
        faults.set_enabled(true);
        if outcome.is_ok() {
            applied = true;
            break;
        }
    }
    faults.clear_faults();
    assert!(applied, "no attempt of 200 got through the faults");
    assert!(faults.faults_injected() > before, "no fault fired");
    assert_commits(&make(), &run_id, 4, &step).await;
}

async fn receipts_len(store: &dyn RuntimeStore, run_id: &RunId) -> u64 {
    store
        .load_receipts(run_id, None)
        .await
        .expect("receipts")
        .len() as u64
}

/// The run holds exactly the first `n` commits made by `step`, each whole:
/// its receipt, its snapshot (the latest) and its consumed input.
async fn assert_commits(
    store: &dyn RuntimeStore,
    run_id: &RunId,
    n: u64,
    step: &dyn Fn(u64) -> Commit,
) {
    let receipts = store.load_receipts(run_id, None).await.expect("receipts");
    let expected: Vec<_> = (0..n).filter_map(|s| step(s).receipt).collect();
    assert_eq!(receipts, expected, "receipts");
    let snapshot = store.load_snapshot(run_id).await.expect("snapshot");
    let expected = n.checked_sub(1).and_then(|last| step(last).snapshot);
    assert_eq!(snapshot, expected, "the snapshot of the last commit");
    for record in store.load_inputs(run_id).await.expect("inputs") {
        let seq: u64 = record.input_id["in-".len()..].parse().expect("in-<seq>");
        let consumed = seq < n;
        assert_eq!(
            (record.phase == InputPhase::Consumed, record.consumed_by),
            (consumed, consumed.then_some(seq)),
            "input {} after {n} commits",
            record.input_id
        );
    }
}

/// A deletion of an [`ObjectStoreRuntimeStore`] run that stopped after its
/// run pointer went (a crash) leaves a run that does not exist; a new run of
/// that id is another incarnation that inherits nothing of the old run's
/// log, and finishing the old deletion (`delete_run` with the old
/// incarnation) removes the leftovers without touching the new run.
pub async fn an_unfinished_deletion_is_finished_not_inherited(
    make: &impl Fn() -> crate::runtime_store::ObjectStoreRuntimeStore,
) {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;

    let store = make();
    let run_id = running_run(&store, "half-deleted").await;
    store
        .atomic_apply(&run_id, Commit::step(receipt(&run_id, 0, "o"), 2_000))
        .await
        .expect("commit");
    let fail = Commit::status(StatusChange::Failed { error: "e".into() }, 3_000);
    let old = store.atomic_apply(&run_id, fail).await.expect("fail");
    // The first things delete_run removes (the incarnation's record, then
    // the run pointer), then the "crash".
    let folder = store.run_folder(&run_id);
    let record = folder.clone().join(old.incarnation.to_string()).join("run");
    for path in [record, folder.join("run")] {
        store
            .object_store()
            .delete(&path)
            .await
            .expect("delete the record and the run pointer");
    }

    let fresh = make();
    assert_eq!(fresh.load_run(&run_id).await.expect("load"), None);
    let reborn = fresh
        .create_run(new_run(&run_id, b"new"))
        .await
        .expect("create over the leftovers");
    assert_ne!(reborn.incarnation, old.incarnation);
    assert_eq!((reborn.status, reborn.attempts), (RunStatus::Pending, 0));
    assert!(
        make()
            .load_receipts(&run_id, None)
            .await
            .expect("receipts")
            .is_empty(),
        "the new run inherited the old run's receipts"
    );
    assert!(
        !fresh
            .delete_run(&run_id, old.incarnation)
            .await
            .expect("finish the old deletion"),
        "the old incarnation no longer exists"
    );
    let old_records = store
        .run_folder(&run_id)
        .join(old.incarnation.to_string().as_str());
    let left: Vec<_> = store
        .object_store()
        .list(Some(&old_records))
        .try_collect()
        .await
        .expect("list");
    assert!(left.is_empty(), "leftovers of the old run: {left:?}");
    assert_eq!(load(&make(), &run_id).await, reborn);
}
