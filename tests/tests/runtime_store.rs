//! The RuntimeStore conformance suite, once per backend: the in-memory
//! store, and the object-store store (with its object-storage checks) on
//! InMemory, on a local folder (at a prefix and at the root), behind a
//! PrefixStore and with a cache of one run.

use std::sync::Arc;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::prefix::PrefixStore;
use memo_runtime::runtime_store::{InMemoryRuntimeStore, ObjectStoreRuntimeStore, RuntimeStore};
use memo_runtime::testing::runtime_store as suite;
use memo_tests::fixtures::{Backend, every_seal_option};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_the_in_memory_store() {
    let store = InMemoryRuntimeStore::new();
    suite::run_suite(|| store.clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_object_store_on_every_backend() {
    for backend in Backend::all() {
        suite::run_object_store_suite(
            || backend.open(),
            |objects| ObjectStoreRuntimeStore::new(objects, "memo"),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_with_compression_and_encryption_on_every_backend() {
    for backend in Backend::all() {
        suite::run_object_store_suite(
            || backend.open(),
            |objects| ObjectStoreRuntimeStore::new(objects, "memo").with_seal(every_seal_option()),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_object_store_at_the_root_of_a_local_folder() {
    let backend = Backend::local_folder();
    suite::run_object_store_suite(
        || backend.open(),
        |objects| ObjectStoreRuntimeStore::new(objects, ""),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_object_store_behind_a_prefix_store() {
    let backend = Backend::in_memory();
    suite::run_object_store_suite(
        || -> Arc<dyn ObjectStore> { Arc::new(PrefixStore::new(backend.objects(), "tenant/a")) },
        |objects| ObjectStoreRuntimeStore::new(objects, "memo"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_with_a_cache_of_one_run() {
    let backend = Backend::in_memory();
    suite::run_object_store_suite(
        || backend.objects(),
        |objects| ObjectStoreRuntimeStore::new(objects, "memo").with_cached_runs(1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_through_a_shared_trait_object() {
    let backend = Backend::in_memory();
    suite::run_suite(|| -> Arc<dyn RuntimeStore> { Arc::new(backend.runtime_store("memo")) }).await;
}

/// What the object-store runtime store's calls cost in requests, as its
/// documentation states.
mod costs {
    use std::sync::Arc;

    use futures::TryStreamExt;
    use memo_runtime::Incarnation;
    use memo_runtime::object_store::memory::InMemory;
    use memo_runtime::object_store::path::Path;
    use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
    use memo_runtime::runtime_store::{Commit, RunStatus, StatusChange};
    use memo_runtime::testing::CountingStore;
    use memo_runtime::{
        Bytes, RunId,
        runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
    };
    use memo_tests::fixtures::{new_run, run, step_commit};

    fn counted() -> (Arc<CountingStore<InMemory>>, ObjectStoreRuntimeStore) {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let store = ObjectStoreRuntimeStore::new(counting.clone(), "memo");
        (counting, store)
    }

    async fn started(store: &ObjectStoreRuntimeStore, id: &str) -> RunId {
        let run_id = run(id);
        store.create_run(new_run(&run_id)).await.unwrap();
        let start = Commit::status(StatusChange::start_attempt(1), 1);
        store.atomic_apply(&run_id, start).await.unwrap();
        run_id
    }

    #[tokio::test]
    async fn a_commit_to_a_cached_run_is_one_create_and_one_get_and_a_read_two_gets() {
        let (counting, store) = counted();
        let run_id = started(&store, "cached").await;
        counting.reset();
        store
            .atomic_apply(&run_id, step_commit(&run_id, 0))
            .await
            .unwrap();
        let c = counting.counts();
        // The log entry, then the run pointer: is the incarnation still there?
        assert_eq!((c.creates, c.gets, c.heads, c.lists), (1, 1, 0, 0), "{c:?}");

        counting.reset();
        assert_eq!(store.load_receipts(&run_id, None).await.unwrap().len(), 1);
        let c = counting.counts();
        // The next log position, then the run pointer.
        assert_eq!((c.creates, c.gets, c.heads, c.lists), (0, 2, 0, 0), "{c:?}");
    }

    #[tokio::test]
    async fn a_read_of_a_cached_finished_run_reads_only_its_creation_record() {
        let (counting, store) = counted();
        let run_id = started(&store, "finished").await;
        let done = Commit::status(StatusChange::Failed { error: "e".into() }, 3);
        store.atomic_apply(&run_id, done).await.unwrap();
        counting.reset();
        assert_eq!(
            store.load_run(&run_id).await.unwrap().unwrap().status,
            RunStatus::Failed
        );
        let c = counting.counts();
        assert_eq!((c.gets, c.heads, c.lists), (1, 0, 0), "{c:?}");
    }

    #[tokio::test]
    async fn a_fresh_instance_folds_a_run_before_its_first_checkpoint_with_three_listings_and_a_get_per_entry()
     {
        let (counting, store) = counted();
        // No checkpoint before the tenth entry.
        let store = store.with_checkpoint_interval(10);
        let run_id = started(&store, "fresh").await;
        for seq in 0..5 {
            store
                .atomic_apply(&run_id, step_commit(&run_id, seq))
                .await
                .unwrap();
        }
        let fresh = ObjectStoreRuntimeStore::new(counting.clone(), "memo");
        counting.reset();
        assert_eq!(fresh.load_receipts(&run_id, None).await.unwrap().len(), 5);
        let c = counting.counts();
        // The creation record, the (empty) delta listing, a listing of the
        // incarnation's folder (its record, and no folder of checkpoints:
        // no older deltas and no base to list), then the log: the attempt
        // start and five steps.
        let listings = c.lists + c.lists_with_offset + c.lists_with_delimiter;
        assert_eq!(
            (listings, c.gets, c.objects_listed),
            (3, 1 + 6, 1 + 6),
            "{c:?}"
        );
    }

    #[tokio::test]
    async fn listing_by_status_reads_only_the_runs_in_that_status() {
        let (counting, store) = counted();
        for i in 0..10 {
            let run_id = started(&store, &format!("done-{i}")).await;
            let done = Commit::status(
                StatusChange::Completed {
                    output: Bytes::new(),
                },
                3,
            );
            store.atomic_apply(&run_id, done).await.unwrap();
        }
        let pending = run("waiting");
        store.create_run(new_run(&pending)).await.unwrap();

        let fresh = ObjectStoreRuntimeStore::new(counting.clone(), "memo");
        counting.reset();
        let listed = fresh.list_runs(RunStatus::Pending).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].run_id, pending);
        let c = counting.counts();
        // One hint listed; one run loaded (its creation, its deltas, none,
        // its incarnation's folder, its record and no checkpoints, and its
        // log, empty).
        let listings = c.lists + c.lists_with_offset + c.lists_with_delimiter;
        assert_eq!((c.objects_listed, c.gets, listings), (2, 1, 4), "{c:?}");
        assert_eq!(fresh.list_runs(RunStatus::Running).await.unwrap().len(), 0);
        assert_eq!(
            fresh.list_runs(RunStatus::Completed).await.unwrap().len(),
            10
        );
    }

    #[tokio::test]
    async fn deleting_a_run_deletes_what_its_folder_holds_and_its_hints_in_one_batch() {
        let (counting, store) = counted();
        let run_id = started(&store, "doomed").await;
        for seq in 0..40 {
            store
                .atomic_apply(&run_id, step_commit(&run_id, seq))
                .await
                .unwrap();
        }
        let done = Commit::status(StatusChange::Failed { error: "e".into() }, 3);
        let incarnation = store.atomic_apply(&run_id, done).await.unwrap().incarnation;
        counting.reset();
        assert!(store.delete_run(&run_id, incarnation).await.unwrap());
        let c = counting.counts();
        // The record and the record again, one call each, the pointer
        // vacated between them by a conditional update (`pointer.rs` says
        // why in that order); then everything the incarnation's folder
        // held (its 42 log entries, deltas and bases) and a hint of each
        // status, in one `delete_stream`: one `DeleteObjects` request per
        // 1,000 paths on S3, where a delete per path sent one request each.
        assert_eq!((c.delete_streams, c.puts), (2 + 1, 1), "{c:?}");
        assert!(c.delete_paths > 2 + 42 + 5, "{c:?}");
        assert!(store.load_run(&run_id).await.unwrap().is_none());
        assert!(
            !store.holds_remains(&run_id, incarnation).await.unwrap(),
            "nothing of the run is left"
        );
    }

    /// A run started and failed, then deleted: its incarnation.
    async fn deleted(store: &ObjectStoreRuntimeStore, id: &str) -> (RunId, Incarnation) {
        let run_id = started(store, id).await;
        let done = Commit::status(StatusChange::Failed { error: "e".into() }, 1);
        let incarnation = store.atomic_apply(&run_id, done).await.unwrap().incarnation;
        assert!(store.delete_run(&run_id, incarnation).await.unwrap());
        (run_id, incarnation)
    }

    /// What a stale writer left of a deleted incarnation (a log entry, a
    /// status hint) goes with a read of the pointer, a listing of the
    /// incarnation's folder and one `delete_stream`, the 5 status hints in
    /// it unasked: no `HEAD`, and no listing of the id's folder for a
    /// record to restore the missing pointer from (`holds_remains` sends
    /// both). It answers whether the folder held anything.
    #[tokio::test]
    async fn clearing_a_deleted_incarnations_remains_is_a_get_a_listing_and_one_batch() {
        let (counting, store) = counted();
        let (run_id, incarnation) = deleted(&store, "doomed").await;
        let late = [
            format!("memo/runs/doomed/{incarnation}/log/late"),
            format!("memo/runs-by-status/Running/doomed.{incarnation}"),
        ];
        for path in &late {
            counting
                .put(&Path::from(path.as_str()), Vec::<u8>::new().into())
                .await
                .unwrap();
        }
        assert!(store.holds_remains(&run_id, incarnation).await.unwrap());

        counting.reset();
        assert!(store.clear_remains(&run_id, incarnation).await.unwrap());
        let c = counting.counts();
        let listings = c.lists + c.lists_with_offset + c.lists_with_delimiter;
        assert_eq!(
            (c.gets, c.heads, listings, c.delete_streams, c.delete_paths),
            (1, 0, 1, 1, 1 + 5),
            "{c:?}"
        );
        for path in &late {
            let found = counting.head(&Path::from(path.as_str())).await;
            assert!(found.is_err(), "{path} is gone");
        }
        assert!(!store.holds_remains(&run_id, incarnation).await.unwrap());
        // Nothing in the folder: `false`, the hints deleted again unasked.
        assert!(!store.clear_remains(&run_id, incarnation).await.unwrap());
    }

    /// The run's current incarnation is never cleared as remains.
    #[tokio::test]
    async fn clearing_the_remains_of_the_current_incarnation_touches_nothing() {
        let (counting, store) = counted();
        let run_id = started(&store, "alive").await;
        let incarnation = store.load_run(&run_id).await.unwrap().unwrap().incarnation;
        counting.reset();
        assert!(!store.clear_remains(&run_id, incarnation).await.unwrap());
        let c = counting.counts();
        assert_eq!((c.delete_streams, c.delete_paths), (0, 0), "{c:?}");
        let fresh = ObjectStoreRuntimeStore::new(counting.clone(), "memo");
        let record = fresh.load_run(&run_id).await.unwrap().unwrap();
        assert_eq!(
            (record.incarnation, record.status),
            (incarnation, RunStatus::Running)
        );
    }

    /// The tombstones of several deletions go in one `delete_stream`, and
    /// their vacated pointers (each read, and marked swept) in a second,
    /// with an answer for each, in their order.
    #[tokio::test]
    async fn forgetting_deletions_together_deletes_their_tombstones_and_pointers_in_two_batches() {
        let (counting, store) = counted();
        let a = deleted(&store, "a").await;
        let b = deleted(&store, "b").await;
        let tombstones = || async {
            counting
                .list(Some(&Path::from("memo/tombstones")))
                .try_collect::<Vec<_>>()
                .await
                .unwrap()
                .len()
        };
        assert_eq!(tombstones().await, 2);
        counting.reset();
        let forgotten = store.forget_deleted_all(&[a, b]).await;
        assert!(forgotten.iter().all(Result::is_ok), "{forgotten:?}");
        assert_eq!(forgotten.len(), 2);
        let c = counting.counts();
        assert_eq!((c.delete_streams, c.delete_paths), (2, 4), "{c:?}");
        assert_eq!((c.gets, c.puts), (2, 2), "{c:?}");
        assert_eq!(tombstones().await, 0);
        let left: Vec<_> = counting.list(None).try_collect().await.unwrap();
        assert!(
            left.iter().all(|o| !o.location.as_ref().contains("/runs/")),
            "{left:?}"
        );
    }
}

/// A step receipt as stored (MessagePack with named fields). A receipt of a
/// step that took one try is stored byte for byte as before retries were
/// recorded; the two retry fields are stored only when set; a receipt stored
/// before them reads as one try.
#[test]
fn step_receipts_are_pinned_with_and_without_retries() {
    use memo_runtime::runtime_store::StepReceipt;
    use memo_runtime::{Bytes, RunId};

    let one_try = StepReceipt {
        run_id: RunId::new("r").unwrap(),
        sequence: 1,
        step: "s".into(),
        output: Bytes::from_static(b"o"),
        recorded_at_ms: 2,
        error: None,
        retries: 0,
        last_retried_error: None,
    };
    // fixmap(6) "run_id" "r" "sequence" 1 "step" "s" "output" bin "o"
    // "recorded_at_ms" 2 "error" nil
    let before: &[u8] = b"\x86\xa6run_id\xa1r\xa8sequence\x01\xa4step\xa1s\xa6output\xc4\x01o\
        \xaerecorded_at_ms\x02\xa5error\xc0";
    assert_eq!(rmp_serde::to_vec_named(&one_try).unwrap(), before);
    assert_eq!(
        rmp_serde::from_slice::<StepReceipt>(before).unwrap(),
        one_try
    );

    let retried = StepReceipt {
        retries: 2,
        last_retried_error: Some("busy".into()),
        ..one_try
    };
    let mut after = b"\x88".to_vec();
    after.extend_from_slice(&before[1..]);
    after.extend_from_slice(b"\xa7retries\x02\xb2last_retried_error\xa4busy");
    assert_eq!(rmp_serde::to_vec_named(&retried).unwrap(), after);
    assert_eq!(
        rmp_serde::from_slice::<StepReceipt>(&after).unwrap(),
        retried
    );
}
