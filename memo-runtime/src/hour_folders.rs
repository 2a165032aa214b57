//! Folders split by the hour (terminal markers, the shared scope's expiry
//! markers): the hours that start before a cutoff, then each hour's objects
//! before it, listed without reading what the cutoff leaves out.
//!
//! Both folders hold `<hour>/<name>` objects whose names sort latest time
//! first, so the objects of an hour before a cutoff are those listed after
//! one offset name (`list_with_offset`, pushed down on S3, GCS and a local
//! folder).

use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};

use crate::error::{Error, Result};
use crate::layout::{self, MARKER_HOUR_MS};

/// The hour folders of `folder` that start before `cutoff_ms`, oldest
/// first: one delimiter listing. Objects directly in `folder` and folders
/// that are not hours are skipped with a warning naming `what` (the
/// folder's purpose, as in "the terminal markers folder").
pub(crate) async fn hours_before(
    store: &dyn ObjectStore,
    folder: &Path,
    cutoff_ms: u64,
    what: &str,
) -> Result<Vec<(u64, Path)>> {
    let listing = store
        .list_with_delimiter(Some(folder))
        .await
        .map_err(|e| Error::store(folder, e))?;
    for foreign in &listing.objects {
        tracing::warn!(path = %foreign.location, "skipping a foreign object in the {what} folder");
    }
    let mut hours: Vec<_> = listing
        .common_prefixes
        .into_iter()
        .filter_map(|path| match layout::parse_marker_hour(&path) {
            Some(hour) => Some((hour, path)),
            None => {
                tracing::warn!(%path, "skipping a foreign folder in the {what} folder");
                None
            }
        })
        .filter(|(hour, _)| *hour < cutoff_ms)
        .collect();
    hours.sort_unstable_by_key(|(hour, _)| *hour);
    Ok(hours)
}

/// The objects of the hour folder `hour_path` (the hour starting at `hour`)
/// that can be before `cutoff_ms`: the whole folder if the hour ends by the
/// cutoff, else those after `offset()`, the name every object of the hour
/// at or after the cutoff sorts before. The caller parses each object and
/// checks its time.
pub(crate) fn listed_before(
    store: &dyn ObjectStore,
    hour: u64,
    hour_path: Path,
    cutoff_ms: u64,
    offset: impl FnOnce() -> Path,
) -> BoxStream<'static, Result<ObjectMeta>> {
    let listing = if hour.saturating_add(MARKER_HOUR_MS) <= cutoff_ms {
        store.list(Some(&hour_path))
    } else {
        store.list_with_offset(Some(&hour_path), &offset())
    };
    listing
        .map_err(move |e| Error::store(&hour_path, e))
        .boxed()
}
