//! Signal waits: [`Context::wait_for_signal`] and its deadline forms.

use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::{Context, DEADLINE_STEP_PREFIX, TIMEOUT_STEP_PREFIX, WAIT_STEP_PREFIX};
use crate::codec;
use crate::error::Error;
use crate::runtime_store::{Commit, InputPhase, InputRecord, InputUpdate};

impl Context {
    /// Waits for the signal `name` sent to this run with
    /// [`Runtime::signal`](crate::workflow::Runtime::signal), consumes it and returns
    /// its payload. Durable: the consumption is a step, so a replay returns
    /// the same payload without waiting.
    ///
    /// If no such signal arrives within the runtime's signal wait (see
    /// [`RuntimeBuilder::signal_wait`](crate::workflow::RuntimeBuilder::signal_wait)),
    /// the run suspends: this returns [`Error::Suspended`], the run stays
    /// `Running`, and running it again once the signal is sent, from any
    /// process, resumes it here. The first suspension records the step
    /// `memo.wait:<name>` (before the wait's own receipt), so that running
    /// the run again before the signal is sent starts no attempt and writes
    /// nothing (see [`Runtime::resume`](crate::workflow::Runtime::resume)).
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
        let mut cursor = self.take_cursor().await?;
        // A wait that suspended before recorded a marker, then the signal.
        let mut marked = false;
        if self
            .history_at(cursor.sequence())
            .is_some_and(|r| r.step == marker)
        {
            cursor.advance();
            marked = true;
        }
        if let Some(replayed) = self.replay_at(&mut cursor, &step_name) {
            return replayed;
        }
        let sequence = cursor.sequence();
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
                    cursor.advance();
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
        cursor.advance();
        Ok(value)
    }

    /// Waits for the signal `name` until `deadline_ms` (ms since the Unix
    /// epoch, by the runtime's [`Clock`](crate::clock::Clock)): `Some(payload)` if
    /// it came in time, `None` if the deadline passed first. Durable: the
    /// deadline is recorded when the wait is first reached (as a step
    /// `memo.signal-deadline:<name>` whose output is the deadline), and so is the
    /// outcome (the step `signal:<name>` with the payload, as
    /// [`wait_for_signal`](Context::wait_for_signal) records it, or
    /// `memo.signal-timeout:<name>`), so every replay takes the same branch.
    ///
    /// A signal counts if it was accepted (by the clock of the runtime that
    /// [sent](crate::workflow::Runtime::signal) it) at or before the deadline, even if
    /// the run only looks after it (it was suspended, and resumed late). Once
    /// the deadline has passed with no such signal, the timeout is recorded,
    /// and a signal sent later is not consumed by this wait: it stays
    /// pending for a later wait for `name`. Payloads that do not decode as
    /// `T` are refused as [`wait_for_signal`](Context::wait_for_signal)
    /// refuses them.
    ///
    /// While neither has come, the attempt waits in process for the
    /// runtime's [`signal_wait`](crate::workflow::RuntimeBuilder::signal_wait), or
    /// until the deadline if that is within its
    /// [`timer_wait`](crate::workflow::RuntimeBuilder::timer_wait), and then suspends
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
    /// use memo_runtime::{Error, MemoStore, RunId, runtime_store::InMemoryRuntimeStore, clock::ManualClock};
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
        let mut cursor = self.take_cursor().await?;
        let deadline_step = format!("{DEADLINE_STEP_PREFIX}{name}");
        let deadline = self
            .deadline(&mut cursor, &deadline_step, deadline_ms)
            .await?;
        if self
            .history_at(cursor.sequence())
            .is_some_and(|r| r.step == timed_out)
        {
            cursor.advance();
            return Ok(None);
        }
        if let Some(replayed) = self.replay_at(&mut cursor, &got) {
            return replayed.map(Some);
        }
        let sequence = cursor.sequence();
        let shared = &self.inner.shared;
        let signal_wait = tokio::time::Instant::now().checked_add(shared.signal_wait);
        loop {
            if let Some((input, value)) = self.next_signal(name, &got, deadline).await? {
                let receipt = self.receipt(sequence, got, Ok(input.payload.clone()));
                let commit = Commit::step(receipt, shared.clock.now_ms())
                    .with_input_update(input.input_id, InputPhase::Consumed);
                self.commit(commit).await?;
                cursor.advance();
                return Ok(Some(value));
            }
            let now = shared.clock.now_ms();
            if now >= deadline {
                let nothing =
                    codec::encode_value("a timeout", &()).map_err(|e| self.interrupt(e))?;
                let receipt = self.receipt(sequence, timed_out, Ok(nothing));
                self.commit(Commit::step(receipt, now)).await?;
                cursor.advance();
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
}
