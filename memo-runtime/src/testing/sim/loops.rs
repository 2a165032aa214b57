//! Time and worker loops in the simulation
//! ([`Simulation::worker_loops`]): every worker process runs a
//! [`Worker`](crate::workflow::Worker) whose polls wake the runs the
//! due-run index names, runs are submitted to it rather than run, and runs
//! are cancelled from outside; with the checks that go with them: a timer
//! never fires before its deadline ([`Ledger::timer_fired`]), and a step
//! body never starts in an attempt that observed its run's cancellation
//! ([`Ledger::cancel_observed`]).

use std::collections::HashSet;
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use futures::future::LocalBoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::checker::Checker;
use super::{Ledger, Simulation};
use crate::error::{Error, Result};
use crate::memo::Memo;
use crate::run_id::{Incarnation, RunId};
use crate::workflow::{Context, Runtime, Worker, Workflow};

/// The invariant [`Ledger::timer_fired`] checks.
pub(super) const TIMER_EARLY: &str = "a timer never fires before its deadline";

/// The invariant [`Ledger::cancel_observed`] arms.
pub(super) const BODY_AFTER_CANCEL: &str =
    "a cancelled run starts no new step body after the cancellation is observed";

/// The invariant [`Simulation::check_signal_latency`] checks.
pub(super) const SIGNAL_LATENCY: &str =
    "a signal a suspended run holds wakes it before the clock moves";

/// The old code's version in a [versioned deploy](Simulation::versioned_deploy).
pub(super) const OLD_VERSION: &str = "1";

/// The new code's version in a [versioned deploy](Simulation::versioned_deploy).
pub(super) const NEW_VERSION: &str = "2";

/// How far the clock moves in each round of the end of a history with
/// worker loops, beyond a lease: past every timer and deadline a workflow
/// sets within a day.
pub(super) const SETTLE_JUMP_MS: u64 = 24 * 3_600_000;

/// How many polls each worker makes in a round of the end of a history.
pub(super) const SETTLE_POLLS: usize = 3;

/// Builds, for one history, the worker loops of its processes and the
/// submissions made to them.
pub(super) type MakeLoops<I> = Arc<dyn Fn(Ledger) -> Loops<I> + Send + Sync>;

/// A history's worker loops: a [`Worker`] for a process's runtime
/// (`true`: the store lists in order), and a submission of a run to one.
pub(super) struct Loops<I> {
    pub(super) worker: Box<dyn Fn(Runtime, bool) -> Worker>,
    pub(super) submit: Box<dyn Fn(Worker, RunId, I) -> LocalBoxFuture<'static, Result<()>>>,
}

/// The attempts that observed their run's cancellation, as
/// [`Ledger::cancel_observed`] reported them.
#[derive(Debug, Clone, Default)]
pub(super) struct ObservedCancels(Arc<Mutex<HashSet<(RunId, Incarnation, u32)>>>);

impl ObservedCancels {
    /// A step body of `memo` starts: a violation if its attempt observed
    /// its run's cancellation.
    pub(super) fn body_started(&self, checker: &Checker, memo: &Memo) {
        let Some(attempt) = memo.lease_attempt() else {
            return;
        };
        let key = (memo.run_id().clone(), memo.incarnation(), attempt);
        let observed = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&key);
        if observed {
            checker.violation(
                BODY_AFTER_CANCEL,
                format!(
                    "run {} (incarnation {}) attempt {attempt} starts step {}",
                    key.0,
                    key.1,
                    memo.step_number()
                ),
            );
        }
    }
}

impl Ledger {
    /// Records that a timer or a signal's deadline at `deadline_ms` fired
    /// (the code after a sleep, or the branch of a wait that timed out, is
    /// running): checks that the runtime's clock has reached it (less the
    /// [`clock_skew`](Simulation::clock_skew) a process may have). Pass the
    /// deadline the run recorded (an absolute time the workflow computed
    /// in a step, say), so that every replay reports the same one.
    pub fn timer_fired(&self, deadline_ms: u64) {
        let now_ms = self.checker.now_ms();
        if now_ms.saturating_add(self.checker.clock_skew_ms()) < deadline_ms {
            self.checker.violation(
                TIMER_EARLY,
                format!(
                    "a deadline at {deadline_ms} fired at {now_ms}, {} ms early",
                    deadline_ms - now_ms
                ),
            );
        }
    }

    /// The simulated clock's time now, in ms since the Unix epoch: for a
    /// workflow that computes a deadline. Compute it in a step, so that
    /// every replay takes the recorded one.
    pub fn now_ms(&self) -> u64 {
        self.checker.now_ms()
    }

    /// Records that this attempt observed its run's cancellation (say,
    /// [`Context::is_cancelled`] returned `true`): from now on, a step body
    /// of this attempt that starts ([`Ledger::step_body`]) breaks the
    /// invariant that a cancelled run starts no new step body.
    pub fn cancel_observed(&self, ctx: &Context) {
        self.checker.event(format!(
            "run {} attempt {} observes its cancellation",
            ctx.run_id(),
            ctx.attempt()
        ));
        self.cancels
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((ctx.run_id().clone(), ctx.incarnation(), ctx.attempt()));
    }
}

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// Every worker process runs a [`Worker`] for the workflow: runs are
    /// submitted to a worker ([`Worker::submit`]) instead of run, workers
    /// poll ([`Worker::wake_due`]) at random moments, crash and restart,
    /// and runs are cancelled ([`Runtime::cancel`]) now and then. At the
    /// end, after faults stop, only the workers' polls drive runs (a
    /// submission that never returned is made again, and every run that
    /// started gets again every signal it does not hold, as a caller
    /// would; a run submitted and never started gets none, so that only
    /// its own wake-up starts it, and a signal a run holds, recorded and
    /// not yet consumed, is not sent again, so that only its own wake-up
    /// wakes the run), while the clock moves on a day at a time: every due
    /// run must be woken, and every run end. Give some runs a wait for a
    /// signal with no deadline: a deadline within the day wakes a run
    /// whose signal's wake-up was lost, and hides the loss.
    ///
    /// Half of the worker processes stand for a worker whose loop is
    /// spawned ([`Worker::spawn`](crate::workflow::Worker::spawn)): a run
    /// submitted to one is its loop's to start, and is due for the other
    /// workers only a lease later; the process polls after each submission
    /// that returned, as the loop it stands for is woken, and may poll twice
    /// at once, as that loop lists while it wakes runs; and half the
    /// restarted processes recover (see [`spawned_loops`](Self::spawned_loops)).
    ///
    /// The workflow must be one a [`Worker`] can drive (its future
    /// `Send`, its closure `Clone`). Report its timers with
    /// [`Ledger::timer_fired`] and the cancellations it observes with
    /// [`Ledger::cancel_observed`]; turn on
    /// [`check_step_bodies`](Self::check_step_bodies) so that no run is
    /// driven by two live attempts at once.
    #[must_use]
    pub fn worker_loops<F, E, Fut>(mut self) -> Self
    where
        Mk: Fn(Ledger) -> Workflow<F> + Clone + Send + Sync + 'static,
        I: Serialize + DeserializeOwned + Send + 'static,
        O: Serialize + DeserializeOwned + Send + 'static,
        E: From<Error> + Display + Send + 'static,
        F: Fn(Context, I) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        let make = self.make_workflow.clone();
        let loops = move |ledger: Ledger| {
            let workflow = make(ledger.clone());
            // In a versioned deploy the new code registers the old one too,
            // for the runs that started on it.
            let (workflow, older) = match (ledger.versioned, ledger.deployed()) {
                (false, _) => (workflow, None),
                (true, false) => (workflow.with_version(OLD_VERSION), None),
                (true, true) => (
                    workflow.with_version(NEW_VERSION),
                    Some(make(ledger.old_code()).with_version(OLD_VERSION)),
                ),
            };
            let registered = workflow.clone();
            Loops {
                worker: Box::new(move |runtime: Runtime, ordered: bool| {
                    let builder = Worker::builder(runtime).workflow(&registered);
                    let builder = match &older {
                        Some(older) => builder.workflow(older),
                        None => builder,
                    };
                    let builder = builder.concurrency(2).poll_batch(4).sweep_interval(None);
                    if ordered {
                        builder.build()
                    } else {
                        builder.unordered_listings().build()
                    }
                }),
                submit: Box::new(move |worker: Worker, run_id: RunId, input: I| {
                    let workflow = workflow.clone();
                    async move { worker.submit(&workflow, &run_id, &input).await }.boxed_local()
                }),
            }
        };
        self.loops = Some(Arc::new(loops));
        self.spawned_loops(0.5)
    }

    /// With [`worker_loops`](Self::worker_loops): before each clock jump
    /// of a history, and at its end before the clock moves, every task
    /// ends and the workers poll (three rounds), and then a run suspended
    /// in a wait for a signal it holds (recorded, not yet consumed), its
    /// lease not live, breaks the invariant that a signal wakes its run at
    /// once: a signal makes its run due when it is recorded, and a waiter
    /// that suspends as a signal lands looks again once it let go, so no
    /// run waits for a lease to expire (or for ever) for a signal it holds.
    /// Without it the world measures no latency: a wake-up due a lease
    /// late still ends its run within the day the end moves the clock.
    /// The jumps wait for the check, so the world's histories are its own.
    ///
    /// Sound only in a world without crashes and store faults (turn off
    /// [`Event::Crash`] and [`Event::StoreFault`] with
    /// [`without`](Self::without); a history panics otherwise): a
    /// signaller that dies after recording its signal, or whose wake-up
    /// write fails, leaves the run due a lease later by design, and so
    /// does a waiter that dies before its look.
    ///
    /// [`Event::Crash`]: super::Event::Crash
    /// [`Event::StoreFault`]: super::Event::StoreFault
    #[must_use]
    pub fn check_signal_latency(mut self, on: bool) -> Self {
        self.config.signal_latency = on;
        self
    }

    /// With [`worker_loops`](Self::worker_loops), the share of worker
    /// processes (0 to 1, drawn as each starts) whose loop counts as
    /// spawned, so that [`Worker::submit`] to it queues the run for its
    /// own loop and writes the run's wake-up a lease later; such a process
    /// polls after every submission to it that returned, and a crash
    /// loses what it queued. With a share above 0, half the processes
    /// that restart during the history also call [`Worker::recover`], as
    /// the guide's deployment does at start-up (the other half stand for a
    /// process that never came back, replaced by one that only polls). [`worker_loops`](Self::worker_loops)
    /// sets one half; 0 is the world before session 30 (every
    /// submission's wake-up due at once, no recovery at a restart), where
    /// the seeds pinned before it broke.
    #[must_use]
    pub fn spawned_loops(mut self, share: f64) -> Self {
        self.config.spawned_loops = share.clamp(0.0, 1.0);
        self
    }
}

/// One poll of `worker`: the errors it met, as messages, and how many due
/// runs it left for a worker that registers their version.
pub(super) async fn poll(worker: Worker) -> (Vec<String>, usize) {
    match worker.wake_due().await {
        // The runs it could not wake, and those whose attempt stopped on a
        // runtime error: each checked as a delivery's error is.
        Ok(report) => {
            let errors = (report.failed.into_iter())
                .chain(report.stopped)
                .map(|(_, error)| error.to_string())
                .collect();
            (errors, report.unknown)
        }
        Err(error) => (vec![error.to_string()], 0),
    }
}

/// Cancels `run_id` through `runtime`.
pub(super) async fn cancel(runtime: Runtime, run_id: RunId) -> std::result::Result<(), String> {
    match runtime.cancel(&run_id, "cancelled by the simulation").await {
        Ok(_) => Ok(()),
        // An ended or unborn run cannot be cancelled: the caller's answer.
        Err(Error::Conflict { .. } | Error::RunNotFound { .. }) => Ok(()),
        Err(error) => Err(error.to_string()),
    }
}
