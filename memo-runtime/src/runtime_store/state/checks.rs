//! How each change is checked against a run: a commit's fence, receipt,
//! input updates and status change, an appended input; the verdict says
//! whether it applies, is already in effect, or is refused and why.

use sha2::{Digest, Sha256};

use super::{Approval, RunState, Verdict};
use crate::codec;
use crate::error::{Error, Result};
use crate::runtime_store::{Commit, Fence, InputPhase, NewInput, StatusChange};

impl RunState {
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

    pub(super) fn check_commit(&self, commit: &Commit) -> Result<Verdict> {
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
        self.check_cost(commit)?;
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

    /// Refuses an attempt's cost on a commit that does not end the run, or
    /// on one whose fence names another attempt.
    fn check_cost(&self, commit: &Commit) -> Result<()> {
        let Some(cost) = &commit.cost else {
            return Ok(());
        };
        let ends = (commit.status.as_ref()).is_some_and(|change| change.status().is_terminal());
        if !ends {
            return Err(
                self.invalid("only the commit that ends the run carries an attempt's cost".into())
            );
        }
        if let Some(fence) = &commit.fence
            && fence.attempt != cost.attempt
        {
            return Err(self.invalid(format!(
                "attempt {}'s commit carries attempt {}'s cost",
                fence.attempt, cost.attempt
            )));
        }
        Ok(())
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

    pub(super) fn check_input(&self, input: &NewInput) -> Result<Verdict> {
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
}

/// SHA-256 of the commit's MessagePack encoding. `Commit` holds no maps, so
/// the encoding, and so the digest, is deterministic.
fn commit_digest(commit: &Commit) -> Result<[u8; 32]> {
    let encoded =
        codec::encode(commit).map_err(|e| Error::serialization("a runtime-store commit", e))?;
    Ok(Sha256::digest(&encoded).into())
}
