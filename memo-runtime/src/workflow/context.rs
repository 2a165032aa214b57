//! The run context a workflow receives: durable steps and signals.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use backon::BackoffBuilder;
use bytes::Bytes;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::Shared;
use super::lease::{HeldLease, StepLease};
use crate::codec;
use crate::error::Error;
use crate::memo::{AttemptInterruption, Memo, MemoStore};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{Commit, InputPhase, InputRecord, InputUpdate, StepReceipt};
use crate::workflow::RetryPolicy;

#[path = "select.rs"]
mod select;
pub use select::Selected;
pub(super) use select::recorded as select_recorded;

/// What a workflow function receives: its run's identity and the means to
/// take durable steps.
///
/// Steps are numbered in the order they are called, from 0. A step that
/// committed in an earlier attempt is not run again: its recorded output is
/// returned. Steps of one run execute one at a time; concurrent calls wait for
/// their turn, in the order they were first polled.
///
/// Cheap to clone; clones share the run's step cursor.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    run_id: RunId,
    incarnation: Incarnation,
    /// The attempt's lease: its fence, which its commits carry to prove the
    /// attempt still holds the run, and its last known expiry.
    lease: Arc<HeldLease>,
    history: Vec<StepReceipt>,
    cursor: tokio::sync::Mutex<u64>,
    /// The first transient error of this attempt (its interruption), shared with the memos of its
    /// steps: once set, the attempt is over and the run stays open.
    interruption: AttemptInterruption,
    /// The cancellation reason, once the attempt has observed the run's
    /// cancellation (at a step boundary, in a wait, or when asked): no step
    /// runs after it, and the attempt ends the run cancelled.
    cancelled: std::sync::Mutex<Option<String>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("run_id", &self.inner.run_id)
            .field("attempt", &self.inner.lease.fence().attempt)
            .field("recorded_steps", &self.inner.history.len())
            .finish_non_exhaustive()
    }
}

impl Context {
    pub(super) fn new(
        shared: Arc<Shared>,
        run_id: RunId,
        incarnation: Incarnation,
        lease: Arc<HeldLease>,
        history: Vec<StepReceipt>,
    ) -> Context {
        Context {
            inner: Arc::new(Inner {
                shared,
                run_id,
                incarnation,
                lease,
                history,
                cursor: tokio::sync::Mutex::new(0),
                interruption: AttemptInterruption::default(),
                cancelled: std::sync::Mutex::new(None),
            }),
        }
    }

    /// The run this context belongs to.
    pub fn run_id(&self) -> &RunId {
        &self.inner.run_id
    }

    /// Which use of the run id this run is (see [`Incarnation`]).
    pub fn incarnation(&self) -> Incarnation {
        self.inner.incarnation
    }

    /// Which attempt of the run this is, from 1.
    pub fn attempt(&self) -> u32 {
        self.inner.lease.fence().attempt
    }

    /// The memo store the steps' memos live in.
    pub fn memo_store(&self) -> &MemoStore {
        &self.inner.shared.memo
    }

    /// A durable step named `name`; `body` receives the step's [`Memo`]
    /// (for `#[memoized]` calls) and runs only if the step has not committed.
    ///
    /// Await the returned [`Step`] to run it (it is a [`Future`], so
    /// `futures::join!` takes several); before that, [`Step::retry`] and
    /// [`Step::when`] say how to retry the body. The step's output is
    /// committed with the run's receipt for this position and is what a
    /// replay returns.
    ///
    /// The body is called once per try, so it returns a future that owns
    /// what it uses (`async move`). To hand it values the workflow keeps
    /// using, pass them with [`Context::step_with`] instead of cloning them
    /// into the closure.
    ///
    /// Every call takes the next position, whatever its outcome: a body that
    /// fails for good (after its retries) records its failure at its
    /// position, so that a workflow that handles the failure (say, by calling
    /// a fallback step) replays the same way in every later attempt.
    ///
    /// # Errors
    ///
    /// A body that fails for good (its error after any retries, or an output
    /// that cannot be encoded) is recorded as the step's failure and returned
    /// as [`Error::StepFailed`] with the error's message (converted into
    /// `E`): the same in this attempt and in every replay, so a workflow
    /// that handles the failure (a fallback step) takes the same branch every
    /// time. To branch on kinds of failure, make them the step's value (a
    /// step returning `Ok(Err(Declined))`), which replays exactly.
    ///
    /// Runtime errors, converted into `E`, interrupt the attempt without failing
    /// the run, so it can be resumed: [`Error::NonDeterminism`] if the history
    /// records another step at this position; [`Error::Conflict`] if another
    /// worker committed this step first; [`Error::Decode`] if a recorded
    /// output does not decode as `T`; [`Error::Store`] if the commit fails;
    /// [`Error::Aborted`] for a step called after an earlier error interrupted
    /// the attempt. A failure of the step's [`Memo`] that leaves the run open (see
    /// [`Error::fails_run`]) stops the attempt too, even if the body
    /// converted it into an error of its own: the step records nothing, and
    /// the run stays open. A permanent one ([`Error::TooLarge`],
    /// [`Error::Serialization`]) is the body's error like any other.
    ///
    /// # Example
    ///
    /// ```
    /// # use memo_runtime::{Memo, workflow::{Context, RetryPolicy}};
    /// # async fn charge(memo: &Memo, cents: u64) -> Result<String, memo_runtime::Error> { Ok(format!("ch_{cents}")) }
    /// async fn checkout(ctx: Context, cents: u64) -> Result<String, memo_runtime::Error> {
    ///     let charge_id = ctx
    ///         .step("charge", |memo| async move { charge(&memo, cents).await })
    ///         .retry(RetryPolicy::attempts(3))
    ///         .await?;
    ///     Ok(charge_id)
    /// }
    /// ```
    pub fn step<F, Fut, T, E>(&self, name: impl Into<String>, body: F) -> Step<'_, F, T, E>
    where
        F: FnMut(Memo) -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Serialize + DeserializeOwned + Send,
        E: From<Error> + Display + Send,
    {
        Step {
            state: StepState::Ready(StepSpec {
                ctx: self,
                name: name.into(),
                body,
                retry: RetryPolicy::never(),
                transient: None,
            }),
        }
    }

    /// A durable step whose body also receives `input`: `body(memo, input)`,
    /// with a copy of `input` for each try. Otherwise the same as
    /// [`Context::step`].
    ///
    /// This is how a body uses the workflow's values without a
    /// `let x = x.clone();` per value: pass references (`&ticket`, or a
    /// tuple `(&order, &customer)`), which are copied, not cloned, or owned
    /// values the workflow no longer needs. What the step's output depends
    /// on is then written where the step is called, as with an activity's
    /// argument in Temporal.
    ///
    /// # Errors
    ///
    /// As [`Context::step`].
    ///
    /// # Example
    ///
    /// ```
    /// # use memo_runtime::{Memo, Error, memoized, workflow::Context};
    /// # #[derive(serde::Serialize)] struct Ticket { body: String }
    /// #[memoized]
    /// async fn draft_reply(memo: &Memo, ticket: &Ticket, tone: &str) -> Result<String, Error> {
    ///     Ok(format!("({tone}) Re: {}", ticket.body))
    /// }
    ///
    /// async fn support(ctx: Context, ticket: Ticket) -> Result<String, Error> {
    ///     let tone = String::from("friendly");
    ///     let draft = ctx
    ///         .step_with("draft", (&ticket, &tone), |memo, (ticket, tone)| async move {
    ///             draft_reply(&memo, ticket, tone).await
    ///         })
    ///         .await?;
    ///     // `ticket` and `tone` are still the workflow's.
    ///     Ok(format!("{draft} [{} chars, {tone}]", ticket.body.len()))
    /// }
    /// ```
    pub fn step_with<I, F, Fut, T, E>(
        &self,
        name: impl Into<String>,
        input: I,
        mut body: F,
    ) -> Step<'_, impl FnMut(Memo) -> Fut + Send, T, E>
    where
        I: Clone + Send,
        F: FnMut(Memo, I) -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Serialize + DeserializeOwned + Send,
        E: From<Error> + Display + Send,
    {
        self.step(name, move |memo| body(memo, input.clone()))
    }

    /// Waits for the signal `name` sent to this run with
    /// [`Runtime::signal`](super::Runtime::signal), consumes it and returns
    /// its payload. Durable: the consumption is a step, so a replay returns
    /// the same payload without waiting.
    ///
    /// If no such signal arrives within the runtime's signal wait (see
    /// [`RuntimeBuilder::signal_wait`](super::RuntimeBuilder::signal_wait)),
    /// the run suspends: this returns [`Error::Suspended`], the run stays
    /// `Running`, and running it again once the signal is sent, from any
    /// process, resumes it here. The first suspension records the step
    /// `memo.wait:<name>` (before the wait's own receipt), so that running
    /// the run again before the signal is sent starts no attempt and writes
    /// nothing (see [`Runtime::resume`](super::Runtime::resume)).
    ///
    /// A signal whose payload does not decode as `T` (a `"yes"` sent to a
    /// wait for a `bool`, as `memoctl signal` can send) is never consumed:
    /// it is refused, recorded as [`InputPhase::Abandoned`] (so operators
    /// see it among the run's signals, and no later wait takes it either),
    /// and the wait goes on for the next signal `name` that does decode.
    /// Signals are taken in the order they were recorded.
    ///
    /// The error is memo's own, so `?` converts it into the workflow's error
    /// type, whatever it is.
    ///
    /// # Errors
    ///
    /// [`Error::Suspended`] as above; [`Error::Decode`] if a recorded
    /// payload does not decode as `T` on replay (the code changed the
    /// type); and the runtime errors of [`Context::step`]. None of these
    /// fail the run.
    pub async fn wait_for_signal<T: DeserializeOwned>(&self, name: &str) -> Result<T, Error> {
        let step_name = format!("signal:{name}");
        let marker = format!("{WAIT_STEP_PREFIX}{name}");
        let mut cursor = self.inner.cursor.lock().await;
        let mut sequence = *cursor;
        self.check_not_stopped()?;
        // A wait that suspended before recorded a marker, then the signal.
        let mut marked = false;
        if self.history_at(sequence).is_some_and(|r| r.step == marker) {
            *cursor += 1;
            sequence += 1;
            marked = true;
        }
        if let Some(receipt) = self.replay(sequence, &step_name)? {
            *cursor += 1;
            return self.replayed(receipt);
        }
        let shared = &self.inner.shared;
        // A wait past the end of the clock's range (`Duration::MAX`) has no
        // deadline: the run waits in-process as long as it takes.
        let deadline = tokio::time::Instant::now().checked_add(shared.signal_wait);
        let (input, value) = loop {
            if let Some(found) = self.next_signal(name, &step_name, u64::MAX).await? {
                break found;
            }
            let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                if !marked {
                    // Marks the run as waiting for `name`, so that running
                    // it again before the signal comes starts no attempt.
                    let receipt = self.receipt(sequence, marker, Ok(Bytes::new()));
                    self.commit(Commit::step(receipt, shared.clock.now_ms()))
                        .await?;
                    *cursor += 1;
                }
                return Err(self.interrupt(Error::Suspended {
                    run_id: self.inner.run_id.to_string(),
                    signal: name.to_string(),
                    until_ms: None,
                }));
            }
            // The last poll comes when the wait is up, not a poll interval
            // after it.
            let poll = shared.signal_poll_interval;
            tokio::time::sleep(left.map_or(poll, |left| left.min(poll))).await;
        };
        let receipt = self.receipt(sequence, step_name.clone(), Ok(input.payload.clone()));
        let commit = Commit::step(receipt, self.inner.shared.clock.now_ms())
            .with_input_update(input.input_id, InputPhase::Consumed);
        self.commit(commit).await?;
        *cursor += 1;
        Ok(value)
    }

    /// Waits for the signal `name` until `deadline_ms` (ms since the Unix
    /// epoch, by the runtime's [`Clock`](crate::Clock)): `Some(payload)` if
    /// it came in time, `None` if the deadline passed first. Durable: the
    /// deadline is recorded when the wait is first reached (as a step
    /// `memo.signal-deadline:<name>` whose output is the deadline), and so is the
    /// outcome (the step `signal:<name>` with the payload, as
    /// [`wait_for_signal`](Context::wait_for_signal) records it, or
    /// `memo.signal-timeout:<name>`), so every replay takes the same branch.
    ///
    /// A signal counts if it was accepted (by the clock of the runtime that
    /// [sent](super::Runtime::signal) it) at or before the deadline, even if
    /// the run only looks after it (it was suspended, and resumed late). Once
    /// the deadline has passed with no such signal, the timeout is recorded,
    /// and a signal sent later is not consumed by this wait: it stays
    /// pending for a later wait for `name`. Payloads that do not decode as
    /// `T` are refused as [`wait_for_signal`](Context::wait_for_signal)
    /// refuses them.
    ///
    /// While neither has come, the attempt waits in process for the
    /// runtime's [`signal_wait`](super::RuntimeBuilder::signal_wait), or
    /// until the deadline if that is within its
    /// [`timer_wait`](super::RuntimeBuilder::timer_wait), and then suspends
    /// with [`Error::Suspended`] (`signal` and `until_ms` set); running the
    /// run again once the signal is sent or the deadline has passed
    /// continues it.
    ///
    /// # Errors
    ///
    /// As [`wait_for_signal`](Context::wait_for_signal).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use memo_runtime::{Error, InMemoryRuntimeStore, ManualClock, MemoStore, RunId};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, Runtime, Workflow};
    ///
    /// let clock = Arc::new(ManualClock::new(0));
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let approval = Workflow::new("approval", |ctx: Context, _: ()| async move {
    ///     let two_days = Duration::from_secs(48 * 3600);
    ///     let answer = ctx.wait_for_signal_timeout::<bool>("approve", two_days).await?;
    ///     Ok::<_, Error>(match answer {
    ///         Some(true) => "approved".to_string(),
    ///         Some(false) => "declined".to_string(),
    ///         None => "expired".to_string(),
    ///     })
    /// });
    ///
    /// let run = RunId::new("expense-9")?;
    /// assert!(matches!(runtime.run(&run, &(), &approval).await, Err(Error::Suspended { .. })));
    /// clock.advance_ms(48 * 3600 * 1000); // nobody answered
    /// assert_eq!(runtime.run(&run, &(), &approval).await?, "expired");
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_signal_until<T: DeserializeOwned>(
        &self,
        name: &str,
        deadline_ms: u64,
    ) -> Result<Option<T>, Error> {
        let got = format!("signal:{name}");
        let timed_out = format!("{TIMEOUT_STEP_PREFIX}{name}");
        let mut cursor = self.inner.cursor.lock().await;
        let sequence = *cursor;
        self.check_not_stopped()?;
        let deadline = self
            .deadline(
                sequence,
                &format!("{DEADLINE_STEP_PREFIX}{name}"),
                deadline_ms,
            )
            .await?;
        *cursor += 1;
        let sequence = *cursor;
        if let Some(receipt) = usize::try_from(sequence)
            .ok()
            .and_then(|i| self.inner.history.get(i))
        {
            if receipt.step == got {
                *cursor += 1;
                return self.replayed(receipt).map(Some);
            }
            if receipt.step == timed_out {
                *cursor += 1;
                return Ok(None);
            }
            return Err(self.interrupt(Error::NonDeterminism {
                run_id: self.inner.run_id.to_string(),
                sequence,
                recorded: receipt.step.clone(),
                called: got,
            }));
        }
        let shared = &self.inner.shared;
        let signal_wait = tokio::time::Instant::now().checked_add(shared.signal_wait);
        loop {
            if let Some((input, value)) = self.next_signal(name, &got, deadline).await? {
                let receipt = self.receipt(sequence, got, Ok(input.payload.clone()));
                let commit = Commit::step(receipt, shared.clock.now_ms())
                    .with_input_update(input.input_id, InputPhase::Consumed);
                self.commit(commit).await?;
                *cursor += 1;
                return Ok(Some(value));
            }
            let now = shared.clock.now_ms();
            if now >= deadline {
                let nothing =
                    codec::encode_value("a timeout", &()).map_err(|e| self.interrupt(e))?;
                let receipt = self.receipt(sequence, timed_out, Ok(nothing));
                self.commit(Commit::step(receipt, now)).await?;
                *cursor += 1;
                return Ok(None);
            }
            let left = Duration::from_millis(deadline - now);
            let waited = signal_wait.is_some_and(|end| tokio::time::Instant::now() >= end);
            if waited && left > shared.timer_wait {
                return Err(self.interrupt(Error::Suspended {
                    run_id: self.inner.run_id.to_string(),
                    signal: name.to_string(),
                    until_ms: Some(deadline),
                }));
            }
            tokio::time::sleep(left.min(shared.signal_poll_interval)).await;
        }
    }

    /// [`wait_for_signal_until`](Context::wait_for_signal_until) the
    /// runtime clock's time now plus `timeout` (saturating), computed and
    /// recorded the first time the run reaches the wait.
    ///
    /// # Errors
    ///
    /// As [`wait_for_signal`](Context::wait_for_signal).
    pub async fn wait_for_signal_timeout<T: DeserializeOwned>(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<T>, Error> {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let deadline_ms = self.inner.shared.clock.now_ms().saturating_add(ms);
        self.wait_for_signal_until(name, deadline_ms).await
    }

    /// Sleeps durably for `duration`: the same as
    /// [`sleep_until`](Context::sleep_until) the runtime clock's time now
    /// plus `duration` (saturating: `Duration::MAX` sleeps to the end of
    /// the clock's range). The wake time is computed and recorded only the
    /// first time the run reaches this sleep; every later attempt takes the
    /// recorded one.
    ///
    /// # Errors
    ///
    /// As [`sleep_until`](Context::sleep_until).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use memo_runtime::{Error, InMemoryRuntimeStore, ManualClock, MemoStore, RunId};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, Runtime, Workflow};
    ///
    /// let clock = Arc::new(ManualClock::new(1_000));
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let reminder = Workflow::new("reminder", |ctx: Context, who: String| async move {
    ///     ctx.sleep(Duration::from_secs(3 * 24 * 3600)).await?; // three days
    ///     ctx.step_with("remind", &who, |_memo, who| async move {
    ///         Ok::<_, Error>(format!("reminded {who}"))
    ///     })
    ///     .await
    /// });
    ///
    /// let run = RunId::new("remind-ada")?;
    /// let who = "ada".to_string();
    /// // Longer than the runtime's timer wait: the run suspends until its wake time.
    /// let first = runtime.run(&run, &who, &reminder).await;
    /// assert!(matches!(first, Err(Error::Suspended { until_ms: Some(_), .. })));
    /// clock.advance_ms(3 * 24 * 3600 * 1000);
    /// assert_eq!(runtime.run(&run, &who, &reminder).await?, "reminded ada");
    /// # Ok(()) }
    /// ```
    pub async fn sleep(&self, duration: Duration) -> Result<(), Error> {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let at_ms = self.inner.shared.clock.now_ms().saturating_add(ms);
        self.sleep_until(at_ms).await
    }

    /// Sleeps durably until `at_ms` (ms since the Unix epoch, by the
    /// runtime's [`Clock`](crate::Clock)).
    ///
    /// The first time the run reaches this sleep, its wake time is committed
    /// as the step `memo.sleep` at this position (its output is the wake time);
    /// every replay, on any worker and whatever its clock says, wakes at the
    /// recorded time, not at a new `at_ms`. The sleep never ends before the
    /// wake time by the runtime's clock: a clock moved back sleeps longer.
    ///
    /// A wake time within the runtime's
    /// [`timer_wait`](super::RuntimeBuilder::timer_wait) is awaited in
    /// process (the attempt keeps renewing its lease); a later one suspends
    /// the attempt: this returns [`Error::Suspended`] with `until_ms` set,
    /// the attempt releases its lease, and the run stays open. Running it
    /// again (from any process) before the wake time suspends it again
    /// without running any step body; after it, the workflow continues past
    /// the sleep.
    ///
    /// # Errors
    ///
    /// [`Error::Suspended`] as above; the runtime errors of
    /// [`Context::step`]. None of these fail the run.
    pub async fn sleep_until(&self, at_ms: u64) -> Result<(), Error> {
        let mut cursor = self.inner.cursor.lock().await;
        let sequence = *cursor;
        self.check_not_stopped()?;
        let wake_ms = self.deadline(sequence, SLEEP_STEP, at_ms).await?;
        *cursor += 1;
        self.wait_until(wake_ms, "").await
    }

    /// The deadline recorded at `sequence` under `step`, or `at_ms`,
    /// committed there now if the run has not reached it before.
    async fn deadline(&self, sequence: u64, step: &str, at_ms: u64) -> Result<u64, Error> {
        if let Some(receipt) = self.replay(sequence, step)? {
            return self.replayed(receipt);
        }
        self.check_cancelled()?;
        let output =
            codec::encode_value("a timer's deadline", &at_ms).map_err(|e| self.interrupt(e))?;
        let receipt = self.receipt(sequence, step.to_string(), Ok(output));
        self.commit(Commit::step(receipt, self.inner.shared.clock.now_ms()))
            .await?;
        Ok(at_ms)
    }

    /// Waits in process until `wake_ms` by the runtime's clock, or suspends
    /// the attempt if that is further away than the runtime's timer wait.
    /// `signal` names the signal the run also waits for, if any.
    async fn wait_until(&self, wake_ms: u64, signal: &str) -> Result<(), Error> {
        let shared = &self.inner.shared;
        loop {
            self.check_cancelled()?;
            let now = shared.clock.now_ms();
            if now >= wake_ms {
                return Ok(());
            }
            let left = wake_ms - now;
            if left > shared.timer_wait_ms() {
                return Err(self.interrupt(Error::Suspended {
                    run_id: self.inner.run_id.to_string(),
                    signal: signal.to_string(),
                    until_ms: Some(wake_ms),
                }));
            }
            // Checked again after each poll interval: the runtime's clock,
            // not Tokio's, says when the timer is due.
            let poll = shared.signal_poll_interval;
            tokio::time::sleep(Duration::from_millis(left).min(poll)).await;
        }
    }

    /// The first pending signal `name` whose payload decodes as `T`, with
    /// its value. Each pending one before it that does not decode is
    /// refused: committed as [`InputPhase::Abandoned`], so that no attempt
    /// consumes it (its value could never be replayed) and the next good
    /// one gets through.
    ///
    /// Only signals accepted at or before `accepted_by` (ms) count: a
    /// signal sent after a wait's deadline is left for a later wait.
    async fn next_signal<T: DeserializeOwned>(
        &self,
        name: &str,
        step_name: &str,
        accepted_by: u64,
    ) -> Result<Option<(InputRecord, T)>, Error> {
        let inputs = self
            .inner
            .shared
            .store
            .load_inputs(&self.inner.run_id)
            .await
            .map_err(|e| self.interrupt(e))?;
        // A wait is a boundary too: it observes a cancellation at each poll.
        self.inner.lease.note_cancel(&inputs);
        self.check_cancelled()?;
        let pending = inputs.into_iter().filter(|input| {
            input.name == name
                && input.accepted_at_ms <= accepted_by
                && matches!(input.phase, InputPhase::Accepted | InputPhase::Queued)
        });
        for input in pending {
            let what = format!("the payload of signal {name:?} for {step_name:?}");
            let location = format!("run {} input {:?}", self.inner.run_id, input.input_id);
            match codec::decode_value::<T>(&what, &location, &input.payload) {
                Ok(value) => return Ok(Some((input, value))),
                Err(refused) => {
                    tracing::warn!(
                        run_id = %self.inner.run_id,
                        signal = name,
                        input_id = %input.input_id,
                        error = %refused,
                        "signal refused: its payload is not what the run waits for"
                    );
                    let update = InputUpdate {
                        input_id: input.input_id,
                        phase: InputPhase::Abandoned,
                    };
                    let now = self.inner.shared.clock.now_ms();
                    self.commit(Commit::inputs(vec![update], now)).await?;
                }
            }
        }
        Ok(None)
    }

    /// Whether the run has been cancelled ([`Runtime::cancel`]), asked of
    /// the store now (one read of the run's inputs).
    ///
    /// Once this returns `true`, the cancellation is observed: the attempt
    /// runs no further step (each returns [`Error::RunCancelled`]), and the
    /// run ends `Cancelled` when the workflow returns, whatever it returns.
    /// A step body that may run long can ask between its own pieces of
    /// work, and stop early.
    ///
    /// Without asking, an attempt observes a cancellation at its next step
    /// boundary or wait after it learns of it (see [`Runtime::cancel`]).
    ///
    /// # Errors
    ///
    /// A store error reading the run's inputs.
    ///
    /// [`Runtime::cancel`]: super::Runtime::cancel
    pub async fn is_cancelled(&self) -> Result<bool, Error> {
        if self.observed_cancel().is_some() {
            return Ok(true);
        }
        let inputs = self
            .inner
            .shared
            .store
            .load_inputs(&self.inner.run_id)
            .await?;
        self.inner.lease.note_cancel(&inputs);
        Ok(self.check_cancelled::<Error>().is_err())
    }

    /// The cancellation reason, if this attempt observed the run's
    /// cancellation.
    pub(super) fn observed_cancel(&self) -> Option<String> {
        self.inner
            .cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Refuses to go on once the attempt knows the run was cancelled, and
    /// marks the cancellation observed.
    fn check_cancelled<E: From<Error>>(&self) -> Result<(), E> {
        let reason = match self.observed_cancel() {
            Some(reason) => reason,
            None => match self.inner.lease.cancel_requested() {
                Some(reason) => {
                    *self
                        .inner
                        .cancelled
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
                    reason
                }
                None => return Ok(()),
            },
        };
        Err(E::from(Error::RunCancelled {
            run_id: self.inner.run_id.to_string(),
            reason: Some(reason),
        }))
    }

    /// The runtime error that stopped this attempt, if any.
    pub(super) fn take_interruption(&self) -> Option<String> {
        self.inner.interruption.take()
    }

    /// Records a runtime-side failure, if it is transient (the run must not
    /// be failed for it), and converts it for the workflow.
    fn interrupt<E: From<Error>>(&self, error: Error) -> E {
        if let Error::Suspended { until_ms, .. } = &error {
            self.inner.lease.note_suspended(*until_ms);
        }
        self.inner.interruption.record(&error);
        E::from(error)
    }

    /// Refuses to start a step once a transient error interrupted the attempt: the
    /// workflow may have handled that error, but nothing more of this
    /// attempt may be recorded.
    fn check_not_stopped<E: From<Error>>(&self) -> Result<(), E> {
        if let Some(reason) = self.observed_cancel() {
            return Err(E::from(Error::RunCancelled {
                run_id: self.inner.run_id.to_string(),
                reason: Some(reason),
            }));
        }
        if (self.inner.shared.draining).load(std::sync::atomic::Ordering::Acquire) {
            let stopping = Error::Aborted {
                run_id: self.inner.run_id.to_string(),
                reason: "the worker is shutting down; the run stays open".into(),
            };
            return Err(self.interrupt(stopping));
        }
        if self.inner.interruption.is_set() {
            return Err(E::from(Error::Aborted {
                run_id: self.inner.run_id.to_string(),
                reason: "a transient error interrupted this attempt earlier; no further step runs"
                    .into(),
            }));
        }
        Ok(())
    }

    /// What a replayed receipt returns: its output, or its recorded failure.
    fn replayed<T: DeserializeOwned, E: From<Error>>(&self, receipt: &StepReceipt) -> Result<T, E> {
        match &receipt.error {
            Some(message) => Err(E::from(Error::StepFailed {
                run_id: self.inner.run_id.to_string(),
                sequence: receipt.sequence,
                step: receipt.step.clone(),
                message: message.clone(),
            })),
            None => self.decode_output(receipt.sequence, &receipt.step, &receipt.output),
        }
    }

    /// The receipt recorded at `sequence`, whatever its step.
    fn history_at(&self, sequence: u64) -> Option<&StepReceipt> {
        usize::try_from(sequence)
            .ok()
            .and_then(|i| self.inner.history.get(i))
    }

    /// The recorded receipt at `sequence`, if the history has that step.
    fn replay<E: From<Error>>(&self, sequence: u64, step: &str) -> Result<Option<&StepReceipt>, E> {
        let Some(receipt) = usize::try_from(sequence)
            .ok()
            .and_then(|i| self.inner.history.get(i))
        else {
            return Ok(None);
        };
        if receipt.step != step {
            return Err(self.interrupt(Error::NonDeterminism {
                run_id: self.inner.run_id.to_string(),
                sequence,
                recorded: receipt.step.clone(),
                called: step.to_string(),
            }));
        }
        Ok(Some(receipt))
    }

    fn decode_output<T: DeserializeOwned, E: From<Error>>(
        &self,
        sequence: u64,
        step: &str,
        bytes: &[u8],
    ) -> Result<T, E> {
        let what = format!("the output of step {step:?}");
        let location = format!("run {} receipt {sequence}", self.inner.run_id);
        codec::decode_value(&what, &location, bytes).map_err(|e| self.interrupt(e))
    }

    fn receipt(&self, sequence: u64, step: String, outcome: Result<Bytes, String>) -> StepReceipt {
        let (output, error) = match outcome {
            Ok(output) => (output, None),
            Err(message) => (Bytes::new(), Some(message)),
        };
        StepReceipt {
            run_id: self.inner.run_id.clone(),
            sequence,
            step,
            output,
            recorded_at_ms: self.inner.shared.clock.now_ms(),
            error,
        }
    }

    /// Commits `commit` as this attempt: refused once another attempt took
    /// the run over.
    async fn commit<E: From<Error>>(&self, commit: Commit) -> Result<(), E> {
        let commit = commit.with_fence(self.inner.lease.fence());
        self.inner
            .shared
            .store
            .atomic_apply(&self.inner.run_id, commit)
            .await
            .map(drop)
            .map_err(|e| self.interrupt(e))
    }

    async fn run_step<F, Fut, T, E>(&self, step: StepSpec<'_, F, E>) -> Result<T, E>
    where
        F: FnMut(Memo) -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Serialize + DeserializeOwned + Send,
        E: From<Error> + Display + Send,
    {
        let StepSpec {
            name,
            mut body,
            retry,
            transient,
            ..
        } = step;
        let mut cursor = self.inner.cursor.lock().await;
        let sequence = *cursor;
        self.check_not_stopped()?;
        if let Some(receipt) = self.replay(sequence, &name)? {
            tracing::debug!(run_id = %self.inner.run_id, sequence, step = %name, "replayed from receipt");
            *cursor += 1;
            return self.replayed(receipt);
        }
        // A step boundary: a cancellation the attempt knows of stops it
        // here, before a new body starts.
        self.check_cancelled()?;
        let step_number = u32::try_from(sequence).map_err(|_| {
            self.interrupt(Error::InvalidWrite {
                run_id: self.inner.run_id.to_string(),
                reason: "a run has at most 2^32 steps".into(),
            })
        })?;
        let interruption = &self.inner.interruption;
        let memo = self
            .inner
            .shared
            .memo
            .memo_for(&self.inner.run_id, self.inner.incarnation, step_number)
            .with_interruption(interruption.clone())
            .with_lease(Arc::new(StepLease {
                shared: Arc::clone(&self.inner.shared),
                run_id: self.inner.run_id.clone(),
                held: Arc::clone(&self.inner.lease),
            }));
        let mut waits = retry.backoff().build();
        let outcome = loop {
            // Every try starts only under a lease known to be live: an
            // attempt that was paused past its lease (in a try, in its
            // backoff, anywhere since the last check) and may have been taken
            // over renews it, or stops here, before the body runs again.
            self.inner
                .lease
                .ensure_live(&self.inner.shared, &self.inner.run_id)
                .await
                .map_err(|e| self.interrupt(e))?;
            // Each try starts clean: an interruption that a retry got past is
            // no reason to stop the attempt.
            interruption.take();
            let error = match body(memo.clone()).await {
                Ok(value) => break Ok(value),
                Err(error) => error,
            };
            let retryable = transient
                .as_ref()
                .is_none_or(|is_transient| is_transient(&error));
            match waits.next().filter(|_| retryable) {
                Some(wait) => {
                    tracing::info!(run_id = %self.inner.run_id, sequence, step = %name, ?wait, "step failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                None => break Err(error),
            }
        };
        let (recorded, result) = match outcome {
            // The body met a transient error (kept in `interruption`): record
            // nothing, so that the next attempt runs the step again.
            Err(e) if interruption.is_set() => return Err(e),
            Err(e) => (Err(e.to_string()), Err(e)),
            Ok(value) => {
                // What the body got past on its way to a value is its own
                // business: the value is committed.
                interruption.take();
                match codec::encode_value(&format!("the output of step {name:?}"), &value) {
                    Ok(output) => (Ok(output), Ok(value)),
                    // A value that cannot be encoded fails the step for good.
                    Err(e) => (Err(e.to_string()), Err(E::from(e))),
                }
            }
        };
        let receipt = self.receipt(sequence, name, recorded);
        self.commit(Commit::step(
            receipt.clone(),
            self.inner.shared.clock.now_ms(),
        ))
        .await?;
        *cursor += 1;
        match result {
            Ok(value) => Ok(value),
            // A failure reads the same now as in every replay, so that a
            // workflow that handles it takes the same branch every time.
            Err(_) => self.replayed(&receipt),
        }
    }
}

/// The name of the step that records a timer's wake time.
pub(super) const SLEEP_STEP: &str = "memo.sleep";

/// The prefix of the step that marks a run suspended in
/// [`Context::wait_for_signal`] (`memo.wait:<name>`, empty output).
pub(super) const WAIT_STEP_PREFIX: &str = "memo.wait:";

/// The prefix of the step that records a signal wait's deadline.
pub(super) const DEADLINE_STEP_PREFIX: &str = "memo.signal-deadline:";

/// The prefix of the step that records a signal wait's timeout.
pub(super) const TIMEOUT_STEP_PREFIX: &str = "memo.signal-timeout:";

/// Decides whether a step body's error is worth a retry.
type IsTransient<'c, E> = Box<dyn Fn(&E) -> bool + Send + Sync + 'c>;

/// A durable step: a future that runs it (see [`Context::step`]).
///
/// Configure it with [`retry`](Step::retry) and [`when`](Step::when) before
/// awaiting it. It is a [`Future`] itself, so it goes straight into
/// `futures::join!`, `tokio::join!` or `futures::future::try_join_all`; the
/// steps of one run still execute one at a time, in the order they are
/// first polled.
#[must_use = "a step does nothing until it is awaited"]
pub struct Step<'c, F, T, E> {
    state: StepState<'c, F, T, E>,
}

enum StepState<'c, F, T, E> {
    /// Not polled yet: still configurable.
    Ready(StepSpec<'c, F, E>),
    Running(BoxFuture<'c, Result<T, E>>),
    Done,
}

/// What a step is, until its first poll starts it.
struct StepSpec<'c, F, E> {
    ctx: &'c Context,
    name: String,
    body: F,
    retry: RetryPolicy,
    transient: Option<IsTransient<'c, E>>,
}

// A step never pins its body in place: the body is moved, by value, into the
// boxed future at the first poll, and only that box is polled.
impl<F, T, E> Unpin for Step<'_, F, T, E> {}

impl<'c, F, T, E> Step<'c, F, T, E> {
    /// Retries the body under `policy` (default: one try). Every error is
    /// retried unless [`when`](Step::when) narrows it. Set it before the
    /// step is first polled: a step already started keeps its policy.
    ///
    /// Every try starts only under a live lease: a try after a wait that
    /// outlasted the attempt's lease renews it first (and checks the renewed
    /// lease again, as the clock may have moved past it meanwhile), and if
    /// another worker took the run over, or the lease keeps expiring while
    /// it is renewed, the step stops with [`Error::LeaseLost`] (the run
    /// stays open) instead of starting the body beside the new attempt's.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        if let StepState::Ready(spec) = &mut self.state {
            spec.retry = policy;
        }
        self
    }

    /// Retries only the errors for which `is_transient` is true; any other
    /// error is permanent and returned at once. Set it before the step is
    /// first polled, like [`retry`](Step::retry).
    pub fn when(mut self, is_transient: impl Fn(&E) -> bool + Send + Sync + 'c) -> Self {
        if let StepState::Ready(spec) = &mut self.state {
            spec.transient = Some(Box::new(is_transient));
        }
        self
    }
}

impl<'c, F, Fut, T, E> Future for Step<'c, F, T, E>
where
    F: FnMut(Memo) -> Fut + Send + 'c,
    Fut: Future<Output = Result<T, E>> + Send + 'c,
    T: Serialize + DeserializeOwned + Send + 'c,
    E: From<Error> + Display + Send + 'c,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<T, E>> {
        let this = self.get_mut();
        if let StepState::Ready(_) = this.state {
            let StepState::Ready(spec) = std::mem::replace(&mut this.state, StepState::Done) else {
                unreachable!("the state was just matched as ready")
            };
            let ctx = spec.ctx;
            let span =
                tracing::info_span!("memo.step", run_id = %ctx.inner.run_id, step = %spec.name);
            this.state = StepState::Running(Box::pin(ctx.run_step(spec).instrument(span)));
        }
        let StepState::Running(running) = &mut this.state else {
            panic!("a step polled after it completed");
        };
        let output = std::task::ready!(running.as_mut().poll(cx));
        this.state = StepState::Done;
        Poll::Ready(output)
    }
}
