//! Reading a run: its cache slot, filled from storage (the pointer, the
//! newest checkpoint, the log after it) or caught up.

use object_store::UpdateVersion;

use super::Runs;
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::runtime_store::object::folded::Folded;
use crate::runtime_store::object::pointer::Creation;
use crate::runtime_store::state::RunState;

/// What [`Runs::refresh`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refreshed {
    /// The run does not exist.
    Missing,
    /// Nothing changed since the run was cached.
    Unchanged,
    /// The run was loaded, or changed since it was cached.
    Changed,
}

impl Runs {
    /// Loads the run (caught up) and returns what `answer` reads from it;
    /// `None` if it does not exist.
    pub(in crate::runtime_store::object) async fn read<T>(
        &self,
        run_id: &RunId,
        answer: impl Fn(&RunState) -> T,
    ) -> Result<Option<T>> {
        self.read_folded(run_id, |folded| answer(&folded.state))
            .await
    }

    /// [`read`](Self::read), answering from the folded run: its state and
    /// what this instance knows of it (the pointer's version read).
    pub(super) async fn read_folded<T>(
        &self,
        run_id: &RunId,
        answer: impl Fn(&Folded) -> T,
    ) -> Result<Option<T>> {
        self.read_from(run_id, None, answer).await
    }

    /// [`read`](Self::read) of the run the pointer named when the caller
    /// just read it (`creation`, and the version read if it was read as it
    /// stood): no second read of the pointer. The answer is the run as it
    /// was at some moment since that read, as a read that begins with its
    /// own is.
    pub(super) async fn read_at<T>(
        &self,
        run_id: &RunId,
        creation: Creation,
        version: Option<UpdateVersion>,
        answer: impl Fn(&RunState) -> T,
    ) -> Result<Option<T>> {
        self.read_from(run_id, Some((creation, version)), |folded| {
            answer(&folded.state)
        })
        .await
    }

    async fn read_from<T>(
        &self,
        run_id: &RunId,
        read: Option<(Creation, Option<UpdateVersion>)>,
        answer: impl Fn(&Folded) -> T,
    ) -> Result<Option<T>> {
        let slot = self.cache.slot(run_id);
        let mut guard = slot.lock().await;
        let refreshed = self.refresh_from(run_id, &mut guard, false, read).await?;
        if refreshed == Refreshed::Missing {
            drop(guard);
            self.cache.forget(run_id);
            return Ok(None);
        }
        self.cache.reweigh(run_id, &slot, guard.as_ref());
        Ok(guard.as_ref().map(answer))
    }

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
        self.refresh_from(run_id, slot, moved, None).await
    }

    /// [`refresh_known`](Self::refresh_known), from the pointer as the
    /// caller just read it (`read`: the run it names and the version read,
    /// if read as it stood), or as read here first (`None`).
    async fn refresh_from(
        &self,
        run_id: &RunId,
        slot: &mut Option<Folded>,
        moved: bool,
        read: Option<(Creation, Option<UpdateVersion>)>,
    ) -> Result<Refreshed> {
        let current = match read {
            // Read before this call: it settles no commit acknowledged on
            // its lease, which may have come after it (the next read does).
            Some(read) => Some(read),
            None => {
                let current = (self.pointer.current_versioned(run_id).await?)
                    .map(|(creation, _, version)| (creation, version));
                let incarnation = current.as_ref().map(|(c, _)| c.incarnation);
                self.settle_unchecked(run_id, incarnation).await;
                current
            }
        };
        let Some((mut current, mut version)) = current else {
            *slot = None;
            return Ok(Refreshed::Missing);
        };
        let Some(folded) = slot.as_mut() else {
            *slot = self.fold_current(run_id, current, version).await?;
            return Ok(Self::refreshed(slot));
        };
        if current.incarnation == folded.incarnation {
            folded.pointer_version = version.clone();
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
                    let Some(now) = self.pointer.current(run_id).await? else {
                        *slot = None;
                        return Ok(Refreshed::Missing);
                    };
                    if now.incarnation == folded.incarnation {
                        return Err(e);
                    }
                    (current, version) = (now, None);
                }
                Err(e) => return Err(e),
            }
        }
        *slot = self.fold_current(run_id, current, version).await?;
        Ok(Self::refreshed(slot))
    }

    fn refreshed(slot: &Option<Folded>) -> Refreshed {
        if slot.is_some() {
            Refreshed::Changed
        } else {
            Refreshed::Missing
        }
    }

    /// Folds the incarnation `creation`, which the run pointer was just read
    /// to name (`version`: that pointer's version, if it was read as it
    /// stood): its newest checkpoint and the log entries after it.
    ///
    /// A deletion removes the pointer first and then the rest, so a fold
    /// that began before it may find checkpoints and entries gone and take
    /// the run for corrupt: a corrupt fold counts only if the pointer still
    /// names the incarnation; otherwise the run is read again as it is now.
    async fn fold_current(
        &self,
        run_id: &RunId,
        creation: Creation,
        version: Option<UpdateVersion>,
    ) -> Result<Option<Folded>> {
        let (mut creation, mut version) = (creation, version);
        let mut deleted_meanwhile = false;
        loop {
            let incarnation = creation.incarnation;
            match self.fold_incarnation(run_id, creation).await {
                Err(e @ Error::Corrupt { .. }) if !deleted_meanwhile => {
                    match self.pointer.current(run_id).await? {
                        Some(now) if now.incarnation == incarnation => return Err(e),
                        Some(now) => (creation, version) = (now, None),
                        None => return Ok(None),
                    }
                    deleted_meanwhile = true;
                }
                Ok(mut folded) => {
                    folded.pointer_version = version;
                    return Ok(Some(folded));
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn fold_incarnation(&self, run_id: &RunId, creation: Creation) -> Result<Folded> {
        let incarnation = creation.incarnation;
        let created = RunState::new(creation.run, incarnation);
        let mut folded = self.checkpoints.load(run_id, created).await?;
        self.log.fold_tail(run_id, &mut folded).await?;
        Ok(folded)
    }

    /// Folds the changes written after `folded.next`: `true` if there were
    /// any.
    ///
    /// One read tells whether the run moved on. If it did, it may have moved
    /// by one entry or by thousands, so the rest is caught up as a fresh load
    /// reads a run: from the newest checkpoint delta if it is ahead of the
    /// cached state, then the log after it, so the cost is that of a fresh
    /// load plus that one read, whatever happened since the run was cached.
    async fn catch_up(&self, run_id: &RunId, folded: &mut Folded) -> Result<bool> {
        if !self.log.fold_next(run_id, folded).await? {
            return Ok(false);
        }
        self.fold_newer(run_id, folded).await?;
        Ok(true)
    }

    /// Folds the changes after `folded.next`, known to be behind: from the
    /// newest delta if it is ahead, then the log after it.
    async fn fold_newer(&self, run_id: &RunId, folded: &mut Folded) -> Result<()> {
        self.checkpoints.skip_to_newer(run_id, folded).await?;
        self.log.fold_tail(run_id, folded).await
    }
}
