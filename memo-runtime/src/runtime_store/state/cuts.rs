//! A run's state cut and joined for checkpoints (a base holds the first
//! receipts and inputs, a delta the rest), and the checks a state read back
//! from a checkpoint gets.

use std::collections::HashMap;

use super::{RunState, Standing};
use crate::runtime_store::InputPhase;

impl RunState {
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
        if self.ending_cost.is_some() && !record.status.is_terminal() {
            return Err(format!(
                "the cost of an ending attempt in a {} run",
                record.status
            ));
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
            ending_cost: self.ending_cost.clone(),
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
            ending_cost: None,
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
}
