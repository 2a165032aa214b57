//! The walks a call takes through the components: loading a run into its
//! cache slot.

use super::ObjectStoreRuntimeStore;
use super::folded::Folded;
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::runtime_store::state::RunState;

/// What [`ObjectStoreRuntimeStore::refresh`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refreshed {
    /// The run does not exist.
    Missing,
    /// Nothing changed since the run was cached.
    Unchanged,
    /// The run was loaded, or changed since it was cached.
    Changed,
}

impl ObjectStoreRuntimeStore {
    /// Makes `slot` hold the run as storage has it: folded from storage if
    /// it is not cached, caught up if it is.
    ///
    /// A cached run reads the pointer first, and catches up only if it still
    /// names the cached incarnation. Deleting a run frees its log positions,
    /// and a deletion that stopped part-way leaves some of its entries (and
    /// checkpoints) behind, so neither an empty nor a found next position
    /// proves anything: only the pointer tells whether the incarnation is
    /// current. Read first, it also keeps the cost of a cached read within a
    /// fresh load's, whatever happened since the run was cached: a cached
    /// incarnation that was deleted is never caught up on (its leftovers may
    /// be a whole log), and the pointer read is the one a fresh load starts
    /// with, so a run deleted, or deleted and created again, is loaded from
    /// it at exactly a fresh load's cost. A read that catches up costs a
    /// fresh load's requests plus the one `GET` of the next log position.
    ///
    /// What the catch-up then reads is the incarnation's own log, as a fresh
    /// load reads it after its own pointer read: if a deletion starts
    /// meanwhile, both answer with the run as it was at some moment of the
    /// read (a prefix of its log), and a catch-up that finds entries or
    /// checkpoints gone under it counts as corrupt only if the pointer still
    /// names the incarnation.
    pub(super) async fn refresh(
        &self,
        run_id: &RunId,
        slot: &mut Option<Folded>,
    ) -> Result<Refreshed> {
        self.refresh_known(run_id, slot, false).await
    }

    /// [`refresh`](Self::refresh), where `moved` says the cached run is
    /// known to have more log entries than it folded (a commit found its
    /// position taken), so the read of its next position is skipped.
    pub(super) async fn refresh_known(
        &self,
        run_id: &RunId,
        slot: &mut Option<Folded>,
        moved: bool,
    ) -> Result<Refreshed> {
        let Some(folded) = slot.as_mut() else {
            *slot = self.fold_from_storage(run_id).await?;
            return Ok(Self::refreshed(slot));
        };
        let Some(mut current) = self.read_creation(run_id).await? else {
            *slot = None;
            return Ok(Refreshed::Missing);
        };
        if current.incarnation == folded.incarnation {
            // Nothing follows a terminal change, so a terminal run has
            // nothing to catch up on.
            if folded.state.record().status.is_terminal() {
                return Ok(Refreshed::Unchanged);
            }
            let caught_up = if moved {
                self.fold_newer(run_id, folded).await.map(|()| true)
            } else {
                self.catch_up(run_id, folded).await
            };
            match caught_up {
                Ok(true) => return Ok(Refreshed::Changed),
                Ok(false) => return Ok(Refreshed::Unchanged),
                // A deletion removes the pointer first: checkpoints and
                // entries that vanished under the catch-up are of a run that
                // is gone, not a corrupt one.
                Err(e @ Error::Corrupt { .. }) => {
                    let Some(now) = self.read_creation(run_id).await? else {
                        *slot = None;
                        return Ok(Refreshed::Missing);
                    };
                    if now.incarnation == folded.incarnation {
                        return Err(e);
                    }
                    current = now;
                }
                Err(e) => return Err(e),
            }
        }
        *slot = self.fold_current(run_id, current).await?;
        Ok(Self::refreshed(slot))
    }

    fn refreshed(slot: &Option<Folded>) -> Refreshed {
        if slot.is_some() {
            Refreshed::Changed
        } else {
            Refreshed::Missing
        }
    }

    /// Loads the run (caught up) and returns what `answer` reads from it;
    /// `None` if it does not exist.
    pub(super) async fn read<T>(
        &self,
        run_id: &RunId,
        answer: impl Fn(&RunState) -> T,
    ) -> Result<Option<T>> {
        let slot = self.cache.slot(run_id);
        let mut guard = slot.lock().await;
        if self.refresh(run_id, &mut guard).await? == Refreshed::Missing {
            drop(guard);
            self.cache.forget(run_id);
            return Ok(None);
        }
        self.cache.reweigh(run_id, &slot, guard.as_ref());
        Ok(guard.as_ref().map(|folded| answer(&folded.state)))
    }
}
