//! memo against a real S3 API: the server named by `MEMO_S3_ENDPOINT` (in CI,
//! moto's `moto_server` on 127.0.0.1, started by `.ci/run`) and the bucket
//! `MEMO_S3_BUCKET`. Without `MEMO_S3_ENDPOINT` every test says it was
//! skipped and passes.
//!
//! The checks every cloud passes are in `memo_tests::cloud::checks`; this
//! file adds what only S3 has: a client that can be told not to send
//! conditional creates.

use memo_runtime::Error;
use memo_runtime::object_store::RetryConfig;
use memo_runtime::object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use memo_runtime::probe_conditional_create;
use memo_tests::cloud::{Cloud, CloudBucket};

memo_tests::cloud_checks!(Cloud::S3);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probe_reports_an_s3_client_without_conditional_puts() {
    let test = "probe_reports_an_s3_client_without_conditional_puts";
    let Some(s3) = CloudBucket::shared(Cloud::S3, test).await else {
        return;
    };
    let store = AmazonS3Builder::new()
        .with_endpoint(s3.endpoint())
        .with_allow_http(true)
        .with_bucket_name(s3.bucket())
        .with_region("us-east-1")
        .with_access_key_id("memo-tests")
        .with_secret_access_key("memo-tests")
        .with_retry(RetryConfig {
            max_retries: 2,
            ..RetryConfig::default()
        })
        .with_conditional_put(S3ConditionalPut::Disabled)
        .build()
        .unwrap();
    let err = probe_conditional_create(&store, &s3.prefix().into())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ConditionalPutUnsupported { .. }),
        "{err}"
    );
}
