//! What a sweep pass reports: what it cleared and the runs it could not.

use super::RunSwept;
use crate::error::Result;
use crate::retention::TerminalMarker;
use crate::run_id::RunId;

/// What one sweep pass did (or, in dry-run mode, would have done).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// Runs terminal strictly before this time (ms since the Unix epoch)
    /// were expired.
    pub cutoff_ms: u64,
    /// Whether this was a dry run, which deleted nothing.
    pub dry_run: bool,
    /// Expired markers seen.
    pub markers_expired: usize,
    /// Pages of expired markers processed.
    pub pages: usize,
    /// Runs cleared completely, their markers deleted (in a dry run: runs
    /// that would be cleared).
    pub runs_cleared: usize,
    /// Memo and step-output entries deleted, by cleared and failed runs alike
    /// (in a dry run: entries of the runs that would be cleared).
    pub entries_deleted: usize,
    /// Runs whose runtime-store records were deleted (in a dry run: that
    /// would be deleted). Always 0 without a runtime store.
    pub runtime_runs_deleted: usize,
    /// The runs that could not be cleared; their markers are kept.
    pub failures: Vec<SweepFailure>,
    /// Entries of the due-run index deleted because their run had ended,
    /// was gone or was another incarnation (in a dry run: that would be
    /// deleted). Always 0 without a runtime store.
    pub due_entries_deleted: usize,
    /// Expiry markers of the shared scope (`#[memoized(scope = shared)]`)
    /// that expired before the pass's time (not the retention cutoff: a
    /// shared entry keeps its own time to live).
    pub shared_markers_expired: usize,
    /// Shared entries deleted because their time to live ran out (in a dry
    /// run: 0, see [`shared_markers_expired`](Self::shared_markers_expired)).
    /// An entry another sweeper deleted first is not counted, so over
    /// sweepers running at once each expired entry counts once.
    pub shared_entries_deleted: usize,
    /// Expired shared entries (or their markers) that could not be deleted,
    /// plus 1 if listing the expired markers failed; the next pass tries
    /// again.
    pub shared_failures: usize,
    /// Recheck markers due at the pass's time (not the retention cutoff):
    /// incarnations an earlier sweep deleted, whose folders this pass
    /// cleared once more (in a dry run: would clear).
    pub rechecks_due: usize,
    /// What those rechecks found and deleted: memo entries a stale attempt
    /// wrote after the sweep, plus one per incarnation whose runtime
    /// records were found again. 0 as a rule. Two sweeps (say, of two
    /// workers) that recheck one run at once may both count an object
    /// that both listed and deleted: on a store whose delete of a missing
    /// object succeeds (S3's does) neither can tell the delete that took
    /// it from the one that found it gone. A count, not a ledger: the
    /// object is gone either way.
    pub late_objects_deleted: usize,
    /// Rechecks that failed (or listings of the recheck markers); their
    /// markers are kept for the next pass.
    pub recheck_failures: usize,
}

/// A run a sweep pass could not clear.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepFailure {
    /// The run.
    pub run_id: RunId,
    /// When its marker says it reached a terminal state.
    pub terminal_at_ms: u64,
    /// What went wrong.
    pub message: String,
}

impl SweepReport {
    pub(super) fn empty(cutoff_ms: u64, dry_run: bool) -> SweepReport {
        SweepReport {
            cutoff_ms,
            dry_run,
            markers_expired: 0,
            pages: 0,
            runs_cleared: 0,
            entries_deleted: 0,
            runtime_runs_deleted: 0,
            failures: Vec::new(),
            due_entries_deleted: 0,
            shared_markers_expired: 0,
            shared_entries_deleted: 0,
            shared_failures: 0,
            rechecks_due: 0,
            late_objects_deleted: 0,
            recheck_failures: 0,
        }
    }

    /// Whether every expired run, every expired shared entry and every
    /// due recheck was cleared.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty() && self.shared_failures == 0 && self.recheck_failures == 0
    }

    pub(super) fn record(&mut self, marker: TerminalMarker, swept: RunSwept, result: Result<()>) {
        self.entries_deleted += swept.entries;
        self.runtime_runs_deleted += usize::from(swept.runtime_record);
        match result {
            Ok(()) => self.runs_cleared += 1,
            Err(error) => {
                tracing::warn!(
                    run_id = %marker.run_id,
                    terminal_at_ms = marker.terminal_at_ms,
                    error = %error,
                    "could not clear an expired run; its marker is kept for the next pass"
                );
                self.failures.push(SweepFailure {
                    run_id: marker.run_id,
                    terminal_at_ms: marker.terminal_at_ms,
                    message: error.to_string(),
                });
            }
        }
    }
}
