//! memo against a real S3 API: the server named by `MEMO_S3_ENDPOINT` (in CI,
//! moto's `moto_server` on 127.0.0.1, started by `.ci/run`) and the bucket
//! `MEMO_S3_BUCKET`. Without `MEMO_S3_ENDPOINT` every test says it was
//! skipped and passes.
//!
//! The checks every cloud passes are in `memo_tests::cloud::checks`; this
//! file adds what only S3 has: a client that can be told not to send
//! conditional creates, and the HTTP requests a clear, a run's deletion and
//! a retention pass send, counted on the wire.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memo_runtime::clock::{Clock, ManualClock};
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use memo_runtime::object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use memo_runtime::object_store::{ClientOptions, RetryConfig};
use memo_runtime::runtime_store::{Commit, ObjectStoreRuntimeStore, RuntimeStore, StatusChange};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, MemoStore, store::probe_conditional_create};
use memo_tests::cloud::{Cloud, CloudBucket};
use memo_tests::fixtures::{new_run, put_entries, run, step_commit};

memo_tests::cloud_checks!(Cloud::S3);

/// A day in milliseconds.
const DAY_MS: u64 = 24 * 3_600_000;

/// An S3 client of the test server's bucket, built by hand (not from a URL)
/// so that a test can set what a URL cannot.
fn client(s3: &CloudBucket) -> AmazonS3Builder {
    AmazonS3Builder::new()
        .with_endpoint(s3.endpoint())
        .with_allow_http(true)
        .with_bucket_name(s3.bucket())
        .with_region("us-east-1")
        .with_access_key_id("memo-tests")
        .with_secret_access_key("memo-tests")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probe_reports_an_s3_client_without_conditional_puts() {
    let test = "probe_reports_an_s3_client_without_conditional_puts";
    let Some(s3) = CloudBucket::shared(Cloud::S3, test).await else {
        return;
    };
    let store = client(&s3)
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

/// The S3 requests a client sent that succeeded, by what they ask for, and
/// those that did not (a server error the client retries).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Sent {
    /// `ListObjectsV2` pages (`GET ?list-type=2`).
    list_pages: u64,
    /// `DeleteObjects` batches (`POST ?delete`).
    delete_batches: u64,
    /// Any other request.
    other: u64,
    /// Requests answered with an error status, or not at all.
    failed: u64,
}

/// An HTTP client that counts the requests it sends, then sends them with
/// object_store's own reqwest client.
#[derive(Debug)]
struct Counting {
    inner: HttpClient,
    sent: Arc<Mutex<Sent>>,
}

#[async_trait::async_trait]
impl HttpService for Counting {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let query = request.uri().query().unwrap_or_default();
        let has = |param: &str| query.split('&').any(|p| p.split('=').next() == Some(param));
        let kind = match request.method().as_str() {
            "GET" if has("list-type") => |s: &mut Sent| s.list_pages += 1,
            "POST" if has("delete") => |s: &mut Sent| s.delete_batches += 1,
            _ => |s: &mut Sent| s.other += 1,
        };
        let response = self.inner.execute(request).await;
        let mut sent = self.sent.lock().unwrap();
        match &response {
            Ok(answer) if answer.status().is_success() => kind(&mut sent),
            _ => sent.failed += 1,
        }
        response
    }
}

#[derive(Debug, Default)]
struct CountingConnector {
    sent: Arc<Mutex<Sent>>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> memo_runtime::object_store::Result<HttpClient> {
        Ok(HttpClient::new(Counting {
            inner: ReqwestConnector::default().connect(options)?,
            sent: Arc::clone(&self.sent),
        }))
    }
}

/// A client of the test server's bucket whose successful requests are
/// counted, by kind, in the [`Sent`] it returns.
fn counted_client(
    s3: &CloudBucket,
) -> (memo_runtime::object_store::aws::AmazonS3, Arc<Mutex<Sent>>) {
    let connector = CountingConnector::default();
    let sent = Arc::clone(&connector.sent);
    let client = client(s3)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_http_connector(connector)
        .build()
        .unwrap();
    (client, sent)
}

/// A runtime over `client` (memo store and runtime store at the bucket's
/// prefix), on a manual clock at day 1.
fn counted_runtime(
    s3: &CloudBucket,
    client: memo_runtime::object_store::aws::AmazonS3,
) -> (Runtime, Arc<ManualClock>) {
    let objects: Arc<dyn ObjectStore> = Arc::new(client);
    let clock = Arc::new(ManualClock::new(DAY_MS));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(
            Arc::clone(&objects),
            format!("{}/memo", s3.prefix()),
        ))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects,
            format!("{}/runtime", s3.prefix()),
        )))
        .clock(clock.clone())
        .build()
        .unwrap();
    (runtime, clock)
}

/// Runs `runs` runs of [`run_one_step`] now, then moves the clock 8 days
/// on: past the default retention of 7 days.
async fn runs_expired(runtime: &Runtime, clock: &ManualClock, runs: usize) {
    let ended_ms = clock.now_ms();
    for i in 0..runs {
        run_one_step(runtime, &run(&format!("run-{runs}-{i}"))).await;
    }
    clock.set_ms(ended_ms + 8 * DAY_MS);
}

/// Runs `run_id`, a workflow of one step that commits one memo entry.
async fn run_one_step(runtime: &Runtime, run_id: &memo_runtime::RunId) {
    let one_step = Workflow::new("one-step", |ctx: Context, _: ()| async move {
        ctx.step("only", |memo| async move {
            memo.put("key", b"value").await?;
            Ok::<_, Error>(1u32)
        })
        .await
    });
    assert_eq!(runtime.run(run_id, &(), &one_step).await.unwrap(), 1);
}

/// Issue 13's bound for clearing a run of `n` entries on S3 is
/// `2⌈n/1000⌉` requests (list pages and delete batches). memo lists and
/// deletes each of the run's two folders (memo entries, step outputs), so a
/// run whose entries are all memo entries costs one more request: the
/// listing of its empty step-output folder. Counted on the wire, at the
/// HTTP client, so the pages and batches object_store turns its calls into
/// are what is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clearing_a_run_sends_one_list_page_and_one_delete_batch_per_thousand_entries() {
    let test = "clearing_a_run_sends_one_list_page_and_one_delete_batch_per_thousand_entries";
    let Some(s3) = CloudBucket::shared(Cloud::S3, test).await else {
        return;
    };
    let (client, sent) = counted_client(&s3);
    let store = MemoStore::new(Arc::new(client), s3.prefix());
    let doomed = run("doomed");
    // Two pages and two batches: a full one and a last one of one key.
    let entries: u32 = 1_001;
    put_entries(&store, &doomed, entries).await;

    *sent.lock().unwrap() = Sent::default();
    let cleared = store.clear_memos_for_run(&doomed).await.unwrap();
    assert_eq!(cleared, entries as usize);
    let sent = *sent.lock().unwrap();
    let thousands = u64::from(entries.div_ceil(1_000));
    println!(
        "clearing a run of {entries} memo entries on S3 sent {sent:?}: {} requests \
         (issue 13's bound: {})",
        sent.list_pages + sent.delete_batches + sent.other,
        2 * thousands
    );
    // A page per thousand entries and one for the empty step-output folder
    // (moto, like S3, pages listings by 1,000 keys); a batch per thousand
    // entries; nothing else (no GET or HEAD of an entry). Requests that
    // failed and were retried (moto answers 500 now and then when a listing
    // races a delete) are counted apart and not held against the bound.
    assert_eq!(
        (sent.list_pages, sent.delete_batches, sent.other),
        (thousands + 1, thousands, 0),
        "{sent:?}"
    );
}

/// Deleting a workflow run's runtime records sends what its incarnation's
/// folder holds (its log, deltas and bases) and its status hints in one
/// `DeleteObjects` batch per 1,000 paths, where it sent one per path; the
/// record and the pointer go first, one request each, in the order
/// `pointer.rs` needs. Counted on the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_runs_records_sends_its_folder_in_one_delete_batch() {
    let test = "deleting_a_runs_records_sends_its_folder_in_one_delete_batch";
    let Some(s3) = CloudBucket::shared(Cloud::S3, test).await else {
        return;
    };
    let (client, sent) = counted_client(&s3);
    let store = ObjectStoreRuntimeStore::new(Arc::new(client), s3.prefix());
    let run_id = run("doomed");
    store.create_run(new_run(&run_id)).await.unwrap();
    let start = Commit::status(StatusChange::start_attempt(1), 1);
    store.atomic_apply(&run_id, start).await.unwrap();
    for sequence in 0..20 {
        let step = step_commit(&run_id, sequence);
        store.atomic_apply(&run_id, step).await.unwrap();
    }
    let done = Commit::status(StatusChange::Failed { error: "e".into() }, 3);
    let incarnation = store.atomic_apply(&run_id, done).await.unwrap().incarnation;

    *sent.lock().unwrap() = Sent::default();
    assert!(store.delete_run(&run_id, incarnation).await.unwrap());
    let sent = *sent.lock().unwrap();
    println!("deleting the records of a run of 20 steps on S3 sent {sent:?}");
    // The record and the record again (the pointer vacated between them,
    // a conditional update), then the folder's 22 log entries, its deltas
    // and a hint of each status: 3 batches (4 while the pointer was
    // deleted; 35 before, one per path, measured with the old
    // `Client::delete_all`).
    assert_eq!(sent.delete_batches, 2 + 1, "{sent:?}");
    // And 3 other requests: the pointer's read (the run is cached, and
    // ended: nothing to catch up on), the tombstone, and the update that
    // vacates the pointer at the version read (4 while the deletion read
    // the pointer again before it).
    assert_eq!(sent.other, 3, "{sent:?}");
    assert!(!store.holds_remains(&run_id, incarnation).await.unwrap());
}

/// A retention pass deletes the terminal markers of a page's runs in one
/// `DeleteObjects` batch, where it sent one per run swept, and lists each
/// run's folders once. Counted on the wire: one run swept alone gives the
/// batches a run costs (its memo entries, its runtime records) and its
/// page's marker batch; 20 runs in pages of 10 then cost 20 runs' batches
/// and 2 marker batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sweep_sends_the_markers_of_a_page_in_one_delete_batch() {
    let test = "a_sweep_sends_the_markers_of_a_page_in_one_delete_batch";
    let Some(s3) = CloudBucket::shared(Cloud::S3, test).await else {
        return;
    };
    let (client, sent) = counted_client(&s3);
    let (runtime, clock) = counted_runtime(&s3, client);
    // No recheck comes due in these passes: only the sweeps are counted.
    let sweeper = runtime
        .retention_sweeper_builder()
        .page_size(10)
        .recheck_after(Duration::MAX)
        .build();
    let mut swept = Vec::new();
    for runs in [1, 20] {
        runs_expired(&runtime, &clock, runs).await;
        *sent.lock().unwrap() = Sent::default();
        let report = sweeper.sweep_now().await.unwrap();
        assert_eq!(
            (report.runs_cleared, report.failures.len()),
            (runs, 0),
            "{report:?}"
        );
        let sent = *sent.lock().unwrap();
        println!(
            "sweeping {runs} run(s) of one memoized step on S3 sent {sent:?}: {:.1} requests a run",
            (sent.list_pages + sent.delete_batches + sent.other) as f64 / runs as f64
        );
        swept.push((sent.delete_batches, sent.list_pages));
    }
    // One run: its own batches and one marker batch.
    let per_run = swept[0].0 - 1;
    assert_eq!(swept[1].0, 20 * per_run + 2, "{swept:?}");
    // And 2 list pages a run beyond a pass's own: its memo entries
    // (cleared once; its step-output folder is not listed, the bucket
    // holds no step-output entry: the pass asks once) and its folder (its
    // records' deletion). 3 while a deletion deleted the run's pointer and
    // read the id again after (a listing of the id's folder, for a record
    // to restore a later run's pointer from); 6 while a pass cleared each
    // run twice, 4 while it listed each run's step outputs.
    assert_eq!(swept[1].1 - swept[0].1, 19 * 2, "{swept:?}");
}

/// A recheck of a swept run costs, on the wire, a listing of its memo
/// folder, a read of its pointer, a listing of its runtime folder and one
/// `DeleteObjects` batch (what that holds, with the status hints no `HEAD`
/// looks for first), and for the vacated pointer the deletion left (that
/// read found it), a conditional update marking it swept; the tombstones,
/// the swept pointers and the markers of a pass's rechecks go in one batch
/// each. Counted as the difference between rechecking 1 run and 20. It
/// cost 3 other requests while the mark read the pointer again; 4 list
/// pages, a read, 5 `HEAD`s and 2 batches (its tombstone alone) before
/// vacated pointers: its step-output folder, and the id's folder for a
/// record to restore the missing pointer from.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_recheck_sends_two_list_pages_two_other_requests_and_one_delete_batch_a_run() {
    let test = "a_recheck_sends_two_list_pages_two_other_requests_and_one_delete_batch_a_run";
    let Some(s3) = CloudBucket::shared(Cloud::S3, test).await else {
        return;
    };
    let (client, sent) = counted_client(&s3);
    let (runtime, clock) = counted_runtime(&s3, client);
    let hour_ms = 3_600_000;
    let sweeper = runtime
        .retention_sweeper_builder()
        .page_size(10)
        .recheck_after(Duration::from_millis(hour_ms))
        .build();
    let mut rechecked = Vec::new();
    for runs in [1, 20] {
        runs_expired(&runtime, &clock, runs).await;
        let swept = sweeper.sweep_now().await.unwrap();
        assert_eq!(swept.runs_cleared, runs, "{swept:?}");
        clock.set_ms(clock.now_ms() + 2 * hour_ms);
        *sent.lock().unwrap() = Sent::default();
        let report = sweeper.sweep_now().await.unwrap();
        assert_eq!(
            (
                report.rechecks_due,
                report.recheck_failures,
                report.runs_cleared
            ),
            (runs, 0, 0),
            "{report:?}"
        );
        let sent = *sent.lock().unwrap();
        println!("rechecking {runs} swept run(s) on S3 sent {sent:?}");
        rechecked.push(sent);
    }
    let (one, twenty) = (rechecked[0], rechecked[1]);
    assert_eq!(
        (
            twenty.list_pages - one.list_pages,
            twenty.delete_batches - one.delete_batches,
            twenty.other - one.other
        ),
        (19 * 2, 19, 19 * 2),
        "{rechecked:?}"
    );
}
