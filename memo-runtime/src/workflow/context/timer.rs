//! Durable timers: [`Context::sleep`] and [`Context::sleep_until`], and the
//! recorded deadlines that signal waits share with them.

use std::time::Duration;

use super::{Context, Cursor, SLEEP_STEP};
use crate::codec;
use crate::error::Error;
use crate::runtime_store::Commit;

impl Context {
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
    /// use memo_runtime::{Error, MemoStore, RunId, runtime_store::InMemoryRuntimeStore, clock::ManualClock};
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
    /// runtime's [`Clock`](crate::clock::Clock)).
    ///
    /// The first time the run reaches this sleep, its wake time is committed
    /// as the step `memo.sleep` at this position (its output is the wake time);
    /// every replay, on any worker and whatever its clock says, wakes at the
    /// recorded time, not at a new `at_ms`. The sleep never ends before the
    /// wake time by the runtime's clock: a clock moved back sleeps longer.
    ///
    /// A wake time within the runtime's
    /// [`timer_wait`](crate::workflow::RuntimeBuilder::timer_wait) is awaited in
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
        let mut cursor = self.take_cursor().await?;
        let wake_ms = self.deadline(&mut cursor, SLEEP_STEP, at_ms).await?;
        // The cursor is held through the wait: no other call of the attempt
        // takes a position while it sleeps.
        let waited = self.wait_until(wake_ms, "").await;
        drop(cursor);
        waited
    }

    /// The deadline recorded at the cursor under `step`, or `at_ms`,
    /// committed there now if the run has not reached it before; the cursor
    /// moves past it.
    pub(super) async fn deadline(
        &self,
        cursor: &mut Cursor<'_>,
        step: &str,
        at_ms: u64,
    ) -> Result<u64, Error> {
        if let Some(replayed) = self.replay_at(cursor, step) {
            return replayed;
        }
        self.check_cancelled()?;
        let output =
            codec::encode_value("a timer's deadline", &at_ms).map_err(|e| self.interrupt(e))?;
        let receipt = self.receipt(cursor.sequence(), step.to_string(), Ok(output));
        self.commit(Commit::step(receipt, self.inner.shared.clock.now_ms()))
            .await?;
        cursor.advance();
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
}
