//! The due-run index's objects: one empty object per run incarnation and
//! due time, `due/<hour>/<due_ms>_<run>.<inc>` (or one of a writer's own,
//! `due/<hour>/<due_ms>-<tag>/<run>.<inc>`) under the memo store's
//! prefix (the path is in `layout.rs`), written, listed by due time and
//! deleted here. The workflow runtime decides when entries are written
//! (`workflow/due.rs`); a worker wakes the runs they name, and a retention
//! sweep deletes the ones whose run has ended or is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::layout;
use crate::memo::MemoStore;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::RunRecord;
use crate::write_once;

/// An entry of the due-run index: run `run_id` (its incarnation
/// `incarnation`) has something due at `due_at_ms`.
///
/// An entry is a hint, never the run's state: the run's own record says
/// whether it is still waiting. See [`Runtime::due_runs`](crate::workflow::Runtime::due_runs).
///
/// A run may have several entries of one due time: a signal's wake-up is
/// an object of its own, which no other writer's entry shares (the
/// stored-format guide, *Due-run entries of a writer's own*, says why).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DueRun {
    /// When the run is due, in ms since the Unix epoch (by the clock of the
    /// runtime that wrote the entry).
    pub due_at_ms: u64,
    /// The run.
    pub run_id: RunId,
    /// Which use of the run id.
    pub incarnation: Incarnation,
    /// The tag of an entry its writer must be the only one to hold, drawn
    /// by that writer (or derived from the tag of the entry a worker moved
    /// to this one: see [`DueRun::moved_to`]); `None` for an entry any
    /// writer of the same run and due time shares (writing it again is a
    /// no-op).
    pub(crate) tag: Option<u64>,
}

impl DueRun {
    /// The entry of `incarnation` due at `due_at_ms` that any writer of
    /// that run and time shares.
    pub(crate) fn new(due_at_ms: u64, run_id: RunId, incarnation: Incarnation) -> DueRun {
        DueRun {
            due_at_ms,
            run_id,
            incarnation,
            tag: None,
        }
    }

    /// An entry of `incarnation` due at `due_at_ms` that is its writer's
    /// alone: named by a tag drawn now, so no one else's write or delete of
    /// an entry of the same run and time touches it. An entry whose loss
    /// would leave a run asleep is written so; a shared name is not enough
    /// for it: a worker that woke an entry of that name (it listed it)
    /// deletes it once it drove the run, and an entry written again under
    /// that name meanwhile (create-once: the write finds it there and
    /// succeeds) goes with it.
    pub(crate) fn tagged(due_at_ms: u64, run_id: RunId, incarnation: Incarnation) -> DueRun {
        DueRun {
            tag: Some(crate::run_id::unique_token()),
            ..DueRun::new(due_at_ms, run_id, incarnation)
        }
    }

    /// This entry's wake-up, due at `due_at_ms` instead: tagged again if
    /// this one is, else a shared entry. The new tag is derived from this
    /// one's and the new due time, so the workers that woke this entry at
    /// once and each move it write one entry, not one each, and no other
    /// writer's entry has its name (a drawn tag equals it by a chance of
    /// one in 2^64): whoever deletes it once woken did what each mover
    /// wanted done.
    pub(crate) fn moved_to(&self, due_at_ms: u64) -> DueRun {
        DueRun {
            tag: self.tag.map(|tag| moved_tag(tag, due_at_ms)),
            ..DueRun::new(due_at_ms, self.run_id.clone(), self.incarnation)
        }
    }
}

/// The tag of an entry tagged `tag` moved to `due_at_ms`: a mix of both
/// (splitmix64's finalizer), stable across processes and releases.
fn moved_tag(tag: u64, due_at_ms: u64) -> u64 {
    let mut z = tag ^ due_at_ms.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Writes `due`'s entry; writing it again is a no-op.
pub(crate) async fn write(memo: &MemoStore, due: &DueRun) -> Result<()> {
    let path = path(memo, due);
    write_once::create_marker(memo.store(), &path, &[], Limit::MARKER).await?;
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

/// Deletes the entries of `dues` in one [`ObjectStore::delete_stream`]
/// (batched on S3, Azure and a SQLite file, several at once on a local
/// folder): for each, in their order, `Ok` if it is gone (an entry already
/// gone counts), or why it could not be deleted.
///
/// [`ObjectStore::delete_stream`]: object_store::ObjectStore::delete_stream
pub(crate) async fn delete_all(memo: &MemoStore, dues: &[DueRun]) -> Vec<Result<()>> {
    let paths = dues.iter().map(|due| path(memo, due)).collect();
    memo.delete_each(paths)
        .await
        .into_iter()
        .map(|deleted| deleted.map(|_| ()))
        .collect()
}

fn path(memo: &MemoStore, due: &DueRun) -> Path {
    memo.layout()
        .due_entry(&due.run_id, due.incarnation, due.due_at_ms, due.tag)
}

/// The entries due at or before `now_ms` (every entry for `u64::MAX`), in
/// the order of their keys (due time first), on any store: see [`due_after`]
/// with no cursor and `ordered` false.
pub(crate) fn due_at(memo: &MemoStore, now_ms: u64) -> BoxStream<'static, Result<DueRun>> {
    due_after(memo, now_ms, None, false, &Later::new())
        .map_ok(|(_, due)| due)
        .boxed()
}

/// The entries due at or before `now_ms` whose key sorts after `after` (all
/// of them for `None`), with their keys, in key order: due time first, so
/// a caller that takes the first `n` takes the `n` most overdue, and one
/// that goes on from the last key it took (a cursor) reaches every due
/// entry in turn, whatever the entries before it.
///
/// On a store that lists in key order from an offset (`ordered`: S3, GCS,
/// Azure, a `LocalFolder`, `InMemory`): one listing of the index from `after`, read only up to the
/// first entry not yet due, so a poll costs a request per 1,000 due
/// entries it reads (one when none is due), whatever the entries due later.
/// On any other (`LocalFileSystem` lists in no order): a delimiter listing of
/// the index's hour folders (a request per 1,000 hours that hold entries),
/// then a listing of each hour from the one holding `after` to the one
/// holding `now_ms` (a request per 1,000 of its entries), sorted in memory
/// an hour at a time: the current hour's entries not yet due are listed and
/// skipped. Hours after `now_ms` are never listed.
///
/// `later` notes the earliest due time the listing saw after `now_ms`: the
/// first entry not yet due that an ordered listing reads; on any other
/// store, the earliest entry not yet due of the hours it lists, or the
/// start of the earliest hour after them that holds entries, whichever is
/// first (a time no entry listed now is due before).
pub(crate) fn due_after(
    memo: &MemoStore,
    now_ms: u64,
    after: Option<&Path>,
    ordered: bool,
    later: &Later,
) -> BoxStream<'static, Result<(Path, DueRun)>> {
    let memo = memo.clone();
    let after = after.cloned();
    let later = later.clone();
    if ordered {
        let folder = memo.layout().due_folder();
        // From an offset even at the start (the folder itself sorts
        // before everything in it): a local folder lists in order only
        // from an offset.
        let listing = memo
            .store()
            .list_with_offset(Some(&folder), after.as_ref().unwrap_or(&folder));
        return listing
            .map_err(move |e| Error::store(&folder, e))
            .try_filter_map(|meta| {
                let entry = parse(&meta.location, None).map(|due| (meta.location, due));
                future::ready(Ok(entry))
            })
            // Every entry after the first one not due is later still.
            .try_take_while(move |(_, due)| {
                let due_now = due.due_at_ms <= now_ms;
                if !due_now {
                    later.note(due.due_at_ms);
                }
                future::ready(Ok(due_now))
            })
            .boxed();
    }
    stream::once(async move {
        let first_hour = after
            .as_ref()
            .and_then(layout::parse_due_entry)
            .map_or(0, |name| name.hour);
        let hours = due_hours(&memo, now_ms, &later).await?;
        let entries = stream::iter(hours)
            .filter(move |(hour, _)| future::ready(*hour >= first_hour))
            .then(move |(hour, path)| {
                let (memo, after, later) = (memo.clone(), after.clone(), later.clone());
                async move { due_in_hour(&memo, hour, path, now_ms, after.as_ref(), &later).await }
            })
            .map_ok(|entries| stream::iter(entries).map(Ok))
            .try_flatten();
        Ok::<_, Error>(entries)
    })
    .try_flatten()
    .boxed()
}

/// The entries of the hour folder `path` (starting at `hour`) due by
/// `now_ms` and after `after`, sorted by key: the whole folder is listed,
/// and `later` notes the entries not yet due.
async fn due_in_hour(
    memo: &MemoStore,
    hour: u64,
    path: Path,
    now_ms: u64,
    after: Option<&Path>,
    later: &Later,
) -> Result<Vec<(Path, DueRun)>> {
    let listing = match after {
        Some(after) => memo.store().list_with_offset(Some(&path), after),
        None => memo.store().list(Some(&path)),
    };
    let mut entries: Vec<(Path, DueRun)> = listing
        .map_err(|e| Error::store(&path, e))
        .try_filter_map(|meta| {
            let entry = parse(&meta.location, Some(hour))
                .inspect(|due| {
                    if due.due_at_ms > now_ms {
                        later.note(due.due_at_ms);
                    }
                })
                .filter(|due| due.due_at_ms <= now_ms)
                .filter(|_| after.is_none_or(|after| meta.location > *after))
                .map(|due| (meta.location, due));
            future::ready(Ok(entry))
        })
        .try_collect()
        .await?;
    entries.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
    Ok(entries)
}

/// Whether `entry` has nothing left to wake: its run (as `run` records it
/// now) is gone, is another incarnation of the run id, or has ended. The
/// one test of staleness: a worker that wakes such an entry and a
/// retention sweep that tidies the index both delete it, and nothing else.
pub(crate) fn is_stale(entry: &DueRun, run: Option<&RunRecord>) -> bool {
    run.is_none_or(|run| run.incarnation != entry.incarnation || run.status.is_terminal())
}

/// Writes the terminal marker of `entry`'s run if `run` (its record now)
/// is that incarnation and has ended; `Ok(true)` if this call created the
/// marker (it was missing), `Ok(false)` if it was there already or the run
/// has not ended.
///
/// What keeps "every ended run gets its terminal marker" without a list of
/// every marker: an attempt writes its due-run entry before it starts, and
/// deletes it only after it wrote the marker of a run it ended (it keeps
/// the entry if that write failed, and a crash keeps it too). So a run
/// that ended without its marker always has an entry of its incarnation
/// left (a worker that moves an entry writes the new one before it
/// deletes the old), and whoever deletes an entry of an ended run calls
/// this first: a worker's poll, a sweep's tidying of the index, and
/// `Runtime::recover`, which reads the index instead of every marker.
pub(crate) async fn mark_ended(memo: &MemoStore, entry: &DueRun, run: &RunRecord) -> Result<bool> {
    if run.incarnation != entry.incarnation || !run.status.is_terminal() {
        return Ok(false);
    }
    let Some(terminal_at_ms) = run.terminal_at_ms else {
        return Ok(false);
    };
    let path = memo.layout().marker(
        layout::TERMINALS,
        &run.run_id,
        run.incarnation,
        terminal_at_ms,
    );
    write_once::create_marker(memo.store(), &path, &[], Limit::MARKER).await
}

/// Every entry of the index, due or not, in the order the store lists
/// them: a listing of the index's folder read as a stream (a request per
/// 1,000 entries), nothing held but the page being read.
pub(crate) fn every_entry(memo: &MemoStore) -> BoxStream<'static, Result<DueRun>> {
    let folder = memo.layout().due_folder();
    memo.store()
        .list(Some(&folder))
        .map_err(move |e| Error::store(&folder, e))
        .try_filter_map(|meta| future::ready(Ok(parse(&meta.location, None))))
        .boxed()
}

/// The hour folders that hold entries due by `now_ms`, earliest first;
/// `later` notes the start of the hours after them.
async fn due_hours(memo: &MemoStore, now_ms: u64, later: &Later) -> Result<Vec<(u64, Path)>> {
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
        .filter(|(hour, _)| {
            if *hour > now_ms {
                later.note(*hour);
            }
            *hour <= now_ms
        })
        .collect();
    hours.sort_unstable_by_key(|(hour, _)| *hour);
    Ok(hours)
}

/// The earliest due time one listing of the index saw after the time it
/// listed for ([`due_after`]), shared with the listing's stream.
#[derive(Debug, Clone)]
pub(crate) struct Later(Arc<AtomicU64>);

impl Later {
    /// Nothing seen yet.
    pub(crate) fn new() -> Later {
        Later(Arc::new(AtomicU64::new(u64::MAX)))
    }

    fn note(&self, due_at_ms: u64) {
        self.0.fetch_min(due_at_ms, Ordering::Relaxed);
    }

    /// The earliest due time seen after the listing's time; `None` if it
    /// saw none (the index holds no entry due later, or the listing
    /// stopped before it reached one).
    pub(crate) fn earliest(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|ms| *ms != u64::MAX)
    }
}

/// Parses an entry's path; `None` (with a warning) for anything else,
/// including an entry found in another hour folder than `expected_hour`.
fn parse(path: &Path, expected_hour: Option<u64>) -> Option<DueRun> {
    match layout::parse_due_entry(path) {
        Some(name) if expected_hour.is_none_or(|expected| expected == name.hour) => Some(DueRun {
            due_at_ms: name.due_ms,
            run_id: name.run_id,
            incarnation: name.incarnation,
            tag: name.tag,
        }),
        _ => {
            tracing::warn!(%path, "skipping an object that is not a due-run entry");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::ObjectStore;
    use object_store::local::LocalFileSystem;
    use object_store::memory::InMemory;

    use super::*;
    use crate::local::LocalFolder;

    const HOUR: u64 = 3_600_000;

    fn run(id: &str) -> RunId {
        RunId::new(id).unwrap()
    }

    /// Entries of two runs, tagged and not, some sharing a run and a due
    /// time, over three hours; in the order their keys sort.
    fn entries() -> Vec<DueRun> {
        let inc = Incarnation::from_u64(7);
        let tagged = |due, id: &str, tag| DueRun {
            tag: Some(tag),
            ..DueRun::new(due, run(id), inc)
        };
        vec![
            tagged(5, "b", 2),
            tagged(5, "b", 9),
            DueRun::new(5, run("a"), inc),
            DueRun::new(5, run("b"), inc),
            tagged(6, "a", 1),
            DueRun::new(HOUR - 1, run("a"), inc),
            tagged(HOUR, "b", u64::MAX),
            DueRun::new(HOUR + 1, run("a"), inc),
            tagged(2 * HOUR + 5, "a", 3),
        ]
    }

    /// A moved entry: shared if the woken one was; else tagged, the same
    /// tag for every mover of one entry to one time, another for another
    /// entry or time (pinned: a mover of one release and of the next
    /// must write one entry).
    #[test]
    fn a_moved_entry_is_tagged_as_the_woken_one_was_and_the_same_for_every_mover() {
        let (id, inc) = (run("r"), Incarnation::from_u64(1));
        let shared = DueRun::new(5, id.clone(), inc);
        assert_eq!(shared.moved_to(9), DueRun::new(9, id.clone(), inc));
        let tagged = DueRun {
            tag: Some(42),
            ..shared.clone()
        };
        let moved = tagged.moved_to(9);
        assert_eq!(
            (moved.due_at_ms, moved.tag),
            (9, Some(0xcc86_8f8d_9bd2_3f76))
        );
        assert_eq!(moved, tagged.moved_to(9));
        assert_ne!(moved.tag, tagged.moved_to(10).tag);
        assert_ne!(
            moved.tag,
            DueRun {
                tag: Some(43),
                ..shared
            }
            .moved_to(9)
            .tag
        );
    }

    /// A poll by `now` finds every entry due by then, tagged or not, in
    /// key order (due time first), on a store that lists in order and on
    /// one that does not, and notes the earliest due time it saw after
    /// `now`; each entry deletes by its own name, and a local folder keeps
    /// no folder of a deleted tagged entry.
    #[tokio::test]
    async fn tagged_and_shared_entries_are_listed_by_due_time_and_deleted_by_name() {
        let folder = tempfile::tempdir().unwrap();
        let plain = tempfile::tempdir().unwrap();
        let stores: Vec<(Arc<dyn ObjectStore>, bool)> = vec![
            (Arc::new(InMemory::new()), true),
            (Arc::new(LocalFolder::new(folder.path()).unwrap()), true),
            (
                Arc::new(LocalFileSystem::new_with_prefix(plain.path()).unwrap()),
                false,
            ),
        ];
        for (store, ordered) in stores {
            let memo = MemoStore::new(store, "memo");
            let all = entries();
            for entry in all.iter().rev() {
                write(&memo, entry).await.unwrap();
            }
            // And the earliest time after `now` that the listing saw: the
            // next entry's, or, where the hour after the listed ones is
            // not listed, that hour's start.
            let later_by_hour = if ordered { 2 * HOUR + 5 } else { 2 * HOUR };
            for (now, earliest) in [
                (4, Some(5)),
                (5, Some(6)),
                (HOUR, Some(HOUR + 1)),
                (HOUR + 1, Some(later_by_hour)),
                (2 * HOUR + 4, Some(2 * HOUR + 5)),
                (u64::MAX, None),
            ] {
                let later = Later::new();
                let due: Vec<DueRun> = due_after(&memo, now, None, ordered, &later)
                    .map_ok(|(_, due)| due)
                    .try_collect()
                    .await
                    .unwrap();
                let expected: Vec<DueRun> =
                    all.iter().filter(|e| e.due_at_ms <= now).cloned().collect();
                assert_eq!(due, expected, "ordered {ordered}, by {now}");
                assert_eq!(later.earliest(), earliest, "ordered {ordered}, by {now}");
            }
            // Deleting the untagged entry of run `b` due at 5 leaves the
            // tagged ones of that run and time.
            delete(&memo, &all[3]).await.unwrap();
            let left: Vec<DueRun> = due_at(&memo, 5).try_collect().await.unwrap();
            assert_eq!(left, all[..3].to_vec(), "ordered {ordered}");
            for entry in &all {
                delete(&memo, entry).await.unwrap();
            }
            let left: Vec<DueRun> = every_entry(&memo).try_collect().await.unwrap();
            assert_eq!(left, Vec::new(), "ordered {ordered}");
        }
        // The local folder removed each tagged entry's folder with it.
        let hours = std::fs::read_dir(folder.path().join("memo/due"))
            .map(|hours| hours.count())
            .unwrap_or(0);
        assert_eq!(hours, 0, "hour folders left");
    }

    /// Entries, one already gone, are deleted in one call of the store's
    /// batch delete, and the entry left out stays.
    #[tokio::test]
    async fn entries_are_deleted_in_one_batch() {
        let counting = Arc::new(crate::testing::CountingStore::new(InMemory::new()));
        let memo = MemoStore::new(counting.clone(), "memo");
        let all = entries();
        for entry in &all {
            write(&memo, entry).await.unwrap();
        }
        let (gone, kept) = all.split_at(all.len() - 1);
        delete(&memo, &gone[0]).await.unwrap();
        counting.reset();
        let deleted = delete_all(&memo, gone).await;
        assert_eq!(deleted.len(), gone.len());
        assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
        let counts = counting.counts();
        assert_eq!(counts.delete_streams, 1, "{counts:?}");
        assert_eq!(counts.delete_paths, gone.len() as u64, "{counts:?}");
        let left: Vec<DueRun> = every_entry(&memo).try_collect().await.unwrap();
        assert_eq!(left, kept.to_vec());
    }
}
