//! Test support for memo's integration tests in `tests/tests/`.
//!
//! [`fixtures`] holds what every test file shares: [`fixtures::Backend::all`]
//! (in memory and a local folder, each also behind a fault injector), run-id
//! helpers and the counted side effects of the workflow tests.
//!
//! [`large_values`] generates the large values of the blob tests a piece at
//! a time, and holds their cloud check.
//!
//! [`cloud`] opens the S3, GCS and Azure servers that the environment names
//! (in CI: moto, Azurite and `.ci/fake_gcs_xml.py`, a fake of GCS's XML
//! API that is not Google, on 127.0.0.1, started by `.ci/run`) and holds the checks every one of them must pass;
//! [`cloud_checks!`] turns those checks into one test each in a backend's
//! own test file.

pub mod cloud;
pub mod fixtures;
pub mod large_values;
pub mod pause;

/// The root README's code blocks, compiled (and, unless marked `no_run`,
/// run) as doctests, so that every example in the README keeps compiling.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Every page under `docs/`, compiled and run as the README is: one item per
/// page, so a failing example names its page. `tests/tests/docs.rs` fails
/// if a page is missing here.
#[cfg(doctest)]
pub mod docs {
    #[doc = include_str!("../../docs/README.md")]
    pub struct Index;
    #[doc = include_str!("../../docs/operations.md")]
    pub struct Operations;
    #[doc = include_str!("../../docs/operations-inspector.md")]
    pub struct OperationsInspector;
    #[doc = include_str!("../../docs/guide/memoized.md")]
    pub struct GuideMemoized;
    #[doc = include_str!("../../docs/guide/shared-cache.md")]
    pub struct GuideSharedCache;
    #[doc = include_str!("../../docs/guide/workflows.md")]
    pub struct GuideWorkflows;
    #[doc = include_str!("../../docs/guide/durability.md")]
    pub struct GuideDurability;
    #[doc = include_str!("../../docs/guide/retention.md")]
    pub struct GuideRetention;
    #[doc = include_str!("../../docs/guide/testing.md")]
    pub struct GuideTesting;
    #[doc = include_str!("../../docs/guide/stored-format.md")]
    pub struct GuideStoredFormat;
    #[doc = include_str!("../../docs/guide/encryption.md")]
    pub struct GuideEncryption;
    #[doc = include_str!("../../docs/history/README.md")]
    pub struct History;
    #[doc = include_str!("../../docs/history/simulator-issue-9.md")]
    pub struct HistorySimulatorIssue9;
    #[doc = include_str!("../../docs/history/moto-postmortems.md")]
    pub struct HistoryMotoPostmortems;
    #[doc = include_str!("../../docs/history/ci-time.md")]
    pub struct HistoryCiTime;
}
