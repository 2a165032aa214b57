//! Object-store wrappers for testing code that runs on an [`ObjectStore`]:
//! memo's own tests and yours.
//!
//! - [`FaultInjectingStore`] makes chosen requests fail, either *before* they
//!   reach the wrapped store (nothing changes) or *after* it applied them (a
//!   lost acknowledgement), by deterministic script or by seeded chance.
//! - [`CountingStore`] counts requests by kind, so a test can pin what an
//!   operation costs (how many lists, how many objects listed).
//! - [`CaseFoldingStore`] folds names to lower case, as a case-insensitive
//!   folder (macOS, Windows) does.
//! - [`IgnoresConditionalCreates`] overwrites where a create should be
//!   refused, as some S3-compatible servers do.
//! - [`runtime_store`] is the conformance suite every
//!   [`RuntimeStore`](crate::RuntimeStore) backend passes.
//!
//! Both forward every [`ObjectStore`] method to the wrapped store, the
//! defaulted ones included, so they keep its behaviour (a pushed-down
//! `list_with_offset`, a batched `delete_stream`). Both are controlled
//! through `&self`: keep an `Arc` of the wrapper in the test and hand a clone,
//! as an `Arc<dyn ObjectStore>`, to the code under test.
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

mod case_folding;
mod counting;
mod faults;
pub mod memo_store;
mod overwriting;
pub mod runtime_store;
pub mod sim;

pub use case_folding::CaseFoldingStore;
pub use counting::{CountingStore, RequestCounts};
pub use faults::{Fault, FaultInjectingStore, FaultRule, InjectedFault, RequestKind};
pub use overwriting::IgnoresConditionalCreates;

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, ignoring poisoning: the guarded state is plain counters and
/// rules, consistent after any panic, and a test that panicked elsewhere must
/// not turn every later request into a second panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Calls every [`ObjectStore`](object_store::ObjectStore) method once on an
/// empty `store`, checks each answer, and returns the counts a
/// [`CountingStore`] beneath `store` must have seen.
#[cfg(test)]
async fn exercise_every_method(store: &dyn object_store::ObjectStore) -> RequestCounts {
    use std::collections::BTreeSet;

    use futures::{StreamExt, TryStreamExt};
    use object_store::path::Path;
    use object_store::{
        CopyOptions, GetOptions, PutMode, PutMultipartOptions, PutOptions, RenameOptions,
    };

    let names = |objects: Vec<object_store::ObjectMeta>| -> BTreeSet<String> {
        objects
            .into_iter()
            .map(|o| o.location.to_string())
            .collect()
    };
    let (a1, a2, a3) = (Path::from("a/1"), Path::from("a/2"), Path::from("a/3"));

    store
        .put_opts(&a1, "one".into(), PutOptions::default())
        .await
        .unwrap();
    store
        .put_opts(&a2, "two".into(), PutMode::Create.into())
        .await
        .unwrap();
    let mut upload = store
        .put_multipart_opts(&a3, PutMultipartOptions::default())
        .await
        .unwrap();
    upload.put_part("three".into()).await.unwrap();
    upload.complete().await.unwrap();

    let got = store.get_opts(&a1, GetOptions::default()).await.unwrap();
    assert_eq!(got.bytes().await.unwrap().as_ref(), b"one");
    let head = store
        .get_opts(&a1, GetOptions::new().with_head(true))
        .await
        .unwrap();
    assert_eq!(head.meta.size, 3);
    let ranges = store.get_ranges(&a1, &[0..1, 1..3]).await.unwrap();
    assert_eq!(ranges, [&b"o"[..], &b"ne"[..]]);

    store
        .copy_opts(&a1, &Path::from("b/1"), CopyOptions::default())
        .await
        .unwrap();
    store
        .rename_opts(&a2, &Path::from("b/2"), RenameOptions::default())
        .await
        .unwrap();

    let listed = store
        .list(Some(&Path::from("a")))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(names(listed), BTreeSet::from(["a/1".into(), "a/3".into()]));
    let after_a1 = store.list_with_offset(Some(&Path::from("a")), &a1);
    assert_eq!(
        names(after_a1.try_collect().await.unwrap()),
        BTreeSet::from(["a/3".into()])
    );
    let top = store.list_with_delimiter(None).await.unwrap();
    assert_eq!((top.objects.len(), top.common_prefixes.len()), (0, 2));

    let doomed = futures::stream::iter([Ok(a1.clone()), Ok(Path::from("b/1"))]).boxed();
    let deleted: Vec<Path> = store.delete_stream(doomed).try_collect().await.unwrap();
    assert_eq!(deleted, [a1, Path::from("b/1")]);

    RequestCounts {
        puts: 1,
        creates: 1,
        multipart_uploads: 1,
        gets: 1,
        get_ranges: 1,
        heads: 1,
        delete_streams: 1,
        delete_paths: 2,
        lists: 1,
        lists_with_offset: 1,
        lists_with_delimiter: 1,
        objects_listed: 3,
        prefixes_listed: 2,
        copies: 1,
        renames: 1,
    }
}
