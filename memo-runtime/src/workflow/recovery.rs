//! [`Runtime::recover`]: at start-up, one attempt of every open run of a
//! workflow and a terminal marker for every ended run that lacks one.

use futures::{StreamExt, TryStreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use super::{Runtime, Workflow, WorkflowFn};
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::runtime_store::{Lease, RunRecord, RunStatus};

/// How many run ids a recovery's listing of the open runs reads per page.
const RECOVERY_PAGE: usize = 1_000;

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
    /// error, and open runs of the workflow left open because they started
    /// on a [version](super::Workflow::with_version) the recovery does not
    /// drive, with an [`Error::Conflict`] naming it; every other run was
    /// recovered.
    pub skipped: Vec<(RunId, Error)>,
    /// Runs left alone because another attempt holds their lease (a live
    /// worker is running them, or a crashed one's lease has not expired):
    /// the lease, who holds it, and when it expires
    /// ([`Lease::until_ms`]), after which a recovery takes the run over.
    pub busy: Vec<(RunId, Lease)>,
}

impl Runtime {
    /// Resumes every run of `workflow` that is not terminal and started on
    /// its version (one attempt each, at most
    /// [`RuntimeBuilder::recovery_concurrency`] at once; runs of its other
    /// versions are left open and listed in [`Recovery::skipped`]: recover
    /// several versions at once with
    /// [`Worker::recover`](super::Worker::recover)), and
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
    /// Ended runs are found without listing them or their markers: an
    /// attempt deletes its entry of the due-run index only after it wrote
    /// the terminal marker of the run it ended (a crash or a failed write
    /// keeps the entry), so a recovery reads the index (a listing request
    /// per 1,000 entries: runs that wait, and what crashed attempts left)
    /// and loads each entry's run, writing the marker of an ended one.
    /// Open runs are listed a page of 1,000 ids at a time
    /// ([`RuntimeStore::list_run_ids_page`], pending then running) and
    /// each is loaded. Call it at start-up, not in a loop.
    ///
    /// # Memory
    ///
    /// Bounded by what it resumes, never by what is retained: a page of a
    /// listing (1,000 ids, or the store's page of the index), at most
    /// [`RuntimeBuilder::recovery_concurrency`] runs loading at once, the
    /// records of the open runs it resumes (with their inputs) and the
    /// report (one line per run resumed, busy, skipped). Millions of ended
    /// runs and their markers cost it nothing: neither is listed.
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
        let plan = self
            .plan_recovery(|record| {
                if record.workflow != workflow.name {
                    Pick::Other
                } else if workflow.drives_version(record.workflow_version.as_deref()) {
                    Pick::Drive
                } else {
                    Pick::Unregistered(super::other_version(record, workflow.version()))
                }
            })
            .await?;
        let mut plan = plan;
        let runs = std::mem::take(&mut plan.open);
        let resumed = self
            .resume_each(runs, |record| self.recover_run(record, workflow))
            .await;
        Ok(plan.into_recovery(resumed))
    }

    /// Writes the missing terminal markers, then lists the open runs and
    /// decides, with `pick`, which to resume: what every recovery does
    /// before it drives the runs.
    pub(super) async fn plan_recovery(&self, pick: impl Fn(&RunRecord) -> Pick) -> Result<Plan> {
        let store = &self.shared.store;
        let (remarked, mut skipped) = self.remark_ended().await?;
        let mut open = Vec::new();
        let mut busy = Vec::new();
        let now = self.shared.clock.now_ms();
        for status in [RunStatus::Pending, RunStatus::Running] {
            let mut after: Option<RunId> = None;
            loop {
                let page = store
                    .list_run_ids_page(status, after.as_ref(), RECOVERY_PAGE)
                    .await?;
                for run_id in page.ids {
                    match store.load_run(&run_id).await {
                        Ok(Some(record)) => {
                            let picked = pick(&record);
                            match decide(record, picked, now) {
                                OpenRun::Resume(record) => open.push(record),
                                OpenRun::Busy(lease) => busy.push((run_id, lease)),
                                OpenRun::Unregistered(why) => {
                                    tracing::warn!(%run_id, reason = %why, "run not recovered");
                                    skipped.push((run_id, why));
                                }
                                OpenRun::Leave => {}
                            }
                        }
                        // Deleted meanwhile.
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(%run_id, error = %e, "run not recovered");
                            skipped.push((run_id, e));
                        }
                    }
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        // A run that moved from Pending to Running between the listings.
        open.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        open.dedup_by(|a, b| a.run_id == b.run_id);
        skipped.sort_by(|a, b| a.0.cmp(&b.0));
        skipped.dedup_by(|a, b| a.0 == b.0);
        Ok(Plan {
            open,
            remarked,
            skipped,
            busy,
        })
    }

    /// Writes the terminal marker of every ended run that lacks one, from
    /// the due-run index rather than from every marker and every ended
    /// run: an attempt deletes its entry only once it wrote the marker of
    /// the run it ended, so an ended run without its marker has an entry
    /// left (see `due_index::mark_ended`). Reads the index as a stream,
    /// loading at most [`RuntimeBuilder::recovery_concurrency`] runs at
    /// once. Returns how many markers it wrote, and the runs it could not
    /// read or mark.
    async fn remark_ended(&self) -> Result<(usize, Vec<(RunId, Error)>)> {
        let shared = &self.shared;
        let checked: Vec<(RunId, Result<bool>)> = crate::due_index::every_entry(&shared.memo)
            .map_ok(|entry| async move {
                let marked = match shared.store.load_run(&entry.run_id).await {
                    Ok(Some(record)) => {
                        crate::due_index::mark_ended(&shared.memo, &entry, &record).await
                    }
                    // Gone: nothing to mark.
                    Ok(None) => Ok(false),
                    Err(e) => Err(e),
                };
                Ok::<_, Error>((entry.run_id, marked))
            })
            .try_buffer_unordered(shared.recovery_concurrency)
            // Only what is worth keeping: the marks written and the failures.
            .try_filter(|(_, marked)| futures::future::ready(!matches!(marked, Ok(false))))
            .try_collect()
            .await?;
        let mut remarked = 0;
        let mut skipped = Vec::new();
        for (run_id, marked) in checked {
            match marked {
                Ok(_) => remarked += 1,
                Err(e) => {
                    tracing::warn!(%run_id, error = %e, "terminal marker not written");
                    skipped.push((run_id, e));
                }
            }
        }
        Ok((remarked, skipped))
    }

    /// Drives `runs`, at most [`RuntimeBuilder::recovery_concurrency`] at
    /// once, in run-id order of the outcomes.
    pub(super) async fn resume_each<T, Fut>(
        &self,
        runs: Vec<RunRecord>,
        drive: impl Fn(RunRecord) -> Fut,
    ) -> Vec<(RunId, T)>
    where
        Fut: std::future::Future<Output = (RunId, T)>,
    {
        let mut resumed: Vec<_> = futures::stream::iter(runs)
            .map(drive)
            .buffer_unordered(self.shared.recovery_concurrency)
            .collect()
            .await;
        resumed.sort_by(|a, b| a.0.cmp(&b.0));
        resumed
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

/// Whose an open run is, to a recovery.
#[derive(Debug)]
pub(super) enum Pick {
    /// A workflow (and version) this recovery drives.
    Drive,
    /// A workflow this recovery drives, on a version it does not: left
    /// open, and reported with this reason.
    Unregistered(Error),
    /// Another workflow's.
    Other,
}

/// The runs a recovery found, before it drives them.
pub(super) struct Plan {
    pub(super) open: Vec<RunRecord>,
    remarked: usize,
    skipped: Vec<(RunId, Error)>,
    busy: Vec<(RunId, Lease)>,
}

impl Plan {
    /// The report of a recovery that drove the open runs to `resumed`.
    pub(super) fn into_recovery<O, E>(self, resumed: Vec<(RunId, Result<O, E>)>) -> Recovery<O, E> {
        Recovery {
            resumed,
            remarked: self.remarked,
            skipped: self.skipped,
            busy: self.busy,
        }
    }
}

/// What recovery does with a run it listed as open.
#[derive(Debug)]
enum OpenRun {
    /// Start an attempt of it.
    Resume(RunRecord),
    /// Leave it to the live attempt holding this lease.
    Busy(Lease),
    /// Leave it open, and report why: its version is not the recovery's.
    Unregistered(Error),
    /// Leave it: another workflow's, or it ended meanwhile.
    Leave,
}

/// What a recovery at `now_ms` does with `record`, which `picked` says is
/// its to drive or not.
fn decide(record: RunRecord, picked: Pick, now_ms: u64) -> OpenRun {
    if let Pick::Other = picked {
        return OpenRun::Leave;
    }
    match record
        .lease
        .as_ref()
        .filter(|lease| lease.is_live_at(now_ms))
    {
        Some(lease) => OpenRun::Busy(lease.clone()),
        None if record.status.is_terminal() => OpenRun::Leave,
        None => match picked {
            Pick::Unregistered(why) => OpenRun::Unregistered(why),
            _ => OpenRun::Resume(record),
        },
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
            workflow_version: None,
        }
    }

    fn order(record: &RunRecord) -> Pick {
        if record.workflow != "order" {
            Pick::Other
        } else if record.workflow_version.is_none() {
            Pick::Drive
        } else {
            Pick::Unregistered(Error::VersionNotRegistered {
                run_id: "r".into(),
                workflow: "order".into(),
                version: record.workflow_version.clone(),
                registered: vec![None],
            })
        }
    }

    fn decided(record: RunRecord, now_ms: u64) -> OpenRun {
        let picked = order(&record);
        decide(record, picked, now_ms)
    }

    #[test]
    fn an_open_run_of_the_workflow_whose_lease_expired_is_resumed() {
        for lease in [None, Some(100)] {
            let open = record("order", RunStatus::Running, lease);
            assert!(matches!(decided(open.clone(), 100), OpenRun::Resume(r) if r == open));
        }
        let pending = record("order", RunStatus::Pending, None);
        assert!(matches!(decided(pending.clone(), 5), OpenRun::Resume(r) if r == pending));
    }

    #[test]
    fn a_run_under_a_live_lease_is_left_to_its_attempt() {
        let held = record("order", RunStatus::Running, Some(101));
        let lease = held.lease.clone().unwrap();
        assert!(matches!(decided(held, 100), OpenRun::Busy(l) if l == lease));
        let endless = record("order", RunStatus::Running, Some(u64::MAX));
        assert!(matches!(decided(endless, u64::MAX), OpenRun::Busy(_)));
    }

    #[test]
    fn another_workflows_run_and_an_ended_one_are_left_alone() {
        let other = record("refund", RunStatus::Running, None);
        assert!(matches!(decided(other, 0), OpenRun::Leave));
        let other_held = record("refund", RunStatus::Running, Some(50));
        assert!(matches!(decided(other_held, 0), OpenRun::Leave));
        let ended = record("order", RunStatus::Completed, None);
        assert!(matches!(decided(ended, 0), OpenRun::Leave));
    }

    #[test]
    fn an_open_run_of_an_unregistered_version_is_reported_unless_an_attempt_holds_it() {
        let mut open = record("order", RunStatus::Running, None);
        open.workflow_version = Some("1".into());
        assert!(matches!(decided(open.clone(), 0), OpenRun::Unregistered(_)));
        open.lease = Some(Lease {
            attempt: 1,
            owner: "w".into(),
            until_ms: 50,
        });
        assert!(matches!(decided(open, 0), OpenRun::Busy(_)));
    }
}
