//! `memoctl` run as a process against a local folder that real runs filled:
//! each command's table and JSON, and each error's exit status and message.

use crate::support;

use std::sync::Arc;

use memo_runtime::store::store_from_url;
use memo_runtime::workflow::{Runtime, Workflow};
use serde_json::json;
use support::{failed, memoctl, ok, ok_json, row, run, run_ids};
use tempfile::TempDir;

const NO_OPTIONS: &[(&str, String)] = &[];

/// A folder filled by [`support::fill`], and its URL.
struct Folder {
    _dir: TempDir,
    url: String,
}

impl Folder {
    async fn filled() -> Folder {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
        support::fill(&opened.store, "").await;
        Folder { _dir: dir, url }
    }

    fn memoctl(&self, args: &[&str]) -> std::process::Output {
        memoctl(&self.url, NO_OPTIONS, args)
    }

    /// A runtime on the folder, as a worker would have.
    fn runtime(&self) -> Runtime {
        let opened = store_from_url(&self.url, NO_OPTIONS.iter().cloned()).unwrap();
        support::runtime(
            &opened.store,
            "",
            Arc::new(memo_runtime::clock::SystemClock),
        )
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_lists_every_run_with_its_workflow_status_attempts_and_steps() {
    let folder = Folder::filled().await;
    let table = ok(&folder.memoctl(&["runs"]));
    assert!(table.starts_with("RUN "), "{table}");
    for (id, workflow, status, attempts, steps) in [
        ("order-1", "orders", "Completed", "1", "2"),
        ("bad-2", "orders", "Failed", "1", "2"),
        // Its draft, and the mark of its suspended signal wait.
        ("Ticket-42", "approval", "Running", "1", "2"),
        ("old-1", "orders", "Completed", "1", "2"),
    ] {
        let cells = row(&table, id);
        assert_eq!(cells[1..5], [workflow, status, attempts, steps], "{table}");
        assert!(
            cells[5].ends_with('Z'),
            "last change is a UTC time: {table}"
        );
    }
    assert_eq!(table.lines().count(), 5, "{table}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_filters_by_status_and_workflow_and_prints_json() {
    let folder = Folder::filled().await;
    let completed = ok_json(&folder.memoctl(&["runs", "--status", "completed", "--json"]));
    assert_eq!(run_ids(&completed), ["old-1", "order-1"]);
    let approval = ok_json(&folder.memoctl(&["--json", "runs", "--workflow", "approval"]));
    assert_eq!(run_ids(&approval), ["Ticket-42"]);
    let ticket = &approval[0];
    assert_eq!(ticket["status"], "Running");
    assert_eq!(ticket["steps"], 2); // draft, memo.wait:approval
    assert_eq!(ticket["attempts"], 1);
    let failed_orders =
        ok(&folder.memoctl(&["runs", "--status", "Failed", "--workflow", "orders"]));
    assert_eq!(row(&failed_orders, "bad-2")[2], "Failed");
    assert_eq!(failed_orders.lines().count(), 2, "{failed_orders}");
    let none = ok(&folder.memoctl(&["runs", "--status", "cancelled"]));
    assert_eq!(none, "no runs\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_pages_with_limit_and_after_and_prints_the_next_cursor() {
    let folder = Folder::filled().await;
    let first = ok(&folder.memoctl(&["runs", "--status", "completed", "--limit", "1"]));
    assert_eq!(row(&first, "old-1")[2], "Completed", "{first}");
    assert_eq!(first.lines().count(), 3, "{first}");
    assert!(first.ends_with("next page: --after old-1\n"), "{first}");
    let last = ok(&folder.memoctl(&[
        "runs",
        "--status",
        "completed",
        "--limit",
        "1",
        "--after",
        "old-1",
    ]));
    assert_eq!(row(&last, "order-1")[2], "Completed", "{last}");
    assert_eq!(
        last.lines().count(),
        2,
        "no cursor after the last page: {last}"
    );

    let page =
        ok_json(&folder.memoctl(&["runs", "--json", "--status", "completed", "--limit", "1"]));
    assert_eq!(run_ids(&page["runs"]), ["old-1"]);
    assert_eq!(page["next"], "old-1");
    let page = ok_json(&folder.memoctl(&[
        "runs",
        "--json",
        "--status",
        "completed",
        "--limit",
        "5",
        "--after",
        "old-1",
    ]));
    assert_eq!(run_ids(&page["runs"]), ["order-1"]);
    assert_eq!(page["next"], serde_json::Value::Null);

    // A page holds at least one run; a cursor needs a page.
    for args in [
        &["runs", "--limit", "1", "--waiting"][..],
        &["runs", "--status", "completed", "--limit", "0"],
        &["runs", "--status", "completed", "--after", "old-1"],
    ] {
        let output = folder.memoctl(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_pages_through_every_status_without_status() {
    let folder = Folder::filled().await;
    let all = ok_json(&folder.memoctl(&["runs", "--json"]));
    let all: Vec<String> = run_ids(&all).into_iter().map(String::from).collect();
    assert_eq!(all.len(), 4, "{all:?}");
    // Pages of one, two and three runs go through every status in the
    // order of the whole listing, each run once.
    for limit in ["1", "2", "3"] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..10 {
            let mut args = vec!["runs", "--json", "--limit", limit];
            if let Some(after) = &after {
                args.extend(["--after", after.as_str()]);
            }
            let page = ok_json(&folder.memoctl(&args));
            let ids = run_ids(&page["runs"]);
            assert!(ids.len() <= limit.parse().unwrap(), "{page}");
            seen.extend(ids.into_iter().map(String::from));
            match page["next"].as_str() {
                Some(next) => after = Some(next.to_string()),
                None => break,
            }
        }
        assert_eq!(seen, all, "pages of {limit}");
    }
    let first = ok(&folder.memoctl(&["runs", "--limit", "1"]));
    let cursor = first
        .lines()
        .last()
        .unwrap()
        .strip_prefix("next page: --after ");
    let (status, run) = cursor.and_then(|c| c.split_once('.')).expect(&first);
    assert_eq!(run, all[0], "{first}");
    assert_eq!(row(&first, run)[2].to_lowercase(), status, "{first}");
    let bad = failed(&folder.memoctl(&["runs", "--limit", "1", "--after", "old-1"]));
    assert!(
        bad.contains("not a cursor of runs of every status"),
        "{bad}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn show_prints_the_record_steps_signals_and_memo_entries_with_sizes() {
    let folder = Folder::filled().await;
    let shown = ok(&folder.memoctl(&["show", "order-1"]));
    assert!(shown.contains("status:      Completed"), "{shown}");
    assert!(
        shown.contains(r#"output:      "reserved order-1""#),
        "{shown}"
    );
    assert_eq!(row(&shown, "0")[1], "reserve", "{shown}");
    // One try, and three bytes of output.
    assert_eq!(
        row(&shown, "1")[1..6],
        ["charge", row(&shown, "1")[2], "1", "3", "bytes"]
    );
    // "reserved order-1" in the memo of step 0, "ch_1" in step 1's.
    let memo_rows: Vec<_> = shown.lines().filter(|l| l.starts_with("memo ")).collect();
    assert_eq!(memo_rows.len(), 2, "{shown}");
    let size = |line: &str| -> usize { line.split_whitespace().nth(3).unwrap().parse().unwrap() };
    // Stored sizes: the value and its frame.
    assert_eq!(size(memo_rows[0]) - size(memo_rows[1]), 16 - 4, "{shown}");

    let json = ok_json(&folder.memoctl(&["show", "order-1", "--json"]));
    assert_eq!(json["run"]["workflow"], "orders");
    assert_eq!(json["run"]["output"], "reserved order-1");
    assert_eq!(json["steps"][1]["output"], 1_999);
    let entries = json["entries"].as_array().unwrap();
    let frame = entries[1]["size"].as_u64().unwrap() - 4;
    let sizes: Vec<_> = entries
        .iter()
        .map(|e| (e["kind"].clone(), e["step"].clone(), e["size"].clone()))
        .collect();
    assert_eq!(
        sizes,
        [
            (json!("memo"), json!("0"), json!(16 + frame)),
            (json!("memo"), json!("1"), json!(4 + frame))
        ]
    );
    assert!(frame > 0 && frame < 64, "a frame of {frame} bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn show_finds_the_entries_of_a_run_id_with_capitals_and_its_lease() {
    let folder = Folder::filled().await;
    let json = ok_json(&folder.memoctl(&["--json", "show", "Ticket-42"]));
    assert_eq!(json["run"]["status"], "Running");
    // The suspended attempt released its lease.
    assert_eq!(json["run"]["lease"]["live"], false);
    assert_eq!(json["run"]["lease"]["attempt"], 1);
    assert_eq!(json["steps"][0]["step"], "draft");
    // Its first try failed and was retried: the receipt says so.
    assert_eq!(json["steps"][0]["tries"], 2);
    assert_eq!(json["steps"][0]["last_retried_error"], support::BUSY);
    assert_eq!(json["signals"], json!([]));
    assert_eq!(json["entries"].as_array().unwrap().len(), 1, "{json}");
    let order = ok_json(&folder.memoctl(&["--json", "show", "order-1"]));
    let frame = order["entries"][1]["size"].as_u64().unwrap() - 4;
    assert_eq!(
        json["entries"][0]["size"],
        "Re: refund".len() as u64 + frame
    );
    assert_eq!(order["steps"][0]["tries"], 1);
    assert_eq!(order["steps"][0]["last_retried_error"], json!(null));
    let shown = ok(&folder.memoctl(&["show", "Ticket-42"]));
    assert!(shown.contains("lease:       not held"), "{shown}");
    let retried = format!("2 (last retried: {})", support::BUSY);
    assert!(shown.contains(&retried), "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signal_sent_with_memoctl_resumes_the_waiting_run() {
    let folder = Folder::filled().await;
    let sent = ok(&folder.memoctl(&["signal", "Ticket-42", "approval", "--payload", "true"]));
    assert!(
        sent.starts_with(r#"sent signal "approval" to run Ticket-42 (payload true"#),
        "{sent}"
    );
    // Sent again: the same signal, recorded once.
    let again = ok_json(&folder.memoctl(&[
        "signal",
        "Ticket-42",
        "approval",
        "--payload",
        "true",
        "--json",
    ]));
    assert_eq!(again["payload"], true);
    let shown = ok_json(&folder.memoctl(&["show", "Ticket-42", "--json"]));
    let signals = shown["signals"].as_array().unwrap();
    assert_eq!(signals.len(), 1, "{shown}");
    assert_eq!(signals[0]["name"], "approval");
    assert_eq!(signals[0]["pending"], true);
    assert_eq!(signals[0]["payload"], true);
    assert_eq!(signals[0]["input_id"], again["input_id"]);
    let table = ok(&folder.memoctl(&["show", "Ticket-42"]));
    assert!(table.contains("Accepted (pending)"), "{table}");

    let approval = Workflow::new("approval", support::approval);
    let out = folder
        .runtime()
        .run(&run("Ticket-42"), &"refund".to_string(), &approval)
        .await
        .expect("the run resumes with the signal");
    assert_eq!(out, "sent Re: refund");
    let shown = ok_json(&folder.memoctl(&["show", "Ticket-42", "--json"]));
    assert_eq!(shown["signals"][0]["phase"], "Consumed");
    assert_eq!(shown["signals"][0]["pending"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn markers_lists_terminal_runs_and_which_expired() {
    let folder = Folder::filled().await;
    let table = ok(&folder.memoctl(&["markers"]));
    assert_eq!(*row(&table, "old-1").last().unwrap(), "yes", "{table}");
    assert_eq!(*row(&table, "order-1").last().unwrap(), "no", "{table}");
    assert_eq!(*row(&table, "bad-2").last().unwrap(), "no", "{table}");
    assert_eq!(table.lines().count(), 4, "{table}");

    let expired =
        ok_json(&folder.memoctl(&["markers", "--expired", "--retention", "7d", "--json"]));
    assert_eq!(run_ids(&expired), ["old-1"]);
    assert_eq!(expired[0]["expired"], true);
    let none = ok(&folder.memoctl(&["markers", "--expired", "--retention", "60d"]));
    assert_eq!(none, "no markers older than the retention of 60d\n");
    let all_expired =
        ok_json(&folder.memoctl(&["markers", "--expired", "--retention", "0s", "--json"]));
    assert_eq!(run_ids(&all_expired).len(), 3, "{all_expired}");
}

#[tokio::test(flavor = "multi_thread")]
async fn markers_pages_with_limit_and_after_and_prints_the_next_cursor() {
    let folder = Folder::filled().await;
    let all = ok_json(&folder.memoctl(&["markers", "--json"]));
    let all = run_ids(&all);
    assert_eq!(all.len(), 3, "{all:?}");

    // Oldest first, two then one, in JSON.
    let first = ok_json(&folder.memoctl(&["markers", "--json", "--limit", "2"]));
    assert_eq!(run_ids(&first["markers"]), all[..2]);
    let next = first["next"].as_str().expect("a cursor").to_string();
    let last = first["markers"][1].clone();
    assert_eq!(
        next,
        format!(
            "{}.{}.{}",
            last["terminal_at_ms"],
            last["run_id"].as_str().unwrap(),
            last["incarnation"].as_str().unwrap()
        )
    );
    let rest = ok_json(&folder.memoctl(&["markers", "--json", "--limit", "2", "--after", &next]));
    assert_eq!(run_ids(&rest["markers"]), all[2..]);
    assert_eq!(rest["next"], serde_json::Value::Null);

    // The table prints the cursor under the page.
    let table = ok(&folder.memoctl(&["markers", "--limit", "2"]));
    assert_eq!(table.lines().count(), 4, "{table}");
    assert!(
        table.ends_with(&format!("next page: --after {next}\n")),
        "{table}"
    );
    let table = ok(&folder.memoctl(&["markers", "--limit", "2", "--after", &next]));
    assert_eq!(
        table.lines().count(),
        2,
        "no cursor after the last page: {table}"
    );

    // The expired markers page too: only old-1 is older than 7 days.
    let expired = ok_json(&folder.memoctl(&["markers", "--expired", "--json", "--limit", "1"]));
    assert_eq!(run_ids(&expired["markers"]), ["old-1"]);
    assert_eq!(expired["next"], serde_json::Value::Null);

    let bad = failed(&folder.memoctl(&["markers", "--limit", "1", "--after", "old-1"]));
    assert!(bad.contains("not a marker cursor: \"old-1\""), "{bad}");
    for args in [
        &["markers", "--limit", "0"][..],
        &["markers", "--after", &next],
    ] {
        let output = folder.memoctl(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sweep_dry_run_counts_and_sweep_clears_only_the_expired_run() {
    let folder = Folder::filled().await;
    let dry = ok_json(&folder.memoctl(&["sweep", "--retention", "7d", "--dry-run", "--json"]));
    assert_eq!(
        (
            &dry["dry_run"],
            &dry["runs_cleared"],
            &dry["entries_deleted"],
            &dry["runtime_runs_deleted"]
        ),
        (&json!(true), &json!(1), &json!(2), &json!(1))
    );
    assert_eq!(
        run_ids(&ok_json(&folder.memoctl(&["runs", "--json"]))).len(),
        4
    );

    let output = folder.memoctl(&["sweep", "--retention", "7d"]);
    let report = ok(&output);
    assert!(
        report.contains("runs cleared               1\n"),
        "{report}"
    );
    assert!(
        report.contains("entries deleted            2\n"),
        "{report}"
    );
    assert!(
        report.contains("failures                   0\n"),
        "{report}"
    );
    // Not a terminal: one plain progress line per run.
    assert_eq!(String::from_utf8_lossy(&output.stderr), "[1/1] old-1\n");

    let runs = ok_json(&folder.memoctl(&["runs", "--json"]));
    assert_eq!(run_ids(&runs), ["Ticket-42", "order-1", "bad-2"]);
    let gone = failed(&folder.memoctl(&["show", "old-1"]));
    assert!(gone.contains("run old-1 not found"), "{gone}");
    assert_eq!(
        ok(&folder.memoctl(&["markers", "--expired"])),
        "no markers older than the retention of 7d\n"
    );
    let nothing = ok_json(&folder.memoctl(&["sweep", "--retention", "7d", "--json"]));
    assert_eq!(nothing["markers_expired"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn probe_says_the_folder_refuses_a_second_create() {
    let folder = Folder::filled().await;
    let probed = ok(&folder.memoctl(&["probe"]));
    assert!(
        probed.starts_with("ok: file://") && probed.contains("refuses a second conditional create"),
        "{probed}"
    );
    let json = ok_json(&folder.memoctl(&["probe", "--json"]));
    assert_eq!(json["conditional_create"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_or_invalid_run_is_an_error_naming_it() {
    let folder = Folder::filled().await;
    for args in [&["show", "order-9"][..], &["signal", "order-9", "approval"]] {
        let stderr = failed(&folder.memoctl(args));
        assert!(
            stderr.contains("run order-9 not found in file://"),
            "{stderr}"
        );
    }
    for args in [&["show", "a/b"][..], &["signal", "a/b", "approval"]] {
        let stderr = failed(&folder.memoctl(args));
        assert!(
            stderr.starts_with(r#"memoctl: error: not a run id: invalid run id "a/b""#),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signal_to_an_ended_run_or_with_bad_json_changes_nothing() {
    let folder = Folder::filled().await;
    let stderr = failed(&folder.memoctl(&["signal", "order-1", "approval"]));
    assert!(
        stderr.contains("run order-1 is Completed and takes no more signals"),
        "{stderr}"
    );
    let stderr = failed(&folder.memoctl(&["signal", "Ticket-42", "approval", "--payload", "{yes"]));
    assert!(
        stderr.contains(r#"--payload is not JSON: "{yes""#),
        "{stderr}"
    );
    let shown = ok_json(&folder.memoctl(&["show", "Ticket-42", "--json"]));
    assert_eq!(shown["signals"], json!([]));
}

#[test]
fn a_bad_store_url_is_an_error_naming_it() {
    for (url, says) in [
        (
            "nope://bucket/x",
            r#"cannot open the store "nope://bucket/x""#,
        ),
        ("not a url", r#"cannot open the store "not a url""#),
        ("memory://", "is a store in this process's memory"),
        (
            "file:///dev/null/memo",
            r#"cannot open the store "file:///dev/null/memo""#,
        ),
    ] {
        let stderr = failed(&memoctl(url, NO_OPTIONS, &["runs"]));
        assert!(stderr.contains(says), "{url}: {stderr}");
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_memoctl"))
        .arg("runs")
        .output()
        .unwrap();
    assert!(failed(&output).contains("no store given: pass --store URL"));
}

#[test]
fn a_store_that_cannot_be_reached_is_an_error() {
    // Nothing listens on port 1; no retries, so the test takes no time.
    let options = [
        ("endpoint", "http://127.0.0.1:1".to_string()),
        ("region", "us-east-1".into()),
        ("access_key_id", "memo-tests".into()),
        ("secret_access_key", "memo-tests".into()),
        ("max_retries", "0".into()),
        ("retry_timeout", "1s".into()),
    ];
    for args in [
        &["runs"][..],
        &["show", "order-1"],
        &["markers"],
        &["probe"],
    ] {
        let stderr = failed(&memoctl("s3://memo-ci/nowhere", &options, args));
        assert!(
            stderr.contains("s3://memo-ci/nowhere"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("127.0.0.1:1"), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_lists_the_other_runs_and_fails_when_one_is_damaged() {
    let folder = Folder::filled().await;
    let dir = folder.url.strip_prefix("file://").unwrap();
    // The run pointer: every load reads it (a log entry that a checkpoint
    // covers is not read again).
    let run = std::path::Path::new(dir).join("runtime/runs/order-1");
    std::fs::write(run.join("run"), b"garbage").unwrap();

    let output = folder.memoctl(&["runs", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot load run order-1"), "{stderr}");
    assert!(stderr.contains("corrupt object at"), "{stderr}");
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(run_ids(&listed), ["Ticket-42", "old-1", "bad-2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_memo_and_runs_prefixes_say_where_the_stores_are() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    support::fill(&opened.store, "app/prod").await;

    // The default prefixes hold nothing here, and memoctl says so.
    let nothing = ok(&memoctl(&url, NO_OPTIONS, &["runs"]));
    assert!(
        nothing.starts_with(r#"no runs: nothing is stored under "runtime" in file://"#),
        "{nothing}"
    );
    assert!(nothing.contains(r#"the folders "app""#), "{nothing}");
    let prefixes = [
        "--memo-prefix",
        "app/prod/memo",
        "--runs-prefix",
        "app/prod/runtime",
    ];
    let with = |args: &[&str]| memoctl(&url, NO_OPTIONS, &[&prefixes[..], args].concat());
    assert_eq!(run_ids(&ok_json(&with(&["runs", "--json"]))).len(), 4);
    let shown = ok_json(&with(&["show", "order-1", "--json"]));
    assert_eq!(shown["entries"].as_array().unwrap().len(), 2, "{shown}");
    let expired = ok_json(&with(&["markers", "--expired", "--json"]));
    assert_eq!(run_ids(&expired), ["old-1"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_longest_run_ids_of_every_shape_are_listed_shown_and_swept() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    let ended_ms = support::now_ms() - support::OLD_RUN_AGE.as_millis() as u64;
    let runtime = support::runtime(
        &opened.store,
        "",
        Arc::new(memo_runtime::clock::ManualClock::new(ended_ms)),
    );
    let orders = Workflow::new("orders", support::orders);
    let ids = ["A".repeat(128), "a".repeat(128), "-_".repeat(64)];
    for id in &ids {
        runtime
            .run(&run(id), id, &orders)
            .await
            .expect("the run completes");
    }
    let listed = ok_json(&memoctl(&url, NO_OPTIONS, &["runs", "--json"]));
    let mut listed = run_ids(&listed);
    listed.sort();
    let mut expected: Vec<_> = ids.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(listed, expected);
    for id in &ids {
        // An id may start with '-', and is still an id, with or without `--`.
        for args in [&["show", id, "--json"][..], &["show", "--json", "--", id]] {
            let shown = ok_json(&memoctl(&url, NO_OPTIONS, args));
            assert_eq!(shown["run"]["run_id"], id.as_str());
            assert_eq!(shown["entries"].as_array().unwrap().len(), 2, "{shown}");
        }
    }
    let markers = ok_json(&memoctl(
        &url,
        NO_OPTIONS,
        &["markers", "--expired", "--json"],
    ));
    assert_eq!(run_ids(&markers).len(), 3, "{markers}");
    let swept = ok_json(&memoctl(
        &url,
        NO_OPTIONS,
        &["sweep", "--retention", "7d", "--json"],
    ));
    assert_eq!(swept["runs_cleared"], 3, "{swept}");
    assert!(ok(&memoctl(&url, NO_OPTIONS, &["runs"])).starts_with("no runs"));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_exits_quietly_when_its_reader_closed_the_pipe() {
    let folder = Folder::filled().await;
    for args in [
        &["runs"][..],
        &["runs", "--json"],
        &["show", "order-1"],
        &["show", "Ticket-42", "--json"],
        &["markers"],
        &["markers", "--json"],
        &["signal", "Ticket-42", "approval", "--payload", "true"],
        &["probe"],
        &["sweep", "--retention", "7d", "--dry-run"],
        &["sweep", "--retention", "7d", "--json"],
    ] {
        // `memoctl ... | head -0`: the reader is gone before memoctl writes.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_memoctl"))
            .args(["--store", &folder.url])
            .args(args)
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{args:?}: {}: {stderr}",
            output.status
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // What the commands did before printing is done: the sweep cleared the
    // expired run, the signal was recorded.
    let runs = ok_json(&folder.memoctl(&["runs", "--json"]));
    assert_eq!(run_ids(&runs).len(), 3, "{runs}");
    let shown = ok_json(&folder.memoctl(&["show", "Ticket-42", "--json"]));
    assert_eq!(shown["signals"].as_array().unwrap().len(), 1, "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn times_past_the_year_9999_are_printed_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    // Microseconds written as milliseconds: the year 55,800 or so.
    let micros = 1_700_000_000_000_000;
    let runtime = support::runtime(
        &opened.store,
        "",
        Arc::new(memo_runtime::clock::ManualClock::new(micros)),
    );
    let orders = Workflow::new("orders", support::orders);
    runtime
        .run(&run("future-1"), &"future-1".to_string(), &orders)
        .await
        .expect("the run completes");
    runtime
        .memo_store()
        .markers()
        .write_standalone(&run("far-future"), u64::MAX)
        .await
        .unwrap();
    let raw = format!("{micros} ms since the epoch");
    let listed = ok(&memoctl(&url, NO_OPTIONS, &["runs"]));
    assert!(listed.contains(&raw), "{listed}");
    let shown = ok(&memoctl(&url, NO_OPTIONS, &["show", "future-1"]));
    assert!(shown.contains(&format!("created:     {raw}")), "{shown}");
    let markers = ok(&memoctl(&url, NO_OPTIONS, &["markers"]));
    assert!(markers.contains(&raw), "{markers}");
    assert!(
        markers.contains(&format!("{} ms since the epoch", u64::MAX)),
        "{markers}"
    );
    let json = ok_json(&memoctl(&url, NO_OPTIONS, &["markers", "--json"]));
    assert_eq!(json.as_array().unwrap().len(), 2, "{json}");
    ok(&memoctl(
        &url,
        NO_OPTIONS,
        &["markers", "--expired", "--retention", "0s"],
    ));
}

/// What a hostile or careless writer can put in the store: a cleared
/// screen, a fake second line, an OSC 8 link, a right-to-left override, C1
/// and DEL, a line separator.
const HOSTILE: &str = "\u{1b}[2J\nstatus:      Completed\u{1b}]8;;https://evil.example\u{7}link\u{1b}]8;;\u{7} \u{202e}gnp.exe \u{9b}31m\u{7f}\u{2028}\u{2067}x";

/// Whether `text` holds a character that acts on a terminal, other than
/// the line breaks between lines.
fn acts_on_a_terminal(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            c != '\n'
                && (c.is_control()
                    || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_store_holds_is_printed_as_text_never_as_terminal_controls() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    let runtime = support::runtime(
        &opened.store,
        "",
        Arc::new(memo_runtime::clock::SystemClock),
    );
    let hostile = Workflow::new(
        HOSTILE,
        |ctx: memo_runtime::workflow::Context, _: u64| async move {
            ctx.step(HOSTILE, |_memo| async move {
                Ok::<_, memo_runtime::Error>(HOSTILE.to_string())
            })
            .await?;
            Err::<u64, _>(anyhow::anyhow!("upstream said: {HOSTILE}"))
        },
    );
    runtime
        .run(&run("hostile-1"), &1u64, &hostile)
        .await
        .expect_err("the workflow fails");
    let approval = Workflow::new("approval", support::approval);
    runtime
        .run(&run("waiting-1"), &HOSTILE.to_string(), &approval)
        .await
        .expect_err("waits for its approval");
    runtime
        .signal(&run("waiting-1"), HOSTILE, &HOSTILE)
        .await
        .unwrap();

    let none: Vec<char> = Vec::new();
    for args in [
        &["runs"][..],
        &["show", "hostile-1"],
        &["show", "waiting-1"],
        &["markers"],
    ] {
        let text = ok(&memoctl(&url, NO_OPTIONS, args));
        assert_eq!(acts_on_a_terminal(&text), none, "{args:?}:\n{text}");
        if args[0] != "markers" {
            assert!(text.contains(r"\u{1b}[2J\nstatus:"), "{args:?}:\n{text}");
        }
        let status_lines = text.lines().filter(|l| l.starts_with("status:")).count();
        assert!(status_lines <= 1, "{args:?}:\n{text}");
        // Valid JSON, escaped the JSON way.
        let json = ok(&memoctl(&url, NO_OPTIONS, &[args, &["--json"]].concat()));
        assert_eq!(acts_on_a_terminal(&json), none, "{args:?}:\n{json}");
        serde_json::from_str::<serde_json::Value>(&json).unwrap();
    }
    // The JSON holds exactly what the store holds.
    let runs = ok_json(&memoctl(&url, NO_OPTIONS, &["runs", "--json"]));
    assert!(
        runs.as_array()
            .unwrap()
            .iter()
            .any(|r| r["workflow"] == HOSTILE),
        "{runs}"
    );
    let shown = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "hostile-1", "--json"]));
    assert_eq!(shown["run"]["workflow"], HOSTILE);
    assert_eq!(shown["steps"][0]["step"], HOSTILE);
    let shown = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "waiting-1", "--json"]));
    assert_eq!(shown["signals"][0]["name"], HOSTILE);
    assert_eq!(shown["signals"][0]["payload"], HOSTILE);
}

#[test]
fn credentials_in_the_url_or_the_options_never_reach_the_terminal() {
    const SECRET: &str = "wJalrXUtnFEMI-SUPERSECRET";
    for url in [
        format!("s3://AKIDEXAMPLE:{SECRET}@memo-ci/x"),
        format!("az://container/x?sv=2024-01-01&sig={SECRET}"),
        format!("memory:///x?sig={SECRET}"),
        format!("nope://user:{SECRET}@host/x"),
    ] {
        let stderr = failed(&memoctl(&url, NO_OPTIONS, &["runs"]));
        assert!(!stderr.contains(SECRET), "{url}: {stderr}");
        assert!(stderr.contains("***"), "{url}: {stderr}");
    }
    let refused = failed(&memoctl(
        &format!("s3://AKIDEXAMPLE:{SECRET}@memo-ci/x"),
        NO_OPTIONS,
        &["runs"],
    ));
    assert!(refused.contains("s3://***@memo-ci/x"), "{refused}");
    assert!(refused.contains("pass credentials as options"), "{refused}");

    // A secret given as an option with the wrong separator is not echoed.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_memoctl"))
        .args(["--store", "s3://memo-ci/x", "--option"])
        .arg(format!("secret_access_key:{SECRET}"))
        .arg("runs")
        .output()
        .unwrap();
    let stderr = failed(&output);
    assert!(!stderr.contains(SECRET), "{stderr}");
    assert!(stderr.contains("--option expects KEY=VALUE"), "{stderr}");

    // Nor is one given right, to a store that cannot be reached.
    let options = [
        ("endpoint", "http://127.0.0.1:1".to_string()),
        ("region", "us-east-1".into()),
        ("access_key_id", "AKIDEXAMPLE".into()),
        ("secret_access_key", SECRET.into()),
        ("max_retries", "0".into()),
    ];
    let stderr = failed(&memoctl("s3://memo-ci/x", &options, &["runs"]));
    assert!(!stderr.contains(SECRET), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_leaves_stale_status_hints_where_they_are() {
    let folder = Folder::filled().await;
    let shown = ok_json(&folder.memoctl(&["show", "order-1", "--json"]));
    let incarnation = shown["run"]["incarnation"].as_str().unwrap();
    // A Running hint of the completed run, as a worker that crashed between
    // the commit and the hint's deletion leaves one.
    let dir = folder.url.strip_prefix("file://").unwrap();
    let running = std::path::Path::new(dir).join("runtime/runs-by-status/Running");
    let hint = running.join(format!("order-1.{incarnation}"));
    std::fs::write(&hint, b"order-1").unwrap();

    let listed = ok_json(&folder.memoctl(&["runs", "--json"]));
    let order = run_ids(&listed)
        .iter()
        .filter(|id| **id == "order-1")
        .count();
    assert_eq!(order, 1, "{listed}");
    let running_runs = ok_json(&folder.memoctl(&["runs", "--status", "running", "--json"]));
    assert_eq!(run_ids(&running_runs), ["Ticket-42"]);
    assert!(hint.is_file(), "memoctl runs deleted the stale hint");
}

#[test]
fn runs_on_a_prefix_that_holds_nothing_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    std::fs::create_dir_all(dir.path().join("runs/runs-by-status")).unwrap();
    let said = ok(&memoctl(&url, NO_OPTIONS, &["runs"]));
    assert_eq!(
        said,
        format!(
            "no runs: nothing is stored under \"runtime\" in {url} (the runtime store's prefix: \
             is --runs-prefix where the workers keep their runs?); the store's prefix holds \
             the folders \"runs\"\n"
        )
    );
    // JSON stays one document; the note goes to stderr.
    let output = memoctl(&url, NO_OPTIONS, &["runs", "--json"]);
    assert_eq!(ok_json(&output), json!([]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("memoctl: no runs: nothing is stored"),
        "{stderr}"
    );
    // A prefix that holds runs, none in the status asked for: just that.
    let with = |args: &[&str]| {
        memoctl(
            &url,
            NO_OPTIONS,
            &[&["--runs-prefix", "runs"], args].concat(),
        )
    };
    assert_eq!(ok(&with(&["runs", "--status", "failed"])), "no runs\n");
    assert_eq!(
        String::from_utf8_lossy(&with(&["runs", "--json"]).stderr),
        ""
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_payload_nested_too_deep_for_json_readers_is_shown_by_its_size() {
    use memo_runtime::runtime_store::NewRun;
    use memo_runtime::runtime_store::RuntimeStore as _;

    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    let records =
        memo_runtime::runtime_store::ObjectStoreRuntimeStore::new(opened.store, "runtime");
    // MessagePack arrays of one element, 1,000 deep, around a nil: what a
    // buggy or hostile writer can store as a run's input.
    let mut input = vec![0x91; 1_000];
    input.push(0xc0);
    records
        .create_run(NewRun {
            run_id: run("deep-1"),
            workflow: "w".into(),
            input: input.into(),
            created_at_ms: 1,
            workflow_version: None,
        })
        .await
        .unwrap();
    let shown = ok(&memoctl(&url, NO_OPTIONS, &["show", "deep-1"]));
    assert!(
        shown.contains(r#"input:       "(1001 bytes, MessagePack nested deeper than 128)""#),
        "{shown}"
    );
    // serde_json (128 levels at most) reads the whole document.
    let json = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "deep-1", "--json"]));
    assert_eq!(
        json["run"]["input"],
        "(1001 bytes, MessagePack nested deeper than 128)"
    );
}
