//! Retention: which runs ended when ([`TerminalMarker`]s, read and written
//! through [`Markers`]) and the [`RetentionSweeper`] that clears what a run
//! left behind once its marker is older than the retention period.
//!
//! This layer sits above the memo store and the runtime store and below the
//! workflow runtime: a workflow run writes its marker when it ends, and
//! [`Runtime::retention_sweeper`](crate::workflow::Runtime::retention_sweeper)
//! builds a sweeper over the runtime's stores.

mod markers;
mod sweeper;

pub use markers::{MARKER_PARTITION_MS, Markers, TerminalMarker};
pub use sweeper::{
    DEFAULT_SWEEP_CONCURRENCY, DEFAULT_SWEEP_PAGE_SIZE, RetentionSweeper, RetentionSweeperBuilder,
    SweepFailure, SweepReport, SweeperHandle, SweeperSummary,
};
