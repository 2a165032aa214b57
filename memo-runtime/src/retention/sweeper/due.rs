//! A pass's tidying of the due-run index.

use futures::stream::{StreamExt, TryStreamExt};

use super::{RetentionSweeper, SweepReport};
use crate::due_index::{self, DueRun};
use crate::runtime_store::RuntimeStore;

/// How many stale entries a pass deletes in one `delete_stream`: as many as
/// one S3 `DeleteObjects` request takes.
const DUE_BATCH: usize = 1_000;

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
    /// a worker's poll costs), `concurrency` loads at once, and a
    /// `delete_stream` per 1,000 stale entries (on S3 one request each). An
    /// entry of a run that still waits stays, and so does one due after
    /// `now_ms` (a later pass, or a worker, deletes it once due). Best effort: a failure is logged and the entry is left for
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
        // Each entry's run is loaded (and an ended run's marker written)
        // `concurrency` entries at once, in the listing's order.
        let mut checked = due_index::due_at(&config.memo_store, now_ms)
            .map(|due| async move {
                let due = due?;
                let verdict = self.check_due(runs.as_ref(), &due).await;
                Ok::<_, crate::Error>((due, verdict))
            })
            .buffered(config.concurrency);
        let mut stale = Vec::new();
        let mut of_absent_runs = Vec::new();
        loop {
            let (due, verdict) = match checked.try_next().await {
                Ok(Some(checked)) => checked,
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "listing the due-run index failed; its tidying stops here");
                    break;
                }
            };
            match verdict {
                Verdict::Keep => continue,
                Verdict::Stale => stale.push(due),
                Verdict::OfAbsentRun if self.proves_store() => stale.push(due),
                Verdict::OfAbsentRun => of_absent_runs.push(due),
            }
            if stale.len() == DUE_BATCH {
                self.delete_due(std::mem::take(&mut stale), report).await;
            }
        }
        drop(checked);
        if self.proves_store() {
            stale.append(&mut of_absent_runs);
        } else if !of_absent_runs.is_empty() {
            tracing::warn!(
                entries = of_absent_runs.len(),
                "due-run entries kept: the runtime store holds neither their runs nor \
                 any other run this pass met (is its prefix the one the workers use?)"
            );
        }
        for batch in stale.chunks(DUE_BATCH) {
            self.delete_due(batch.to_vec(), report).await;
        }
    }

    /// What to do with entry `due`: reads its run (a run held as this
    /// incarnation proves the store), and for a stale entry of an ended
    /// run writes the run's terminal marker first (outside a dry run),
    /// since the entry may be all that is left of an attempt that ended the
    /// run without writing it.
    async fn check_due(&self, runs: &dyn RuntimeStore, due: &DueRun) -> Verdict {
        let record = match runs.load_run(&due.run_id).await {
            Ok(record) => record,
            Err(error) => {
                tracing::warn!(run_id = %due.run_id, %error, "due-run entry kept: its run cannot be read");
                return Verdict::Keep;
            }
        };
        if record
            .as_ref()
            .is_some_and(|run| run.incarnation == due.incarnation)
        {
            self.store_proved();
        }
        if !due_index::is_stale(due, record.as_ref()) {
            return Verdict::Keep;
        }
        let Some(record) = &record else {
            return Verdict::OfAbsentRun;
        };
        if !self.config.dry_run
            && let Err(error) = due_index::mark_ended(&self.config.memo_store, due, record).await
        {
            tracing::warn!(run_id = %due.run_id, %error, "due-run entry kept: its run's terminal marker cannot be written");
            return Verdict::Keep;
        }
        Verdict::Stale
    }

    /// Deletes stale entries in one `delete_stream` (in a dry run: counts
    /// them).
    async fn delete_due(&self, dues: Vec<DueRun>, report: &mut SweepReport) {
        if self.config.dry_run {
            report.due_entries_deleted += dues.len();
            return;
        }
        let deleted = due_index::delete_all(&self.config.memo_store, &dues).await;
        for (due, deleted) in dues.iter().zip(deleted) {
            match deleted {
                Ok(()) => report.due_entries_deleted += 1,
                Err(error) => {
                    tracing::warn!(run_id = %due.run_id, %error, "stale due-run entry not deleted");
                }
            }
        }
    }
}

/// What a pass does with one due-run entry.
enum Verdict {
    /// Its run still waits, or could not be read, or its marker could not
    /// be written: the entry stays.
    Keep,
    /// Its run has ended (its marker is written) or is another
    /// incarnation now: the entry goes.
    Stale,
    /// The runtime store holds no run of the id: the entry goes only once
    /// the store is proved the workers'.
    OfAbsentRun,
}
