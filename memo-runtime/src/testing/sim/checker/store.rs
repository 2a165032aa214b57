//! What the store saw and acknowledged: the run incarnations written, the
//! objects deleted, and the changes acknowledged to callers, checked
//! against what the history did.

use bytes::Bytes;
use futures::FutureExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::clock::Clock;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{Commit, RunRecord};
use crate::testing::sim::compat::{self, fresh_inputs, fresh_receipts, fresh_run};

use super::{Checker, Deleted, TaskKind, current_task};

impl Checker {
    /// A worker's store is about to write `path`: if it is the tombstone of
    /// an incarnation a fresh instance finds deleted already, it is a
    /// stale deletion's (one that read the run before another deletion
    /// removed it). Such a tombstone is left if its writer dies before the
    /// recheck marker it writes after it, and every other marker of the run
    /// was rechecked before it landed: a late write by a writer that dies,
    /// the limit the recheck states. The last sweep's check leaves those
    /// alone, and only those.
    pub(in crate::testing::sim) fn burying(&self, path: &Path) {
        if path
            .parts()
            .nth(1)
            .is_none_or(|f| f.as_ref() != crate::layout::TOMBSTONES)
        {
            return;
        }
        let Some((run_id, incarnation)) = crate::layout::parse_status_hint(path) else {
            return;
        };
        let deleted = match fresh_run(self.objects(), &run_id) {
            Some(Ok(None)) => true,
            Some(Ok(Some(run))) => run.incarnation != incarnation,
            _ => false,
        };
        if deleted {
            self.lock().late_tombstones.insert(path.to_string());
        }
    }

    /// Whether `path` is a tombstone [`burying`](Self::burying) found late.
    pub(in crate::testing::sim) fn is_late_tombstone(&self, path: &Path) -> bool {
        self.lock().late_tombstones.contains(path.as_ref())
    }

    /// A worker's write of `path` landed: if in an incarnation whose
    /// recheck already ran, the current task is the one that must take it
    /// back (its check after the write), or leave it for good by dying
    /// first ([`task_died`](Self::task_died)).
    pub(in crate::testing::sim) fn landed(&self, path: &Path) {
        if let Some((run_id, incarnation)) = recheck_marker(path) {
            self.lock().recheck_markers.insert((run_id, incarnation));
            return;
        }
        let Some((run_id, Some(incarnation))) = compat::run_of(path) else {
            return;
        };
        let Some(task) = current_task() else {
            return;
        };
        let mut state = self.lock();
        if state.rechecked.contains(&(run_id, incarnation)) {
            state
                .after_recheck
                .entry(task)
                .or_default()
                .push(path.to_string());
        }
    }

    /// Task `id` died in a crash: what it wrote into incarnations whose
    /// recheck had already run stays, unless another writer's check takes
    /// it back. That is the limit the recheck states (a write that lands
    /// after it, from a writer that then dies before its take-back), which
    /// the last sweep's check leaves alone, and only that.
    pub(in crate::testing::sim) fn task_died(&self, id: u64) {
        let mut state = self.lock();
        if let Some(paths) = state.after_recheck.remove(&id) {
            state.left_after_recheck.extend(paths);
        }
    }

    /// A worker's store lists `prefix`: a sweep that lists a folder of an
    /// incarnation whose recheck marker stands is that incarnation's
    /// recheck (the pass that deleted the incarnation lists its folders
    /// before it leaves the marker). The recheck lists each folder once,
    /// so a write that lands there from now on is past it: the limit the
    /// recheck states, as a write after its marker's deletion is (seed
    /// 2544 of session 30's deployment survey: a stale creator's start
    /// landed between the recheck's listing and the end of its clears, and
    /// the creator died before its take-back).
    pub(in crate::testing::sim) fn listing(&self, prefix: &Path) {
        let Some((run_id, Some(incarnation))) = compat::run_of(prefix) else {
            return;
        };
        let sweeping = current_task().and_then(|task| self.lock().tasks.get(&task).map(|t| t.kind))
            == Some(TaskKind::Sweep);
        let mut state = self.lock();
        let key = (run_id, incarnation);
        if sweeping && state.recheck_markers.contains(&key) {
            state.rechecked.insert(key);
        }
    }

    /// Whether `path` is one a task wrote after its incarnation's recheck
    /// and then died ([`task_died`](Self::task_died)).
    pub(in crate::testing::sim) fn is_left_after_recheck(&self, path: &Path) -> bool {
        self.lock().left_after_recheck.contains(path.as_ref())
    }

    /// Incarnation `incarnation` of `run_id` is being deleted from the
    /// runtime store alone (`RuntimeStore::delete_run`), which leaves no
    /// recheck: nothing clears a write into it after the deletion again.
    pub(in crate::testing::sim) fn never_rechecked(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) {
        self.lock()
            .rechecked
            .insert((run_id.clone(), incarnation.as_u64()));
    }

    /// A worker's store deletes `path`: if it is an incarnation's tombstone
    /// or its recheck marker, the recheck of that incarnation has run (each
    /// is deleted after the recheck's clears), and nothing clears a later
    /// write into it again.
    fn remember_rechecked(&self, path: &Path) {
        if let Some(key) = recheck_marker(path) {
            self.lock().recheck_markers.remove(&key);
        }
        let folder = path.parts().nth(1);
        let named = match folder.as_ref().map(AsRef::as_ref) {
            Some(crate::layout::TOMBSTONES) => crate::layout::parse_status_hint(path),
            Some(crate::layout::RECHECKS) => crate::layout::parse_marker(path)
                .map(|(_, run_id, incarnation, _)| (run_id, incarnation)),
            _ => None,
        };
        if let Some((run_id, incarnation)) = named {
            self.lock().rechecked.insert((run_id, incarnation.as_u64()));
        }
    }

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
        self.remember_unsynced(path);
        self.remember_deleted(path);
        self.remember_rechecked(path);
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

    /// From now on, remembers each status hint and due-run entry a worker
    /// deletes, as it was, for [`take_unsynced`](Self::take_unsynced).
    pub(in crate::testing::sim) fn remember_unsynced_deletes(&self) {
        self.lock().unsynced.get_or_insert_with(Vec::new);
    }

    /// What a power loss now brings back: the status hints and due-run
    /// entries deleted within the last `window_ms` (of those deleted since
    /// the last call), which a local folder deletes without a sync
    /// (`local::is_unsynced_delete`).
    pub(in crate::testing::sim) fn take_unsynced(&self, window_ms: u64) -> Vec<(Path, Bytes)> {
        let now = self.now_ms();
        let deleted = self
            .lock()
            .unsynced
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        deleted
            .into_iter()
            .filter(|(_, _, at)| now.saturating_sub(*at) <= window_ms)
            .map(|(path, bytes, _)| (path, bytes))
            .collect()
    }

    /// If power losses are on and `path` is a status hint or a due-run
    /// entry, keeps it as it stands before its delete, with the time.
    fn remember_unsynced(&self, path: &Path) {
        if self.lock().unsynced.is_none() || !crate::local::is_unsynced_delete(path) {
            return;
        }
        // The shared store answers within the poll that asks (in memory,
        // or a local folder run to its end off the runtime).
        let read = self
            .objects
            .get(path)
            .now_or_never()
            .and_then(Result::ok)
            .and_then(|got| got.bytes().now_or_never())
            .and_then(Result::ok);
        let now = self.now_ms();
        if let Some(bytes) = read
            && let Some(unsynced) = self.lock().unsynced.as_mut()
        {
            unsynced.push((path.clone(), bytes, now));
        }
    }

    /// If `path` is the record of the incarnation a fresh instance reads as
    /// current (a deletion removes it first, and only of a terminal run),
    /// keeps that incarnation's last state: a change acknowledged to it
    /// before it ended (a commit, an input, its creation) may be reported
    /// only after the run is gone (its writer stopped between the change
    /// and the answer), and is then checked against that state.
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
        let Some(Ok(inputs)) = fresh_inputs(&self.objects, &run_id) else {
            return;
        };
        self.lock().deleted.insert(
            (run_id, incarnation),
            Deleted {
                run,
                receipts,
                inputs,
            },
        );
    }

    /// Whether a deletion took incarnation `incarnation` of `run_id`, which
    /// had ended by then.
    fn was_deleted(&self, run_id: &RunId, incarnation: Incarnation) -> bool {
        (self.lock().deleted).contains_key(&(run_id.clone(), incarnation.as_u64()))
    }

    /// Whether a deletion took an incarnation of `run_id` that held input
    /// `input_id` (input ids are unique in a history: each send draws one).
    fn deleted_with_input(&self, run_id: &RunId, input_id: &str) -> bool {
        self.lock().deleted.iter().any(|((id, _), deleted)| {
            id == run_id && deleted.inputs.iter().any(|i| i.input_id == input_id)
        })
    }

    /// A worker's store acknowledged creating `run_id`, answering `record`:
    /// a fresh instance must see the run. Unless it is gone legitimately:
    /// the answer was a terminal run (a create of an id whose run had ended
    /// returns that run, which a deletion running at the same time may have
    /// removed since), or the incarnation the answer names ran to its end
    /// and was deleted before the answer reached its caller (the creator
    /// stopped between its last write and its answer, seeds 2485 and 4688).
    pub(in crate::testing::sim) fn acknowledged_create(&self, run_id: &RunId, record: &RunRecord) {
        let Some(Ok(None)) = fresh_run(&self.objects, run_id) else {
            return;
        };
        if record.status.is_terminal() || self.was_deleted(run_id, record.incarnation) {
            return;
        }
        self.violation(
            "every acknowledged commit is visible to a fresh instance",
            format!(
                "run {run_id}: its creation (incarnation {}) was acknowledged, \
                 a fresh instance sees no run",
                record.incarnation
            ),
        );
    }

    /// A worker's store acknowledged appending input `input_id` to `run_id`:
    /// a fresh instance must see it, unless the incarnation it went to ran
    /// to its end and was deleted before the answer reached its caller
    /// (seed 1729), which is then checked against that incarnation's last
    /// inputs.
    pub(in crate::testing::sim) fn acknowledged_input(&self, run_id: &RunId, input_id: &str) {
        let Some(Ok(inputs)) = fresh_inputs(&self.objects, run_id) else {
            return;
        };
        if inputs.iter().any(|i| i.input_id == input_id)
            || self.deleted_with_input(run_id, input_id)
        {
            return;
        }
        self.violation(
            "every acknowledged commit is visible to a fresh instance",
            format!("run {run_id}: acknowledged input {input_id:?} is not visible"),
        );
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
            Some(Deleted { run, receipts, .. }) => (Some(run), Some(Ok(receipts))),
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

/// The incarnation a recheck marker at `path` names, if it is one.
fn recheck_marker(path: &Path) -> Option<(RunId, u64)> {
    let folder = path.parts().nth(1)?;
    if folder.as_ref() != crate::layout::RECHECKS {
        return None;
    }
    crate::layout::parse_marker(path)
        .map(|(_, run_id, incarnation, _)| (run_id, incarnation.as_u64()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use futures::FutureExt;
    use object_store::ObjectStoreExt;

    use crate::clock::ManualClock;
    use crate::layout::Layout;
    use crate::run_id::RunId;
    use crate::runtime_store::{
        Commit, NewInput, NewRun, ObjectStoreRuntimeStore, RunRecord, RuntimeStore, StatusChange,
    };
    use crate::testing::sim::checker::Checker;
    use crate::testing::sim::compat::PREFIX;
    use crate::testing::sim::stores::Shared;

    /// Runs `future`, which completes at once over `InMemory`.
    fn now<T>(future: impl Future<Output = T>) -> T {
        future.now_or_never().expect("completes at once")
    }

    fn world() -> (Shared, Checker, ObjectStoreRuntimeStore) {
        let objects: Shared = Arc::new(object_store::memory::InMemory::new());
        let clock = Arc::new(ManualClock::new(0));
        let checker = Checker::new(Arc::clone(&objects), clock, 0, 1, 1, false);
        let store = ObjectStoreRuntimeStore::new(Arc::clone(&objects), PREFIX);
        (objects, checker, store)
    }

    /// Seed 2544 of session 30's deployment survey (on a tree before its
    /// end): a stale creator's start landed in a swept incarnation after
    /// the recheck had listed its folders and before the recheck deleted
    /// its marker, and the creator died before its take-back. The recheck
    /// could not see it: past the recheck, as a write after the marker's
    /// deletion is, and left alone by the last sweep's check. The same
    /// write before the recheck's listing is one the recheck must clear;
    /// and a listing by another task than a sweep (an operator's read) is
    /// no recheck.
    #[test]
    fn a_write_that_lands_after_the_recheck_listed_the_incarnation_is_past_the_recheck() {
        use crate::layout::{MEMOS, RECHECKS};
        use crate::run_id::Incarnation;
        use crate::testing::sim::checker::{TaskKind, as_task};

        let (_, checker, _) = world();
        let layout = Layout::new(PREFIX);
        let run_id = RunId::new("order-2544").unwrap();
        let inc = Incarnation::from_u64(0x3cc5);
        let start = layout.log_entry(&run_id, inc, 0);
        let memos = layout.incarnation_folder(MEMOS, &run_id, inc);
        let (sweep, reader, creator) = (1, 2, 3);
        checker.task_started(sweep, TaskKind::Sweep);
        checker.task_started(reader, TaskKind::Operator);
        checker.task_started(creator, TaskKind::Run);

        // Before the marker, a sweep's listing is the deleting pass's.
        as_task(sweep, || checker.listing(&memos));
        as_task(creator, || checker.landed(&start));
        checker.task_died(creator);
        assert!(!checker.is_left_after_recheck(&start));

        as_task(sweep, || {
            checker.landed(&layout.marker(RECHECKS, &run_id, inc, 1))
        });
        as_task(reader, || checker.listing(&memos));
        let creator = 4;
        checker.task_started(creator, TaskKind::Run);
        as_task(creator, || checker.landed(&start));
        checker.task_died(creator);
        assert!(
            !checker.is_left_after_recheck(&start),
            "an operator's read is no recheck"
        );

        as_task(sweep, || checker.listing(&memos));
        let creator = 5;
        checker.task_started(creator, TaskKind::Run);
        as_task(creator, || checker.landed(&start));
        checker.task_died(creator);
        assert!(checker.is_left_after_recheck(&start));
    }

    fn order(run_id: &RunId) -> NewRun {
        NewRun {
            run_id: run_id.clone(),
            workflow: "w".into(),
            input: Bytes::new(),
            created_at_ms: 0,
            workflow_version: None,
        }
    }

    fn signal(id: &str) -> NewInput {
        NewInput {
            input_id: id.into(),
            name: "approve".into(),
            payload: Bytes::new(),
            accepted_at_ms: 1,
        }
    }

    /// Runs `run_id` to its end, then deletes it as a sweep does, the
    /// checker seeing its record go first.
    fn end_and_delete(checker: &Checker, store: &ObjectStoreRuntimeStore, created: &RunRecord) {
        let run_id = &created.run_id;
        let start = Commit::status(StatusChange::start_attempt(1), 1);
        now(store.atomic_apply(run_id, start)).unwrap();
        let completed = StatusChange::Completed {
            output: Bytes::from_static(b"done"),
        };
        now(store.atomic_apply(run_id, Commit::status(completed, 2))).unwrap();
        let record = Layout::new(PREFIX).incarnation_record(run_id, created.incarnation);
        checker.deleting(&record);
        assert!(now(store.delete_run(run_id, created.incarnation)).unwrap());
    }

    /// Seeds 2485 and 4688 of the deployment world: a creator writes the
    /// run's pointer and record and stops before its answer; meanwhile other
    /// workers run the run to its end and a sweep deletes it. The creation
    /// was durable (the run ran from it); only its answer, `Pending`, comes
    /// after the deletion. A creation whose run is lost is still reported.
    #[test]
    fn a_creation_answered_after_its_run_ended_and_was_deleted_is_no_loss() {
        let (objects, checker, store) = world();
        let run_id = RunId::new("order-2485").unwrap();
        let created = now(store.create_run(order(&run_id))).unwrap();
        end_and_delete(&checker, &store, &created);

        checker.acknowledged_create(&run_id, &created);
        assert!(
            checker.violations().is_empty(),
            "{:?}",
            checker.violations()
        );

        // A run whose pointer and record vanish without a deletion is lost.
        let lost = now(store.create_run(order(&run_id))).unwrap();
        let layout = Layout::new(PREFIX);
        for path in [
            layout.run_pointer(&run_id),
            layout.incarnation_record(&run_id, lost.incarnation),
        ] {
            now(objects.delete(&path)).unwrap();
        }
        checker.acknowledged_create(&run_id, &lost);
        assert_eq!(checker.violations().len(), 1, "{:?}", checker.violations());
    }

    /// Seed 1729 of the deployment world: a signal's input lands in the
    /// run's log and its sender stops before its answer (writing a
    /// checkpoint); meanwhile the run ends and is deleted. The input is
    /// checked against the deleted run's last inputs: one that no
    /// incarnation of the run ever held is still reported.
    #[test]
    fn an_input_answered_after_its_run_ended_and_was_deleted_is_checked_against_the_deleted_run() {
        let (_objects, checker, store) = world();
        let run_id = RunId::new("order-1729").unwrap();
        let created = now(store.create_run(order(&run_id))).unwrap();
        now(store.append_input(&run_id, signal("sim-signal-6"))).unwrap();
        end_and_delete(&checker, &store, &created);

        checker.acknowledged_input(&run_id, "sim-signal-6");
        assert!(
            checker.violations().is_empty(),
            "{:?}",
            checker.violations()
        );

        checker.acknowledged_input(&run_id, "sim-signal-7");
        assert_eq!(checker.violations().len(), 1, "{:?}", checker.violations());
    }
}
