//! An operator whose runtime-store prefix is not the workers' (issue 20,
//! item 11): `memoctl sweep` run with another prefix than the README's
//! finds none of the runs its markers name, and must clear nothing; a
//! worker started with that prefix must not delete the due-run entries
//! of the runs it cannot find either.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, Result as StoreResult};
use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::forward::forward_object_store;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{ObjectStoreRuntimeStore, RunStatus};
use crate::testing::sim::checker::{Checker, TaskKind};
use crate::testing::sim::compat::{self, fresh_run};
use crate::testing::sim::stores::{Preemptible, Shared};
use crate::testing::sim::{Event, Ledger, Simulation};
use crate::testing::{FaultInjectingStore, FaultRule, RequestKind};
use crate::workflow::{RetryPolicy, Runtime, Workflow, WorkflowFn};

use super::{OPERATOR, Outcome, Worker, World};

/// The runtime-store prefix the misconfigured operator uses: `memoctl`'s
/// default before issue 20 made it the README's.
const WRONG_PREFIX: &str = "runtime";

/// The share of random events that are a sweep or a poll by the
/// misconfigured operator, with one.
pub(super) const WRONG_PREFIX_SHARE: f64 = 0.05;

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// An operator whose runtime store has another prefix than the
    /// workers' (the memo store is the right one), as `memoctl sweep` with a
    /// mistyped or defaulted `--runs-prefix`: at random moments it sweeps,
    /// or polls the due-run index as a worker started with that prefix
    /// would, through its own store instances. Its runtime store holds
    /// none of the runs the markers name, so it must clear nothing: every
    /// delete
    /// it makes of an object that exists breaks *a sweep through another
    /// runtime-store prefix clears no memo entry* (or *deletes no terminal
    /// marker*, *a sweep or a worker's poll through another runtime-store
    /// prefix deletes no due-run entry*, *deletes nothing*, by what the
    /// object is).
    #[must_use]
    pub fn wrong_prefix_operator(mut self, on: bool) -> Self {
        self.config.wrong_prefix_operator = on;
        self
    }
}

const MEMO_ENTRY: &str = "a sweep through another runtime-store prefix clears no memo entry";
const MARKER: &str = "a sweep through another runtime-store prefix deletes no terminal marker";
const RECHECK: &str = "a sweep through another runtime-store prefix deletes no recheck marker of a run the workers' store holds";
const DUE_ENTRY: &str =
    "a sweep or a worker's poll through another runtime-store prefix deletes no due-run entry";
const ANYTHING: &str = "a sweep through another runtime-store prefix deletes nothing";

/// Whether incarnation `incarnation` of `run_id` is the one the workers'
/// runtime store holds, as a fresh instance reads it.
fn held(objects: &Shared, run_id: &RunId, incarnation: Incarnation) -> Option<RunStatus> {
    match fresh_run(objects, run_id) {
        Some(Ok(Some(run))) if run.incarnation == incarnation => Some(run.status),
        _ => None,
    }
}

/// The invariant deleting `path` breaks, with what it deleted, if it is
/// something of a workflow run the workers' runtime store holds (that
/// incarnation): a memo or step-output entry, the run's terminal or recheck
/// marker, a due-run entry of it, or anything of the runtime store. A standalone
/// run's objects are not (a standalone run needs no runtime store), nor
/// what is left of an incarnation the workers' store no longer holds.
fn clears_held(objects: &Shared, path: &Path) -> Option<(&'static str, String)> {
    let folder = path.parts().nth(1)?;
    let (invariant, run_id, incarnation) = match folder.as_ref() {
        crate::layout::MEMOS | crate::layout::STEP_OUTPUTS => {
            let (run_id, incarnation) = compat::run_of(path)?;
            (MEMO_ENTRY, run_id, Incarnation::from_u64(incarnation?))
        }
        crate::layout::TERMINALS => {
            let (_, run_id, incarnation, _) = crate::layout::parse_marker(path)?;
            (MARKER, run_id, incarnation)
        }
        // A recheck marker names an incarnation a sweep deleted: any
        // process may clear what is left of it, but one of a run the
        // workers' store holds would be a recheck of a live run.
        crate::layout::RECHECKS => {
            let (_, run_id, incarnation, _) = crate::layout::parse_marker(path)?;
            (RECHECK, run_id, incarnation)
        }
        "due" => {
            let entry = crate::layout::parse_due_entry(path)?;
            (DUE_ENTRY, entry.run_id, entry.incarnation)
        }
        // The shared scope belongs to the memo store, the right one: any
        // sweep of it deletes the entries that expired, and their markers.
        "shared" => return None,
        _ => return Some((ANYTHING, format!("deleted {path}"))),
    };
    let status = held(objects, &run_id, incarnation)?;
    Some((
        invariant,
        format!(
            "deleted {path}, of run {run_id} incarnation {incarnation}, which is {status} in the workers' runtime store"
        ),
    ))
}

/// The misconfigured operator's view of the shared store: every delete of
/// an object that exists is a violation, checked as the delete is made.
///
/// It may delete a recheck marker (of a run the workers' store no longer
/// holds): its pass then removes the tombstone from its own runtime store,
/// where there is none, and the workers' store keeps the run's tombstone
/// for good, one empty object (the limit `forget_deleted`'s rustdoc and
/// the retention guide state). Those incarnations are noted in
/// `rechecked`, and the last sweep's check leaves their tombstones alone.
struct ClearsNothing {
    inner: Arc<dyn ObjectStore>,
    checker: Checker,
    rechecked: Arc<std::sync::Mutex<Vec<(RunId, Incarnation)>>>,
}

impl fmt::Debug for ClearsNothing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClearsNothing").finish_non_exhaustive()
    }
}

impl fmt::Display for ClearsNothing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClearsNothing({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for ClearsNothing {
    fn delete_stream(
        &self,
        locations: BoxStream<'static, StoreResult<Path>>,
    ) -> BoxStream<'static, StoreResult<Path>> {
        let (inner, checker) = (Arc::clone(&self.inner), self.checker.clone());
        let rechecked = Arc::clone(&self.rechecked);
        let checked = locations
            .inspect(move |location| {
                let Ok(path) = location else {
                    return;
                };
                let exists = matches!(inner.head(path).now_or_never(), Some(Ok(_)));
                if let Some((_, run_id, incarnation, _)) = exists
                    .then(|| path.parts().nth(1))
                    .flatten()
                    .filter(|folder| folder.as_ref() == crate::layout::RECHECKS)
                    .and_then(|_| crate::layout::parse_marker(path))
                {
                    rechecked
                        .lock()
                        .expect("not poisoned")
                        .push((run_id, incarnation));
                }
                if let Some((invariant, what)) = exists
                    .then(|| clears_held(checker.objects(), path))
                    .flatten()
                {
                    checker.violation(
                        invariant,
                        format!(
                            "a process whose runtime store is at prefix {WRONG_PREFIX:?} {what}"
                        ),
                    );
                }
            })
            .boxed();
        self.inner.delete_stream(checked)
    }

    forward_object_store!(self.inner => put_opts, put_multipart_opts, get_opts, get_ranges,
        list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// The misconfigured operator's process: the right memo store, a
    /// runtime store at [`WRONG_PREFIX`], faults as every process has.
    pub(super) fn start_misconfigured(&mut self) -> Worker {
        let watched: Arc<dyn ObjectStore> = Arc::new(ClearsNothing {
            inner: self.backend(),
            checker: self.checker.clone(),
            rechecked: Arc::clone(&self.rechecked_elsewhere),
        });
        let faults = Arc::new(FaultInjectingStore::new(watched).with_seed(self.rng.random()));
        if self.config.has(Event::StoreFault) && self.config.fault_rate > 0.0 {
            let half = self.config.fault_rate / 2.0;
            for kind in RequestKind::ALL {
                faults.inject(FaultRule::fail_before(kind).with_probability(half));
                faults.inject(FaultRule::fail_after(kind).with_probability(half));
            }
        }
        let objects: Arc<dyn ObjectStore> = Arc::new(Preemptible {
            inner: Arc::clone(&faults),
            checker: self.checker.clone(),
            late_write: None,
        });
        self.next_process += 1;
        let builder = Runtime::builder()
            .memo_store(
                compat::open_process_stores(Arc::clone(&objects))
                    .0
                    .in_simulated_process(self.next_process),
            )
            .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
                objects,
                WRONG_PREFIX,
            )))
            .clock(Arc::clone(&self.clock) as _)
            .retention(self.config.retention)
            .worker_id(format!("sim-{:08x}", crate::run_id::unique_token() as u32))
            .marker_retry(
                RetryPolicy::attempts(3)
                    .with_min_delay(Duration::from_millis(20))
                    .without_jitter(),
            );
        let runtime = compat::configure(builder, self.config.lease)
            .build()
            .expect("a memo store and a runtime store are set");
        Worker {
            runtime,
            faults,
            looped: None,
            spawned: None,
            late_write: Arc::default(),
            sweeper: None,
            key_file: crate::testing::sim::sealed::key_file(),
        }
    }

    /// The misconfigured operator sweeps, or (as often) polls the due-run
    /// index as a worker would with the same runtime-store prefix: it
    /// registers no workflow, and a store that holds none of the runs must
    /// not lead it to delete their entries.
    pub(super) fn wrong_prefix_sweep(&mut self) {
        let Some(misconfigured) = &self.misconfigured else {
            return;
        };
        let runtime = misconfigured.runtime.clone();
        if self.rng.random_bool(0.5) {
            self.checker.event(format!(
                "a worker polls the due-run index with runtime-store prefix {WRONG_PREFIX:?}"
            ));
            let future = async move {
                let polled = crate::workflow::Worker::builder(runtime)
                    .build()
                    .wake_due()
                    .await;
                Outcome::Done(polled.map(drop).map_err(|e| e.to_string()))
            };
            self.spawn(OPERATOR, TaskKind::Operator, None, Box::pin(future));
            return;
        }
        self.checker.event(format!(
            "the operator sweeps with runtime-store prefix {WRONG_PREFIX:?}"
        ));
        let future = async move {
            let swept = runtime.retention_sweeper().sweep_now().await;
            Outcome::Done(swept.map(drop).map_err(|e| e.to_string()))
        };
        self.spawn(OPERATOR, TaskKind::Operator, None, Box::pin(future));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::path::Path;

    use super::{ANYTHING, clears_held};

    #[test]
    fn only_objects_of_runs_the_workers_store_holds_count() {
        let objects: super::Shared = Arc::new(object_store::memory::InMemory::new());
        let of = |p: &str| clears_held(&objects, &Path::from(p)).map(|(i, _)| i);
        // No run is held: entries, markers and due entries of runs that are
        // gone (or standalone) may go; anything else may not.
        assert_eq!(of("sim/memos/r/00000000000000a1/0/k"), None);
        assert_eq!(of("sim/memos/standalone-0/0000000000000000/0/k"), None);
        let recheck = format!(
            "sim/rechecks/00000000000000000000/{}_r.00000000000000a1",
            u64::MAX - 1
        );
        assert_eq!(of(&recheck), None);
        assert_eq!(of("sim/runs/r/run"), Some(ANYTHING));
    }
}
