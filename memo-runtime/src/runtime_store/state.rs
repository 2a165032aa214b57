//! The rules of the runtime store, shared by every backend: a run's state and
//! how each change is checked against it and then applied. Keeping one copy
//! of the rules is what lets the in-memory and object-store backends agree
//! on every verdict.

use std::collections::HashMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{
    Commit, Fence, InputPhase, InputRecord, Lease, NewInput, NewRun, RunRecord, RunStatus,
    RunSummary, StatusChange, StepReceipt,
};
use crate::codec;
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
    /// An [`atomic_apply`](super::RuntimeStore::atomic_apply).
    Commit(Commit),
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

    /// Checks what every state folded from a valid log keeps true, for a
    /// state read from a checkpoint (a log entry is checked against the
    /// rules as it is folded; a checkpoint is a copy, and would otherwise be
    /// trusted). `receipts_from` is the sequence of its first receipt (a
    /// delta leaves out those of its base). The error names the first
    /// broken promise.
    pub(crate) fn check_stored(&self, receipts_from: u64) -> std::result::Result<(), String> {
        let record = &self.record;
        if self.receipts.len() != self.commit_digests.len() {
            return Err(format!(
                "{} receipts but {} commit digests",
                self.receipts.len(),
                self.commit_digests.len()
            ));
        }
        let total = receipts_from
            .checked_add(self.receipts.len() as u64)
            .ok_or_else(|| format!("receipts from {receipts_from} overflow their count"))?;
        for (expected, receipt) in (receipts_from..total).zip(&self.receipts) {
            if receipt.sequence != expected {
                return Err(format!(
                    "receipt {} where receipt {expected} belongs: receipts are dense from 0",
                    receipt.sequence
                ));
            }
            if receipt.run_id != record.run_id {
                return Err(format!(
                    "receipt {expected} belongs to run {}",
                    receipt.run_id
                ));
            }
        }
        if record.attempts == u32::MAX {
            return Err(format!("{} attempts leave none to start", record.attempts));
        }
        if record.status.is_terminal() != record.terminal_at_ms.is_some() {
            return Err(format!(
                "a {} run with terminal time {:?}",
                record.status, record.terminal_at_ms
            ));
        }
        if self.snapshot.is_some() && total == 0 {
            return Err("a snapshot without a receipt".into());
        }
        let mut ids = std::collections::HashSet::new();
        for input in &self.inputs {
            let id = &input.input_id;
            if id.is_empty() || !ids.insert(id.as_str()) {
                return Err(format!("input id {id:?} is empty or held twice"));
            }
            let consumed = input.phase == InputPhase::Consumed;
            if consumed != input.consumed_by.is_some()
                || input.consumed_by.is_some_and(|s| s >= total)
            {
                return Err(format!(
                    "input {id:?} is {:?}, consumed by step {:?} of {total}",
                    input.phase, input.consumed_by
                ));
            }
        }
        Ok(())
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

    /// Where each of the run's first `count` inputs stands.
    pub(crate) fn standings(&self, count: u64) -> Vec<Standing> {
        let count = usize::try_from(count).map_or(self.inputs.len(), |c| c.min(self.inputs.len()));
        (self.inputs[..count].iter())
            .map(|input| (input.phase, input.consumed_by))
            .collect()
    }

    /// The state without its first `receipts` receipts (and their commit
    /// digests) and its first `inputs` inputs: what a checkpoint delta
    /// stores over a base that holds them.
    pub(crate) fn without_first(&self, receipts: u64, inputs: u64) -> RunState {
        let after = |count: u64, len: usize| usize::try_from(count).map_or(len, |c| c.min(len));
        let receipts = after(receipts, self.receipts.len());
        let inputs = after(inputs, self.inputs.len());
        RunState {
            record: self.record.clone(),
            receipts: self.receipts[receipts..].to_vec(),
            commit_digests: self.commit_digests[receipts.min(self.commit_digests.len())..].to_vec(),
            snapshot: self.snapshot.clone(),
            inputs: self.inputs[inputs..].to_vec(),
            input_index: HashMap::new(),
            attempt_token: self.attempt_token,
        }
    }

    /// The state with only its first `count` receipts (and their commit
    /// digests) and no inputs: what a base of `count` receipts and no
    /// inputs holds of them, for joining a delta that names that base.
    pub(crate) fn with_receipts_before(&self, count: u64) -> RunState {
        let count =
            usize::try_from(count).map_or(self.receipts.len(), |c| c.min(self.receipts.len()));
        let digests = count.min(self.commit_digests.len());
        RunState {
            record: self.record.clone(),
            receipts: self.receipts[..count].to_vec(),
            commit_digests: self.commit_digests[..digests].to_vec(),
            snapshot: None,
            inputs: Vec::new(),
            input_index: HashMap::new(),
            attempt_token: None,
        }
    }

    /// This state (a delta's, holding the receipts from `base`'s last one
    /// on, and the inputs after the first `inputs_from` of `base`) with
    /// `base`'s receipts and those inputs put back before its own, moved to
    /// where `standings` says they stand now (`(index, phase, consumer)`;
    /// those not named stand as in `base`). `None` if the two do not join.
    pub(crate) fn joined_to(
        mut self,
        mut base: RunState,
        inputs_from: u64,
        standings: &[(u64, InputPhase, Option<u64>)],
    ) -> Option<RunState> {
        let joins = (self.receipts.first()).is_none_or(|r| r.sequence == base.receipt_count());
        let whole = |state: &RunState| state.receipts.len() == state.commit_digests.len();
        let inputs_from = usize::try_from(inputs_from).ok()?;
        if !joins || !whole(&self) || !whole(&base) || base.inputs.len() < inputs_from {
            return None;
        }
        base.inputs.truncate(inputs_from);
        for &(index, phase, consumed_by) in standings {
            let input = base.inputs.get_mut(usize::try_from(index).ok()?)?;
            input.phase = phase;
            input.consumed_by = consumed_by;
        }
        base.receipts.append(&mut self.receipts);
        base.commit_digests.append(&mut self.commit_digests);
        base.inputs.append(&mut self.inputs);
        self.receipts = base.receipts;
        self.commit_digests = base.commit_digests;
        self.inputs = base.inputs;
        Some(self)
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
            Change::Commit(commit) => self.apply_commit(commit, approval),
            Change::Input(input) => self.apply_input(input),
        }
    }

    fn invalid(&self, reason: String) -> Error {
        Error::InvalidWrite {
            run_id: self.record.run_id.to_string(),
            reason,
        }
    }

    /// A conflict at `part` of the run (`""` for the run itself).
    fn conflict(&self, part: &str, reason: String) -> Error {
        let run_id = &self.record.run_id;
        Error::Conflict {
            what: if part.is_empty() {
                format!("run {run_id}")
            } else {
                format!("run {run_id} {part}")
            },
            reason,
        }
    }

    fn check_commit(&self, commit: &Commit) -> Result<Verdict> {
        // A retry of a commit that is in effect succeeds whoever holds the
        // run now; anything new needs the committing attempt to hold it, and
        // an attempt that lost the run hears that first, whatever else its
        // commit contradicts.
        let verdict = self.check_commit_content(commit);
        if let (Ok(Verdict::Apply(_)) | Err(_), Some(fence)) = (&verdict, &commit.fence) {
            self.check_fence(fence)?;
        }
        verdict
    }

    /// Refuses a change by attempt `fence` unless it is the run's current
    /// attempt and the run is running.
    fn check_fence(&self, fence: &Fence) -> Result<()> {
        let record = &self.record;
        let reason = if record.status.is_terminal() {
            format!("the run is already {}", record.status)
        } else if record.attempts != fence.attempt || self.attempt_token != Some(fence.token) {
            format!(
                "attempt {} started after its lease expired and took the run over",
                record.attempts
            )
        } else {
            return Ok(());
        };
        Err(Error::LeaseLost {
            run_id: record.run_id.to_string(),
            attempt: fence.attempt,
            reason,
        })
    }

    fn check_commit_content(&self, commit: &Commit) -> Result<Verdict> {
        let digest = commit_digest(commit)?;
        let mut changes = false;
        match &commit.receipt {
            Some(receipt) => {
                if receipt.run_id != self.record.run_id {
                    return Err(
                        self.invalid(format!("the receipt belongs to run {}", receipt.run_id))
                    );
                }
                let n = receipt.sequence;
                let next = self.receipts.len() as u64;
                if n < next {
                    // Paired with the receipts wherever the state came from
                    // (`check_stored`).
                    let committed = usize::try_from(n)
                        .ok()
                        .and_then(|n| self.commit_digests.get(n));
                    if committed == Some(&digest) {
                        return Ok(Verdict::AlreadyApplied);
                    }
                    return Err(self.conflict(
                        &format!("step {n}"),
                        "a different commit is committed for this sequence".into(),
                    ));
                }
                if n > next {
                    return Err(self.invalid(format!(
                        "receipt sequence {n} skips sequence {next}: receipts are dense from 0"
                    )));
                }
                if self.record.status.is_terminal() {
                    return Err(self.conflict(
                        &format!("step {n}"),
                        format!("the run is already {}", self.record.status),
                    ));
                }
                changes = true;
            }
            None => {
                if commit.snapshot.is_some() {
                    return Err(self.invalid("a snapshot needs a commit with a receipt".into()));
                }
                if commit.status.is_none() && commit.input_updates.is_empty() {
                    return Err(self.invalid(
                        "a commit needs a receipt, a status change or input updates".into(),
                    ));
                }
            }
        }
        changes |= self.check_input_updates(commit)?;
        if let Some(change) = &commit.status {
            changes |= self.check_status(change, commit.at_ms)?;
        }
        // A terminal run is final, its inputs included: the terminal change
        // is the last entry of its history.
        if changes && self.record.status.is_terminal() {
            return Err(self.conflict("", format!("the run is already {}", self.record.status)));
        }
        Ok(if changes {
            Verdict::Apply(Approval {
                commit_digest: commit.receipt.as_ref().map(|_| digest),
            })
        } else {
            Verdict::AlreadyApplied
        })
    }

    /// `Ok(true)` if some update changes an input.
    fn check_input_updates(&self, commit: &Commit) -> Result<bool> {
        let mut changes = false;
        for (i, update) in commit.input_updates.iter().enumerate() {
            let id = &update.input_id;
            if commit.input_updates[..i].iter().any(|u| &u.input_id == id) {
                return Err(self.invalid(format!("input {id:?} is updated twice in one commit")));
            }
            let Some(current) = self.input(id) else {
                return Err(self.invalid(format!("no input {id:?} was appended to the run")));
            };
            let consumed_by = match (update.phase, &commit.receipt) {
                (InputPhase::Consumed, Some(receipt)) => Some(receipt.sequence),
                (InputPhase::Consumed, None) => {
                    return Err(self.invalid(format!(
                        "input {id:?} can only be consumed by a commit with a receipt"
                    )));
                }
                _ => None,
            };
            if current.phase == update.phase && current.consumed_by == consumed_by {
                continue;
            }
            if update.phase.rank() <= current.phase.rank() {
                return Err(self.conflict(
                    &format!("input {id:?}"),
                    format!(
                        "the input is {:?}{}; it cannot move to {:?}",
                        current.phase,
                        current
                            .consumed_by
                            .map(|s| format!(" by step {s}"))
                            .unwrap_or_default(),
                        update.phase
                    ),
                ));
            }
            changes = true;
        }
        Ok(changes)
    }

    /// `Ok(true)` if the change moves the run, `Ok(false)` if it is in effect.
    fn check_status(&self, change: &StatusChange, at_ms: u64) -> Result<bool> {
        let record = &self.record;
        if record.status.is_terminal() {
            if self.is_terminal_outcome(change, at_ms) {
                return Ok(false);
            }
            return Err(self.conflict(
                "",
                format!(
                    "the run is already {}; it cannot become {}",
                    record.status,
                    change.status()
                ),
            ));
        }
        let (attempt, token) = match *change {
            StatusChange::Running { attempt, token, .. } => (attempt, token),
            StatusChange::Lease {
                attempt,
                token,
                until_ms,
            } => {
                self.check_fence(&Fence { attempt, token })?;
                return Ok(record.lease.as_ref().is_none_or(|l| l.until_ms != until_ms));
            }
            _ => return Ok(true),
        };
        // Saturating: at `u32::MAX` attempts no attempt is next.
        let next = record.attempts.saturating_add(1);
        if attempt == next {
            if next == u32::MAX {
                return Err(self.invalid(format!(
                    "attempt {attempt} cannot start: it is the largest attempt number"
                )));
            }
            if let Some(lease) = record.lease.as_ref().filter(|l| l.is_live_at(at_ms)) {
                return Err(Error::LeaseHeld {
                    run_id: record.run_id.to_string(),
                    attempt: lease.attempt,
                    owner: lease.owner.clone(),
                    until_ms: lease.until_ms,
                });
            }
            return Ok(true);
        }
        if attempt == 0 || attempt > next {
            return Err(self.invalid(format!(
                "attempt {attempt} cannot start: the next attempt is {next}"
            )));
        }
        if attempt == record.attempts && self.attempt_token == Some(token) {
            return Ok(false);
        }
        Err(self.conflict(
            &format!("attempt {attempt}"),
            format!("attempt {attempt} already started"),
        ))
    }

    fn is_terminal_outcome(&self, change: &StatusChange, at_ms: u64) -> bool {
        let record = &self.record;
        if record.terminal_at_ms != Some(at_ms) || record.status != change.status() {
            return false;
        }
        match change {
            StatusChange::Running { .. } | StatusChange::Lease { .. } => false,
            StatusChange::Completed { output } => record.output.as_ref() == Some(output),
            StatusChange::Failed { error } => record.error.as_ref() == Some(error),
            StatusChange::Cancelled { reason } => &record.error == reason,
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
                match terminal {
                    StatusChange::Completed { output } => record.output = Some(output),
                    StatusChange::Failed { error } => record.error = Some(error),
                    StatusChange::Cancelled { reason } => record.error = reason,
                    StatusChange::Running { .. } | StatusChange::Lease { .. } => {}
                }
            }
        }
    }

    fn check_input(&self, input: &NewInput) -> Result<Verdict> {
        if input.input_id.is_empty() {
            return Err(self.invalid("an input id cannot be empty".into()));
        }
        if let Some(existing) = self.input(&input.input_id) {
            if existing.name == input.name && existing.payload == input.payload {
                return Ok(Verdict::AlreadyApplied);
            }
            return Err(self.conflict(
                &format!("input {:?}", input.input_id),
                "the input exists with a different name or payload".into(),
            ));
        }
        if self.record.status.is_terminal() {
            return Err(self.conflict(
                &format!("input {:?}", input.input_id),
                format!("the run is already {}", self.record.status),
            ));
        }
        Ok(Verdict::Apply(Approval {
            commit_digest: None,
        }))
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

/// SHA-256 of the commit's MessagePack encoding. `Commit` holds no maps, so
/// the encoding, and so the digest, is deterministic.
fn commit_digest(commit: &Commit) -> Result<[u8; 32]> {
    let encoded =
        codec::encode(commit).map_err(|e| Error::serialization("a runtime-store commit", e))?;
    Ok(Sha256::digest(&encoded).into())
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
        Change::Commit(Commit::status(StatusChange::start_attempt(attempt), 1))
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
}
