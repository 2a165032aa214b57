//! The folded run an instance keeps: a run's state folded up to a log
//! position, with what the instance knows of its checkpoints. The data the
//! run cache holds and the log and the checkpoints fill; no I/O.

use object_store::UpdateVersion;
use object_store::path::Path;

use crate::run_id::Incarnation;
use crate::runtime_store::state::{RunState, Standing};

/// A run folded up to (not including) log position `next`.
#[derive(Debug)]
pub(super) struct Folded {
    pub(super) state: RunState,
    pub(super) next: u64,
    pub(super) incarnation: Incarnation,
    /// What this instance knows of the run's checkpoints.
    pub(super) checkpoints: Checkpoints,
    /// The version of the run pointer, naming this incarnation, as this
    /// instance last read it (`None` if it restored the pointer, or created
    /// it): what a deletion of the run updates to vacate it without reading
    /// it again. A version that changed since only costs that read.
    pub(super) pointer_version: Option<UpdateVersion>,
}

impl Folded {
    /// A run as created, before its first log entry.
    pub(super) fn created(state: RunState, incarnation: Incarnation) -> Folded {
        Folded {
            state,
            next: 0,
            incarnation,
            checkpoints: Checkpoints::default(),
            pointer_version: None,
        }
    }
}

/// What one instance knows of a run's checkpoints.
#[derive(Debug, Default)]
pub(super) struct Checkpoints {
    /// The position of the newest delta this instance read or wrote (0:
    /// none, so one is due as soon as the run has `interval` entries).
    pub(super) delta: u64,
    /// Where that delta is stored.
    pub(super) delta_at: Option<Path>,
    /// The base the next delta names: one this instance read, or whose
    /// create it saw settle.
    pub(super) base: Option<Base>,
    /// Deltas and bases newer ones replaced, deleted once a delta of this
    /// instance settles.
    pub(super) superseded: Vec<Path>,
}

/// A base, as the deltas that name it need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Base {
    pub(super) position: u64,
    pub(super) receipts: u64,
    pub(super) inputs: u64,
    /// Where each of its inputs stands in it, if this instance knows (it
    /// read or wrote the base); if not, a delta names where every one of
    /// them stands now.
    pub(super) standings: Option<Vec<Standing>>,
}

impl Base {
    pub(super) fn of(position: u64, state: &RunState) -> Base {
        Base {
            position,
            receipts: state.receipt_count(),
            inputs: state.input_count(),
            standings: Some(state.standings(state.input_count())),
        }
    }
}
