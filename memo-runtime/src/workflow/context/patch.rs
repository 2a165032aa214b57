//! Patching: [`Context::patched`] and [`Context::deprecate_patch`], which let
//! a workflow's code change while runs of the old code are open.
//!
//! A patch is decided once per run, at the position where the workflow asks,
//! and recorded there as the step `memo.patch:<name>` (empty output):
//!
//! - the run's history has `memo.patch:<name>` at this position: the run took
//!   the patched branch before, so it takes it again (`true`);
//! - the history has any other receipt at this position: the run passed this
//!   point under code without the patch, so it keeps the old branch
//!   (`false`), and nothing is recorded;
//! - the history ends before this position (a new run, or an open run that
//!   had not got this far): the run takes the patched branch, and the marker
//!   is committed first, so that every later replay takes it too (`true`).
//!
//! A run whose history ends exactly here under the old code (it crashed, or
//! it is suspended, just before the old branch's first step) takes the new
//! branch: it had not yet committed anything the old branch did.

use bytes::Bytes;

use super::{Context, PATCH_STEP_PREFIX};
use crate::error::Error;
use crate::runtime_store::Commit;

impl Context {
    /// Whether this run takes the branch of the patch `name`: `true` for a
    /// run that reaches this point under code that has the patch, `false`
    /// for a run whose recorded history passed this point without it.
    ///
    /// The answer is recorded (as the step `memo.patch:<name>` at this
    /// position, for a `true` reached for the first time) so that every replay
    /// of the run, on any worker, takes the same branch. A `false` records
    /// nothing: the run's next receipt is already the old branch's.
    ///
    /// Keep both branches until no open run needs the old one (the
    /// [replay check](crate::workflow::replay_check) lists the runs on each
    /// branch); then replace the call with
    /// [`deprecate_patch`](Context::deprecate_patch) and keep only the new
    /// branch; once no open run has the marker either, remove that call too.
    ///
    /// # Errors
    ///
    /// The runtime errors of [`Context::step`] committing the marker (a store
    /// error, a lost lease, a cancellation observed): none fails the run.
    ///
    /// # Example
    ///
    /// A run started by the old code (e-mail, then wait for "go") is open
    /// when the code that also sends an SMS is deployed:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use memo_runtime::{Error, MemoStore, RunId, runtime_store::InMemoryRuntimeStore};
    /// use memo_runtime::object_store::memory::InMemory;
    /// use memo_runtime::workflow::{Context, Runtime, Workflow};
    ///
    /// let runtime = Runtime::builder()
    ///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
    ///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    ///     .signal_wait(Duration::ZERO)
    ///     .build()?;
    /// let notify = |patch: bool| {
    ///     Workflow::new("notify", move |ctx: Context, user: String| async move {
    ///         ctx.step_with("email", &user, |_memo, _user| async move { Ok::<_, Error>(()) })
    ///             .await?;
    ///         let sms = patch && ctx.patched("send-sms-too").await?;
    ///         if sms {
    ///             ctx.step_with("sms", &user, |_memo, _user| async move { Ok::<_, Error>(()) })
    ///                 .await?;
    ///         }
    ///         ctx.wait_for_signal::<()>("go").await?;
    ///         Ok::<_, Error>(sms)
    ///     })
    /// };
    /// let (old, ada, bob) = (RunId::new("old")?, "ada".to_string(), "bob".to_string());
    /// assert!(runtime.run(&old, &ada, &notify(false)).await.is_err()); // waits for "go"
    ///
    /// // Deployed: the open run passed the patch point without the patch.
    /// let new = RunId::new("new")?;
    /// assert!(runtime.run(&new, &bob, &notify(true)).await.is_err()); // sent the SMS, waits
    /// for run in [&old, &new] {
    ///     runtime.signal(run, "go", &()).await?;
    /// }
    /// assert!(!runtime.run(&old, &ada, &notify(true)).await?); // the old branch
    /// assert!(runtime.run(&new, &bob, &notify(true)).await?); // the recorded patch
    /// # Ok(()) }
    /// ```
    pub async fn patched(&self, name: &str) -> Result<bool, Error> {
        let marker = format!("{PATCH_STEP_PREFIX}{name}");
        let mut cursor = self.take_cursor().await?;
        let sequence = cursor.sequence();
        let taken = match self.history_at(sequence) {
            Some(receipt) if receipt.step == marker => true,
            Some(_) => false,
            None => {
                self.end_of_history()?;
                self.check_cancelled()?;
                let receipt = self.receipt(sequence, marker, Ok(Bytes::new()));
                self.commit(Commit::step(receipt, self.inner.shared.clock.now_ms()))
                    .await?;
                true
            }
        };
        if taken {
            cursor.advance();
        }
        self.note_patch(name, taken, false);
        Ok(taken)
    }

    /// Retires the patch `name`: the code keeps only the patched branch, and
    /// this call accepts every run's history, with or without the patch's
    /// marker at this position. It records nothing.
    ///
    /// Replace `if ctx.patched(name).await? { new } else { old }` with
    /// `ctx.deprecate_patch(name).await?; new` once no open run took the old
    /// branch (the [replay check](crate::workflow::replay_check) says which
    /// runs did). Remove the call once no open run has the marker either.
    ///
    /// # Errors
    ///
    /// [`Error::Aborted`] if an earlier error interrupted the attempt, or
    /// [`Error::RunCancelled`] once it observed a cancellation, as any step.
    ///
    /// # Example
    ///
    /// ```
    /// # use memo_runtime::{Error, workflow::Context};
    /// async fn notify(ctx: Context, user: String) -> Result<(), Error> {
    ///     ctx.step_with("email", &user, |_memo, _user| async move { Ok::<_, Error>(()) })
    ///         .await?;
    ///     ctx.deprecate_patch("send-sms-too").await?; // every open run sent the SMS
    ///     ctx.step_with("sms", &user, |_memo, _user| async move { Ok::<_, Error>(()) })
    ///         .await?;
    ///     ctx.step("done", |_memo| async move { Ok::<_, Error>(()) }).await
    /// }
    /// ```
    pub async fn deprecate_patch(&self, name: &str) -> Result<(), Error> {
        let marker = format!("{PATCH_STEP_PREFIX}{name}");
        let mut cursor = self.take_cursor().await?;
        let marked = self
            .history_at(cursor.sequence())
            .is_some_and(|r| r.step == marker);
        if marked {
            cursor.advance();
        }
        self.note_patch(name, marked, true);
        Ok(())
    }
}
