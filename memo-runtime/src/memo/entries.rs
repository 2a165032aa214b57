//! A run's entries in a [`MemoStore`]: listing them for tools, counting
//! them, and clearing a run or one incarnation of it.

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;

use super::{MemoStore, entry_cache};
use crate::error::{Error, Result};
use crate::layout::{BLOB_FOLDER, Layout, MEMOS, STEP_OUTPUTS};
use crate::run_id::{Incarnation, RunId};

#[cfg(doc)]
use super::Memo;
#[cfg(doc)]
use object_store::ObjectStore;

impl MemoStore {
    /// Deletes every memo entry and step-output entry of `run_id`, of every
    /// incarnation, and returns how many were deleted. To clear one
    /// incarnation and nothing else, use
    /// [`clear_incarnation`](Self::clear_incarnation).
    ///
    /// Deletes go through [`ObjectStore::delete_stream`] (batched on S3, with
    /// the backend's bounded concurrency). A failed delete does not stop the
    /// others; the call then returns an error, so a retention sweep keeps the
    /// run's marker and tries again. Entries already gone count as deleted by
    /// someone else and are not counted.
    ///
    /// # Errors
    ///
    /// [`Error::ClearIncomplete`] if listing or any delete failed.
    pub async fn clear_memos_for_run(&self, run_id: &RunId) -> Result<usize> {
        let layout = self.layout();
        let folders = [MEMOS, STEP_OUTPUTS].map(|folder| layout.run_folder(folder, run_id));
        self.clear_folders(run_id, &folders).await
    }

    /// Deletes every memo entry and step-output entry of one incarnation of
    /// `run_id`, and returns how many were deleted; other incarnations of the
    /// id are not touched. This is what a retention sweep does.
    ///
    /// # Errors
    ///
    /// As [`clear_memos_for_run`](Self::clear_memos_for_run).
    pub async fn clear_incarnation(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<usize> {
        self.clear_incarnation_in(run_id, incarnation, EntryFolders::WithStepOutputs)
            .await
    }

    /// [`clear_incarnation`](Self::clear_incarnation) of the entry folders
    /// `folders` names: what a retention pass calls, with what its one
    /// [`entry_folders`](Self::entry_folders) found.
    pub(crate) async fn clear_incarnation_in(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        folders: EntryFolders,
    ) -> Result<usize> {
        let folders = folders.of_incarnation(self.layout(), run_id, incarnation);
        self.clear_folders(run_id, &folders).await
    }

    /// Which entry folders a run's clear must list: [`EntryFolders::MemosOnly`]
    /// if the store holds no step-output entry of the previous layout at all
    /// (none is written since; one listing request, of at most one key), so
    /// that a retention pass lists one folder a run, not two. A failed
    /// listing answers [`EntryFolders::WithStepOutputs`]: the clears then
    /// list both, as they always did.
    pub(crate) async fn entry_folders(&self) -> EntryFolders {
        let root = self.layout().entry_root(STEP_OUTPUTS);
        match self.store().list(Some(&root)).try_next().await {
            Ok(None) => EntryFolders::MemosOnly,
            Ok(Some(_)) => EntryFolders::WithStepOutputs,
            Err(error) => {
                tracing::debug!(%error, "listing the step-output entries failed; clears list them");
                EntryFolders::WithStepOutputs
            }
        }
    }

    /// The committed entries of one incarnation of `run_id`, by step and
    /// digest, with their stored sizes: what an operator's tool shows of a
    /// run, without building any stored path itself. Entries written under
    /// the step-output folders of the previous layout are listed too, as
    /// [`EntryKind::LegacyStepOutput`]; the step's blobs (large values, which
    /// its entries name) are not entries and are left out, and other objects
    /// in the run's folders are skipped with a warning. One listing per folder; the
    /// whole answer is held in memory (a run's entries, not the store's).
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
    /// use memo_runtime::{Incarnation, MemoStore, RunId, object_store::memory::InMemory};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    /// let run = RunId::new("order-7")?;
    /// store.new_memo(&run, 3).put("charge", b"ch_1").await?;
    /// let entries = store.list_entries(&run, Incarnation::STANDALONE).await?;
    /// assert_eq!(entries.len(), 1);
    /// assert_eq!((entries[0].step, entries[0].size > 4), (3, true));
    /// # Ok(()) }
    /// ```
    pub async fn list_entries(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<EntryInfo>> {
        let layout = self.layout();
        let mut entries = Vec::new();
        for (kind, folder) in [
            (EntryKind::Memo, MEMOS),
            (EntryKind::LegacyStepOutput, STEP_OUTPUTS),
        ] {
            let prefix = layout.incarnation_folder(folder, run_id, incarnation);
            let metas: Vec<_> = self
                .store()
                .list(Some(&prefix))
                .try_collect()
                .await
                .map_err(|e| Error::store(&prefix, e))?;
            for meta in metas {
                let parts: Vec<_> = meta
                    .location
                    .prefix_match(&prefix)
                    .into_iter()
                    .flatten()
                    .collect();
                if let [_, blobs, _] = parts.as_slice()
                    && blobs.as_ref() == BLOB_FOLDER
                {
                    // A blob (a large value) a memo entry of the step names.
                    continue;
                }
                let step = match parts.as_slice() {
                    [step, digest] => step
                        .as_ref()
                        .parse::<u32>()
                        .ok()
                        .map(|step| (step, digest.as_ref().to_string())),
                    _ => None,
                };
                match step {
                    Some((step, digest)) => entries.push(EntryInfo {
                        kind,
                        step,
                        digest,
                        size: meta.size,
                    }),
                    None => {
                        tracing::warn!(path = %meta.location, "skipping an object that is not a memo entry");
                    }
                }
            }
        }
        // LocalFileSystem lists in no particular order.
        entries.sort_by(|a, b| (a.kind, a.step, &a.digest).cmp(&(b.kind, b.step, &b.digest)));
        Ok(entries)
    }

    /// The paths of the objects that [`list_entries`](Self::list_entries)
    /// lists (every memo and legacy step-output entry of incarnation
    /// `incarnation` of `run_id`), for a tool that copies a run's entries
    /// whole to another store (`memoctl export`).
    ///
    /// # Errors
    ///
    /// A store error listing the run's folders.
    pub async fn list_entry_paths(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<Path>> {
        let mut paths = Vec::new();
        let folders =
            EntryFolders::WithStepOutputs.of_incarnation(self.layout(), run_id, incarnation);
        for prefix in folders {
            let listed: Vec<Path> = self
                .store()
                .list(Some(&prefix))
                .map_ok(|meta| meta.location)
                .try_collect()
                .await
                .map_err(|e| Error::store(&prefix, e))?;
            paths.extend(listed);
        }
        paths.sort();
        Ok(paths)
    }

    async fn clear_folders(&self, run_id: &RunId, folders: &[Path]) -> Result<usize> {
        // Dropped after the deletes, however they end (an error, a
        // cancelled call): any entry under the folders may be gone.
        let process = self.inner.cache.as_ref().map_or(0, |cache| cache.process());
        let _forget = entry_cache::ForgetOnDrop(process, folders);
        self.delete_folders(run_id, folders).await
    }

    async fn delete_folders(&self, run_id: &RunId, folders: &[Path]) -> Result<usize> {
        let mut deleted = 0;
        let mut failed = 0;
        let mut first_error = None;
        for prefix in folders {
            let locations = self
                .store()
                .list(Some(prefix))
                .map_ok(|meta| meta.location)
                .boxed();
            let mut results = self.store().delete_stream(locations);
            while let Some(result) = results.next().await {
                match result {
                    Ok(_) => deleted += 1,
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => {
                        tracing::warn!(run_id = %run_id, prefix = %prefix, error = %e, "delete failed");
                        failed += 1;
                        first_error.get_or_insert(Error::store(prefix, e));
                    }
                }
            }
        }
        match first_error {
            None => Ok(deleted),
            Some(first) => Err(Error::ClearIncomplete {
                run_id: run_id.to_string(),
                deleted,
                failed,
                source: Box::new(first),
            }),
        }
    }

    /// How many memo and step-output entries `run_id` has: what
    /// [`clear_memos_for_run`](Self::clear_memos_for_run) would delete now.
    pub(crate) async fn count_incarnation_entries(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        folders: EntryFolders,
    ) -> Result<usize> {
        let mut count = 0;
        for prefix in folders.of_incarnation(self.layout(), run_id, incarnation) {
            count += self
                .store()
                .list(Some(&prefix))
                .try_fold(0, |n, _| futures::future::ready(Ok(n + 1)))
                .await
                .map_err(|e| Error::store(&prefix, e))?;
        }
        Ok(count)
    }

    /// Whether incarnation `incarnation` of the run has any entry in
    /// `folders`; stops at the first one found.
    pub(crate) async fn has_incarnation_entries(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        folders: EntryFolders,
    ) -> Result<bool> {
        for prefix in folders.of_incarnation(self.layout(), run_id, incarnation) {
            let first = self
                .store()
                .list(Some(&prefix))
                .try_next()
                .await
                .map_err(|e| Error::store(&prefix, e))?;
            if first.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Which of a run's entry folders a clear lists (see
/// [`MemoStore::entry_folders`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryFolders {
    /// The memo entries and the step-output entries of the previous layout.
    WithStepOutputs,
    /// The memo entries alone: the store held no step-output entry.
    MemosOnly,
}

impl EntryFolders {
    /// The folders' names, as [`Layout`] takes them.
    fn names(self) -> &'static [&'static str] {
        match self {
            EntryFolders::WithStepOutputs => &[MEMOS, STEP_OUTPUTS],
            EntryFolders::MemosOnly => &[MEMOS],
        }
    }

    /// These folders of incarnation `incarnation` of `run_id`.
    fn of_incarnation(
        self,
        layout: &Layout,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Vec<Path> {
        let folder = |name: &&str| layout.incarnation_folder(name, run_id, incarnation);
        self.names().iter().map(folder).collect()
    }
}

/// One committed entry of a run, as [`MemoStore::list_entries`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// Where the entry is stored.
    pub kind: EntryKind,
    /// The step number of the [`Memo`] that committed it.
    pub step: u32,
    /// The entry's name: the SHA-256 of its key, in hex.
    pub digest: String,
    /// Its stored size in bytes (frame included).
    pub size: u64,
}

/// Which folder a [`EntryInfo`] was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKind {
    /// A memo entry ([`Memo::put`], `#[memoized]`, step receipts' memos).
    Memo,
    /// A step-output entry of the previous layout (no longer written; still
    /// listed and swept).
    LegacyStepOutput,
}

impl EntryKind {
    /// A short name for tools: `memo` or `step-output`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Memo => "memo",
            EntryKind::LegacyStepOutput => "step-output",
        }
    }
}
