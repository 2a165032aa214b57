//! `memoctl show` prints a run's timers and deadlines, and `memoctl runs
//! --waiting` lists the runs suspended in a wait with what they wait for and
//! until when (issue 23, item 7), run as a process against a local folder
//! that real runs filled.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::store::store_from_url;
use memo_runtime::workflow::{Context, Workflow};
use support::{memoctl, ok, ok_json, row, run};

const NO_OPTIONS: &[(&str, String)] = &[];
const DAY_MS: u64 = 24 * 3600 * 1000;

async fn napper(ctx: Context, (): ()) -> anyhow::Result<String> {
    ctx.sleep(Duration::from_millis(3 * DAY_MS)).await?;
    Ok("woke".into())
}

async fn approval(ctx: Context, (): ()) -> anyhow::Result<bool> {
    let answer = ctx
        .wait_for_signal_timeout::<bool>("approve", Duration::from_millis(2 * DAY_MS))
        .await?;
    Ok(answer.unwrap_or(false))
}

#[tokio::test(flavor = "multi_thread")]
async fn show_prints_timers_and_runs_lists_waiting_runs_until_when() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let opened = store_from_url(&url, NO_OPTIONS.iter().cloned()).unwrap();
    support::fill(&opened.store, "").await;
    let runtime = support::runtime(
        &opened.store,
        "",
        Arc::new(memo_runtime::clock::SystemClock),
    );
    let started = support::now_ms();
    let napper = Workflow::new("napper", napper);
    runtime
        .run(&run("nap-1"), &(), &napper)
        .await
        .expect_err("nap-1 sleeps");
    let approval = Workflow::new("deadline", approval);
    runtime
        .run(&run("ask-1"), &(), &approval)
        .await
        .expect_err("ask-1 waits");

    let shown = ok_json(&memoctl(&url, NO_OPTIONS, &["show", "nap-1", "--json"]));
    let timer = &shown["timers"][0];
    assert_eq!(timer["waits_for"], "sleep", "{shown}");
    let due = timer["due_at_ms"].as_u64().unwrap();
    assert!(
        (started + 3 * DAY_MS..=support::now_ms() + 3 * DAY_MS).contains(&due),
        "{shown}"
    );
    assert_eq!(timer["passed"], false, "{shown}");
    let text = ok(&memoctl(&url, NO_OPTIONS, &["show", "ask-1"]));
    assert!(text.contains("timers and deadlines"), "{text}");
    assert!(text.contains("signal \"approve\""), "{text}");
    assert!(text.contains("(in 1day 23h"), "{text}");

    let waiting = ok_json(&memoctl(&url, NO_OPTIONS, &["runs", "--waiting", "--json"]));
    let mut listed: Vec<_> = waiting
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run_id"].as_str().unwrap(),
                r["waits_for"].as_str().unwrap(),
                r["until_ms"].is_u64(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("Ticket-42", "signal \"approval\"", false),
            ("ask-1", "signal \"approve\"", true),
            ("nap-1", "sleep", true),
        ],
        "{waiting}"
    );
    let table = ok(&memoctl(&url, NO_OPTIONS, &["runs", "--waiting"]));
    assert_eq!(row(&table, "Ticket-42")[4..], ["no", "deadline"], "{table}");
}
