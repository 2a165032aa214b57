//! Committing a change: checked against the folded run, its status hint
//! written, appended to the log; then a checkpoint written if one is due
//! and the pointer checked, while the hint of the status the run left is
//! dropped.

use super::Runs;
use super::read::Refreshed;
use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::StatusChange;
use crate::runtime_store::state::{Change, RunState, Verdict};
use crate::write_once::Created;

/// How many reads of the pointer the check after an append gets.
const CHECK_ATTEMPTS: u32 = 3;

impl Runs {
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
                Change::Commit(commit) => (commit.status.as_ref())
                    .map(StatusChange::status)
                    .filter(|&s| s != folded.state.record().status),
                Change::Input(_) => None,
            };
            let (created, after) = self.log.append(run_id, folded, &change).await?;
            match created {
                // At position `next` either way: an identical change there
                // is this change, applied once.
                Created::Ours(_) | Created::Same(_) => {
                    let (position, incarnation) = (folded.next, folded.incarnation);
                    let leased = Self::leased_step(&change);
                    let before = folded.state.record().status;
                    folded.state.apply(change, plan);
                    folded.next = after;
                    // The hint of the status the run left goes while the
                    // change is confirmed, not after: the entry is in the
                    // log, so the run left that status unless its
                    // incarnation is gone, whose hints no one reads (one
                    // round trip fewer at a run's start and at its end).
                    let left = (folded.state.record().status != before).then_some(before);
                    let drop_left = async {
                        if let Some(left) = left {
                            self.hints.drop(left, run_id, incarnation).await;
                        }
                    };
                    let confirm = async {
                        // The checkpoint, if one is due, before the run is
                        // confirmed: a check that finds the run gone takes
                        // it back with the entry, where one written after
                        // the check could land after a deletion's listing
                        // (seeds 5749 and 9156 of the deployment world).
                        self.checkpoints.write_if_due(run_id, folded).await;
                        // On the lease's word, or the pointer's (`unchecked`).
                        let vouched = leased
                            .is_some_and(|attempt| self.lease_vouches(run_id, folded, attempt));
                        if vouched {
                            self.defer_check(run_id, incarnation, position, None);
                            return Ok(true);
                        }
                        self.entry_is_current(run_id, incarnation).await
                    };
                    let (current, ()) = futures::join!(confirm, drop_left);
                    let current = match current {
                        Ok(current) => current,
                        // Unconfirmed: the next call reads the run from
                        // storage, its pointer first, which keeps the entry
                        // or takes it back (an entry of a log freed under
                        // its writer is listed by no deletion again: seed
                        // 9217).
                        Err(e) => {
                            self.defer_check(run_id, incarnation, position, hinted);
                            *guard = None;
                            return Err(e);
                        }
                    };
                    if !current {
                        // The incarnation was deleted and its log freed
                        // under us: the change went into a dead run. The
                        // entry (and the checkpoint after it) goes whoever
                        // wrote it: an identical one may be this change's
                        // own from an earlier try whose pointer check
                        // failed, and nothing of a dead incarnation is ever
                        // read again.
                        self.take_back(run_id, incarnation, &[position]).await;
                        // And the hint written for it: the deletion removed
                        // the incarnation's hints before, and none would
                        // ever look for this one.
                        if let Some(status) = hinted {
                            self.hints.drop(status, run_id, incarnation).await;
                        }
                        *guard = None;
                        return Err(Error::Conflict {
                            what: format!("run {run_id}"),
                            reason: "the run was deleted while the change was written; \
                                     nothing was applied (nor kept of the step commits \
                                     acknowledged on its lease since the run was last \
                                     read)"
                                .into(),
                        });
                    }
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

    /// Whether the incarnation an entry was just created in is still the
    /// run's, reading the pointer again after a failure (up to
    /// [`CHECK_ATTEMPTS`] reads): an entry whose check failed is left, and
    /// in a log freed under its writer no deletion would list it again
    /// (seed 9217 of the deployment world: a failed check, then another
    /// change of the writer found that entry as another's).
    ///
    /// The read settles the commits acknowledged on their lease since the
    /// last one: taken back if the incarnation is gone.
    async fn entry_is_current(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let current = super::super::again::tried(CHECK_ATTEMPTS, || self.pointer.current(run_id))
            .await?
            .map(|c| c.incarnation);
        self.settle_unchecked(run_id, current).await;
        Ok(current == Some(incarnation))
    }
}
