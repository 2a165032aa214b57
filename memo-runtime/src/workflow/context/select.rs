//! [`Context::select`]: a durable wait for the first of several signals or
//! a deadline, whose winner is recorded in the run so that every replay
//! takes the same branch.

use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::{Context, Cursor};
use crate::codec;
use crate::error::Error;
use crate::runtime_store::{Commit, InputPhase, StepReceipt};

/// The step that records a select's signal names and deadline (its output:
/// a MessagePack `(u64, [String])`, the deadline `u64::MAX` for none).
pub(in crate::workflow) const SELECT_STEP: &str = "memo.select";

/// The step that records that a select's deadline passed first.
const SELECT_TIMEOUT_STEP: &str = "memo.select-timeout";

/// What [`Context::select`] returned: the first signal, or the deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Selected {
    /// The signal `name` came first, with its (encoded) payload.
    Signal {
        /// Which of the signals it was.
        name: String,
        /// Its payload, as [`Runtime::signal`](crate::workflow::Runtime::signal)
        /// encoded it: read it with [`Selected::decode`].
        payload: Bytes,
    },
    /// The deadline passed before any of the signals came.
    TimedOut,
}

impl Selected {
    /// The name of the signal that came first; `None` if the deadline did.
    pub fn signal(&self) -> Option<&str> {
        match self {
            Selected::Signal { name, .. } => Some(name),
            Selected::TimedOut => None,
        }
    }

    /// The signal's payload as a `T`.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] if the payload is not a `T`, or the deadline came
    /// first (there is no payload).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, Error> {
        match self {
            Selected::Signal { name, payload } => codec::decode_value(
                &format!("the payload of signal {name:?}"),
                "a select",
                payload,
            ),
            Selected::TimedOut => codec::decode_value(
                "a signal payload",
                "a select whose deadline passed first",
                &[],
            ),
        }
    }
}

/// The signal names and deadline a select recorded, from its receipt; for
/// [`Runtime::resume`](crate::workflow::Runtime::resume), which starts no attempt for a
/// run whose select still waits.
pub(in crate::workflow) fn recorded(receipt: &StepReceipt) -> Option<(u64, Vec<String>)> {
    (receipt.step == SELECT_STEP)
        .then(|| codec::decode::<(u64, Vec<String>)>(&receipt.output).ok())
        .flatten()
}

impl Context {
    /// Waits for the first of the signals `signals` to come, or for
    /// `deadline_ms` (ms since the Unix epoch by the runtime's clock; `None`
    /// waits without a deadline), whichever is first.
    ///
    /// Durable: the names and the deadline are recorded when the run first
    /// reaches the select (a step `memo.select`), and so is the winner (the
    /// signal's `signal:<name>` receipt, the signal consumed, or a step
    /// `memo.select-timeout`), so every replay returns the same
    /// [`Selected`] without waiting, whatever has been sent since. Signals
    /// are taken in the order they were recorded; only those accepted at or
    /// before the deadline count (a later one stays pending for a later
    /// wait). A select whose code asks for other names than the run
    /// recorded is [`Error::NonDeterminism`].
    ///
    /// While nothing has come, the attempt waits in process as
    /// [`wait_for_signal_until`](Context::wait_for_signal_until) does, then
    /// suspends with [`Error::Suspended`]; a signal sent for one of the
    /// names (or the deadline) makes the run due again, for a
    /// [`Worker`](crate::workflow::Worker) to wake.
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
    /// use memo_runtime::{Error, MemoStore, RunId, clock::ManualClock, runtime_store::InMemoryRuntimeStore};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, Runtime, Selected, Workflow};
    ///
    /// let clock = Arc::new(ManualClock::new(0));
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let review = Workflow::new("review", |ctx: Context, _: ()| async move {
    ///     let answer = ctx.select(&["approve", "reject"], Some(3_600_000)).await?;
    ///     Ok::<_, Error>(match answer.signal() {
    ///         Some("approve") => format!("approved by {}", answer.decode::<String>()?),
    ///         Some(_) => "rejected".to_string(),
    ///         None => "no answer in time".to_string(),
    ///     })
    /// });
    /// let run = RunId::new("review-1")?;
    /// assert!(matches!(runtime.run(&run, &(), &review).await, Err(Error::Suspended { .. })));
    /// runtime.signal(&run, "approve", "ada").await?;
    /// assert_eq!(runtime.run(&run, &(), &review).await?, "approved by ada");
    /// # Ok(()) }
    /// ```
    pub async fn select(
        &self,
        signals: &[&str],
        deadline_ms: Option<u64>,
    ) -> Result<Selected, Error> {
        let names: Vec<String> = signals.iter().map(|s| s.to_string()).collect();
        let mut cursor = self.take_cursor::<Error>().await?;
        let deadline = self
            .select_recorded(&mut cursor, &names, deadline_ms.unwrap_or(u64::MAX))
            .await?;
        let sequence = cursor.sequence();
        if let Some(receipt) = self.history_at(sequence) {
            let won = receipt
                .step
                .strip_prefix("signal:")
                .filter(|name| names.iter().any(|n| n == name));
            let selected = match won {
                Some(name) => Selected::Signal {
                    name: name.to_string(),
                    payload: receipt.output.clone(),
                },
                None if receipt.step == SELECT_TIMEOUT_STEP => Selected::TimedOut,
                None => {
                    return Err(self.interrupt(Error::NonDeterminism {
                        run_id: self.inner.run_id.to_string(),
                        sequence,
                        recorded: receipt.step.clone(),
                        called: format!("the outcome of a select of {names:?}"),
                    }));
                }
            };
            cursor.advance();
            return Ok(selected);
        }
        self.end_of_history::<Error>()?;
        let selected = self.select_live(sequence, &names, deadline).await?;
        cursor.advance();
        Ok(selected)
    }

    /// [`select`](Context::select) with a deadline `timeout` from the
    /// runtime clock's time now (saturating), computed and recorded the
    /// first time the run reaches the select.
    ///
    /// # Errors
    ///
    /// As [`select`](Context::select).
    pub async fn select_timeout(
        &self,
        signals: &[&str],
        timeout: Duration,
    ) -> Result<Selected, Error> {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let deadline_ms = self.inner.shared.clock.now_ms().saturating_add(ms);
        self.select(signals, Some(deadline_ms)).await
    }

    /// The deadline a select recorded at the cursor, checking that it names
    /// `names`; or `deadline`, recorded there now. Moves the cursor past it.
    async fn select_recorded(
        &self,
        cursor: &mut Cursor<'_>,
        names: &[String],
        deadline: u64,
    ) -> Result<u64, Error> {
        let sequence = cursor.sequence();
        if let Some(replayed) = self.replay_at::<(u64, Vec<String>), Error>(cursor, SELECT_STEP) {
            let (recorded_deadline, recorded_names) = replayed?;
            if recorded_names != names {
                return Err(self.interrupt(Error::NonDeterminism {
                    run_id: self.inner.run_id.to_string(),
                    sequence,
                    recorded: format!("{SELECT_STEP} of {recorded_names:?}"),
                    called: format!("{SELECT_STEP} of {names:?}"),
                }));
            }
            return Ok(recorded_deadline);
        }
        self.check_cancelled()?;
        let output =
            codec::encode_value("a select", &(deadline, names)).map_err(|e| self.interrupt(e))?;
        let receipt = self.receipt(sequence, SELECT_STEP.to_string(), Ok(output));
        self.commit(Commit::step(receipt, self.inner.shared.clock.now_ms()))
            .await?;
        cursor.advance();
        Ok(deadline)
    }

    /// Waits for the first pending signal of `names` accepted by `deadline`,
    /// or the deadline, and records which, at `sequence`.
    async fn select_live(
        &self,
        sequence: u64,
        names: &[String],
        deadline: u64,
    ) -> Result<Selected, Error> {
        let shared = &self.inner.shared;
        let signal_wait = tokio::time::Instant::now().checked_add(shared.signal_wait);
        loop {
            let inputs = shared
                .store
                .load_inputs(&self.inner.run_id)
                .await
                .map_err(|e| self.interrupt(e))?;
            self.inner.lease.note_cancel(&inputs);
            self.check_cancelled()?;
            let first = inputs.into_iter().find(|input| {
                names.contains(&input.name)
                    && input.accepted_at_ms <= deadline
                    && matches!(input.phase, InputPhase::Accepted | InputPhase::Queued)
            });
            if let Some(input) = first {
                let step = format!("signal:{}", input.name);
                let receipt = self.receipt(sequence, step, Ok(input.payload.clone()));
                let commit = Commit::step(receipt, shared.clock.now_ms())
                    .with_input_update(input.input_id, InputPhase::Consumed);
                self.commit(commit).await?;
                return Ok(Selected::Signal {
                    name: input.name,
                    payload: input.payload,
                });
            }
            let now = shared.clock.now_ms();
            if now >= deadline && deadline != u64::MAX {
                let nothing =
                    codec::encode_value("a timeout", &()).map_err(|e| self.interrupt(e))?;
                let receipt = self.receipt(sequence, SELECT_TIMEOUT_STEP.to_string(), Ok(nothing));
                self.commit(Commit::step(receipt, now)).await?;
                return Ok(Selected::TimedOut);
            }
            let left = Duration::from_millis(deadline.saturating_sub(now));
            let waited = signal_wait.is_some_and(|end| tokio::time::Instant::now() >= end);
            if waited && (deadline == u64::MAX || left > shared.timer_wait) {
                return Err(self.interrupt(Error::Suspended {
                    run_id: self.inner.run_id.to_string(),
                    signal: names.join(","),
                    until_ms: (deadline != u64::MAX).then_some(deadline),
                }));
            }
            tokio::time::sleep(left.min(shared.signal_poll_interval)).await;
        }
    }
}
