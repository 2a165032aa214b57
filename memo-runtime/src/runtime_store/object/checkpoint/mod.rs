//! Run checkpoints: the run folded up to a log position, so that loading a
//! run reads a checkpoint and the few entries after it instead of the whole
//! log.
//!
//! Checkpoints come at two levels, so that a long run is not copied whole
//! every few entries (which uploads bytes growing with the square of its
//! length):
//!
//! - a *base* (`checkpoint/<p>`) is the whole run up to `p`, written rarely:
//!   when the receipts and inputs since the previous base reach `2·√items`
//!   (at least [`MIN_BASE_ITEMS`]), so a run of `n` steps and signals
//!   uploads about `n^1.5` items' worth of checkpoints rather than `n²`;
//! - a *delta* (`deltas/<u64::MAX - q>`) is the run up to `q` without the receipts
//!   and inputs (signals) of the base it names, and where those inputs
//!   stand now if that moved since the base (the record and snapshot stay
//!   whole: they change in place), written every few entries; at the
//!   terminal change it names no base and holds the whole run, so a finished
//!   run is read from it alone. Deltas of the older forms are still read
//!   when a run has none of this one: `delta/v2/<q>` (the same record,
//!   deleted as newer ones settled) and, from before inputs were kept in
//!   bases, `delta/<q>` (every input whole; a run of `n` signals made them
//!   write about `n²` signals' worth).
//!
//! A load reads the newest delta and its base and folds the log after the
//! delta; with no delta (data written before deltas existed, or a run
//! younger than its first one) it reads the newest base, as before.
//!
//! A checkpoint is read with the distrust a log entry gets: a log entry is
//! checked against the rules as it is folded, a checkpoint against what
//! those rules keep true (`RunState::check_stored`: receipts dense and each
//! with its commit digest, positions and attempt counts below their
//! largest value, each input once), so a damaged or forged one is
//! `Corrupt` naming it, never a panic or an overflow later.
//!
//! A checkpoint is a copy of what the log says, never the only record of a
//! change, so every rule of the log still holds with checkpoints:
//!
//! - it is derived only from committed entries: a writer checkpoints the
//!   state it folded from entries it read or created (and whose run pointer
//!   it checked, or whose lease answered for it: a check that then finds
//!   the run gone takes the checkpoints written after them back too, see
//!   `runs/unchecked.rs`), up to but not including the position it names;
//! - it is write-once (`PutMode::Create`). A base's content is a function of
//!   the entries before its position (the state encodes deterministically),
//!   so two writers of one base write the same bytes. Two writers of one
//!   delta position may not (one may name an older base): the first create
//!   stands, and the loser deletes nothing on the strength of its own;
//! - a delta is created only after the base it names exists: one this
//!   instance read, or whose create it saw settle. A base write that fails
//!   leaves the next delta naming the previous base;
//! - the log stays authoritative: a commit racing a checkpoint write goes to
//!   the log, after the checkpoint's position, where a reader finds it; a
//!   checkpoint write that fails or never happens only leaves a longer tail
//!   to fold (the next writer checkpoints it);
//! - deltas are kept until the run's deletion (which deletes its whole
//!   folder): each is named `u64::MAX - position`, so a listing in order
//!   (object storage lists so, and memo's local folder lists so from an
//!   offset) names the newest first, and reading that one name is one
//!   request however many the folder holds. Deleting each superseded delta
//!   instead cost a `DELETE` every `interval` commits while the run ran. On
//!   a store that lists in no order the first name may be an older delta:
//!   still a copy of committed entries, so the load is right and only folds
//!   a longer tail;
//! - superseded bases (and deltas of the older forms under `delta/`) are
//!   deleted (best effort), but only once a newer delta of this instance
//!   settled, so the base folder holds about one object and listing it is
//!   one request whatever the run's length. The newest base is kept when
//!   the run ends, for readers that know bases only. A reader whose delta
//!   vanished between its listing and its read lists again; one whose delta
//!   names a base deleted meanwhile (a writer that was behind named an old
//!   base) reads the newest base and the longer tail after it instead.

mod read;
mod write;

use std::sync::Arc;

use object_store::path::Path;
use serde::{Deserialize, Serialize};

use super::client::Client;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::InputPhase;

/// The checkpoints of one store's runs: `read` loads a run from them,
/// `write` writes them after commits, every `interval` log entries (one
/// more while the run has no base).
pub(super) struct Checkpointer {
    client: Arc<Client>,
    interval: u64,
}

impl Checkpointer {
    /// Checkpoints written every `interval` log entries (at least 1).
    pub(super) fn new(client: Arc<Client>, interval: u64) -> Checkpointer {
        Checkpointer {
            client,
            interval: interval.max(1),
        }
    }

    fn delta_path(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        (position, form): (u64, DeltaForm),
    ) -> Path {
        let layout = self.client.layout();
        match form {
            DeltaForm::Whole => layout.delta(run_id, incarnation, position),
            DeltaForm::InputsInBase => layout.delta_v2(run_id, incarnation, position),
            DeltaForm::NewestFirst => layout.delta_newest_first(run_id, incarnation, position),
        }
    }
}

/// How many listings of a checkpoint folder a load tries before it reads
/// less: each retry means a newer checkpoint replaced the one listed, which
/// takes other writers `interval` commits each time.
const LISTING_ATTEMPTS: usize = 3;

/// The fewest receipts and inputs a new base takes over the previous one.
/// Below `2·√items` (the interval that balances the bytes of bases against
/// those of deltas) a run of a few hundred steps would write a base every
/// few dozen; runs shorter than this never write one.
const MIN_BASE_ITEMS: u64 = 32;

/// A stored base: the run folded from its log entries before `next`.
#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint<S> {
    incarnation: Incarnation,
    next: u64,
    state: S,
}

/// A stored delta: the run folded from its log entries before `next`,
/// without the first `receipts_from` receipts and the first `inputs_from`
/// inputs, which the base at `base` holds (`None`: no base, both are 0 and
/// `state` is whole). `standings` says where those of the base's inputs
/// stand now that stand otherwise in the base (`(index, phase, consumer)`).
///
/// Deltas under `deltas/` and `delta/v2/` have this form; those directly
/// under `delta/`
/// (written before inputs were kept in bases) lack the last two fields,
/// which decode as 0 and empty: their `state` holds every input.
#[derive(Debug, Serialize, Deserialize)]
struct Delta<S> {
    incarnation: Incarnation,
    next: u64,
    base: Option<u64>,
    receipts_from: u64,
    #[serde(default)]
    inputs_from: u64,
    #[serde(default)]
    standings: Vec<(u64, InputPhase, Option<u64>)>,
    state: S,
}

/// Which of the forms of delta a stored one has (see [`Delta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DeltaForm {
    /// `delta/<position>`: every input in its state.
    Whole,
    /// `delta/v2/<position>`: inputs kept in the base; deleted once a newer
    /// delta settles.
    InputsInBase,
    /// `deltas/<u64::MAX - position>`: as `InputsInBase`, named newest
    /// first and kept until the run's deletion; the form written.
    NewestFirst,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    fn hex_bytes(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The stored form of a delta that leaves receipts and inputs to its
    /// base (`delta/v2/`): a data format, pinned byte for byte (`()` stands
    /// in for the run state, whose form this change leaves as it was).
    #[test]
    fn a_delta_that_leaves_inputs_to_its_base_is_pinned() {
        let delta = Delta {
            incarnation: Incarnation::from_u64(0xab),
            next: 72,
            base: Some(64),
            receipts_from: 3,
            inputs_from: 2,
            standings: vec![(1, InputPhase::Consumed, Some(2))],
            state: (),
        };
        let encoded = codec::encode(&delta).unwrap();
        assert_eq!(
            hex(&encoded),
            "87ab696e6361726e6174696f6eccaba46e65787448a46261736540ad72656365697074735f66726f6d03\
             ab696e707574735f66726f6d02a97374616e64696e6773919301a8436f6e73756d656402a57374617465c0"
        );
        // A delta of the release before decodes with nothing left to its
        // base's inputs.
        let old = "85ab696e6361726e6174696f6eccaba46e65787444a46261736540\
                   ad72656365697074735f66726f6d03a57374617465c0";
        let old: Delta<()> = codec::decode(&hex_bytes(old)).unwrap();
        assert_eq!((old.inputs_from, old.standings.len()), (0, 0));
    }
}
