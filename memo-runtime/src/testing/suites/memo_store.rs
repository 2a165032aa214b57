//! The `MemoStore` conformance suite: one set of promises, checked on every
//! backend.
//!
//! Each function takes a factory that returns a [`MemoStore`] over the *same*
//! objects each time it is called (a new instance, as another process would
//! build it) under a prefix no other test uses, and panics if a promise is
//! broken. [`run_suite`] runs them in turn.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::Arc;
//! use memo_runtime::{MemoStore, object_store::memory::InMemory};
//!
//! let objects = Arc::new(InMemory::new());
//! memo_runtime::testing::memo_store::run_suite(|| MemoStore::new(objects.clone(), "suite")).await;
//! # }
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::{ObjectStoreExt, PutPayload};

use crate::{Error, MemoStore, RunId, retention::TerminalMarker};

fn run(id: &str) -> RunId {
    RunId::new(id).expect("valid run id")
}

/// Runs every check of this suite.
pub async fn run_suite(make: impl Fn() -> MemoStore) {
    missing_keys_are_misses(&make()).await;
    values_round_trip_for_any_key(&make()).await;
    entries_are_write_once(&make()).await;
    runs_steps_and_keys_are_separate_namespaces(&make()).await;
    content_keys_ignore_map_order(&make()).await;
    clearing_a_run_removes_only_its_entries(&make()).await;
    racing_writers_converge_on_one_value(&make, 24).await;
    damaged_entries_are_corrupt_not_misses(&make()).await;
    oversize_values_are_refused_before_writing(&make()).await;
    terminal_markers_round_trip(&make()).await;
    expired_markers_respect_a_strict_cutoff(&make()).await;
    foreign_objects_among_markers_are_skipped(&make()).await;
    if make().seal().is_encrypted() {
        sealed_entries_read_only_where_they_were_written(&make()).await;
    }
}

/// A key never written reads as `None`.
pub async fn missing_keys_are_misses(store: &MemoStore) {
    let memo = store.new_memo(&run("miss"), 0);
    assert_eq!(memo.get("absent").await.unwrap(), None);
    assert_eq!(memo.content_get(&("absent", 1)).await.unwrap(), None);
}

/// Any string is a key, any bytes (empty included) are a value.
pub async fn values_round_trip_for_any_key(store: &MemoStore) {
    let memo = store.new_memo(&run("round-trip"), 1);
    let long = "k".repeat(10_000);
    let keys = [
        "", "plain", "a/b", "/", "..", ".", "a/../b", "%2F", "~*?#", "snow ☃", &long,
    ];
    for (i, key) in keys.iter().enumerate() {
        let value = format!("value {i}");
        assert_eq!(
            &memo.put(key, value.as_bytes()).await.unwrap()[..],
            value.as_bytes(),
            "put {key:?}"
        );
    }
    for (i, key) in keys.iter().enumerate() {
        let got = memo
            .get(key)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key:?} missing"));
        assert_eq!(got, Bytes::from(format!("value {i}")), "get {key:?}");
    }
    assert_eq!(&memo.put("empty", b"").await.unwrap()[..], b"");
    assert_eq!(memo.get("empty").await.unwrap(), Some(Bytes::new()));
}

/// A second put of a key returns the first value and does not overwrite it.
pub async fn entries_are_write_once(store: &MemoStore) {
    let memo = store.new_memo(&run("write-once"), 0);
    assert_eq!(&memo.put("k", b"first").await.unwrap()[..], b"first");
    assert_eq!(&memo.put("k", b"second").await.unwrap()[..], b"first");
    assert_eq!(&memo.put("k", b"first").await.unwrap()[..], b"first");
    assert_eq!(&memo.get("k").await.unwrap().unwrap()[..], b"first");
}

/// Entries of different runs, steps or keys never see each other, including
/// runs whose ids are prefixes of one another.
pub async fn runs_steps_and_keys_are_separate_namespaces(store: &MemoStore) {
    let cells = [
        ("ns", 0, "k"),
        ("ns", 1, "k"),
        ("ns", 0, "k2"),
        ("ns-suffix", 0, "k"),
        ("ns_", 0, "k"),
        ("n", 0, "k"),
    ];
    for (r, step, key) in cells {
        let value = format!("{r}/{step}/{key}");
        store
            .new_memo(&run(r), step)
            .put(key, &value)
            .await
            .unwrap();
    }
    for (r, step, key) in cells {
        let got = store
            .new_memo(&run(r), step)
            .get(key)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, Bytes::from(format!("{r}/{step}/{key}")));
    }
}

/// `content_put`/`content_get` round-trip, and maps with equal content hit
/// whatever their iteration order.
pub async fn content_keys_ignore_map_order(store: &MemoStore) {
    let memo = store.new_memo(&run("content"), 2);
    let forward: HashMap<String, u32> = (0..50).map(|i| (format!("k{i}"), i)).collect();
    let backward: HashMap<String, u32> = (0..50).rev().map(|i| (format!("k{i}"), i)).collect();
    memo.content_put(&("summarize", &forward), b"summary")
        .await
        .unwrap();
    assert_eq!(
        &memo
            .content_get(&("summarize", &backward))
            .await
            .unwrap()
            .unwrap()[..],
        b"summary"
    );
    assert_eq!(memo.content_get(&("summarize", 1)).await.unwrap(), None);
}

/// Clearing a run deletes its memo entries and the step-output entries earlier
/// versions wrote, reports the
/// count, and leaves every other run (even `run-suffix`) untouched.
pub async fn clearing_a_run_removes_only_its_entries(store: &MemoStore) {
    let target = run("clear");
    let neighbours = [
        run("clear-suffix"),
        run("clear_"),
        run("clea"),
        run("clearclear"),
    ];
    for step in 0..3 {
        let memo = store.new_memo(&target, step);
        memo.put("a", b"1").await.unwrap();
        memo.put("b", b"2").await.unwrap();
    }
    let standalone = crate::Incarnation::STANDALONE;
    let legacy = crate::testing::write_legacy_step_output;
    legacy(store, &target, standalone, 0, b"p", b"o")
        .await
        .unwrap();
    for n in &neighbours {
        store.new_memo(n, 0).put("a", b"keep").await.unwrap();
        legacy(store, n, standalone, 0, b"p", b"keep")
            .await
            .unwrap();
    }
    assert_eq!(store.clear_memos_for_run(&target).await.unwrap(), 7);
    assert_eq!(store.new_memo(&target, 0).get("a").await.unwrap(), None);
    let read = crate::testing::read_legacy_step_output;
    assert_eq!(
        read(store, &target, standalone, 0, b"p").await.unwrap(),
        None
    );
    for n in &neighbours {
        assert_eq!(
            &store.new_memo(n, 0).get("a").await.unwrap().unwrap()[..],
            b"keep",
            "{n}"
        );
        assert_eq!(
            &read(store, n, standalone, 0, b"p").await.unwrap().unwrap()[..],
            b"keep",
            "{n}"
        );
    }
    assert_eq!(store.clear_memos_for_run(&target).await.unwrap(), 0);
}

/// `writers` tasks, each on its own `MemoStore` instance, race to put
/// different values under one key; every one of them gets the same
/// committed value back, and that is what a later read sees.
pub async fn racing_writers_converge_on_one_value(make: &impl Fn() -> MemoStore, writers: usize) {
    let race = run("race");
    let tasks: Vec<_> = (0..writers)
        .map(|i| {
            let memo = make().new_memo(&race, 0);
            tokio::spawn(async move { memo.put("contended", format!("writer {i}")).await.unwrap() })
        })
        .collect();
    let mut committed = Vec::new();
    for task in tasks {
        committed.push(task.await.expect("writer task"));
    }
    let first = committed[0].clone();
    assert!(
        committed.iter().all(|c| *c == first),
        "writers disagree: {committed:?}"
    );
    assert_eq!(
        make().new_memo(&race, 0).get("contended").await.unwrap(),
        Some(first)
    );
}

/// Flipped bits, truncation and foreign bytes at an entry's path are
/// `Error::Corrupt` naming the path, never a miss, and a put does not
/// overwrite them. The damage is done after the commit, so it is read by a
/// new instance, as another process would: `store`'s own cache holds the
/// value it committed and checked.
pub async fn damaged_entries_are_corrupt_not_misses(store: &MemoStore) {
    let objects = store.object_store();
    let cold = MemoStore::new(Arc::clone(objects), store.prefix().as_ref())
        .with_seal(store.seal().clone());
    let memo = cold.new_memo(&run("corrupt"), 0);
    for (key, damage) in [("flipped", 0usize), ("truncated", 1), ("foreign", 2)] {
        store
            .new_memo(&run("corrupt"), 0)
            .put(key, b"a committed value")
            .await
            .unwrap();
        let path = memo.key_path(key);
        let framed = objects.get(&path).await.unwrap().bytes().await.unwrap();
        let damaged: Bytes = match damage {
            0 => {
                let mut v = framed.to_vec();
                let mid = v.len() / 2;
                v[mid] ^= 0x01;
                v.into()
            }
            1 => framed.slice(..framed.len() - 3),
            _ => Bytes::from_static(b"{\"not\": \"memo\"}"),
        };
        objects.put(&path, PutPayload::from(damaged)).await.unwrap();
        match memo.get(key).await {
            Err(Error::Corrupt { path: p, .. }) => assert_eq!(p, path.to_string()),
            other => panic!("{key}: expected Corrupt, got {other:?}"),
        }
        assert!(
            matches!(memo.put(key, b"new").await, Err(Error::Corrupt { .. })),
            "{key}: put over a corrupt entry"
        );
    }
}

/// For an encrypted store (run by [`run_suite`] when `store`'s seal
/// encrypts): an entry's object copied to another key, step, run,
/// incarnation or store prefix, and a plaintext object, read as
/// `Error::Corrupt` naming the path read, never as a value (with per-run
/// data keys, a standalone entry copied to another run reads as a miss:
/// see `DataKeys`, *Standalone runs*); the entry itself still reads where
/// it was written.
pub async fn sealed_entries_read_only_where_they_were_written(store: &MemoStore) {
    assert!(
        store.seal().is_encrypted(),
        "this check needs an encrypted store"
    );
    let objects = store.object_store();
    let cold = || {
        MemoStore::new(Arc::clone(objects), store.prefix().as_ref()).with_seal(store.seal().clone())
    };
    let source = cold().new_memo(&run("sealed"), 0);
    let value = b"a value only its own path may read".repeat(40);
    source.put("k", &value).await.unwrap();
    let framed = objects
        .get(&source.key_path("k"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let other_prefix = MemoStore::new(Arc::clone(objects), format!("{}-copy", store.prefix()))
        .with_seal(store.seal().clone());
    let elsewhere = [
        ("another key", cold().new_memo(&run("sealed"), 0), "other"),
        ("another step", cold().new_memo(&run("sealed"), 1), "k"),
        ("another run", cold().new_memo(&run("sealed-2"), 0), "k"),
        (
            "another incarnation",
            cold().memo_for(&run("sealed"), crate::Incarnation::from_u64(7), 0),
            "k",
        ),
        (
            "another store prefix",
            other_prefix.new_memo(&run("sealed"), 0),
            "k",
        ),
    ];
    for (moved_to, memo, key) in elsewhere {
        let path = memo.key_path(key);
        objects
            .put(&path, PutPayload::from(framed.clone()))
            .await
            .unwrap();
        match memo.get(key).await {
            Err(Error::Corrupt { path: p, reason }) => {
                assert_eq!(p, path.to_string(), "{moved_to}");
                // With per-run data keys, a run that has none reports that.
                let no_key = store.seal().data_keys().is_some()
                    && reason.contains("is not in the key store");
                assert!(
                    reason.contains("does not authenticate") || no_key,
                    "{moved_to}: {reason}"
                );
            }
            // With per-run data keys, a standalone entry names a generation
            // of its run's key; in another standalone run, whose key store
            // holds no key of that generation, it is an entry of a cleared
            // run: a miss (what deleting it does too), never a value.
            Ok(None) if moved_to == "another run" && store.seal().data_keys().is_some() => {}
            other => panic!("copied to {moved_to}: expected Corrupt, got {other:?}"),
        }
    }
    let planted = cold().new_memo(&run("sealed"), 2);
    let plain = MemoStore::new(Arc::clone(objects), store.prefix().as_ref())
        .with_seal(crate::seal::Seal::plain());
    plain
        .new_memo(&run("sealed"), 2)
        .put("k", b"planted")
        .await
        .unwrap();
    match planted.get("k").await {
        Err(Error::Corrupt { path, reason }) => {
            assert_eq!(path, planted.key_path("k").to_string());
            assert!(reason.contains("not encrypted"), "{reason}");
        }
        other => panic!("a plaintext entry: expected Corrupt, got {other:?}"),
    }
    assert_eq!(
        cold()
            .new_memo(&run("sealed"), 0)
            .get("k")
            .await
            .unwrap()
            .unwrap(),
        value
    );
}

/// A value over the limit is refused with `TooLarge` naming the key, and
/// nothing is written.
pub async fn oversize_values_are_refused_before_writing(store: &MemoStore) {
    let small = store.clone().with_max_value_size(8);
    let memo = small.new_memo(&run("too-large"), 0);
    match memo.put("big", [0u8; 9]).await {
        Err(Error::TooLarge {
            key,
            size: 9,
            limit: 8,
        }) => assert!(key.contains("big"), "{key}"),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(memo.get("big").await.unwrap(), None);
    assert_eq!(&memo.put("fits", [7u8; 8]).await.unwrap()[..], &[7u8; 8]);
}

/// Markers are listed back, writing one twice is harmless, and deleting one
/// (even twice) succeeds.
pub async fn terminal_markers_round_trip(store: &MemoStore) {
    let marker = TerminalMarker {
        run_id: run("marked"),
        terminal_at_ms: 1_700_000_000_123,
        incarnation: crate::Incarnation::STANDALONE,
    };
    store
        .markers()
        .write_standalone(&marker.run_id, marker.terminal_at_ms)
        .await
        .unwrap();
    store
        .markers()
        .write_standalone(&marker.run_id, marker.terminal_at_ms)
        .await
        .unwrap();
    assert_eq!(store.markers().list().await.unwrap(), vec![marker.clone()]);
    store.markers().delete(&marker).await.unwrap();
    store.markers().delete(&marker).await.unwrap();
    assert_eq!(store.markers().list().await.unwrap(), vec![]);
}

/// Expiry is strict (a marker at exactly the cutoff is kept) and correct at
/// every bucket boundary, whether the expired markers are listed or streamed.
pub async fn expired_markers_respect_a_strict_cutoff(store: &MemoStore) {
    let hour = crate::retention::MARKER_PARTITION_MS;
    let base = 1_000 * hour;
    let times = [
        0,
        1,
        base - 1,
        base,
        base + 1,
        base + hour - 1,
        base + hour,
        base + 5 * hour + 7,
    ];
    for (i, t) in times.iter().enumerate() {
        store
            .markers()
            .write_standalone(&run(&format!("expiry-{i}")), *t)
            .await
            .unwrap();
    }
    for cutoff in [
        0,
        1,
        2,
        base - 1,
        base,
        base + 1,
        base + hour,
        base + hour + 1,
        base + 5 * hour + 7,
        base + 5 * hour + 8,
        u64::MAX,
    ] {
        let expired: Vec<u64> = store
            .markers()
            .list_expired(cutoff)
            .await
            .unwrap()
            .iter()
            .map(|m| m.terminal_at_ms)
            .collect();
        let want: Vec<u64> = times.iter().copied().filter(|t| *t < cutoff).collect();
        assert_eq!(expired, want, "cutoff {cutoff}");
        let mut streamed: Vec<u64> = store
            .markers()
            .expired(cutoff)
            .map_ok(|m| m.terminal_at_ms)
            .try_collect()
            .await
            .unwrap();
        streamed.sort_unstable();
        assert_eq!(streamed, want, "streamed, cutoff {cutoff}");
    }
    for marker in store.markers().list_expired(u64::MAX).await.unwrap() {
        store.markers().delete(&marker).await.unwrap();
    }
}

/// Objects in the markers folder that are not markers are skipped by both
/// listings. Expects no other markers in the store.
pub async fn foreign_objects_among_markers_are_skipped(store: &MemoStore) {
    let objects = store.object_store();
    let folder = store.prefix().clone().join("terminals");
    let real = TerminalMarker {
        run_id: run("real"),
        terminal_at_ms: 5,
        incarnation: crate::Incarnation::STANDALONE,
    };
    store
        .markers()
        .write_standalone(&real.run_id, real.terminal_at_ms)
        .await
        .unwrap();
    for foreign in [
        "README",
        "not-a-bucket/x",
        "00000000000000000000/garbage",
        "00000000000000000000/18446744073709551610_bad%2Frun",
        "00000000000000000001/18446744073709551610_x",
    ] {
        objects
            .put(
                &folder.clone().join_all(foreign),
                PutPayload::from_static(b"?"),
            )
            .await
            .unwrap();
    }
    assert_eq!(store.markers().list().await.unwrap(), vec![real.clone()]);
    assert_eq!(
        store.markers().list_expired(u64::MAX).await.unwrap(),
        vec![real]
    );
}

trait JoinAll {
    fn join_all(self, rel: &str) -> Self;
}

impl JoinAll for object_store::path::Path {
    fn join_all(self, rel: &str) -> Self {
        rel.split('/').fold(self, |p, part| p.join(part))
    }
}
