//! memo: durable, retry-safe steps over object storage.
//!
//! Queues and workers deliver work at least once, so a step may run again
//! after a crash or an expired lease. memo gives each step a durable,
//! content-addressed, write-once memo in object storage: a retry finds the
//! committed result of every side effect instead of doing it again.
//!
//! - [`#[memoized]`](memoized): makes an `async fn` retry-safe in one line;
//!   its `Ok` value is committed once per (run, step, arguments).
//! - [`MemoStore`] / [`Memo`]: write-once memo entries over any
//!   [`object_store::ObjectStore`].
//! - [`content_key`]: the canonical key of a serializable input.
//! - [`TerminalMarker`]s: which runs ended when, for retention.
//! - [`RunId`]: the checked run identifier that keeps runs apart.
//! - [`RuntimeStore`]: the durable record of workflow runs and their step
//!   receipts, in memory or in object storage ([`runtime_store`]).
//! - [`RetentionSweeper`]: deletes what expired runs left behind.
//!
//! # Cargo features
//!
//! None is on by default: the embedded default (a local folder, or memory)
//! needs no cloud client, and leaving them out keeps a cold build about half
//! as long, as `object_store` does.
//!
//! - `aws`, `gcp`, `azure`: the S3, Google Cloud Storage and Azure Blob
//!   backends for [`store_from_url`] (`s3://`, `gs://`, `az://`); a URL whose
//!   feature is off is [`Error::StoreFeatureDisabled`], naming the feature.
//! - `testing`: the `testing` module: fault-injecting and request-counting
//!   object stores and the conformance suites.

mod clock;
mod codec;
mod envelope;
mod error;
mod forward;
mod key;
mod layout;
#[cfg(unix)]
mod local;
mod memo;
mod memoize;
mod read_limit;
mod run_id;
pub mod runtime_store;
mod store_url;
mod sweeper;
mod terminal;
pub mod workflow;
mod write_once;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use bytes::Bytes;
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::MAX_NESTING_DEPTH;
pub use error::{Error, ErrorKind, Result};
pub use key::content_key;
#[cfg(unix)]
pub use local::LocalFolder;
pub use memo::{DEFAULT_ENTRY_CACHE_BYTES, DEFAULT_MAX_VALUE_SIZE, Memo, MemoStore};
pub use memo_macros::memoized;
pub use object_store;
pub use run_id::{Incarnation, MAX_RUN_ID_LEN, RunId};
pub use runtime_store::{InMemoryRuntimeStore, ObjectStoreRuntimeStore, RuntimeStore};
pub use store_url::{
    CHECK_CONDITIONAL_CREATE_OPTION, MAX_RETRIES_OPTION, RETRY_TIMEOUT_OPTION, StoreAndPrefix,
    probe_conditional_create, redact_store_url, store_from_url,
};
pub use sweeper::{
    DEFAULT_SWEEP_CONCURRENCY, DEFAULT_SWEEP_PAGE_SIZE, RetentionSweeper, RetentionSweeperBuilder,
    SweepFailure, SweepReport, SweeperHandle, SweeperSummary,
};
pub use terminal::{MARKER_PARTITION_MS, TerminalMarker};

mod private;
/// The runtime half of `#[memoized]` and of `forward_object_store!`: what
/// their expansions name. Not public API; it may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::forward::expansion as forward;
    pub use crate::private::*;
}

/// The examples in [`memoized`]'s documentation, run as this crate's
/// doctests. memo-macros is a proc-macro crate, whose doctests cargo would
/// build for the host, with a second copy of this crate and everything under
/// it.
#[cfg(doctest)]
#[doc = include_str!("../../memo-macros/src/memoized.md")]
pub struct MemoizedDocExamples;
