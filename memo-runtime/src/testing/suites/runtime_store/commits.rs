//! Runs and commits round-trip, retries are idempotent, and a refused
//! commit changes nothing.

use bytes::Bytes;

use super::{
    assert_conflict, assert_invalid, input, load, new_run, receipt, running_run, snapshot_of,
    unique_run_id,
};
use crate::error::Error;
use crate::runtime_store::{
    Commit, InputPhase, NewInput, NewRun, RunStatus, RuntimeStore, StatusChange,
};

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
    assert_eq!(
        store
            .load_receipts_and_inputs(&unknown)
            .await
            .expect("receipts and inputs"),
        (Vec::new(), Vec::new())
    );
    assert_eq!(store.load_snapshot(&unknown).await.expect("snapshot"), None);
    let write = store
        .atomic_apply(&unknown, Commit::status(StatusChange::start_attempt(1), 1))
        .await;
    assert!(
        matches!(write, Err(Error::RunNotFound { .. })),
        "writing to an unknown run: {write:?}"
    );
    let start = Commit::status(StatusChange::start_attempt(1), 1);
    let write = store.atomic_apply_and_load(&unknown, start).await;
    assert!(
        matches!(write, Err(Error::RunNotFound { .. })),
        "writing to an unknown run and reading it back: {write:?}"
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
    assert_eq!(
        store
            .load_receipts_and_inputs(&run_id)
            .await
            .expect("receipts and inputs"),
        (expected.clone(), inputs.clone()),
        "one read of both answers as the two loads"
    );

    // A commit answered with the run after it: as the loads that follow.
    let fourth = Commit::step(receipt(&run_id, 3, "out-3"), 2_500);
    let (record, receipts, inputs) = store
        .atomic_apply_and_load(&run_id, fourth)
        .await
        .expect("commit a step and read the run back");
    assert_eq!(receipts.len(), 4, "every receipt, the commit's own last");
    assert_eq!(receipts[..3], expected);
    assert_eq!(
        (record.clone(), receipts, inputs),
        (
            load(store, &run_id).await,
            store.load_receipts(&run_id, None).await.expect("receipts"),
            store.load_inputs(&run_id).await.expect("inputs")
        ),
        "a commit's answer is the run the loads read after it"
    );

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
    // With the run as it stood: what a signaller reads for the lease.
    let (again, record) = store
        .append_input_and_load(&run_id, input("sig", b"p"))
        .await
        .expect("append again, and load");
    assert_eq!(again, first);
    let record = record.expect("the run");
    assert_eq!(
        (record.incarnation, record.attempts, record.status),
        (created.incarnation, 1, RunStatus::Running)
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
        store.atomic_apply(&run_id, rival.clone()).await,
        "a rival commit of step 0",
    );
    assert_conflict(
        store.atomic_apply_and_load(&run_id, rival).await,
        "a rival commit of step 0, read back",
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
