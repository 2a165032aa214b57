//! `memoctl cancel` run as a process against a local folder that real runs
//! filled: it ends a waiting run `Cancelled` (with its terminal marker), the
//! worker's next run of it says so, and an ended run is refused.

use crate::support;

use std::sync::Arc;

use memo_runtime::workflow::Workflow;
use memo_runtime::{Error, store::store_from_url};
use support::{failed, memoctl, ok, ok_json, run};

const NO_OPTIONS: &[(&str, String)] = &[];

#[tokio::test(flavor = "multi_thread")]
async fn cancel_ends_a_waiting_run_and_refuses_an_ended_one() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    support::fill(&opened.store, "").await;

    // Ticket-42 waits for its approval signal.
    let said = ok(&memoctl(
        &url,
        NO_OPTIONS,
        &["cancel", "Ticket-42", "--reason", "customer withdrew"],
    ));
    assert_eq!(said, "cancelled run Ticket-42: customer withdrew\n");
    let shown = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "Ticket-42", "--json"]));
    assert_eq!(shown["run"]["status"], "Cancelled", "{shown}");
    assert_eq!(shown["run"]["error"], "customer withdrew", "{shown}");
    // The cancellation request ended the run: nothing is pending.
    let signals = shown["signals"].as_array().unwrap();
    assert!(signals.iter().all(|s| s["pending"] == false), "{signals:?}");
    let table = ok(&memoctl(&url, NO_OPTIONS, &["show", "Ticket-42"]));
    let cancel_line = table
        .lines()
        .find(|line| line.starts_with("memo.cancel"))
        .unwrap_or_else(|| panic!("no cancellation listed: {table}"));
    assert!(cancel_line.contains("Cancelled the run"), "{table}");
    assert!(!table.contains("(pending)"), "{table}");
    let markers = ok(&memoctl(&url, NO_OPTIONS, &["markers"]));
    assert!(markers.contains("Ticket-42"), "{markers}");

    // The worker, running it again, learns that it was cancelled.
    let worker = support::runtime(
        &opened.store,
        "",
        Arc::new(memo_runtime::clock::SystemClock),
    );
    let approval = Workflow::new("approval", support::approval);
    let refused = worker
        .run(&run("Ticket-42"), &"refund".to_string(), &approval)
        .await
        .unwrap_err();
    match refused.downcast_ref::<Error>() {
        Some(Error::RunCancelled { reason, .. }) => {
            assert_eq!(reason.as_deref(), Some("customer withdrew"))
        }
        other => panic!("expected a cancelled run, got {other:?}"),
    }

    // An ended run (order-1 completed) is refused, and stays as it was.
    let stderr = failed(&memoctl(&url, NO_OPTIONS, &["cancel", "order-1"]));
    assert!(stderr.contains("has already ended (Completed)"), "{stderr}");
    let shown = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "order-1", "--json"]));
    assert_eq!(shown["run"]["status"], "Completed", "{shown}");
}
