//! Terminal markers: one small object per run that reached a terminal state
//! (the layout is documented on [`TerminalMarker`]), read and written through
//! [`Markers`].

use futures::future;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::hour_folders;
use crate::layout;
use crate::memo::MemoStore;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::write_once;

/// The width of a marker partition (an hour folder), in milliseconds. Part of
/// the stored layout.
pub const MARKER_PARTITION_MS: u64 = layout::MARKER_HOUR_MS;

/// A record that an incarnation of a run reached a terminal state at
/// `terminal_at_ms`.
///
/// Markers are laid out so that finding the expired ones costs in proportion
/// to how many are expired, not to how many are retained.
///
/// # Layout
///
/// `<prefix>/terminals/<partition>/<inverted>_<run>.<incarnation>`, where
///
/// - `<partition>` is the start of the marker's hour (`terminal_at_ms` rounded
///   down to [`MARKER_PARTITION_MS`]), 20 zero-padded digits;
/// - `<inverted>` is `u64::MAX - terminal_at_ms`, 20 zero-padded digits, so
///   within a partition the *older* markers sort *after* the newer ones;
/// - `<run>` is the [`RunId`]'s path segment and `<incarnation>` the run's
///   [`Incarnation`], so a sweep clears exactly the incarnation its marker
///   names and never a later run of the same id.
///
/// Listing the markers expired at a cutoff reads the partition folder names (one
/// delimiter listing, a name per retained hour, not per marker), lists every
/// partition that ended before the cutoff, and lists the one partition that holds
/// the cutoff from an offset: `list_with_offset` is pushed down on S3, GCS and
/// Azure, so there only the expired markers of that partition are returned;
/// LocalFileSystem and InMemory filter that one partition. Partitions after the
/// cutoff are never listed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TerminalMarker {
    /// The run that reached a terminal state.
    pub run_id: RunId,
    /// When, in milliseconds since the Unix epoch.
    pub terminal_at_ms: u64,
    /// Which use of the run id reached it ([`Incarnation::STANDALONE`] for
    /// memos used outside a workflow).
    pub incarnation: Incarnation,
}

/// One page of terminal markers ([`Markers::expired_page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MarkerPage {
    /// The page's markers, oldest first (by time, then run id and
    /// incarnation).
    pub markers: Vec<TerminalMarker>,
    /// Where the next page starts (pass it as `after`); `None` on the last
    /// page.
    pub next: Option<TerminalMarker>,
}

/// The terminal markers of one memo store: where they are written, listed
/// and deleted. Get one with [`MemoStore::markers`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct Markers {
    store: MemoStore,
    /// `terminals`, or `rechecks` for the markers of incarnations a sweep
    /// deleted, which a later pass clears once more (the sweeper's
    /// `recheck` module).
    kind: &'static str,
}

impl MemoStore {
    /// This store's terminal markers, for retention: see [`Markers`].
    pub fn markers(&self) -> Markers {
        Markers {
            store: self.clone(),
            kind: layout::TERMINALS,
        }
    }

    /// This store's recheck markers: the incarnations a sweep deleted,
    /// each dated when a later pass clears it once more. Same layout as
    /// terminal markers, under `rechecks/`.
    pub(crate) fn recheck_markers(&self) -> Markers {
        Markers {
            store: self.clone(),
            kind: layout::RECHECKS,
        }
    }
}

impl Markers {
    /// Records that `run_id`'s standalone memos ([`MemoStore::new_memo`])
    /// reached a terminal state at `terminal_at_ms`. Writing the same marker
    /// again is a no-op. Workflow runs are marked with their incarnation
    /// through [`write`](Self::write).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the write fails.
    pub async fn write_standalone(&self, run_id: &RunId, terminal_at_ms: u64) -> Result<()> {
        self.write(&TerminalMarker {
            run_id: run_id.clone(),
            terminal_at_ms,
            incarnation: Incarnation::STANDALONE,
        })
        .await
    }

    /// Writes `marker`. Writing the same marker again is a no-op.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the write fails.
    pub async fn write(&self, marker: &TerminalMarker) -> Result<()> {
        let path = self.marker_path(marker);
        write_once::create_marker(self.store.store(), &path, &[], Limit::MARKER).await?;
        Ok(())
    }

    /// Every terminal marker, oldest first. Objects in the markers folder
    /// that are not markers are skipped with a warning.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the listing fails.
    pub async fn list(&self) -> Result<Vec<TerminalMarker>> {
        let folder = self.store.layout().markers_folder(self.kind);
        let metas: Vec<_> = self
            .store
            .store()
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let mut markers: Vec<_> = metas
            .iter()
            .filter_map(|meta| parse_marker(&meta.location, None))
            .collect();
        markers.sort_by_key(|m| m.terminal_at_ms);
        Ok(markers)
    }

    /// The markers of runs that reached a terminal state strictly before
    /// `cutoff_ms`, oldest first. A marker at exactly `cutoff_ms` is kept.
    ///
    /// The cost is one delimiter listing of the partition folders plus listings
    /// of the expired markers (see [`TerminalMarker`]). The whole answer is
    /// held in memory; [`expired`](Self::expired)
    /// streams the same markers instead.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if a listing fails.
    pub async fn list_expired(&self, cutoff_ms: u64) -> Result<Vec<TerminalMarker>> {
        let mut markers: Vec<_> = self.expired(cutoff_ms).try_collect().await?;
        markers.sort_by_key(|m| m.terminal_at_ms);
        Ok(markers)
    }

    /// Streams the markers of runs that reached a terminal state strictly
    /// before `cutoff_ms`: hour partition by hour partition, oldest partition first,
    /// and within a partition in the backend's listing order. A marker at
    /// exactly `cutoff_ms` is not yielded.
    ///
    /// The cost is that of
    /// [`list_expired`](Self::list_expired),
    /// but memory holds one partition folder name per stored hour plus the
    /// backend's listing page, not every expired marker, and a partition is
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
    /// store.markers().write_standalone(&RunId::new("old")?, 1_000).await?;
    /// store.markers().write_standalone(&RunId::new("new")?, 9_000).await?;
    /// let mut expired = store.markers().expired(5_000);
    /// while let Some(marker) = expired.try_next().await? {
    ///     assert_eq!(marker.run_id.as_str(), "old");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn expired(&self, cutoff_ms: u64) -> BoxStream<'static, Result<TerminalMarker>> {
        let this = self.clone();
        stream::once(async move {
            let partitions = this.expired_partitions(cutoff_ms).await?;
            let markers = stream::iter(partitions)
                .map(move |(partition, path)| this.expired_in_partition(partition, path, cutoff_ms))
                .flatten();
            Ok::<_, Error>(markers)
        })
        .try_flatten()
        .boxed()
    }

    /// One page of the markers [`expired`](Self::expired) at `cutoff_ms`,
    /// oldest first (by time, then run id and incarnation): at most `limit`
    /// (at least one) of those after `after` (the last marker of the page
    /// before, or any marker: the page starts where it would sort).
    ///
    /// The cost is one delimiter listing of the partition folders, then a
    /// listing of each partition from `after`'s on, until the page and one
    /// marker past it are found: partitions before the cursor's are never
    /// listed, so a page costs what it shows plus at most two partitions'
    /// markers. A partition's markers sort newest first, so each partition
    /// listed is read whole: memory holds one partition's markers (an
    /// hour's) and the page.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if a listing fails.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    /// for (id, at) in [("a", 1_000), ("b", 2_000), ("c", 3_000)] {
    ///     store.markers().write_standalone(&RunId::new(id)?, at).await?;
    /// }
    /// let first = store.markers().expired_page(5_000, None, 2).await?;
    /// assert_eq!(first.markers.len(), 2);
    /// let rest = store.markers().expired_page(5_000, first.next.as_ref(), 2).await?;
    /// assert_eq!(rest.markers[0].run_id.as_str(), "c");
    /// assert_eq!(rest.next, None);
    /// # Ok(()) }
    /// ```
    pub async fn expired_page(
        &self,
        cutoff_ms: u64,
        after: Option<&TerminalMarker>,
        limit: usize,
    ) -> Result<MarkerPage> {
        let limit = limit.max(1);
        let order = |m: &TerminalMarker| (m.terminal_at_ms, m.run_id.clone(), m.incarnation);
        let after = after.map(order);
        let from_partition = after
            .as_ref()
            .map(|(at, _, _)| at - at % MARKER_PARTITION_MS);
        let mut markers: Vec<TerminalMarker> = Vec::new();
        for (partition, path) in self.expired_partitions(cutoff_ms).await? {
            if from_partition.is_some_and(|from| partition < from) {
                continue;
            }
            let mut found: Vec<TerminalMarker> = self
                .expired_in_partition(partition, path, cutoff_ms)
                .try_filter(|m| future::ready(after.as_ref().is_none_or(|a| order(m) > *a)))
                .try_collect()
                .await?;
            found.sort_by_key(order);
            markers.extend(found);
            if markers.len() > limit {
                break;
            }
        }
        let next = if markers.len() > limit {
            markers.truncate(limit);
            markers.last().cloned()
        } else {
            None
        };
        Ok(MarkerPage { markers, next })
    }

    /// The partition folders that hold markers before `cutoff_ms`, oldest first:
    /// one delimiter listing.
    async fn expired_partitions(&self, cutoff_ms: u64) -> Result<Vec<(u64, Path)>> {
        let folder = self.store.layout().markers_folder(self.kind);
        let what = if self.kind == layout::RECHECKS {
            "recheck markers"
        } else {
            "terminal markers"
        };
        hour_folders::hours_before(self.store.store(), &folder, cutoff_ms, what).await
    }

    /// The markers before `cutoff_ms` in the partition starting at `partition`.
    fn expired_in_partition(
        &self,
        partition: u64,
        partition_path: Path,
        cutoff_ms: u64,
    ) -> BoxStream<'static, Result<TerminalMarker>> {
        let (layout, kind) = (self.store.layout(), self.kind);
        hour_folders::listed_before(
            self.store.store(),
            partition,
            partition_path,
            cutoff_ms,
            move || layout.marker_offset(kind, partition, cutoff_ms),
        )
        .try_filter_map(move |meta| {
            let marker = parse_marker(&meta.location, Some(partition))
                .filter(|m| m.terminal_at_ms < cutoff_ms);
            future::ready(Ok(marker))
        })
        .boxed()
    }

    /// Whether `marker` is stored (one `HEAD`).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the request fails.
    pub(crate) async fn holds(&self, marker: &TerminalMarker) -> Result<bool> {
        let path = self.marker_path(marker);
        match self.store.store().head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(Error::store(&path, e)),
        }
    }

    /// Deletes `marker`. Deleting a marker that is already gone succeeds.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the delete fails.
    pub async fn delete(&self, marker: &TerminalMarker) -> Result<()> {
        let path = self.marker_path(marker);
        match self.store.store().delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::store(&path, e)),
        }
    }

    /// Deletes `markers` in one `delete_stream` (on S3 one request per
    /// 1,000): for each, in their order, `Ok` if it is gone (a marker
    /// already gone counts), or why it could not be deleted. A sweep
    /// deletes a page's markers so, once each of their runs is cleared.
    pub(crate) async fn delete_all<'a>(
        &self,
        markers: impl IntoIterator<Item = &'a TerminalMarker>,
    ) -> Vec<Result<()>> {
        let paths = markers.into_iter().map(|m| self.marker_path(m)).collect();
        self.store
            .delete_each(paths)
            .await
            .into_iter()
            .map(|deleted| deleted.map(|_| ()))
            .collect()
    }

    fn marker_path(&self, marker: &TerminalMarker) -> Path {
        self.store.layout().marker(
            self.kind,
            &marker.run_id,
            marker.incarnation,
            marker.terminal_at_ms,
        )
    }
}

/// Parses a marker path; `None` (with a warning) for anything else,
/// including a marker found in another hour folder than `expected_hour`.
fn parse_marker(path: &Path, expected_hour: Option<u64>) -> Option<TerminalMarker> {
    match layout::parse_marker(path) {
        Some((hour, run_id, incarnation, terminal_at_ms))
            if expected_hour.is_none_or(|h| h == hour) =>
        {
            Some(TerminalMarker {
                run_id,
                terminal_at_ms,
                incarnation,
            })
        }
        _ => {
            tracing::warn!(%path, "skipping an object that is not a terminal marker");
            None
        }
    }
}
