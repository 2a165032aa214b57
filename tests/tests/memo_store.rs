//! The MemoStore conformance suite on every embedded backend, plus the
//! regressions for the faults of the design's seed.

use std::sync::Arc;

use futures::TryStreamExt;
use memo_runtime::object_store::prefix::PrefixStore;
use memo_runtime::testing::memo_store as suite;
use memo_runtime::testing::write_legacy_step_output;
use memo_runtime::{Incarnation, MemoStore, RunId, retention::TerminalMarker};
use memo_tests::fixtures::{Backend, every_seal_option, run};
use sha2::Digest;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_every_backend() {
    for backend in Backend::all() {
        suite::run_suite(|| MemoStore::new(backend.open(), "memo")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_with_compression_and_encryption_on_every_backend() {
    for backend in Backend::all() {
        suite::run_suite(|| MemoStore::new(backend.open(), "memo").with_seal(every_seal_option()))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_local_file_system_at_the_root() {
    let backend = Backend::local_folder();
    suite::run_suite(|| MemoStore::new(backend.open(), "")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_a_prefix_store() {
    let backend = Backend::in_memory();
    suite::run_suite(|| {
        MemoStore::new(
            Arc::new(PrefixStore::new(backend.objects(), "tenant/a")),
            "memo",
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_four_separate_instances_on_one_folder_converge() {
    let backend = Backend::local_folder();
    suite::racing_writers_converge_on_one_value(&|| MemoStore::new(backend.open(), "race"), 24)
        .await;
}

/// Seed fault: an empty run id vanished from the path, so a clear of "" would
/// have listed every run's entries.
#[test]
fn regression_empty_run_id_is_refused() {
    assert!(RunId::new("").is_err());
}

/// Seed fault: `/` and `%` in run ids nested or aliased other runs' folders.
#[test]
fn regression_slash_and_percent_run_ids_are_refused() {
    for bad in ["a/b", "a%2Fb", "%", "../a", "a/", "/a"] {
        assert!(RunId::new(bad).is_err(), "{bad:?}");
    }
}

/// Seed fault: clearing `run` also cleared `run-suffix` when listing by a
/// string prefix.
#[tokio::test]
async fn regression_clearing_run_never_touches_run_suffix() {
    let store = Backend::local_folder().memo_store("p");
    let (run, suffix) = (run("run"), run("run-suffix"));
    store.new_memo(&run, 0).put("k", b"v").await.unwrap();
    store.new_memo(&suffix, 0).put("k", b"keep").await.unwrap();
    assert_eq!(store.clear_memos_for_run(&run).await.unwrap(), 1);
    assert_eq!(
        &store.new_memo(&suffix, 0).get("k").await.unwrap().unwrap()[..],
        b"keep"
    );
}

/// Seed fault: last writer won, so a retry overwrote the committed result of
/// the first attempt.
#[tokio::test]
async fn regression_a_retry_never_overwrites_the_first_commit() {
    let store = Backend::in_memory().memo_store("p");
    let memo = store.new_memo(&run("r"), 0);
    memo.put("k", b"attempt 1").await.unwrap();
    assert_eq!(
        &memo.put("k", b"attempt 2").await.unwrap()[..],
        b"attempt 1"
    );
    assert_eq!(&memo.get("k").await.unwrap().unwrap()[..], b"attempt 1");
}

fn hex_sha256(s: &str) -> String {
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The layout is part of the stored format (version 2, see the `layout`
/// module): pin it. Standalone memos live under incarnation 0, and a run id
/// with upper-case letters is written in lower case with `=` before each.
#[tokio::test]
async fn the_object_layout_is_pinned() {
    let backend = Backend::in_memory();
    let store = backend.memo_store("pre/fix");
    let run = run("r1");
    store.new_memo(&run, 7).put("k", b"v").await.unwrap();
    // Written by earlier versions only; their path is pinned as what clears
    // still delete.
    write_legacy_step_output(&store, &run, Incarnation::STANDALONE, 2, b"payload", b"out")
        .await
        .unwrap();
    store
        .markers()
        .write_standalone(&run, 3_600_001)
        .await
        .unwrap();
    let upper = RunId::new("Run-A").unwrap();
    let incarnation = Incarnation::from_u64(0x1234_5678_9abc_def0);
    store
        .memo_for(&upper, incarnation, 1)
        .put("k", b"v")
        .await
        .unwrap();
    let marker = TerminalMarker {
        run_id: upper.clone(),
        terminal_at_ms: 3_600_001,
        incarnation,
    };
    store.markers().write(&marker).await.unwrap();
    let mut paths: Vec<String> = backend
        .objects()
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    paths.sort();
    let inverted = u64::MAX - 3_600_001;
    assert_eq!(
        paths,
        vec![
            format!(
                "pre/fix/memos/=run-=a/123456789abcdef0/1/{}",
                hex_sha256("k")
            ),
            format!("pre/fix/memos/r1/0000000000000000/7/{}", hex_sha256("k")),
            format!(
                "pre/fix/step-outputs/r1/0000000000000000/2/{}",
                hex_sha256("payload")
            ),
            format!("pre/fix/terminals/00000000000003600000/{inverted}_=run-=a.123456789abcdef0"),
            format!("pre/fix/terminals/00000000000003600000/{inverted}_r1.0000000000000000"),
        ]
    );
}

/// `list_entries` finds one incarnation's entries (and legacy step outputs)
/// with their steps and sizes, and nothing of another incarnation, another
/// run or a foreign object: what `memoctl show` prints without building
/// a path.
#[tokio::test]
async fn list_entries_finds_one_incarnations_entries_and_nothing_else() {
    use memo_runtime::EntryKind;
    use memo_runtime::object_store::{ObjectStoreExt, path::Path};
    for backend in Backend::all() {
        let objects = backend.open();
        let store = MemoStore::new(objects.clone(), "memo");
        let id = run("listed");
        let (mine, other) = (Incarnation::random(), Incarnation::random());
        store.memo_for(&id, mine, 0).put("a", b"1").await.unwrap();
        store.memo_for(&id, mine, 2).put("b", b"22").await.unwrap();
        store.memo_for(&id, other, 0).put("c", b"3").await.unwrap();
        store
            .new_memo(&run("listed-2"), 0)
            .put("d", b"4")
            .await
            .unwrap();
        write_legacy_step_output(&store, &id, mine, 5, b"payload", b"old")
            .await
            .unwrap();
        let listed = store.list_entries(&id, mine).await.unwrap();
        let memos: Vec<_> = listed
            .iter()
            .filter(|e| e.kind == EntryKind::Memo)
            .collect();
        assert_eq!(
            memos.iter().map(|e| e.step).collect::<Vec<_>>(),
            [0, 2],
            "{backend:?}"
        );
        let digest = |key: &str| {
            sha2::Sha256::digest(key.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        assert_eq!(
            (&*memos[0].digest, &*memos[1].digest),
            (&*digest("a"), &*digest("b")),
            "{backend:?}"
        );
        assert!(memos.iter().all(|e| e.size > 2), "{backend:?}");
        let legacy: Vec<_> = listed
            .iter()
            .filter(|e| e.kind == EntryKind::LegacyStepOutput)
            .map(|e| e.step)
            .collect();
        assert_eq!(legacy, [5], "{backend:?}");
        // A foreign object in the run's folder is skipped, not an entry.
        let foreign = Path::from(format!("memo/memos/listed/{mine}/not-a-step/extra"));
        objects.put(&foreign, b"x".to_vec().into()).await.unwrap();
        let again = store.list_entries(&id, mine).await.unwrap();
        assert_eq!(again.len(), listed.len(), "{backend:?}");
    }
}
