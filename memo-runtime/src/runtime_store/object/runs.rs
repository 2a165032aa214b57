//! The walks a call takes through the components: loading a run into its
//! cache slot (pointer, checkpoint, log), committing a change, creating a
//! run.

use super::ObjectStoreRuntimeStore;
use super::folded::Folded;
use super::pointer::{Birth, Creation, POINTER_ATTEMPTS};
use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, RunState, Verdict};
use crate::runtime_store::{NewRun, RunRecord, RunStatus};
use crate::write_once::Created;

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
        let Some(mut current) = self.pointer.current(run_id).await? else {
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
                    let Some(now) = self.pointer.current(run_id).await? else {
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

    /// Creates the run, or answers for the run of that id that exists (if
    /// it is the same run): see [`RuntimeStore::create_run`].
    ///
    /// [`RuntimeStore::create_run`]: crate::runtime_store::RuntimeStore::create_run
    pub(super) async fn create_or_recreate(&self, run: NewRun) -> Result<RunRecord> {
        let run_id = run.run_id.clone();
        for _ in 0..POINTER_ATTEMPTS {
            if let Some((creation, bytes)) = self.pointer.current_with_bytes(&run_id).await? {
                if let Some(record) = self.recreate(&run, creation, &bytes).await? {
                    return Ok(record);
                }
                continue;
            }
            // A new incarnation gets its own folder: whatever a deletion that
            // stopped part-way left of an earlier run of this id is never read.
            let creation = Creation {
                run: run.clone(),
                incarnation: Incarnation::random(),
            };
            self.hints
                .write(RunStatus::Pending, &run_id, creation.incarnation)
                .await?;
            match self.pointer.create(&creation).await? {
                Birth::Born => {
                    self.hints
                        .ensure_pending(&run_id, creation.incarnation)
                        .await?;
                    let state = RunState::new(creation.run, creation.incarnation);
                    let record = state.record().clone();
                    let slot = self.cache.slot(&run_id);
                    // Whatever was cached is of an earlier run of this id.
                    let mut guard = slot.lock().await;
                    *guard = Some(Folded::created(state, creation.incarnation));
                    self.cache.reweigh(&run_id, &slot, guard.as_ref());
                    return Ok(record);
                }
                // Given up: another run of the id took the pointer.
                Birth::Overtaken => {
                    self.drop_unborn_hint(&run_id, creation.incarnation).await;
                }
                // Created meanwhile: the run may have moved on since its
                // creation, so answer with its state now.
                Birth::Taken(theirs, bytes) => {
                    self.drop_unborn_hint(&run_id, creation.incarnation).await;
                    if let Some(record) = self.recreate(&run, theirs, &bytes).await? {
                        return Ok(record);
                    }
                }
            }
        }
        Err(self.pointer.kept_changing(&run_id))
    }

    /// An idempotent `create_run` of a run whose pointer (`bytes`) names
    /// `existing`: its state now; `None` if the pointer named another
    /// incarnation by then.
    async fn recreate(
        &self,
        run: &NewRun,
        existing: Creation,
        bytes: &[u8],
    ) -> Result<Option<RunRecord>> {
        let run_id = &run.run_id;
        let incarnation = existing.incarnation;
        RunState::new(existing.run.clone(), incarnation).check_same_run(run)?;
        let record = self.read(run_id, |state| state.record().clone()).await?;
        let Some(record) = record.filter(|r| r.incarnation == incarnation) else {
            return Ok(None);
        };
        // A run created before records existed, or whose creator stopped
        // between its pointer and its record, gets its record before anyone
        // is told it exists. A terminal run is skipped: it may be under
        // deletion, whose removal of the record must stand.
        if !record.status.is_terminal()
            && !self.pointer.ensure_record(run_id, &existing, bytes).await?
        {
            return Ok(None);
        }
        Ok(Some(record))
    }

    /// Deletes the `Pending` hint of an incarnation this call wrote and then
    /// gave up (another creator's pointer won): no run will ever have that
    /// incarnation, so no deletion would look for its hint, and only a
    /// tidying listing by status would ever remove it. Best effort, like
    /// every hint removal.
    async fn drop_unborn_hint(&self, run_id: &RunId, incarnation: Incarnation) {
        self.hints
            .drop(RunStatus::Pending, run_id, incarnation)
            .await;
    }

    /// Reads the run's creation, its newest checkpoint and the log entries
    /// after it, and folds them.
    pub(super) async fn fold_from_storage(&self, run_id: &RunId) -> Result<Option<Folded>> {
        match self.pointer.current(run_id).await? {
            Some(creation) => self.fold_current(run_id, creation).await,
            None => Ok(None),
        }
    }

    /// Folds the incarnation `creation`, which the run pointer was just read
    /// to name: its newest checkpoint and the log entries after it.
    ///
    /// A deletion removes the pointer first and then the rest, so a fold
    /// that began before it may find checkpoints and entries gone and take
    /// the run for corrupt: a corrupt fold counts only if the pointer still
    /// names the incarnation; otherwise the run is read again as it is now.
    pub(super) async fn fold_current(
        &self,
        run_id: &RunId,
        creation: Creation,
    ) -> Result<Option<Folded>> {
        let mut creation = creation;
        let mut deleted_meanwhile = false;
        loop {
            let incarnation = creation.incarnation;
            match self.fold_incarnation(run_id, creation).await {
                Err(e @ Error::Corrupt { .. }) if !deleted_meanwhile => {
                    match self.pointer.current(run_id).await? {
                        Some(now) if now.incarnation == incarnation => return Err(e),
                        Some(now) => creation = now,
                        None => return Ok(None),
                    }
                    deleted_meanwhile = true;
                }
                folded => return folded.map(Some),
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
    pub(super) async fn catch_up(&self, run_id: &RunId, folded: &mut Folded) -> Result<bool> {
        if !self.log.fold_next(run_id, folded).await? {
            return Ok(false);
        }
        self.fold_newer(run_id, folded).await?;
        Ok(true)
    }

    /// Folds the changes after `folded.next`, known to be behind: from the
    /// newest delta if it is ahead, then the log after it.
    pub(super) async fn fold_newer(&self, run_id: &RunId, folded: &mut Folded) -> Result<()> {
        self.checkpoints.skip_to_newer(run_id, folded).await?;
        self.log.fold_tail(run_id, folded).await
    }

    /// Commits `change` to the run, and returns what `answer` reads from the
    /// run after it.
    pub(super) async fn change<T>(
        &self,
        run_id: &RunId,
        change: Change,
        answer: impl Fn(&RunState) -> T,
    ) -> Result<T> {
        let slot = self.cache.slot(run_id);
        let mut guard = slot.lock().await;
        if guard.is_none() {
            self.refresh(run_id, &mut guard).await?;
        }
        loop {
            let Some(folded) = guard.as_mut() else {
                return Err(Error::RunNotFound {
                    run_id: run_id.to_string(),
                });
            };
            // A new change must also fit the limits (a run's pending inputs
            // are counted as it stands, so judged like the rules).
            let verdict = folded.state.check(&change).and_then(|verdict| {
                if let Verdict::Apply(_) = verdict {
                    self.limits.admit(&folded.state, &change)?;
                }
                Ok(verdict)
            });
            let plan = match verdict {
                Ok(Verdict::AlreadyApplied) => return Ok(answer(&folded.state)),
                Ok(Verdict::Apply(plan)) => plan,
                // The cache may be behind: judge only against the latest log.
                Err(e) => match self.refresh(run_id, &mut guard).await? {
                    Refreshed::Unchanged => return Err(e),
                    Refreshed::Changed | Refreshed::Missing => continue,
                },
            };
            self.hints.write_for(run_id, &folded.state, &change).await?;
            // The status that hint is for, if the change moves the run.
            let hinted = match &change {
                Change::Commit(crate::runtime_store::Commit {
                    status: Some(status),
                    ..
                }) => Some(status.status()).filter(|&s| s != folded.state.record().status),
                _ => None,
            };
            let (created, after) = self.log.append(run_id, folded, &change).await?;
            match created {
                // At position `next` either way: an identical change there
                // is this change, applied once.
                created @ (Created::Ours(_) | Created::Same(_)) => {
                    if !self.pointer.is_current(run_id, folded.incarnation).await? {
                        // The incarnation was deleted and its log freed under
                        // us: the change went into a dead run.
                        if let Created::Ours(_) = created {
                            (self.log)
                                .discard(run_id, folded.incarnation, folded.next)
                                .await;
                        }
                        // And the hint written for it: the deletion removed
                        // the incarnation's hints before, and none would
                        // ever look for this one.
                        if let Some(status) = hinted {
                            self.hints.drop(status, run_id, folded.incarnation).await;
                        }
                        *guard = None;
                        return Err(Error::Conflict {
                            what: format!("run {run_id}"),
                            reason: "the run was deleted while the change was written; \
                                     nothing was applied"
                                .into(),
                        });
                    }
                    let before = folded.state.record().status;
                    folded.state.apply(change, plan);
                    folded.next = after;
                    if folded.state.record().status != before {
                        self.hints.drop(before, run_id, folded.incarnation).await;
                    }
                    self.checkpoints.write_if_due(run_id, folded).await;
                    let answered = answer(&folded.state);
                    self.cache.reweigh(run_id, &slot, guard.as_ref());
                    return Ok(answered);
                }
                // Another writer came first, maybe by many entries: caught
                // up as a read is, the pointer first, so that the leftovers
                // of a deleted incarnation are never folded (the change is
                // then judged against the run the pointer names, if any).
                Created::Theirs(bytes) => {
                    self.log.fold_entry(run_id, folded, &bytes)?;
                    self.refresh_known(run_id, &mut guard, true).await?;
                }
            }
        }
    }
}
