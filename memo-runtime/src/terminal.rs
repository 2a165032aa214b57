//! Terminal markers: one small object per run that reached a terminal state
//! (the layout is documented on [`TerminalMarker`]).

use futures::future;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::memo::MemoStore;
use crate::run_id::RunId;
use crate::write_once;

/// The width of a marker bucket: one hour, in milliseconds. Part of the
/// stored layout.
pub const MARKER_BUCKET_MS: u64 = 60 * 60 * 1000;

const TERMINALS: &str = "terminals";

/// A record that a run reached a terminal state at `terminal_at_ms`.
///
/// Markers are laid out so that finding the expired ones costs in proportion
/// to how many are expired, not to how many are retained.
///
/// # Layout
///
/// `<prefix>/terminals/<bucket>/<inverted>_<run>`, where
///
/// - `<bucket>` is the start of the marker's hour (`terminal_at_ms` rounded
///   down to [`MARKER_BUCKET_MS`]), 20 zero-padded digits;
/// - `<inverted>` is `u64::MAX - terminal_at_ms`, 20 zero-padded digits, so
///   within a bucket the *older* markers sort *after* the newer ones;
/// - `<run>` is the [`RunId`].
///
/// Listing the markers expired at a cutoff reads the bucket folder names (one
/// delimiter listing, a name per retained hour, not per marker), lists every
/// bucket that ended before the cutoff, and lists the one bucket that holds
/// the cutoff from an offset: `list_with_offset` is pushed down on S3, GCS and
/// Azure, so there only the expired markers of that bucket are returned;
/// LocalFileSystem and InMemory filter that one bucket. Buckets after the
/// cutoff are never listed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TerminalMarker {
    /// The run that reached a terminal state.
    pub run_id: RunId,
    /// When, in milliseconds since the Unix epoch.
    pub terminal_at_ms: u64,
}

impl MemoStore {
    /// Records that `run_id` reached a terminal state at `terminal_at_ms`.
    /// Writing the same marker again is a no-op.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the write fails.
    pub async fn write_terminal_marker(&self, run_id: &RunId, terminal_at_ms: u64) -> Result<()> {
        let path = self.marker_path(run_id, terminal_at_ms);
        write_once::create_once(self.store(), &path, &[]).await?;
        Ok(())
    }

    /// Every terminal marker, oldest first. Objects in the markers folder
    /// that are not markers are skipped with a warning.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the listing fails.
    pub async fn list_terminal_markers(&self) -> Result<Vec<TerminalMarker>> {
        let folder = self.terminals_folder();
        let metas: Vec<_> = self
            .store()
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let mut markers: Vec<_> = metas
            .iter()
            .filter_map(|meta| self.parse_marker(&meta.location, None))
            .collect();
        markers.sort_by_key(|m| m.terminal_at_ms);
        Ok(markers)
    }

    /// The markers of runs that reached a terminal state strictly before
    /// `cutoff_ms`, oldest first. A marker at exactly `cutoff_ms` is kept.
    ///
    /// The cost is one delimiter listing of the bucket folders plus listings
    /// of the expired markers (see [`TerminalMarker`]). The whole answer is
    /// held in memory; [`expired_terminal_markers`](Self::expired_terminal_markers)
    /// streams the same markers instead.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if a listing fails.
    pub async fn list_expired_terminal_markers(
        &self,
        cutoff_ms: u64,
    ) -> Result<Vec<TerminalMarker>> {
        let mut markers: Vec<_> = self
            .expired_terminal_markers(cutoff_ms)
            .try_collect()
            .await?;
        markers.sort_by_key(|m| m.terminal_at_ms);
        Ok(markers)
    }

    /// Streams the markers of runs that reached a terminal state strictly
    /// before `cutoff_ms`: hour bucket by hour bucket, oldest bucket first,
    /// and within a bucket in the backend's listing order. A marker at
    /// exactly `cutoff_ms` is not yielded.
    ///
    /// The cost is that of
    /// [`list_expired_terminal_markers`](Self::list_expired_terminal_markers),
    /// but memory holds one bucket folder name per stored hour plus the
    /// backend's listing page, not every expired marker, and a bucket is
    /// listed only when the stream reaches it. Deleting markers already
    /// yielded while the stream runs is safe.
    ///
    /// # Errors
    ///
    /// The stream yields [`Error::Store`] if a listing fails.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use futures::TryStreamExt;
    /// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    /// store.write_terminal_marker(&RunId::new("old")?, 1_000).await?;
    /// store.write_terminal_marker(&RunId::new("new")?, 9_000).await?;
    /// let mut expired = store.expired_terminal_markers(5_000);
    /// while let Some(marker) = expired.try_next().await? {
    ///     assert_eq!(marker.run_id.as_str(), "old");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn expired_terminal_markers(
        &self,
        cutoff_ms: u64,
    ) -> BoxStream<'static, Result<TerminalMarker>> {
        let this = self.clone();
        stream::once(async move {
            let buckets = this.expired_buckets(cutoff_ms).await?;
            let markers = stream::iter(buckets)
                .map(move |(bucket, path)| this.expired_in_bucket(bucket, path, cutoff_ms))
                .flatten();
            Ok::<_, Error>(markers)
        })
        .try_flatten()
        .boxed()
    }

    /// The bucket folders that hold markers before `cutoff_ms`, oldest first:
    /// one delimiter listing.
    async fn expired_buckets(&self, cutoff_ms: u64) -> Result<Vec<(u64, Path)>> {
        let folder = self.terminals_folder();
        let listing = self
            .store()
            .list_with_delimiter(Some(&folder))
            .await
            .map_err(|e| Error::store(&folder, e))?;
        for foreign in &listing.objects {
            tracing::warn!(path = %foreign.location, "skipping a foreign object in the terminal markers folder");
        }
        let mut buckets: Vec<_> = listing
            .common_prefixes
            .into_iter()
            .filter_map(|path| match parse_bucket(&path) {
                Some(bucket) => Some((bucket, path)),
                None => {
                    tracing::warn!(%path, "skipping a foreign folder in the terminal markers folder");
                    None
                }
            })
            .filter(|(bucket, _)| *bucket < cutoff_ms)
            .collect();
        buckets.sort_unstable_by_key(|(bucket, _)| *bucket);
        Ok(buckets)
    }

    /// The markers before `cutoff_ms` in the bucket starting at `bucket`.
    fn expired_in_bucket(
        &self,
        bucket: u64,
        bucket_path: Path,
        cutoff_ms: u64,
    ) -> BoxStream<'static, Result<TerminalMarker>> {
        let listing = if bucket.saturating_add(MARKER_BUCKET_MS) <= cutoff_ms {
            self.store().list(Some(&bucket_path))
        } else {
            // Markers at or after the cutoff sort before this offset (`z` sorts
            // after the `_` that follows the digits; `~` would be escaped).
            let offset = bucket_path
                .clone()
                .join(format!("{:020}z", u64::MAX - cutoff_ms));
            self.store().list_with_offset(Some(&bucket_path), &offset)
        };
        let this = self.clone();
        listing
            .map_err(move |e| Error::store(&bucket_path, e))
            .try_filter_map(move |meta| {
                let marker = this
                    .parse_marker(&meta.location, Some(bucket))
                    .filter(|m| m.terminal_at_ms < cutoff_ms);
                future::ready(Ok(marker))
            })
            .boxed()
    }

    /// Deletes `marker`. Deleting a marker that is already gone succeeds.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the delete fails.
    pub async fn delete_terminal_marker(&self, marker: &TerminalMarker) -> Result<()> {
        let path = self.marker_path(&marker.run_id, marker.terminal_at_ms);
        match self.store().delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::store(&path, e)),
        }
    }

    fn terminals_folder(&self) -> Path {
        self.prefix().clone().join(TERMINALS)
    }

    fn marker_path(&self, run_id: &RunId, terminal_at_ms: u64) -> Path {
        let bucket = terminal_at_ms - terminal_at_ms % MARKER_BUCKET_MS;
        self.terminals_folder()
            .join(format!("{bucket:020}"))
            .join(format!("{:020}_{run_id}", u64::MAX - terminal_at_ms))
    }

    /// Parses a marker path; `None` (with a warning) for anything else.
    fn parse_marker(&self, path: &Path, expected_bucket: Option<u64>) -> Option<TerminalMarker> {
        let parsed = parse_marker_parts(path);
        match parsed {
            Some((bucket, marker))
                if expected_bucket.is_none_or(|b| b == bucket)
                    && self.marker_path(&marker.run_id, marker.terminal_at_ms) == *path =>
            {
                Some(marker)
            }
            _ => {
                tracing::warn!(%path, "skipping an object that is not a terminal marker");
                None
            }
        }
    }
}

fn parse_bucket(folder: &Path) -> Option<u64> {
    let name = folder.filename()?;
    let start = parse_digits(name)?;
    (start % MARKER_BUCKET_MS == 0).then_some(start)
}

fn parse_marker_parts(path: &Path) -> Option<(u64, TerminalMarker)> {
    let bucket = parse_bucket(&path.parent()?)?;
    let name = path.filename()?;
    let (inverted, run) = name.split_at_checked(20)?;
    let run = run.strip_prefix('_')?;
    let terminal_at_ms = u64::MAX - parse_digits(inverted)?;
    let run_id = RunId::new(run).ok()?;
    Some((
        bucket,
        TerminalMarker {
            run_id,
            terminal_at_ms,
        },
    ))
}

fn parse_digits(s: &str) -> Option<u64> {
    if s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}
