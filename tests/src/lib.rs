//! Test support for memo's integration tests in `tests/tests/`.
//!
//! [`fixtures`] holds what every test file shares: [`fixtures::Backend::all`]
//! (in memory and a local folder, each also behind a fault injector), run-id
//! helpers and the counted side effects of the workflow tests.
//!
//! [`cloud`] opens the S3, GCS and Azure servers that the environment names
//! (in CI: moto, fake-gcs-server and Azurite on 127.0.0.1, started by
//! `.ci/run`) and holds the checks every one of them must pass;
//! [`cloud_checks!`] turns those checks into one test each in a backend's
//! own test file.

pub mod cloud;
pub mod fixtures;
pub mod pause;

/// The root README's code blocks, compiled (and, unless marked `no_run`,
/// run) as doctests, so that every example in the README keeps compiling.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
