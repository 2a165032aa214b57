//! What the store saw and acknowledged: the run incarnations written, the
//! objects deleted, and the changes acknowledged to callers, checked
//! against what the history did.

use object_store::path::Path;

use crate::clock::Clock;
use crate::run_id::RunId;
use crate::runtime_store::{Commit, RunRecord};
use crate::testing::sim::compat::{self, fresh_inputs, fresh_receipts, fresh_run};

use super::{Checker, Deleted, TaskKind, current_task};

impl Checker {
    /// A worker's store is about to write `path`: if it is a record of a
    /// run incarnation, that incarnation exists from now on.
    pub(in crate::testing::sim) fn writing(&self, path: &Path) {
        let Some((run_id, Some(incarnation))) = compat::run_of(path) else {
            return;
        };
        let mut state = self.lock();
        state.record_writes += 1;
        let at = state.record_writes;
        state
            .incarnations
            .entry((run_id, incarnation))
            .or_insert(at);
    }

    /// How many record writes there have been: a mark to tell which
    /// incarnations were first written after it.
    pub(in crate::testing::sim) fn write_mark(&self) -> u64 {
        self.lock().record_writes
    }

    /// Whether incarnation `incarnation` of `run_id` is one a worker wrote,
    /// first after `mark` (any time, with `mark` `None`).
    pub(in crate::testing::sim) fn written_since(
        &self,
        run_id: &RunId,
        incarnation: u64,
        mark: Option<u64>,
    ) -> bool {
        self.lock()
            .incarnations
            .get(&(run_id.clone(), incarnation))
            .is_some_and(|&first| mark.is_none_or(|mark| first > mark))
    }

    /// A worker's store is about to delete `path`: if a retention sweep does
    /// it, the run it belongs to must be terminal and past its retention.
    pub(in crate::testing::sim) fn deleting(&self, path: &Path) {
        self.remember_deleted(path);
        let sweeping = current_task().and_then(|task| self.lock().tasks.get(&task).map(|t| t.kind))
            == Some(TaskKind::Sweep);
        let Some((run_id, incarnation)) = compat::run_of(path).filter(|_| sweeping) else {
            return;
        };
        let Some(Ok(Some(run))) = fresh_run(&self.objects, &run_id) else {
            return;
        };
        // Another incarnation's objects are an earlier, deleted run's.
        if incarnation.is_some_and(|i| i != run.incarnation.as_u64()) {
            return;
        }
        // The run pointer (`runs/<run>/run`) is one object for every
        // incarnation, and object stores delete unconditionally: a sweep that
        // checked an earlier, expired run and stalled may delete the pointer
        // of the run created since. The runtime store restores it from the
        // new run's record at the next read (see its `pointer` module), so
        // what counts is that the run stays visible to a fresh instance,
        // which the acknowledged-commit checks read.
        if incarnation.is_none() && path.as_ref().ends_with("/run") {
            return;
        }
        let now_ms = self.clock.now_ms();
        match run.terminal_at_ms {
            None => self.violation(
                "the sweeper never deletes anything of an open run",
                format!("a sweep deleted {path} while run {run_id} is {}", run.status),
            ),
            Some(at_ms) if at_ms.saturating_add(self.retention_ms) > now_ms => self.violation(
                "the sweeper never deletes anything of a run inside its retention",
                format!(
                    "a sweep at {now_ms} ms deleted {path}; run {run_id} ended at {at_ms} ms, retained for {} ms",
                    self.retention_ms
                ),
            ),
            Some(_) => {}
        }
    }

    /// If `path` is the record of the incarnation a fresh instance reads as
    /// current (a deletion removes it first, and only of a terminal run),
    /// keeps that incarnation's last state: a commit acknowledged to it
    /// before it ended may be reported only after the run is gone (its
    /// writer stopped between the commit and the answer), and is then
    /// checked against that state.
    fn remember_deleted(&self, path: &Path) {
        let Some((run_id, Some(incarnation))) = compat::run_of(path) else {
            return;
        };
        if !compat::is_incarnation_record(path) {
            return;
        }
        let Some(Ok(Some(run))) = fresh_run(&self.objects, &run_id) else {
            return;
        };
        if run.incarnation.as_u64() != incarnation || !run.status.is_terminal() {
            return;
        }
        let Some(Ok(receipts)) = fresh_receipts(&self.objects, &run_id) else {
            return;
        };
        self.lock()
            .deleted
            .insert((run_id, incarnation), Deleted { run, receipts });
    }

    /// A worker's store acknowledged creating `run_id` (or appending input
    /// `input_id` to it): a fresh instance must see it. `terminal`: the
    /// store answered with a terminal run (a create of an id whose run had
    /// ended returns that run), which a deletion running at the same time
    /// may have removed since, legitimately: the create read the run before
    /// the deletion removed it.
    pub(in crate::testing::sim) fn acknowledged_run(
        &self,
        run_id: &RunId,
        input_id: Option<&str>,
        terminal: bool,
    ) {
        let visible = match input_id {
            None => fresh_run(&self.objects, run_id).map(|run| run.map(|r| r.is_some())),
            Some(id) => fresh_inputs(&self.objects, run_id)
                .map(|inputs| inputs.map(|all| all.iter().any(|i| i.input_id == id))),
        };
        if let Some(Ok(false)) = visible
            && !(terminal && input_id.is_none())
        {
            self.violation(
                "every acknowledged commit is visible to a fresh instance",
                format!("run {run_id}: acknowledged {input_id:?} is not visible"),
            );
        }
    }

    /// A worker's store acknowledged `commit` to `run_id`, answering
    /// `record`: a fresh instance must see the same run and receipt.
    pub(in crate::testing::sim) fn acknowledged_commit(
        &self,
        run_id: &RunId,
        commit: &Commit,
        record: &RunRecord,
    ) {
        let Some(Ok(fresh)) = fresh_run(&self.objects, run_id) else {
            return;
        };
        // The incarnation the commit went to: as a fresh instance reads it,
        // or, once a deletion took it, as it was when the deletion began.
        // Any commit acknowledged to it landed before it ended (a deletion
        // takes only terminal runs, and nothing commits after the terminal
        // change), so its last state holds every such commit.
        let deleted = match &fresh {
            Some(f) if f.incarnation == record.incarnation => None,
            _ => self
                .lock()
                .deleted
                .get(&(run_id.clone(), record.incarnation.as_u64()))
                .cloned(),
        };
        let (view, receipts) = match deleted {
            Some(Deleted { run, receipts }) => (Some(run), Some(Ok(receipts))),
            None => (
                fresh,
                commit
                    .receipt
                    .as_ref()
                    .and_then(|_| fresh_receipts(&self.objects, run_id)),
            ),
        };
        let mut lost = Vec::new();
        if let Some(receipt) = &commit.receipt
            && let Some(Ok(receipts)) = receipts
        {
            let stored = receipts.iter().find(|r| r.sequence == receipt.sequence);
            if stored.is_none_or(|r| r.step != receipt.step || r.output != receipt.output) {
                lost.push(format!(
                    "receipt {} ({}) is {stored:?} to a fresh instance",
                    receipt.sequence, receipt.step
                ));
            }
        }
        // Other workers may have moved the run on since (the writer can be
        // stopped after its last write): the fresh view must be this state
        // or a later one.
        let later = view.as_ref().is_some_and(|f| {
            f.attempts >= record.attempts
                && f.status >= record.status
                && (!record.status.is_terminal()
                    || (f.status == record.status && f.output == record.output))
        });
        // A terminal run may since have been deleted, legitimately.
        let gone = view.is_none() && record.status.is_terminal();
        if !later && !gone {
            lost.push(format!(
                "the writer was told {} (attempt {}), a fresh instance sees {:?}",
                record.status,
                record.attempts,
                view.map(|f| (f.status, f.attempts))
            ));
        }
        for detail in lost {
            self.violation(
                "every acknowledged commit is visible to a fresh instance",
                format!("run {run_id}: {detail}"),
            );
        }
    }
}
