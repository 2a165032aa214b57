//! The replay check: replays stored runs' recorded histories against new
//! workflow code, before a deploy, without running anything.
//!
//! A [`ReplayCheck`] reads the runs of one [`Workflow`] from a
//! [`RuntimeStore`] (all of them, those in chosen statuses, or the first
//! few) through a view that refuses every write, and replays each run's
//! receipts against the workflow's code as a resuming attempt would: every
//! step the code calls must be the step recorded at its position, and every
//! recorded output must decode as the type the code now expects. No step
//! body runs, no signal is consumed, no timer is waited for, no lease is
//! taken: the replay of a run stops where its history ends, which is where
//! its next attempt would start running code.
//!
//! The [`ReplayReport`] says, for each run, whether it replays
//! ([`ReplayOutcome::Replays`]) or why not, and which branch of each
//! [patch](crate::workflow::Context::patched) it is on; a CI job fails on
//! [`ReplayReport::is_clean`] being `false` and prints the report.
//!
//! Only the runtime store is read: step outputs are kept in the receipts,
//! and no memoized call is made, so the memo store is not needed.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
//! use std::sync::Arc;
//! use memo_runtime::{Error, MemoStore, RunId, runtime_store::{InMemoryRuntimeStore, RuntimeStore}};
//! use memo_runtime::object_store::memory::InMemory;
//! use memo_runtime::workflow::{Context, ReplayCheck, ReplayOutcome, Runtime, Workflow};
//!
//! let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
//! let runtime = Runtime::builder()
//!     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
//!     .runtime_store(Arc::clone(&store))
//!     .build()?;
//! let old = Workflow::new("greet", |ctx: Context, who: String| async move {
//!     ctx.step_with("hello", &who, |_memo, who| async move { Ok::<_, Error>(format!("hello {who}")) })
//!         .await
//! });
//! runtime.run(&RunId::new("greet-ada")?, &"ada".to_string(), &old).await?;
//!
//! // The new code renamed the step: the stored run would not replay.
//! let new = Workflow::new("greet", |ctx: Context, who: String| async move {
//!     ctx.step_with("say-hello", &who, |_memo, who| async move { Ok::<_, Error>(format!("hello {who}")) })
//!         .await
//! });
//! let report = ReplayCheck::new(store).run(&new).await?;
//! assert!(!report.is_clean());
//! assert!(matches!(
//!     &report.runs()[0].outcome,
//!     ReplayOutcome::NonDeterminism { sequence: 0, recorded, called }
//!         if recorded == "hello" && called == "say-hello"
//! ));
//! println!("{report}"); // one line per run that does not replay
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::LocalBoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;

use super::context::{PATCH_STEP_PREFIX, ReplayProbe, WAIT_STEP_PREFIX};
use super::{Context, Runtime, Workflow, WorkflowFn};
use crate::codec;
use crate::error::{Error, Result};
use crate::memo::MemoStore;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunIdPage, RunPage, RunRecord, RunStatus,
    RunSummary, RuntimeStore, StepReceipt,
};

/// How many runs a check replays at once.
const CONCURRENCY: usize = 16;

/// A check of stored runs against new workflow code (see the
/// [module](self)).
#[derive(Debug, Clone)]
pub struct ReplayCheck {
    store: Arc<dyn RuntimeStore>,
    statuses: Vec<RunStatus>,
    limit: Option<usize>,
}

impl ReplayCheck {
    /// A check of the runs in `store`, in every status. `store` is only
    /// read: the check reaches it through a view that refuses every write.
    pub fn new(store: Arc<dyn RuntimeStore>) -> ReplayCheck {
        ReplayCheck {
            store: Arc::new(ReadOnlyView { inner: store }),
            statuses: vec![
                RunStatus::Pending,
                RunStatus::Running,
                RunStatus::Completed,
                RunStatus::Failed,
                RunStatus::Cancelled,
            ],
            limit: None,
        }
    }

    /// Checks only the runs in these statuses.
    pub fn statuses(mut self, statuses: impl IntoIterator<Item = RunStatus>) -> ReplayCheck {
        self.statuses = statuses.into_iter().collect();
        self
    }

    /// Checks only the open runs (`Pending` and `Running`): the runs that a
    /// deploy's workers will resume.
    pub fn open_runs(self) -> ReplayCheck {
        self.statuses([RunStatus::Pending, RunStatus::Running])
    }

    /// Checks at most `runs` runs (a sample: the first ones the store lists,
    /// status by status).
    pub fn limit(mut self, runs: usize) -> ReplayCheck {
        self.limit = Some(runs);
        self
    }

    /// Replays the chosen runs of `workflow` (runs of other workflows are
    /// counted, not replayed) against its code, and reports on each.
    ///
    /// A run that started on another [version](Workflow::with_version) of
    /// the workflow is reported as [`ReplayOutcome::VersionNotRegistered`]:
    /// to check each run against the version it started on, register every
    /// version with [`ReplayCheck::deploy`].
    ///
    /// # Errors
    ///
    /// A store error listing or reading the runs. What a run's replay finds
    /// is its [`RunReplay::outcome`], not an error.
    pub async fn run<I, W>(&self, workflow: &Workflow<W>) -> Result<ReplayReport>
    where
        I: DeserializeOwned,
        W: WorkflowFn<I>,
    {
        self.deploy().workflow(workflow).run().await
    }

    /// A check of the code of a whole deploy: every workflow, and every
    /// version of one, that its workers register
    /// ([`DeployCheck::workflow`]). Each run is replayed against the
    /// version it started on.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use memo_runtime::{Error, MemoStore, RunId, runtime_store::{InMemoryRuntimeStore, RuntimeStore}};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, ReplayCheck, Runtime, Workflow};
    ///
    /// let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::clone(&store))
    ///     .build()?;
    /// let v1 = Workflow::new("greet", |ctx: Context, who: String| async move {
    ///     ctx.step_with("hello", &who, |_memo, who| async move { Ok::<_, Error>(format!("hello {who}")) })
    ///         .await
    /// })
    /// .with_version("1");
    /// runtime.run(&RunId::new("greet-ada")?, &"ada".to_string(), &v1).await?;
    ///
    /// // Version 2 renames the step; runs of version 1 keep version 1's code.
    /// let v2 = Workflow::new("greet", |ctx: Context, who: String| async move {
    ///     ctx.step_with("say-hello", &who, |_memo, who| async move { Ok::<_, Error>(format!("hi {who}")) })
    ///         .await
    /// })
    /// .with_version("2");
    /// let check = ReplayCheck::new(store);
    /// assert!(check.deploy().workflow(&v1).workflow(&v2).run().await?.is_clean());
    /// // A deploy that drops version 1 would strand the run:
    /// assert!(!check.deploy().workflow(&v2).run().await?.is_clean());
    /// # Ok(()) }
    /// ```
    pub fn deploy(&self) -> DeployCheck<'_> {
        DeployCheck {
            check: self,
            workflows: BTreeMap::new(),
        }
    }
}

/// Replays one run against one registered version's code.
type ReplayFn<'a> =
    Box<dyn Fn(Runtime, RunSummary) -> LocalBoxFuture<'a, Result<Option<RunReplay>>> + 'a>;

/// A [`ReplayCheck`] of a deploy's code: the workflows (and versions) its
/// workers register; see [`ReplayCheck::deploy`].
#[must_use]
pub struct DeployCheck<'a> {
    check: &'a ReplayCheck,
    /// By workflow name, then version.
    workflows: BTreeMap<String, BTreeMap<Option<String>, ReplayFn<'a>>>,
}

impl fmt::Debug for DeployCheck<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let workflows: BTreeMap<_, Vec<_>> = (self.workflows.iter())
            .map(|(name, versions)| (name, versions.keys().collect()))
            .collect();
        f.debug_struct("DeployCheck")
            .field("check", self.check)
            .field("workflows", &workflows)
            .finish()
    }
}

impl<'a> DeployCheck<'a> {
    /// Adds `workflow` (its name and version) to the deploy's code: the
    /// chosen runs that started on it are replayed against it.
    pub fn workflow<I, W>(mut self, workflow: &'a Workflow<W>) -> DeployCheck<'a>
    where
        I: DeserializeOwned + 'a,
        W: WorkflowFn<I> + 'a,
    {
        let replay: ReplayFn<'a> =
            Box::new(move |runtime, summary| replay_run(runtime, summary, workflow).boxed_local());
        self.workflows
            .entry(workflow.name().to_string())
            .or_default()
            .insert(workflow.version().map(str::to_string), replay);
        self
    }

    /// Replays the chosen runs of the added workflows (runs of other
    /// workflows are counted, not replayed), each against the version it
    /// started on, and reports on each; a run whose version was not added
    /// is [`ReplayOutcome::VersionNotRegistered`].
    ///
    /// # Errors
    ///
    /// A store error listing or reading the runs. What a run's replay finds
    /// is its [`RunReplay::outcome`], not an error.
    pub async fn run(self) -> Result<ReplayReport> {
        let check = self.check;
        let runtime = Runtime::builder()
            // Never written to: no step body, hence no memoized call, runs.
            .memo_store(MemoStore::new(
                Arc::new(object_store::memory::InMemory::new()),
                "replay-check",
            ))
            .runtime_store(Arc::clone(&check.store))
            .signal_wait(Duration::ZERO)
            .timer_wait(Duration::ZERO)
            .check_conditional_create(false)
            .build()?;
        let mut chosen = Vec::new();
        let mut other_workflows = 0;
        'statuses: for status in &check.statuses {
            for summary in check.store.list_runs(*status).await? {
                if !self.workflows.contains_key(&summary.workflow) {
                    other_workflows += 1;
                    continue;
                }
                if check.limit.is_some_and(|limit| chosen.len() >= limit) {
                    break 'statuses;
                }
                chosen.push(summary);
            }
        }
        let workflows = &self.workflows;
        let runs = futures::stream::iter(chosen)
            .map(|summary| {
                let versions = &workflows[&summary.workflow];
                match versions.get(&summary.workflow_version) {
                    Some(replay) => replay(runtime.clone(), summary),
                    None => {
                        let registered = versions.keys().cloned().collect();
                        futures::future::ready(Ok(Some(unregistered(summary, registered))))
                            .boxed_local()
                    }
                }
            })
            .buffered(CONCURRENCY)
            .try_filter_map(|run| async move { Ok(run) })
            .try_collect()
            .await?;
        let names: Vec<_> = workflows.keys().map(|name| format!("{name:?}")).collect();
        Ok(ReplayReport {
            workflow: names.join(", "),
            runs,
            other_workflows,
        })
    }
}

/// The report on a run whose version is not among the `registered` ones.
fn unregistered(summary: RunSummary, registered: Vec<Option<String>>) -> RunReplay {
    RunReplay {
        outcome: ReplayOutcome::VersionNotRegistered {
            version: summary.workflow_version.clone(),
            registered,
        },
        run_id: summary.run_id,
        status: summary.status,
        version: summary.workflow_version,
        recorded_steps: summary.steps,
        patches: Vec::new(),
    }
}

/// Replays one run; `None` if it was deleted since it was listed.
async fn replay_run<I, W>(
    runtime: Runtime,
    summary: RunSummary,
    workflow: &Workflow<W>,
) -> Result<Option<RunReplay>>
where
    I: DeserializeOwned,
    W: WorkflowFn<I>,
{
    let store = Arc::clone(&runtime.shared.store);
    let Some(record) = store.load_run(&summary.run_id).await? else {
        return Ok(None);
    };
    let history = store.load_receipts(&record.run_id, None).await?;
    let mut replay = RunReplay {
        run_id: record.run_id.clone(),
        status: record.status,
        version: record.workflow_version.clone(),
        recorded_steps: history.len() as u64,
        outcome: ReplayOutcome::Replays { steps: 0 },
        patches: Vec::new(),
    };
    let input = match codec::decode_value::<I>(
        "the workflow input",
        &format!("run {}", record.run_id),
        &record.input,
    ) {
        Ok(input) => input,
        Err(e) => {
            replay.outcome = ReplayOutcome::UndecodableInput {
                message: e.to_string(),
            };
            return Ok(Some(replay));
        }
    };
    let probe = Arc::new(ReplayProbe::default());
    let ctx = Context::replay_only(
        Arc::clone(&runtime.shared),
        record.run_id.clone(),
        record.incarnation,
        record.attempts.saturating_add(1),
        history,
        Arc::clone(&probe),
    );
    let ran = std::panic::AssertUnwindSafe(workflow.run.call(ctx.clone(), input))
        .catch_unwind()
        .await;
    let state = probe.take();
    replay.patches = state
        .patches
        .into_iter()
        .map(|(name, marked, deprecated)| PatchUse {
            name,
            marked,
            deprecated,
        })
        .collect();
    let steps = ctx.replayed_steps().await;
    replay.outcome = if let Some(problem) = state.problem {
        ReplayOutcome::from_problem(problem)
    } else if state.end_reached {
        ReplayOutcome::Replays { steps }
    } else if let Err(panic) = ran {
        ReplayOutcome::Interrupted {
            message: format!("the workflow panicked: {}", panic_message(panic.as_ref())),
        }
    } else if let Some(left) = ctx.recorded_at(steps) {
        // The code returned where the history goes on: it no longer calls
        // a step the run recorded.
        ReplayOutcome::UncalledStep {
            sequence: steps,
            recorded: left.step.clone(),
        }
    } else {
        completed_output::<W::Output>(&record).unwrap_or(ReplayOutcome::Replays { steps })
    };
    Ok(Some(replay))
}

/// A problem decoding a completed run's stored output as the new output type.
fn completed_output<O: DeserializeOwned>(record: &RunRecord) -> Option<ReplayOutcome> {
    let output = record
        .output
        .as_ref()
        .filter(|_| record.status == RunStatus::Completed)?;
    let what = "the workflow output";
    codec::decode_value::<O>(what, &format!("run {}", record.run_id), output)
        .err()
        .map(|e| ReplayOutcome::UndecodableOutput {
            what: what.to_string(),
            message: e.to_string(),
        })
}

/// What a panic said, if it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// What a [`ReplayCheck`] found.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    workflow: String,
    runs: Vec<RunReplay>,
    other_workflows: usize,
}

impl ReplayReport {
    /// Each checked run, in the order the store listed them.
    pub fn runs(&self) -> &[RunReplay] {
        &self.runs
    }

    /// The checked runs that do not replay.
    pub fn problems(&self) -> impl Iterator<Item = &RunReplay> {
        self.runs.iter().filter(|run| !run.outcome.replays())
    }

    /// Whether every checked run replays: what a CI job fails on.
    pub fn is_clean(&self) -> bool {
        self.problems().next().is_none()
    }

    /// How many listed runs belong to other workflows (not checked).
    pub fn other_workflows(&self) -> usize {
        self.other_workflows
    }

    /// The open runs on the old branch of the patch `name`: their history
    /// passed [`Context::patched`]`(name)` without the patch. While there is
    /// one, the old branch must stay; with none, the patch can become a
    /// [`Context::deprecate_patch`].
    pub fn open_runs_on_old_branch(&self, patch: &str) -> Vec<&RunId> {
        self.open_runs_where(patch, |used| !used.marked && !used.deprecated)
    }

    /// The open runs whose history has the marker of the patch `name`.
    /// With none (and none on the old branch), the call to
    /// [`Context::patched`] or [`Context::deprecate_patch`] can go.
    pub fn open_runs_with_marker(&self, patch: &str) -> Vec<&RunId> {
        self.open_runs_where(patch, |used| used.marked)
    }

    fn open_runs_where(&self, patch: &str, pick: impl Fn(&PatchUse) -> bool) -> Vec<&RunId> {
        self.runs
            .iter()
            .filter(|run| !run.status.is_terminal())
            .filter(|run| {
                run.patches
                    .iter()
                    .any(|used| used.name == patch && pick(used))
            })
            .map(|run| &run.run_id)
            .collect()
    }
}

/// A summary line, then one line per run that does not replay.
impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problems = self.problems().count();
        writeln!(
            f,
            "replay check of workflow {}: {} runs checked, {} replay, {} do not",
            self.workflow,
            self.runs.len(),
            self.runs.len() - problems,
            problems
        )?;
        for run in self.problems() {
            writeln!(f, "  run {} ({}): {}", run.run_id, run.status, run.outcome)?;
        }
        Ok(())
    }
}

/// How one stored run replays against the new code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunReplay {
    /// The run.
    pub run_id: RunId,
    /// Its status in the store.
    pub status: RunStatus,
    /// The version of the workflow it started on, if it has one.
    pub version: Option<String>,
    /// How many receipts its history holds.
    pub recorded_steps: u64,
    /// Whether it replays, or why not.
    pub outcome: ReplayOutcome,
    /// The patches the replay asked about, in call order.
    pub patches: Vec<PatchUse>,
}

/// A patch a run's replay asked about ([`Context::patched`] or
/// [`Context::deprecate_patch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PatchUse {
    /// The patch's name.
    pub name: String,
    /// Whether the run's history has the patch's marker there (it took the
    /// patched branch); `false` for a run on the old branch.
    pub marked: bool,
    /// Whether the code called [`Context::deprecate_patch`] (which accepts
    /// both) rather than [`Context::patched`].
    pub deprecated: bool,
}

/// Whether a run replays against the new code, or the first reason it does
/// not.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayOutcome {
    /// The new code replays the run's history: its next attempt continues
    /// it.
    Replays {
        /// How many receipts the replay consumed.
        steps: u64,
    },
    /// The code calls another step than the one recorded at `sequence`
    /// (a step renamed, inserted or reordered).
    NonDeterminism {
        /// The position, from 0.
        sequence: u64,
        /// The step recorded there.
        recorded: String,
        /// The step the new code calls there.
        called: String,
    },
    /// The run took the branch of the patch `patch` at `sequence`, and the
    /// new code no longer asks about it (removed too early).
    PatchRemoved {
        /// The position of the patch's marker.
        sequence: u64,
        /// The patch.
        patch: String,
        /// The step the new code calls there.
        called: String,
    },
    /// The run waits (or waited) for the signal `signal` at `sequence`, and
    /// the new code no longer reads it there.
    SignalNotRead {
        /// The position of the recorded wait.
        sequence: u64,
        /// The signal.
        signal: String,
        /// The step the new code calls there.
        called: String,
    },
    /// The new code returns before the step recorded at `sequence` (a step
    /// removed).
    UncalledStep {
        /// The first position the code does not reach.
        sequence: u64,
        /// The step recorded there.
        recorded: String,
    },
    /// The run's recorded input does not decode as the workflow's input
    /// type.
    UndecodableInput {
        /// The decoder's message.
        message: String,
    },
    /// A recorded value (a step's output, a signal's payload, the run's
    /// output) does not decode as the type the new code expects.
    UndecodableOutput {
        /// What did not decode.
        what: String,
        /// The decoder's message, with the run and position.
        message: String,
    },
    /// The replay stopped for another reason (the workflow panicked, or a
    /// runtime error).
    Interrupted {
        /// Why.
        message: String,
    },
    /// The run started on a [version](Workflow::with_version) of its
    /// workflow that the checked code does not register: no worker of the
    /// deploy would continue it (it would stay open, reported, until a
    /// worker registers its version again).
    VersionNotRegistered {
        /// The run's version (`None`: the unversioned workflow).
        version: Option<String>,
        /// The versions the checked code registers.
        registered: Vec<Option<String>>,
    },
}

impl ReplayOutcome {
    /// Whether the run replays.
    pub fn replays(&self) -> bool {
        matches!(self, ReplayOutcome::Replays { .. })
    }

    fn from_problem(problem: Error) -> ReplayOutcome {
        match problem {
            Error::NonDeterminism {
                sequence,
                recorded,
                called,
                ..
            } => {
                if let Some(patch) = recorded.strip_prefix(PATCH_STEP_PREFIX) {
                    ReplayOutcome::PatchRemoved {
                        sequence,
                        patch: patch.to_string(),
                        called,
                    }
                } else if let Some(signal) = recorded
                    .strip_prefix(WAIT_STEP_PREFIX)
                    .or_else(|| recorded.strip_prefix("signal:"))
                {
                    ReplayOutcome::SignalNotRead {
                        sequence,
                        signal: signal.to_string(),
                        called,
                    }
                } else {
                    ReplayOutcome::NonDeterminism {
                        sequence,
                        recorded,
                        called,
                    }
                }
            }
            Error::Decode { ref what, .. } => ReplayOutcome::UndecodableOutput {
                what: what.clone(),
                message: problem.to_string(),
            },
            other => ReplayOutcome::Interrupted {
                message: other.to_string(),
            },
        }
    }
}

impl fmt::Display for ReplayOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayOutcome::Replays { steps } => write!(f, "replays ({steps} steps)"),
            ReplayOutcome::NonDeterminism {
                sequence,
                recorded,
                called,
            } => write!(
                f,
                "non-determinism at step {sequence}: recorded {recorded:?}, the code calls {called:?}"
            ),
            ReplayOutcome::PatchRemoved {
                sequence,
                patch,
                called,
            } => write!(
                f,
                "patch {patch:?} removed too early: the run took it at step {sequence}, the code calls {called:?} there"
            ),
            ReplayOutcome::SignalNotRead {
                sequence,
                signal,
                called,
            } => write!(
                f,
                "signal {signal:?} no longer read: the run waits for it at step {sequence}, the code calls {called:?} there"
            ),
            ReplayOutcome::UncalledStep { sequence, recorded } => write!(
                f,
                "step {recorded:?} recorded at {sequence} is no longer called (the code returns first)"
            ),
            ReplayOutcome::UndecodableInput { message } => {
                write!(f, "the recorded input does not decode: {message}")
            }
            ReplayOutcome::UndecodableOutput { message, .. } => {
                write!(f, "a recorded value does not decode: {message}")
            }
            ReplayOutcome::Interrupted { message } => write!(f, "replay stopped: {message}"),
            ReplayOutcome::VersionNotRegistered {
                version,
                registered,
            } => {
                let registered: Vec<_> = (registered.iter())
                    .map(|v| super::describe_version(v.as_deref()))
                    .collect();
                write!(
                    f,
                    "the run started on {}, which the code does not register (it registers {})",
                    super::describe_version(version.as_deref()),
                    registered.join(", ")
                )
            }
        }
    }
}

/// A view of a runtime store that reads through and refuses every write.
#[derive(Debug)]
struct ReadOnlyView {
    inner: Arc<dyn RuntimeStore>,
}

impl ReadOnlyView {
    fn refuse<T>(run_id: &RunId) -> Result<T> {
        Err(Error::InvalidWrite {
            run_id: run_id.to_string(),
            reason: "the replay check reads the store and never writes to it".into(),
        })
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl RuntimeStore for ReadOnlyView {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        Self::refuse(&run.run_id)
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.inner.load_run(run_id).await
    }

    async fn atomic_apply(&self, run_id: &RunId, _commit: Commit) -> Result<RunRecord> {
        Self::refuse(run_id)
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        self.inner.load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        self.inner.load_snapshot(run_id).await
    }

    async fn append_input(&self, run_id: &RunId, _input: NewInput) -> Result<InputRecord> {
        Self::refuse(run_id)
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        self.inner.load_inputs(run_id).await
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        self.inner.list_runs(status).await
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        self.inner.list_run_ids(status).await
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        self.inner.list_run_ids_page(status, after, limit).await
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        self.inner.list_runs_page(status, after, limit).await
    }

    async fn delete_run(&self, run_id: &RunId, _incarnation: Incarnation) -> Result<bool> {
        Self::refuse(run_id)
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        _incarnation: Incarnation,
        _cost: &AttemptCost,
    ) -> Result<()> {
        Self::refuse(run_id)
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        self.inner.load_attempt_costs(run_id, incarnation).await
    }
}
