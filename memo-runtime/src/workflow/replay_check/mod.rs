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

mod read_only;
mod report;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::LocalBoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;

use super::context::ReplayProbe;
use super::{Context, Runtime, Workflow, WorkflowFn};
use crate::codec;
use crate::error::Result;
use crate::memo::MemoStore;
use crate::runtime_store::{RunRecord, RunStatus, RunSummary, RuntimeStore};

use read_only::ReadOnlyView;
pub use report::{PatchUse, ReplayOutcome, ReplayReport, RunReplay};

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
