//! `memoctl show` prints a run's cost ledger, and `memoctl runs --sort cost`
//! orders runs by it (issue 25, item 4).

use crate::support;

use std::sync::Arc;

use memo_runtime::clock::SystemClock;
use memo_runtime::runtime_store::{NewRun, RuntimeStore, Usage};
use memo_runtime::store::store_from_url;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Bytes, Error, Memo, memoized};
use support::{memoctl, ok, ok_json, row, run, run_ids};

const NO_OPTIONS: &[(&str, String)] = &[];

/// What one answer is declared to cost, in dollars.
const ANSWER: f64 = 0.03;

#[memoized(cost = ANSWER)]
async fn answer(memo: &Memo, question: &str) -> Result<String, Error> {
    Ok(format!("answer to {question}"))
}

/// `steps` durable steps, each asking a memoized, priced question.
async fn questions(ctx: Context, steps: u64) -> Result<u64, Error> {
    for n in 0..steps {
        ctx.step_with(format!("ask-{n}"), &n, |memo, n| async move {
            answer(&memo, &format!("question {n}")).await
        })
        .await?;
    }
    Ok(steps)
}

/// A folder with three runs: `cheap` (one step), `dear` (three), and
/// `unstarted` (created, no attempt yet, so no ledger).
async fn filled() -> (tempfile::TempDir, String, Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    let runtime = support::runtime(&opened.store, "", Arc::new(SystemClock));
    let workflow = Workflow::new("questions", questions);
    runtime.run(&run("cheap"), &1u64, &workflow).await.unwrap();
    runtime.run(&run("dear"), &3u64, &workflow).await.unwrap();
    let unstarted = NewRun {
        run_id: run("unstarted"),
        workflow: "questions".into(),
        input: Bytes::from_static(b"\x01"),
        created_at_ms: support::now_ms(),
        workflow_version: None,
    };
    runtime.runtime_store().create_run(unstarted).await.unwrap();
    (dir, url, runtime)
}

async fn total(runtime: &Runtime, id: &str) -> Usage {
    let store = runtime.runtime_store();
    let record = store.load_run(&run(id)).await.unwrap().unwrap();
    let costs = store
        .load_attempt_costs(&run(id), record.incarnation)
        .await
        .unwrap();
    Usage::total(&costs)
}

#[tokio::test(flavor = "multi_thread")]
async fn show_prints_each_attempts_cost_and_the_runs_total() {
    let (_dir, url, runtime) = filled().await;
    let dear = total(&runtime, "dear").await;
    let shown = ok(&memoctl(&url, NO_OPTIONS, &["show", "dear"]));
    let (_, ledger) = shown.split_once("\ncost\n").expect(&shown);
    // ATTEMPT RECORDED GET PUT LIST DELETE UPLOADED ...
    let first = row(ledger, "1");
    assert_eq!(
        first[2..6],
        [
            dear.gets.to_string(),
            dear.puts.to_string(),
            dear.lists.to_string(),
            dear.deletes.to_string()
        ],
        "{shown}"
    );
    let totals = row(ledger, "total");
    assert_eq!(totals[1], dear.gets.to_string(), "{shown}");
    assert!(
        shown.contains("declared cost of the calls run $0.090000"),
        "three answers: {shown}"
    );

    let json = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "dear", "--json"]));
    let cost = &json["cost"]["total"];
    assert_eq!(cost["requests"], dear.requests(), "{json}");
    assert_eq!(cost["calls_run"], 3);
    assert_eq!(cost["entries_written"], 3);
    assert!((cost["paid_dollars"].as_f64().unwrap() - 0.09).abs() < 1e-9);
    assert_eq!(json["cost"]["attempts"][0]["attempt"], 1);

    // A run with no attempt yet has no ledger, and says so.
    let none = ok(&memoctl(&url, NO_OPTIONS, &["show", "unstarted"]));
    assert!(none.contains("(no ledger"), "{none}");
    let none = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "unstarted", "--json"]));
    assert!(none["cost"].is_null(), "{none}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_sorted_by_cost_lists_the_dearest_first_and_runs_without_a_ledger_last() {
    let (_dir, url, runtime) = filled().await;
    let by_id = ok_json(&memoctl(&url, NO_OPTIONS, &["runs", "--json"]));
    // By status (pending first), then id.
    assert_eq!(run_ids(&by_id), ["unstarted", "cheap", "dear"]);
    let by_cost = ok_json(&memoctl(
        &url,
        NO_OPTIONS,
        &["runs", "--sort", "cost", "--json"],
    ));
    assert_eq!(run_ids(&by_cost), ["dear", "cheap", "unstarted"]);
    let dear = total(&runtime, "dear").await;
    assert_eq!(by_cost[0]["cost"]["requests"], dear.requests());
    assert!(by_cost[2]["cost"].is_null());

    let table = ok(&memoctl(&url, NO_OPTIONS, &["runs", "--sort", "cost"]));
    let lines: Vec<_> = table.lines().collect();
    assert!(lines[0].contains(" REQUESTS "), "{table}");
    assert!(lines[1].starts_with("dear "), "{table}");
    assert_eq!(row(&table, "dear")[7], dear.requests().to_string());
    assert_eq!(row(&table, "unstarted")[7..], ["-", "-"], "{table}");

    // A page is ordered within itself.
    let page = ok_json(&memoctl(
        &url,
        NO_OPTIONS,
        &[
            "runs",
            "--status",
            "completed",
            "--limit",
            "2",
            "--sort",
            "cost",
            "--json",
        ],
    ));
    assert_eq!(run_ids(&page["runs"]), ["dear", "cheap"]);
}
