//! `memoctl` on a SQLite file (`sqlite://`) that a worker filled and keeps
//! writing to: the operator's process reads beside the worker's, as the
//! README deploys it beside the workers.

use crate::support;

use std::sync::Arc;

use memo_runtime::store::store_from_url;
use memo_runtime::workflow::Workflow;
use support::{memoctl, ok, ok_json, row, run, run_ids};

const NO_OPTIONS: &[(&str, String)] = &[];

#[tokio::test(flavor = "multi_thread")]
async fn memoctl_lists_shows_and_sweeps_a_sqlite_file_while_a_worker_writes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("memo.db").display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    support::fill(&opened.store, "").await;

    // The worker goes on: new runs commit while memoctl reads.
    let worker = support::runtime(
        &opened.store,
        "",
        Arc::new(memo_runtime::clock::SystemClock),
    );
    let busy = tokio::spawn(async move {
        let orders = Workflow::new("orders", support::orders);
        for n in 0..30 {
            let id = format!("more-{n}");
            worker
                .run(&run(&id), &id, &orders)
                .await
                .expect("the worker's runs complete");
        }
    });

    let table = ok(&memoctl(
        &url,
        NO_OPTIONS,
        &["runs", "--status", "completed"],
    ));
    assert_eq!(
        row(&table, "order-1")[1..3],
        ["orders", "Completed"],
        "{table}"
    );
    let shown = ok(&memoctl(&url, NO_OPTIONS, &["show", "bad-2"]));
    assert!(shown.contains("Failed"), "{shown}");
    let probe = ok(&memoctl(&url, NO_OPTIONS, &["probe"]));
    assert!(
        probe.starts_with("ok: sqlite://") && probe.contains("refuses a second conditional create"),
        "{probe}"
    );
    busy.await.unwrap();

    // Every run the worker committed is listed; the expired one is swept.
    let json = ok_json(&memoctl(&url, NO_OPTIONS, &["runs", "--json"]));
    let listed = run_ids(&json);
    for n in 0..30 {
        assert!(listed.contains(&format!("more-{n}").as_str()), "{listed:?}");
    }
    assert!(listed.contains(&"old-1"), "{listed:?}");
    ok(&memoctl(&url, NO_OPTIONS, &["sweep", "--retention", "7d"]));
    let json = ok_json(&memoctl(&url, NO_OPTIONS, &["runs", "--json"]));
    let listed = run_ids(&json);
    assert!(!listed.contains(&"old-1"), "{listed:?}");
    assert!(listed.contains(&"order-1"), "{listed:?}");
}
