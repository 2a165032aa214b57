//! Standalone memos used across processes (issue 20, item 7): every
//! worker and the operator call the same standalone keys
//! ([`MemoStore::new_memo`](crate::memo::MemoStore::new_memo)), the operator clears those runs (and, on a
//! store with per-run data keys, forgets their keys), and workers mark
//! them finished for the sweepers (which clear them and forget their
//! keys); each call is checked against the value the store holds, and
//! every error a call returns against the invariants (a corrupt read
//! breaks one), on sealed seeds too: the reader of the truth opens its
//! store as a new process of the history does, with the history's seal.
//!
//! Every simulated process has a committed-entry cache of its own, reached
//! only by its own clears (as a real process's is): a value cached by one
//! process outlives a clear by another.

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use object_store::ObjectStore;
use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::run_id::RunId;
use crate::testing::sim::checker::{Checker, TaskKind};
use crate::testing::sim::{Ledger, Simulation};
use crate::workflow::{Workflow, WorkflowFn};

use super::{OPERATOR, Outcome, World, process_name};

/// How many standalone runs the processes share.
const STANDALONE_RUNS: usize = 2;

/// The key every caller of a standalone run asks for.
const KEY: &str = "quote";

/// The share of random events that concern standalone memos, with them.
pub(super) const STANDALONE_SHARE: f64 = 0.15;

/// The invariant a call breaks when it returns another value than the one
/// the store held throughout the call.
pub(super) const SEES_STORED: &str =
    "every caller of a standalone key sees the value the store holds for it";

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// Standalone memos ([`MemoStore::new_memo`](crate::memo::MemoStore::new_memo)) used across processes, as
    /// issue 20 describes them: every worker and the operator (long-lived
    /// processes, each with its own committed-entry cache) call the same
    /// standalone keys, computing a new value on a miss; the operator clears
    /// those runs ([`MemoStore::clear_memos_for_run`](crate::memo::MemoStore::clear_memos_for_run), then, on a store with
    /// per-run data keys, [`DataKeys::forget_run`](crate::seal::DataKeys::forget_run), as `memoctl forget` does) and workers mark them
    /// finished (`Markers::write_standalone`) for the sweepers to clear (and
    /// forget) once the clock passes the retention. Each call is checked: *every caller of
    /// a standalone key sees the value the store holds for it* (a call during
    /// which the store held one value throughout returns that value), so no
    /// process serves a value a clear removed after another process
    /// committed a new one. At the end every standalone run is marked, and
    /// the last sweep must clear it too.
    #[must_use]
    pub fn standalone_memos(mut self, on: bool) -> Self {
        self.config.standalone_memos = on;
        self
    }
}

/// The `i`th standalone run id.
pub(super) fn standalone_run(i: usize) -> RunId {
    RunId::new(format!("standalone-{i}")).expect("a valid run id")
}

/// Every standalone run id.
pub(super) fn standalone_runs() -> Vec<RunId> {
    (0..STANDALONE_RUNS).map(standalone_run).collect()
}

/// The value stored for `run_id`'s key now, as a process with no cache
/// reads it through `objects` (the backend every process reads through);
/// `None` if the read did not complete or failed (a foreign object stands
/// there).
fn stored(objects: &Arc<dyn ObjectStore>, run_id: &RunId) -> Option<Option<Bytes>> {
    crate::testing::sim::compat::open_stores(Arc::clone(objects))
        .0
        .with_entry_cache(0)
        .new_memo(run_id, 0)
        .get(KEY)
        .now_or_never()?
        .ok()
}

/// A call of `what` (a standalone run's key, a shared key) that got `got`
/// while the store held `before` when it began and `after` when it
/// returned: values are never computed twice (each call computes its own),
/// so a store that held the same value at both ends held it throughout,
/// and the call must have got it, or it breaks `invariant`.
pub(super) fn check_sees_stored(
    checker: &Checker,
    invariant: &'static str,
    what: &str,
    who: &str,
    got: &Bytes,
    (before, after): (Option<Option<Bytes>>, Option<Option<Bytes>>),
) {
    let (Some(Some(before)), Some(Some(after))) = (before, after) else {
        return;
    };
    if before == after && *got != before {
        checker.violation(
            invariant,
            format!(
                "{who} got {:?} for {what}, which held {:?} throughout the call",
                String::from_utf8_lossy(got),
                String::from_utf8_lossy(&before)
            ),
        );
    }
}

/// [`check_sees_stored`] for a call of standalone run `run_id`'s key.
fn check_call(
    checker: &Checker,
    run_id: &RunId,
    who: &str,
    got: &Bytes,
    before: Option<Option<Bytes>>,
    after: Option<Option<Bytes>>,
) {
    let what = format!("standalone run {run_id}");
    check_sees_stored(checker, SEES_STORED, &what, who, got, (before, after));
}

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// A process calls a standalone key, the operator clears a standalone
    /// run, or a worker marks one finished.
    pub(super) fn standalone_event(&mut self) {
        let run_id = standalone_run(self.rng.random_range(0..STANDALONE_RUNS));
        let roll = self.rng.random_range(0..10u32);
        let operator = self.operator.is_some().then_some(OPERATOR);
        let process = match roll {
            // The operator calls now and then too; it clears, as `memoctl`
            // does, when there is one.
            0 | 6 | 7 => operator.or_else(|| self.random_live_worker()),
            _ => self.random_live_worker(),
        };
        let Some(process) = process else {
            return;
        };
        match roll {
            0..6 => self.standalone_call(process, run_id),
            6..8 => self.standalone_clear(process, run_id),
            _ => self.standalone_mark(process, run_id),
        }
    }

    fn standalone_call(&mut self, process: usize, run_id: RunId) {
        let memo = self.runtime_of(process).memo_store().new_memo(&run_id, 0);
        let objects = self.backend();
        let checker = self.checker.clone();
        let who = format!("{} (task {})", process_name(process), self.next_task);
        let fresh = format!("a value computed by {who}");
        self.checker
            .event(format!("{who} calls standalone run {run_id}"));
        let future = async move {
            let before = stored(&objects, &run_id);
            let got = match memo.get(KEY).await {
                Ok(Some(value)) => Ok(value),
                Ok(None) => memo.put(KEY, fresh.as_bytes()).await,
                Err(error) => Err(error),
            };
            let after = stored(&objects, &run_id);
            if let Ok(got) = &got {
                check_call(&checker, &run_id, &who, got, before, after);
            }
            Outcome::Done(got.map(drop).map_err(|e| e.to_string()))
        };
        self.spawn(process, TaskKind::Operator, None, Box::pin(future));
    }

    fn standalone_clear(&mut self, process: usize, run_id: RunId) {
        let memo_store = self.runtime_of(process).memo_store().clone();
        self.checker.event(format!(
            "{} clears standalone run {run_id}",
            process_name(process)
        ));
        let future = async move {
            // As `memoctl forget` does with data keys: the entries, then
            // the run's keys, while other processes may hold them.
            let cleared = match memo_store.clear_memos_for_run(&run_id).await {
                Ok(_) => match memo_store.seal().data_keys() {
                    Some(keys) => keys.forget_run(&run_id).await.map(drop),
                    None => Ok(()),
                },
                Err(error) => Err(error),
            };
            Outcome::Done(cleared.map_err(|e| e.to_string()))
        };
        self.spawn(process, TaskKind::Operator, None, Box::pin(future));
    }

    fn standalone_mark(&mut self, process: usize, run_id: RunId) {
        let markers = self.runtime_of(process).memo_store().markers();
        let now = self.checker.now_ms();
        self.checker.event(format!(
            "{} marks standalone run {run_id} finished",
            process_name(process)
        ));
        let future = async move {
            let marked = markers.write_standalone(&run_id, now).await;
            Outcome::Done(marked.map_err(|e| e.to_string()))
        };
        self.spawn(process, TaskKind::Operator, None, Box::pin(future));
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::{SEES_STORED, check_call, standalone_run};
    use crate::testing::sim::checker::Checker;

    #[test]
    fn a_call_that_got_another_value_than_the_store_held_throughout_breaks_it() {
        let checker = Checker::for_test();
        let (old, new) = (Bytes::from("old"), Bytes::from("new"));
        let run = standalone_run(0);
        check_call(
            &checker,
            &run,
            "w",
            &old,
            Some(Some(new.clone())),
            Some(Some(new.clone())),
        );
        let broken: Vec<_> = checker.violations().iter().map(|v| v.invariant).collect();
        assert_eq!(broken, [SEES_STORED]);
    }

    #[test]
    fn a_call_that_spanned_a_clear_or_a_commit_may_get_either_value() {
        let checker = Checker::for_test();
        let (old, new) = (Bytes::from("old"), Bytes::from("new"));
        let run = standalone_run(1);
        check_call(
            &checker,
            &run,
            "w",
            &old,
            Some(Some(old.clone())),
            Some(Some(new.clone())),
        );
        check_call(
            &checker,
            &run,
            "w",
            &new,
            Some(None),
            Some(Some(new.clone())),
        );
        check_call(&checker, &run, "w", &old, None, Some(Some(new.clone())));
        check_call(
            &checker,
            &run,
            "w",
            &new,
            Some(Some(new.clone())),
            Some(Some(new.clone())),
        );
        assert!(checker.violations().is_empty());
    }
}
