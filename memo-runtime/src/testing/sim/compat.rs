//! Every place where the simulator depends on how runs are identified and
//! deleted (run incarnations, leases), so that a change of those APIs is an
//! edit here and nowhere else; and the fresh, fault-free views the
//! invariants are checked against.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use object_store::path::Path;
use serde::de::DeserializeOwned;

use super::stores::Shared;
use crate::error::Result;
use crate::memo::{Memo, MemoStore};
use crate::run_id::RunId;
use crate::runtime_store::{
    InputRecord, ObjectStoreRuntimeStore, RunRecord, RuntimeStore, StepReceipt,
};
use crate::workflow::RuntimeBuilder;

/// The prefix every simulated worker keeps its memos and runs under.
pub(super) const PREFIX: &str = "sim";

/// The worker settings that depend on the runtime's attempt model: today
/// nothing (there are no leases yet); `lease` is the lease length the
/// invariants assume.
pub(super) fn configure(builder: RuntimeBuilder, _lease: Duration) -> RuntimeBuilder {
    builder
}

/// Deletes the run's records, as a user reusing its id would.
pub(super) async fn delete_run(store: &dyn RuntimeStore, run_id: &RunId) -> Result<bool> {
    store.delete_run(run_id).await
}

/// A fault-free instance over the shared objects, as a new process would
/// open it.
fn fresh_store(objects: &Shared) -> ObjectStoreRuntimeStore {
    ObjectStoreRuntimeStore::new(Arc::clone(objects) as _, PREFIX)
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

/// The value committed under `key` in the memo `memo` stands for, read
/// without faults.
pub(super) fn committed_entry(
    objects: &Shared,
    memo: &Memo,
    key: &str,
) -> Option<Result<Option<Bytes>>> {
    MemoStore::new(Arc::clone(objects) as _, PREFIX)
        .new_memo(memo.run_id(), memo.step_number())
        .get(key)
        .now_or_never()
}

/// The output of a completed run, decoded as the runtime encoded it.
pub(super) fn decode_output<O: DeserializeOwned>(record: &RunRecord) -> Result<O> {
    let output = record.output.as_deref().unwrap_or_default();
    crate::workflow::decode(
        "the workflow output",
        &format!("run {}", record.run_id),
        output,
    )
}

/// The run an object of the shared store belongs to, if it is a memo
/// entry, a step output or a runtime record.
pub(super) fn run_of(path: &Path) -> Option<RunId> {
    let mut parts = path.parts();
    if parts.next()?.as_ref() != PREFIX {
        return None;
    }
    match parts.next()?.as_ref() {
        "memos" | "step-outputs" | "runs" => RunId::new(parts.next()?.as_ref()).ok(),
        _ => None,
    }
}

/// The run whose creation record `path` is: deleting it ends the run.
pub(super) fn creation_of(path: &Path) -> Option<RunId> {
    let parts: Vec<_> = path.parts().collect();
    match parts.as_slice() {
        [prefix, runs, run, record]
            if prefix.as_ref() == PREFIX && runs.as_ref() == "runs" && record.as_ref() == "run" =>
        {
            RunId::new(run.as_ref()).ok()
        }
        _ => None,
    }
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
    /// An injected store fault, converted into whatever error.
    InjectedFault,
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
    } else if message.contains("injected fault") {
        ErrorKind::InjectedFault
    } else {
        ErrorKind::Other
    }
}
