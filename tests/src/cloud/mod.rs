//! The cloud object stores the integration tests run against, each named by
//! environment variables, and one test's hold on its bucket.
//!
//! | cloud | endpoint | bucket | in CI |
//! |---|---|---|---|
//! | [`Cloud::S3`] | `MEMO_S3_ENDPOINT` | `MEMO_S3_BUCKET` | moto's `moto_server` |
//! | [`Cloud::Gcs`] | `MEMO_GCS_ENDPOINT` | `MEMO_GCS_BUCKET` | `.ci/fake_gcs_xml.py`, a fake of the XML API, not Google (see `tests/tests/gcs.rs`) |
//! | [`Cloud::Azure`] | `MEMO_AZURE_ENDPOINT` | `MEMO_AZURE_CONTAINER` | Azurite |
//!
//! Without its endpoint variable a test says plainly that it was skipped
//! and passes. A server's state is shared by every test and by every earlier
//! run against it, so each test works under its own unique prefix.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use memo_runtime::{
    MemoStore,
    store::{StoreAndPrefix, store_from_url},
};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub mod checks;
pub mod time;
pub mod workers;

/// The storage account of Azure's storage emulators, Azurite among them.
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// The published key of [`AZURITE_ACCOUNT`]: the same in every Azurite.
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A cloud API the tests can run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    /// An S3 API server (`s3://` URLs), with the credentials of `AWS_*` or
    /// dummy ones.
    S3,
    /// A GCS API server (`gs://` URLs) reached without OAuth: the endpoint
    /// goes in a service-account key with `disable_oauth`.
    Gcs,
    /// An Azure Blob API (`az://` URLs); the endpoint is the account URL
    /// (`http://127.0.0.1:10000/devstoreaccount1` for Azurite), the account
    /// and key those of `AZURE_STORAGE_ACCOUNT_NAME` and
    /// `AZURE_STORAGE_ACCOUNT_KEY`, or Azurite's.
    Azure,
}

impl Cloud {
    /// The environment variable naming the server; unset, tests skip.
    pub fn endpoint_var(self) -> &'static str {
        match self {
            Cloud::S3 => "MEMO_S3_ENDPOINT",
            Cloud::Gcs => "MEMO_GCS_ENDPOINT",
            Cloud::Azure => "MEMO_AZURE_ENDPOINT",
        }
    }

    /// The environment variable naming the bucket (container, for Azure).
    pub fn bucket_var(self) -> &'static str {
        match self {
            Cloud::S3 => "MEMO_S3_BUCKET",
            Cloud::Gcs => "MEMO_GCS_BUCKET",
            Cloud::Azure => "MEMO_AZURE_CONTAINER",
        }
    }

    /// The URL that [`store_from_url`] opens for `prefix` in `bucket`.
    pub fn url(self, bucket: &str, prefix: &str) -> String {
        let scheme = match self {
            Cloud::S3 => "s3",
            Cloud::Gcs => "gs",
            Cloud::Azure => "az",
        };
        format!("{scheme}://{bucket}/{prefix}")
    }

    /// How many entries the large run of
    /// [`clearing_a_large_run_uses_batched_deletes`](checks::clearing_a_large_run_uses_batched_deletes)
    /// has: more than one delete batch's worth (S3 and GCS batch up to 1,000
    /// paths, Azure 256), and no more, since every entry is a request to
    /// write: 1,001 on S3 and GCS, a full batch and a last one of a single
    /// path (moto answers about 110 creates a second, and the S3 suite
    /// waits on moto), but 1,000 on Azure.
    /// Azurite 3.37.0 runs the blob batches one at a time and each delete in
    /// them costs time in proportion to the blobs in the container: 5,000
    /// entries took about 10 s a batch of 256, past the client's 30 s request
    /// timeout for the later batches, where 1,000 take about 1.5 s a batch.
    pub fn large_run_entries(self) -> u32 {
        match self {
            Cloud::S3 | Cloud::Gcs => 1_001,
            Cloud::Azure => 1_000,
        }
    }

    /// The [`store_from_url`] options that point this cloud's client at the
    /// server at `endpoint`, with test credentials and a retry budget small
    /// enough that a broken server fails a test in seconds rather than
    /// minutes. Some retries are needed: moto answers 500 now and then when
    /// a listing races a delete.
    pub fn options(self, endpoint: &str) -> Vec<(&'static str, String)> {
        let env_or = |name: &str, default: &str| std::env::var(name).unwrap_or(default.into());
        let mut options = match self {
            Cloud::S3 => vec![
                ("endpoint", endpoint.to_owned()),
                ("region", env_or("AWS_REGION", "us-east-1")),
                ("access_key_id", env_or("AWS_ACCESS_KEY_ID", "memo-tests")),
                (
                    "secret_access_key",
                    env_or("AWS_SECRET_ACCESS_KEY", "memo-tests"),
                ),
            ],
            Cloud::Gcs => vec![("service_account_key", gcs_emulator_key(endpoint))],
            Cloud::Azure => vec![
                ("endpoint", endpoint.to_owned()),
                (
                    "account_name",
                    env_or("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT),
                ),
                (
                    "access_key",
                    env_or("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY),
                ),
                // Azurite runs a 256-blob delete batch for seconds on its one
                // thread; idle connections whose 5 s keep-alive ran out
                // meanwhile are reset when it wakes, under requests the
                // client has just sent on them, and a batch POST is not
                // retried. No idle connections, no race.
                ("pool_max_idle_per_host", "0".into()),
            ],
        };
        options.push(("max_retries", "5".into()));
        options.push(("retry_timeout", "30s".into()));
        options
    }
}

/// A service-account key that points `object_store`'s GCS client at the
/// server at `endpoint` and sends no OAuth token (the set-up of
/// `object_store`'s own CI): with `disable_oauth`, the empty email and
/// private key are never used.
pub fn gcs_emulator_key(endpoint: &str) -> String {
    serde_json::json!({
        "gcs_base_url": endpoint,
        "disable_oauth": true,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    })
    .to_string()
}

/// Held shared by most tests, and exclusively by the one that deletes
/// thousands of objects and by the runtime-store suites, whose racing
/// committers list and retry the most: moto lists a bucket by walking all of
/// its keys unlocked, so a listing that overlaps a delete in the same bucket
/// can fail with a 500 (`KeyError`), and such failures can outlast the
/// client's small retry budget. (The runtime-store suite failed twice on S3,
/// on a loaded machine, while other tests deleted objects; alone it passes.)
/// Each test binary runs against one cloud, so one lock per process is one
/// lock per bucket.
static BUCKET: RwLock<()> = RwLock::const_new(());

/// A test's hold on [`BUCKET`].
#[allow(dead_code)] // Held only to be dropped at the end of the test.
#[derive(Debug)]
enum Hold {
    Shared(RwLockReadGuard<'static, ()>),
    Exclusive(RwLockWriteGuard<'static, ()>),
}

/// One test's place on a cloud server: the bucket from the environment and
/// a prefix of its own.
#[derive(Debug)]
pub struct CloudBucket {
    cloud: Cloud,
    endpoint: String,
    bucket: String,
    prefix: String,
    _hold: Hold,
}

impl CloudBucket {
    /// The server `cloud`'s variables name, shared with the other tests; or
    /// `None`, after saying plainly that `test` is skipped.
    pub async fn shared(cloud: Cloud, test: &str) -> Option<CloudBucket> {
        let settings = Settings::from_env(cloud, test)?;
        Some(settings.hold(Hold::Shared(BUCKET.read().await)))
    }

    /// As [`CloudBucket::shared`], with the bucket to this test alone.
    pub async fn exclusive(cloud: Cloud, test: &str) -> Option<CloudBucket> {
        let settings = Settings::from_env(cloud, test)?;
        Some(settings.hold(Hold::Exclusive(BUCKET.write().await)))
    }

    /// The cloud this bucket is on.
    pub fn cloud(&self) -> Cloud {
        self.cloud
    }

    /// The server's endpoint, as its variable gives it.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The bucket (or Azure container).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// This test's own key prefix within the bucket.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A new client for this test's prefix, built from its URL and
    /// [`Cloud::options`] the way an application would.
    ///
    /// # Panics
    ///
    /// If [`store_from_url`] refuses the URL or options.
    pub fn open(&self) -> StoreAndPrefix {
        let url = self.cloud.url(&self.bucket, &self.prefix);
        store_from_url(&url, self.cloud.options(&self.endpoint))
            .unwrap_or_else(|e| panic!("cannot open {url}: {e}"))
    }

    /// A new `MemoStore` over a new client, as another process would build it.
    pub fn memo_store(&self) -> MemoStore {
        let opened = self.open();
        MemoStore::new(opened.store, opened.prefix)
    }
}

/// A cloud's server, bucket and a test's unique prefix, before the test
/// takes its hold on the bucket.
struct Settings {
    cloud: Cloud,
    endpoint: String,
    bucket: String,
    prefix: String,
}

impl Settings {
    fn from_env(cloud: Cloud, test: &str) -> Option<Settings> {
        let endpoint_var = cloud.endpoint_var();
        let Ok(endpoint) = std::env::var(endpoint_var) else {
            // Straight to stderr: the test harness captures `eprintln!` of
            // passing tests, and whether a test ran must show in the log.
            writeln!(
                std::io::stderr(),
                "skipped: {endpoint_var} not set ({test})"
            )
            .ok();
            return None;
        };
        let bucket_var = cloud.bucket_var();
        let bucket = std::env::var(bucket_var).unwrap_or_else(|_| {
            panic!("{bucket_var} must name a bucket when {endpoint_var} is set")
        });
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let prefix = format!("memo-tests/{test}-{}-{nanos}", std::process::id());
        writeln!(
            std::io::stderr(),
            "running against {endpoint}, bucket {bucket}, prefix {prefix}"
        )
        .ok();
        Some(Settings {
            cloud,
            endpoint,
            bucket,
            prefix,
        })
    }

    fn hold(self, hold: Hold) -> CloudBucket {
        CloudBucket {
            cloud: self.cloud,
            endpoint: self.endpoint,
            bucket: self.bucket,
            prefix: self.prefix,
            _hold: hold,
        }
    }
}

/// One test per check in [`checks`], each run against `$cloud`, in the test
/// file that invokes it: `memo_tests::cloud_checks!(Cloud::Azure);`.
///
/// Every backend's file invokes this once, so a check added here runs on
/// every cloud. The checks that list and delete the most hold the bucket
/// alone ([`CloudBucket::exclusive`]).
#[macro_export]
macro_rules! cloud_checks {
    ($cloud:expr) => {
        $crate::cloud_checks!(@shared $cloud, 4, store_from_url_honours_conditional_creates);
        $crate::cloud_checks!(@shared $cloud, 4, memo_conformance_suite);
        $crate::cloud_checks!(@exclusive $cloud, 4, runtime_store_conformance_suite);
        $crate::cloud_checks!(@shared $cloud, 4, a_new_runs_creation_reads_no_object);
        $crate::cloud_checks!(@shared $cloud, 4, a_stale_deletions_update_never_vacates_a_later_runs_pointer);
        $crate::cloud_checks!(@shared $cloud, 4, sealed_memo_conformance_suite);
        $crate::cloud_checks!(@shared $cloud, 4, a_key_scan_counts_each_object_by_the_key_it_needs);
        $crate::cloud_checks!(@exclusive $cloud, 4, data_keys_conformance_suites);
        $crate::cloud_checks!(@shared $cloud, 8, thirty_two_clients_racing_one_key_converge_on_one_value);
        $crate::cloud_checks!(@shared $cloud, 4, lost_ack_on_a_create_returns_the_committed_value);
        $crate::cloud_checks!(@shared $cloud, 4, listing_expired_markers_lists_about_as_many_objects_as_are_expired);
        $crate::cloud_checks!(@exclusive $cloud, 4, clearing_a_large_run_uses_batched_deletes);
        $crate::cloud_checks!(@shared $cloud, 4, workflow_runs_are_swept_once_their_retention_has_passed);
        $crate::cloud_checks!(@shared $cloud, 4, an_object_over_its_limit_is_refused_before_its_body_is_read);
        $crate::cloud_checks!(@shared $cloud, 4, timers_deadlines_and_cancellation_across_workers);
        $crate::cloud_checks!(@shared $cloud, 4, large_values_round_trip_through_multipart_uploads);
        $crate::cloud_checks!(@shared $cloud, 4, a_poll_reads_the_due_entries_not_the_hours_later_ones);
        $crate::cloud_checks!(@shared $cloud, 4, workers_on_separate_clients_share_the_runs);
    };
    (@$hold:ident $cloud:expr, $threads:literal, $check:ident) => {
        #[::tokio::test(flavor = "multi_thread", worker_threads = $threads)]
        async fn $check() {
            let bucket = $crate::cloud::CloudBucket::$hold($cloud, stringify!($check)).await;
            if let Some(bucket) = bucket {
                $crate::cloud::checks::$check(&bucket).await;
            }
        }
    };
}
