//! Whose payloads a data key seals, and the name the key store keeps the
//! key under.

use crate::layout::run_segment;
use crate::run_id::{Incarnation, RunId};

/// Whose payloads a data key seals: what names it in the key store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyScope {
    /// One run: writes use `incarnation`'s key, reads the key of the
    /// incarnation their frame names (the run pointer's reader does not
    /// know it beforehand).
    Run {
        run_id: RunId,
        incarnation: Option<Incarnation>,
    },
    /// One shared namespace.
    Shared(String),
}

impl KeyScope {
    /// The id a frame written in this scope records: the incarnation, or 0.
    pub(crate) fn write_id(&self) -> Option<u64> {
        match self {
            KeyScope::Run { incarnation, .. } => incarnation.map(Incarnation::as_u64),
            KeyScope::Shared(_) => Some(0),
        }
    }

    /// Whether the key of `id` in this scope is a standalone run's, whose
    /// name is used again after every forget, so that it has generations
    /// (see [`DataKeys`](super::DataKeys), *Standalone runs*).
    pub(crate) fn generational(&self, id: u64) -> bool {
        matches!(self, KeyScope::Run { .. }) && id == Incarnation::STANDALONE.as_u64()
    }

    /// Whether a payload of this scope sealed with a generation of its key
    /// that the key store no longer holds is a miss: one of a standalone
    /// memo's entries, which belongs to a cleared run (a write that raced
    /// the clear) and which the next put of its key replaces. Any other
    /// reader (a run pointer's, whose scope names no incarnation; a tool's)
    /// reports it as corrupt.
    pub(crate) fn stale_is_miss(&self) -> bool {
        matches!(self, KeyScope::Run { incarnation: Some(incarnation), .. }
            if *incarnation == Incarnation::STANDALONE)
    }

    /// The key store's name of the key a frame with `id` was sealed with.
    pub(crate) fn name(&self, id: u64) -> Option<String> {
        match self {
            KeyScope::Run { run_id, .. } => Some(run_key_name(run_id, Incarnation::from_u64(id))),
            KeyScope::Shared(ns) => (id == 0).then(|| format!("shared/{ns}")),
        }
    }
}

pub(super) fn run_key_name(run_id: &RunId, incarnation: Incarnation) -> String {
    format!("runs/{}/{incarnation}", run_segment(run_id))
}
