//! [`Runtime`]: starting, resuming and signalling runs.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::{CANCEL_SIGNAL, RuntimeBuilder, Shared, Workflow, WorkflowFn};
use crate::clock::Clock;
use crate::codec;
use crate::error::{Error, Result};
use crate::memo::MemoStore;
use crate::meter::Meter;
use crate::retention::{RetentionSweeper, RetentionSweeperBuilder};
use crate::run_id::RunId;
use crate::runtime_store::{NewInput, NewRun, RunRecord, RuntimeStore};

#[cfg(doc)]
use super::Context;

/// How many times [`Runtime::run`] creates a run that the store refused and
/// that was deleted before it could be read: each time means a run of the id
/// was created and deleted again meanwhile.
const CREATE_ATTEMPTS: usize = 4;

/// Runs workflows durably over a [`MemoStore`] and a [`RuntimeStore`].
///
/// Cheap to clone. Several runtimes, in one process or many, may share the
/// same stores: two of them racing on one run cannot both drive it (one
/// holds the run's lease; the other gets [`Error::LeaseHeld`] when it starts,
/// or [`Error::LeaseLost`] at its next commit once its lease was taken over).
#[derive(Clone)]
pub struct Runtime {
    pub(super) shared: Arc<Shared>,
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
    /// whose [`SweeperHandle`](crate::retention::SweeperHandle) is dropped is detached,
    /// not stopped: it keeps sweeping until the Tokio runtime shuts down;
    /// keep the handle and call
    /// [`shutdown`](crate::retention::SweeperHandle::shutdown) to stop it. To change
    /// its page size, concurrency or dry-run mode, start from
    /// [`Runtime::retention_sweeper_builder`].
    pub fn retention_sweeper(&self) -> RetentionSweeper {
        self.retention_sweeper_builder().build()
    }

    /// A sweeper builder already set to this runtime's memo store,
    /// retention, runtime store and clock, for a sweeper that sweeps another
    /// way (page size, concurrency, dry run) or keeps runs for another
    /// retention ([`RetentionSweeperBuilder::retention`](crate::retention::RetentionSweeperBuilder::retention)).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// # use std::sync::Arc;
    /// # use memo_runtime::{MemoStore, object_store::memory::InMemory, runtime_store::InMemoryRuntimeStore};
    /// # use memo_runtime::workflow::Runtime;
    /// # let runtime = Runtime::builder()
    /// #     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    /// #     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    /// #     .build()?;
    /// let preview = runtime.retention_sweeper_builder().dry_run(true).build();
    /// let report = preview.sweep_now().await?; // counts, deletes nothing
    /// assert!(report.dry_run);
    ///
    /// let one_day = std::time::Duration::from_secs(24 * 3600);
    /// let sooner = runtime.retention_sweeper_builder().retention(one_day).build();
    /// assert_eq!(sooner.retention(), one_day);
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
    /// [`Error::VersionNotRegistered`] if the run started on another
    /// version of the workflow ([`Workflow::with_version`]);
    /// [`Error::Suspended`] if the run waits for a signal or a timer (at
    /// once, starting no attempt and writing nothing, if it was suspended in
    /// that wait already and what it waits for is still not there); the step
    /// errors of [`Context::step`]. None of these fail the run.
    pub async fn run<I, W>(
        &self,
        run_id: &RunId,
        input: &I,
        workflow: &Workflow<W>,
    ) -> Result<W::Output, W::Error>
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
    {
        self.check_conditional_create().await?;
        let new_run = NewRun {
            run_id: run_id.clone(),
            workflow: workflow.name.to_string(),
            input: codec::encode_value("the workflow input", input)?,
            created_at_ms: self.shared.clock.now_ms(),
            workflow_version: workflow.version().map(str::to_string),
        };
        // The run's creation counts in its first attempt's cost ledger.
        let meter = Arc::<Meter>::default();
        let record = Meter::scope(Arc::clone(&meter), self.create_run(new_run, input)).await?;
        let span = tracing::info_span!("memo.run", %run_id, workflow = %workflow.name);
        self.drive_metered(record, workflow, meter, Vec::new())
            .instrument(span)
            .await
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
    /// use memo_runtime::{Error, MemoStore, RunId, runtime_store::InMemoryRuntimeStore};
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
    pub async fn resume<I, W>(
        &self,
        run_id: &RunId,
        workflow: &Workflow<W>,
    ) -> Result<W::Output, W::Error>
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
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
                    // Recorded by an earlier call that may have stopped
                    // before it made the run due.
                    return super::due::signalled_before(&self.shared, run_id).await;
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

    /// The run's record, if it exists.
    ///
    /// # Errors
    ///
    /// As [`RuntimeStore::load_run`].
    pub async fn status(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.shared.store.load_run(run_id).await
    }

    /// Creates the run, or finds it created earlier with the same workflow
    /// and an input equal to `input` under the canonical encoding of content
    /// keys (the store compares encoded bytes, which a map's order changes).
    ///
    /// A run the store refused may be gone by the time it is read (a sweep
    /// deleted it in between): the id is free then, and the run is created
    /// again rather than refused, since nothing with another input stands.
    pub(super) async fn create_run<I>(&self, new_run: NewRun, input: &I) -> Result<RunRecord>
    where
        I: Serialize + DeserializeOwned,
    {
        let (run_id, workflow) = (new_run.run_id.clone(), new_run.workflow.clone());
        for _ in 0..CREATE_ATTEMPTS {
            match self.shared.store.create_run(new_run.clone()).await {
                Err(Error::Conflict { what, reason }) => {
                    match self.shared.store.load_run(&run_id).await? {
                        Some(record)
                            if record.workflow == workflow && same_input(&record.input, input)? =>
                        {
                            return Ok(record);
                        }
                        Some(_) => return Err(Error::Conflict { what, reason }),
                        // Deleted since the store compared it.
                        None => continue,
                    }
                }
                created => return created,
            }
        }
        Err(Error::Conflict {
            what: format!("run {run_id}"),
            reason: "the run was deleted and created again while it was created; try again".into(),
        })
    }

    /// Checks, once per runtime, that the memo store refuses a second create
    /// (see [`RuntimeBuilder::check_conditional_create`]).
    pub(super) async fn check_conditional_create(&self) -> Result<()> {
        if let Some(checked) = &self.shared.conditional_create_checked {
            let memo = &self.shared.memo;
            checked
                .get_or_try_init(|| {
                    crate::store::probe_conditional_create(
                        memo.object_store().as_ref(),
                        memo.prefix(),
                    )
                })
                .await?;
        }
        Ok(())
    }

    pub(super) async fn append_signal(
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
        let before = super::due::before_signal(&self.shared, run_id).await?;
        let input = NewInput {
            input_id,
            name: name.to_string(),
            payload,
            accepted_at_ms: self.shared.clock.now_ms(),
        };
        let (_, run) = self
            .shared
            .store
            .append_input_and_load(run_id, input)
            .await?;
        super::due::after_signal(&self.shared, before, run.as_ref()).await;
        Ok(())
    }
}

/// Whether `stored` (an input recorded as [`codec::encode`] wrote it) is `input`
/// under the canonical encoding of content keys.
fn same_input<I: Serialize + DeserializeOwned>(stored: &[u8], input: &I) -> Result<bool> {
    let Ok(stored) = codec::decode::<I>(stored) else {
        return Ok(false);
    };
    Ok(crate::content_key(&stored)? == crate::content_key(input)?)
}
