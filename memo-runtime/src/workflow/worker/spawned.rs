//! The spawned loop of a worker: it keeps up to
//! [`concurrency`](super::WorkerBuilder::concurrency) runs going, starting a
//! due run as soon as one of its places frees.
//!
//! A poll ([`Worker::wake_due`]) wakes what it took and waits for the last
//! of those attempts; a loop made of such polls started nothing new while
//! the slowest run of a batch ran, so a run submitted meanwhile waited for
//! it (BENCHMARKS.md, "Hot spots for the next round"). The loop here takes
//! the same entries the same way (`Worker::take`) and wakes each run the
//! same way (`Worker::wake_run`), but:
//!
//! - it takes the runs submitted to it whenever a place is free, without
//!   listing the index (a poll after a submit listed it): those are its to
//!   start;
//! - it lists the index when a place is free and the poll interval has run,
//!   at once after a full batch, and at once after its runtime made a run
//!   due now (a signal sent from this process: runs made due by another
//!   process are found by the next poll, as before); with an
//!   [`idle_poll_interval`](super::WorkerBuilder::idle_poll_interval), the
//!   wait doubles after each listing that took nothing (`Pace`);
//! - a run it took waits in a queue for a place, in the order taken, and
//!   is woken in a Tokio task of its own, so that it goes on while the loop
//!   lists or deletes;
//! - a run it is waking or holds in its queue is claimed, so its polls do
//!   not take it again (`Worker::take`, as for two polls of one worker): a
//!   listed entry of it stays in the index, and if it is one the run's
//!   waking was not listed by (what made the run due meanwhile: a signal's
//!   wake-up), the loop lists again once that waking ended: it is found
//!   then, not a poll later.
//!
//! Stopped, it starts nothing more: a submit's entries not started go back
//! to the queue of submits (due for the other workers a lease after their
//! submit), listed ones stay in the index, and the runs being woken are
//! awaited (their attempts stop at a step boundary: see
//! [`WorkerHandle::shutdown`](super::WorkerHandle::shutdown)).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

use super::due::DueRun;
use super::wake::{Claim, Due, RunKey, Taken, Woke, warn_not_held};
use super::{WakeReport, Worker};

/// The runs the loop has in hand beside the tasks waking them.
#[derive(Default)]
struct InHand {
    /// Taken and claimed, waiting for a place.
    queued: VecDeque<(Claim, Due)>,
    /// The run each waking task wakes, and the entries it was listed by.
    tasks: HashMap<Id, (RunKey, Vec<DueRun>)>,
    /// Runs a listing skipped while they were being woken, for an entry
    /// their waking was not listed by (a signal's wake-up written since):
    /// it stays in the index, and the loop lists again once their waking
    /// ends.
    recheck: HashSet<RunKey>,
}

impl Worker {
    /// Polls until `stop` says so; returns what the polls did.
    pub(super) async fn poll_until_stopped(&self, mut stop: watch::Receiver<bool>) -> WakeReport {
        let concurrency = self.inner.concurrency;
        let mut total = WakeReport::default();
        let mut hand = InHand::default();
        // Each run is woken in a task of its own, so that it goes on while
        // the loop lists or deletes (dropped with the loop, as when the
        // worker's task is aborted: the attempts are dropped where they are).
        let mut running: JoinSet<Woke> = JoinSet::new();
        // Runs kept since the last listing because the store held none of
        // them (warned of once a listing, as a poll warns).
        let mut not_held = 0;
        let mut list_now = true;
        let mut pace = Pace {
            next: Instant::now(),
            idle: 0,
        };
        loop {
            while running.len() < concurrency
                && let Some((claim, due)) = hand.queued.pop_front()
            {
                let worker = self.clone();
                let woken = (claim.key().clone(), due.listed().to_vec());
                let task = running.spawn(async move {
                    let _claim = claim;
                    worker.wake_run(due).await
                });
                hand.tasks.insert(task.id(), woken);
            }
            if *stop.borrow_and_update() {
                break;
            }
            // A free place means the queue is empty.
            let free = running.len() < concurrency;
            if free && (list_now || Instant::now() >= pace.next) {
                warn_not_held(std::mem::take(&mut not_held));
                list_now = match self.take(true).await {
                    Ok(taken) => {
                        let full = taken.entries >= self.inner.poll_batch;
                        pace.listed(self, taken.entries, taken.later_ms);
                        hand.hold(taken, &mut total);
                        full
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "due-run index not listed");
                        pace.next = self.next_listing(pace.idle, None);
                        false
                    }
                };
                continue;
            }
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                Some(joined) = running.join_next_with_id(), if !running.is_empty() => {
                    let (woke, recheck) = hand.settled(joined);
                    list_now |= recheck;
                    not_held += self.settle_one(woke, &mut total).await;
                    pace.busy(self);
                }
                () = self.inner.submitted.notified(), if free => {
                    // The local queue only: no request.
                    if let Ok(taken) = self.take(false).await {
                        hand.hold(taken, &mut total);
                    }
                    pace.busy(self);
                }
                () = self.inner.runtime.shared.due_now.notified(), if free => list_now = true,
                () = tokio::time::sleep_until(pace.next), if free => {}
            }
        }
        for (_, due) in hand.queued.drain(..) {
            self.local().extend(due.into_submitted());
        }
        while let Some(joined) = running.join_next_with_id().await {
            let (woke, _) = hand.settled(joined);
            not_held += self.settle_one(woke, &mut total).await;
        }
        warn_not_held(not_held);
        total
    }

    /// Settles one run's waking into `total` (warning of a failure, as a
    /// poll does); 1 if its entries were kept because the store does not
    /// hold the run.
    async fn settle_one(&self, woke: Option<Woke>, total: &mut WakeReport) -> usize {
        let Some(woke) = woke else {
            return 0;
        };
        if let Woke::Failed(run_id, e) = &woke {
            tracing::warn!(%run_id, error = %e, "due run not woken; the next poll tries again");
        }
        let before = total.not_held;
        self.settle(woke, total).await;
        total.not_held - before
    }

    /// When to list next, after `idle` listings in a row that took no
    /// entry, the last of which saw `later_ms` as the earliest due time
    /// after its own: a poll interval from now, or, with an
    /// [`idle_poll_interval`](super::WorkerBuilder::idle_poll_interval),
    /// twice that for each idle listing up to that maximum; each with a
    /// random jitter of up to a quarter of it, so that workers started
    /// together do not poll together. But no later than `later_ms` (or a
    /// poll interval, if that is further), with the poll interval's
    /// jitter. A wait too long for the clock (`Duration::MAX`) is a year:
    /// the timer cannot be set later than about two years anyway.
    fn next_listing(&self, idle: u32, later_ms: Option<u64>) -> Instant {
        let interval = self.inner.poll_interval;
        let share = (crate::run_id::unique_token() % 1024) as f64 / 4096.0;
        let jitter = |wait: Duration| wait.mul_f64(share);
        let mut wait = interval.saturating_add(jitter(interval));
        if let Some(max) = self.inner.idle_poll_interval.filter(|max| *max > interval) {
            let backed_off = interval
                .max(Duration::from_millis(1))
                .saturating_mul(2u32.saturating_pow(idle))
                .min(max);
            let until_later = later_ms.map(|later_ms| {
                let now_ms = self.inner.runtime.shared.clock.now_ms();
                let until = Duration::from_millis(later_ms.saturating_sub(now_ms));
                until.max(interval).saturating_add(jitter(interval))
            });
            wait = backed_off
                .saturating_add(jitter(backed_off))
                .min(until_later.unwrap_or(Duration::MAX));
        }
        let now = Instant::now();
        now.checked_add(wait)
            .unwrap_or(now + Duration::from_secs(365 * 24 * 3600))
    }
}

/// When the loop lists the due-run index next.
struct Pace {
    next: Instant,
    /// Listings in a row that took no entry.
    idle: u32,
}

impl Pace {
    /// After a listing that took `entries` and saw `later_ms` as the
    /// earliest due time after its own.
    fn listed(&mut self, worker: &Worker, entries: usize, later_ms: Option<u64>) {
        self.idle = if entries == 0 {
            self.idle.saturating_add(1)
        } else {
            0
        };
        self.next = worker.next_listing(self.idle, later_ms);
    }

    /// Work that may have written entries (a run's waking ended, a run
    /// submitted) ends an idle streak: the next listing comes a poll
    /// interval from now at the latest.
    fn busy(&mut self, worker: &Worker) {
        if self.idle > 0 {
            self.idle = 0;
            self.next = self.next.min(worker.next_listing(0, None));
        }
    }
}

impl InHand {
    /// Queues what a poll took, counted in `total`, and notes the runs of
    /// its own it skipped for an entry their waking was not listed by.
    fn hold(&mut self, taken: Taken, total: &mut WakeReport) {
        total.entries += taken.entries;
        for (key, listed) in taken.skipped {
            // A run another poll of the worker claimed is never settled
            // here, and one queued here is woken by the entries it was
            // taken with only.
            let known = self
                .tasks
                .values()
                .find(|(k, _)| *k == key)
                .map(|(_, entries)| entries.as_slice())
                .or_else(|| {
                    let queued = self.queued.iter().find(|(c, _)| *c.key() == key);
                    queued.map(|(_, due)| due.listed())
                });
            if let Some(known) = known
                && listed.iter().any(|entry| !known.contains(entry))
            {
                self.recheck.insert(key);
            }
        }
        self.queued.extend(taken.runs);
    }

    /// The end of one waking task: its outcome (none if it panicked: a
    /// defect, as an attempt catches its workflow's panics; logged, and
    /// the run's entries in the index stay for a later poll), and whether
    /// a listing skipped its run meanwhile.
    fn settled(&mut self, joined: Result<(Id, Woke), JoinError>) -> (Option<Woke>, bool) {
        let id = match &joined {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        let recheck = self
            .tasks
            .remove(&id)
            .is_some_and(|(key, _)| self.recheck.remove(&key));
        match joined {
            Ok((_, woke)) => (Some(woke), recheck),
            Err(e) => {
                tracing::error!(error = %e, "waking a due run panicked; the next poll tries again");
                (None, recheck)
            }
        }
    }
}
