//! Every place where the simulator depends on how runs are identified and
//! deleted (run incarnations, leases), so that a change of those APIs is an
//! edit here and nowhere else; and the fresh, fault-free views the
//! invariants are checked against.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use object_store::ObjectStore;
use object_store::path::Path;
use serde::de::DeserializeOwned;

use super::stores::Shared;
use crate::error::Result;
use crate::memo::{Memo, MemoStore};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{
    InputPhase, InputRecord, ObjectStoreRuntimeStore, RunRecord, RuntimeStore, StepReceipt,
};
use crate::workflow::RuntimeBuilder;

/// The prefix every simulated worker keeps its memos and runs under.
pub(super) const PREFIX: &str = "sim";

/// The worker settings that depend on the runtime's attempt model: the
/// lease length the invariants assume is the workers' lease.
pub(super) fn configure(builder: RuntimeBuilder, lease: Duration) -> RuntimeBuilder {
    builder.lease(lease)
}

/// Deletes the run's current incarnation from the runtime store alone, as
/// a user reusing its id with `RuntimeStore::delete_run` would, and adds
/// the incarnation to `deleted_alone`: its memo entries and marker are left
/// on purpose, for a later run of the id to (never) inherit. Until the
/// deletion returns `Ok`, the incarnation is also in `unfinished`: a
/// deletion that failed or whose process died part way is the caller's to
/// call again (its rustdoc says a second call finishes it). No recheck
/// ever clears the incarnation again: `checker` learns that too.
pub(super) async fn delete_records(
    store: &dyn RuntimeStore,
    run_id: &RunId,
    deleted_alone: &Mutex<Vec<(RunId, Incarnation)>>,
    unfinished: &Mutex<Vec<(RunId, Incarnation)>>,
    checker: &super::checker::Checker,
) -> Result<bool> {
    match store.load_run(run_id).await? {
        Some(run) => {
            let this = (run_id.clone(), run.incarnation);
            checker.never_rechecked(run_id, run.incarnation);
            deleted_alone
                .lock()
                .expect("not poisoned")
                .push(this.clone());
            unfinished.lock().expect("not poisoned").push(this.clone());
            let deleted = store.delete_run(run_id, run.incarnation).await;
            if deleted.is_ok() {
                unfinished
                    .lock()
                    .expect("not poisoned")
                    .retain(|u| *u != this);
            }
            deleted
        }
        None => Ok(false),
    }
}

/// Whether `path` is a memo or step-output entry, or the terminal marker,
/// of one of the incarnations in `deleted_alone`.
pub(super) fn left_by_records_only_delete(
    path: &Path,
    deleted_alone: &[(RunId, Incarnation)],
) -> bool {
    let layout = crate::layout::Layout::new(PREFIX);
    deleted_alone.iter().any(|(run_id, incarnation)| {
        let entries = [crate::layout::MEMOS, crate::layout::STEP_OUTPUTS]
            .map(|folder| layout.incarnation_folder(folder, run_id, *incarnation));
        entries.iter().any(|folder| path.prefix_matches(folder))
            || crate::layout::parse_marker(path)
                .is_some_and(|(_, r, i, _)| &r == run_id && i == *incarnation)
    })
}

/// The incarnation of the run a memo belongs to, as a number.
pub(super) fn incarnation_of(memo: &Memo) -> u64 {
    memo.incarnation().as_u64()
}

/// The attempt whose lease a workflow step's memo carries; `None` for a
/// standalone memo.
pub(super) fn attempt_of(memo: &Memo) -> Option<u32> {
    memo.lease_attempt()
}

/// The memo store and runtime store of a new process over `objects`,
/// sharing one seal: the history's, in a sealed history (see
/// [`Simulation::sealed_share`](super::Simulation::sealed_share)).
pub(super) fn open_stores(objects: Arc<dyn ObjectStore>) -> (MemoStore, ObjectStoreRuntimeStore) {
    sealed_with(objects, super::sealed::process_seal())
}

/// [`open_stores`] for a worker or operator process: in a sealed history,
/// its key store has await points (`sealed::worker_seal`), as a bucket's
/// round trips; the checker's reads (`open_stores`) answer at once.
pub(super) fn open_process_stores(
    objects: Arc<dyn ObjectStore>,
) -> (MemoStore, ObjectStoreRuntimeStore) {
    sealed_with(objects, super::sealed::worker_seal())
}

fn sealed_with(
    objects: Arc<dyn ObjectStore>,
    seal: Option<crate::seal::Seal>,
) -> (MemoStore, ObjectStoreRuntimeStore) {
    let memo = MemoStore::new(Arc::clone(&objects), PREFIX);
    let runs = ObjectStoreRuntimeStore::new(objects, PREFIX);
    match seal {
        Some(seal) => (memo.with_seal(seal.clone()), runs.with_seal(seal)),
        None => (memo, runs),
    }
}

/// A fault-free instance over the shared objects, as a new process would
/// open it.
fn fresh_store(objects: &Shared) -> ObjectStoreRuntimeStore {
    open_stores(Arc::clone(objects)).1
}

/// The run as a fresh instance sees it; `None` if the read did not complete
/// at once (it always does over `InMemory`).
pub(super) fn fresh_run(objects: &Shared, run_id: &RunId) -> Option<Result<Option<RunRecord>>> {
    fresh_store(objects).load_run(run_id).now_or_never()
}

/// The run's receipts as a fresh instance sees them.
pub(super) fn fresh_receipts(objects: &Shared, run_id: &RunId) -> Option<Result<Vec<StepReceipt>>> {
    fresh_store(objects)
        .load_receipts(run_id, None)
        .now_or_never()
}

/// The run's inputs as a fresh instance sees them.
pub(super) fn fresh_inputs(objects: &Shared, run_id: &RunId) -> Option<Result<Vec<InputRecord>>> {
    fresh_store(objects).load_inputs(run_id).now_or_never()
}

/// The names of the signals the run's current incarnation holds, as a
/// fresh instance sees them: recorded, and neither consumed nor dropped.
/// Empty if the run cannot be read.
pub(super) fn held_signals(objects: &Shared, run_id: &RunId) -> Vec<String> {
    match fresh_inputs(objects, run_id) {
        Some(Ok(inputs)) => inputs
            .into_iter()
            .filter(|input| matches!(input.phase, InputPhase::Accepted | InputPhase::Queued))
            .map(|input| input.name)
            .collect(),
        _ => Vec::new(),
    }
}

/// The signal the run's current incarnation is suspended waiting for, if
/// it holds it (see [`held_signals`]): read from its last receipt, the
/// marker of a wait (`memo.wait:<name>`) or of a wait with a deadline
/// (`memo.signal-deadline:<name>`), as the stored format names them.
pub(super) fn waits_for_held_signal(objects: &Shared, run_id: &RunId) -> Option<String> {
    let Some(Ok(receipts)) = fresh_receipts(objects, run_id) else {
        return None;
    };
    let last = receipts.last()?;
    let name = last
        .step
        .strip_prefix("memo.wait:")
        .or_else(|| last.step.strip_prefix("memo.signal-deadline:"))?;
    held_signals(objects, run_id)
        .iter()
        .any(|held| held == name)
        .then(|| name.to_string())
}

/// The value committed under `key` in the memo `memo` stands for, read
/// without faults.
pub(super) fn committed_entry(
    objects: &Shared,
    memo: &Memo,
    key: &str,
) -> Option<Result<Option<Bytes>>> {
    open_stores(Arc::clone(objects))
        .0
        .memo_for(memo.run_id(), memo.incarnation(), memo.step_number())
        .get(key)
        .now_or_never()
}

/// Every object of a run, or of the shared scope, left in the shared
/// store: memo and step-output entries, runtime records, status hints,
/// terminal markers, shared entries and their expiry markers (not
/// conditional-create probes, which belong to no run).
pub(super) fn objects_of_runs(objects: &Shared) -> Vec<Path> {
    use futures::TryStreamExt;
    let listed = objects
        .list(Some(&Path::from(PREFIX)))
        .try_collect::<Vec<_>>()
        .now_or_never();
    let Some(Ok(listed)) = listed else {
        return Vec::new();
    };
    listed
        .into_iter()
        .map(|meta| meta.location)
        .filter(|path| {
            path.parts()
                .nth(1)
                .is_some_and(|folder| folder.as_ref() != "probes")
        })
        .collect()
}

/// The output of a completed run, decoded as the runtime encoded it.
pub(super) fn decode_output<O: DeserializeOwned>(record: &RunRecord) -> Result<O> {
    let output = record.output.as_deref().unwrap_or_default();
    crate::codec::decode_value(
        "the workflow output",
        &format!("run {}", record.run_id),
        output,
    )
}

/// The run an object of the shared store belongs to, if it is a memo
/// entry, a step output or a runtime record, and the incarnation its path
/// names (`None` for the run's pointer, `runs/<run>/run`, which belongs to
/// its current incarnation).
pub(super) fn run_of(path: &Path) -> Option<(RunId, Option<u64>)> {
    let parts: Vec<_> = path.parts().collect();
    let [prefix, folder, run, rest @ ..] = parts.as_slice() else {
        return None;
    };
    if prefix.as_ref() != PREFIX || !matches!(folder.as_ref(), "memos" | "step-outputs" | "runs") {
        return None;
    }
    // Both forms of segment: a long id's (`<lower case>==<case mask>`) as
    // well as `=x` for a capital.
    let run_id = crate::layout::parse_run_segment(run.as_ref())?;
    let incarnation = rest
        .first()
        .and_then(|part| Incarnation::parse_hex(part.as_ref()))
        .map(Incarnation::as_u64);
    Some((run_id, incarnation))
}

/// Whether `path` is a run pointer: `<prefix>/runs/<run>/run`.
pub(super) fn is_run_pointer(path: &Path) -> bool {
    let parts: Vec<_> = path.parts().collect();
    matches!(parts.as_slice(), [_, folder, _, last]
        if folder.as_ref() == "runs" && last.as_ref() == "run")
}

/// Whether `path` is an incarnation's record (`runs/<run>/<inc>/run`), the
/// first object a deletion of the incarnation removes.
pub(super) fn is_incarnation_record(path: &Path) -> bool {
    let parts: Vec<_> = path.parts().collect();
    matches!(parts.as_slice(), [_, folder, _, incarnation, last]
        if folder.as_ref() == "runs"
            && last.as_ref() == "run"
            && Incarnation::parse_hex(incarnation.as_ref()).is_some())
}

/// How an error message the workflow or the runtime returned reads, for the
/// invariants that look at outcomes. The runtime's errors reach the
/// simulator converted into the workflow's own error type, so only their
/// text is left to tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ErrorKind {
    /// [`Error::Corrupt`](crate::Error::Corrupt).
    Corrupt,
    /// [`Error::NonDeterminism`](crate::Error::NonDeterminism).
    NonDeterminism,
    /// The run exists with another workflow or input.
    InputConflict,
    /// A delivery's attempt started on a run that had ended.
    EndedRunConflict,
    /// An injected store fault, converted into whatever error.
    InjectedFault,
    /// A run started on another version of the workflow than the one it
    /// was delivered to ([`Error::VersionNotRegistered`](crate::Error::VersionNotRegistered)).
    OtherVersion,
    /// Anything else.
    Other,
}

pub(super) fn classify(message: &str) -> ErrorKind {
    if message.contains("corrupt object at") {
        ErrorKind::Corrupt
    } else if message.contains("nondetermin") || message.contains("non-determin") {
        ErrorKind::NonDeterminism
    } else if message.contains("exists with a different workflow or input") {
        ErrorKind::InputConflict
    } else if message.starts_with("conflict at") && message.contains("; it cannot become Running") {
        ErrorKind::EndedRunConflict
    } else if message.contains("injected fault") {
        ErrorKind::InjectedFault
    } else if message.contains("a worker that registers that version continues it") {
        ErrorKind::OtherVersion
    } else {
        ErrorKind::Other
    }
}
