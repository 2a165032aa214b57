//! The workflow runtime: durable steps, replay, signals and terminal marking.
//!
//! A workflow is an async function of a [`Context`] and an input. Each
//! [`Context::step`] it calls is durable: its output is committed to the
//! [`RuntimeStore`] as the run's receipt for that position, and an attempt
//! that finds the receipt replays it instead of running the step again. The
//! step in flight when a process died runs again; the `#[memoized]` calls
//! inside it hit the step's memo, so no committed side effect repeats.
//!
//! Use it when a job is more than one memoized call: a [`Runtime`] (built
//! over a [`MemoStore`] and a [`RuntimeStore`]) runs, resumes, signals,
//! cancels and recovers runs of a [`Workflow`], one worker at a time per run
//! (leases), and marks each ended run for [`retention`](crate::retention).
//! The repository's `docs/guide/workflows.md` explains each part, and
//! `docs/guide/durability.md` what survives a crash.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
//! use std::sync::Arc;
//! use memo_runtime::{Memo, MemoStore, RunId, memoized, runtime_store::InMemoryRuntimeStore};
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

mod attempt;
mod builder;
mod cancel;
mod context;
mod cost;
mod due;
mod hook;
mod lease;
mod outcome;
mod recovery;
pub mod replay_check;
mod retry;
mod run;
mod worker;

use std::borrow::Cow;
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use builder::RuntimeBuilder;
pub use cancel::Cancellation;
pub use context::{BoxError, Context, Selected, Step};
pub use due::DueRun;
pub use outcome::{RunOutcome, Suspension};
pub use recovery::Recovery;
pub use replay_check::{
    DeployCheck, PatchUse, ReplayCheck, ReplayOutcome, ReplayReport, RunReplay,
};
pub use retry::RetryPolicy;
pub use run::Runtime;
#[cfg(any(test, feature = "testing"))]
pub(crate) use worker::Polling;
pub use worker::{
    DEFAULT_POLL_BATCH, DEFAULT_POLL_INTERVAL, DEFAULT_SWEEP_INTERVAL, DEFAULT_WORKER_CONCURRENCY,
    WakeReport, Worker, WorkerBuilder, WorkerHandle,
};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::Clock;
use crate::error::Error;
use crate::memo::MemoStore;
use crate::runtime_store::{RunRecord, RuntimeStore};

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

/// A named workflow function: `name` (and the version, if it has one) is
/// recorded with each run, so [`Runtime::recover`] resumes only this
/// workflow's runs, each on the version it started on.
#[derive(Debug, Clone)]
pub struct Workflow<F> {
    name: Cow<'static, str>,
    version: Option<Cow<'static, str>>,
    run: F,
}

impl<F> Workflow<F> {
    /// The workflow `name`, running `run(ctx, input)`, with no version.
    pub fn new(name: impl Into<Cow<'static, str>>, run: F) -> Workflow<F> {
        Workflow {
            name: name.into(),
            version: None,
            run,
        }
    }

    /// The same workflow as version `version` of its name.
    ///
    /// The version is recorded in each run the workflow starts, and a run
    /// continues only on the version it started on: a worker registers
    /// every version that still has open runs (say `"1"` and `"2"` during a
    /// deploy), each run is driven by its own version's code, and a run
    /// whose version no worker registers is left open and reported
    /// ([`Recovery::skipped`], [`WakeReport::unknown`]), never failed;
    /// [`Runtime::run`] or [`Runtime::resume`] of it with another version
    /// is an [`Error::VersionNotRegistered`] that changes nothing (a run
    /// that has ended returns its stored result to any version: nothing
    /// runs). A run started with no version is a run of the unversioned
    /// workflow. Use a version for a change too large for
    /// [`Context::patched`]; the repository's `docs/guide/workflows.md`
    /// compares the two.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{Error, MemoStore, RunId, runtime_store::InMemoryRuntimeStore};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, Runtime, Workflow};
    ///
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .build()?;
    /// let v1 = Workflow::new("greet", |ctx: Context, who: String| async move {
    ///     let greeting: String = ctx.wait_for_signal("greeting").await?;
    ///     Ok::<_, Error>(format!("{greeting} {who}"))
    /// })
    /// .with_version("1");
    /// let v2 = Workflow::new("greet", |_ctx: Context, who: String| async move {
    ///     Ok::<_, Error>(format!("hi {who}"))
    /// })
    /// .with_version("2");
    ///
    /// let run = RunId::new("greet-ada")?;
    /// assert!(runtime.run(&run, &"ada".to_string(), &v1).await.is_err()); // waits
    /// let record = runtime.status(&run).await?.unwrap();
    /// assert_eq!(record.workflow_version.as_deref(), Some("1"));
    /// runtime.signal(&run, "greeting", "hello").await?;
    /// // Version 2 does not drive a run that started on version 1...
    /// let refused = runtime.resume(&run, &v2).await;
    /// assert!(matches!(refused, Err(Error::VersionNotRegistered { .. })));
    /// // ...version 1 does.
    /// assert_eq!(runtime.resume(&run, &v1).await?, "hello ada");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_version(mut self, version: impl Into<Cow<'static, str>>) -> Workflow<F> {
        self.version = Some(version.into());
        self
    }

    /// The workflow's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The workflow's version, if it has one.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Whether a run recorded with `version` is this version's to drive.
    fn drives_version(&self, version: Option<&str>) -> bool {
        self.version() == version
    }
}

/// Why a workflow's code does not drive a run: it started on another
/// version (nothing is run or failed).
fn other_version(record: &RunRecord, this: Option<&str>) -> Error {
    Error::VersionNotRegistered {
        run_id: record.run_id.to_string(),
        workflow: record.workflow.clone(),
        version: record.workflow_version.clone(),
        registered: vec![this.map(str::to_string)],
    }
}

/// What a [`Workflow`] runs: an async function of a [`Context`] and an input
/// `I` that returns `Result<Output, Error>`.
///
/// Every closure or `fn` of the shape
/// `Fn(Context, I) -> impl Future<Output = Result<O, E>>` is one (with
/// `O: Serialize + DeserializeOwned` and
/// `E: From<memo_runtime::Error> + Display`); the trait is sealed, so there
/// is nothing to implement. It gives that shape a name, so a function
/// can return a workflow, which `impl Fn(Context, I) -> impl Future<..>`
/// cannot say.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// use std::sync::Arc;
/// use memo_runtime::{Error, MemoStore, RunId, runtime_store::InMemoryRuntimeStore};
/// use memo_runtime::object_store::memory::InMemory;
/// use memo_runtime::workflow::{Context, Runtime, Workflow, WorkflowFn};
///
/// fn doubler(factor: u64) -> Workflow<impl WorkflowFn<u64, Output = u64, Error = Error>> {
///     Workflow::new("doubler", move |ctx: Context, n: u64| async move {
///         ctx.step("double", |_memo| async move { Ok::<_, Error>(n * factor) }).await
///     })
/// }
///
/// let runtime = Runtime::builder()
///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
///     .build()?;
/// assert_eq!(runtime.run(&RunId::new("d-1")?, &21, &doubler(2)).await?, 42);
/// # Ok(()) }
/// ```
pub trait WorkflowFn<I>: sealed::Sealed<I> {
    /// What the workflow returns; committed as the run's output.
    type Output: Serialize + DeserializeOwned;
    /// The workflow's error; its message is stored when it fails the run.
    type Error: From<Error> + Display;
    /// The future of one attempt.
    #[doc(hidden)]
    type Future: Future<Output = std::result::Result<Self::Output, Self::Error>>;

    /// Starts one attempt of the workflow.
    #[doc(hidden)]
    fn call(&self, ctx: Context, input: I) -> Self::Future;
}

impl<I, O, E, F, Fut> WorkflowFn<I> for F
where
    F: Fn(Context, I) -> Fut,
    Fut: Future<Output = std::result::Result<O, E>>,
    O: Serialize + DeserializeOwned,
    E: From<Error> + Display,
{
    type Output = O;
    type Error = E;
    type Future = Fut;

    fn call(&self, ctx: Context, input: I) -> Fut {
        self(ctx, input)
    }
}

mod sealed {
    use super::Context;

    /// Keeps [`WorkflowFn`](super::WorkflowFn) to the functions the runtime
    /// was written for.
    pub trait Sealed<I> {}

    impl<I, F, Fut> Sealed<I> for F where F: Fn(Context, I) -> Fut {}
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
    /// The most two processes' clocks may disagree
    /// (`RuntimeBuilder::max_clock_skew`).
    max_clock_skew: Duration,
    /// Who this runtime's attempts say they are, in their leases.
    worker_id: String,
    /// Set once the memo store has been seen to refuse a second create;
    /// `None` if the check is turned off.
    conditional_create_checked: Option<tokio::sync::OnceCell<()>>,
    /// Set while a [`Worker`] of this runtime shuts down: attempts stop at
    /// their next step boundary.
    draining: std::sync::atomic::AtomicBool,
    /// Notified once this runtime made a run due now (a signal's wake-up):
    /// a [spawned](Worker::spawn) worker of it lists the due-run index at
    /// once rather than at its next poll.
    due_now: tokio::sync::Notify,
    /// Whether attempts record what they cost (`RuntimeBuilder::cost_ledger`).
    cost_ledger: bool,
}

impl Shared {
    fn lease_ms(&self) -> u64 {
        u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX)
    }

    fn max_clock_skew_ms(&self) -> u64 {
        u64::try_from(self.max_clock_skew.as_millis()).unwrap_or(u64::MAX)
    }

    fn timer_wait_ms(&self) -> u64 {
        u64::try_from(self.timer_wait.as_millis()).unwrap_or(u64::MAX)
    }
}
