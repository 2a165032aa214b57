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
//!   process are found by the next poll, as before);
//! - a run it took waits in a queue for a place, in the order taken, and
//!   is woken in a Tokio task of its own, so that it goes on while the loop
//!   lists or deletes;
//! - a run it is waking or holds in its queue is not taken again: a listed
//!   entry of it stays in the index for a later poll (where, the run moved
//!   on by then, it is woken or found stale), and a submit's entry goes
//!   back to the loop's queue of submits. (Woken twice, the run would be
//!   found held by this worker's own attempt and its entries moved to the
//!   lease's expiry.)
//!
//! Stopped, it starts nothing more: a submit's entries not started go back
//! to the queue of submits (due for the other workers a lease after their
//! submit), listed ones stay in the index, and the runs being woken are
//! awaited (their attempts stop at a step boundary: see
//! [`WorkerHandle::shutdown`](super::WorkerHandle::shutdown)).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

use super::wake::{Due, RunKey, Woke, warn_not_held};
use super::{WakeReport, Worker};

/// The runs the loop has in hand: being woken, or taken and waiting for a
/// place.
#[derive(Default)]
struct InHand {
    keys: HashSet<RunKey>,
    queued: VecDeque<(RunKey, Due)>,
    /// The run each waking task wakes.
    tasks: HashMap<Id, RunKey>,
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
        let mut next_listing = Instant::now();
        loop {
            while running.len() < concurrency
                && let Some((key, due)) = hand.queued.pop_front()
            {
                let worker = self.clone();
                let task = running.spawn(async move { worker.wake_run(due).await });
                hand.tasks.insert(task.id(), key);
            }
            if *stop.borrow_and_update() {
                break;
            }
            // A free place means the queue is empty.
            let free = running.len() < concurrency;
            if free && (list_now || Instant::now() >= next_listing) {
                warn_not_held(std::mem::take(&mut not_held));
                list_now = match self.take(true).await {
                    Ok((entries, runs)) => {
                        total.entries += entries;
                        self.hold(&mut hand, runs);
                        entries >= self.inner.poll_batch
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "due-run index not listed");
                        false
                    }
                };
                next_listing = self.next_listing();
                continue;
            }
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                Some(joined) = running.join_next_with_id(), if !running.is_empty() => {
                    not_held += self.settle_joined(&mut hand, joined, &mut total).await;
                }
                () = self.inner.submitted.notified(), if free => {
                    // The local queue only: no request.
                    if let Ok((entries, runs)) = self.take(false).await {
                        total.entries += entries;
                        self.hold(&mut hand, runs);
                    }
                }
                () = self.inner.runtime.shared.due_now.notified(), if free => list_now = true,
                () = tokio::time::sleep_until(next_listing), if free => {}
            }
        }
        for (_, due) in hand.queued.drain(..) {
            self.local().extend(due.into_submitted());
        }
        while let Some(joined) = running.join_next_with_id().await {
            not_held += self.settle_joined(&mut hand, joined, &mut total).await;
        }
        warn_not_held(not_held);
        total
    }

    /// Takes `runs` into `hand`, but for those it holds already: a listed
    /// entry of one of those stays in the index, a submit's goes back to
    /// the queue of submits (see the module's notes); one still queued
    /// gets them.
    fn hold(&self, hand: &mut InHand, runs: BTreeMap<RunKey, Due>) {
        for (key, due) in runs {
            if hand.keys.insert(key.clone()) {
                hand.queued.push_back((key, due));
            } else if let Some((_, queued)) = hand.queued.iter_mut().find(|(k, _)| *k == key) {
                queued.merge(due);
            } else {
                self.local().extend(due.into_submitted());
            }
        }
    }

    /// Settles one run's waking into `total` (warning of a failure, as a
    /// poll does); 1 if its entries were kept because the store does not
    /// hold the run. A waking that panicked (a defect: an attempt catches
    /// its workflow's panics) is logged; the run's entries in the index
    /// stay for a later poll.
    async fn settle_joined(
        &self,
        hand: &mut InHand,
        joined: Result<(Id, Woke), JoinError>,
        total: &mut WakeReport,
    ) -> usize {
        let id = match &joined {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        if let Some(key) = hand.tasks.remove(&id) {
            hand.keys.remove(&key);
        }
        let woke = match joined {
            Ok((_, woke)) => woke,
            Err(e) => {
                tracing::error!(error = %e, "waking a due run panicked; the next poll tries again");
                return 0;
            }
        };
        if let Woke::Failed(run_id, e) = &woke {
            tracing::warn!(%run_id, error = %e, "due run not woken; the next poll tries again");
        }
        let before = total.not_held;
        self.settle(woke, total).await;
        total.not_held - before
    }

    /// When to list next: a poll interval from now plus a random jitter of
    /// up to a quarter of it, so that workers started together do not poll
    /// together. An interval too long for the clock (`Duration::MAX`) is a
    /// year: the timer cannot be set later than about two years anyway.
    fn next_listing(&self) -> Instant {
        let interval = self.inner.poll_interval;
        let jitter = interval.mul_f64((crate::run_id::unique_token() % 1024) as f64 / 4096.0);
        let now = Instant::now();
        now.checked_add(interval.saturating_add(jitter))
            .unwrap_or(now + Duration::from_secs(365 * 24 * 3600))
    }
}
