//! The status-hint index: one small object per (status, run incarnation)
//! that lets `list_runs` read only the runs in a status, written before a
//! change moves a run into it and deleted once the run left it.

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

use super::{CONCURRENCY, ObjectStoreRuntimeStore};
use crate::error::{Error, Result};
use crate::layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, RunState};
use crate::runtime_store::{Commit, RunIdPage, RunStatus};
use crate::write_once;

impl ObjectStoreRuntimeStore {
    /// Before a change moves the run into a status, records the hint that
    /// lets [`RuntimeStore::list_runs`] find it there. A hint without the
    /// change (a crash or a conflict in between) is only a wasted read later.
    pub(super) async fn write_status_hint(
        &self,
        run_id: &RunId,
        state: &RunState,
        change: &Change,
    ) -> Result<()> {
        let Change::Commit(Commit {
            status: Some(status),
            ..
        }) = change
        else {
            return Ok(());
        };
        let status = status.status();
        let record = state.record();
        if record.status == status {
            return Ok(());
        }
        self.write_hint(status, run_id, record.incarnation).await
    }

    pub(super) async fn write_hint(
        &self,
        status: RunStatus,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<()> {
        let path = self
            .layout
            .status_hint(status.path_segment(), run_id, incarnation);
        write_once::create_once(
            self.store.as_ref(),
            &path,
            run_id.as_str().as_bytes(),
            Limit::MARKER,
        )
        .await?;
        Ok(())
    }

    /// Deletes the hint of a status the run has left for good (statuses
    /// only move forward). Best effort: the change is committed whatever
    /// happens here, and a hint left behind only costs a later listing a
    /// read, after which that listing deletes it (unless it is read-only).
    pub(super) async fn drop_stale_hint(
        &self,
        left: RunStatus,
        run_id: &RunId,
        incarnation: Incarnation,
    ) {
        let hint = self
            .layout
            .status_hint(left.path_segment(), run_id, incarnation);
        if let Err(e) = self.delete_all(vec![hint]).await {
            tracing::debug!(run_id = %run_id, status = %left, error = %e, "stale status hint kept");
        }
    }

    /// The runs (and incarnations) hinted to be in `status`. Objects that
    /// are not hints are skipped with a warning.
    pub(super) async fn status_hints(
        &self,
        status: RunStatus,
    ) -> Result<Vec<(RunId, Incarnation)>> {
        let folder = self.layout.status_folder(status.path_segment());
        let hints: Vec<_> = self
            .store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        Ok(hints
            .iter()
            .filter_map(|hint| {
                let parsed = layout::parse_status_hint(&hint.location);
                if parsed.is_none() {
                    tracing::warn!(path = %hint.location, "not a run status hint; skipped");
                }
                parsed
            })
            .collect())
    }

    /// One page of the run ids hinted to be in `status` after `after`, in
    /// the hints' order: one listing from the cursor's offset, read only
    /// as far as the page and one hint past it (each further batch of hints
    /// is read only if the ones before were not enough). For `Pending`,
    /// each hint read is checked against its run's pointer and tidied as
    /// [`live_pending_hints`](Self::live_pending_hints) tidies it, so a page
    /// lists no hint of an unborn incarnation and its cursor says whether a
    /// live one follows.
    pub(super) async fn status_hints_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        let limit = limit.max(1);
        let folder = self.layout.status_folder(status.path_segment());
        let mut hints = match after {
            None => self.store.list(Some(&folder)),
            Some(after) => {
                let offset = self.layout.status_hints_after(status.path_segment(), after);
                self.store.list_with_offset(Some(&folder), &offset)
            }
        };
        let mut ids: Vec<RunId> = Vec::new();
        let mut ended = false;
        while !ended && ids.len() <= limit {
            // The hints still wanted: the page's rest and one past it.
            let wanted = limit + 1 - ids.len();
            let mut batch = Vec::with_capacity(wanted);
            while batch.len() < wanted {
                let Some(hint) = hints.next().await else {
                    ended = true;
                    break;
                };
                let hint = hint.map_err(|e| Error::store(&folder, e))?;
                match layout::parse_status_hint(&hint.location) {
                    Some(parsed) => batch.push(parsed),
                    None => {
                        tracing::warn!(path = %hint.location, "not a run status hint; skipped");
                    }
                }
            }
            if status == RunStatus::Pending {
                batch = self.live_pending_hints(batch).await?;
            }
            for (run_id, _) in batch {
                // The hints of one run (its incarnations) come together.
                if ids.last() != Some(&run_id) {
                    ids.push(run_id);
                }
            }
        }
        // Stops the listing: nothing past the page is read.
        drop(hints);
        let next = if ids.len() > limit {
            ids.truncate(limit);
            ids.last().cloned()
        } else {
            None
        };
        Ok(RunIdPage { ids, next })
    }

    /// Deletes a hint that a listing found stale, unless listings are
    /// read-only ([`ObjectStoreRuntimeStore::with_read_only_listings`]).
    ///
    /// `unborn`: the hint's incarnation was not the run's when the listing
    /// read it. Such a hint is of a deleted incarnation, or of one whose
    /// creator stopped (or gave up) between the hint and the pointer, or of
    /// one whose creator is between them right now: a creator writes the
    /// `Pending` hint, then the pointer, and the delete may land after its
    /// pointer. So the pointer is read again after the delete, and the hint
    /// written back if it now names the incarnation. With the creator's own
    /// check of its hint once its pointer and record stand (see
    /// [`ensure_pending_hint`](Self::ensure_pending_hint)), a created run
    /// keeps its hint whichever comes first: if the delete lands before the
    /// creator's check, the check writes the hint again; if after, the
    /// pointer was written before the delete, so the read after it finds
    /// the incarnation current and writes the hint back (a run deleted
    /// meanwhile gets a hint that the next tidying listing removes).
    pub(super) async fn tidy_stale_hint(
        &self,
        status: RunStatus,
        run_id: &RunId,
        incarnation: Incarnation,
        unborn: bool,
    ) -> Result<()> {
        if !self.tidy_hints {
            return Ok(());
        }
        let hint = self
            .layout
            .status_hint(status.path_segment(), run_id, incarnation);
        self.delete_all(vec![hint]).await?;
        if unborn && self.is_current(run_id, incarnation).await? {
            self.write_hint(status, run_id, incarnation).await?;
        }
        Ok(())
    }

    /// The `Pending` hints whose incarnation is the run's current one (and
    /// those whose run could not be read, for the caller to read and
    /// report); the others are tidied away, as a listing by status does.
    ///
    /// A creator that stopped between its `Pending` hint and its pointer
    /// leaves a hint of an incarnation that never exists: no deletion looks
    /// for it, and recovery, which lists `Pending` run ids, would meet it at
    /// every start. Only `Pending` hints can be of an unborn incarnation,
    /// and they are few (runs not yet started), so each costs a read of its
    /// run's pointer here.
    pub(super) async fn live_pending_hints(
        &self,
        hints: Vec<(RunId, Incarnation)>,
    ) -> Result<Vec<(RunId, Incarnation)>> {
        let kept: Vec<Option<(RunId, Incarnation)>> = futures::stream::iter(hints)
            .map(|(run_id, incarnation)| async move {
                match self.is_current(&run_id, incarnation).await {
                    Ok(true) | Err(_) => Ok(Some((run_id, incarnation))),
                    Ok(false) => {
                        self.tidy_stale_hint(RunStatus::Pending, &run_id, incarnation, true)
                            .await?;
                        Ok::<_, Error>(None)
                    }
                }
            })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(kept.into_iter().flatten().collect())
    }

    /// The last step of a creation, once its pointer and record stand:
    /// writes the `Pending` hint again if a tidying listing deleted it
    /// between its write and the pointer's (see
    /// [`tidy_stale_hint`](Self::tidy_stale_hint)). One `HEAD` when it is
    /// there: only its existence counts (listings never read a hint's
    /// content either).
    pub(super) async fn ensure_pending_hint(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<()> {
        let hint = self
            .layout
            .status_hint(RunStatus::Pending.path_segment(), run_id, incarnation);
        match self.store.head(&hint).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => {
                self.write_hint(RunStatus::Pending, run_id, incarnation)
                    .await
            }
            Err(e) => Err(Error::store(&hint, e)),
        }
    }

    /// Whether a hint of `hinted` can never again be true of a run in `actual`
    /// (statuses only move forward).
    pub(super) fn hint_is_stale(hinted: RunStatus, actual: RunStatus) -> bool {
        hinted != actual && (actual.is_terminal() || hinted == RunStatus::Pending)
    }
}
