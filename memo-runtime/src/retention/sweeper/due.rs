//! A pass's tidying of the due-run index.

use futures::stream::TryStreamExt;

use super::{RetentionSweeper, SweepReport};
use crate::due_index::{self, DueRun};

impl RetentionSweeper {
    /// Deletes the due-run entries due by `now_ms` whose run has ended, is
    /// gone, or is another incarnation now (in a dry run: counts them), so
    /// the index does not keep what the runs it names left behind: an
    /// interrupted attempt's entry once another attempt ended the run, a
    /// signal's entry once a redelivery ran the run, the entries of a run
    /// this pass cleared. An ended run's terminal marker is written before
    /// its entry is deleted (it is there as a rule: a create that finds it),
    /// since the entry may be what is left of an attempt that could not
    /// write it. Needs a runtime store to read the runs; costs the
    /// listing of the entries due by `now_ms` and a run load per entry (what
    /// a worker's poll costs). An entry of a run that still waits stays, and
    /// so does one due after `now_ms` (a later pass, or a worker, deletes it
    /// once due). Best effort: a failure is logged and the entry is left for
    /// the next pass; a stale entry is harmless meanwhile.
    ///
    /// An entry whose run the runtime store does not hold at all is deleted
    /// only once the store is proved the workers' (see the `proof`
    /// module): a store at another prefix holds none of the workers' runs,
    /// and the entry of a run alive there (waiting for a timer or a signal,
    /// or the only trace of a run that ended without its marker) must stay.
    /// The entry of a run with this incarnation held proves the store;
    /// entries met before the proof wait for the end of the listing (no
    /// request more: a run does not come back once gone, so they are
    /// deleted without a second load). Without the proof they are kept,
    /// with a warning.
    pub(super) async fn tidy_due_index(&self, now_ms: u64, report: &mut SweepReport) {
        let config = &*self.config;
        let Some(runs) = &config.runtime_store else {
            return;
        };
        let mut entries = due_index::due_at(&config.memo_store, now_ms);
        let mut of_absent_runs = Vec::new();
        loop {
            let due = match entries.try_next().await {
                Ok(Some(due)) => due,
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "listing the due-run index failed; its tidying stops here");
                    break;
                }
            };
            let record = match runs.load_run(&due.run_id).await {
                Ok(record) => record,
                Err(error) => {
                    tracing::warn!(run_id = %due.run_id, %error, "due-run entry kept: its run cannot be read");
                    continue;
                }
            };
            if record
                .as_ref()
                .is_some_and(|run| run.incarnation == due.incarnation)
            {
                self.store_proved();
            }
            if !due_index::is_stale(&due, record.as_ref()) {
                continue;
            }
            let Some(record) = &record else {
                if self.proves_store() {
                    self.delete_due(&due, report).await;
                } else {
                    of_absent_runs.push(due);
                }
                continue;
            };
            if !config.dry_run {
                // The entry may be all that is left of an attempt that
                // ended the run without writing its marker: the marker
                // first.
                if let Err(error) = due_index::mark_ended(&config.memo_store, &due, record).await {
                    tracing::warn!(run_id = %due.run_id, %error, "due-run entry kept: its run's terminal marker cannot be written");
                    continue;
                }
            }
            self.delete_due(&due, report).await;
        }
        if !self.proves_store() {
            if !of_absent_runs.is_empty() {
                tracing::warn!(
                    entries = of_absent_runs.len(),
                    "due-run entries kept: the runtime store holds neither their runs nor \
                     any other run this pass met (is its prefix the one the workers use?)"
                );
            }
            return;
        }
        for due in &of_absent_runs {
            self.delete_due(due, report).await;
        }
    }

    /// Deletes a stale entry (in a dry run: counts it).
    async fn delete_due(&self, due: &DueRun, report: &mut SweepReport) {
        if self.config.dry_run {
            report.due_entries_deleted += 1;
            return;
        }
        match due_index::delete(&self.config.memo_store, due).await {
            Ok(()) => report.due_entries_deleted += 1,
            Err(error) => {
                tracing::warn!(run_id = %due.run_id, %error, "stale due-run entry not deleted");
            }
        }
    }
}
