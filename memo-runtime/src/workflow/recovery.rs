//! [`Runtime::recover`]: at start-up, one attempt of every open run of a
//! workflow and a terminal marker for every ended run that lacks one.

use std::collections::HashSet;
use std::fmt::Display;
use std::future::Future;

use futures::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::{Context, Runtime, Workflow};
use crate::error::{Error, Result};
use crate::retention::TerminalMarker;
use crate::run_id::RunId;
use crate::runtime_store::{Lease, RunRecord, RunStatus};

#[cfg(doc)]
use super::RuntimeBuilder;
#[cfg(doc)]
use crate::runtime_store::RuntimeStore;

/// What [`Runtime::recover`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct Recovery<O, E> {
    /// Each resumed run and how its attempt ended (in run-id order). A
    /// workflow that panicked ended its attempt with [`Error::Aborted`]
    /// (converted into `E`); the run stays open.
    pub resumed: Vec<(RunId, Result<O, E>)>,
    /// Terminal runs found without a terminal marker, whose marker was
    /// written.
    pub remarked: usize,
    /// Runs that could not be loaded (a damaged record, a run deleted
    /// meanwhile) or whose terminal marker could not be written, with the
    /// error; every other run was recovered.
    pub skipped: Vec<(RunId, Error)>,
    /// Runs left alone because another attempt holds their lease (a live
    /// worker is running them, or a crashed one's lease has not expired):
    /// the lease, who holds it, and when it expires
    /// ([`Lease::until_ms`]), after which a recovery takes the run over.
    pub busy: Vec<(RunId, Lease)>,
}

impl Runtime {
    /// Resumes every run of `workflow` that is not terminal (one attempt
    /// each, at most [`RuntimeBuilder::recovery_concurrency`] at once), and
    /// writes the terminal marker of every terminal run that has none, so
    /// that a marker write lost in a crash cannot leave a run unsweepable.
    ///
    /// Runs are recovered in isolation: each is loaded on its own, so a
    /// damaged or half-deleted run is reported in [`Recovery::skipped`] and
    /// the others are still resumed; a workflow that panics ends only its
    /// own attempt, reported as [`Error::Aborted`] in [`Recovery::resumed`].
    /// Its run stays open (`Running`), so a run that panics at every attempt
    /// is resumed, and panics again, at every recovery, its `attempts`
    /// growing each time, until its code is fixed or it is cancelled.
    ///
    /// Listing runs costs what [`RuntimeStore::list_run_ids`] costs for each
    /// status, plus one listing of the terminal markers, plus a load per
    /// open run and per terminal run without a marker: the retained
    /// terminal runs are listed, not read. Call it at start-up, not in a
    /// loop.
    ///
    /// # Errors
    ///
    /// A failed listing; each run's own outcome is in the [`Recovery`].
    pub async fn recover<I, O, E, F, Fut>(&self, workflow: &Workflow<F>) -> Result<Recovery<O, E>>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        self.check_conditional_create().await?;
        let store = &self.shared.store;
        let mut skipped = Vec::new();
        let mut remarked = 0;
        // A run id with a marker of any incarnation counts as marked: only
        // an unfinished sweep of an earlier run of the id leaves one, and
        // once the sweep ends, the next recovery marks the later run.
        let marked: HashSet<RunId> = (self.shared.memo.markers().list().await?)
            .into_iter()
            .map(|marker| marker.run_id)
            .collect();
        for status in [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            for run_id in store.list_run_ids(status).await? {
                if marked.contains(&run_id) {
                    continue;
                }
                match self.remark(&run_id).await {
                    Ok(true) => remarked += 1,
                    Ok(false) => {}
                    Err(e) => skipped.push((run_id, e)),
                }
            }
        }
        let mut open = Vec::new();
        let mut busy = Vec::new();
        let now = self.shared.clock.now_ms();
        for status in [RunStatus::Pending, RunStatus::Running] {
            for run_id in store.list_run_ids(status).await? {
                match store.load_run(&run_id).await {
                    Ok(Some(record))
                        if record.lease.as_ref().is_some_and(|l| l.is_live_at(now)) =>
                    {
                        if record.workflow == workflow.name {
                            busy.extend(record.lease.map(|lease| (run_id, lease)));
                        }
                    }
                    Ok(Some(record))
                        if !record.status.is_terminal() && record.workflow == workflow.name =>
                    {
                        open.push(record);
                    }
                    // Deleted or finished meanwhile, or another workflow's.
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(%run_id, error = %e, "run not recovered");
                        skipped.push((run_id, e));
                    }
                }
            }
        }
        // A run that moved from Pending to Running between the listings.
        open.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        open.dedup_by(|a, b| a.run_id == b.run_id);
        let mut resumed: Vec<_> = futures::stream::iter(open)
            .map(|record| self.recover_run(record, workflow))
            .buffer_unordered(self.shared.recovery_concurrency)
            .collect()
            .await;
        resumed.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Recovery {
            resumed,
            remarked,
            skipped,
            busy,
        })
    }

    /// Writes the terminal marker of `run_id` again if the run is terminal.
    async fn remark(&self, run_id: &RunId) -> Result<bool> {
        let Some(record) = self.shared.store.load_run(run_id).await? else {
            return Ok(false);
        };
        let Some(terminal_at_ms) = record.terminal_at_ms else {
            return Ok(false);
        };
        let marker = TerminalMarker {
            run_id: record.run_id,
            terminal_at_ms,
            incarnation: record.incarnation,
        };
        self.shared.memo.markers().write(&marker).await?;
        Ok(true)
    }

    /// One attempt of a run found by [`Runtime::recover`]; a panic ends the
    /// attempt, not the recovery.
    async fn recover_run<I, O, E, F, Fut>(
        &self,
        record: RunRecord,
        workflow: &Workflow<F>,
    ) -> (RunId, Result<O, E>)
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        E: From<Error> + Display,
        F: Fn(Context, I) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        let run_id = record.run_id.clone();
        let span = tracing::info_span!("memo.recover", %run_id, workflow = %workflow.name);
        let outcome = self.drive(record, workflow).instrument(span).await;
        (run_id, outcome)
    }
}
