//! A sweeper in the background: the task that runs a pass every interval,
//! its handle, and the totals it reports.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::RetentionSweeper;
use super::report::SweepReport;
use crate::error::Result;

impl RetentionSweeper {
    /// Starts a background task that runs a pass at the clock's time, waits
    /// `interval`, and repeats, until [`SweeperHandle::shutdown`] is called
    /// or the Tokio runtime shuts down. Dropping the handle detaches the
    /// sweeper: it keeps sweeping. A failed pass is logged and retried at the
    /// next interval.
    ///
    /// # Panics
    ///
    /// If called outside a Tokio runtime.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use memo_runtime::{MemoStore, object_store::memory::InMemory, retention::RetentionSweeper};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    /// let sweeper = RetentionSweeper::builder(store, Duration::from_secs(3600)).build();
    /// let handle = sweeper.spawn(Duration::from_secs(300));
    /// // ... serve traffic ...
    /// let summary = handle.shutdown().await;
    /// assert!(summary.passes <= 1);
    /// # Ok(()) }
    /// ```
    pub fn spawn(&self, interval: Duration) -> SweeperHandle {
        let (stop, stop_rx) = watch::channel(false);
        let (progress_tx, progress) = watch::channel(SweeperSummary::default());
        // The task holds a sender too, so that dropping the handle (and its
        // sender) detaches the sweeper rather than stopping it.
        let detached = stop.clone();
        let passes = self.clone().run_passes(interval, stop_rx, progress_tx);
        let task = tokio::spawn(async move {
            let summary = passes.await;
            drop(detached);
            summary
        });
        SweeperHandle {
            stop,
            progress,
            task,
        }
    }

    async fn run_passes(
        self,
        interval: Duration,
        mut stop: watch::Receiver<bool>,
        progress: watch::Sender<SweeperSummary>,
    ) -> SweeperSummary {
        let mut summary = SweeperSummary::default();
        while !*stop.borrow_and_update() {
            // A pass is never interrupted: stopping is only checked between
            // passes, so a shutdown never leaves a run half-cleared on purpose.
            let outcome = self.sweep_now().await;
            summary.record(outcome);
            progress.send_replace(summary.clone());
            tokio::select! {
                biased;
                // A shutdown (the task's own sender keeps the channel open).
                _ = stop.changed() => break,
                () = tokio::time::sleep(interval) => {}
            }
        }
        tracing::info!(passes = summary.passes, "retention sweeper stopped");
        summary
    }
}

/// What a background sweeper has done so far: totals over its passes and
/// the latest outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweeperSummary {
    /// Passes finished, failed ones included.
    pub passes: u64,
    /// Passes that failed as a whole (their marker listing failed).
    pub failed_passes: u64,
    /// Runs cleared, over all passes.
    pub runs_cleared: u64,
    /// Entries deleted, over all passes.
    pub entries_deleted: u64,
    /// Shared entries deleted because their time to live ran out, over all
    /// passes ([`SweepReport::shared_entries_deleted`]).
    pub shared_entries_deleted: u64,
    /// Runs that could not be cleared, over all passes (a run that failed
    /// twice counts twice).
    pub run_failures: u64,
    /// What the rechecks of swept runs deleted, over all passes
    /// ([`SweepReport::late_objects_deleted`]): what stale attempts wrote
    /// after the sweeps, 0 as a rule.
    pub late_objects_deleted: u64,
    /// Rechecks that failed, over all passes
    /// ([`SweepReport::recheck_failures`]).
    pub recheck_failures: u64,
    /// The report of the latest pass that did not fail as a whole.
    pub last_report: Option<SweepReport>,
    /// The error of the latest pass, if it failed as a whole.
    pub last_error: Option<String>,
}

impl SweeperSummary {
    fn record(&mut self, outcome: Result<SweepReport>) {
        self.passes += 1;
        match outcome {
            Ok(report) => {
                self.runs_cleared += report.runs_cleared as u64;
                self.entries_deleted += report.entries_deleted as u64;
                self.shared_entries_deleted += report.shared_entries_deleted as u64;
                self.run_failures += report.failures.len() as u64;
                self.late_objects_deleted += report.late_objects_deleted as u64;
                self.recheck_failures += report.recheck_failures as u64;
                self.last_report = Some(report);
                self.last_error = None;
            }
            Err(error) => {
                tracing::error!(error = %error, "sweep pass failed; retrying at the next interval");
                self.failed_passes += 1;
                self.last_error = Some(error.to_string());
            }
        }
    }
}

/// Controls a background sweeper started by [`RetentionSweeper::spawn`].
///
/// Dropping the handle detaches the sweeper, which keeps sweeping until the
/// Tokio runtime shuts down; [`shutdown`](Self::shutdown) stops it (after
/// its current pass) and waits.
#[derive(Debug)]
pub struct SweeperHandle {
    stop: watch::Sender<bool>,
    progress: watch::Receiver<SweeperSummary>,
    task: JoinHandle<SweeperSummary>,
}

impl SweeperHandle {
    /// What the sweeper has done so far.
    pub fn summary(&self) -> SweeperSummary {
        self.progress.borrow().clone()
    }

    /// A receiver that sees the summary change after every pass: wait for a
    /// pass with [`watch::Receiver::wait_for`].
    pub fn subscribe(&self) -> watch::Receiver<SweeperSummary> {
        self.progress.clone()
    }

    /// Stops the sweeper and waits for it: a pass in progress is finished
    /// first, no new one starts. Returns what it did over its lifetime.
    ///
    /// # Panics
    ///
    /// Resumes the panic if a pass panicked.
    pub async fn shutdown(self) -> SweeperSummary {
        self.stop.send_replace(true);
        match self.task.await {
            Ok(summary) => summary,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Cancelled because the runtime is shutting down.
            Err(_) => self.progress.borrow().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SweepReport, SweeperSummary};

    #[test]
    fn a_summary_totals_the_rechecks_of_its_passes() {
        let mut summary = SweeperSummary::default();
        let mut report = SweepReport::empty(0, false);
        report.late_objects_deleted = 2;
        report.recheck_failures = 1;
        summary.record(Ok(report.clone()));
        summary.record(Ok(report));
        assert_eq!(
            (summary.late_objects_deleted, summary.recheck_failures),
            (4, 2)
        );
    }
}
