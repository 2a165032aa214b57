//! Deterministic simulation of the whole runtime: many workers, crashes at
//! any await point, store faults, lost acknowledgements, clock jumps,
//! run-id reuse, signals and retention sweeps, all drawn from one `u64`
//! seed, with memo's guarantees checked on every history.
//!
//! A [`Simulation`] takes your [`Workflow`] (built by a factory that
//! receives the history's [`Ledger`]) and the inputs to run it on. For each
//! seed it builds a world of several workers, each a [`Runtime`] over its
//! *own* store instances (as separate processes have), all over one shared
//! `InMemory` object store reached through a seeded
//! [`FaultInjectingStore`](super::FaultInjectingStore). One current-thread
//! scheduler polls the workers' tasks in a seed-chosen order; every store
//! request is an await point where another worker may run or this one may
//! crash (its futures dropped, its store instances rebuilt, `recover()` run
//! on restart). Then faults stop, time moves on, every open run is
//! redelivered, and the final state is checked.
//!
//! [`Simulation::deployment`] widens that world to the deployment the
//! README recommends, each part behind its own knob: a sweeper in every
//! worker ([`sweeper_per_worker`](Simulation::sweeper_per_worker)), an
//! operator process beside the workers ([`operator`](Simulation::operator)),
//! a sweep of every run after the history that must leave nothing
//! ([`sweep_all_at_end`](Simulation::sweep_all_at_end)), run ids of every
//! valid length and case on a store with a backend's name limits
//! ([`wide_run_ids`](Simulation::wide_run_ids)), a long-lived cached reader
//! ([`cached_reader`](Simulation::cached_reader)), workers paused past their
//! lease ([`pauses`](Simulation::pauses)), a share of seeds on a local
//! folder ([`local_folder_share`](Simulation::local_folder_share); with the
//! `sqlite` feature, on a SQLite file too: `Simulation::sqlite_share`), foreign
//! objects planted in a share of seeds
//! ([`foreign_objects`](Simulation::foreign_objects)), sealed stores in a
//! share of seeds ([`sealed_share`](Simulation::sealed_share)), every step
//! body checked ([`check_step_bodies`](Simulation::check_step_bodies)), and more (see [`deployment`](Simulation::deployment)).
//! Beyond it: clocks that disagree ([`clock_skew`](Simulation::clock_skew))
//! and power losses that bring back what a local folder deletes without a
//! sync ([`power_loss`](Simulation::power_loss)), and a sealed history's
//! key rotated across the fleet ([`key_rotation`](Simulation::key_rotation)).
//!
//! # Invariants
//!
//! During and after each history:
//!
//! - a side effect whose memo entry committed never runs again for the same
//!   (run incarnation, step, key), and every caller of a key sees one value,
//!   produced by this use of the run id (not an earlier, deleted run);
//! - every change a runtime store acknowledged is visible to a fresh
//!   instance, and no read returns a corrupt value;
//! - once faults stop and time moves on, every run reaches a terminal state;
//!   only the workflow's own errors fail a run, and no replay meets
//!   non-determinism; redelivering an equal input is never refused;
//! - a retention sweep never deletes anything of a run that is open or
//!   terminal inside its retention;
//! - no two live attempts of one run execute a side effect of the same step
//!   at once (an attempt whose lease has expired, by the simulated clock, no
//!   longer counts as live);
//! - with [`Simulation::check_step_bodies`], the same for step bodies (a
//!   body's own code is a side effect no memo protects: report its start
//!   with [`Ledger::step_body`]), and every body and memoized side effect
//!   starts only under a live lease, as the store records it;
//! - a side effect is reported from inside its `#[memoized]` body (the
//!   ledger learns its key from the call), and some caller gets the value
//!   of an entry a side effect ran for, or the history checked nothing;
//! - with [`Simulation::worker_loops`]: a timer or a signal's deadline
//!   never fires before its time by the runtime's clock
//!   ([`Ledger::timer_fired`]); an attempt that observed its run's
//!   cancellation ([`Ledger::cancel_observed`]) starts no step body; and once
//!   faults stop and time passes, the workers' polls alone wake every due
//!   run and every run ends; with [`Simulation::check_signal_latency`] as
//!   well (a world without crashes and store faults), a signal a suspended
//!   run holds wakes it before the clock moves;
//! - with an operator, cached reader or final sweep, the invariants each
//!   knob documents (a listing of a status shows only runs in that status,
//!   and every run that was in it throughout); with
//!   [`Simulation::clock_skew`], the ones that judge a process's reading of
//!   time allow the skew;
//! - in a [sealed](Simulation::sealed_share) history, no value is stored
//!   unencrypted (what memo never encrypts, its markers and hints, aside);
//! - with [`Simulation::key_rotation`], every read opens what any process
//!   wrote whichever key file each read at its start, and once version 1
//!   is retired no data key is wrapped with it and no object sealed with it.
//!
//! A history is a function of the seed alone: the scheduler, the faults,
//! the clock and the workflow's [`Ledger::chance`] all draw from it. Keep
//! your workflow deterministic too: no wall clock, no unseeded randomness,
//! and retry policies [`without_jitter`](crate::workflow::RetryPolicy::without_jitter).
//! A failing seed is reported with a one-line command that replays it.
//!
//! # Example
//!
//! ```
//! use memo_runtime::testing::sim::{Ledger, Simulation};
//! use memo_runtime::workflow::{Context, Workflow};
//! use memo_runtime::{Error, Memo, memoized};
//!
//! #[memoized(skip(ledger))]
//! async fn send_email(memo: &Memo, ledger: &Ledger, to: &str) -> Result<String, Error> {
//!     // Stands for the real e-mail; the ledger learns the call's key itself.
//!     let n = ledger.side_effect(memo).await;
//!     Ok(format!("mail #{n} to {to}"))
//! }
//!
//! let simulation = Simulation::new(
//!     |ledger: Ledger| {
//!         Workflow::new("welcome", move |ctx: Context, to: String| {
//!             let ledger = ledger.clone();
//!             async move {
//!                 ctx.step("email", |memo| {
//!                     let (ledger, to) = (ledger.clone(), to.clone());
//!                     async move {
//!                         let _body = ledger.step_body(&memo); // a step body starts
//!                         send_email(&memo, &ledger, &to).await
//!                     }
//!                 })
//!                 .await
//!             }
//!         })
//!     },
//!     vec!["ada@example.com".to_string(), "grace@example.com".to_string()],
//! )
//! .polls(300);
//! let summary = simulation.run_seeds(0..3).unwrap_or_else(|failure| panic!("{failure}"));
//! assert_eq!(summary.seeds, 3);
//! ```

mod checker;
mod compat;
mod folder;
mod ledger;
mod loops;
mod operator;
mod plant;
mod reader;
mod report;
mod sealed;
mod stores;
mod world;

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

#[allow(deprecated)]
pub use ledger::{Ledger, StepBody, memoized_key};

use report::replay_command;
pub use report::{Failure, History, Summary, Violation};

use crate::run_id::RunId;
use crate::workflow::{Runtime, Workflow, WorkflowFn};

/// A kind of random event a [`Simulation`] injects; all are on by default,
/// and [`Simulation::without`] turns one off (to find which one a failure
/// needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Event {
    /// Workers crash at an await point: their tasks are dropped, their store
    /// instances rebuilt, and `recover()` runs when they restart.
    Crash,
    /// A run is delivered to a worker while another worker still works on it
    /// (as an at-least-once queue redelivers after a timeout).
    ConcurrentDelivery,
    /// A terminal run is deleted (whole, or with `RuntimeStore::delete_run`
    /// alone) and its id used again.
    RunIdReuse,
    /// A retention sweep runs.
    Sweep,
    /// The clock jumps, by minutes or past the retention.
    ClockJump,
    /// A signal is sent to a run from outside.
    Signal,
    /// Store requests fail (before or after they are applied).
    StoreFault,
    /// A run is cancelled from outside (with
    /// [`worker_loops`](Simulation::worker_loops)).
    Cancel,
}

/// The rounds of the end of a history in a world with power losses (see
/// [`Simulation::power_loss`]).
const POWER_LOSS_ROUNDS: usize = 8;

/// The settings of a [`Simulation`].
#[derive(Debug, Clone)]
struct Config {
    workers: usize,
    polls: u64,
    fault_rate: f64,
    crash_rate: f64,
    event_rate: f64,
    retention: Duration,
    lease: Duration,
    liveness_rounds: usize,
    without: Vec<Event>,
    check_bodies: bool,
    sweeper_per_worker: bool,
    operator: bool,
    sweep_all_at_end: bool,
    wide_run_ids: bool,
    cached_reader: bool,
    pauses: bool,
    local_folder_share: f64,
    /// The share of seeds on a SQLite file ([`Simulation::sqlite_share`]).
    sqlite_share: f64,
    foreign_objects: f64,
    sealed_share: f64,
    /// Whether the key of sealed histories rotates
    /// ([`Simulation::key_rotation`]).
    key_rotation: bool,
    standalone_memos: bool,
    /// Whether processes call shared-scope keys
    /// ([`Simulation::shared_memos`]).
    shared_memos: bool,
    wrong_prefix_operator: bool,
    slow_deletes: f64,
    /// Whether a stalled delete of a run pointer may land just before a
    /// create of it ([`Simulation::early_pointer_deletes`]).
    early_pointer_deletes: bool,
    /// The share of worker processes whose worker loop counts as spawned
    /// ([`Simulation::spawned_loops`]).
    spawned_loops: f64,
    /// Whether the end of a history checks that a signalled run is woken
    /// before the clock moves ([`Simulation::check_signal_latency`]).
    signal_latency: bool,
    /// How far each worker process's clock may be off the shared one, in
    /// ms ([`Simulation::clock_skew`]).
    clock_skew_ms: u64,
    /// The share of crashes that are a power loss
    /// ([`Simulation::power_loss`]).
    power_loss: f64,
    /// The poll at which every worker restarts with the new code
    /// ([`Simulation::deploy_at`]), or the first does
    /// ([`Simulation::rolling_deploy_at`]).
    deploy_at: Option<u64>,
    /// With a rolling deploy, the polls between two workers' restarts
    /// ([`Simulation::rolling_deploy_at`]).
    roll_every: Option<u64>,
    /// Whether a rolling deploy's old and new code are two versions of
    /// the workflow ([`Simulation::versioned_deploy`]).
    versioned: bool,
}

impl Config {
    fn has(&self, event: Event) -> bool {
        !self.without.contains(&event)
    }
}

/// The outcome of a run, as the final check sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome<O> {
    /// The run completed with this output.
    Completed(O),
    /// The run failed with this message.
    Failed(String),
    /// The run was cancelled.
    Cancelled,
}

type OutcomeCheck<I, O> = Arc<dyn Fn(&I, &RunOutcome<O>) -> Result<(), String> + Send + Sync>;
type Redeliver<I> = Arc<dyn Fn(&I, u64) -> I + Send + Sync>;
/// Sends one signal: `(runtime, run, signal id)`.
type SignalSender = Arc<
    dyn Fn(Runtime, RunId, String) -> Pin<Box<dyn Future<Output = crate::Result<()>>>>
        + Send
        + Sync,
>;

/// A seeded simulation of a workflow under crashes, faults and concurrency;
/// see the [module documentation](self).
pub struct Simulation<I, O, Mk> {
    make_workflow: Mk,
    inputs: Vec<I>,
    config: Config,
    signals: Vec<(String, SignalSender)>,
    check: Option<OutcomeCheck<I, O>>,
    redeliver: Option<Redeliver<I>>,
    /// The worker loops, with [`worker_loops`](Self::worker_loops).
    loops: Option<loops::MakeLoops<I>>,
}

impl<I, O, Mk> fmt::Debug for Simulation<I, O, Mk> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("inputs", &self.inputs.len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// A simulation of the workflow `make_workflow` builds (it is called once
    /// per history, with that history's [`Ledger`]), run on `inputs`: run
    /// `i` is `sim-<i>` (or a drawn id, with
    /// [`wide_run_ids`](Self::wide_run_ids)) with input `inputs[i]`, and a
    /// reused run id gets one of the inputs at random.
    ///
    /// Defaults: 3 workers, 2,000 task polls, 2% of store requests
    /// failing, a crash every 500 steps on average, 7 days of retention, a
    /// 30 s lease, every [`Event`] on.
    pub fn new(make_workflow: Mk, inputs: Vec<I>) -> Simulation<I, O, Mk> {
        Simulation {
            make_workflow,
            inputs,
            config: Config {
                workers: 3,
                polls: 2_000,
                fault_rate: 0.02,
                crash_rate: 0.002,
                event_rate: 0.05,
                retention: Duration::from_secs(7 * 24 * 60 * 60),
                lease: Duration::from_secs(30),
                liveness_rounds: 4,
                without: Vec::new(),
                check_bodies: false,
                sweeper_per_worker: false,
                operator: false,
                sweep_all_at_end: false,
                wide_run_ids: false,
                cached_reader: false,
                pauses: false,
                local_folder_share: 0.0,
                sqlite_share: 0.0,
                foreign_objects: 0.0,
                sealed_share: 0.0,
                key_rotation: false,
                standalone_memos: false,
                shared_memos: false,
                wrong_prefix_operator: false,
                slow_deletes: 0.0,
                early_pointer_deletes: false,
                spawned_loops: 0.0,
                signal_latency: false,
                clock_skew_ms: 0,
                power_loss: 0.0,
                deploy_at: None,
                roll_every: None,
                versioned: false,
            },
            signals: Vec::new(),
            check: None,
            redeliver: None,
            loops: None,
        }
    }

    /// How many workers (at least 1).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.config.workers = workers.max(1);
        self
    }

    /// How many task polls the faulty part of a history lasts (default
    /// 2,000).
    #[must_use]
    pub fn polls(mut self, polls: u64) -> Self {
        self.config.polls = polls;
        self
    }

    /// The share of store requests that fail, half before and half after
    /// being applied (lost acknowledgements).
    #[must_use]
    pub fn fault_rate(mut self, rate: f64) -> Self {
        self.config.fault_rate = rate.clamp(0.0, 1.0);
        self
    }

    /// The chance, per scheduler step, that a worker crashes.
    #[must_use]
    pub fn crash_rate(mut self, rate: f64) -> Self {
        self.config.crash_rate = rate.clamp(0.0, 1.0);
        self
    }

    /// The workers' retention of terminal runs.
    #[must_use]
    pub fn retention(mut self, retention: Duration) -> Self {
        self.config.retention = retention;
        self
    }

    /// Each worker process's clock is off the shared one by an offset
    /// drawn as the process starts, up to `max` either way, as the clocks
    /// of a fleet's machines are: a process ahead takes over a lease or
    /// fires a timer early by the shared clock, one behind holds its lease
    /// late. The invariants that judge a process's reading of time allow
    /// `max` of it, as the durability guide sizes the lease ("above the
    /// longest pause plus the clock skew between workers"): a timer fires
    /// no earlier than `max` before its deadline, a step body starts under
    /// a lease live `max` ago at the latest, and an attempt counts as live
    /// for the one-live-attempt check for the lease less twice `max` (a
    /// process ahead may take a lease over that early from one behind).
    /// Each worker's runtime is told twice `max` as the clocks' skew
    /// ([`RuntimeBuilder::max_clock_skew`](crate::workflow::RuntimeBuilder::max_clock_skew)),
    /// as a deployment that knows its clocks would tell it.
    /// Keep `max` well below the [`lease`](Self::lease). 0 (the default) draws nothing, so the
    /// worlds without it replay as before.
    #[must_use]
    pub fn clock_skew(mut self, max: Duration) -> Self {
        self.config.clock_skew_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// The share of crashes that are a power loss of the machine every
    /// worker process runs on, with the shared store on its local folder:
    /// every worker dies at once, and every status hint and due-run entry
    /// deleted in the 5 s of simulated time before it comes back, as a
    /// [`LocalFolder`](crate::store::LocalFolder)'s deletes of those, which
    /// it does not sync, may (ext4 commits its journal every 5 s by
    /// default, and at any process's sync sooner; many events share one
    /// instant of simulated time, so that is more than a disk would bring
    /// back). The invariants are unchanged: memo must resolve every such
    /// object as it resolves one a crash left just before its delete. The
    /// stale due-run entries that come back queue ahead of live ones, and
    /// a poll takes a batch at a time (4 in the worker-loops world), so
    /// the end of a history polls for 8 rounds rather than 4 before it
    /// calls a run that has not ended a violation. 0 (the default) draws
    /// nothing, so the worlds without it replay as before.
    #[must_use]
    pub fn power_loss(mut self, share: f64) -> Self {
        self.config.power_loss = share.clamp(0.0, 1.0);
        if self.config.power_loss > 0.0 {
            self.config.liveness_rounds = self.config.liveness_rounds.max(POWER_LOSS_ROUNDS);
        }
        self
    }

    /// The lease an attempt holds: another attempt of the same run that
    /// executes a step's side effect while this much simulated time has not
    /// passed breaks the one-live-attempt invariant.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// Checks every start of a step body ([`Ledger::step_body`]) and of a
    /// memoized side effect against the lease the store records (the run is
    /// the memo's incarnation, running, and leased to the memo's attempt
    /// until later than now), and every start of a body against the bodies
    /// of the same step other attempts are running. Off by default, so that
    /// only side effects are checked against each other;
    /// [`deployment`](Self::deployment) turns it on.
    #[must_use]
    pub fn check_step_bodies(mut self, on: bool) -> Self {
        self.config.check_bodies = on;
        self
    }

    /// Every worker runs its own retention sweeper, so sweeps of the same
    /// runs overlap (by default one sweep runs at a time).
    #[must_use]
    pub fn sweeper_per_worker(mut self, on: bool) -> Self {
        self.config.sweeper_per_worker = on;
        self
    }

    /// An operator process beside the workers, as `memoctl` is: through
    /// its own store instances, at random moments, it lists runs by status,
    /// reads runs (record, receipts, inputs), lists markers, sends signals
    /// (half of them with a payload of the wrong type, as `memoctl signal`
    /// can) and sweeps. Its reads are checked: a run is never read as another
    /// incarnation than existed during the read, and a run that existed
    /// throughout a read or a listing is never read or listed as absent.
    #[must_use]
    pub fn operator(mut self, on: bool) -> Self {
        self.config.operator = on;
        self
    }

    /// After each history, sweeps every run with no retention (from a
    /// fault-free process, after its `recover()`), and checks that nothing
    /// of any run is left in the store: an object left then is unreachable
    /// for ever.
    #[must_use]
    pub fn sweep_all_at_end(mut self, on: bool) -> Self {
        self.config.sweep_all_at_end = on;
        self
    }

    /// Runs get ids drawn from the whole valid alphabet and length range
    /// (1 to 128 bytes of `[A-Za-z0-9_-]`, long ones and case variants of
    /// each other often) instead of `sim-<i>`, and every worker's store
    /// refuses names a local folder or S3 cannot store
    /// ([`NameLimitedStore`](crate::testing::NameLimitedStore)) and folds
    /// case ([`CaseFoldingStore`](crate::testing::CaseFoldingStore)).
    #[must_use]
    pub fn wide_run_ids(mut self, on: bool) -> Self {
        self.config.wide_run_ids = on;
        self
    }

    /// A long-lived reader beside the workers: its runtime-store instance
    /// reads a run now and then (and every run at the end), so its cache
    /// falls behind; each read is compared, at the same moment, with a
    /// fresh instance's, which it must equal, at a cost of at most one
    /// request more than the costliest fresh read of the history.
    #[must_use]
    pub fn cached_reader(mut self, on: bool) -> Self {
        self.config.cached_reader = on;
        self
    }

    /// Workers pause at any await point (not only crash): a paused worker's
    /// tasks are not polled for a while and the clock moves past a lease,
    /// so it resumes stale, its lease expired and maybe taken over (a step
    /// retry's backoff can outlast the lease too); and half the time a
    /// worker dies right after its memo entry lands in a deleted incarnation.
    #[must_use]
    pub fn pauses(mut self, on: bool) -> Self {
        self.config.pauses = on;
        self
    }

    /// The share of seeds (0 to 1, drawn from each seed) whose shared
    /// bucket is a fresh [`LocalFolder`](crate::store::LocalFolder), the
    /// embedded default (real files, hard-link publishes, folders removed
    /// as deletes empty them, listings in order from an offset), instead of
    /// `InMemory`; default 0.
    #[must_use]
    pub fn local_folder_share(mut self, share: f64) -> Self {
        self.config.local_folder_share = share.clamp(0.0, 1.0);
        self
    }

    /// The share of seeds (0 to 1, drawn from each seed) whose shared
    /// bucket is a fresh [`SqliteStore`](crate::store::SqliteStore) file
    /// (one table of objects, listed in order from an offset), instead of
    /// `InMemory`; a seed drawn for a
    /// [local folder](Self::local_folder_share) too runs on the folder.
    /// Default 0.
    #[cfg(feature = "sqlite")]
    #[must_use]
    pub fn sqlite_share(mut self, share: f64) -> Self {
        self.config.sqlite_share = share.clamp(0.0, 1.0);
        self
    }

    /// The share of seeds (0 to 1, drawn from each seed) in which another
    /// writer of the shared store plants foreign objects, at random moments
    /// of the history, in place of objects memo wrote (a memo entry, a log
    /// entry, a checkpoint, a run pointer, a marker): a 1 TiB object, a value
    /// nested deeper than [`MAX_NESTING_DEPTH`](crate::limits::MAX_NESTING_DEPTH)
    /// (in a memo or log entry), or a checkpoint forged to hold its run up
    /// to position `u64::MAX`. Each stands for a while (or until a worker
    /// overwrites or deletes it) and is removed before faults stop. While
    /// it stands, a read that meets it must fail with an error naming its
    /// path, never panic or return a value; such errors do not count as
    /// corrupt reads. Default 0.
    #[must_use]
    pub fn foreign_objects(mut self, share: f64) -> Self {
        self.config.foreign_objects = share.clamp(0.0, 1.0);
        self
    }

    /// The world the README recommends deploying, with every check that
    /// goes with it: [`check_step_bodies`](Self::check_step_bodies),
    /// [`sweeper_per_worker`](Self::sweeper_per_worker),
    /// [`operator`](Self::operator),
    /// [`sweep_all_at_end`](Self::sweep_all_at_end),
    /// [`wide_run_ids`](Self::wide_run_ids),
    /// [`cached_reader`](Self::cached_reader), [`pauses`](Self::pauses),
    /// a [`local_folder_share`](Self::local_folder_share) of one seed in
    /// ten, [`foreign_objects`](Self::foreign_objects) in one seed in
    /// twenty, [`sealed_share`](Self::sealed_share) in five, [`standalone_memos`](Self::standalone_memos), one delete in twenty [slow](Self::slow_deletes), [`wrong_prefix_operator`](Self::wrong_prefix_operator).
    #[must_use]
    pub fn deployment(self) -> Self {
        self.check_step_bodies(true)
            .sweeper_per_worker(true)
            .operator(true)
            .sweep_all_at_end(true)
            .wide_run_ids(true)
            .cached_reader(true)
            .pauses(true)
            .local_folder_share(0.1)
            .foreign_objects(0.05)
            .sealed_share(0.2)
            .standalone_memos(true)
            .slow_deletes(0.05)
            .wrong_prefix_operator(true)
    }

    /// Turns off one kind of random event.
    #[must_use]
    pub fn without(mut self, event: Event) -> Self {
        self.config.without.push(event);
        self
    }

    /// A signal the simulator sends to runs from outside (each send counts
    /// separately); at the end, every open run gets every signal once more.
    #[must_use]
    pub fn signal<T: Serialize + Clone + Send + Sync + 'static>(
        mut self,
        name: impl Into<String>,
        payload: T,
    ) -> Self {
        let name = name.into();
        let signal = name.clone();
        let send = move |runtime: Runtime, run_id: RunId, id: String| {
            let (signal, payload) = (signal.clone(), payload.clone());
            Box::pin(async move {
                runtime
                    .signal_with_id(&run_id, &id, &signal, &payload)
                    .await
            }) as Pin<Box<dyn Future<Output = crate::Result<()>>>>
        };
        self.signals.push((name, Arc::new(send)));
        self
    }

    /// Checks every run's final outcome against its input; an `Err` is a
    /// violation. Without it, any outcome the workflow produced passes
    /// (a run failed by a store fault does not).
    #[must_use]
    pub fn check_outcome(
        mut self,
        check: impl Fn(&I, &RunOutcome<O>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.check = Some(Arc::new(check));
        self
    }

    /// How a redelivered input is built from the original and a seeded
    /// number: it must equal the original (say, the same map built in
    /// another order), as a queue's redelivery does. Default: a clone.
    #[must_use]
    pub fn redeliver_as(
        mut self,
        redeliver: impl Fn(&I, u64) -> I + Send + Sync + 'static,
    ) -> Self {
        self.redeliver = Some(Arc::new(redeliver));
        self
    }
}

impl<I, O, Mk> Simulation<I, O, Mk>
where
    I: Serialize + DeserializeOwned + Clone,
    O: Serialize + DeserializeOwned,
{
    /// Runs the history of `seed` and checks it.
    ///
    /// # Errors
    ///
    /// A [`Failure`] naming every invariant the history broke.
    pub fn run_seed<F>(&self, seed: u64) -> Result<History, Failure>
    where
        Mk: Fn(Ledger) -> Workflow<F>,
        F: WorkflowFn<I, Output = O>,
    {
        world::run_history(self, seed).map_err(|(violations, trace)| Failure {
            seed,
            violations,
            trace,
            replay: replay_command(seed),
        })
    }

    /// Runs the histories of `seeds` in order, stopping at the first that
    /// fails.
    ///
    /// # Errors
    ///
    /// The first [`Failure`].
    pub fn run_seeds<F>(&self, seeds: Range<u64>) -> Result<Summary, Failure>
    where
        Mk: Fn(Ledger) -> Workflow<F>,
        F: WorkflowFn<I, Output = O>,
    {
        let mut summary = Summary::default();
        for seed in seeds {
            summary.add(&self.run_seed(seed)?);
        }
        Ok(summary)
    }

    /// Runs the seeds the environment asks for, prints what ran, and panics
    /// with the [`Failure`] (and its replay command) if a history broke an
    /// invariant: `MEMO_SIM_SEED=S` runs seed `S` alone, `MEMO_SIM_SEEDS=N`
    /// runs seeds `0..N`, and otherwise seeds `0..default_seeds` run.
    ///
    /// # Panics
    ///
    /// On the first failing seed, or if a variable is not a number.
    pub fn check_seeds_from_env<F>(&self, default_seeds: u64) -> Summary
    where
        Mk: Fn(Ledger) -> Workflow<F>,
        F: WorkflowFn<I, Output = O>,
    {
        let number = |name: &str| {
            std::env::var(name).ok().map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
            })
        };
        let seeds = match (number("MEMO_SIM_SEED"), number("MEMO_SIM_SEEDS")) {
            (Some(seed), _) => seed..seed.saturating_add(1),
            (None, Some(n)) => 0..n,
            (None, None) => 0..default_seeds,
        };
        let started = std::time::Instant::now();
        match self.run_seeds(seeds) {
            Ok(summary) => {
                println!("simulation: {summary} in {:.1?}", started.elapsed());
                summary
            }
            Err(failure) => panic!("{failure}"),
        }
    }
}
