//! The due-run index's objects: one empty object per run incarnation and
//! due time, `due/<hour>/<due_ms>_<run>.<inc>` under the memo store's
//! prefix (the path is in `layout.rs`), written, listed by due time and
//! deleted here. The workflow runtime decides when entries are written
//! (`workflow/due.rs`); a worker wakes the runs they name, and a retention
//! sweep deletes the ones whose run has ended or is gone.

use futures::future;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::layout;
use crate::memo::MemoStore;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::seal::PLAIN;
use crate::write_once;

/// An entry of the due-run index: run `run_id` (its incarnation
/// `incarnation`) has something due at `due_at_ms`.
///
/// An entry is a hint, never the run's state: the run's own record says
/// whether it is still waiting. See [`Runtime::due_runs`](crate::workflow::Runtime::due_runs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DueRun {
    /// When the run is due, in ms since the Unix epoch (by the clock of the
    /// runtime that wrote the entry).
    pub due_at_ms: u64,
    /// The run.
    pub run_id: RunId,
    /// Which use of the run id.
    pub incarnation: Incarnation,
}

/// Writes `due`'s entry; writing it again is a no-op.
pub(crate) async fn write(memo: &MemoStore, due: &DueRun) -> Result<()> {
    let path = path(memo, due);
    write_once::create_once(memo.store(), &path, &[], Limit::MARKER, &PLAIN).await?;
    Ok(())
}

/// Deletes `due`'s entry; deleting an entry that is gone succeeds.
pub(crate) async fn delete(memo: &MemoStore, due: &DueRun) -> Result<()> {
    let path = path(memo, due);
    match memo.store().delete(&path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(Error::store(&path, e)),
    }
}

fn path(memo: &MemoStore, due: &DueRun) -> Path {
    memo.layout()
        .due_entry(&due.run_id, due.incarnation, due.due_at_ms)
}

/// The entries due at or before `now_ms` (every entry for `u64::MAX`),
/// hour by hour, earliest hour first.
///
/// Costs one delimiter listing of the index's hour folders (a name per hour
/// that holds entries, a page per 1,000 of them), a listing of every hour
/// that ended by `now_ms` (all its entries are due), and a listing of the
/// hour that holds `now_ms` (whole: its entries not yet due are listed and
/// skipped, at most an hour's worth). Hours after `now_ms` are never listed.
pub(crate) fn due_at(memo: &MemoStore, now_ms: u64) -> BoxStream<'static, Result<DueRun>> {
    let memo = memo.clone();
    stream::once(async move {
        let hours = due_hours(&memo, now_ms).await?;
        let entries = stream::iter(hours)
            .map(move |(hour, path)| {
                memo.store()
                    .list(Some(&path))
                    .map_err(move |e| Error::store(&path, e))
                    .try_filter_map(move |meta| {
                        let entry = parse(&meta.location, hour);
                        future::ready(Ok(entry))
                    })
            })
            .flatten()
            .try_filter(move |due| future::ready(due.due_at_ms <= now_ms));
        Ok::<_, Error>(entries)
    })
    .try_flatten()
    .boxed()
}

/// The hour folders that hold entries due by `now_ms`, earliest first.
async fn due_hours(memo: &MemoStore, now_ms: u64) -> Result<Vec<(u64, Path)>> {
    let folder = memo.layout().due_folder();
    let listing = memo
        .store()
        .list_with_delimiter(Some(&folder))
        .await
        .map_err(|e| Error::store(&folder, e))?;
    let mut hours: Vec<_> = listing
        .common_prefixes
        .into_iter()
        .filter_map(|path| layout::parse_marker_hour(&path).map(|hour| (hour, path)))
        .filter(|(hour, _)| *hour <= now_ms)
        .collect();
    hours.sort_unstable_by_key(|(hour, _)| *hour);
    Ok(hours)
}

fn parse(path: &Path, expected_hour: u64) -> Option<DueRun> {
    match layout::parse_due_entry(path) {
        Some((hour, run_id, incarnation, due_at_ms)) if hour == expected_hour => Some(DueRun {
            due_at_ms,
            run_id,
            incarnation,
        }),
        _ => {
            tracing::warn!(%path, "skipping an object that is not a due-run entry");
            None
        }
    }
}
