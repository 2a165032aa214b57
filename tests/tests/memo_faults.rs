//! MemoStore under injected faults, on a backend without conditional puts,
//! and the request cost of its listings.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{self, ObjectStore, PutMode, PutOptions, PutPayload, PutResult};
use memo_runtime::testing::{CountingStore, FaultRule, RequestKind, forward_object_store};
use memo_runtime::{Error, MemoStore};
use memo_tests::fixtures::{Backend, Faulty, run};

#[tokio::test]
async fn a_lost_create_acknowledgement_returns_the_committed_value() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let store = MemoStore::new(faults.clone(), "memo");
        let memo = store.new_memo(&run("lost-ack"), 0);
        faults.inject(FaultRule::fail_after(RequestKind::Create).times(1));
        assert_eq!(&memo.put("k", b"v1").await.unwrap()[..], b"v1", "{name}");
        assert_eq!(faults.faults_injected(), 1, "{name}: the fault fired");
        assert_eq!(&memo.get("k").await.unwrap().unwrap()[..], b"v1", "{name}");
        // A later writer still sees the first commit.
        assert_eq!(&memo.put("k", b"v2").await.unwrap()[..], b"v1", "{name}");
    }
}

#[tokio::test]
async fn a_create_refused_before_it_applied_is_retried() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let memo = MemoStore::new(faults.clone(), "memo").new_memo(&run("retry"), 0);
        faults.inject(FaultRule::fail_before(RequestKind::Create).times(2));
        assert_eq!(&memo.put("k", b"v").await.unwrap()[..], b"v", "{name}");
        assert_eq!(faults.faults_injected(), 2, "{name}");
    }
}

#[tokio::test]
async fn a_create_that_keeps_failing_is_an_error_naming_the_path_and_commits_nothing() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let memo = MemoStore::new(faults.clone(), "memo").new_memo(&run("down"), 4);
        faults.inject(FaultRule::fail_before(RequestKind::Create));
        match memo.put("k", b"v").await {
            Err(Error::Store { path, .. }) => {
                assert!(
                    path.starts_with("memo/memos/down/0000000000000000/4/"),
                    "{name}: {path}"
                )
            }
            other => panic!("{name}: expected a store error, got {other:?}"),
        }
        faults.clear_faults();
        assert_eq!(memo.get("k").await.unwrap(), None, "{name}");
    }
}

#[tokio::test]
async fn a_failed_delete_makes_clear_report_an_error_and_a_retry_finishes() {
    for Faulty { backend, faults } in Backend::all_faulty() {
        let name = backend.name();
        let store = MemoStore::new(faults.clone(), "memo");
        let target = run("sweep-me");
        for step in 0..5 {
            store.new_memo(&target, step).put("k", b"v").await.unwrap();
        }
        faults.inject(FaultRule::fail_before(RequestKind::Delete).times(1));
        match store.clear_memos_for_run(&target).await {
            Err(Error::ClearIncomplete {
                deleted: 4,
                failed: 1,
                run_id,
                ..
            }) => assert_eq!(run_id, "sweep-me"),
            other => panic!("{name}: expected ClearIncomplete, got {other:?}"),
        }
        assert_eq!(
            store.clear_memos_for_run(&target).await.unwrap(),
            1,
            "{name}"
        );
        assert_eq!(
            store.clear_memos_for_run(&target).await.unwrap(),
            0,
            "{name}"
        );
    }
}

#[tokio::test]
async fn expired_marker_listing_lists_only_the_expired_markers() {
    let hour = memo_runtime::retention::MARKER_PARTITION_MS;
    for backend in Backend::all() {
        let name = backend.name();
        let counting = Arc::new(CountingStore::new(backend.objects()));
        let store = MemoStore::new(counting.clone(), "memo");
        let cutoff = 100 * hour + hour / 2;
        // 20 expired: 15 in whole expired partitions, 5 in the cutoff's partition.
        let expired: Vec<u64> = (0..15)
            .map(|i| (90 + i % 3) * hour + i)
            .chain((0..5).map(|i| 100 * hour + i))
            .collect();
        // 400 retained: at or after the cutoff, in its bucket and later ones.
        let retained: Vec<u64> = (0..400).map(|i| cutoff + i * (hour / 40)).collect();
        for (i, t) in expired.iter().chain(&retained).enumerate() {
            store
                .markers()
                .write_standalone(&run(&format!("m{i}")), *t)
                .await
                .unwrap();
        }
        counting.reset();
        let found = store.markers().list_expired(cutoff).await.unwrap();
        assert_eq!(found.len(), expired.len(), "{name}");
        let counts = counting.counts();
        assert_eq!(
            counts.objects_listed,
            expired.len() as u64,
            "{name}: {counts:?}"
        );
        assert_eq!(counts.lists_with_delimiter, 1, "{name}");
        assert_eq!(
            counts.lists + counts.lists_with_offset,
            4,
            "{name}: three expired buckets and the cutoff's"
        );
    }
}

#[tokio::test]
async fn clearing_a_run_deletes_through_one_delete_stream_per_folder() {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let store = MemoStore::new(counting.clone(), "memo");
    let target = run("many");
    for i in 0..200 {
        store
            .new_memo(&target, i % 4)
            .put(&format!("k{i}"), b"v")
            .await
            .unwrap();
    }
    counting.reset();
    assert_eq!(store.clear_memos_for_run(&target).await.unwrap(), 200);
    let counts = counting.counts();
    assert_eq!(
        (counts.delete_streams, counts.delete_paths),
        (2, 200),
        "{counts:?}"
    );
}

/// A backend that cannot create conditionally, like S3 with conditional puts
/// disabled.
#[derive(Debug)]
struct NoConditionalPuts(InMemory);

impl fmt::Display for NoConditionalPuts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NoConditionalPuts")
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for NoConditionalPuts {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if matches!(opts.mode, PutMode::Create) {
            return Err(object_store::Error::NotImplemented {
                operation: "put_opts with PutMode::Create".into(),
                implementer: self.to_string(),
            });
        }
        self.0.put_opts(location, payload, opts).await
    }

    forward_object_store!(self.0 => put_multipart_opts, get_opts, get_ranges, delete_stream,
        list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

#[tokio::test]
async fn a_backend_without_conditional_puts_is_a_clear_error_and_nothing_is_overwritten() {
    let store = MemoStore::new(Arc::new(NoConditionalPuts(InMemory::new())), "memo");
    let memo = store.new_memo(&run("no-cas"), 0);
    let err = memo.put("k", b"v").await.unwrap_err();
    assert!(
        matches!(err, Error::ConditionalPutUnsupported { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("PutMode::Create") && message.contains("S3ConditionalPut"),
        "{message}"
    );
    assert_eq!(memo.get("k").await.unwrap(), None);
}
