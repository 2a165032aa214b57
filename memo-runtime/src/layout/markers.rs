//! The paths of markers: terminal markers (`terminals/`) and recheck
//! markers (`rechecks/`), one layout under two folders.

use object_store::path::Path;

use super::segment::incarnation_name;
use super::{Layout, MARKER_HOUR_MS};
use crate::run_id::{Incarnation, RunId};

impl Layout {
    /// `terminals` or `rechecks`: the folder of one kind of marker.
    pub(crate) fn markers_folder(&self, kind: &str) -> Path {
        self.base.clone().join(kind)
    }

    /// `<kind>/<hour>`: the folder of markers of the hour starting at
    /// `hour_ms`.
    pub(crate) fn marker_hour(&self, kind: &str, hour_ms: u64) -> Path {
        self.markers_folder(kind).join(format!("{hour_ms:020}"))
    }

    /// `<kind>/<hour>/<inverted>_<run>.<inc>`.
    pub(crate) fn marker(
        &self,
        kind: &str,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> Path {
        let hour = at_ms - at_ms % MARKER_HOUR_MS;
        self.marker_hour(kind, hour).join(format!(
            "{:020}_{}",
            u64::MAX - at_ms,
            incarnation_name(run_id, incarnation)
        ))
    }

    /// The first name in an hour folder at or after which every marker is
    /// strictly older than `cutoff_ms` (markers sort newest first).
    pub(crate) fn marker_offset(&self, kind: &str, hour_ms: u64, cutoff_ms: u64) -> Path {
        // `z` sorts after the `_` that follows the digits; `~` would be escaped.
        self.marker_hour(kind, hour_ms)
            .join(format!("{:020}z", u64::MAX - cutoff_ms))
    }
}
