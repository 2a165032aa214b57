//! `memoctl` on a folder shared with another writer (issue 21): an
//! operator's sweep, often run as root, never deletes anything outside the
//! folder, whatever the other writer planted in it.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use memo_runtime::{Incarnation, MemoStore, store::store_from_url};
use support::{memoctl, now_ms, ok_json, run, run_ids};

const NO_OPTIONS: &[(&str, String)] = &[];

#[tokio::test(flavor = "multi_thread")]
async fn sweep_never_deletes_through_a_symlink_another_writer_planted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let url = format!("file://{}", root.display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    support::fill(&opened.store, "").await;

    // The other writer: an expired marker for a made-up run, whose folders
    // are symlinks to folders elsewhere laid out as that run's would be.
    let ghost = run("ghost");
    let month_ago = now_ms() - Duration::from_secs(30 * 24 * 3600).as_millis() as u64;
    MemoStore::new(opened.store.clone(), "memo")
        .markers()
        .write_standalone(&ghost, month_ago)
        .await
        .unwrap();
    let incarnation = Incarnation::STANDALONE.to_string();
    let mut victims: Vec<PathBuf> = Vec::new();
    for folder in ["memo/memos", "memo/step-outputs", "runtime/runs"] {
        let outside = dir
            .path()
            .join(format!("precious-{}", folder.replace('/', "-")));
        let inside = outside.join(&incarnation).join("0");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(inside.join("report.pdf"), "keep me").unwrap();
        victims.push(inside.join("report.pdf"));
        let planted = root.join(folder);
        std::fs::create_dir_all(&planted).unwrap();
        std::os::unix::fs::symlink(&outside, planted.join("ghost")).unwrap();
    }

    let output = memoctl(&url, NO_OPTIONS, &["sweep", "--retention", "7d"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    for victim in &victims {
        assert!(
            victim.exists(),
            "memoctl sweep deleted {victim:?}: {stdout}"
        );
    }
    assert!(
        stdout.contains("runs cleared               1\n"),
        "{stdout}"
    );
    assert!(stdout.contains("failed: run ghost: "), "{stdout}");
    assert!(stdout.contains("symlink"), "{stdout}");
    // The real expired run is gone; the others are untouched.
    let runs = ok_json(&memoctl(&url, NO_OPTIONS, &["runs", "--json"]));
    assert_eq!(run_ids(&runs), ["Ticket-42", "order-1", "bad-2"]);
}
