//! Durable steps: [`Context::step`], and the [`Step`] future that runs one
//! (replayed from its receipt, or run, retried and committed).

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use backon::BackoffBuilder;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::Context;
use crate::codec;
use crate::error::Error;
use crate::memo::Memo;
use crate::runtime_store::Commit;
use crate::workflow::RetryPolicy;
use crate::workflow::hook::StepAttempt;

/// The error of a step body or workflow that uses `?` on errors of any
/// type: every `std::error::Error + Send + Sync` converts into it, memo's
/// own [`Error`] included, and [`RunOutcome`](crate::workflow::RunOutcome)
/// tells a suspended run apart in a workflow that returns it. Fixed by
/// [`Context::step_boxed`] and [`Context::step_with_boxed`], so their
/// bodies need no type annotation.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Context {
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
    /// into the closure. The body's error type `E` is inferred from what it
    /// returns; a body that uses `?` on other error types and ends with a
    /// plain `Ok(value)` leaves nothing to infer it from: use
    /// [`Context::step_boxed`], whose error is [`BoxError`].
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

    /// [`Context::step`] with the body's error fixed to [`BoxError`], so a
    /// body can use `?` on any error type (`s.parse::<u32>()?`, an I/O
    /// error, a client's error) and end with a plain `Ok(value)`: the
    /// compiler has no error type left to infer. A workflow returning
    /// [`BoxError`] takes the step's error with `?` (see the example).
    ///
    /// # Errors
    ///
    /// As [`Context::step`], boxed.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), memo_runtime::workflow::BoxError> {
    /// use std::sync::Arc;
    /// use memo_runtime::workflow::{BoxError, Context, Runtime, Workflow};
    /// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
    /// use memo_runtime::runtime_store::InMemoryRuntimeStore;
    ///
    /// let parse = Workflow::new("parse", |ctx: Context, text: String| async move {
    ///     let n = ctx
    ///         .step_boxed("parse", |_memo| {
    ///             let text = text.clone();
    ///             async move { Ok(text.trim().parse::<u32>()? * 2) }
    ///         })
    ///         .await?;
    ///     Ok::<_, BoxError>(n)
    /// });
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .build()?;
    /// let doubled = runtime.run(&RunId::new("parse-1")?, &" 21 ".to_string(), &parse).await?;
    /// assert_eq!(doubled, 42);
    /// # Ok(()) }
    /// ```
    pub fn step_boxed<F, Fut, T>(
        &self,
        name: impl Into<String>,
        body: F,
    ) -> Step<'_, F, T, BoxError>
    where
        F: FnMut(Memo) -> Fut + Send,
        Fut: Future<Output = Result<T, BoxError>> + Send,
        T: Serialize + DeserializeOwned + Send,
    {
        self.step(name, body)
    }

    /// [`Context::step_with`] with the body's error fixed to [`BoxError`]:
    /// `body(memo, input)` can use `?` on any error type and end with a
    /// plain `Ok(value)` (see [`Context::step_boxed`]).
    ///
    /// # Errors
    ///
    /// As [`Context::step`], boxed.
    pub fn step_with_boxed<I, F, Fut, T>(
        &self,
        name: impl Into<String>,
        input: I,
        body: F,
    ) -> Step<'_, impl FnMut(Memo) -> Fut + Send, T, BoxError>
    where
        I: Clone + Send,
        F: FnMut(Memo, I) -> Fut + Send,
        Fut: Future<Output = Result<T, BoxError>> + Send,
        T: Serialize + DeserializeOwned + Send,
    {
        self.step_with(name, input, body)
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
        let mut cursor = self.take_cursor().await?;
        if let Some(replayed) = self.replay_at(&mut cursor, &name) {
            return replayed;
        }
        let sequence = cursor.sequence();
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
            .for_attempt(Arc::new(StepAttempt {
                shared: Arc::clone(&self.inner.shared),
                run_id: self.inner.run_id.clone(),
                lease: Arc::clone(&self.inner.lease),
                interruption: interruption.clone(),
                written: std::sync::Mutex::default(),
            }));
        let mut waits = retry.backoff().build();
        // Tries of this attempt that failed and were retried: recorded
        // with the step's outcome.
        let mut retries: u32 = 0;
        let mut last_retried_error: Option<String> = None;
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
                    retries = retries.saturating_add(1);
                    last_retried_error = Some(error.to_string());
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
        let mut receipt = self.receipt(sequence, name, recorded);
        receipt.retries = retries;
        receipt.last_retried_error = last_retried_error;
        self.commit(Commit::step(
            receipt.clone(),
            self.inner.shared.clock.now_ms(),
        ))
        .await?;
        cursor.advance();
        match result {
            Ok(value) => Ok(value),
            // A failure reads the same now as in every replay, so that a
            // workflow that handles it takes the same branch every time.
            Err(_) => self.replayed(&receipt),
        }
    }
}

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
