//! `memoctl serve` on the S3 server that `MEMO_S3_ENDPOINT` and
//! `MEMO_S3_BUCKET` name (moto in CI): the inspector lists and shows runs a
//! test made there and approves a waiting one; says "skipped" and passes
//! when they are unset.

use crate::inspector;
use crate::support;

use std::sync::Arc;

use inspector::Inspector;
use memo_runtime::clock::SystemClock;
use memo_runtime::workflow::Workflow;
use memo_tests::cloud::{Cloud, CloudBucket};
use reqwest::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_inspector_shows_and_operates_runs_on_s3() {
    let Some(bucket) =
        CloudBucket::shared(Cloud::S3, "the_inspector_shows_and_operates_runs_on_s3").await
    else {
        return;
    };
    let opened = bucket.open();
    support::fill(&opened.store, opened.prefix.as_ref()).await;
    let url = Cloud::S3.url(bucket.bucket(), bucket.prefix());
    let options = Cloud::S3.options(bucket.endpoint());
    let inspector = Inspector::start_with(&url, &options, &[]);
    let base = &inspector.base;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap();
    let get = |path: String| {
        let client = client.clone();
        async move {
            let response = client.get(path).send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };

    let (status, runs) = get(format!("{base}/runs?status=running")).await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert!(runs.contains(r#"href="/runs/Ticket-42""#), "{runs}");
    let (_, order) = get(format!("{base}/runs/order-1")).await;
    assert!(
        order.contains("reserved order-1") && order.contains("charge"),
        "{order}"
    );

    let (_, confirm) = get(format!(
        "{base}/runs/Ticket-42/signal?name=approval&payload=true"
    ))
    .await;
    let at = confirm
        .find(r#"name="csrf" value=""#)
        .expect("a CSRF field")
        + 19;
    let csrf = &confirm[at..at + 64];
    let approved = client
        .post(format!("{base}/runs/Ticket-42/signal"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("name=approval&payload=true&csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), StatusCode::SEE_OTHER);

    let worker = support::runtime(&opened.store, opened.prefix.as_ref(), Arc::new(SystemClock));
    let approval = Workflow::new("approval", support::approval);
    let output: String = worker
        .resume(&support::run("Ticket-42"), &approval)
        .await
        .expect("the approved run completes");
    assert_eq!(output, "sent Re: refund");
    let (_, done) = get(format!("{base}/runs/Ticket-42")).await;
    assert!(
        done.contains("Completed") && done.contains("sent Re: refund"),
        "{done}"
    );
}
