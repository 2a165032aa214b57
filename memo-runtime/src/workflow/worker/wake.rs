//! One poll of a worker: the runs submitted to its loop and the due-run
//! index's entries due now, each run woken once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;

use super::{Driven, Pick, WakeReport, Worker, due, due::DueRun};
use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::RunRecord;

/// The entries of one run incarnation a poll takes: listed from the index
/// (due by now), and submitted to this worker's loop (due a lease after
/// their submit).
#[derive(Default)]
pub(super) struct Due {
    listed: Vec<DueRun>,
    submitted: Vec<DueRun>,
}

impl Due {
    /// The entries listed from the index.
    pub(super) fn listed(&self) -> &[DueRun] {
        &self.listed
    }

    /// The entries of its submit, which go back to the loop's queue if the
    /// run is not woken after all.
    pub(super) fn into_submitted(self) -> Vec<DueRun> {
        self.submitted
    }

    fn first(&self) -> &DueRun {
        self.listed
            .first()
            .or(self.submitted.first())
            .expect("a run is woken for at least one entry")
    }
}

/// A run incarnation, as a poll wakes it once.
pub(super) type RunKey = (RunId, Incarnation);

/// What one poll took (see `Worker::take`).
pub(super) struct Taken {
    /// How many entries it took, those of the runs it skipped included.
    pub(super) entries: usize,
    /// The runs to wake, each claimed.
    pub(super) runs: Vec<(Claim, Due)>,
    /// The runs it skipped, claimed by another poll of the worker, with
    /// the entries it listed of each (left in the index).
    pub(super) skipped: Vec<(RunKey, Vec<DueRun>)>,
    /// The earliest due time its listing saw after the time it listed for
    /// (see `due::Later`); `None` if it did not list, or saw none.
    pub(super) later_ms: Option<u64>,
}

/// A run one poll of a worker (or its spawned loop) took to wake: no other
/// poll of the worker takes it until the claim is dropped, once the run
/// was woken (or the poll stopped, or crashed with its task).
pub(super) struct Claim {
    worker: Worker,
    key: RunKey,
}

impl Claim {
    /// Claims `key` for `worker`; `None` if it is claimed already.
    fn new(worker: &Worker, key: RunKey) -> Option<Claim> {
        worker.waking().insert(key.clone()).then(|| Claim {
            worker: worker.clone(),
            key,
        })
    }

    /// The run it claims.
    pub(super) fn key(&self) -> &RunKey {
        &self.key
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.worker.waking().remove(&self.key);
    }
}

/// How waking one run went.
pub(super) enum Woke {
    Resumed,
    Waiting,
    Stale,
    /// The runtime store holds no run of the id: stale if the store is
    /// proved the workers' by the time the run's waking is settled.
    NotHeld(Vec<DueRun>),
    Busy,
    Unknown,
    Failed(RunId, Error),
    /// An attempt started and stopped on a runtime error (the run stays
    /// open, tried again when that attempt's lease would have expired).
    Stopped(RunId, Error),
}

impl Worker {
    /// Wakes the runs submitted to this worker's spawned loop (see
    /// [`submit`](Worker::submit)) and those due now by the runtime's clock (at most a
    /// [`poll_batch`](super::WorkerBuilder::poll_batch) of entries, at most
    /// [`concurrency`](super::WorkerBuilder::concurrency) runs at once) and waits
    /// for their attempts. See [`Worker`] for what it costs. A
    /// [spawned](Worker::spawn) worker's loop takes and wakes runs the same
    /// way, but starts each as soon as one of its places frees rather than
    /// waiting for the last of a poll's runs.
    ///
    /// A run another poll of this worker (or its spawned loop) is waking is
    /// skipped, its entries left where they are. A run with a live lease is
    /// not driven (its entry moves to the lease's expiry); a run that is not
    /// due after all (ended, its timer not yet due, its signal not there) is
    /// left as it is, writing nothing to it; every other due run gets one
    /// attempt, which continues it past what it waited for, or takes over a
    /// crashed attempt's run.
    ///
    /// # Errors
    ///
    /// A failed listing of the index; each run's own outcome is in the
    /// report.
    pub async fn wake_due(&self) -> Result<WakeReport> {
        let taken = self.take(true).await?;
        let mut report = WakeReport {
            entries: taken.entries,
            ..WakeReport::default()
        };
        let woken: Vec<Woke> = futures::stream::iter(taken.runs)
            .map(|(claim, due)| async move {
                let _claim = claim;
                self.wake_run(due).await
            })
            .buffer_unordered(self.inner.concurrency)
            .collect()
            .await;
        // Settled after every run of the poll was loaded: a run held with
        // its entry's incarnation proves the store for the entries before it.
        for woke in woken {
            self.settle(woke, &mut report).await;
        }
        warn_not_held(report.not_held);
        Ok(report)
    }

    /// What one poll takes: the runs submitted to this worker's loop,
    /// whatever their entries' time (they are this worker's to start now),
    /// and, if `listing`, the index's entries due by the runtime's clock;
    /// by run incarnation (a run due for several reasons is woken once),
    /// each claimed for this poll. A run another poll of this worker (or
    /// its loop) has claimed is skipped: its listed entries stay in the
    /// index and its submit's go back to the loop's queue, so a worker
    /// never wakes a run it is waking already (woken twice, the run would
    /// be found held by the worker's own attempt and its entries moved to
    /// the lease's expiry).
    pub(super) async fn take(&self, listing: bool) -> Result<Taken> {
        let now = self.inner.runtime.shared.clock.now_ms();
        let submitted = std::mem::take(&mut *self.local());
        let (listed, later_ms) = if listing {
            match self.take_due(now).await {
                Ok(taken) => taken,
                Err(e) => {
                    // Kept for the next poll, as the index keeps its entries.
                    self.local().extend(submitted);
                    return Err(e);
                }
            }
        } else {
            (Vec::new(), None)
        };
        let entries = listed.len() + submitted.len();
        let mut by_run: BTreeMap<RunKey, Due> = BTreeMap::new();
        for entry in listed {
            let key = (entry.run_id.clone(), entry.incarnation);
            by_run.entry(key).or_default().listed.push(entry);
        }
        for entry in submitted {
            let key = (entry.run_id.clone(), entry.incarnation);
            by_run.entry(key).or_default().submitted.push(entry);
        }
        let mut taken = Taken {
            entries,
            runs: Vec::with_capacity(by_run.len()),
            skipped: Vec::new(),
            later_ms,
        };
        for (key, due) in by_run {
            match Claim::new(self, key.clone()) {
                Some(claim) => taken.runs.push((claim, due)),
                None => {
                    self.local().extend(due.submitted);
                    taken.skipped.push((key, due.listed));
                }
            }
        }
        Ok(taken)
    }

    /// Counts how waking one run went in `report`, and deletes the entries
    /// of a run the store does not hold once the store is proved the
    /// workers' (by this run or an earlier one).
    pub(super) async fn settle(&self, woke: Woke, report: &mut WakeReport) {
        match woke {
            Woke::Resumed => report.resumed += 1,
            Woke::Waiting => report.waiting += 1,
            Woke::Stale => report.stale += 1,
            Woke::NotHeld(entries) if self.inner.proved.load(Ordering::Acquire) => {
                self.forget(&entries).await;
                report.stale += 1;
            }
            Woke::NotHeld(_) => report.not_held += 1,
            Woke::Busy => report.busy += 1,
            Woke::Unknown => report.unknown += 1,
            Woke::Failed(run_id, e) => report.failed.push((run_id, e)),
            Woke::Stopped(run_id, e) => {
                report.resumed += 1;
                report.stopped.push((run_id, e));
            }
        }
    }

    /// The entries due by `now_ms` that this poll takes: a batch from
    /// after the cursor, and, if the index has fewer after it, the rest of
    /// the batch from the earliest entry on (up to the cursor). The cursor
    /// moves to the last entry of a full batch, and back to the start
    /// otherwise. With them, the earliest due time the listing saw after
    /// `now_ms`: entries before the cursor were due when it was set, so
    /// the listing from the cursor sees the first one not yet due, if it
    /// reads that far.
    async fn take_due(&self, now_ms: u64) -> Result<(Vec<DueRun>, Option<u64>)> {
        let memo = &self.inner.runtime.shared.memo;
        let (batch, ordered) = (self.inner.poll_batch, self.inner.ordered_listings);
        let after = self.cursor().clone();
        let later = due::Later::new();
        let mut taken: Vec<(Path, DueRun)> =
            due::due_after(memo, now_ms, after.as_ref(), ordered, &later)
                .take(batch)
                .try_collect()
                .await?;
        if let Some(after) = after.filter(|_| taken.len() < batch) {
            let wrapped: Vec<(Path, DueRun)> =
                due::due_after(memo, now_ms, None, ordered, &due::Later::new())
                    .try_take_while(|(key, _)| futures::future::ready(Ok(*key <= after)))
                    .take(batch - taken.len())
                    .try_collect()
                    .await?;
            taken.extend(wrapped);
        }
        *self.cursor() = match taken.last() {
            Some((last, _)) if taken.len() >= batch => Some(last.clone()),
            _ => None,
        };
        let taken = taken.into_iter().map(|(_, due)| due).collect();
        Ok((taken, later.earliest()))
    }

    /// Wakes the run that `due`'s entries (all of one run incarnation)
    /// name, and deletes them once the run moved on.
    pub(super) async fn wake_run(&self, due: Due) -> Woke {
        let runtime = &self.inner.runtime;
        let shared = &runtime.shared;
        let first = due.first().clone();
        let Due { listed, submitted } = due;
        let entries: Vec<DueRun> = listed.iter().chain(&submitted).cloned().collect();
        // A run submitted to this loop and due for nothing else is driven
        // on the record its submit's creation returned, as `Runtime::run`
        // drives a run it created: a load would read its pointer and its
        // log's next position (two requests) only to find what this
        // process wrote. If the run moved on since (another worker took it
        // over once the submit's entry came due), the attempt's start
        // finds that position taken and judges the run as it stands.
        let submitted_record = self
            .records()
            .remove(&(first.run_id.clone(), first.incarnation));
        let record = match submitted_record.filter(|_| listed.is_empty()) {
            Some(record) => Some(record),
            None => match shared.store.load_run(&first.run_id).await {
                Ok(record) => record,
                Err(e) => return self.failed(submitted, first.run_id, e),
            },
        };
        let Some(record) = record else {
            // Deleted, or never in this store (a mistyped prefix, with the
            // run alive in the workers' store): only a store proved the
            // workers' tells the two apart.
            return Woke::NotHeld(entries);
        };
        if record.incarnation == first.incarnation {
            self.inner.proved.store(true, Ordering::Release);
        }
        if due::is_stale(&first, Some(&record)) {
            // An ended run's marker first: the entry may be what is left
            // of an attempt that could not write it.
            if let Err(e) = due::mark_ended(&shared.memo, &first, &record).await {
                return self.failed(submitted, first.run_id, e);
            }
            self.forget(&entries).await;
            return Woke::Stale;
        }
        let drive = match self.registered(&record) {
            Ok(drive) => drive,
            Err(Pick::Unregistered(why)) => {
                tracing::warn!(run_id = %record.run_id, reason = %why, "due run not woken");
                return Woke::Unknown;
            }
            Err(_) => return Woke::Unknown,
        };
        let now = shared.clock.now_ms();
        if let Some(lease) = record.lease.as_ref().filter(|l| l.is_live_at(now)) {
            // A signal's wake-up moves as an entry of this poll's own: the
            // holder deletes its lease entry (due then too, unless renewed)
            // when it suspends, and may stop before it looks for the
            // signal once more.
            let carrier = entries.iter().find(|e| e.tag.is_some()).unwrap_or(&first);
            let later = carrier.moved_to(lease.until_ms);
            // A submit's entry, not yet due, may be `later` itself (the
            // holder started in the submit's millisecond): kept.
            if let Err(e) = self.move_entries(entries, &later).await {
                return self.failed(submitted, first.run_id, e);
            }
            return Woke::Busy;
        }
        // A submit's entries are the attempt's to delete once it has its
        // own (or kept, if no attempt starts); the listed ones are the
        // poll's, as they always were.
        let entries = listed;
        let woke = match drive(runtime.clone(), record, submitted.clone()).await {
            Driven::Ran => Woke::Resumed,
            // Not woken: the entries stay for the next poll.
            Driven::Runtime(e @ Error::Store { .. }) => {
                return self.failed(submitted, first.run_id, e);
            }
            Driven::Runtime(Error::Suspended { until_ms, .. }) => {
                if let Some(due_at_ms) = until_ms {
                    // Written by the attempt that suspended, unless it
                    // crashed first: written again, create-once.
                    let timer = DueRun::new(due_at_ms, first.run_id.clone(), first.incarnation);
                    // By another clock, the timer may be an entry woken now.
                    if let Err(e) = self.move_entries(entries, &timer).await {
                        return self.failed(submitted, first.run_id, e);
                    }
                    return Woke::Waiting;
                }
                Woke::Waiting
            }
            Driven::Runtime(Error::LeaseHeld { .. }) => Woke::Busy,
            Driven::Runtime(e) => {
                tracing::debug!(run_id = %first.run_id, error = %e, "a due run's attempt stopped");
                Woke::Stopped(first.run_id.clone(), e)
            }
        };
        self.forget(&entries).await;
        woke
    }

    /// Moves a run's wake-up from `entries` to `to`: writes it (create-once),
    /// then deletes the others (`to` may be one of them).
    async fn move_entries(&self, entries: Vec<DueRun>, to: &DueRun) -> Result<()> {
        due::write(&self.inner.runtime.shared.memo, to).await?;
        let others: Vec<_> = entries.into_iter().filter(|e| e != to).collect();
        self.forget(&others).await;
        Ok(())
    }

    /// A run not woken now: the entries of its submit go back to the
    /// loop's queue, for its next poll, as listed entries stay in the index.
    fn failed(&self, submitted: Vec<DueRun>, run_id: RunId, error: Error) -> Woke {
        self.local().extend(submitted);
        Woke::Failed(run_id, error)
    }

    pub(super) fn records(&self) -> std::sync::MutexGuard<'_, HashMap<RunKey, RunRecord>> {
        self.inner
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn local(&self) -> std::sync::MutexGuard<'_, Vec<DueRun>> {
        self.inner
            .local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn waking(&self) -> std::sync::MutexGuard<'_, HashSet<RunKey>> {
        self.inner
            .waking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn cursor(&self) -> std::sync::MutexGuard<'_, Option<Path>> {
        self.inner
            .cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Deletes `entries`, best effort: an entry left behind is woken again,
    /// harmlessly.
    async fn forget(&self, entries: &[DueRun]) {
        due::forget(&self.inner.runtime.shared, entries).await;
    }
}

/// Warns of `runs` whose entries were kept because the runtime store holds
/// neither them nor any other run the worker woke.
pub(super) fn warn_not_held(runs: usize) {
    if runs > 0 {
        tracing::warn!(
            runs,
            "due-run entries kept: the runtime store holds neither their runs nor any \
             other run this worker woke (is its prefix the one the workers use?)"
        );
    }
}
