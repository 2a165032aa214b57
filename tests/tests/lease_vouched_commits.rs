//! Step commits acknowledged on their attempt's lease (issue 25, item 5):
//! a step commit of the attempt that holds the run's lease, written while
//! that lease is live by the runtime's clock, costs its create alone; the
//! run pointer is read by every other change, by a commit whose lease
//! lapsed, and by every 16th step commit in a row, and a read that finds
//! the incarnation gone takes back every commit acknowledged since the
//! last one (`memo-runtime/src/runtime_store/object/runs/unchecked.rs`
//! says why a live lease answers for the pointer).

use std::sync::Arc;

use futures::TryStreamExt;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::runtime_store::{
    Commit, Fence, NewRun, ObjectStoreRuntimeStore, RuntimeStore, StatusChange, StepReceipt,
};
use memo_runtime::testing::CountingStore;
use memo_runtime::{Bytes, Error, RunId};
use memo_tests::fixtures::{is_vacated_pointer, run};
use memo_tests::pause::{Held, Pauses, wait_reached};

const PREFIX: &str = "runs";

/// The lease attempt 1 takes at 1,000 ms: until 10,000 ms.
const LEASE_UNTIL_MS: u64 = 10_000;

fn step(run_id: &RunId, sequence: u64, fence: Fence) -> Commit {
    let receipt = StepReceipt {
        run_id: run_id.clone(),
        sequence,
        step: format!("step-{sequence}"),
        output: Bytes::from(format!("output of {sequence}")),
        recorded_at_ms: 1_000 + sequence,
        error: None,
        retries: 0,
        last_retried_error: None,
    };
    Commit::step(receipt, 1_000 + sequence).with_fence(fence)
}

/// A run created and started (attempt 1, leased until `LEASE_UNTIL_MS`)
/// through `store`: the start's fence.
async fn started(store: &dyn RuntimeStore, run_id: &RunId) -> Fence {
    let new = NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: Bytes::from_static(b"input"),
        created_at_ms: 1_000,
        workflow_version: None,
    };
    store.create_run(new).await.unwrap();
    let start = StatusChange::start_leased(1, "worker-a", LEASE_UNTIL_MS);
    let fence = start.fence().unwrap();
    store
        .atomic_apply(run_id, Commit::status(start, 1_000))
        .await
        .unwrap();
    fence
}

/// A writer whose runtime's clock reads `clock`.
fn writer(objects: Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> ObjectStoreRuntimeStore {
    let store = ObjectStoreRuntimeStore::new(objects, PREFIX);
    store.use_clock(clock.clone());
    store
}

/// The objects of `run_id`'s folder, but the vacated pointer its deletion
/// leaves until a recheck.
async fn objects_of(objects: &dyn ObjectStore, run_id: &RunId) -> Vec<Path> {
    let folder = Path::from(format!("{PREFIX}/runs/{run_id}"));
    let listed: Vec<Path> = (objects.list(Some(&folder)))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .unwrap();
    let mut left = Vec::new();
    for path in listed {
        if !is_vacated_pointer(objects, path.as_ref()).await {
            left.push(path);
        }
    }
    left
}

#[tokio::test]
async fn a_step_commit_under_a_live_lease_reads_the_pointer_only_every_sixteenth_time() {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let clock = Arc::new(ManualClock::new(1_000));
    let store = writer(counting.clone(), &clock);
    let run_id = run("vouched");
    let fence = started(&store, &run_id).await;
    // 32 commits (log positions 1 to 32), 2 pointer reads, and a delta
    // every 5 entries (the run has no base yet): at 5, 10, ..., 30.
    counting.reset();
    for sequence in 0..32 {
        store
            .atomic_apply(&run_id, step(&run_id, sequence, fence))
            .await
            .unwrap();
    }
    let c = counting.counts();
    assert_eq!((c.creates, c.gets), (32 + 6, 2), "{c:?}");
    // The lease lapsed by the clock (a pause, a clock jump): each commit
    // reads the pointer again.
    clock.set_ms(LEASE_UNTIL_MS);
    counting.reset();
    store
        .atomic_apply(&run_id, step(&run_id, 32, fence))
        .await
        .unwrap();
    assert_eq!(counting.counts().gets, 1, "{:?}", counting.counts());
    // As does a commit with no fence, and a store no runtime gave a clock.
    clock.set_ms(1_000);
    counting.reset();
    let mut unfenced = step(&run_id, 33, fence);
    unfenced.fence = None;
    store.atomic_apply(&run_id, unfenced).await.unwrap();
    assert_eq!(counting.counts().gets, 1, "{:?}", counting.counts());
    let clockless = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    clockless.load_run(&run_id).await.unwrap();
    counting.reset();
    clockless
        .atomic_apply(&run_id, step(&run_id, 34, fence))
        .await
        .unwrap();
    assert_eq!(counting.counts().gets, 1, "{:?}", counting.counts());
}

/// Attempt 1 of a run writes a step through a writer whose clock reads
/// `stale_clock_ms` afterwards; meanwhile another process, whose clock is
/// past attempt 1's lease, starts attempt 2, ends the run and deletes it.
/// Then attempt 1 commits its next steps until one fails: the number of
/// them acknowledged, and what the run's folder holds after the failure.
async fn stale_commits_after_a_deletion(stale_clock_ms: u64) -> (u64, Vec<Path>) {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let clock = Arc::new(ManualClock::new(1_000));
    let a = writer(objects.clone(), &clock);
    let run_id = run("overrun");
    let fence = started(&a, &run_id).await;
    a.atomic_apply(&run_id, step(&run_id, 0, fence))
        .await
        .unwrap();

    let b = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    let start = StatusChange::start_leased(2, "worker-b", 40_000);
    let took_over = start.fence().unwrap();
    b.atomic_apply(&run_id, Commit::status(start, 20_000))
        .await
        .unwrap();
    let output = Bytes::from_static(b"done by attempt 2");
    let done = Commit::status(StatusChange::Completed { output }, 20_001).with_fence(took_over);
    let ended = b.atomic_apply(&run_id, done).await.unwrap();
    assert!(b.delete_run(&run_id, ended.incarnation).await.unwrap());

    clock.set_ms(stale_clock_ms);
    let mut acknowledged = 0;
    for sequence in 1..100 {
        match a
            .atomic_apply(&run_id, step(&run_id, sequence, fence))
            .await
        {
            Ok(_) => acknowledged += 1,
            Err(Error::Conflict { .. }) => break,
            Err(e) => panic!("step {sequence}: {e}"),
        }
    }
    (acknowledged, objects_of(objects.as_ref(), &run_id).await)
}

#[tokio::test]
async fn a_stale_attempt_whose_lease_lapsed_by_its_clock_commits_nothing_into_a_deleted_run() {
    // Its clock is past its lease, as after the pause that let the other
    // attempt take over: its first commit reads the pointer, takes its
    // entry back and fails.
    let (acknowledged, left) = stale_commits_after_a_deletion(LEASE_UNTIL_MS + 1).await;
    assert_eq!(acknowledged, 0);
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn commits_acknowledged_on_a_lease_another_attempt_overran_are_taken_back() {
    // The assumption fails: its clock says its lease is live while another
    // process's clock let attempt 2 take the run over. Its commits into
    // the deleted run are acknowledged until the 16th in a row reads the
    // pointer, which takes every one of them back (and the checkpoints
    // written after them) and fails.
    let (acknowledged, left) = stale_commits_after_a_deletion(1_000).await;
    assert_eq!(acknowledged, 14, "15 unchecked with step 0");
    assert!(left.is_empty(), "{left:?}");
}

/// Seeds 5749, 9156 (and 9812) of the deployment world: a commit's
/// checkpoint was written after the commit's pointer read, so a deletion
/// that listed the run's folder in between left it, where no deletion
/// lists again. It is written before the read now, and taken back with the
/// entry when the read finds the run gone.
#[tokio::test]
async fn a_checkpoint_written_while_its_run_is_deleted_is_taken_back_with_its_entry() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let b = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    let run_id = run("checkpointed");
    let new = NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: Bytes::from_static(b"input"),
        created_at_ms: 1,
        workflow_version: None,
    };
    let created = b.create_run(new).await.unwrap();
    let start = Commit::status(StatusChange::start_attempt(1), 2);
    b.atomic_apply(&run_id, start).await.unwrap();

    // A writes a delta after each commit; its first is held.
    let deltas = Path::from(format!(
        "{PREFIX}/runs/{run_id}/{}/deltas",
        created.incarnation
    ));
    let (paused, delta) = Pauses::new(objects.clone(), Held::Put, deltas);
    let a = Arc::new(
        ObjectStoreRuntimeStore::new(Arc::new(paused), PREFIX).with_checkpoint_interval(1),
    );
    a.load_run(&run_id).await.unwrap();
    let committing = tokio::spawn({
        let (a, run_id) = (a.clone(), run_id.clone());
        async move {
            let mut commit = step(
                &run_id,
                0,
                Fence {
                    attempt: 1,
                    token: 0,
                },
            );
            commit.fence = None;
            a.atomic_apply(&run_id, commit).await
        }
    });
    wait_reached(delta.reached, "delta").await;

    // Meanwhile the run ends and is deleted whole.
    let output = Bytes::from_static(b"done");
    let done = Commit::status(StatusChange::Completed { output }, 3);
    b.atomic_apply(&run_id, done).await.unwrap();
    assert!(b.delete_run(&run_id, created.incarnation).await.unwrap());

    delta.release.send(()).unwrap();
    let committed = committing.await.unwrap();
    assert!(
        matches!(committed, Err(Error::Conflict { .. })),
        "{committed:?}"
    );
    let left = objects_of(objects.as_ref(), &run_id).await;
    assert!(left.is_empty(), "{left:?}");
}
