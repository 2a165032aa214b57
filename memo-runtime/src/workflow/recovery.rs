//! [`Runtime::recover`]: at start-up, one attempt of every open run of a
//! workflow and a terminal marker for every ended run that lacks one.

use std::collections::HashSet;

use futures::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::{Runtime, Workflow, WorkflowFn};
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
    pub async fn recover<I, W>(
        &self,
        workflow: &Workflow<W>,
    ) -> Result<Recovery<W::Output, W::Error>>
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
    {
        self.check_conditional_create().await?;
        let store = &self.shared.store;
        let mut skipped = Vec::new();
        let mut remarked = 0;
        // A run id with a marker of any incarnation counts as marked: only
        // an unfinished sweep of an earlier run of the id leaves one, and
        // the pass that sweeps that marker marks the later run if it ended.
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
                    Ok(Some(record)) => match decide(record, &workflow.name, now) {
                        OpenRun::Resume(record) => open.push(record),
                        OpenRun::Busy(lease) => busy.push((run_id, lease)),
                        OpenRun::Leave => {}
                    },
                    // Deleted meanwhile.
                    Ok(None) => {}
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
    async fn recover_run<I, W>(
        &self,
        record: RunRecord,
        workflow: &Workflow<W>,
    ) -> (RunId, Result<W::Output, W::Error>)
    where
        I: Serialize + DeserializeOwned,
        W: WorkflowFn<I>,
    {
        let run_id = record.run_id.clone();
        let span = tracing::info_span!("memo.recover", %run_id, workflow = %workflow.name);
        let outcome = self.drive(record, workflow).instrument(span).await;
        (run_id, outcome)
    }
}

/// What recovery does with a run it listed as open.
#[derive(Debug, PartialEq)]
enum OpenRun {
    /// Start an attempt of it.
    Resume(RunRecord),
    /// Leave it to the live attempt holding this lease.
    Busy(Lease),
    /// Leave it: another workflow's, or it ended meanwhile.
    Leave,
}

/// What recovery of `workflow` at `now_ms` does with `record`.
fn decide(record: RunRecord, workflow: &str, now_ms: u64) -> OpenRun {
    if record.workflow != workflow {
        return OpenRun::Leave;
    }
    match record
        .lease
        .as_ref()
        .filter(|lease| lease.is_live_at(now_ms))
    {
        Some(lease) => OpenRun::Busy(lease.clone()),
        None if record.status.is_terminal() => OpenRun::Leave,
        None => OpenRun::Resume(record),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::run_id::Incarnation;

    fn record(workflow: &str, status: RunStatus, lease_until_ms: Option<u64>) -> RunRecord {
        RunRecord {
            run_id: RunId::new("r").unwrap(),
            incarnation: Incarnation::from_u64(1),
            workflow: workflow.into(),
            input: Bytes::new(),
            status,
            attempts: 1,
            created_at_ms: 0,
            updated_at_ms: 0,
            terminal_at_ms: None,
            output: None,
            error: None,
            lease: lease_until_ms.map(|until_ms| Lease {
                attempt: 1,
                owner: "w".into(),
                until_ms,
            }),
        }
    }

    #[test]
    fn an_open_run_of_the_workflow_whose_lease_expired_is_resumed() {
        for lease in [None, Some(100)] {
            let open = record("order", RunStatus::Running, lease);
            assert_eq!(decide(open.clone(), "order", 100), OpenRun::Resume(open));
        }
        let pending = record("order", RunStatus::Pending, None);
        assert_eq!(
            decide(pending.clone(), "order", 5),
            OpenRun::Resume(pending)
        );
    }

    #[test]
    fn a_run_under_a_live_lease_is_left_to_its_attempt() {
        let held = record("order", RunStatus::Running, Some(101));
        let lease = held.lease.clone().unwrap();
        assert_eq!(decide(held, "order", 100), OpenRun::Busy(lease));
        let endless = record("order", RunStatus::Running, Some(u64::MAX));
        assert!(matches!(
            decide(endless, "order", u64::MAX),
            OpenRun::Busy(_)
        ));
    }

    #[test]
    fn another_workflows_run_and_an_ended_one_are_left_alone() {
        let other = record("refund", RunStatus::Running, None);
        assert_eq!(decide(other, "order", 0), OpenRun::Leave);
        let other_held = record("refund", RunStatus::Running, Some(50));
        assert_eq!(decide(other_held, "order", 0), OpenRun::Leave);
        let ended = record("order", RunStatus::Completed, None);
        assert_eq!(decide(ended, "order", 0), OpenRun::Leave);
    }
}
