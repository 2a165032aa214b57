//! Runs listed by status, and deleting a run removes only that run (its
//! cost ledger with it).

use super::{
    assert_conflict, assert_invalid, input, load, new_run, receipt, running_run, snapshot_of,
    unique_run_id,
};
use crate::runtime_store::{AttemptCost, Commit, RunStatus, RuntimeStore, StatusChange, Usage};

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

/// A run's cost ledger keeps the first record of each attempt, and the
/// entry the commit that ends the run carries (`Commit::cost`), in attempt
/// order, and is deleted with the run: a new run of the id starts with none.
/// Only the commit that ends the run, of the attempt the entry names, may
/// carry one. A store that keeps no ledger (the trait's default) reads
/// every run's as empty.
pub async fn a_runs_cost_ledger_is_kept_once_and_deleted_with_it(store: &dyn RuntimeStore) {
    let run_id = running_run(store, "ledger").await;
    let incarnation = load(store, &run_id).await.incarnation;
    let cost = |attempt: u32, gets: u64| AttemptCost {
        attempt,
        recorded_at_ms: 2_000 + u64::from(attempt),
        usage: Usage {
            gets,
            ..Usage::default()
        },
    };
    for recorded in [cost(2, 20), cost(1, 10), cost(1, 99)] {
        store
            .record_attempt_cost(&run_id, incarnation, &recorded)
            .await
            .expect("record an attempt's cost");
    }
    let ledger = store
        .load_attempt_costs(&run_id, incarnation)
        .await
        .expect("load the ledger");
    let keeps_one = !ledger.is_empty();
    if keeps_one {
        assert_eq!(
            ledger,
            [cost(1, 10), cost(2, 20)],
            "the first record of each attempt, in attempt order"
        );
    }
    let mut fence = None;
    for attempt in [2, 3] {
        let start = StatusChange::start_attempt(attempt);
        fence = start.fence();
        let start = Commit::status(start, 2_500);
        store.atomic_apply(&run_id, start).await.expect("start");
    }
    let fence = fence.expect("a start has a fence");
    let not_an_end = Commit::step(receipt(&run_id, 0, "x"), 2_600).with_cost(cost(3, 1));
    assert_invalid(
        store.atomic_apply(&run_id, not_an_end).await,
        "a step commit carrying a cost",
    );
    let fenced = Commit::status(StatusChange::Failed { error: "e".into() }, 2_700)
        .with_fence(fence)
        .with_cost(cost(2, 1));
    assert_invalid(
        store.atomic_apply(&run_id, fenced).await,
        "attempt 3's end carrying attempt 2's cost",
    );
    let done =
        Commit::status(StatusChange::Failed { error: "e".into() }, 3_000).with_cost(cost(3, 30));
    store.atomic_apply(&run_id, done).await.expect("fail");
    let ledger = store
        .load_attempt_costs(&run_id, incarnation)
        .await
        .expect("load the ledger of the ended run");
    if keeps_one {
        assert_eq!(
            ledger,
            [cost(1, 10), cost(2, 20), cost(3, 30)],
            "the end's entry after the records, in attempt order"
        );
    } else {
        assert!(ledger.is_empty(), "{ledger:?}");
    }
    assert!(
        store
            .delete_run(&run_id, incarnation)
            .await
            .expect("delete")
    );
    let left = store
        .load_attempt_costs(&run_id, incarnation)
        .await
        .expect("load the ledger of a deleted run");
    assert!(left.is_empty(), "a deleted run's ledger is gone: {left:?}");
    let reborn = store
        .create_run(new_run(&run_id, b"again"))
        .await
        .expect("re-create");
    let fresh = store
        .load_attempt_costs(&run_id, reborn.incarnation)
        .await
        .expect("load the new run's ledger");
    assert!(
        fresh.is_empty(),
        "a new run of the id has no ledger: {fresh:?}"
    );
}
