//! Deleting many objects together, with an answer for each.

use futures::stream::{self, StreamExt};
use object_store::ObjectStore;
use object_store::path::Path;

use crate::error::{Error, Result};

/// Deletes `paths` in one `delete_stream` (on S3 a `DeleteObjects` request
/// per 1,000, on Azure a batch per 256, elsewhere a delete per object): for
/// each, in their order (as `delete_stream` yields them), whether it was
/// there to delete, or why it could not be deleted. A store that yields
/// fewer results than paths leaves the rest failed.
pub(crate) async fn delete_each(store: &dyn ObjectStore, paths: Vec<Path>) -> Vec<Result<bool>> {
    if paths.is_empty() {
        return Vec::new();
    }
    let asked = paths.clone();
    let results: Vec<object_store::Result<Path>> = store
        .delete_stream(stream::iter(paths.into_iter().map(Ok)).boxed())
        .collect()
        .await;
    let mut results = results.into_iter();
    asked
        .iter()
        .map(|path| match results.next() {
            Some(Ok(_)) => Ok(true),
            Some(Err(object_store::Error::NotFound { .. })) => Ok(false),
            Some(Err(e)) => Err(Error::store(path, e)),
            None => Err(Error::store(
                path,
                object_store::Error::Generic {
                    store: "delete_stream",
                    source: "no result for this path".into(),
                },
            )),
        })
        .collect()
}
