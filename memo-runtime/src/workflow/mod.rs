//! The workflow runtime: durable steps, replay, signals and terminal marking.
//!
//! A workflow is an async function of a [`Context`] and an input. Each
//! [`Context::step`] it calls is durable: its output is committed to the
//! [`RuntimeStore`] as the run's receipt for that position, and an attempt
//! that finds the receipt replays it instead of running the step again. The
//! step in flight when a process died runs again; the `#[memoized]` calls
//! inside it hit the step's memo, so no committed side effect repeats.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
//! use std::sync::Arc;
//! use memo_runtime::{InMemoryRuntimeStore, Memo, MemoStore, RunId, memoized};
//! use memo_runtime::object_store::memory::InMemory;
//! use memo_runtime::workflow::{Context, Runtime, Workflow};
//!
//! #[memoized]
//! async fn send_email(memo: &Memo, to: &str) -> memo_runtime::Result<String> {
//!     Ok(format!("sent to {to}")) // the side effect: once per (run, step, to)
//! }
//!
//! let runtime = Runtime::builder()
//!     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
//!     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
//!     .build()?;
//! let onboarding = Workflow::new("onboarding", |ctx: Context, user: String| async move {
//!     let receipt = ctx
//!         .step_with("welcome", &user, |memo, user| async move {
//!             send_email(&memo, user).await
//!         })
//!         .await?;
//!     Ok::<_, memo_runtime::Error>(receipt)
//! });
//!
//! let run = RunId::new("user-42")?;
//! let out = runtime.run(&run, &"ada@example.com".to_string(), &onboarding).await?;
//! assert_eq!(out, "sent to ada@example.com");
//! // Running a completed run again returns its result without running anything.
//! assert_eq!(runtime.run(&run, &"ada@example.com".to_string(), &onboarding).await?, out);
//! # Ok(()) }
//! ```

mod context;
mod due;
mod lease;
mod retry;
mod worker;

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::Retryable;
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

pub use context::{Context, Selected, Step};
pub use due::DueRun;
pub use retry::RetryPolicy;
pub use worker::{
    DEFAULT_POLL_BATCH, DEFAULT_POLL_INTERVAL, DEFAULT_SWEEP_INTERVAL, DEFAULT_WORKER_CONCURRENCY,
    WakeReport, Worker, WorkerBuilder, WorkerHandle,
};

use crate::clock::{Clock, SystemClock};
use crate::codec;
use crate::error::{Error, Result};
use crate::memo::MemoStore;
use crate::run_id::RunId;
use crate::runtime_store::{
    Commit, InputPhase, Lease, NewInput, NewRun, RunRecord, RunStatus, RuntimeStore, StatusChange,
};
use crate::sweeper::{RetentionSweeper, RetentionSweeperBuilder};
use crate::terminal::TerminalMarker;
use lease::AttemptLease;

/// How long an attempt holds its run without renewing, by default: 60 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// How often a run waiting in-process for a signal checks for it, by
/// default: 200 ms.
pub const DEFAULT_SIGNAL_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// How long [`Context::sleep`] waits in process, by default: 60 s. A
/// longer sleep suspends its attempt (see [`RuntimeBuilder::timer_wait`]).
pub const DEFAULT_TIMER_WAIT: Duration = Duration::from_secs(60);

/// The name (and id) of the input that [`Runtime::cancel`] records: a
/// reserved signal name, which [`Runtime::signal`] refuses.
pub const CANCEL_SIGNAL: &str = "memo.cancel";

/// The shortest signal poll interval [`RuntimeBuilder::build`] accepts:
/// 1 ms.
pub const MIN_SIGNAL_POLL_INTERVAL: Duration = Duration::from_millis(1);

/// How long terminal runs are kept by default: 7 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// How many runs [`Runtime::recover`] drives at once by default.
pub const DEFAULT_RECOVERY_CONCURRENCY: usize = 8;

/// A named workflow function: `name` is recorded with each run, so
/// [`Runtime::recover`] resumes only this workflow's runs.
#[derive(Debug, Clone)]
pub struct Workflow<F> {
    name: Cow<'static, str>,
    run: F,
}

impl<F> Workflow<F> {
    /// The workflow `name`, running `run(ctx, input)`.
    pub fn new(name: impl Into<Cow<'static, str>>, run: F) -> Workflow<F> {
        Workflow {
            name: name.into(),
            run,
        }
    }

    /// The workflow's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What the runtime's parts share with every [`Context`].
struct Shared {
    memo: MemoStore,
    store: Arc<dyn RuntimeStore>,
    clock: Arc<dyn Clock>,
    signal_wait: Duration,
    signal_poll_interval: Duration,
    timer_wait: Duration,
    marker_retry: RetryPolicy,
    retention: Duration,
    recovery_concurrency: usize,
    /// How long an attempt holds its run without renewing.
    lease: Duration,
    /// Who this runtime's attempts say they are, in their leases.
    worker_id: String,
    /// Set once the memo store has been seen to refuse a second create;
    /// `None` if the check is turned off.
    conditional_create_checked: Option<tokio::sync::OnceCell<()>>,
    /// Set while a [`Worker`] of this runtime shuts down: attempts stop at
    /// their next step boundary.
    draining: std::sync::atomic::AtomicBool,
}

/// Runs workflows durably over a [`MemoStore`] and a [`RuntimeStore`].
///
/// Cheap to clone. Several runtimes, in one process or many, may share the
/// same stores: two of them racing on one run cannot both drive it (one
/// holds the run's lease; the other gets [`Error::LeaseHeld`] when it starts,
/// or [`Error::LeaseLost`] at its next commit once its lease was taken over).
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("memo", &self.shared.memo)
            .field("store", &self.shared.store)
            .field("clock", &self.shared.clock)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Runtime`]; see [`Runtime::builder`].
#[derive(Debug, Default)]
#[must_use]
pub struct RuntimeBuilder {
    memo: Option<MemoStore>,
    store: Option<Arc<dyn RuntimeStore>>,
    clock: Option<Arc<dyn Clock>>,
    signal_wait: Duration,
    signal_poll_interval: Option<Duration>,
    timer_wait: Option<Duration>,
    marker_retry: Option<RetryPolicy>,
    retention: Option<Duration>,
    recovery_concurrency: Option<usize>,
    skip_conditional_create_check: bool,
    lease: Option<Duration>,
    worker_id: Option<String>,
}

impl RuntimeBuilder {
    /// Where the steps' memos (and terminal markers) live. Required.
    pub fn memo_store(mut self, memo: MemoStore) -> Self {
        self.memo = Some(memo);
        self
    }

    /// Where runs and their receipts live. Required.
    pub fn runtime_store(mut self, store: Arc<dyn RuntimeStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The clock for timestamps (default: [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// How long [`Context::wait_for_signal`] waits in-process for a signal
    /// before the run suspends (default: zero, suspend at once).
    /// `Duration::MAX` waits as long as it takes: the attempt keeps its
    /// lease and polls until the signal comes.
    pub fn signal_wait(mut self, wait: Duration) -> Self {
        self.signal_wait = wait;
        self
    }

    /// How often a waiting run checks for its signal (default 200 ms; at
    /// least [`MIN_SIGNAL_POLL_INTERVAL`], so that a wait never polls the
    /// store without pause). A wait's last check comes when its
    /// [`signal_wait`](Self::signal_wait) is up, however long the interval.
    pub fn signal_poll_interval(mut self, interval: Duration) -> Self {
        self.signal_poll_interval = Some(interval);
        self
    }

    /// The longest wait [`Context::sleep`] (and a signal deadline) spends in
    /// process (default [`DEFAULT_TIMER_WAIT`], 60 s). A timer due within
    /// this wait is awaited by the attempt, which keeps renewing its lease;
    /// a later one suspends the attempt with [`Error::Suspended`] (its lease
    /// released), and running the run again once the timer is due, from any
    /// process, continues it. Zero suspends every timer that is not yet due;
    /// `Duration::MAX` waits in process for any timer.
    pub fn timer_wait(mut self, wait: Duration) -> Self {
        self.timer_wait = Some(wait);
        self
    }

    /// How the terminal-marker write is retried (default: 5 tries from
    /// 50 ms).
    pub fn marker_retry(mut self, policy: RetryPolicy) -> Self {
        self.marker_retry = Some(policy);
        self
    }

    /// How long a terminal run's memo entries and records are kept before
    /// [`Runtime::retention_sweeper`] clears them (default: 7 days).
    /// `Duration::MAX` keeps them for ever; zero lets the first sweep after
    /// a run ended clear it.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// How many runs [`Runtime::recover`] drives at once (default
    /// [`DEFAULT_RECOVERY_CONCURRENCY`]; at least 1).
    pub fn recovery_concurrency(mut self, runs: usize) -> Self {
        self.recovery_concurrency = Some(runs.max(1));
        self
    }

    /// How long an attempt holds its run's lease without renewing it
    /// (default [`DEFAULT_LEASE`]; at least 3 ms, shorter counts as 3 ms;
    /// a lease that would end past the last millisecond a `u64` holds ends
    /// there, so `Duration::MAX` never expires). A running attempt renews
    /// its lease every third of this; no other worker starts an attempt of
    /// the run until the lease has expired, and an attempt taken over after
    /// its lease expired can commit nothing more.
    ///
    /// Size it well above the longest time an attempt may go without being
    /// polled (a step that blocks its thread, a stop-the-world pause, a slow
    /// store request) plus the clock skew between workers: a lease that
    /// expires while its holder is alive lets a second worker run the same
    /// step, and only the step's memoized calls (and the idempotency keys it
    /// passes on, [`Memo::idempotency_key`](crate::Memo::idempotency_key))
    /// keep its side effects single. A longer lease only delays the take-over
    /// of a run whose worker crashed.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease.max(Duration::from_millis(3)));
        self
    }

    /// The name this runtime's attempts hold leases under, shown to other
    /// workers in [`Error::LeaseHeld`] (default: `pid<process id>-<random>`).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = Some(id.into());
        self
    }

    /// Whether the runtime checks, once, before its first write, that the
    /// memo store's backend refuses to create an object that exists
    /// (default: `true`). The check is [`probe_conditional_create`] under the
    /// memo store's prefix: three requests, once per runtime. A backend that
    /// fails it would let racing attempts overwrite each other's committed
    /// entries, so every call that would write fails with
    /// [`Error::ConditionalPutUnsupported`] instead.
    ///
    /// Turn it off only for a store known to keep conditional creates (or
    /// one that counts its requests in a test).
    ///
    /// [`probe_conditional_create`]: crate::probe_conditional_create
    pub fn check_conditional_create(mut self, check: bool) -> Self {
        self.skip_conditional_create_check = !check;
        self
    }

    /// The runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the memo store or the runtime store is
    /// missing, or the signal poll interval is shorter than
    /// [`MIN_SIGNAL_POLL_INTERVAL`].
    pub fn build(self) -> Result<Runtime> {
        let missing = |what: &str| Error::InvalidConfig {
            what: "Runtime".into(),
            reason: format!("{what} is required"),
        };
        let signal_poll_interval = self
            .signal_poll_interval
            .unwrap_or(DEFAULT_SIGNAL_POLL_INTERVAL);
        if signal_poll_interval < MIN_SIGNAL_POLL_INTERVAL {
            return Err(Error::InvalidConfig {
                what: "Runtime".into(),
                reason: format!(
                    "signal_poll_interval is {signal_poll_interval:?}; it must be at least \
                     {MIN_SIGNAL_POLL_INTERVAL:?}, or a waiting run would poll the store without pause"
                ),
            });
        }
        Ok(Runtime {
            shared: Arc::new(Shared {
                memo: self.memo.ok_or_else(|| missing("a memo store"))?,
                store: self.store.ok_or_else(|| missing("a runtime store"))?,
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                signal_wait: self.signal_wait,
                signal_poll_interval,
                timer_wait: self.timer_wait.unwrap_or(DEFAULT_TIMER_WAIT),
                marker_retry: self.marker_retry.unwrap_or_else(|| {
                    RetryPolicy::attempts(5).with_min_delay(Duration::from_millis(50))
                }),
                retention: self.retention.unwrap_or(DEFAULT_RETENTION),
                recovery_concurrency: self
                    .recovery_concurrency
                    .unwrap_or(DEFAULT_RECOVERY_CONCURRENCY),
                conditional_create_checked: (!self.skip_conditional_create_check)
                    .then(tokio::sync::OnceCell::new),
                draining: std::sync::atomic::AtomicBool::new(false),
                lease: self.lease.unwrap_or(DEFAULT_LEASE),
                worker_id: self.worker_id.unwrap_or_else(|| {
                    format!(
                        "pid{}-{:08x}",
                        std::process::id(),
                        crate::run_id::unique_token() as u32
                    )
                }),
            }),
        })
    }
}

/// What [`Runtime::cancel`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancellation {
    /// No attempt was running the run: it is now `Cancelled`, its terminal
    /// marker written.
    Cancelled,
    /// An attempt holds the run's lease: the cancellation is recorded, and
    /// that attempt ends the run `Cancelled` at its next step boundary or
    /// wait (or, if it crashes, the next attempt does, before any step).
    Requested {
        /// The live attempt's lease.
        lease: Lease,
    },
}

/// What [`Runtime::recover`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct Recovery<O, E> {
    /// Each resumed run and how its attempt ended (in run-id order). A
    /// workflow that panicked ended its attempt with [`Error::Aborted`]
    /// (converted into `E`); the run stays open.
    pub resumed: Vec<(RunId, Result<O, E>)>,
    /// Terminal runs found without a terminal marker, whose marker was
    /// written.
    pub remarked: usize,
    /// Runs that could not be loaded (a damaged record, a run deleted
    /// meanwhile) or whose terminal marker could not be written, with the
    /// error; every other run was recovered.
    pub skipped: Vec<(RunId, Error)>,
    /// Runs left alone because another attempt holds their lease (a live
    /// worker is running them, or a crashed one's lease has not expired):
    /// the lease, who holds it, and when it expires
    /// ([`Lease::until_ms`]), after which a recovery takes the run over.
    pub busy: Vec<(RunId, Lease)>,
}

impl Shared {
    fn lease_ms(&self) -> u64 {
        u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX)
    }

    fn timer_wait_ms(&self) -> u64 {
        u64::try_from(self.timer_wait.as_millis()).unwrap_or(u64::MAX)
    }
}

impl Runtime {
    /// A builder; a memo store and a runtime store are required.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The memo store.
    pub fn memo_store(&self) -> &MemoStore {
        &self.shared.memo
    }

    /// The runtime store.
    pub fn runtime_store(&self) -> &Arc<dyn RuntimeStore> {
        &self.shared.store
    }

    /// The clock the runtime stamps runs, receipts, leases and terminal
    /// markers with (see [`RuntimeBuilder::clock`]).
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// How long terminal runs are kept before a sweep clears them (see
    /// [`RuntimeBuilder::retention`]).
    pub fn retention(&self) -> Duration {
        self.shared.retention
    }

    /// A sweeper over this runtime's stores, clock and retention: it clears
    /// the memo entries, step outputs and runtime-store records of runs whose
    /// terminal marker is older than the retention.
    ///
    /// Run a pass with [`RetentionSweeper::sweep_now`], or sweep in the
    /// background with [`RetentionSweeper::spawn`]. A background sweeper
    /// whose [`SweeperHandle`](crate::SweeperHandle) is dropped is detached,
    /// not stopped: it keeps sweeping until the Tokio runtime shuts down;
    /// keep the handle and call
    /// [`shutdown`](crate::SweeperHandle::shutdown) to stop it. To change
    /// its page size, concurrency or dry-run mode, start from
    /// [`Runtime::retention_sweeper_builder`].
    pub fn retention_sweeper(&self) -> RetentionSweeper {
        self.retention_sweeper_builder().build()
    }

    /// A sweeper builder already set to this runtime's memo store,
    /// retention, runtime store and clock, for a sweeper that differs only in
    /// how it sweeps (page size, concurrency, dry run).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// # use std::sync::Arc;
    /// # use memo_runtime::{InMemoryRuntimeStore, MemoStore, object_store::memory::InMemory};
    /// # use memo_runtime::workflow::Runtime;
    /// # let runtime = Runtime::builder()
    /// #     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    /// #     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    /// #     .build()?;
    /// let preview = runtime.retention_sweeper_builder().dry_run(true).build();
    /// let report = preview.sweep_now().await?; // counts, deletes nothing
    /// assert!(report.dry_run);
    /// # Ok(()) }
    /// ```
    pub fn retention_sweeper_builder(&self) -> RetentionSweeperBuilder {
        RetentionSweeper::builder(self.shared.memo.clone(), self.shared.retention)
            .runtime_store(Arc::clone(&self.shared.store))
            .clock(Arc::clone(&self.shared.clock))
    }

    /// Starts run `run_id` of `workflow` with `input`, or resumes it, and
    /// returns its output.
    ///
    /// A new run is created; an existing run is resumed from its receipts
    /// (its recorded input is used, and must equal `input`: inputs are
    /// compared by their [`content_key`](crate::content_key), so a map
    /// delivered again in another order is the same input). A run that has
    /// completed returns its stored output without running anything. When
    /// the workflow returns, its result is committed as the run's terminal
    /// status, and then the run's terminal marker is written for retention.
    ///
    /// # Errors
    ///
    /// The workflow's own error (the run is then `Failed`, with the error's
    /// message stored). Converted into `E`: [`Error::RunFailed`] /
    /// [`Error::RunCancelled`] for a run that ended so before;
    /// [`Error::Conflict`] if the run exists with another workflow or input,
    /// or another worker started this attempt or committed a step first;
    /// [`Error::Suspended`] if the run waits for a signal or a timer (at
    /// once, starting no attempt and writing nothing, if it was suspended in
    /// that wait already and what it waits for is still not there); the step
    /// errors of [`Context::step`]. None of these fail the run.
    pub async fn run<I, O, E, F, Fut>(
        &self,
        run_id: &RunId,
        input: &I,
        workflow: &Workflow<F>,
    ) -> Result<O, E>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        self.check_conditional_create().await?;
        let new_run = NewRun {
            run_id: run_id.clone(),
            workflow: workflow.name.to_string(),
            input: codec::encode_value("the workflow input", input)?,
            created_at_ms: self.shared.clock.now_ms(),
        };
        let record = self.create_run(new_run, input).await?;
        let span = tracing::info_span!("memo.run", %run_id, workflow = %workflow.name);
        self.drive(record, workflow).instrument(span).await
    }

    /// Continues run `run_id` of `workflow` from its stored input, for a
    /// caller that knows only the run's id (a webhook, a signal handler):
    /// the same as [`Runtime::run`] with the input the run was started with.
    ///
    /// A run whose last attempt suspended in a wait that is still pending
    /// (a timer not yet due, a signal not yet sent) is not started again:
    /// this returns [`Error::Suspended`] at once and writes nothing, however
    /// often it is called. The same holds for [`Runtime::run`] and
    /// [`Runtime::recover`].
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`]; otherwise as [`Runtime::run`].
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{Error, InMemoryRuntimeStore, MemoStore, RunId};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, Runtime, Workflow};
    ///
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .build()?;
    /// let greet = Workflow::new("greet", |ctx: Context, name: String| async move {
    ///     let greeting: String = ctx.wait_for_signal("greeting").await?;
    ///     Ok::<_, Error>(format!("{greeting}, {name}"))
    /// });
    /// let run = RunId::new("greet-1")?;
    /// assert!(runtime.run(&run, &"Ada".to_string(), &greet).await.is_err()); // waits
    ///
    /// // Later, a webhook that knows only the run id:
    /// runtime.signal(&run, "greeting", "Hello").await?;
    /// let out: String = runtime.resume(&run, &greet).await?;
    /// assert_eq!(out, "Hello, Ada");
    /// # Ok(()) }
    /// ```
    pub async fn resume<I, O, E, F, Fut>(
        &self,
        run_id: &RunId,
        workflow: &Workflow<F>,
    ) -> Result<O, E>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        self.check_conditional_create().await?;
        let record =
            self.shared
                .store
                .load_run(run_id)
                .await?
                .ok_or_else(|| Error::RunNotFound {
                    run_id: run_id.to_string(),
                })?;
        let span = tracing::info_span!("memo.resume", %run_id, workflow = %workflow.name);
        self.drive(record, workflow).instrument(span).await
    }

    /// Records the signal `name` with `payload` for run `run_id`, for
    /// [`Context::wait_for_signal`]. Sending the same signal (name and
    /// payload, compared by their [`content_key`](crate::content_key), so
    /// a map's order does not matter) twice records it once; use
    /// [`Runtime::signal_with_id`] to send equal signals that must count
    /// separately.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`]; [`Error::Conflict`] if the run is terminal.
    pub async fn signal<T: Serialize + ?Sized>(
        &self,
        run_id: &RunId,
        name: &str,
        payload: &T,
    ) -> Result<()> {
        let id = crate::content_key(&(name, payload))?;
        let payload = codec::encode_value("the signal payload", payload)?;
        match self.append_signal(run_id, id.clone(), name, payload).await {
            // The id is the canonical digest of (name, payload): an input
            // recorded under it is this signal, whatever its bytes' order.
            Err(Error::Conflict { what, reason }) => {
                let inputs = self.shared.store.load_inputs(run_id).await?;
                if inputs.iter().any(|i| i.input_id == id && i.name == name) {
                    return Ok(());
                }
                Err(Error::Conflict { what, reason })
            }
            appended => appended,
        }
    }

    /// Records the signal `name` under the caller's idempotency key `id`.
    ///
    /// # Errors
    ///
    /// As [`Runtime::signal`]; also [`Error::Conflict`] if `id` was used
    /// with another name or payload.
    pub async fn signal_with_id<T: Serialize + ?Sized>(
        &self,
        run_id: &RunId,
        id: &str,
        name: &str,
        payload: &T,
    ) -> Result<()> {
        let payload = codec::encode_value("the signal payload", payload)?;
        self.append_signal(run_id, id.to_string(), name, payload)
            .await
    }

    /// Creates the run, or finds it created earlier with the same workflow
    /// and an input equal to `input` under the canonical encoding of content
    /// keys (the store compares encoded bytes, which a map's order changes).
    async fn create_run<I>(&self, new_run: NewRun, input: &I) -> Result<RunRecord>
    where
        I: Serialize + DeserializeOwned,
    {
        let (run_id, workflow) = (new_run.run_id.clone(), new_run.workflow.clone());
        match self.shared.store.create_run(new_run).await {
            Err(Error::Conflict { what, reason }) => {
                if let Some(record) = self.shared.store.load_run(&run_id).await?
                    && record.workflow == workflow
                    && same_input(&record.input, input)?
                {
                    return Ok(record);
                }
                Err(Error::Conflict { what, reason })
            }
            created => created,
        }
    }

    /// Checks, once per runtime, that the memo store refuses a second create
    /// (see [`RuntimeBuilder::check_conditional_create`]).
    async fn check_conditional_create(&self) -> Result<()> {
        if let Some(checked) = &self.shared.conditional_create_checked {
            let memo = &self.shared.memo;
            checked
                .get_or_try_init(|| {
                    crate::probe_conditional_create(memo.object_store().as_ref(), memo.prefix())
                })
                .await?;
        }
        Ok(())
    }

    async fn append_signal(
        &self,
        run_id: &RunId,
        input_id: String,
        name: &str,
        payload: Bytes,
    ) -> Result<()> {
        self.check_conditional_create().await?;
        if name == CANCEL_SIGNAL && input_id != CANCEL_SIGNAL {
            return Err(Error::InvalidWrite {
                run_id: run_id.to_string(),
                reason: format!(
                    "the signal name {CANCEL_SIGNAL:?} is reserved; cancel a run with Runtime::cancel"
                ),
            });
        }
        due::before_signal(&self.shared, run_id).await?;
        let input = NewInput {
            input_id,
            name: name.to_string(),
            payload,
            accepted_at_ms: self.shared.clock.now_ms(),
        };
        self.shared
            .store
            .append_input(run_id, input)
            .await
            .map(drop)
    }

    /// Cancels run `run_id`, recording `reason`.
    ///
    /// The request is recorded durably first (as the run's input
    /// [`CANCEL_SIGNAL`]). If no attempt holds the run's lease, the run ends
    /// `Cancelled` at once (this call takes the lease, so no attempt can
    /// start meanwhile) and its terminal marker is written, so the sweeper
    /// clears it after the retention like any other ended run. If an attempt
    /// is running it, that attempt observes the cancellation at its next
    /// step boundary or wait, never in the middle of a step body: a step
    /// already running finishes (its receipt is committed), no new step body
    /// starts, and the attempt ends the run `Cancelled`. A live attempt
    /// learns of the request at its lease renewals (every third of the
    /// lease), at each poll of a signal wait, and when the workflow asks
    /// ([`Context::is_cancelled`]). Calling `cancel` again is harmless; the
    /// first reason is kept.
    ///
    /// # Errors
    ///
    /// [`Error::RunNotFound`]; [`Error::Conflict`] if the run has already
    /// ended (completed, failed or cancelled); a store error.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{Error, InMemoryRuntimeStore, MemoStore, RunId};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::runtime_store::RunStatus;
    /// use memo_runtime::workflow::{Cancellation, Context, Runtime, Workflow};
    ///
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .build()?;
    /// let order = Workflow::new("order", |ctx: Context, _: ()| async move {
    ///     let paid: bool = ctx.wait_for_signal("paid").await?;
    ///     Ok::<_, Error>(paid)
    /// });
    /// let run = RunId::new("order-1")?;
    /// assert!(runtime.run(&run, &(), &order).await.is_err()); // waits for "paid"
    ///
    /// assert_eq!(runtime.cancel(&run, "customer left").await?, Cancellation::Cancelled);
    /// let record = runtime.status(&run).await?.expect("the run");
    /// assert_eq!(record.status, RunStatus::Cancelled);
    /// assert!(matches!(runtime.run(&run, &(), &order).await, Err(Error::RunCancelled { .. })));
    /// // An ended run cannot be cancelled.
    /// assert!(matches!(runtime.cancel(&run, "again").await, Err(Error::Conflict { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, run_id: &RunId, reason: impl Into<String>) -> Result<Cancellation> {
        self.check_conditional_create().await?;
        let store = &self.shared.store;
        let ended = |record: &RunRecord| Error::Conflict {
            what: format!("run {run_id}"),
            reason: format!(
                "the run has already ended ({}); only an open run can be cancelled",
                record.status
            ),
        };
        let not_found = || Error::RunNotFound {
            run_id: run_id.to_string(),
        };
        let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
        if record.status.is_terminal() {
            return Err(ended(&record));
        }
        let payload = codec::encode_value("the cancellation reason", &reason.into())?;
        let id = CANCEL_SIGNAL.to_string();
        if let Err(e) = self.append_signal(run_id, id, CANCEL_SIGNAL, payload).await {
            // Ended meanwhile, or cancelled before (with another reason).
            let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
            if record.status.is_terminal() {
                return Err(ended(&record));
            }
            if !matches!(e, Error::Conflict { .. }) {
                return Err(e);
            }
        }
        let reason = cancel_reason(&store.load_inputs(run_id).await?);
        let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
        let attempt = record.attempts.saturating_add(1);
        let started = due::start_attempt(&self.shared, run_id, record.incarnation, attempt).await;
        let (lease, due_entry) = match started {
            Ok(started) => started,
            Err(Error::LeaseHeld {
                attempt,
                owner,
                until_ms,
                ..
            }) => {
                let lease = Lease {
                    attempt,
                    owner,
                    until_ms,
                };
                return Ok(Cancellation::Requested { lease });
            }
            Err(e) => {
                // Another worker started an attempt first: it will see the
                // request when it starts; or the run ended meanwhile.
                let record = store.load_run(run_id).await?.ok_or_else(not_found)?;
                if record.status.is_terminal() {
                    return Err(ended(&record));
                }
                return match record.lease {
                    Some(lease) if matches!(e, Error::Conflict { .. }) => {
                        Ok(Cancellation::Requested { lease })
                    }
                    _ => Err(e),
                };
            }
        };
        self.end_cancelled(run_id, record.incarnation, &lease, reason)
            .await?;
        due::settle(&self.shared, lease.held(), true, &due_entry).await;
        Ok(Cancellation::Cancelled)
    }

    /// Commits the run's cancellation under `lease` and writes its marker.
    async fn end_cancelled(
        &self,
        run_id: &RunId,
        incarnation: crate::run_id::Incarnation,
        lease: &AttemptLease<'_>,
        reason: Option<String>,
    ) -> Result<()> {
        let terminal_at_ms = self.shared.clock.now_ms();
        let change = StatusChange::Cancelled { reason };
        let commit = Commit::status(change, terminal_at_ms).with_fence(lease.held().fence());
        if let Err(e) = self.shared.store.atomic_apply(run_id, commit).await {
            lease.release().await;
            return Err(e);
        }
        let marker = TerminalMarker {
            run_id: run_id.clone(),
            terminal_at_ms,
            incarnation,
        };
        self.mark_terminal(&marker).await;
        Ok(())
    }

    /// The run's record, if it exists.
    ///
    /// # Errors
    ///
    /// As [`RuntimeStore::load_run`].
    pub async fn status(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.shared.store.load_run(run_id).await
    }

    /// Resumes every run of `workflow` that is not terminal (one attempt
    /// each, at most [`RuntimeBuilder::recovery_concurrency`] at once), and
    /// writes the terminal marker of every terminal run that has none, so
    /// that a marker write lost in a crash cannot leave a run unsweepable.
    ///
    /// Runs are recovered in isolation: each is loaded on its own, so a
    /// damaged or half-deleted run is reported in [`Recovery::skipped`] and
    /// the others are still resumed; a workflow that panics ends only its
    /// own attempt, reported as [`Error::Aborted`] in [`Recovery::resumed`].
    /// Its run stays open (`Running`), so a run that panics at every attempt
    /// is resumed, and panics again, at every recovery, its `attempts`
    /// growing each time, until its code is fixed or it is cancelled.
    ///
    /// Listing runs costs what [`RuntimeStore::list_run_ids`] costs for each
    /// status, plus one listing of the terminal markers, plus a load per
    /// open run and per terminal run without a marker: the retained
    /// terminal runs are listed, not read. Call it at start-up, not in a
    /// loop.
    ///
    /// # Errors
    ///
    /// A failed listing; each run's own outcome is in the [`Recovery`].
    pub async fn recover<I, O, E, F, Fut>(&self, workflow: &Workflow<F>) -> Result<Recovery<O, E>>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        self.check_conditional_create().await?;
        let store = &self.shared.store;
        let mut skipped = Vec::new();
        let mut remarked = 0;
        // A run id with a marker of any incarnation counts as marked: only
        // an unfinished sweep of an earlier run of the id leaves one, and
        // once the sweep ends, the next recovery marks the later run.
        let marked: HashSet<RunId> = (self.shared.memo.list_terminal_markers().await?)
            .into_iter()
            .map(|marker| marker.run_id)
            .collect();
        for status in [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            for run_id in store.list_run_ids(status).await? {
                if marked.contains(&run_id) {
                    continue;
                }
                match self.remark(&run_id).await {
                    Ok(true) => remarked += 1,
                    Ok(false) => {}
                    Err(e) => skipped.push((run_id, e)),
                }
            }
        }
        let mut open = Vec::new();
        let mut busy = Vec::new();
        let now = self.shared.clock.now_ms();
        for status in [RunStatus::Pending, RunStatus::Running] {
            for run_id in store.list_run_ids(status).await? {
                match store.load_run(&run_id).await {
                    Ok(Some(record))
                        if record.lease.as_ref().is_some_and(|l| l.is_live_at(now)) =>
                    {
                        if record.workflow == workflow.name {
                            busy.extend(record.lease.map(|lease| (run_id, lease)));
                        }
                    }
                    Ok(Some(record))
                        if !record.status.is_terminal() && record.workflow == workflow.name =>
                    {
                        open.push(record);
                    }
                    // Deleted or finished meanwhile, or another workflow's.
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(%run_id, error = %e, "run not recovered");
                        skipped.push((run_id, e));
                    }
                }
            }
        }
        // A run that moved from Pending to Running between the listings.
        open.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        open.dedup_by(|a, b| a.run_id == b.run_id);
        let mut resumed: Vec<_> = futures::stream::iter(open)
            .map(|record| self.recover_run(record, workflow))
            .buffer_unordered(self.shared.recovery_concurrency)
            .collect()
            .await;
        resumed.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Recovery {
            resumed,
            remarked,
            skipped,
            busy,
        })
    }

    /// Writes the terminal marker of `run_id` again if the run is terminal.
    async fn remark(&self, run_id: &RunId) -> Result<bool> {
        let Some(record) = self.shared.store.load_run(run_id).await? else {
            return Ok(false);
        };
        let Some(terminal_at_ms) = record.terminal_at_ms else {
            return Ok(false);
        };
        let marker = TerminalMarker {
            run_id: record.run_id,
            terminal_at_ms,
            incarnation: record.incarnation,
        };
        self.shared.memo.write_marker(&marker).await?;
        Ok(true)
    }

    /// One attempt of a run found by [`Runtime::recover`]; a panic ends the
    /// attempt, not the recovery.
    async fn recover_run<I, O, E, F, Fut>(
        &self,
        record: RunRecord,
        workflow: &Workflow<F>,
    ) -> (RunId, Result<O, E>)
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        let run_id = record.run_id.clone();
        let span = tracing::info_span!("memo.recover", %run_id, workflow = %workflow.name);
        let outcome = self.drive(record, workflow).instrument(span).await;
        (run_id, outcome)
    }

    /// One attempt of a run that exists.
    async fn drive<I, O, E, F, Fut>(
        &self,
        record: RunRecord,
        workflow: &Workflow<F>,
    ) -> Result<O, E>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        let run_id = record.run_id.clone();
        if record.workflow != workflow.name {
            return Err(Error::Conflict {
                what: format!("run {run_id}"),
                reason: format!(
                    "it runs workflow {:?}, not {:?}",
                    record.workflow, workflow.name
                ),
            }
            .into());
        }
        if let Some(done) = finished(&record) {
            return done.map_err(E::from);
        }
        let input: I = codec::decode_value(
            "the workflow input",
            &format!("run {run_id}"),
            &record.input,
        )?;
        if let Some(waiting) = self.still_waiting(&record).await? {
            // Nothing it waits for is there: no attempt, no write.
            return Err(waiting.into());
        }
        let attempt = record.attempts + 1;
        let (lease, due_entry) =
            due::start_attempt(&self.shared, &run_id, record.incarnation, attempt).await?;
        let body = std::panic::AssertUnwindSafe(self.attempt(&record, input, &lease, workflow));
        let outcome = lease.hold(body.catch_unwind()).await;
        let (result, ended) = match outcome {
            Ok(Ok(Ok(done))) => done,
            Ok(Ok(Err(interruption))) => (Err(E::from(interruption)), false),
            Ok(Err(panic)) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(%run_id, panic = %message, "the workflow panicked; the run stays open");
                let aborted = Error::Aborted {
                    run_id: run_id.to_string(),
                    reason: format!("the workflow panicked: {message}"),
                };
                (Err(E::from(aborted)), false)
            }
            Err(lost) => (Err(E::from(lost)), false),
        };
        due::settle(&self.shared, lease.held(), ended, &due_entry).await;
        if !ended {
            // However the attempt stopped, the next one need not wait.
            lease.release().await;
        }
        result
    }

    /// [`Error::Suspended`] if the run's last attempt suspended in a wait
    /// that would suspend again now: a timer not yet due (beyond the timer
    /// wait), or a signal wait (with no in-process signal wait configured)
    /// whose signal has not come and whose deadline, if any, has not passed.
    /// Costs a read of the run's receipts (and of its inputs, for a signal
    /// wait) for a run that has had an attempt; none for a new run.
    async fn still_waiting(&self, record: &RunRecord) -> Result<Option<Error>> {
        if record.attempts == 0 {
            return Ok(None);
        }
        let store = &self.shared.store;
        let history = store.load_receipts(&record.run_id, None).await?;
        let Some(last) = history.last().filter(|r| r.error.is_none()) else {
            return Ok(None);
        };
        let now = self.shared.clock.now_ms();
        let far = |at: u64| at > now && at - now > self.shared.timer_wait_ms();
        let suspended = |signal: &str, until_ms| Error::Suspended {
            run_id: record.run_id.to_string(),
            signal: signal.to_string(),
            until_ms,
        };
        if last.step == context::SLEEP_STEP {
            let wake = codec::decode::<u64>(&last.output).ok();
            return Ok(wake.filter(|&at| far(at)).map(|at| suspended("", Some(at))));
        }
        let (names, deadline) =
            if let Some(name) = last.step.strip_prefix(context::WAIT_STEP_PREFIX) {
                (vec![name.to_string()], None)
            } else if let Some(name) = last.step.strip_prefix(context::DEADLINE_STEP_PREFIX) {
                let Ok(at) = codec::decode::<u64>(&last.output) else {
                    return Ok(None);
                };
                if !far(at) {
                    return Ok(None);
                }
                (vec![name.to_string()], Some(at))
            } else if let Some((at, names)) = context::select_recorded(last) {
                let at = (at != u64::MAX).then_some(at);
                if at.is_some_and(|at| !far(at)) {
                    return Ok(None);
                }
                (names, at)
            } else {
                return Ok(None);
            };
        let name = &names.join(",");
        if !self.shared.signal_wait.is_zero() {
            return Ok(None);
        }
        let inputs = store.load_inputs(&record.run_id).await?;
        let arrived = inputs.iter().any(|input| {
            names.contains(&input.name)
                && input.accepted_at_ms <= deadline.unwrap_or(u64::MAX)
                && matches!(input.phase, InputPhase::Accepted | InputPhase::Queued)
        });
        if arrived || cancel_reason(&inputs).is_some() {
            return Ok(None);
        }
        Ok(Some(suspended(name, deadline)))
    }

    /// The body of one attempt, under its lease: replays the history, runs
    /// the workflow and commits its outcome. `true` with the result if the
    /// run ended (its terminal status committed); an error for a transient
    /// error that interrupted the attempt before the workflow ran or after it.
    async fn attempt<I, O, E, F, Fut>(
        &self,
        record: &RunRecord,
        input: I,
        lease: &AttemptLease<'_>,
        workflow: &Workflow<F>,
    ) -> Result<(Result<O, E>, bool)>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        let run_id = record.run_id.clone();
        let attempt = lease.held().fence().attempt;
        let store = &self.shared.store;
        let history = store.load_receipts(&run_id, None).await?;
        lease.held().note_cancel(&store.load_inputs(&run_id).await?);
        tracing::info!(attempt, recorded_steps = history.len(), "attempt started");
        let ctx = Context::new(
            Arc::clone(&self.shared),
            run_id.clone(),
            record.incarnation,
            Arc::clone(lease.held()),
            history,
        );
        let result = (workflow.run)(ctx.clone(), input).await;
        if let Some(reason) = ctx.observed_cancel() {
            // The attempt observed the cancellation: whatever the workflow
            // returned, the run ends cancelled.
            tracing::info!(%run_id, "run cancelled");
            let commit = Commit::status(
                StatusChange::Cancelled {
                    reason: Some(reason.clone()),
                },
                self.shared.clock.now_ms(),
            );
            let terminal_at_ms = commit.at_ms;
            store
                .atomic_apply(&run_id, commit.with_fence(lease.held().fence()))
                .await?;
            let marker = TerminalMarker {
                run_id: run_id.clone(),
                terminal_at_ms,
                incarnation: record.incarnation,
            };
            self.mark_terminal(&marker).await;
            let cancelled = Error::RunCancelled {
                run_id: run_id.to_string(),
                reason: Some(reason),
            };
            return Ok((Err(cancelled.into()), true));
        }
        if let Some(interruption) = ctx.take_interruption() {
            // The runtime, not the workflow, stopped this attempt: leave the run
            // open so that it can be resumed.
            tracing::warn!(%interruption, "attempt stopped; the run stays open");
            return Ok(match result {
                Err(e) => (Err(e), false),
                Ok(_) => {
                    let aborted = Error::Aborted {
                        run_id: run_id.to_string(),
                        reason: interruption,
                    };
                    (Err(aborted.into()), false)
                }
            });
        }
        let (change, result) = match result {
            Ok(output) => match codec::encode_value("the workflow output", &output) {
                Ok(encoded) => (StatusChange::Completed { output: encoded }, Ok(output)),
                // A permanent error: retrying the run could only fail again.
                Err(e) => (
                    StatusChange::Failed {
                        error: e.to_string(),
                    },
                    Err(E::from(e)),
                ),
            },
            Err(e) => (
                StatusChange::Failed {
                    error: e.to_string(),
                },
                Err(e),
            ),
        };
        let terminal_at_ms = self.shared.clock.now_ms();
        let commit = Commit::status(change, terminal_at_ms).with_fence(lease.held().fence());
        store.atomic_apply(&run_id, commit).await?;
        let marker = TerminalMarker {
            run_id: run_id.clone(),
            terminal_at_ms,
            incarnation: record.incarnation,
        };
        self.mark_terminal(&marker).await;
        Ok((result, true))
    }

    /// Writes the terminal marker, retrying; a marker that still fails is
    /// written again by [`Runtime::recover`].
    async fn mark_terminal(&self, marker: &TerminalMarker) {
        let write = || self.shared.memo.write_marker(marker);
        let written = write
            .retry(self.shared.marker_retry.backoff())
            .sleep(tokio::time::sleep)
            .await;
        if let Err(e) = written {
            tracing::warn!(run_id = %marker.run_id, error = %e, "terminal marker not written; recover() will write it");
        }
    }
}

/// The reason of the cancellation recorded among a run's `inputs`, if
/// [`Runtime::cancel`] recorded one (an empty reason if it does not decode).
fn cancel_reason(inputs: &[crate::runtime_store::InputRecord]) -> Option<String> {
    inputs
        .iter()
        .find(|input| input.name == CANCEL_SIGNAL)
        .map(|input| codec::decode::<String>(&input.payload).unwrap_or_default())
}

/// The stored result of a terminal run; `None` for a run still open.
fn finished<O: DeserializeOwned>(record: &RunRecord) -> Option<Result<O>> {
    let run_id = record.run_id.to_string();
    match record.status {
        RunStatus::Pending | RunStatus::Running => None,
        RunStatus::Completed => {
            let output = record.output.clone().unwrap_or_default();
            Some(codec::decode_value(
                "the workflow output",
                &format!("run {run_id}"),
                &output,
            ))
        }
        RunStatus::Failed => Some(Err(Error::RunFailed {
            run_id,
            message: record.error.clone().unwrap_or_default(),
        })),
        RunStatus::Cancelled => Some(Err(Error::RunCancelled {
            run_id,
            reason: record.error.clone(),
        })),
    }
}

/// What a panic said, if it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Whether `stored` (an input recorded as [`codec::encode`] wrote it) is `input`
/// under the canonical encoding of content keys.
fn same_input<I: Serialize + DeserializeOwned>(stored: &[u8], input: &I) -> Result<bool> {
    let Ok(stored) = codec::decode::<I>(stored) else {
        return Ok(false);
    };
    Ok(crate::content_key(&stored)? == crate::content_key(input)?)
}
