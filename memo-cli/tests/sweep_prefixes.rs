//! `memoctl sweep` with a runtime-store prefix that holds none of the
//! workers' runs (issue 20, case 11) reports the runs it cannot find,
//! deletes nothing of them and exits 1; the right prefix then sweeps.

mod support;

use memo_runtime::store::store_from_url;
use support::{memoctl, ok, ok_json, run_ids};

const NO_OPTIONS: &[(&str, String)] = &[];

#[tokio::test(flavor = "multi_thread")]
async fn a_sweep_under_the_wrong_runs_prefix_deletes_nothing_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    support::fill(&opened.store, "").await;

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

    let right = ok(&memoctl(&url, NO_OPTIONS, &["sweep", "--retention", "7d"]));
    assert!(right.contains("entries deleted            2\n"), "{right}");
}
