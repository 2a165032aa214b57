//! Several instances over the same records: racing committers have one
//! winner, a reopened store sees every acknowledged commit, and a reused run
//! id is a new run everywhere.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::join_all;

use super::{assert_conflict, input, load, new_run, receipt, running_run, snapshot_of};
use crate::error::Error;
use crate::runtime_store::{Commit, InputPhase, NewRun, RunStatus, RuntimeStore, StatusChange};

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
