//! What a listing of the runs in a status must show: every run that was in
//! that status throughout the listing, once its creation was answered, and
//! no run in another status.

use futures::FutureExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::layout::Layout;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{RunStatus, RunSummary};
use crate::testing::sim::compat::{PREFIX, fresh_run};

use super::Checker;

/// The invariant [`Checker::acknowledged_creation`] checks.
pub(in crate::testing::sim) const ONE_RUN_AT_A_TIME: &str =
    "a run id has one acknowledged run at a time";

/// A run as the truth has it: its incarnation and status.
pub(in crate::testing::sim) type Truth = Option<(u64, RunStatus)>;

impl Checker {
    /// The run `run_id` as a fresh instance reads it now.
    pub(in crate::testing::sim) fn truth(&self, run_id: &RunId) -> Truth {
        match fresh_run(self.objects(), run_id) {
            Some(Ok(Some(run))) => Some((run.incarnation.as_u64(), run.status)),
            _ => None,
        }
    }

    /// A worker's store answered a `create_run` of `run_id` with
    /// `incarnation` (a new run, or the one that stood).
    ///
    /// Checks that no other incarnation of the id that a `create_run`
    /// answered for before still stands (its record, and no tombstone),
    /// unless a deletion took it: a run id has one acknowledged run at a
    /// time. Two would both run, the id's work done twice (session 43: a
    /// stale deletion's delete of the pointer landed between a first
    /// creator's run and a second's create, whose listing came before the
    /// first's; the second's check read only the pointer, its own).
    ///
    /// An answer of an incarnation that does not stand itself by then (its
    /// tombstone written: its deletion under way or done) is a stale answer
    /// of a deleted run, not a second one: the call read the run while it
    /// was the id's, before the deletion, and the run it answers for never
    /// runs again (a deleted run's attempt never starts on the next run:
    /// `racing_deletions::an_attempt_that_read_a_deleted_run_never_starts_on_the_run_created_after_it`).
    /// Seed 2952 of session 45's deployment survey: a redelivery read the
    /// pointer of a failed run, stalled while a sweeper deleted that run and
    /// the id's next run was answered for, and answered with the failed run.
    pub(in crate::testing::sim) fn acknowledged_creation(&self, run_id: &RunId, incarnation: u64) {
        let stale = !self.stands(run_id, Incarnation::from_u64(incarnation));
        let earlier: Vec<u64> = {
            let state = self.lock();
            (state.created.keys())
                .filter(|(id, other)| id == run_id && *other != incarnation)
                .filter(|key| !state.deleted.contains_key(key))
                .map(|(_, other)| *other)
                .collect()
        };
        for other in earlier {
            if !stale && self.stands(run_id, Incarnation::from_u64(other)) {
                self.violation(
                    ONE_RUN_AT_A_TIME,
                    format!(
                        "create_run of {run_id} answered with incarnation {} while \
                         incarnation {}, answered for before and never deleted, stands",
                        Incarnation::from_u64(incarnation),
                        Incarnation::from_u64(other)
                    ),
                );
            }
        }
        let mut state = self.lock();
        state.creations += 1;
        let at = state.creations;
        state
            .created
            .entry((run_id.clone(), incarnation))
            .or_insert(at);
    }

    /// Whether incarnation `incarnation` of `run_id` has its record in the
    /// shared store, and no tombstone.
    fn stands(&self, run_id: &RunId, incarnation: Incarnation) -> bool {
        let layout = Layout::new(PREFIX);
        let exists = |path: Path| {
            let head = self.objects().head(&path).now_or_never();
            matches!(head, Some(Ok(_)))
        };
        exists(layout.incarnation_record(run_id, incarnation))
            && !exists(layout.incarnation_tombstone(run_id, incarnation))
    }

    /// How many creations were answered so far: a mark to tell which
    /// incarnations were answered for before it.
    pub(in crate::testing::sim) fn creation_mark(&self) -> u64 {
        self.lock().creations
    }

    /// Checks a listing of the runs in `status` (`listed`) against the runs
    /// of `run_ids` as they were before it (`before`, with the
    /// [`creation_mark`](Self::creation_mark) `mark`) and as they are now:
    /// a run in `status` throughout (the same incarnation) is listed, once a
    /// `create_run` answered for it before the listing began.
    ///
    /// A creation under way when the listing began may be left out: an
    /// index is written apart from the run, and the runtime store writes
    /// the run's `Pending` hint, then its pointer, then checks the hint
    /// again (a tidying listing may have deleted it in between, finding no
    /// run). The run exists from its pointer on; its hint may be back only
    /// at the creator's check, or, if the creator stopped before it, at the
    /// next `create_run` of the id. Only an answered creation promises the
    /// run is listed, as only an answered one promises it exists at all.
    pub(in crate::testing::sim) fn check_listing(
        &self,
        status: RunStatus,
        run_ids: &[RunId],
        before: Vec<Truth>,
        mark: u64,
        listed: &[RunSummary],
    ) {
        // A stale hint (one a power loss brought back, one a failed delete
        // left) is read and left out, never shown as the run's status.
        for summary in listed.iter().filter(|s| s.status != status) {
            self.violation(
                "a listing of a status shows only runs in that status",
                format!(
                    "run {} listed among {status} runs as {}",
                    summary.run_id, summary.status
                ),
            );
        }
        for (run_id, before) in run_ids.iter().zip(before) {
            let after = self.truth(run_id);
            let Some((incarnation, was)) = before.filter(|_| before == after) else {
                continue;
            };
            let answered = self
                .lock()
                .created
                .get(&(run_id.clone(), incarnation))
                .is_some_and(|&at| at <= mark);
            let shown = listed
                .iter()
                .any(|s| s.run_id == *run_id && s.incarnation.as_u64() == incarnation);
            if was == status && answered && !shown {
                self.violation(
                    "an operator never lists a run that exists as absent",
                    format!(
                        "run {run_id} was {status} throughout a listing of {status} runs that left it out"
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::TryStreamExt;
    use object_store::path::Path;
    use object_store::{ObjectStore, ObjectStoreExt};

    use crate::layout::Layout;
    use crate::run_id::Incarnation;
    use crate::runtime_store::{RunStatus, RuntimeStore};
    use crate::testing::sim::checker::tests::{created_run, now};
    use crate::testing::sim::compat::PREFIX;

    /// Seeds 3070 and 9652 of the deployment world: a creator wrote its
    /// `Pending` hint, a tidying listing deleted it (no pointer yet), the
    /// creator wrote its pointer, and an operator's listing of `Pending`
    /// runs ran before the creator's check of its hint wrote it back. The
    /// run existed throughout that listing, but no `create_run` had
    /// answered for it: the listing may leave it out. Once one has, the run
    /// must be listed (seed 343's defect, a creator that never checked its
    /// hint, still breaks this).
    #[test]
    fn a_listing_leaves_out_a_run_only_while_no_creation_of_it_was_answered() {
        let (objects, checker, store, run_id, created) = created_run("order-3070");
        // The run as a creation under way leaves it once a tidying listing
        // deleted its hint: pointer and record, no hint.
        let hints = Path::from(format!("{PREFIX}/runs-by-status"));
        let hints: Vec<_> = now(objects.list(Some(&hints)).try_collect::<Vec<_>>()).unwrap();
        assert_eq!(hints.len(), 1, "{hints:?}");
        now(objects.delete(&hints[0].location)).unwrap();

        let run_ids = [run_id.clone()];
        let listing = |answered: Option<u64>| {
            let mark = checker.creation_mark();
            let before = vec![checker.truth(&run_id)];
            let listed = now(store.list_runs(RunStatus::Pending)).unwrap();
            assert!(listed.is_empty());
            // Answered while the listing ran: not before it.
            if let Some(incarnation) = answered {
                checker.acknowledged_creation(&run_id, incarnation);
            }
            checker.check_listing(RunStatus::Pending, &run_ids, before, mark, &listed);
        };
        let incarnation = created.incarnation.as_u64();
        listing(None);
        listing(Some(incarnation));
        assert!(
            checker.violations().is_empty(),
            "{:?}",
            checker.violations()
        );

        // Answered before the listing began: the run must be listed.
        listing(None);
        let violations = checker.violations();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(
            violations[0].invariant,
            "an operator never lists a run that exists as absent"
        );
    }

    /// A second incarnation of an id answered for while the first, answered
    /// for before, stands (record, no tombstone) breaks the invariant; once
    /// the first is buried (its deletion under way) or its record is gone
    /// (a creator's give-up), it does not; nor does a stale answer of an
    /// incarnation buried by then.
    #[test]
    fn a_second_run_of_an_id_answered_for_while_the_first_stands_is_a_violation() {
        let (objects, checker, _, run_id, created) = created_run("order-703");
        let first = created.incarnation;
        checker.acknowledged_creation(&run_id, first.as_u64());
        // The same run answered for again: no violation.
        checker.acknowledged_creation(&run_id, first.as_u64());
        assert!(
            checker.violations().is_empty(),
            "{:?}",
            checker.violations()
        );

        // A second one, standing too (its record, no tombstone).
        let layout = Layout::new(PREFIX);
        let second = Incarnation::from_u64(first.as_u64() + 1);
        let record = layout.incarnation_record(&run_id, second);
        now(objects.put(&record, Bytes::new().into())).unwrap();
        checker.acknowledged_creation(&run_id, second.as_u64());
        let violations = checker.violations();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].invariant, super::ONE_RUN_AT_A_TIME);

        // A stale answer of a run buried by then (a call that read it
        // before its deletion) is no second run.
        let tombstone = layout.incarnation_tombstone(&run_id, second);
        now(objects.put(&tombstone, Bytes::new().into())).unwrap();
        checker.acknowledged_creation(&run_id, second.as_u64());
        assert_eq!(checker.violations().len(), 1);
        now(objects.delete(&tombstone)).unwrap();
        now(objects.delete(&record)).unwrap();

        // The first buried: a deletion of it is under way.
        let tombstone = layout.incarnation_tombstone(&run_id, first);
        now(objects.put(&tombstone, Bytes::new().into())).unwrap();
        let third = Incarnation::from_u64(first.as_u64() + 2);
        let record = layout.incarnation_record(&run_id, third);
        now(objects.put(&record, Bytes::new().into())).unwrap();
        checker.acknowledged_creation(&run_id, third.as_u64());
        assert_eq!(checker.violations().len(), 1);
        now(objects.delete(&record)).unwrap();
        // Its record gone.
        now(objects.delete(&tombstone)).unwrap();
        now(objects.delete(&layout.incarnation_record(&run_id, first))).unwrap();
        let fourth = Incarnation::from_u64(first.as_u64() + 3);
        let record = layout.incarnation_record(&run_id, fourth);
        now(objects.put(&record, Bytes::new().into())).unwrap();
        checker.acknowledged_creation(&run_id, fourth.as_u64());
        assert_eq!(checker.violations().len(), 1);
    }
}
