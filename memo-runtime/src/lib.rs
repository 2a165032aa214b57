//! memo: durable, retry-safe steps over object storage.
//!
//! Queues and workers deliver work at least once, so a step may run again
//! after a crash or an expired lease. memo gives each step a durable,
//! content-addressed, write-once memo in object storage: a retry finds the
//! committed result of every side effect instead of doing it again.
//!
//! The crate root holds the core: [`#[memoized]`](memoized), which makes an
//! `async fn` retry-safe in one line (its `Ok` value is committed once per
//! run, step and arguments); [`MemoStore`] / [`Memo`], write-once memo
//! entries over any [`object_store::ObjectStore`]; [`content_key`], the
//! canonical key of a serializable input; [`RunId`] and [`Incarnation`],
//! which keep runs apart; [`Error`] and [`Result`]. Everything else lives in
//! one module per concern, and each type has one path:
//!
//! - [`store`]: object stores by URL, the local folder store, the start-up
//!   probe;
//! - [`workflow`]: durable workflows (the [`workflow::Runtime`], steps,
//!   signals, timers, cancellation);
//! - [`runtime_store`]: the durable record of workflow runs and their step
//!   receipts, in memory or in object storage;
//! - [`retention`]: terminal markers and the sweeper that clears expired runs;
//! - [`seal`]: compression and authenticated encryption of stored payloads;
//! - [`blob`]: large values, written and read as a stream of chunks;
//! - [`clock`]: the time source of the runtime and the sweeper;
//! - [`limits`]: the limits memo enforces and the defaults of the
//!   configurable ones.
//!
//! # The guide
//!
//! The repository's `README.md` has the quickstart and one workflow; its
//! `docs/` folder has the guide, whose examples are compiled and run with
//! the tests:
//!
//! - `docs/guide/memoized.md`: the key, what is committed, the attribute's
//!   options;
//! - `docs/guide/shared-cache.md`: `scope = shared`, one call paid once
//!   for every run, its time to live, and when not to use it;
//! - `docs/guide/workflows.md`: steps, replay, leases, errors, signals,
//!   timers, cancellation;
//! - `docs/guide/durability.md`: what memo promises and what it cannot,
//!   leases and fencing, idempotency keys, limits;
//! - `docs/guide/retention.md`: terminal markers and the sweeper;
//! - `docs/guide/testing.md`: your workflow in the seeded simulator;
//! - `docs/guide/stored-format.md`: paths, frames, keys, records, upgrades;
//! - `docs/guide/encryption.md`: encryption and compression of what is
//!   stored, keys and their rotation;
//! - `docs/operations.md`: stores by URL, credentials, the bucket's
//!   lifecycle rule, many workers, `memoctl`.
//!
//! # Cargo features
//!
//! None is on by default: the embedded default (a local folder, or memory)
//! needs no cloud client, and leaving them out keeps a cold build about half
//! as long, as `object_store` does.
//!
//! - `aws`, `gcp`, `azure`: the S3, Google Cloud Storage and Azure Blob
//!   backends for [`store::store_from_url`] (`s3://`, `gs://`, `az://`); a URL whose
//!   feature is off is [`Error::StoreFeatureDisabled`], naming the feature.
//! - `testing`: the `testing` module: fault-injecting and request-counting
//!   object stores and the conformance suites.

pub mod blob;
mod chunk_frame;
pub mod clock;
mod codec;
mod deletes;
mod due_index;
mod envelope;
mod error;
mod forward;
mod hour_folders;
mod key;
mod layout;
#[cfg(unix)]
mod local;
mod memo;
mod memoize;
mod meter;
mod read_limit;
pub mod retention;
mod run_id;
pub mod runtime_store;
pub mod seal;
#[cfg(feature = "sqlite")]
mod sqlite;
pub use memo::shared;
mod store_url;
pub mod workflow;
mod write_once;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use bytes::Bytes;
pub use error::{Error, ErrorKind, Result};
pub use key::content_key;
pub use memo::{EntryInfo, EntryKind, Memo, MemoStore};
pub use memo_macros::memoized;
pub use object_store;
pub use run_id::{Incarnation, RunId};

/// Where memo keeps its data: object stores chosen by URL (`file://`,
/// `memory://`, `s3://`, `gs://`, `az://`, with
/// [`store_from_url`](store::store_from_url)), the local folder store
/// ([`LocalFolder`](store::LocalFolder)), and the start-up probe
/// ([`probe_conditional_create`](store::probe_conditional_create)) that
/// checks a store refuses a second create, which memo's write-once entries
/// need. Use it to open the store your [`MemoStore`] and
/// [`ObjectStoreRuntimeStore`](crate::runtime_store::ObjectStoreRuntimeStore)
/// share; any other [`ObjectStore`](crate::object_store::ObjectStore) works
/// too. Options, credentials and emulators: the repository's
/// `docs/operations.md`.
pub mod store {
    #[cfg(unix)]
    pub use crate::local::LocalFolder;
    #[cfg(feature = "sqlite")]
    pub use crate::sqlite::{BUSY_TIMEOUT, SqliteStore};
    pub use crate::store_url::{
        CHECK_CONDITIONAL_CREATE_OPTION, FSYNC_OPTION, MAX_RETRIES_OPTION, RETRY_TIMEOUT_OPTION,
        StoreAndPrefix, probe_conditional_create, redact_store_url, store_from_url,
    };
}

/// The limits memo enforces on what it is given and what it reads, and the
/// defaults of the configurable ones.
pub mod limits {
    pub use crate::codec::MAX_NESTING_DEPTH;
    pub use crate::memo::{DEFAULT_ENTRY_CACHE_BYTES, DEFAULT_MAX_VALUE_SIZE};
    pub use crate::run_id::MAX_RUN_ID_LEN;
}

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

#[cfg(test)]
mod tests {
    /// The names the crate root exports, read from this file: the rule in
    /// ARCHITECTURE.md ("The public surface") lists exactly these. A new
    /// root export fails here until the rule, this list and the CHANGELOG
    /// say why it belongs at the root.
    #[test]
    fn public_surface_is_the_documented_one() {
        let source = include_str!("lib.rs");
        let mut root = Vec::new();
        let mut depth = 0usize;
        let mut statement = String::new();
        for line in source.lines() {
            let trimmed = line.trim();
            if depth == 0 && (trimmed.starts_with("pub use ") || !statement.is_empty()) {
                statement.push_str(trimmed);
                if trimmed.ends_with(';') {
                    let body = statement["pub use ".len()..].trim_end_matches(';');
                    let names = match body.split_once('{') {
                        Some((_, inner)) => inner.trim_end_matches('}').to_string(),
                        None => body.rsplit("::").next().unwrap_or(body).to_string(),
                    };
                    root.extend(
                        names
                            .split(',')
                            .map(|n| n.trim().to_string())
                            .filter(|n| !n.is_empty()),
                    );
                    statement.clear();
                }
            }
            if trimmed.starts_with("pub mod ") && trimmed.ends_with('{') {
                depth += 1;
            } else if depth > 0 && trimmed == "}" {
                depth -= 1;
            }
        }
        root.sort();
        let mut documented = vec![
            "Bytes",
            "EntryInfo",
            "EntryKind",
            "Error",
            "ErrorKind",
            "Incarnation",
            "Memo",
            "MemoStore",
            "Result",
            "RunId",
            "content_key",
            "memoized",
            "object_store",
            // A module, not a root item: the shared scope lives in `memo/`
            // (it is part of the memo layer) and is public as `shared`.
            "shared",
        ];
        documented.sort();
        assert_eq!(root, documented);
    }
}
