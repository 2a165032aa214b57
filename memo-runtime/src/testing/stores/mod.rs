//! The object-store wrappers: each forwards every [`ObjectStore`] method to
//! the store it wraps and changes one thing about it (see the
//! [module documentation](super)).
//!
//! [`ObjectStore`]: object_store::ObjectStore

mod case_folding;
mod counting;
mod faults;
mod huge;
mod overwriting;

pub use case_folding::CaseFoldingStore;
pub use counting::{CountingStore, RequestCounts};
pub use faults::{Fault, FaultInjectingStore, FaultRule, InjectedFault, RequestKind};
pub use huge::HugeObjects;
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
pub(crate) async fn exercise_every_method(store: &dyn object_store::ObjectStore) -> RequestCounts {
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
        // "one" and "two"; a multipart upload's parts are not counted.
        bytes_put: 6,
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
