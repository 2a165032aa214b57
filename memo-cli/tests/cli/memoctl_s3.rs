//! `memoctl` run as a process against the S3 server that `MEMO_S3_ENDPOINT`
//! and `MEMO_S3_BUCKET` name (moto in CI), on runs a test made there; says
//! "skipped" and passes when they are unset.

use crate::support;

use memo_tests::cloud::{Cloud, CloudBucket};
use support::{failed, memoctl, ok, ok_json, row, run_ids};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_command_works_on_s3() {
    let Some(bucket) = CloudBucket::shared(Cloud::S3, "every_command_works_on_s3").await else {
        return;
    };
    let opened = bucket.open();
    support::fill(&opened.store, opened.prefix.as_ref()).await;
    let url = Cloud::S3.url(bucket.bucket(), bucket.prefix());
    let options = Cloud::S3.options(bucket.endpoint());
    let memoctl = |args: &[&str]| memoctl(&url, &options, args);

    let table = ok(&memoctl(&["runs"]));
    assert_eq!(
        row(&table, "Ticket-42")[1..5],
        ["approval", "Running", "1", "2"], // draft, memo.wait:approval
        "{table}"
    );
    let runs = ok_json(&memoctl(&["runs", "--status", "completed", "--json"]));
    assert_eq!(run_ids(&runs), ["old-1", "order-1"]);
    // Pages, from S3's listing in order and from its offset.
    let page = ok_json(&memoctl(&[
        "runs",
        "--status",
        "completed",
        "--limit",
        "1",
        "--json",
    ]));
    assert_eq!(
        (run_ids(&page["runs"]), &page["next"]),
        (vec!["old-1"], &"old-1".into())
    );
    let page = ok_json(&memoctl(&[
        "runs",
        "--status",
        "completed",
        "--limit",
        "1",
        "--after",
        "old-1",
        "--json",
    ]));
    assert_eq!(run_ids(&page["runs"]), ["order-1"]);
    assert_eq!(page["next"], serde_json::Value::Null);

    let shown = ok_json(&memoctl(&["show", "order-1", "--json"]));
    assert_eq!(shown["run"]["output"], "reserved order-1");
    assert_eq!(shown["entries"].as_array().unwrap().len(), 2, "{shown}");

    ok(&memoctl(&[
        "signal",
        "Ticket-42",
        "approval",
        "--payload",
        "false",
    ]));
    let shown = ok_json(&memoctl(&["show", "Ticket-42", "--json"]));
    assert_eq!(shown["signals"][0]["payload"], false);
    assert!(failed(&memoctl(&["show", "order-9"])).contains("run order-9 not found"));

    let expired = ok_json(&memoctl(&[
        "markers",
        "--expired",
        "--retention",
        "7d",
        "--json",
    ]));
    assert_eq!(run_ids(&expired), ["old-1"]);
    let swept = ok_json(&memoctl(&["sweep", "--retention", "7d", "--json"]));
    assert_eq!(
        (&swept["runs_cleared"], &swept["entries_deleted"]),
        (&1.into(), &2.into())
    );
    let runs = ok_json(&memoctl(&["runs", "--json"]));
    assert_eq!(run_ids(&runs), ["Ticket-42", "order-1", "bad-2"]);

    assert!(ok(&memoctl(&["probe"])).contains("refuses a second conditional create"));
}
