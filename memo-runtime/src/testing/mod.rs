//! Test support for code that runs on an [`ObjectStore`] or a
//! [`RuntimeStore`](crate::runtime_store::RuntimeStore): memo's own tests and yours.
//!
//! Object-store wrappers (`testing/stores/`):
//!
//! - [`FaultInjectingStore`] makes chosen requests fail, either *before* they
//!   reach the wrapped store (nothing changes) or *after* it applied them (a
//!   lost acknowledgement), by deterministic script or by seeded chance.
//! - [`CountingStore`] counts requests by kind, so a test can pin what an
//!   operation costs (how many lists, how many objects listed).
//! - [`CaseFoldingStore`] folds names to lower case, as a case-insensitive
//!   folder (macOS, Windows) does.
//! - [`NameLimitedStore`] refuses names longer than a backend stores
//!   (255-byte file names, 1,024-byte keys).
//! - [`IgnoresConditionalCreates`] overwrites where a create should be
//!   refused, as some S3-compatible servers do.
//! - [`HugeObjects`] makes chosen objects huge (say 1 TiB) without storing
//!   or allocating their bytes, as another writer's sparse file or large
//!   object is.
//!
//! Every wrapper forwards every [`ObjectStore`] method to the wrapped store,
//! the defaulted ones included, so it keeps its behaviour (a pushed-down
//! `list_with_offset`, a batched `delete_stream`). Each is controlled
//! through `&self`: keep an `Arc` of the wrapper in the test and hand a clone,
//! as an `Arc<dyn ObjectStore>`, to the code under test. A wrapper of your
//! own forwards the same way with [`forward_object_store!`]: it writes the
//! methods it changes and names the ones that pass through.
//!
//! Conformance suites (`testing/suites/`), each run once per backend through
//! one entry point:
//!
//! - [`memo_store::run_suite`] for a [`MemoStore`](crate::MemoStore) over any
//!   object store;
//! - [`runtime_store::run_suite`] for any [`RuntimeStore`](crate::runtime_store::RuntimeStore),
//!   and [`runtime_store::run_object_store_suite`] for an
//!   [`ObjectStoreRuntimeStore`](crate::runtime_store::ObjectStoreRuntimeStore) over a given
//!   object store (the same checks plus corrupt records, unfinished
//!   deletions and injected faults).
//!
//! The module is compiled for memo's own tests and, for yours, with the
//! `testing` feature:
//!
//! ```toml
//! [dev-dependencies]
//! memo-runtime = { version = "0.1", features = ["testing"] }
//! ```
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStore, ObjectStoreExt};
//! use memo_runtime::testing::{CountingStore, FaultInjectingStore, FaultRule, RequestKind};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let counting = Arc::new(CountingStore::new(InMemory::new()));
//! let faults = Arc::new(FaultInjectingStore::new(Arc::clone(&counting)));
//! let store: Arc<dyn ObjectStore> = faults.clone();
//!
//! faults.inject(FaultRule::fail_before(RequestKind::Put).times(1));
//! assert!(store.put(&Path::from("a"), "1".into()).await.is_err());
//! assert!(store.put(&Path::from("a"), "1".into()).await.is_ok());
//! // The refused put never reached the inner store.
//! assert_eq!(counting.counts().puts, 1);
//! # }
//! ```
//!
//! [`ObjectStore`]: object_store::ObjectStore

mod frames;
mod legacy;
pub mod sim;
mod stores;
mod suites;

pub use legacy::{read_legacy_step_output, write_legacy_step_output};
#[cfg(test)]
pub(crate) use stores::exercise_every_method;
pub use stores::{
    CaseFoldingStore, CountingStore, Fault, FaultInjectingStore, FaultRule, HugeObjects,
    IgnoresConditionalCreates, InjectedFault, LOCAL_NAME_BYTES, NameLimitedStore, RequestCounts,
    RequestKind, S3_KEY_BYTES,
};
pub use suites::{memo_store, runtime_store};

/// `store` behind the wrapper that every [`MemoStore`](crate::MemoStore)
/// and [`ObjectStoreRuntimeStore`](crate::runtime_store::ObjectStoreRuntimeStore)
/// puts around the store it is given: it counts the requests of a workflow
/// attempt into the attempt's cost ledger
/// ([`AttemptCost`](crate::runtime_store::AttemptCost)), and outside an
/// attempt only forwards. For measuring what it costs (`cargo bench -p
/// memo-runtime --bench memo -- metered`).
pub fn metered(
    store: std::sync::Arc<dyn object_store::ObjectStore>,
) -> std::sync::Arc<dyn object_store::ObjectStore> {
    crate::meter::Metered::new(store)
}

#[doc(inline)]
pub use crate::__forward_object_store as forward_object_store;

/// The payload of the stored object `framed`, read at `path` by a store
/// sealed with `seal`: for tests that inspect or forge what memo stored.
///
/// A frame sealed with a run's data key (format version 3) names only the
/// key's incarnation; open it with [`open_frame_with_keys`], which learns
/// the run from the path and fetches the key.
///
/// # Errors
///
/// [`Error::Corrupt`](crate::Error::Corrupt) naming `path`, as a read by
/// such a store would fail.
pub fn open_frame(
    path: &object_store::path::Path,
    framed: bytes::Bytes,
    seal: &crate::seal::Seal,
) -> crate::Result<bytes::Bytes> {
    crate::envelope::open(path, framed, seal, u64::MAX)
}

/// [`open_frame`] for an object of the store under `prefix`, frames sealed
/// with a run's data key included: the key of the run (or shared
/// namespace) `path` lies in is fetched from `seal`'s key store and
/// unwrapped with its key-encryption key
/// ([`Seal::with_data_keys`](crate::seal::Seal::with_data_keys)).
///
/// # Errors
///
/// [`Error::Corrupt`](crate::Error::Corrupt) naming `path`, as a read by
/// such a store would fail: among others, a data-key frame at a path of no
/// run, or whose run was forgotten; whatever fetching the key fails with.
pub async fn open_frame_with_keys(
    prefix: &str,
    path: &object_store::path::Path,
    framed: bytes::Bytes,
    seal: &crate::seal::Seal,
) -> crate::Result<bytes::Bytes> {
    frames::open_with_keys(prefix, path, framed, seal).await
}
