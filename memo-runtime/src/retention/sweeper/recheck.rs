//! The second look at a swept run: what a writer that died left after the
//! sweep (issue 20, seed 5988 of session 25's survey).
//!
//! A sweep deletes an incarnation's memo entries, its runtime records and
//! its data key, then its marker: from then on nothing leads a pass to the
//! incarnation's folders. A stale attempt of the run (paused past its lease
//! while another attempt ended the run) can still write there: its check
//! of the lease came before the pause, its write after the sweep's clear
//! of the incarnation's entries (a sweep clears them once, before it
//! deletes the runtime records; the recheck is what finds a write that
//! lands later, however soon). It takes
//! its write back when its check after the write finds the run gone (the
//! memo call's `take_back_if_deleted`, the runtime store's checks after its
//! appends), unless it dies between the two. No order of requests at the
//! writer closes that window: the write is acknowledged to nobody, and
//! nothing but the writer knows it was made.
//!
//! So a sweep leaves a *recheck marker* behind for every workflow
//! incarnation it deletes, written before the terminal marker goes and
//! due [`recheck_after`](super::RetentionSweeperBuilder::recheck_after)
//! (default [`DEFAULT_RECHECK_AFTER`](super::DEFAULT_RECHECK_AFTER)) after
//! the deletion began:
//! `rechecks/<hour>/<u64::MAX - due_ms>_<run>.<inc>`, the terminal
//! marker's layout under another folder.
//!
//! One deletion, one marker, however many sweeps make it: every worker
//! runs a sweeper, so two passes may delete one expired run at once, or
//! one finish what another's stopped; each leaves the marker, and had each
//! dated it by its own clock, the first recheck would forget the deletion
//! (below) and leave the other marker with no trace of it, which a
//! sweeper not yet sure of its store cannot tell from a run at another
//! prefix (the simulator's quiet worlds, seeds 1278 and 5374 of session
//! 50). So the deletion's start is what the marker is dated from: the
//! pass's time of the deleter that buried the run, written in its
//! tombstone and answered to every later or concurrent deleter
//! ([`RuntimeStore::delete_run_at`]), or, where no deleter recorded one
//! (a deletion by [`RuntimeStore::delete_run`] alone, or by a release
//! before tombstones were dated), the time the run's terminal marker
//! expired, which every pass with the same retention reads alike. And a
//! sweep that finds the deletion forgotten (no tombstone: its recheck has
//! run, as it has when a pass past the run's retention finds the marker
//! [`RetentionSweeper::delete_run`](super::RetentionSweeper::delete_run)
//! left) leaves no marker for it again (it left one, with nothing of the
//! deletion for it to find: seed 2013 of session 51's quiet-world survey);
//! and a sweep that stalled inside the deletion until that recheck ran
//! deletes the marker it writes after it (`leave_recheck`: seed 25954).
//!
//! A pass at or after a marker's time clears the incarnation's memo
//! folders once more, deletes whatever the runtime
//! store holds of the incarnation again ([`RuntimeStore::clear_remains`]),
//! forgets its data key once more (a late write may have made a new one),
//! then forgets the deletion ([`RuntimeStore::forget_deleted_all`]: the
//! tombstone, once nothing of the incarnation is left to take back, and
//! the run id's pointer as the deletion vacated it, unless a new run of
//! the id took it) and deletes the recheck marker last, so a failure keeps
//! it for the next pass.
//!
//! Safe whatever runs meanwhile: the marker names an incarnation a sweep
//! saw deleted (incarnations are drawn at random and never come back once
//! deleted, see `runtime_store/object/pointer.rs`), so everything under its
//! folders is garbage, and a run created again under the id is another
//! incarnation, never touched. Deleting is safe through any runtime store;
//! dropping the marker is not: a pass whose runtime store is at another
//! prefix than the workers' (an operator's mistyped one) clears nothing
//! there, and would leave for good what a late writer put in the workers'
//! store. So a pass rechecks only through a runtime store proved the
//! workers' (the `proof` module) or one that holds the deletion's trace,
//! its tombstone ([`RuntimeStore::holds_deletion`]); otherwise it keeps
//! the marker to the end of the pass, rechecks it then if the pass proved
//! its store meanwhile, and else keeps it (seed 30657 of session 47's
//! deployment survey) and counts it a failure when the same sweeper's
//! next pass finds it so again. A marker gone by the end of the pass (a
//! `HEAD`) was rechecked by another sweeper, which forgot its tombstone
//! after this pass listed it (two sweepers at once, as every worker runs
//! one: a flake of
//! `sweeper::two_sweepers_rechecking_one_swept_run_at_once_both_finish_it`
//! in CI, session 49); one still there may be in that sweeper's hands
//! between the tombstone's delete and the marker's (the simulator's quiet
//! worlds, session 50: 114 of 2,000 seeds reported such a failure), so
//! only a second pass tells it from a store at another prefix.
//!
//! What it does not close: a write that lands after the recheck, from a
//! writer stalled for longer than `recheck_after` between its last check
//! and its write, that then dies before its take-back (a sweep that
//! stalls with a run's expired marker in hand until after the recheck of
//! the run's deletion, another sweep's, clears the run's folders once
//! more, and leaves no recheck of its own: what lands after that clear is
//! such a write). Standalone runs
//! ([`Incarnation::STANDALONE`]) get no recheck: their id is used again
//! with the same incarnation, so a second clear could delete a new use's
//! entries.
//!
//! Cost: one conditional create per workflow run swept (and the `GET` of
//! its tombstone's time for a sweep that found the run deleted already,
//! or buried at once by another; and a `HEAD` of the tombstone after the
//! marker's write for a sweep that writes it half a `recheck_after` or
//! more after the deletion began, which may find the deletion rechecked
//! already); then, per recheck,
//! a `HEAD` of the tombstone while the pass's store is not proved (a
//! sweeper keeps the proof once found: a worker's sweeper found it in the
//! pass that deleted the run; a tombstone not found costs a `HEAD` of the
//! marker at the end of the pass too), a listing of its memo folder (and of its
//! step-output folder if the store holds step-output entries of the
//! previous layout at all: the pass asks once), a read of the run's pointer, a listing of its runtime folder and
//! one `delete_stream` of what that holds and of its status hints, a `HEAD`
//! for the data key where the seal has data keys, a second read of the
//! pointer and, while the deletion's vacated pointer stands, a conditional
//! update marking it swept; and, on S3, one request per 1,000 tombstones,
//! one per 1,000 swept pointers and one per 1,000 markers (a pass deletes
//! each together), plus the listing of the due hours. In proportion to what was
//! swept, never to what is retained.
//!
//! [`RuntimeStore::clear_remains`]: crate::runtime_store::RuntimeStore::clear_remains
//! [`RuntimeStore::delete_run`]: crate::runtime_store::RuntimeStore::delete_run
//! [`RuntimeStore::delete_run_at`]: crate::runtime_store::RuntimeStore::delete_run_at
//! [`RuntimeStore::holds_deletion`]: crate::runtime_store::RuntimeStore::holds_deletion
//! [`RuntimeStore::forget_deleted_all`]: crate::runtime_store::RuntimeStore::forget_deleted_all

use futures::stream::StreamExt;

/// How many recheck markers a pass deletes in one `delete_stream`: as many
/// as one S3 `DeleteObjects` request takes.
const RECHECK_BATCH: usize = 1_000;

use super::{PassFolders, RetentionSweeper, SweepReport, forget_data_key, proof};
use crate::error::Result;
use crate::retention::TerminalMarker;
use crate::run_id::{Incarnation, RunId};
#[cfg(doc)]
use crate::runtime_store::RuntimeStore;

impl RetentionSweeper {
    /// Leaves the recheck marker of `incarnation`, which this sweep is
    /// deleting, due `recheck_after` past `since_ms`: when the deletion
    /// began (see the module's rustdoc), so that every sweep of one
    /// deletion, however many at once and whatever their clocks read,
    /// leaves the same marker. A no-op for standalone runs and in a dry
    /// run.
    ///
    /// A sweep that writes the marker once half of `recheck_after` has
    /// passed since the deletion began (by its clock, or by `now_ms`, the
    /// time of its pass: it stalled inside the deletion, or finished one
    /// another sweep began long before) then asks whether the deletion's
    /// tombstone still stands, and deletes the marker it wrote if not:
    /// another sweeper's recheck has run and forgotten the deletion, and
    /// deleted the marker of the same name before this write, which would
    /// otherwise stand with nothing of the deletion behind it (a sweeper
    /// not yet sure of its store reports such a marker a failed recheck:
    /// seed 25954 of session 51's quiet-world survey). Asking after the
    /// write, not before, is what closes it: a recheck that forgets the
    /// tombstone after this `HEAD` found it deletes the marker after this
    /// write.
    pub(super) async fn leave_recheck(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        since_ms: u64,
        now_ms: u64,
    ) -> Result<()> {
        if incarnation == Incarnation::STANDALONE || self.config.dry_run {
            return Ok(());
        }
        let after_ms = u64::try_from(self.config.recheck_after.as_millis()).unwrap_or(u64::MAX);
        let marker = TerminalMarker {
            run_id: run_id.clone(),
            // At most `u64::MAX - 1`, so that a pass at `u64::MAX` (the
            // end of time) finds it due.
            terminal_at_ms: since_ms.saturating_add(after_ms).min(u64::MAX - 1),
            incarnation,
        };
        let markers = self.config.memo_store.recheck_markers();
        markers.write(&marker).await?;
        let Some(store) = &self.config.runtime_store else {
            return Ok(());
        };
        let late = now_ms.max(self.config.clock.now_ms()) >= since_ms.saturating_add(after_ms / 2);
        if late && store.holds_deletion(run_id, incarnation).await? == Some(false) {
            tracing::debug!(%run_id, "the deletion was rechecked before its marker was written");
            markers.delete(&marker).await?;
        }
        Ok(())
    }

    /// Clears once more the incarnations whose recheck marker is due at
    /// `now_ms` (in a dry run: counts the markers). A failure is logged and
    /// counted in [`SweepReport::recheck_failures`]; its marker is kept for
    /// the next pass. The markers of rechecks that succeeded are deleted
    /// [`RECHECK_BATCH`] at a time, each batch in one `delete_stream`.
    ///
    /// A marker whose deletion the pass's store is not proved to have made
    /// waits for the end of the pass: rechecked then if the pass proved its
    /// store meanwhile; else passed over if the marker is gone (another
    /// sweeper, as every worker runs one, rechecked it and forgot the
    /// deletion's tombstone after this pass listed it), and left for the
    /// next pass if it is still there (that sweeper may not have deleted
    /// it yet): a failure if this sweeper's next pass finds it so again.
    pub(super) async fn recheck_swept(
        &self,
        now_ms: u64,
        report: &mut SweepReport,
        folders: &PassFolders,
    ) {
        let markers = self
            .config
            .memo_store
            .recheck_markers()
            .expired(now_ms.saturating_add(1));
        let mut unproven = self.recheck_all(now_ms, markers, report, folders).await;
        if self.proves_store() && !unproven.is_empty() {
            let again = futures::stream::iter(unproven.into_iter().map(Ok)).boxed();
            unproven = self.recheck_all(now_ms, again, report, folders).await;
        }
        let before = self.replace_unrechecked(std::collections::HashSet::new());
        let mut still = std::collections::HashSet::new();
        for marker in unproven {
            let markers = self.config.memo_store.recheck_markers();
            let error = match markers.holds(&marker).await {
                Ok(false) => {
                    tracing::debug!(run_id = %marker.run_id,
                        "a swept run was rechecked by another sweeper meanwhile");
                    continue;
                }
                Ok(true) => {
                    let key = (marker.run_id.clone(), marker.incarnation);
                    let again = before.contains(&key);
                    still.insert(key);
                    if !again {
                        // Another sweeper may have forgotten the tombstone
                        // and not deleted the marker yet: the next pass
                        // sees which.
                        tracing::debug!(run_id = %marker.run_id,
                            "a recheck marker with no deletion in this runtime store is left \
                             for the next pass");
                        continue;
                    }
                    proof::unrechecked(&marker.run_id, marker.incarnation)
                }
                Err(error) => error,
            };
            tracing::warn!(%error, "a recheck of a swept run failed; the next pass tries again");
            report.recheck_failures += 1;
        }
        self.replace_unrechecked(still);
    }

    /// Replaces the markers left unrechecked at the end of the last pass
    /// with `now`, and returns them.
    fn replace_unrechecked(
        &self,
        now: std::collections::HashSet<(RunId, Incarnation)>,
    ) -> std::collections::HashSet<(RunId, Incarnation)> {
        let mut left =
            (self.config.unrechecked.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *left, now)
    }

    /// Rechecks the runs of `markers` (see [`recheck_swept`](Self::recheck_swept)),
    /// and returns those whose store is not proved yet.
    async fn recheck_all(
        &self,
        now_ms: u64,
        markers: futures::stream::BoxStream<'static, Result<TerminalMarker>>,
        report: &mut SweepReport,
        folders: &PassFolders,
    ) -> Vec<TerminalMarker> {
        let mut outcomes = markers
            .map(|marker| async move {
                let marker = marker?;
                if self.config.dry_run {
                    return Ok((None, None));
                }
                let late = self.recheck(&marker, folders).await?;
                Ok::<_, crate::Error>((late, Some(marker)))
            })
            .buffer_unordered(self.config.concurrency);
        let mut rechecked = Vec::new();
        let mut unproven = Vec::new();
        while let Some(outcome) = outcomes.next().await {
            match outcome {
                Ok((Some(late), Some(marker))) => {
                    rechecked.push((marker, late));
                    if rechecked.len() == RECHECK_BATCH {
                        self.delete_rechecked(now_ms, std::mem::take(&mut rechecked), report)
                            .await;
                    }
                }
                Ok((None, Some(marker))) => unproven.push(marker),
                // A dry run: counted, nothing deleted.
                Ok((_, None)) => report.rechecks_due += 1,
                Err(error) => {
                    tracing::warn!(%error, "a recheck of a swept run failed; the next pass tries again");
                    report.recheck_failures += 1;
                }
            }
        }
        drop(outcomes);
        self.delete_rechecked(now_ms, rechecked, report).await;
        unproven
    }

    /// Forgets the deletions of rechecks that found and deleted what each
    /// holds (`late`), their tombstones together
    /// ([`RuntimeStore::forget_deleted_all`]), then deletes the markers of
    /// those forgotten, in one `delete_stream`, and counts each recheck
    /// done, or failed if its tombstone or its marker could not be deleted
    /// (its marker is kept for the next pass).
    async fn delete_rechecked(
        &self,
        now_ms: u64,
        rechecked: Vec<(TerminalMarker, usize)>,
        report: &mut SweepReport,
    ) {
        let rechecked = self.forget_deletions(now_ms, rechecked, report).await;
        let markers = rechecked.iter().map(|(marker, _)| marker);
        let deleted = self
            .config
            .memo_store
            .recheck_markers()
            .delete_all(markers)
            .await;
        for ((marker, late), deleted) in rechecked.into_iter().zip(deleted) {
            match deleted {
                Ok(()) => {
                    report.rechecks_due += 1;
                    report.late_objects_deleted += late;
                    tracing::debug!(run_id = %marker.run_id, late, "swept run rechecked");
                }
                Err(error) => {
                    tracing::warn!(run_id = %marker.run_id, %error,
                        "a swept run was rechecked but its recheck marker was not deleted; \
                         the next pass rechecks it again");
                    report.recheck_failures += 1;
                }
            }
        }
    }

    /// The rechecks of `rechecked` whose deletion the runtime store (if
    /// any) forgot: a recheck whose tombstone could not be deleted is
    /// counted failed, and its marker kept for the next pass; one the store
    /// deferred ([`Error::Deferred`](crate::Error::Deferred): another
    /// sweeper's recheck of the same deletion holds the run's pointer) is
    /// kept uncounted.
    async fn forget_deletions(
        &self,
        now_ms: u64,
        rechecked: Vec<(TerminalMarker, usize)>,
        report: &mut SweepReport,
    ) -> Vec<(TerminalMarker, usize)> {
        let Some(store) = &self.config.runtime_store else {
            return rechecked;
        };
        let deleted: Vec<_> = rechecked
            .iter()
            .map(|(marker, _)| (marker.run_id.clone(), marker.incarnation))
            .collect();
        let forgotten = store.forget_deleted_all_at(&deleted, now_ms).await;
        let mut forgotten = forgotten.into_iter();
        let mut kept = Vec::with_capacity(rechecked.len());
        for (marker, late) in rechecked {
            match forgotten.next() {
                Some(Ok(())) => kept.push((marker, late)),
                // Another sweeper's recheck of the deletion is finishing it
                // (or stopped part way, which the next pass tells): its
                // marker is kept, and this is no failure.
                Some(Err(error @ crate::Error::Deferred { .. })) => {
                    tracing::debug!(run_id = %marker.run_id, %error,
                        "a swept run's recheck waits for another's");
                }
                failed => {
                    let error = match failed {
                        Some(Err(error)) => error.to_string(),
                        _ => "the runtime store gave no answer for it".to_string(),
                    };
                    tracing::warn!(run_id = %marker.run_id, %error,
                        "a swept run was rechecked but its tombstone was not deleted; \
                         the next pass rechecks it again");
                    report.recheck_failures += 1;
                }
            }
        }
        kept
    }

    /// One recheck: what it deleted that a late writer left (memo entries,
    /// and 1 for runtime records found again), or `None` if the store is
    /// not proved to have made the deletion (nothing done). The deletion's tombstone and
    /// the marker are left for the caller to delete with others'
    /// (`delete_rechecked`): last, so that a record of the run put back
    /// before then is taken back, not restored (see
    /// [`RuntimeStore::forget_deleted`]).
    async fn recheck(
        &self,
        marker: &TerminalMarker,
        folders: &PassFolders,
    ) -> Result<Option<usize>> {
        let config = &*self.config;
        let (run_id, incarnation) = (&marker.run_id, marker.incarnation);
        if !self.deleted_by_this_store(run_id, incarnation).await? {
            return Ok(None);
        }
        let folders = folders.get(&config.memo_store).await;
        let mut late = config
            .memo_store
            .clear_incarnation_in(run_id, incarnation, folders)
            .await?;
        if let Some(store) = &config.runtime_store
            && store.clear_remains(run_id, incarnation).await?
        {
            late += 1;
        }
        forget_data_key(config, run_id, incarnation).await?;
        Ok(Some(late))
    }
}
