//! The checks every cloud backend passes, each a `pub async fn` over a
//! [`CloudBucket`]; [`cloud_checks!`](crate::cloud_checks) makes one test of
//! each in a backend's test file.
//!
//! Each check panics, like `assert!`, saying what failed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use memo_runtime::object_store::ObjectStore;
use memo_runtime::seal::{Compression, DataKeys, KeyUsage, Keyring, Seal};
use memo_runtime::testing::memo_store as suite;
use memo_runtime::testing::runtime_store as runtime_suite;
use memo_runtime::testing::{CountingStore, FaultInjectingStore, FaultRule, RequestKind};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Error, MemoStore,
    clock::ManualClock,
    retention::{MARKER_PARTITION_MS, RetentionSweeper},
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
    store::probe_conditional_create,
};

use super::CloudBucket;
use crate::fixtures::{every_seal_option, put_entries, run, stored_bytes, stored_entries};

/// The start-up probe passes on a store opened from the cloud's URL, and
/// leaves nothing behind.
pub async fn store_from_url_honours_conditional_creates(bucket: &CloudBucket) {
    let opened = bucket.open();
    probe_conditional_create(opened.store.as_ref(), &opened.prefix)
        .await
        .unwrap();
    let left: Vec<_> = opened
        .store
        .list(Some(&opened.prefix))
        .try_collect()
        .await
        .unwrap();
    assert!(left.is_empty(), "the probe left objects behind: {left:?}");
}

/// The memo-store conformance suite.
pub async fn memo_conformance_suite(bucket: &CloudBucket) {
    let opened = bucket.open();
    suite::run_suite(|| MemoStore::new(opened.store.clone(), opened.prefix.clone())).await;
}

/// The memo-store conformance suite with compression and encryption on.
pub async fn sealed_memo_conformance_suite(bucket: &CloudBucket) {
    let opened = bucket.open();
    suite::run_suite(|| {
        MemoStore::new(opened.store.clone(), opened.prefix.clone()).with_seal(every_seal_option())
    })
    .await;
}

/// The memo-store and runtime-store conformance suites with per-run data
/// keys (and compression of every payload zstd shrinks): each run's
/// payloads sealed with a key of its own, wrapped by a key-encryption key
/// and kept in a key store on the same server under a prefix of its own
/// (a deployment keeps it in another bucket, see `DataKeys`), so every key
/// is made, raced for and read on the cloud too.
///
/// One pass of each suite per option set, for CI's time: plain (the two
/// checks above), compressed and encrypted with a store keyring (the memo
/// suite, [`sealed_memo_conformance_suite`]) and with data keys (both, here).
/// The runtime-store suite with a store keyring runs on the in-memory and
/// local backends only (`tests/tests/runtime_store.rs`): what a keyring
/// changes is the frame, which no backend sees.
pub async fn data_keys_conformance_suites(bucket: &CloudBucket) {
    let keys = bucket.open();
    let kek = Keyring::new(1, [43; 32]).expect("a valid key version");
    let data_keys = DataKeys::new(kek, keys.store, &format!("{}-keys", keys.prefix));
    let seal = Seal::default()
        .with_compression(Compression::zstd(Compression::DEFAULT_LEVEL, 0))
        .with_data_keys(data_keys);
    let opened = bucket.open();
    suite::run_suite(|| {
        MemoStore::new(opened.store.clone(), opened.prefix.clone()).with_seal(seal.clone())
    })
    .await;
    let prefix = opened.prefix;
    runtime_suite::run_object_store_suite(
        || bucket.open().store,
        |objects| ObjectStoreRuntimeStore::new(objects, prefix.clone()).with_seal(seal.clone()),
    )
    .await;
}

/// `KeyUsage::scan` (what `memoctl keys` prints) reads each object's
/// first bytes with a ranged `GET`, which nothing else memo sends to a
/// bucket: entries sealed with a store keyring's versions 1 and 2, and one
/// in plaintext, are each counted by the key their frame names.
pub async fn a_key_scan_counts_each_object_by_the_key_it_needs(bucket: &CloudBucket) {
    let opened = bucket.open();
    let memo =
        |seal: Seal| MemoStore::new(opened.store.clone(), opened.prefix.clone()).with_seal(seal);
    let v1 = Keyring::new(1, [51; 32]).expect("a valid key version");
    let v2 = v1.clone().with_key(2, [52; 32]).expect("a new key version");
    let run_id = run("scanned");
    for (seal, key) in [
        (Seal::default().with_encryption(v1), "a"),
        (Seal::default().with_encryption(v2), "b"),
        (Seal::plain(), "c"),
    ] {
        memo(seal)
            .new_memo(&run_id, 0)
            .put(key, b"a value of some length")
            .await
            .unwrap();
    }
    let usage = KeyUsage::scan(opened.store.as_ref(), &opened.prefix)
        .await
        .unwrap();
    assert_eq!(
        usage.by_key_version,
        BTreeMap::from([(1, 1), (2, 1)]),
        "{usage:?}"
    );
    assert!(usage.plaintext >= 1, "{usage:?}");
    assert_eq!((usage.data_key_sealed, usage.unknown), (0, 0), "{usage:?}");
}

/// The runtime-store conformance suite, object-storage checks included.
pub async fn runtime_store_conformance_suite(bucket: &CloudBucket) {
    let prefix = bucket.open().prefix;
    // A new client per instance, as separate workers would have.
    runtime_suite::run_object_store_suite(
        || bucket.open().store,
        |objects| ObjectStoreRuntimeStore::new(objects, prefix.clone()),
    )
    .await;
}

/// A new run's creation checks its pointer with the listing of the id's
/// folder it makes after its record, by the entity tag the store answered
/// its create with, and reads no object: the cloud's listing shows the tag
/// its put answered with (Azure's unquoted, S3's quoted; compared without
/// the quotes). A store whose tags differ would cost a `GET` a creation,
/// and this check fails on it.
pub async fn a_new_runs_creation_reads_no_object(bucket: &CloudBucket) {
    use memo_runtime::runtime_store::NewRun;

    let opened = bucket.open();
    let counting = Arc::new(CountingStore::new(opened.store.clone()));
    let runs = ObjectStoreRuntimeStore::new(counting.clone(), opened.prefix.clone());
    let created = runs
        .create_run(NewRun {
            run_id: run("created-unread"),
            workflow: "checkout".into(),
            input: Bytes::from_static(b"order"),
            created_at_ms: 1,
            workflow_version: None,
        })
        .await
        .unwrap();
    let counts = counting.counts();
    assert_eq!(
        (counts.gets, counts.lists_with_delimiter, counts.creates),
        (0, 2, 3),
        "a creation lists the id's folder before its create and after its record, \
         creates its hint, pointer and record, and reads nothing: {counts:?}"
    );
    let fresh = ObjectStoreRuntimeStore::new(opened.store.clone(), opened.prefix.clone());
    let loaded = fresh
        .load_run(&run("created-unread"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loaded.incarnation, created.incarnation);
}

/// A deletion vacates the run's pointer by a conditional update, which the
/// cloud refuses once the pointer changed: a stale deletion's update of
/// the version it read, landing after a new run of the id replaced the
/// vacated pointer, changes nothing. The recheck's forgetting of the first
/// deletion leaves the new run's pointer; the second's removes its vacated
/// pointer.
pub async fn a_stale_deletions_update_never_vacates_a_later_runs_pointer(bucket: &CloudBucket) {
    use memo_runtime::object_store::{
        ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
    };
    use memo_runtime::runtime_store::{Commit, NewRun, RunStatus, StatusChange};

    let opened = bucket.open();
    let runs = ObjectStoreRuntimeStore::new(opened.store.clone(), opened.prefix.clone());
    let run_id = run("vacated-pointer");
    let new_run = || NewRun {
        run_id: run_id.clone(),
        workflow: "checkout".into(),
        input: Bytes::from_static(b"order"),
        created_at_ms: 1,
        workflow_version: None,
    };
    let failed = || Commit::status(StatusChange::Failed { error: "e".into() }, 2);
    let pointer = runs.run_folder(&run_id).join("run");

    runs.create_run(new_run()).await.unwrap();
    let old = runs
        .atomic_apply(&run_id, failed())
        .await
        .unwrap()
        .incarnation;
    let read = opened.store.head(&pointer).await.unwrap();
    let stale = UpdateVersion {
        e_tag: read.e_tag,
        version: read.version,
    };
    assert!(runs.delete_run(&run_id, old).await.unwrap());
    let vacated = stored_bytes(opened.store.as_ref(), &pointer).await;
    assert_eq!(vacated.as_deref(), Some(format!("vacant {old}").as_bytes()));

    let new = runs.create_run(new_run()).await.unwrap().incarnation;
    assert_ne!(new, old);
    let late = opened
        .store
        .put_opts(
            &pointer,
            PutPayload::from(format!("vacant {old}").into_bytes()),
            PutOptions::from(PutMode::Update(stale)),
        )
        .await;
    assert!(
        matches!(
            late,
            Err(memo_runtime::object_store::Error::Precondition { .. })
        ),
        "the stale update landed: {late:?}"
    );
    runs.forget_deleted(&run_id, old).await.unwrap();
    let fresh = ObjectStoreRuntimeStore::new(opened.store.clone(), opened.prefix.clone());
    let current = fresh.load_run(&run_id).await.unwrap().unwrap();
    assert_eq!(
        (current.incarnation, current.status),
        (new, RunStatus::Pending)
    );

    fresh.atomic_apply(&run_id, failed()).await.unwrap();
    assert!(fresh.delete_run(&run_id, new).await.unwrap());
    fresh.forget_deleted(&run_id, new).await.unwrap();
    let left: Vec<_> = opened
        .store
        .list(Some(&runs.run_folder(&run_id)))
        .try_collect()
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// Thirty-two clients, each with its own connection, racing to write one
/// key all return the one committed value.
pub async fn thirty_two_clients_racing_one_key_converge_on_one_value(bucket: &CloudBucket) {
    suite::racing_writers_converge_on_one_value(&|| bucket.memo_store(), 32).await;
}

/// A create whose acknowledgement is lost is retried into the committed
/// value, which another client then reads and cannot overwrite.
pub async fn lost_ack_on_a_create_returns_the_committed_value(bucket: &CloudBucket) {
    let opened = bucket.open();
    let faults = Arc::new(FaultInjectingStore::new(opened.store.clone()));
    // The create reaches the server and commits; only its answer is lost.
    faults.inject(FaultRule::fail_after(RequestKind::Create).times(1));
    let memo = MemoStore::new(faults.clone(), opened.prefix.clone()).new_memo(&run("lost-ack"), 3);

    assert_eq!(memo.put("charge", b"receipt 1").await.unwrap(), "receipt 1");
    assert_eq!(faults.faults_injected(), 1);

    let other = bucket.memo_store().new_memo(&run("lost-ack"), 3);
    assert_eq!(
        other.get("charge").await.unwrap(),
        Some(Bytes::from("receipt 1"))
    );
    assert_eq!(
        other.put("charge", b"receipt 2").await.unwrap(),
        "receipt 1"
    );
}

/// Listing the expired markers reads about as many objects as are expired,
/// not the retained ones: the server honours the listing offset.
pub async fn listing_expired_markers_lists_about_as_many_objects_as_are_expired(
    bucket: &CloudBucket,
) {
    let opened = bucket.open();
    let counting = Arc::new(CountingStore::new(opened.store.clone()));
    let store = MemoStore::new(counting.clone(), opened.prefix.clone());

    // The cutoff falls mid-partition: 12 expired markers span its partition and the
    // one before; 100 retained ones (one exactly at the cutoff) share the
    // cutoff's partition, and 100 more fill the ten partitions after it.
    let cutoff = 1_000 * MARKER_PARTITION_MS + MARKER_PARTITION_MS / 2;
    let expired_at = (1..=12).map(|i| cutoff - i * MARKER_PARTITION_MS / 10);
    let retained_in_cutoff_partition = (0..100).map(|i| cutoff + i * MARKER_PARTITION_MS / 400);
    let retained_later =
        (1..=100).map(|i| cutoff + MARKER_PARTITION_MS / 2 + i * MARKER_PARTITION_MS / 10);
    let markers: Vec<(usize, u64)> = expired_at
        .chain(retained_in_cutoff_partition)
        .chain(retained_later)
        .enumerate()
        .collect();
    futures::stream::iter(markers)
        .map(|(i, at)| {
            let store = store.clone();
            async move {
                store
                    .markers()
                    .write_standalone(&run(&format!("run-{i}")), at)
                    .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();

    counting.reset();
    let expired = store.markers().list_expired(cutoff).await.unwrap();
    assert_eq!(expired.len(), 12);
    assert!(expired.iter().all(|m| m.terminal_at_ms < cutoff));
    let counts = counting.counts();
    assert!(
        counts.objects_listed <= expired.len() as u64 + 2,
        "listing 12 expired markers among 212 read {} objects: {counts:?}",
        counts.objects_listed
    );
}

/// Clearing a large run ([`Cloud::large_run_entries`](super::Cloud::large_run_entries)) deletes every one of
/// its entries, and only them, in one delete stream per run folder.
pub async fn clearing_a_large_run_uses_batched_deletes(bucket: &CloudBucket) {
    let entries = bucket.cloud().large_run_entries();
    let opened = bucket.open();
    let counting = Arc::new(CountingStore::new(opened.store.clone()));
    let store = MemoStore::new(counting.clone(), opened.prefix.clone());
    let doomed = run("doomed");
    let kept = run("kept");

    put_entries(&store, &doomed, entries).await;
    store
        .new_memo(&kept, 0)
        .put("key-0", b"kept")
        .await
        .unwrap();

    counting.reset();
    assert_eq!(
        store.clear_memos_for_run(&doomed).await.unwrap(),
        entries as usize
    );
    let counts = counting.counts();
    assert_eq!(counts.delete_paths, u64::from(entries));
    // One delete stream per run folder (memo entries, step outputs), which
    // the client sends as it batches best: S3 as DeleteObjects requests of up
    // to 1,000 keys, Azure as blob batches of up to 256; deleting object by
    // object would be one stream per entry.
    assert!(
        counts.delete_streams <= 2,
        "{entries} deletes took {} delete streams: {counts:?}",
        counts.delete_streams
    );
    assert_eq!(store.new_memo(&doomed, 0).get("key-0").await.unwrap(), None);
    assert_eq!(
        store.new_memo(&kept, 0).get("key-0").await.unwrap(),
        Some(Bytes::from("kept"))
    );
}

/// Two workflow runs finished longer ago than their retention are swept
/// (runtime records, memo entries, markers); a recent one is kept.
pub async fn workflow_runs_are_swept_once_their_retention_has_passed(bucket: &CloudBucket) {
    const DAY: u64 = 24 * MARKER_PARTITION_MS;
    const NOW: u64 = 100 * DAY;
    let opened = bucket.open();
    let memo = MemoStore::new(opened.store.clone(), opened.prefix.clone().join("memo"));
    let records: Arc<dyn RuntimeStore> = Arc::new(ObjectStoreRuntimeStore::new(
        opened.store.clone(),
        opened.prefix.clone().join("runtime"),
    ));
    let clock = Arc::new(ManualClock::new(0));
    let runtime = Runtime::builder()
        .memo_store(memo.clone())
        .runtime_store(records.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let greet = Workflow::new("greet", |ctx: Context, name: String| async move {
        ctx.step("hello", |memo| {
            let name = name.clone();
            async move {
                let said = memo
                    .content_put(&("hello", &name), format!("hello {name}"))
                    .await?;
                Ok::<_, Error>(String::from_utf8_lossy(&said).into_owned())
            }
        })
        .await
    });
    for (id, finished_at) in [
        ("old-a", NOW - 10 * DAY),
        ("old-b", NOW - 8 * DAY),
        ("recent", NOW - DAY),
    ] {
        clock.set_ms(finished_at);
        let said = runtime
            .run(&run(id), &id.to_string(), &greet)
            .await
            .unwrap();
        assert_eq!(said, format!("hello {id}"));
    }

    let sweeper = RetentionSweeper::builder(memo.clone(), Duration::from_secs(7 * 24 * 3600))
        .runtime_store(records.clone())
        .build();
    let report = sweeper.sweep_once(NOW).await.unwrap();

    assert!(report.is_complete(), "{report:?}");
    assert_eq!(
        (report.runs_cleared, report.runtime_runs_deleted),
        (2, 2),
        "{report:?}"
    );
    for id in ["old-a", "old-b"] {
        assert_eq!(records.load_run(&run(id)).await.unwrap(), None, "{id}");
        assert_eq!(stored_entries(&memo, &run(id)).await, 0, "{id}");
    }
    assert!(records.load_run(&run("recent")).await.unwrap().is_some());
    assert!(stored_entries(&memo, &run("recent")).await > 0);
    let markers = memo.markers().list().await.unwrap();
    assert_eq!(
        markers
            .iter()
            .map(|m| m.run_id.as_str())
            .collect::<Vec<_>>(),
        ["recent"]
    );
    assert_eq!(sweeper.sweep_once(NOW).await.unwrap().markers_expired, 0);
}

/// An object larger than what its path should hold is refused, naming the
/// path, from the size the server reports before the body is read: here a
/// 4 KiB entry read by a client whose value limit is 1 KiB. Written plain:
/// compressed, these 4 KiB of one byte would take a few bytes, and the
/// refusal would come from the frame's declared size, after the body.
pub async fn an_object_over_its_limit_is_refused_before_its_body_is_read(bucket: &CloudBucket) {
    let opened = bucket.open();
    let id = run("oversize");
    let writer =
        MemoStore::new(opened.store.clone(), opened.prefix.clone()).with_seal(Seal::plain());
    writer.new_memo(&id, 0).put("k", [7u8; 4096]).await.unwrap();

    let reader = bucket.memo_store().with_max_value_size(1024);
    let error = reader.new_memo(&id, 0).get("k").await.unwrap_err();
    assert!(
        matches!(&error, Error::Corrupt { path, reason }
            if path.contains("/memos/oversize/") && reason.contains("4114 bytes")),
        "{error}"
    );
}

/// A value over the in-memory limit through `#[memoized]` as a multipart
/// upload, read back by another client, sealed too, and cleared (see
/// [`large_values`](crate::large_values)).
pub async fn large_values_round_trip_through_multipart_uploads(bucket: &CloudBucket) {
    crate::large_values::large_values_round_trip_through_multipart_uploads(|| bucket.memo_store())
        .await;
}

/// Timers, signal deadlines and cancellation across two workers, each with
/// its own client (see [`time`](super::time)).
pub async fn timers_deadlines_and_cancellation_across_workers(bucket: &CloudBucket) {
    super::time::timers_deadlines_and_cancellation_across_workers(|| bucket.open()).await;
}

/// A worker's poll, with the default (ordered) listing, reads the due
/// entries and not the hour's later ones (see [`workers`](super::workers)).
pub async fn a_poll_reads_the_due_entries_not_the_hours_later_ones(bucket: &CloudBucket) {
    super::workers::a_poll_reads_the_due_entries_not_the_hours_later_ones(|| bucket.open()).await;
}

/// Three workers, each with its own client, share the runs on one bucket
/// (see [`workers`](super::workers)).
pub async fn workers_on_separate_clients_share_the_runs(bucket: &CloudBucket) {
    super::workers::workers_on_separate_clients_share_the_runs(|| bucket.open()).await;
}
