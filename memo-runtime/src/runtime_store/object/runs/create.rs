//! Creating a run: its `Pending` hint, then its pointer and record, then
//! its slot filled; or, for a run of the id that exists, the answer for it.

use bytes::Bytes;
use object_store::UpdateVersion;

use super::Runs;
use crate::error::Result;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::object::folded::Folded;
use crate::runtime_store::object::pointer::{Birth, Creation, POINTER_ATTEMPTS, Prior};
use crate::runtime_store::state::RunState;
use crate::runtime_store::{NewRun, RunRecord, RunStatus};

impl Runs {
    /// Creates the run, or answers for the run of that id that exists (if
    /// it is the same run): see [`RuntimeStore::create_run`].
    ///
    /// [`RuntimeStore::create_run`]: crate::runtime_store::RuntimeStore::create_run
    pub(super) async fn create(&self, run: NewRun) -> Result<RunRecord> {
        let run_id = run.run_id.clone();
        for _ in 0..POINTER_ATTEMPTS {
            let vacant = match self
                .pointer
                .current_unless_new(&run_id, run.created_at_ms)
                .await?
            {
                Prior::Run(creation, bytes, version) => {
                    let read = (creation, bytes, version);
                    if let Some(record) = self.recreate(&run, read).await? {
                        return Ok(record);
                    }
                    continue;
                }
                Prior::Free(vacant) => vacant,
            };
            // A new incarnation gets its own folder: whatever a deletion that
            // stopped part-way left of an earlier run of this id is never read.
            let creation = Creation {
                run: run.clone(),
                incarnation: Incarnation::random(),
            };
            self.hints
                .write(RunStatus::Pending, &run_id, creation.incarnation)
                .await?;
            match self.pointer.create(&creation, vacant).await? {
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
                // Restored by a reader that wrote to it while this call
                // stalled (see `RunPointer::give_up`): the run exists and may
                // have moved on, so answer with its state now.
                Birth::Restored(bytes) => {
                    if let Some(record) = self.recreate(&run, (creation, bytes, None)).await? {
                        return Ok(record);
                    }
                }
                // Given up: another run of the id took the pointer, or
                // held it and lost it (the next turn reads the id again,
                // and restores that run if its record stands).
                Birth::Overtaken | Birth::Vanished => {
                    self.drop_unborn(&run_id, creation.incarnation).await;
                }
                // Created meanwhile: the run may have moved on since its
                // creation, so answer with its state now.
                Birth::Taken(theirs, bytes) => {
                    self.drop_unborn(&run_id, creation.incarnation).await;
                    if let Some(record) = self.recreate(&run, (theirs, bytes, None)).await? {
                        return Ok(record);
                    }
                }
            }
        }
        Err(self.pointer.kept_changing(&run_id))
    }

    /// An idempotent `create_run` of a run whose pointer, just read (its
    /// bytes, and its version if it was read as it stood), names
    /// `existing`: the run as it stands since that read (no second read of
    /// the pointer); `None` if it was deleted by then.
    async fn recreate(
        &self,
        run: &NewRun,
        (existing, bytes, version): (Creation, Bytes, Option<UpdateVersion>),
    ) -> Result<Option<RunRecord>> {
        let run_id = &run.run_id;
        let incarnation = existing.incarnation;
        if let Err(other_run) = RunState::new(existing.run.clone(), incarnation).check_same_run(run)
        {
            // Refused, but a run not started gets its `Pending` hint back
            // first (see below): its own creator may have stopped before
            // its check, and a caller with another input may be all that
            // ever asks for the id again.
            self.ensure_pending_if_unstarted(run_id, incarnation)
                .await?;
            return Err(other_run);
        }
        let record = self
            .read_at(run_id, existing.clone(), version, |state| {
                state.record().clone()
            })
            .await?;
        let Some(record) = record.filter(|r| r.incarnation == incarnation) else {
            return Ok(None);
        };
        // A run created before records existed, or whose creator stopped
        // between its pointer and its record, gets its record before anyone
        // is told it exists. A terminal run is skipped: it may be under
        // deletion, whose removal of the record must stand.
        if !record.status.is_terminal()
            && !self
                .pointer
                .ensure_record(run_id, &existing, &bytes)
                .await?
        {
            return Ok(None);
        }
        // And a run not started yet gets its `Pending` hint back, which a
        // tidying listing deleted while its creator was between the hint
        // and the pointer, if that creator stopped before its own check
        // (see `ensure_pending`): else no listing of `Pending` runs, and so
        // no recovery, would ever find it. One `HEAD`, for runs not
        // started only.
        if record.status == RunStatus::Pending {
            self.hints.ensure_pending(run_id, incarnation).await?;
        }
        Ok(Some(record))
    }

    /// The `Pending` hint of `incarnation` back, if it is the run's and not
    /// started yet (one read of the run, and a `HEAD`).
    async fn ensure_pending_if_unstarted(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<()> {
        let record = self.read(run_id, |state| state.record().clone()).await?;
        match record {
            Some(record)
                if record.incarnation == incarnation && record.status == RunStatus::Pending =>
            {
                self.hints.ensure_pending(run_id, incarnation).await
            }
            _ => Ok(()),
        }
    }

    /// Deletes what this call made for an incarnation it then gave up
    /// (another creator's pointer won): its `Pending` hint, and its data
    /// key, if the store's seal has data keys (made to seal the pointer it
    /// tried to create). No run will ever have that incarnation, so no
    /// deletion would look for either: only a tidying listing by status
    /// would ever remove the hint, and nothing the key. Best effort, like
    /// every hint removal: a creator that stops (or fails) between making
    /// the key and learning that its pointer lost leaves it, and
    /// [`DataKeys::forget_run`](crate::seal::DataKeys::forget_run) of the
    /// run id removes it with the rest.
    async fn drop_unborn(&self, run_id: &RunId, incarnation: Incarnation) {
        self.hints
            .drop(RunStatus::Pending, run_id, incarnation)
            .await;
        if let Some(keys) = self.client.seal().data_keys()
            && let Err(e) = keys.forget_incarnation(run_id, incarnation).await
        {
            tracing::debug!(%run_id, %incarnation, error = %e, "unborn incarnation's data key kept");
        }
    }
}
