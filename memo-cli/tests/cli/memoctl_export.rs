//! `memoctl export` (issue 24, item 4): chosen runs copied from a store
//! into a local folder read there as the same runs: `memoctl` shows them
//! alike, and the replay check reports the same on the copy as on the
//! source.

use crate::support;

use std::sync::Arc;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RuntimeStore};
use memo_runtime::store::store_from_url;
use memo_runtime::workflow::{Context, ReplayCheck, ReplayReport, Workflow};
use support::{failed, memoctl, ok, ok_json, run_ids};
use tempfile::TempDir;

const NO_OPTIONS: &[(&str, String)] = &[];

/// A folder store and its URL.
struct Folder {
    dir: TempDir,
    url: String,
}

impl Folder {
    fn new() -> Folder {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        Folder { dir, url }
    }

    async fn filled() -> Folder {
        let folder = Folder::new();
        support::fill(&folder.objects(), "").await;
        folder
    }

    fn objects(&self) -> Arc<dyn ObjectStore> {
        store_from_url(&self.url, NO_OPTIONS.iter().cloned())
            .unwrap()
            .store
    }

    fn memoctl(&self, args: &[&str]) -> std::process::Output {
        memoctl(&self.url, NO_OPTIONS, args)
    }

    /// `memoctl export --to <into> ARGS` on this folder, as JSON.
    fn export(&self, into: &Folder, args: &[&str]) -> serde_json::Value {
        let to = into.dir.path().to_str().unwrap();
        let mut all = vec!["export", "--json", "--to", to];
        all.extend_from_slice(args);
        ok_json(&self.memoctl(&all))
    }

    fn runs(&self) -> Arc<dyn RuntimeStore> {
        Arc::new(ObjectStoreRuntimeStore::new(self.objects(), "runtime"))
    }

    /// The replay check of the support's `orders` code, and of a change to
    /// it that renamed its first step, against this folder's runs.
    async fn replay_checks(&self) -> (ReplayReport, ReplayReport) {
        let check = ReplayCheck::new(self.runs());
        let same = Workflow::new("orders", support::orders);
        let renamed = Workflow::new("orders", |ctx: Context, order: String| async move {
            ctx.step_with("hold", &order, |_memo, order| async move {
                Ok::<_, memo_runtime::Error>(order.to_string())
            })
            .await
        });
        (
            check.run(&same).await.unwrap(),
            check.run(&renamed).await.unwrap(),
        )
    }
}

fn exported_ids(report: &serde_json::Value) -> Vec<&str> {
    run_ids(&report["runs"])
}

#[tokio::test(flavor = "multi_thread")]
async fn an_export_of_a_workflows_runs_replays_as_the_source_does() {
    let source = Folder::filled().await;
    let copy = Folder::new();
    let report = source.export(&copy, &["--workflow", "orders"]);
    assert_eq!(
        exported_ids(&report),
        ["bad-2", "old-1", "order-1"],
        "{report}"
    );
    assert!(report["objects"].as_u64().unwrap() > 3 * 4, "{report}");
    assert_eq!(report["changed_while_copied"], serde_json::json!([]));

    // memoctl lists the copied runs as it lists them in the source.
    let listed = |folder: &Folder| {
        let runs = ok_json(&folder.memoctl(&["runs", "--json", "--workflow", "orders"]));
        runs.as_array().unwrap().clone()
    };
    assert_eq!(listed(&copy), listed(&source));
    let all = ok_json(&copy.memoctl(&["runs", "--json"]));
    assert_eq!(run_ids(&all).len(), 3, "only the chosen runs: {all}");
    for run in ["order-1", "bad-2"] {
        let show = |folder: &Folder| ok_json(&folder.memoctl(&["show", run, "--json"]));
        assert_eq!(show(&copy), show(&source), "{run}");
    }

    let (same, renamed) = source.replay_checks().await;
    let (same_copy, renamed_copy) = copy.replay_checks().await;
    assert!(same.is_clean() && !renamed.is_clean(), "{same}\n{renamed}");
    assert_eq!(same_copy.runs(), same.runs());
    assert_eq!(renamed_copy.runs(), renamed.runs());
    assert_eq!(renamed_copy.to_string(), renamed.to_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_are_chosen_by_id_and_by_status_and_keep_their_signals_and_memo_entries() {
    let source = Folder::filled().await;
    let by_status = Folder::new();
    let report = source.export(&by_status, &["--status", "running"]);
    assert_eq!(exported_ids(&report), ["Ticket-42"], "{report}");
    let show = |folder: &Folder| ok_json(&folder.memoctl(&["show", "Ticket-42", "--json"]));
    let shown = show(&by_status);
    assert_eq!(shown, show(&source));
    assert_eq!(shown["entries"].as_array().unwrap().len(), 1, "{shown}");

    // The copy is a store a test can go on with: the run takes its signal
    // and ends there, and the source is untouched.
    ok(&by_status.memoctl(&["signal", "Ticket-42", "approval", "--payload", "true"]));
    let runtime = support::runtime(
        &by_status.objects(),
        "",
        Arc::new(memo_runtime::clock::SystemClock),
    );
    let approval = Workflow::new("approval", support::approval);
    let out = runtime
        .resume(&support::run("Ticket-42"), &approval)
        .await
        .unwrap();
    assert_eq!(out, "sent Re: refund");
    assert_eq!(show(&source)["run"]["status"], "Running");

    let by_id = Folder::new();
    let report = source.export(&by_id, &["order-1", "Ticket-42"]);
    assert_eq!(exported_ids(&report), ["Ticket-42", "order-1"], "{report}");
    let table = ok(&source.memoctl(&[
        "export",
        "--to",
        by_id.dir.path().to_str().unwrap(),
        "bad-2",
    ]));
    assert!(table.contains("exported 1 runs"), "{table}");
    assert_eq!(
        run_ids(&ok_json(&by_id.memoctl(&["runs", "--json"]))),
        ["Ticket-42", "order-1", "bad-2"],
        "in status, then run-id order"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn exporting_a_run_that_does_not_exist_is_an_error_naming_it() {
    let source = Folder::filled().await;
    let copy = Folder::new();
    let to = copy.dir.path().to_str().unwrap();
    let err = failed(&source.memoctl(&["export", "--to", to, "order-1", "no-such-run"]));
    assert!(err.contains("run no-such-run not found"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_lists_the_version_each_run_started_on_and_export_keeps_it() {
    let source = Folder::filled().await;
    let runtime = support::runtime(
        &source.objects(),
        "",
        Arc::new(memo_runtime::clock::SystemClock),
    );
    let v2 = Workflow::new("orders", support::orders).with_version("2");
    runtime
        .run(&support::run("order-9"), &"order-9".to_string(), &v2)
        .await
        .unwrap();
    let table = ok(&source.memoctl(&["runs"]));
    assert!(
        table.lines().next().unwrap().ends_with("VERSION"),
        "{table}"
    );
    assert_eq!(
        support::row(&table, "order-9").last(),
        Some(&"2"),
        "{table}"
    );
    assert_eq!(
        support::row(&table, "order-1").last(),
        Some(&"-"),
        "{table}"
    );
    let listed = ok_json(&source.memoctl(&["runs", "--json", "--status", "completed"]));
    let versions: Vec<_> = (listed.as_array().unwrap().iter())
        .map(|run| {
            (
                run["run_id"].as_str().unwrap(),
                run["workflow_version"].as_str(),
            )
        })
        .collect();
    assert!(versions.contains(&("order-9", Some("2"))), "{listed}");
    assert!(versions.contains(&("order-1", None)), "{listed}");

    let copy = Folder::new();
    let report = source.export(&copy, &["order-9"]);
    assert_eq!(report["runs"][0]["workflow_version"], "2", "{report}");
    let record = copy
        .runs()
        .load_run(&support::run("order-9"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.workflow_version.as_deref(), Some("2"));
}
