//! The due-run index: runs that wait for something due at a known time (a
//! timer, a signal deadline, a signal that arrived for a suspended run, the
//! expiry of an attempt's lease), found by due time at a cost in proportion
//! to the runs that are due, not to all runs.
//!
//! An entry is an empty object `due/<hour>/<due_ms>_<run>.<inc>` in the memo
//! store (the path is in `layout.rs`), written *before* the commit or lease
//! release that makes the run wait, and deleted only after the run moved on,
//! so a crash can leave a stale entry but never lose a wake-up. A stale
//! entry is harmless: waking a run that is not due (ended, another
//! incarnation, a timer not yet due) writes nothing to the run and deletes
//! the entry.
//!
//! Who writes what:
//!
//! - every attempt, before it starts: an entry at its lease's first expiry,
//!   so a worker finds an attempt that crashed once its lease expired; the
//!   attempt deletes it when it ends the run or suspends (after writing the
//!   entry of the timer it suspends on, if any), and keeps it if it was
//!   interrupted (the run is then tried again when the lease would have
//!   expired);
//! - [`Runtime::signal`](super::Runtime::signal) (and `signal_with_id`,
//!   `cancel`): before it records the signal, an entry due a lease from
//!   now (should it die before the next); once the signal is recorded, an
//!   entry due now, so a run suspended in a wait for it is woken by a
//!   worker that sees the signal; then it deletes the first. (An entry due
//!   now written before the signal, as it was, could be woken before the
//!   signal landed, and moved on: the run then waited a lease, or for
//!   ever.) If the run, as it stood when the signal was recorded, had an
//!   attempt holding its lease, neither: the first entry stays, and that
//!   attempt sees the signal before it lets go (see `after_signal`);
//! - an attempt that suspended in a wait for a signal, once it released
//!   its lease, if the signal is there by then: an entry due now (a
//!   signal recorded while it held its lease found its entry moved to the
//!   lease's expiry);
//!
//!   each of these three is *tagged* ([`DueRun::tagged`]): an object of its
//!   writer's own, which no other entry of the run and due time shares. A
//!   worker deletes the entries it woke, by name, once it drove the run; an
//!   entry of the same name written again in between (create-once, so the
//!   write found it there and succeeded) went with them, and the run,
//!   suspended in a wait with no deadline and its signal recorded, slept
//!   for good (seed 3263 of the worker-loops world, once its waits had no
//!   deadline: a submit's wake-up, a signal's and the waiter's look after
//!   its suspension, all due in one millisecond);
//! - [`Worker::submit`](super::Worker::submit): an entry due now, or, to a
//!   spawned worker (whose loop starts the run at once), due a lease from
//!   now, which the attempt that loop starts keeps as its own lease entry
//!   if it starts before that entry is due (due a moment before its lease
//!   first expires: a worker that wakes it then finds the lease live and
//!   moves it, as for a renewed lease), and otherwise deletes once its own
//!   lease entry is written;
//! - a worker that wakes a run whose lease is live: an entry at the lease's
//!   expiry, before it deletes the one it woke (tagged, if it woke a
//!   tagged one, by a tag derived from that one's, so the workers that
//!   move it at once write one entry: the holder deletes its own lease
//!   entry, which is due then too, when it suspends, and may stop before
//!   it looks for the signal once more); and one that finds a run
//!   suspended on a timer: the timer's entry (again: it is create-once).
//!
//! Who deletes them: the attempt that ends or suspends the run (its own
//! lease entry, kept if the run ended and its terminal marker could not be
//! written), a worker that wakes a run that is not due (it writes the
//! marker of an ended run first: see `due_index::mark_ended`, which is
//! also why [`Runtime::recover`](super::Runtime::recover) reads this index
//! and not every marker), and a retention
//! sweep (`RetentionSweeper::sweep_once`), which deletes the entries due by
//! its time whose run has ended, is gone or is another incarnation, so a
//! deployment without a worker (runs driven by redeliveries and `recover`)
//! does not keep them for ever.

use futures::stream::BoxStream;

use super::Shared;
use super::lease::{AttemptLease, HeldLease, History};
pub use crate::due_index::DueRun;
pub(crate) use crate::due_index::{
    Later, delete, delete_all, due_after, due_at, is_stale, mark_ended, write,
};
use crate::error::Result;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::RunRecord;

impl super::Runtime {
    /// The entries of the due-run index due at or before `at_ms` (ms since
    /// the Unix epoch; `u64::MAX` for every entry), hour by hour, earliest
    /// hour first: the runs that wait for a timer, a signal deadline or a
    /// signal that arrived, and those whose attempt's lease expires then.
    /// A [`Worker`](super::Worker) wakes them; an operator lists them to
    /// see which runs wait, and until when.
    ///
    /// An entry is a hint: a run may have moved on since (the worker that
    /// wakes it deletes the entry), and a run may have several entries.
    /// Costs one delimiter listing of the index's hour folders plus a
    /// listing of each hour up to `at_ms` (a request per 1,000 entries):
    /// in proportion to the entries due, not to the runs stored.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use futures::TryStreamExt;
    /// use memo_runtime::{Error, MemoStore, RunId, clock::ManualClock, runtime_store::InMemoryRuntimeStore};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, Runtime, Workflow};
    ///
    /// let clock = Arc::new(ManualClock::new(0));
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let nap = Workflow::new("nap", |ctx: Context, _: ()| async move {
    ///     ctx.sleep(Duration::from_secs(3600)).await
    /// });
    /// let run = RunId::new("nap-1")?;
    /// assert!(matches!(runtime.run(&run, &(), &nap).await, Err(Error::Suspended { .. })));
    ///
    /// let due_now: Vec<_> = runtime.due_runs(clock.now_ms()).try_collect().await?;
    /// assert!(due_now.is_empty());
    /// let waiting: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await?;
    /// assert_eq!((waiting[0].run_id.as_str(), waiting[0].due_at_ms), ("nap-1", 3_600_000));
    /// # use memo_runtime::clock::Clock;
    /// # Ok(()) }
    /// ```
    pub fn due_runs(&self, at_ms: u64) -> BoxStream<'static, Result<DueRun>> {
        due_at(&self.shared.memo, at_ms)
    }
}

/// Starts attempt `attempt` of a run under a lease, after writing the entry
/// that wakes the run if the attempt crashes (due when its lease first
/// expires). The entry is kept if the start fails: another attempt that
/// started at the same millisecond may have written the same one. With the
/// lease, the run's history as the start left it (see `AttemptLease::start`).
///
/// An entry of the run's submit in `submitted` that is not due yet and is
/// due by the lease's first expiry (the submit was a moment ago) is that
/// entry already, and nothing is written: if the attempt crashes, the
/// worker that wakes the run a moment before its lease expires finds the
/// lease live and moves the entry to its expiry, as it moves the entry of
/// a lease that was renewed. Whichever entry it returns, the caller then
/// deletes the others of `submitted`.
pub(super) async fn start_attempt<'a>(
    shared: &'a Shared,
    run_id: &'a RunId,
    incarnation: Incarnation,
    attempt: u32,
    submitted: &[DueRun],
) -> Result<(AttemptLease<'a>, DueRun, History)> {
    let now = shared.clock.now_ms();
    let due_at_ms = now.saturating_add(shared.lease_ms());
    let reused = submitted.iter().find(|e| {
        e.tag.is_none()
            && (&e.run_id, e.incarnation) == (run_id, incarnation)
            && (now < e.due_at_ms && e.due_at_ms <= due_at_ms)
    });
    let entry = match reused {
        Some(entry) => entry.clone(),
        None => {
            let entry = DueRun::new(due_at_ms, run_id.clone(), incarnation);
            write(&shared.memo, &entry).await?;
            entry
        }
    };
    let (lease, history) = AttemptLease::start(shared, run_id, incarnation, attempt).await?;
    Ok((lease, entry, history))
}

/// Settles the index once an attempt stopped, before its lease is
/// released: an attempt that ended the run deletes its lease entry (unless
/// it could not write the run's terminal marker: see `mark_ended`); one that
/// suspended writes the entry of its timer (if it waits for one) and then
/// deletes its lease entry; one that was interrupted keeps it, so the run is
/// tried again when the lease would have expired. Best effort: an entry
/// that cannot be deleted stays, harmless.
pub(super) async fn settle(shared: &Shared, held: &HeldLease, ended: bool, lease_entry: &DueRun) {
    if ended && held.unmarked() {
        // The run ended but its marker is not written: the entry stays,
        // so that whoever wakes it writes the marker (see `mark_ended`).
        return;
    }
    if !ended {
        let Some(until_ms) = held.suspended() else {
            return;
        };
        if let Some(due_at_ms) = until_ms {
            let timer = lease_entry.moved_to(due_at_ms);
            if let Err(e) = write(&shared.memo, &timer).await {
                // The lease entry stays: whoever wakes the run then writes
                // the timer's entry.
                tracing::warn!(run_id = %timer.run_id, error = %e, "due-run entry not written");
                return;
            }
            if timer == *lease_entry {
                // A timer due when the lease would have expired: one entry.
                return;
            }
        }
    }
    if let Err(e) = delete(&shared.memo, lease_entry).await {
        tracing::debug!(run_id = %lease_entry.run_id, error = %e, "due-run entry not deleted");
    }
}

/// Deletes `entries` in one batch, best effort: an entry left behind is
/// woken again, harmlessly.
pub(super) async fn forget(shared: &Shared, entries: &[DueRun]) {
    for e in delete_all(&shared.memo, entries)
        .await
        .into_iter()
        .filter_map(Result::err)
    {
        tracing::debug!(error = %e, "due-run entry not deleted");
    }
}

/// Before a signal is recorded for run `run_id`: writes the entry that
/// wakes the run a lease from now, should the signaller die before
/// [`after_signal`] (a run suspended in a wait for the signal would
/// otherwise never be woken), and returns it. Nothing for a run that does
/// not exist or has ended (recording the signal then fails).
///
/// Not due now: a worker that woke the run before the signal is recorded
/// would find the run waiting, or its lease held, and move the entry on
/// (deleted, or due when the lease expires); the signal would then land
/// with no wake-up left before it.
pub(super) async fn before_signal(shared: &Shared, run_id: &RunId) -> Result<Option<DueRun>> {
    let due_at_ms = shared.clock.now_ms().saturating_add(shared.lease_ms());
    wake_at(shared, run_id, due_at_ms).await
}

/// Makes run `run_id` due now, for a signal recorded by an earlier call
/// (which may have stopped before [`after_signal`]). Nothing for a run
/// that does not exist or has ended.
pub(super) async fn signalled_before(shared: &Shared, run_id: &RunId) -> Result<()> {
    if wake_at(shared, run_id, shared.clock.now_ms())
        .await?
        .is_some()
    {
        shared.due_now.notify_one();
    }
    Ok(())
}

/// Writes the entry that wakes run `run_id` at `due_at_ms`, and returns it;
/// nothing for a run that does not exist or has ended.
async fn wake_at(shared: &Shared, run_id: &RunId, due_at_ms: u64) -> Result<Option<DueRun>> {
    let Some(record) = shared.store.load_run(run_id).await? else {
        return Ok(None);
    };
    if record.status.is_terminal() {
        return Ok(None);
    }
    let entry = DueRun::tagged(due_at_ms, run_id.clone(), record.incarnation);
    write(&shared.memo, &entry).await?;
    Ok(Some(entry))
}

/// Once a signal is recorded: the entry that makes the run due now, which
/// a worker can only wake with the signal there to see, in place of
/// `before`'s ([`before_signal`]). Best effort: the signal is recorded, and
/// if this entry cannot be written, `before`'s stays and wakes the run a
/// lease later.
///
/// Nothing, and `before`'s entry kept, if `run` (the run as it stood when
/// the signal was recorded) shows an attempt holding its lease: that
/// attempt sees the signal before it lets the lease go (its next commit
/// folds it, and a wait that suspends looks at the inputs again once it
/// let go, [`after_signal_wait`]), so a worker that woke the run now would
/// only find the lease held and move the entry to its expiry (a create, a
/// delete and a load of the run, fresh in a worker that never drove it).
/// `before`'s entry, due a lease from now, wakes the run should that
/// attempt die before its look, as the moved entry did.
pub(super) async fn after_signal(shared: &Shared, before: Option<DueRun>, run: Option<&RunRecord>) {
    let Some(before) = before else {
        return;
    };
    let now_ms = shared.clock.now_ms();
    let leased = run.is_some_and(|run| {
        run.incarnation == before.incarnation
            && run
                .lease
                .as_ref()
                .is_some_and(|lease| lease.is_live_at(now_ms))
    });
    if leased {
        return;
    }
    let now = DueRun::tagged(now_ms, before.run_id.clone(), before.incarnation);
    match write(&shared.memo, &now).await {
        Ok(()) => {
            shared.due_now.notify_one();
            forget(shared, &[before]).await;
        }
        Err(e) => {
            tracing::debug!(run_id = %now.run_id, error = %e, "a signal's wake-up is due a lease later");
        }
    }
}

/// After an attempt that suspended in a wait for a signal released its
/// lease: wakes the run at once if what it waits for is there now. A
/// signal recorded after the attempt last looked at the run's inputs and
/// before it released its lease found the lease held, and the worker that
/// woke the signal's entry moved it to when the lease would expire: the run
/// would wait that long. `record` is the run's with this attempt counted.
/// Best effort: without it, that moved entry still wakes the run.
pub(super) async fn after_signal_wait(runtime: &super::Runtime, record: &RunRecord) {
    let shared = &runtime.shared;
    match runtime.still_waiting(record).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            let entry = DueRun::tagged(
                shared.clock.now_ms(),
                record.run_id.clone(),
                record.incarnation,
            );
            match write(&shared.memo, &entry).await {
                Ok(()) => shared.due_now.notify_one(),
                Err(e) => {
                    tracing::debug!(run_id = %record.run_id, error = %e, "a signalled run is due when its lease would have expired");
                }
            }
        }
        Err(e) => {
            tracing::debug!(run_id = %record.run_id, error = %e, "a suspended run's inputs not read again");
        }
    }
}
