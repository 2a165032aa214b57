//! Property tests of the stored formats and run namespaces: content keys
//! ignore map order, terminal markers round-trip and sort by time, and no
//! run id (case variants included) lets a clear or a sweep reach another
//! run's objects.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::testing::write_legacy_step_output;
use memo_runtime::{
    Incarnation, MemoStore, RunId, content_key,
    retention::{RetentionSweeper, TerminalMarker},
};
use memo_tests::fixtures::Backend;
use proptest::prelude::*;
use proptest::test_runner::Config;

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

/// A valid run id: 1–128 bytes of `[A-Za-z0-9_-]`.
fn run_id() -> impl Strategy<Value = RunId> {
    "[A-Za-z0-9_-]{1,128}".prop_map(|id| RunId::new(id).expect("a valid run id"))
}

/// Run ids, some of which differ from another only in letter case.
fn run_ids_with_case_twins() -> impl Strategy<Value = Vec<RunId>> {
    prop::collection::btree_set("[A-Za-z0-9_-]{1,24}", 2..8).prop_map(|ids| {
        let mut all: BTreeSet<String> = BTreeSet::new();
        for id in ids {
            all.insert(id.to_ascii_uppercase());
            all.insert(id.to_ascii_lowercase());
            all.insert(id);
        }
        all.into_iter()
            .map(|id| RunId::new(id).expect("a valid run id"))
            .collect()
    })
}

/// Every object under the store, with its bytes.
async fn objects(store: &dyn ObjectStore) -> BTreeMap<String, Vec<u8>> {
    let metas: Vec<_> = store.list(None).try_collect().await.unwrap();
    let mut all = BTreeMap::new();
    for meta in metas {
        let bytes = store
            .get_opts(&meta.location, Default::default())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        all.insert(meta.location.to_string(), bytes.to_vec());
    }
    all
}

/// Gives every run two steps with two entries each, and returns the store.
async fn memos_for(runs: &[RunId]) -> (Arc<InMemory>, MemoStore) {
    let objects = Arc::new(InMemory::new());
    let store = MemoStore::new(objects.clone(), "memo");
    for run in runs {
        for step in 0..2 {
            let memo = store.new_memo(run, step);
            memo.put("a", run.as_str()).await.unwrap();
            memo.content_put(&("b", step), run.as_str()).await.unwrap();
            let standalone = Incarnation::STANDALONE;
            let value = run.as_str().as_bytes();
            write_legacy_step_output(&store, run, standalone, step, b"payload", value)
                .await
                .unwrap();
        }
    }
    (objects, store)
}

proptest! {
    #![proptest_config(Config::with_cases(64))]

    #[test]
    fn equal_maps_in_any_order_give_equal_content_keys(
        entries in prop::collection::btree_map("[a-z0-9]{0,8}", any::<i64>(), 0..24),
        rotation in any::<usize>(),
    ) {
        let mut pairs: Vec<_> = entries.clone().into_iter().collect();
        let forwards: HashMap<String, i64> = pairs.iter().cloned().collect();
        if !pairs.is_empty() {
            let shift = rotation % pairs.len();
            pairs.rotate_left(shift);
        }
        pairs.reverse();
        let mut backwards: HashMap<String, i64> = HashMap::with_capacity(rotation % 97);
        backwards.extend(pairs);
        let ordered = content_key(&entries).unwrap();
        prop_assert_eq!(&content_key(&forwards).unwrap(), &ordered);
        prop_assert_eq!(&content_key(&backwards).unwrap(), &ordered);
        // ...also nested, and inside a tuple.
        let nested: HashMap<&str, HashMap<String, i64>> = [("m", backwards.clone())].into();
        let nested_ordered: BTreeMap<&str, BTreeMap<String, i64>> = [("m", entries.clone())].into();
        prop_assert_eq!(content_key(&nested).unwrap(), content_key(&nested_ordered).unwrap());
        prop_assert_eq!(
            content_key(&("call", 0_u32, &forwards)).unwrap(),
            content_key(&("call", 0_u32, &entries)).unwrap()
        );
    }

    #[test]
    fn terminal_markers_round_trip_and_sort_by_time(
        markers in prop::collection::btree_map(run_id(), 0_u64..u64::MAX / 2, 1..12),
        cutoff in 0_u64..u64::MAX / 2,
    ) {
        let (listed, expired) = block_on(async {
            let store = Backend::in_memory().memo_store("memo");
            for (run, at_ms) in &markers {
                store.markers().write_standalone(run, *at_ms).await.unwrap();
            }
            (
                store.markers().list().await.unwrap(),
                store.markers().list_expired(cutoff).await.unwrap(),
            )
        });
        let written: BTreeSet<TerminalMarker> = markers
            .iter()
            .map(|(run_id, at_ms)| TerminalMarker {
                run_id: run_id.clone(),
                incarnation: Incarnation::STANDALONE,
                terminal_at_ms: *at_ms,
            })
            .collect();
        prop_assert_eq!(listed.iter().cloned().collect::<BTreeSet<_>>(), written.clone());
        prop_assert!(listed.windows(2).all(|w| w[0].terminal_at_ms <= w[1].terminal_at_ms));
        let want: BTreeSet<_> = written.into_iter().filter(|m| m.terminal_at_ms < cutoff).collect();
        prop_assert_eq!(expired.iter().cloned().collect::<BTreeSet<_>>(), want);
        prop_assert!(expired.windows(2).all(|w| w[0].terminal_at_ms <= w[1].terminal_at_ms));
    }

    #[test]
    fn clearing_one_run_never_removes_another_runs_objects(
        runs in run_ids_with_case_twins(),
        pick in any::<usize>(),
    ) {
        let target = runs[pick % runs.len()].clone();
        let (before, after) = block_on(async {
            let (objects, store) = memos_for(&runs).await;
            let before = self::objects(objects.as_ref()).await;
            store.clear_memos_for_run(&target).await.unwrap();
            (before, self::objects(objects.as_ref()).await)
        });
        check_only_target_removed(&before, &after, &target)?;
    }

    #[test]
    fn sweeping_one_run_never_removes_another_runs_objects(
        runs in run_ids_with_case_twins(),
        pick in any::<usize>(),
    ) {
        let target = runs[pick % runs.len()].clone();
        let day = 24 * 3_600_000;
        let (before, after) = block_on(async {
            let (objects, store) = memos_for(&runs).await;
            for run in &runs {
                // Only the target ended long enough ago to be expired.
                let at_ms = if *run == target { day } else { 20 * day };
                store.markers().write_standalone(run, at_ms).await.unwrap();
            }
            let before = self::objects(objects.as_ref()).await;
            let sweeper = RetentionSweeper::builder(store, Duration::from_secs(7 * 24 * 3600)).build();
            let report = sweeper.sweep_once(21 * day).await.unwrap();
            assert_eq!(report.runs_cleared, 1, "{report:?}");
            (before, self::objects(objects.as_ref()).await)
        });
        check_only_target_removed(&before, &after, &target)?;
    }
}

/// The path segment of a run id, as `RunId` documents it: each upper-case
/// letter written as `=` and the letter in lower case.
fn path_segment(run: &RunId) -> String {
    let mut segment = String::new();
    for c in run.as_str().chars() {
        if c.is_ascii_uppercase() {
            segment.push('=');
        }
        segment.push(c.to_ascii_lowercase());
    }
    segment
}

/// Exactly the objects of `target` disappeared (its memo entries, step
/// outputs and marker); every other object is unchanged.
fn check_only_target_removed(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    target: &RunId,
) -> Result<(), TestCaseError> {
    let segment = path_segment(target);
    let owned = |path: &str| {
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["memo", "memos" | "step-outputs", run, ..] => *run == segment,
            ["memo", "terminals", _, name] => name
                .split_once('_')
                .and_then(|(_, run)| run.split_once('.'))
                .is_some_and(|(run, _incarnation)| run == segment),
            _ => false,
        }
    };
    for (path, bytes) in before {
        match after.get(path) {
            Some(kept) => {
                prop_assert_eq!(kept, bytes, "{} changed", path);
                prop_assert!(!owned(path), "{} of the target survived", path);
            }
            None => prop_assert!(owned(path), "{} of another run was removed", path),
        }
    }
    prop_assert!(
        after.keys().all(|path| before.contains_key(path)),
        "new objects appeared"
    );
    Ok(())
}
