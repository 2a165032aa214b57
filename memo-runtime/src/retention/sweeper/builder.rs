//! How a sweeper is configured: its builder and the defaults it starts from.

use std::sync::Arc;
use std::time::Duration;

use super::{RetentionSweeper, SweeperConfig};
use crate::clock::{Clock, SystemClock};
use crate::memo::MemoStore;
use crate::runtime_store::RuntimeStore;

/// How many expired markers a pass takes from the listing at a time, unless
/// [`RetentionSweeperBuilder::page_size`] says otherwise.
pub const DEFAULT_SWEEP_PAGE_SIZE: usize = 500;

/// How many runs of a page are cleared at once, unless
/// [`RetentionSweeperBuilder::concurrency`] says otherwise.
pub const DEFAULT_SWEEP_CONCURRENCY: usize = 8;

/// How long after a sweep deletes a workflow run a pass clears the run's
/// folders once more, unless [`RetentionSweeperBuilder::recheck_after`]
/// says otherwise: one hour.
pub const DEFAULT_RECHECK_AFTER: Duration = Duration::from_secs(3600);

/// Configures a [`RetentionSweeper`]; made by [`RetentionSweeper::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RetentionSweeperBuilder {
    config: SweeperConfig,
}

impl RetentionSweeperBuilder {
    /// Also deletes each expired run's records in `store` (after its memo
    /// entries, before its marker), and refuses to clear a run that `store`
    /// holds in a status that is not terminal. Without a runtime store only
    /// memo and step-output entries are deleted.
    pub fn runtime_store(mut self, store: Arc<dyn RuntimeStore>) -> Self {
        self.config.runtime_store = Some(store);
        self
    }

    /// Clears the runs whose terminal marker is more than `retention` old:
    /// replaces the retention the builder was made with (the runtime's, for
    /// [`Runtime::retention_sweeper_builder`](crate::workflow::Runtime::retention_sweeper_builder)).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.config.retention = retention;
        self
    }

    /// The clock the background task reads at each pass (default
    /// [`SystemClock`]). [`RetentionSweeper::sweep_once`] takes the time as
    /// an argument instead.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }

    /// How many expired markers a pass takes from the listing at a time
    /// (default [`DEFAULT_SWEEP_PAGE_SIZE`]; 0 counts as 1). A page is
    /// finished before the next is listed, which bounds the memory a pass
    /// holds whatever the number of expired runs. The markers of a page's
    /// cleared runs are deleted together once its runs are done (on S3 one
    /// request per 1,000 markers).
    pub fn page_size(mut self, markers: usize) -> Self {
        self.config.page_size = markers.max(1);
        self
    }

    /// How many runs of a page are cleared at once (default
    /// [`DEFAULT_SWEEP_CONCURRENCY`]; 0 counts as 1). Each run's entries are
    /// themselves deleted in batches by the backend.
    pub fn concurrency(mut self, runs: usize) -> Self {
        self.config.concurrency = runs.max(1);
        self
    }

    /// In dry-run mode a pass deletes nothing: it counts the runs it would
    /// clear and the entries it would delete (default off).
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.config.dry_run = dry_run;
        self
    }

    /// How long after a sweep deletes a workflow run's incarnation a later
    /// pass clears its folders once more (default
    /// [`DEFAULT_RECHECK_AFTER`]): what a stale attempt of the run wrote
    /// there after the sweep, if it died before taking the write back. A
    /// write that lands later than this after the sweep, from a writer that
    /// then dies, is left. Counted from when the deletion began: the time
    /// of the pass that buried the run, which every sweep of it reads back
    /// (two at once, or one finishing another's), so that they leave one
    /// recheck between them; where no deleter recorded one
    /// ([`RuntimeStore::delete_run`] alone, or an older release), from
    /// when the run's marker expired. Saturates: with [`Duration::MAX`] a
    /// recheck comes due only at the end of the clock's range
    /// (`u64::MAX - 1` ms).
    pub fn recheck_after(mut self, after: Duration) -> Self {
        self.config.recheck_after = after;
        self
    }

    /// The configured sweeper.
    pub fn build(self) -> RetentionSweeper {
        RetentionSweeper {
            config: Arc::new(self.config),
        }
    }
}

impl RetentionSweeper {
    /// A builder for a sweeper over `memo_store` that clears runs whose
    /// terminal marker is more than `retention` old.
    pub fn builder(memo_store: MemoStore, retention: Duration) -> RetentionSweeperBuilder {
        RetentionSweeperBuilder {
            config: SweeperConfig {
                memo_store,
                runtime_store: None,
                retention,
                clock: Arc::new(SystemClock),
                page_size: DEFAULT_SWEEP_PAGE_SIZE,
                concurrency: DEFAULT_SWEEP_CONCURRENCY,
                dry_run: false,
                recheck_after: DEFAULT_RECHECK_AFTER,
                proven: std::sync::atomic::AtomicBool::new(false),
                unrechecked: std::sync::Mutex::default(),
            },
        }
    }
}
