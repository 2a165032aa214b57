//! `memoctl sweep` with a runtime-store prefix that holds none of the
//! workers' runs (issue 20, case 11) reports the runs it cannot find,
//! deletes nothing of them (memo entries, markers, due-run entries) and
//! exits 1; the right prefix then sweeps.

use crate::support;

use std::sync::Arc;

use futures::TryStreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::store::store_from_url;
use support::{memoctl, ok, ok_json, run_ids};

/// The due-run entries stored, sorted.
async fn due_entries(store: &Arc<dyn ObjectStore>) -> Vec<String> {
    let paths: Vec<String> = store
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    let mut due: Vec<String> = paths
        .into_iter()
        .filter(|path| path.split('/').any(|part| part == "due"))
        .collect();
    due.sort();
    due
}

const NO_OPTIONS: &[(&str, String)] = &[];

#[tokio::test(flavor = "multi_thread")]
async fn a_sweep_under_the_wrong_runs_prefix_deletes_nothing_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    support::fill(&opened.store, "").await;
    // The waiting run gets its signal: an entry due now, which a worker
    // wakes the run by.
    ok(&memoctl(
        &url,
        NO_OPTIONS,
        &["signal", "Ticket-42", "approval", "--payload", "true"],
    ));
    let due = due_entries(&opened.store).await;
    assert!(due.iter().any(|p| p.contains("ticket-42")), "{due:?}");

    let wrong = memoctl(
        &url,
        NO_OPTIONS,
        &["--runs-prefix", "runs", "sweep", "--retention", "7d"],
    );
    assert_eq!(wrong.status.code(), Some(1));
    let report = String::from_utf8_lossy(&wrong.stdout);
    assert!(
        report.contains("entries deleted            0\n"),
        "{report}"
    );
    assert!(report.contains("failed: run old-1: "), "{report}");
    let expired = ok_json(&memoctl(
        &url,
        NO_OPTIONS,
        &["markers", "--expired", "--retention", "7d", "--json"],
    ));
    assert_eq!(run_ids(&expired), ["old-1"]);
    assert_eq!(
        due_entries(&opened.store).await,
        due,
        "the live run's due-run entry stays"
    );

    let right = ok(&memoctl(&url, NO_OPTIONS, &["sweep", "--retention", "7d"]));
    assert!(right.contains("entries deleted            2\n"), "{right}");
    assert_eq!(due_entries(&opened.store).await, due, "the run still waits");
}
