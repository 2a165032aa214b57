//! The inputs (signals) delivered to a run, and the phases they move
//! through.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::{Commit, RuntimeStore};

/// Where an input delivered to a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InputPhase {
    /// Recorded by [`RuntimeStore::append_input`].
    Accepted,
    /// Seen by the run and waiting to be consumed.
    Queued,
    /// Consumed by a step (terminal); the record names its sequence.
    Consumed,
    /// Dropped without being consumed (terminal): the workflow runtime
    /// refuses so a signal whose payload does not decode as what the run
    /// waits for (see [`Context::wait_for_signal`]).
    ///
    /// [`Context::wait_for_signal`]: crate::workflow::Context::wait_for_signal
    Abandoned,
}

impl InputPhase {
    /// The phase's place in the forward-only order; equal ranks are
    /// alternatives (`Consumed` or `Abandoned`).
    pub(crate) fn rank(self) -> u8 {
        match self {
            InputPhase::Accepted => 0,
            InputPhase::Queued => 1,
            InputPhase::Consumed | InputPhase::Abandoned => 2,
        }
    }
}

/// What [`RuntimeStore::append_input`] records: something delivered to a run
/// after it started, such as a signal or an approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewInput {
    /// The caller's id for the input, unique within the run (an idempotency
    /// key: appending the same id again with the same name and payload is a
    /// no-op).
    pub input_id: String,
    /// What kind of input it is (the signal's name).
    pub name: String,
    /// The input's payload, as encoded by the caller.
    pub payload: Bytes,
    /// When the input was accepted (ms since the Unix epoch).
    pub accepted_at_ms: u64,
}

/// An input delivered to a run, with where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InputRecord {
    /// The caller's id for the input, unique within the run.
    pub input_id: String,
    /// What kind of input it is (the signal's name).
    pub name: String,
    /// The input's payload.
    pub payload: Bytes,
    /// Where the input stands.
    pub phase: InputPhase,
    /// The sequence of the step that consumed it, once `Consumed`.
    pub consumed_by: Option<u64>,
    /// When the input was accepted (ms since the Unix epoch).
    pub accepted_at_ms: u64,
}

/// A phase change of one input, part of a [`Commit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputUpdate {
    /// The input to move.
    pub input_id: String,
    /// Its new phase. `Consumed` needs a commit with a receipt: the receipt's
    /// sequence is recorded as the consumer.
    pub phase: InputPhase,
}
