//! Step commits acknowledged on the strength of their attempt's lease,
//! before the run pointer was read again: what lets a step commit cost one
//! request (its create) instead of two.
//!
//! # Why a commit reads the pointer
//!
//! Deleting a run frees its log positions: a writer that folded the run up
//! to position `p` before the deletion creates entry `p` in the freed folder
//! without conflict. So, after its create, a commit reads the run pointer
//! to see that its incarnation is still the run's; if not, it takes the
//! entry back and fails ("nothing was applied"). Without that read, the
//! commit would be acknowledged for a deleted run, and its entry left where
//! no deletion lists again.
//!
//! # When the lease answers instead
//!
//! A run is deleted only once it ended ([`delete_run`] refuses an open
//! run), and the workflow runtime ends a run only under its lease: the
//! attempt holding it ends it, or an attempt (or a cancellation) that
//! started after the lease expired, by the starter's clock (a start is
//! refused while the lease is live at its time). So if a step commit of
//! the attempt that holds the lease was written while that lease was still
//! live, no other attempt had started, the run had not ended and had not
//! been deleted: its entry is in the current incarnation, as the pointer
//! read would have said. The store checks this by the runtime's clock
//! ([`RuntimeStore::use_clock`]), read after the create returned (so a
//! pause or a slow write before it counts against the lease): a commit
//! whose fence is the lease's attempt, with no change of status, whose
//! lease is live by that clock then, is acknowledged without the read. It
//! is the rule an attempt already follows before it starts a body, and a
//! memoized call before it keeps its entry (`ensure_lease`), under the
//! same assumption: a lease one writer's clock finds live has not expired
//! by another's (a clock that jumps forward only makes leases lapse
//! sooner, and the pointer is read again).
//!
//! Every other change reads the pointer as before: a change of status (a
//! lease renewal, a suspension, the run's end), an input, a commit without
//! a fence, a commit whose lease is no longer live by the clock (after a
//! pause or a clock jump), and every [`MAX_UNCHECKED`]th step commit in a
//! row. Each read settles the commits acknowledged since the last one: if
//! the incarnation is current, they are; if it is not (the assumption
//! failed: an attempt ended the run while this one's clock said its lease
//! was live, or a run ended some other way), every object they created is
//! taken back (the entries, and the checkpoints written after them) and
//! the change fails, as a commit whose own read failed does. Any read of
//! the run's pointer by this instance settles them the same way (a read of
//! the run, a commit that found its position taken).
//!
//! A store without the runtime's clock (one no runtime was built with, or
//! behind a wrapper that does not pass `use_clock` on) reads the pointer
//! after every commit, as before.
//!
//! # What this gives up, and only when the assumption fails
//!
//! Nothing while it holds: every acknowledged commit is in the current
//! incarnation, visible to a fresh instance, and no object is left in a
//! deleted one. The fence is unchanged: the create at the next position
//! still fails if another holder committed there, and a deleted
//! incarnation's folder is never read as another's (a reader reads the
//! pointer first). If it fails (a clock set back, or writers' clocks far
//! apart), up to [`MAX_UNCHECKED`]` - 1` step commits of a stale attempt
//! may be acknowledged into a deleted run before a read takes them back
//! and stops the attempt; a process that dies in between leaves them
//! where no deletion lists again, where a per-commit read left at most
//! the one entry of a writer that died between its create and its read.
//!
//! [`delete_run`]: crate::runtime_store::RuntimeStore::delete_run
//! [`RuntimeStore::use_clock`]: crate::runtime_store::RuntimeStore::use_clock

use object_store::path::Path;

use super::Runs;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::RunStatus;
use crate::runtime_store::object::folded::Folded;
use crate::runtime_store::state::Change;

/// How many step commits in a row a run's writer acknowledges on its lease
/// alone: the next one reads the pointer.
pub(super) const MAX_UNCHECKED: usize = 16;

/// The log positions of a run's commits acknowledged since the pointer
/// was last read, and their incarnation.
#[derive(Debug)]
pub(super) struct Unchecked {
    incarnation: Incarnation,
    positions: Vec<u64>,
    /// The status hints written for them (a change whose read failed).
    hints: Vec<RunStatus>,
}

impl Runs {
    /// The attempt whose fence `change` carries, if it is a step commit (no
    /// change of status): one its lease may answer for.
    pub(super) fn leased_step(change: &Change) -> Option<u32> {
        match change {
            Change::Commit(commit) if commit.status.is_none() => {
                commit.fence.as_ref().map(|fence| fence.attempt)
            }
            _ => None,
        }
    }

    /// Whether a step commit of `attempt`, just created (and `folded`
    /// after it), is acknowledged on its lease: the run's lease is that
    /// attempt's and live by the runtime's clock now, with fewer than
    /// [`MAX_UNCHECKED`] such commits since the pointer was last read.
    pub(super) fn lease_vouches(&self, run_id: &RunId, folded: &Folded, attempt: u32) -> bool {
        let Some(clock) = self.clock.get() else {
            return false;
        };
        let record = folded.state.record();
        let leased = (record.lease.as_ref())
            .is_some_and(|lease| lease.attempt == attempt && lease.is_live_at(clock.now_ms()));
        if !leased || record.attempts != attempt {
            return false;
        }
        let unchecked = self.unchecked_runs();
        let since = unchecked
            .get(run_id)
            .filter(|u| u.incarnation == folded.incarnation)
            .map_or(0, |u| u.positions.len());
        since + 1 < MAX_UNCHECKED
    }

    /// Records that the commit at `position` of `incarnation` was
    /// acknowledged on its lease.
    /// (or whose read failed, with the status hint written for it).
    pub(super) fn defer_check(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
        hinted: Option<RunStatus>,
    ) {
        let mut unchecked = self.unchecked_runs();
        let fresh = || Unchecked {
            incarnation,
            positions: Vec::new(),
            hints: Vec::new(),
        };
        let entry = unchecked.entry(run_id.clone()).or_insert_with(fresh);
        if entry.incarnation != incarnation {
            // Settled when the pointer named the new incarnation.
            *entry = fresh();
        }
        entry.positions.push(position);
        entry.hints.extend(hinted);
    }

    /// Settles the run's unchecked commits by a read of its pointer that
    /// named `current` (`None`: no run): kept if they are of that
    /// incarnation, else taken back. How many were taken back.
    pub(super) async fn settle_unchecked(
        &self,
        run_id: &RunId,
        current: Option<Incarnation>,
    ) -> usize {
        let Some(unchecked) = self.unchecked_runs().remove(run_id) else {
            return 0;
        };
        if current == Some(unchecked.incarnation) {
            return 0;
        }
        tracing::warn!(%run_id, incarnation = %unchecked.incarnation,
            commits = unchecked.positions.len(),
            "commits not confirmed by a pointer read went to a deleted run: taken back");
        (self.take_back(run_id, unchecked.incarnation, &unchecked.positions)).await;
        for status in unchecked.hints {
            (self.hints)
                .drop(status, run_id, unchecked.incarnation)
                .await;
        }
        unchecked.positions.len()
    }

    /// Deletes the log entries at `positions` of a deleted incarnation, and
    /// the checkpoints written after them (at the next positions). Best
    /// effort: the deletion that freed the positions removes what it finds.
    pub(super) async fn take_back(&self, run_id: &RunId, inc: Incarnation, positions: &[u64]) {
        let layout = self.client.layout();
        let paths: Vec<Path> = (positions.iter())
            .flat_map(|&p| {
                let after = p.saturating_add(1);
                [
                    layout.log_entry(run_id, inc, p),
                    layout.delta_newest_first(run_id, inc, after),
                    layout.checkpoint(run_id, inc, after),
                ]
            })
            .collect();
        if let Err(e) = self.client.delete_all(paths).await {
            tracing::debug!(%run_id, error = %e, "objects of a deleted run not all taken back");
        }
    }

    fn unchecked_runs(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<RunId, Unchecked>> {
        self.unchecked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
