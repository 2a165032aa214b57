//! `memoctl sweep` also sweeps the shared scope (`#[memoized(scope =
//! shared)]`): the entries whose time to live ran out go, whatever the
//! runs' retention; live ones stay; a dry run counts and deletes nothing.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::shared::SharedScope;
use memo_runtime::store::store_from_url;
use memo_runtime::{MemoStore, RunId};
use support::{memoctl, ok, ok_json};

const NO_OPTIONS: &[(&str, String)] = &[];

#[tokio::test(flavor = "multi_thread")]
async fn sweep_deletes_the_expired_shared_entries_and_keeps_the_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    let store = MemoStore::new(Arc::clone(&opened.store), "memo");
    let memo = store.new_memo(&RunId::new("writer").unwrap(), 0);
    // Written in 1970 with a day to live: long expired.
    let past = SharedScope::new("old", Duration::from_secs(24 * 3600))
        .unwrap()
        .with_clock(Arc::new(ManualClock::new(1_000)));
    for key in ["a", "b"] {
        memo.shared_in(&past).put(key, b"stale").await.unwrap();
    }
    // Written now with the default week to live.
    memo.shared().put("fresh", b"live").await.unwrap();

    let dry = ok_json(&memoctl(
        &url,
        NO_OPTIONS,
        &["sweep", "--retention", "7d", "--dry-run", "--json"],
    ));
    assert_eq!(dry["shared"]["markers_expired"], 2, "{dry}");
    assert_eq!(dry["shared"]["entries_deleted"], 0, "{dry}");
    assert!(memo.shared_in(&past).get("a").await.unwrap().is_some());

    let report = ok(&memoctl(&url, NO_OPTIONS, &["sweep", "--retention", "7d"]));
    assert!(
        report.contains("shared entries deleted     2\n"),
        "{report}"
    );
    assert!(
        report.contains("shared failures            0\n"),
        "{report}"
    );
    for key in ["a", "b"] {
        assert_eq!(memo.shared_in(&past).get(key).await.unwrap(), None);
    }
    assert!(memo.shared().get("fresh").await.unwrap().is_some());

    let again = ok_json(&memoctl(
        &url,
        NO_OPTIONS,
        &["sweep", "--retention", "7d", "--json"],
    ));
    assert_eq!(again["shared"]["markers_expired"], 0, "{again}");
}
