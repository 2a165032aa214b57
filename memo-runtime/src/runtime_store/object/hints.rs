//! The status-hint index: one small object per (status, run incarnation)
//! that lets `list_runs` read only the runs in a status, written before a
//! change moves a run into it and deleted once the run left it.

use futures::TryStreamExt;

use super::ObjectStoreRuntimeStore;
use crate::error::{Error, Result};
use crate::layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, RunState};
use crate::runtime_store::{Commit, RunStatus};
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

    /// Deletes a hint that a listing found stale, unless listings are
    /// read-only ([`ObjectStoreRuntimeStore::with_read_only_listings`]).
    pub(super) async fn tidy_stale_hint(
        &self,
        status: RunStatus,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<()> {
        if !self.tidy_hints {
            return Ok(());
        }
        let hint = self
            .layout
            .status_hint(status.path_segment(), run_id, incarnation);
        self.delete_all(vec![hint]).await
    }

    /// Whether a hint of `hinted` can never again be true of a run in `actual`
    /// (statuses only move forward).
    pub(super) fn hint_is_stale(hinted: RunStatus, actual: RunStatus) -> bool {
        hinted != actual && (actual.is_terminal() || hinted == RunStatus::Pending)
    }
}
