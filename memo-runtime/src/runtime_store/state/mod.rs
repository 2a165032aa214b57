//! The rules of the runtime store, shared by every backend: a run's state and
//! how each change is checked against it and then applied. Keeping one copy
//! of the rules is what lets the in-memory and object-store backends agree
//! on every verdict.
//!
//! The state and how a change applies live here; `checks` decides whether a
//! change applies, `cuts` slices and joins states for checkpoints.

mod checks;
mod cuts;

use std::collections::HashMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{
    AttemptCost, Commit, InputPhase, InputRecord, Lease, NewInput, NewRun, RunRecord, RunStatus,
    RunSummary, StatusChange, StepReceipt,
};
use crate::error::{Error, Result};
use crate::run_id::Incarnation;

/// Where an input stands: its phase and, once consumed, the step that
/// consumed it.
pub(crate) type Standing = (InputPhase, Option<u64>);

/// One change to a run after its creation, in the order the run saw them.
/// This is also the stored form of the object-store backend's log entries,
/// so its encoding is a data format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Change {
    /// An [`atomic_apply`](super::RuntimeStore::atomic_apply), boxed: a
    /// commit is several times an input's size (serde stores a box as
    /// what it holds, so the entry's encoding is the commit's).
    Commit(Box<Commit>),
    /// An [`append_input`](super::RuntimeStore::append_input).
    Input(NewInput),
}

/// What checking a change against a run decided.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Every part of the change is already in effect: nothing to apply.
    AlreadyApplied,
    /// The change applies; pass the approval to [`RunState::apply`].
    Apply(Approval),
}

/// What [`RunState::apply`] needs from the check (so applying cannot fail).
#[derive(Debug)]
pub(crate) struct Approval {
    commit_digest: Option<[u8; 32]>,
}

/// A run and everything committed to it.
///
/// It is also the stored form of the object-store backend's checkpoints
/// (whole, in a base; without the receipts the base holds, in a delta), so
/// its encoding (named fields, no maps: the same state always encodes to the
/// same bytes) is a data format.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunState {
    record: RunRecord,
    receipts: Vec<StepReceipt>,
    /// Digest of the whole commit that carried each receipt, so a retried
    /// commit can be told from a different one without keeping every commit.
    /// Stored as one byte string of 32 bytes per receipt.
    #[serde(with = "digests")]
    commit_digests: Vec<[u8; 32]>,
    snapshot: Option<Bytes>,
    inputs: Vec<InputRecord>,
    /// Rebuilt from `inputs` after decoding ([`RunState::reindexed`]).
    #[serde(skip)]
    input_index: HashMap<String, usize>,
    /// The token of the start of the current attempt, which tells a
    /// retried start from a competing one.
    attempt_token: Option<u64>,
    /// The cost ledger's entry of the attempt that ended the run, carried
    /// by its terminal commit ([`Commit::cost`]). Left out when absent, so
    /// a state without one encodes as before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ending_cost: Option<AttemptCost>,
}

impl RunState {
    /// A new run in status `Pending`.
    pub(crate) fn new(run: NewRun, incarnation: Incarnation) -> RunState {
        RunState {
            record: RunRecord {
                run_id: run.run_id,
                incarnation,
                workflow: run.workflow,
                input: run.input,
                status: RunStatus::Pending,
                attempts: 0,
                created_at_ms: run.created_at_ms,
                updated_at_ms: run.created_at_ms,
                terminal_at_ms: None,
                output: None,
                error: None,
                lease: None,
                workflow_version: run.workflow_version,
            },
            receipts: Vec::new(),
            commit_digests: Vec::new(),
            snapshot: None,
            inputs: Vec::new(),
            input_index: HashMap::new(),
            attempt_token: None,
            ending_cost: None,
        }
    }

    /// Checks that `run` is the run this state was created from (the same
    /// workflow and input; the creation time is not content), for an
    /// idempotent create.
    pub(crate) fn check_same_run(&self, run: &NewRun) -> Result<()> {
        if self.record.workflow == run.workflow && self.record.input == run.input {
            return Ok(());
        }
        Err(Error::Conflict {
            what: format!("run {}", self.record.run_id),
            reason: "the run exists with a different workflow or input".into(),
        })
    }

    /// The state with its input index rebuilt: what a decoded state needs
    /// before use (the index is not stored).
    pub(crate) fn reindexed(mut self) -> RunState {
        self.input_index = (self.inputs.iter().enumerate())
            .map(|(i, input)| (input.input_id.clone(), i))
            .collect();
        self
    }

    /// About how many bytes the state holds in memory: its payloads and
    /// strings, and a rough allowance per receipt and input. For bounding a
    /// cache by bytes, not an exact count.
    pub(crate) fn approximate_bytes(&self) -> u64 {
        const PER_ITEM: usize = 96;
        let record = &self.record;
        let record_bytes = record.input.len()
            + record.workflow.len()
            + record.output.as_ref().map_or(0, Bytes::len)
            + record.error.as_ref().map_or(0, String::len)
            + PER_ITEM;
        let receipts: usize = (self.receipts.iter())
            .map(|r| r.step.len() + r.output.len() + r.error.as_ref().map_or(0, String::len))
            .sum();
        let inputs: usize = (self.inputs.iter())
            .map(|i| i.input_id.len() * 2 + i.name.len() + i.payload.len())
            .sum();
        let items = (self.receipts.len() + self.inputs.len()) * PER_ITEM;
        let digests = self.commit_digests.len() * 32;
        let snapshot = self.snapshot.as_ref().map_or(0, Bytes::len);
        let total = record_bytes + receipts + inputs + items + digests + snapshot;
        u64::try_from(total).unwrap_or(u64::MAX)
    }

    /// How many step receipts the run holds.
    pub(crate) fn receipt_count(&self) -> u64 {
        self.receipts.len() as u64
    }

    /// How many inputs the run holds.
    pub(crate) fn input_count(&self) -> u64 {
        self.inputs.len() as u64
    }

    /// The run as a listing shows it.
    pub(crate) fn summary(&self) -> RunSummary {
        RunSummary::new(&self.record, self.receipts.len() as u64)
    }

    pub(crate) fn record(&self) -> &RunRecord {
        &self.record
    }

    pub(crate) fn receipts_after(&self, after: Option<u64>) -> Vec<StepReceipt> {
        let from = after.map_or(0, |a| {
            usize::try_from(a).unwrap_or(usize::MAX).saturating_add(1)
        });
        self.receipts.get(from..).unwrap_or_default().to_vec()
    }

    pub(crate) fn snapshot(&self) -> Option<Bytes> {
        self.snapshot.clone()
    }

    pub(crate) fn inputs(&self) -> Vec<InputRecord> {
        self.inputs.clone()
    }

    /// Every receipt and every input: what an attempt reads before its
    /// workflow runs (`load_receipts_and_inputs`).
    pub(crate) fn history(&self) -> (Vec<StepReceipt>, Vec<InputRecord>) {
        (self.receipts.clone(), self.inputs.clone())
    }

    /// The run with its history, as a commit leaves it
    /// (`atomic_apply_and_load`).
    pub(crate) fn applied(&self) -> (RunRecord, Vec<StepReceipt>, Vec<InputRecord>) {
        let (receipts, inputs) = self.history();
        (self.record.clone(), receipts, inputs)
    }

    /// The input `input_id` with the run, as an append leaves them
    /// (`append_input_and_load`).
    ///
    /// # Panics
    ///
    /// If the run holds no such input: call it only once the append applied.
    pub(crate) fn appended(&self, input_id: &str) -> (InputRecord, Option<RunRecord>) {
        let input = self.input(input_id).cloned();
        let input = input.expect("an accepted input is recorded");
        (input, Some(self.record.clone()))
    }

    /// The cost ledger's entry of the attempt that ended the run, if its
    /// terminal commit carried one.
    pub(crate) fn ending_cost(&self) -> Option<&AttemptCost> {
        self.ending_cost.as_ref()
    }

    /// How many inputs stand in a phase `phase` accepts.
    pub(crate) fn inputs_in(&self, phase: impl Fn(InputPhase) -> bool) -> usize {
        self.inputs
            .iter()
            .filter(|input| phase(input.phase))
            .count()
    }

    pub(crate) fn input(&self, input_id: &str) -> Option<&InputRecord> {
        self.input_index.get(input_id).map(|&i| &self.inputs[i])
    }

    /// Checks `change` against the run as it stands.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] or [`Error::InvalidWrite`] if it must not apply;
    /// [`Error::Serialization`] if the commit cannot be digested.
    pub(crate) fn check(&self, change: &Change) -> Result<Verdict> {
        match change {
            Change::Commit(commit) => self.check_commit(commit),
            Change::Input(input) => self.check_input(input),
        }
    }

    /// Applies a change that [`check`](Self::check) accepted with `approval`.
    pub(crate) fn apply(&mut self, change: Change, approval: Approval) {
        match change {
            Change::Commit(commit) => self.apply_commit(*commit, approval),
            Change::Input(input) => self.apply_input(input),
        }
    }

    fn apply_commit(&mut self, commit: Commit, approval: Approval) {
        let record = &mut self.record;
        record.updated_at_ms = record.updated_at_ms.max(commit.at_ms);
        let consumer = commit.receipt.as_ref().map(|r| r.sequence);
        if let (Some(receipt), Some(digest)) = (commit.receipt, approval.commit_digest) {
            self.receipts.push(receipt);
            self.commit_digests.push(digest);
        }
        if commit.snapshot.is_some() {
            self.snapshot = commit.snapshot;
        }
        for update in commit.input_updates {
            if let Some(&i) = self.input_index.get(&update.input_id) {
                let input = &mut self.inputs[i];
                input.phase = update.phase;
                input.consumed_by = consumer.filter(|_| update.phase == InputPhase::Consumed);
            }
        }
        let record = &mut self.record;
        match commit.status {
            None => {}
            Some(_) if record.status.is_terminal() => {}
            // A start that is already in effect changes nothing.
            Some(StatusChange::Running { attempt, .. })
                if Some(attempt) != record.attempts.checked_add(1) => {}
            Some(StatusChange::Running {
                attempt,
                token,
                owner,
                lease_until_ms,
            }) => {
                record.attempts = attempt;
                record.status = RunStatus::Running;
                record.lease = Some(Lease {
                    attempt,
                    owner,
                    until_ms: lease_until_ms,
                });
                self.attempt_token = Some(token);
            }
            Some(StatusChange::Lease { until_ms, .. }) => {
                if let Some(lease) = &mut record.lease {
                    lease.until_ms = until_ms;
                }
            }
            Some(terminal) => {
                record.status = terminal.status();
                record.terminal_at_ms = Some(commit.at_ms);
                record.lease = None;
                self.ending_cost = commit.cost;
                match terminal {
                    StatusChange::Completed { output } => record.output = Some(output),
                    StatusChange::Failed { error } => record.error = Some(error),
                    StatusChange::Cancelled { reason } => record.error = reason,
                    StatusChange::Running { .. } | StatusChange::Lease { .. } => {}
                }
            }
        }
    }

    fn apply_input(&mut self, input: NewInput) {
        let record = &mut self.record;
        record.updated_at_ms = record.updated_at_ms.max(input.accepted_at_ms);
        self.input_index
            .insert(input.input_id.clone(), self.inputs.len());
        self.inputs.push(InputRecord {
            input_id: input.input_id,
            name: input.name,
            payload: input.payload,
            phase: InputPhase::Accepted,
            consumed_by: None,
            accepted_at_ms: input.accepted_at_ms,
        });
    }
}

/// Commit digests stored as one byte string (32 bytes each) rather than an
/// array of arrays of integers, which MessagePack would make half again as
/// large.
mod digests {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(digests: &[[u8; 32]], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(digests.as_flattened())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<[u8; 32]>, D::Error> {
        let bytes = bytes::Bytes::deserialize(d)?;
        let (digests, rest) = bytes.as_chunks::<32>();
        if !rest.is_empty() {
            return Err(D::Error::custom(
                "commit digests are not a multiple of 32 bytes",
            ));
        }
        Ok(digests.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_id::RunId;

    fn running_with(attempts: u32) -> RunState {
        let run = NewRun {
            run_id: RunId::new("r").unwrap(),
            workflow: "w".into(),
            input: Bytes::new(),
            created_at_ms: 0,
            workflow_version: None,
        };
        let mut state = RunState::new(run, Incarnation::random());
        state.record.status = RunStatus::Running;
        state.record.attempts = attempts;
        state
    }

    fn start(attempt: u32) -> Change {
        Change::Commit(Box::new(Commit::status(
            StatusChange::start_attempt(attempt),
            1,
        )))
    }

    #[test]
    fn the_largest_attempt_number_never_starts_so_attempts_stay_countable() {
        let state = running_with(u32::MAX - 1);
        let refused = state.check(&start(u32::MAX));
        assert!(
            matches!(refused, Err(Error::InvalidWrite { .. })),
            "{refused:?}"
        );
        assert!(state.check_stored(0).is_ok());
        // A state no log can make is refused as stored, and judged without
        // overflowing where it is met anyway.
        let exhausted = running_with(u32::MAX);
        assert!(exhausted.check_stored(0).is_err());
        assert!(exhausted.check(&start(u32::MAX)).is_err());
        assert!(exhausted.check(&start(1)).is_err());
    }

    #[test]
    fn a_stored_cost_of_an_ending_attempt_in_an_open_run_is_refused() {
        let mut open = running_with(1);
        assert!(open.check_stored(0).is_ok());
        open.ending_cost = Some(AttemptCost::default());
        let refused = open.check_stored(0);
        assert!(refused.is_err_and(|e| e.contains("ending attempt")));
    }
}
