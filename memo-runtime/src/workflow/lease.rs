//! Attempt leases: an attempt renews its run's lease while it runs and
//! releases it however it ends, so another worker takes a run over only
//! after its holder crashed or hung for a whole lease.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::{CANCEL_SIGNAL, Shared};
use crate::codec;
use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{Commit, Fence, InputRecord, StatusChange, StepReceipt};

/// The run's receipts and inputs as an attempt's start left them: what the
/// attempt replays, and where it first looks for a cancellation (a wait
/// reads the run's signals afresh).
pub(super) type History = (Vec<StepReceipt>, Vec<InputRecord>);

/// How many times [`HeldLease::ensure_live`] renews a lease that expired
/// (again) before it gives the attempt up.
const RENEWALS_BEFORE_A_BODY: u32 = 3;

/// What an attempt knows of its lease: its fence and the expiry of its
/// last start or renewal. Shared with the attempt's [`Context`], which
/// starts no step body on a lease that may have expired.
///
/// [`Context`]: super::Context
#[derive(Debug)]
pub(super) struct HeldLease {
    fence: Fence,
    until_ms: AtomicU64,
    /// Held across each renewal, so that an attempt's renewals (the
    /// periodic one and a step's) do not overlap: the expiry the attempt
    /// believes is then always the one the store applied last. Overlapping,
    /// a slow renewal could land after a later one and cut the lease short
    /// in the store while the attempt goes on under the later expiry.
    renewing: tokio::sync::Mutex<()>,
    /// The reason of the run's cancellation, once the attempt has seen it
    /// requested (at its start, at a lease renewal, in a wait's poll).
    cancel: std::sync::Mutex<Option<String>>,
    /// Set when the attempt suspends ([`Error::Suspended`]), with the time
    /// its wait ends, if it has one: the due-run index's entry for it.
    suspended: std::sync::Mutex<Option<Option<u64>>>,
    /// Set when the attempt suspends in a wait for a signal (not for a
    /// timer alone).
    awaits_signal: AtomicBool,
    /// Set when the attempt ended the run but could not write its terminal
    /// marker: the attempt's due-run entry then stays, so that a worker, a
    /// sweep or a recovery finds the run and writes the marker.
    unmarked: AtomicBool,
    /// Set (under `renewing`) once the attempt committed the run's
    /// terminal status: the lease is over, and a renewal after it would be
    /// refused (the run ended) and taken for a lost lease while the
    /// attempt, which ended the run itself, writes its marker.
    ended: AtomicBool,
}

impl HeldLease {
    /// A lease no store knows of, for a context that commits nothing (the
    /// replay check's).
    pub(super) fn detached(fence: Fence) -> HeldLease {
        HeldLease {
            fence,
            until_ms: AtomicU64::new(0),
            renewing: tokio::sync::Mutex::new(()),
            cancel: std::sync::Mutex::new(None),
            suspended: std::sync::Mutex::new(None),
            awaits_signal: AtomicBool::new(false),
            unmarked: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        }
    }

    /// The attempt's fence, which its commits carry.
    pub(super) fn fence(&self) -> Fence {
        self.fence
    }

    /// Why the run was cancelled, if the attempt has seen it requested.
    pub(super) fn cancel_requested(&self) -> Option<String> {
        self.cancel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Notes that the attempt suspends in a wait that ends at `until_ms`
    /// (if it has an end), for `signal` (empty for a timer alone).
    pub(super) fn note_suspended(&self, until_ms: Option<u64>, signal: &str) {
        *self.suspended.lock().unwrap_or_else(|e| e.into_inner()) = Some(until_ms);
        self.awaits_signal
            .store(!signal.is_empty(), Ordering::SeqCst);
    }

    /// Whether the attempt suspended in a wait for a signal.
    pub(super) fn awaits_signal(&self) -> bool {
        self.awaits_signal.load(Ordering::SeqCst)
    }

    /// `Some(until_ms)` if the attempt suspended (see
    /// [`note_suspended`](Self::note_suspended)).
    pub(super) fn suspended(&self) -> Option<Option<u64>> {
        *self.suspended.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that the attempt ended the run without writing its terminal
    /// marker.
    pub(super) fn note_unmarked(&self) {
        self.unmarked.store(true, Ordering::SeqCst);
    }

    /// Whether the attempt ended the run without writing its terminal
    /// marker (see [`note_unmarked`](Self::note_unmarked)).
    pub(super) fn unmarked(&self) -> bool {
        self.unmarked.load(Ordering::SeqCst)
    }

    /// Notes the cancellation request among `inputs`, if there is one.
    pub(super) fn note_cancel(&self, inputs: &[InputRecord]) {
        if let Some(reason) = cancel_reason(inputs) {
            *self.cancel.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
        }
    }

    /// Makes sure the lease is live by the local clock before the attempt
    /// starts a body (a step's or a memoized call's): at once if it is,
    /// else by renewing it. On `Ok` the lease is live now; the caller starts
    /// the body with no await in between.
    ///
    /// A renewal awaits a commit, and the clock may jump past the renewed
    /// lease meanwhile (a pause, a slow write): so each renewal is checked
    /// again, and an attempt whose lease keeps expiring stops rather than
    /// start a body another attempt may be taking over.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] if another attempt took the run over (or ended
    /// it) meanwhile, or if the lease expired again after each of
    /// [`RENEWALS_BEFORE_A_BODY`] renewals; a store error if a renewal
    /// failed.
    pub(super) async fn ensure_live(&self, shared: &Shared, run_id: &RunId) -> Result<()> {
        for _ in 0..RENEWALS_BEFORE_A_BODY {
            if self.is_live(shared) {
                return Ok(());
            }
            self.renew(shared, run_id).await?;
        }
        if self.is_live(shared) {
            return Ok(());
        }
        Err(Error::LeaseLost {
            run_id: run_id.to_string(),
            attempt: self.fence.attempt,
            reason: format!(
                "the lease expired again after each of {RENEWALS_BEFORE_A_BODY} renewals"
            ),
        })
    }

    /// Whether more than the clock skew the runtime allows
    /// (`RuntimeBuilder::max_clock_skew`) is left of the lease by the local
    /// clock now: then it is live by every process's clock. A lease no
    /// store knows of ([`detached`](Self::detached)) never is.
    pub(super) fn outlasts_clock_skew(&self, shared: &Shared) -> bool {
        let until_ms = self.until_ms.load(Ordering::Acquire);
        let now_ms = shared.clock.now_ms();
        // A detached lease's expiry is 0: never live.
        crate::runtime_store::lease_is_live(until_ms, now_ms)
            && until_ms.saturating_sub(now_ms) > shared.max_clock_skew_ms()
    }

    /// Whether the lease is live by the local clock now.
    pub(super) fn is_live(&self, shared: &Shared) -> bool {
        crate::runtime_store::lease_is_live(
            self.until_ms.load(Ordering::Acquire),
            shared.clock.now_ms(),
        )
    }

    /// Commits the run's terminal status (`commit`) with no renewal in
    /// flight, and ends the renewals if it succeeded: the attempt ended the
    /// run itself, and nothing it does after (its marker, its cost record)
    /// is a lost lease. A renewal that landed before the commit was
    /// applied before it, so the store refused neither.
    pub(super) async fn end_run<T>(&self, commit: impl Future<Output = Result<T>>) -> Result<T> {
        let _renewing = self.renewing.lock().await;
        let committed = commit.await;
        if committed.is_ok() {
            self.ended.store(true, Ordering::Release);
        }
        committed
    }

    /// Whether the attempt committed the run's terminal status.
    pub(super) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    async fn renew(&self, shared: &Shared, run_id: &RunId) -> Result<()> {
        let _renewing = self.renewing.lock().await;
        if self.has_ended() {
            return Ok(());
        }
        let now = shared.clock.now_ms();
        let until_ms = now.saturating_add(shared.lease_ms());
        self.set_expiry(shared, run_id, now, until_ms).await?;
        self.until_ms.store(until_ms, Ordering::Release);
        Ok(())
    }

    async fn set_expiry(
        &self,
        shared: &Shared,
        run_id: &RunId,
        now: u64,
        until_ms: u64,
    ) -> Result<()> {
        let change = StatusChange::Lease {
            attempt: self.fence.attempt,
            token: self.fence.token,
            until_ms,
        };
        // A refused renewal (another attempt's fence, or a run another
        // attempt ended) means this attempt lost the run: a lease error, as
        // any lost lease is, which a queue delivers again (and the next
        // delivery answers with the run's outcome), not a conflict it would
        // count as a failed delivery.
        match shared
            .store
            .atomic_apply(run_id, Commit::status(change, now))
            .await
        {
            Ok(_) => Ok(()),
            Err(Error::Conflict { reason, .. }) => Err(Error::LeaseLost {
                run_id: run_id.to_string(),
                attempt: self.fence.attempt,
                reason: format!("its renewal was refused: {reason}"),
            }),
            Err(e) => Err(e),
        }
    }
}

/// The lease of one attempt of one run.
pub(super) struct AttemptLease<'a> {
    shared: &'a Shared,
    run_id: &'a RunId,
    held: Arc<HeldLease>,
}

impl<'a> AttemptLease<'a> {
    /// Starts attempt `attempt` of incarnation `incarnation` of the run
    /// under a lease held until a lease length from now.
    ///
    /// A start names an attempt number, not an incarnation, so it applies
    /// to whichever incarnation is current when it lands: if the run the
    /// caller read was deleted and its id created again since (the caller
    /// paused between its read and the start, or another task of this
    /// process read the new run into the store's cache), the start takes
    /// the new run's lease. The caller would then run the old run's steps,
    /// with the old run's memos, under the new run's lease. So the start is
    /// checked against the incarnation it landed on, and one that landed on
    /// another gives the lease back at once (the new run's own attempt
    /// starts without waiting for it to expire) and fails: nothing runs.
    ///
    /// Returns the lease with the run's [`History`] as the start left it,
    /// read with the start ([`RuntimeStore::atomic_apply_and_load`]: no
    /// read more on object storage), so the attempt reads nothing before
    /// its workflow runs. A receipt or input committed before the start is
    /// in it; only an input appended after the start may be missing, as
    /// from a read made just after it: a wait reads the signals afresh, and
    /// a cancellation appended later is seen as one that comes while the
    /// workflow runs (at a renewal, a wait or `Context::is_cancelled`).
    ///
    /// [`RuntimeStore::atomic_apply_and_load`]: crate::runtime_store::RuntimeStore::atomic_apply_and_load
    ///
    /// # Errors
    ///
    /// [`Error::LeaseHeld`] while another attempt's lease is live;
    /// [`Error::Conflict`] if another worker started this attempt first, or
    /// if the run was deleted and created again since the caller read it.
    pub(super) async fn start(
        shared: &'a Shared,
        run_id: &'a RunId,
        incarnation: Incarnation,
        attempt: u32,
    ) -> Result<(AttemptLease<'a>, History)> {
        let now = shared.clock.now_ms();
        let until_ms = now.saturating_add(shared.lease_ms());
        let start = StatusChange::start_leased(attempt, &shared.worker_id, until_ms);
        let fence = start.fence().expect("an attempt start has a fence");
        let (started, receipts, inputs) = shared
            .store
            .atomic_apply_and_load(run_id, Commit::status(start, now))
            .await?;
        let held = Arc::new(HeldLease {
            fence,
            until_ms: AtomicU64::new(until_ms),
            renewing: tokio::sync::Mutex::new(()),
            cancel: std::sync::Mutex::new(None),
            suspended: std::sync::Mutex::new(None),
            awaits_signal: AtomicBool::new(false),
            unmarked: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        });
        let lease = AttemptLease {
            shared,
            run_id,
            held,
        };
        if started.incarnation != incarnation {
            lease.release().await;
            return Err(Error::Conflict {
                what: format!("run {run_id} attempt {attempt}"),
                reason: format!(
                    "the run was deleted and created again (incarnation {} replaced {incarnation}) \
                     before the attempt started; nothing ran, and the new run is left to its own attempts",
                    started.incarnation
                ),
            });
        }
        Ok((lease, (receipts, inputs)))
    }

    /// What the attempt's [`Context`](super::Context) shares of the lease.
    pub(super) fn held(&self) -> &Arc<HeldLease> {
        &self.held
    }

    /// Runs `work` while renewing the lease every third of its length. If
    /// a renewal finds the lease lost (another attempt took the run over, or
    /// the run ended), `work` is dropped at its next await point and the
    /// loss is returned: the attempt must do nothing more.
    pub(super) async fn hold<F: Future>(&self, work: F) -> Result<F::Output> {
        let period = (self.shared.lease / 3).max(Duration::from_millis(1));
        let renewals = async {
            loop {
                tokio::time::sleep(period).await;
                match self.held.renew(self.shared, self.run_id).await {
                    // Each renewal also looks for a cancellation, which the
                    // attempt observes at its next step boundary.
                    Ok(()) if self.held.has_ended() => {}
                    Ok(()) => {
                        if let Ok(inputs) = self.shared.store.load_inputs(self.run_id).await {
                            self.held.note_cancel(&inputs);
                        }
                    }
                    // The attempt's fence was refused: someone else holds the run.
                    Err(lost @ (Error::LeaseLost { .. } | Error::Conflict { .. })) => {
                        return lost;
                    }
                    // A store fault: try again at the next tick; if the lease
                    // runs out meanwhile, the next renewal says so.
                    Err(e) => {
                        tracing::warn!(run_id = %self.run_id, error = %e, "lease renewal failed");
                    }
                }
            }
        };
        tokio::select! {
            biased;
            output = work => Ok(output),
            lost = renewals => {
                tracing::warn!(run_id = %self.run_id, error = %lost, "lease lost; the attempt stops");
                Err(lost)
            }
        }
    }

    /// Gives the run up at once, so the next attempt need not wait for the
    /// lease to expire. Best effort: a lease that cannot be released
    /// expires.
    pub(super) async fn release(&self) {
        let now = self.shared.clock.now_ms();
        if let Err(e) = self
            .held
            .set_expiry(self.shared, self.run_id, now, now)
            .await
        {
            tracing::debug!(run_id = %self.run_id, error = %e, "lease not released; it will expire");
        }
    }
}

/// The reason of the cancellation recorded among a run's `inputs`, if
/// [`Runtime::cancel`](super::Runtime::cancel) recorded one (an empty reason if it does not decode).
pub(super) fn cancel_reason(inputs: &[InputRecord]) -> Option<String> {
    inputs
        .iter()
        .find(|input| input.name == CANCEL_SIGNAL)
        .map(|input| codec::decode::<String>(&input.payload).unwrap_or_default())
}
