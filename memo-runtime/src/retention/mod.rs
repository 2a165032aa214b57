//! Retention: which runs ended when ([`TerminalMarker`]s, read and written
//! through [`Markers`]) and the [`RetentionSweeper`] that clears what a run
//! left behind once its marker is older than the retention period.
//!
//! Memo entries and run records are write-once, so nothing removes them but
//! this: a workflow run writes its marker when it ends, and a sweeper
//! ([`Runtime::retention_sweeper`](crate::workflow::Runtime::retention_sweeper),
//! one in every worker is safe) clears the runs whose marker expired. Use
//! [`RetentionSweeper::builder`] for a sweeper over stores of your own, and
//! [`Markers::write_standalone`] to let it clear standalone memos. The
//! repository's `docs/guide/retention.md` walks through it.
//!
//! This layer sits above the memo store and the runtime store and below the
//! workflow runtime.

mod markers;
mod sweeper;

pub use markers::{MARKER_PARTITION_MS, MarkerPage, Markers, TerminalMarker};
pub use sweeper::{
    DEFAULT_RECHECK_AFTER, DEFAULT_SWEEP_CONCURRENCY, DEFAULT_SWEEP_PAGE_SIZE, RetentionSweeper,
    RetentionSweeperBuilder, SweepFailure, SweepReport, SweeperHandle, SweeperSummary,
};
