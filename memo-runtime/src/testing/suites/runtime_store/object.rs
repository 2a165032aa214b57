//! The checks of the object-storage backend: damaged records are errors,
//! faults never leave a partial commit, and an unfinished deletion is
//! finished rather than inherited.

use std::sync::Arc;

use bytes::Bytes;

use super::{input, load, new_run, receipt, running_run, snapshot_of};
use crate::error::Error;
use crate::run_id::RunId;
#[cfg(doc)]
use crate::runtime_store::ObjectStoreRuntimeStore;
use crate::runtime_store::{Commit, InputPhase, RunStatus, RuntimeStore, StatusChange};

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
    // With data keys, the seal of this run with its key fetched, as the
    // store seals and opens it.
    let run_seal = writer.seal().for_run(&run_id, intact.0.incarnation);
    let seal = &*run_seal
        .for_writing(&log_entry)
        .await
        .expect("the run's data key");
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
