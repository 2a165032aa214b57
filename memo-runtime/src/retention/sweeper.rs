//! Retention: clearing what runs left behind once their terminal marker is
//! older than the retention period, in passes or in a background task.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt, TryStreamExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::clock::{Clock, SystemClock};
use crate::due_index;
use crate::error::{Error, Result};
use crate::memo::MemoStore;
use crate::retention::TerminalMarker;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::RuntimeStore;

/// How many expired markers a pass takes from the listing at a time, unless
/// [`RetentionSweeperBuilder::page_size`] says otherwise.
pub const DEFAULT_SWEEP_PAGE_SIZE: usize = 500;

/// How many runs of a page are cleared at once, unless
/// [`RetentionSweeperBuilder::concurrency`] says otherwise.
pub const DEFAULT_SWEEP_CONCURRENCY: usize = 8;

/// Deletes the memo entries, step-output entries and (optionally) the
/// runtime-store records of runs that reached a terminal state more than a
/// retention period ago.
///
/// A pass ([`sweep_once`](Self::sweep_once)) streams the expired
/// [`TerminalMarker`]s in pages (its listing cost grows with the number of
/// expired markers, not the number retained; on LocalFileSystem, which keeps
/// emptied folders, every later pass also lists each emptied hour folder,
/// finding nothing) and, for each run, with a bounded number of runs at once:
///
/// 1. if a runtime store is configured, checks that the marker's
///    incarnation of the run is terminal there (a marker of a run that is
///    not terminal deletes nothing), or that the id holds a later run
///    there; a marker of a workflow run the runtime store does not hold at
///    all deletes nothing of its memo entries while it has some left (the
///    runtime store may be the wrong one), only what a deletion of its
///    incarnation that stopped part way left in the runtime store, and is
///    deleted once the entries are gone (what a pass that stopped before
///    the marker, or [`RetentionSweeper::delete_run`], leaves); a standalone run's marker
///    ([`Incarnation::STANDALONE`]) names no runtime-store run;
/// 2. clears the memo and step-output entries of the marker's incarnation
///    ([`MemoStore::clear_incarnation`]), and of no other: a run created
///    again under the same id is another incarnation and is never touched;
/// 3. deletes that incarnation's runtime-store records, if a runtime store
///    is configured ([`RuntimeStore::delete_run`]);
/// 4. deletes the marker, only if every delete before it succeeded.
///
/// A failure at any step is recorded in the [`SweepReport`] and leaves the
/// marker in place, so the next pass finishes the run; a crash mid-pass does
/// the same. Every step is idempotent, so running passes concurrently (two
/// processes, a sweeper in every worker) is safe, only wasteful: a pass that
/// checked a run and stalled while another pass deleted it and a new run of
/// the same id began touches nothing of the new run (see
/// [`RuntimeStore::delete_run`]). Standalone runs (memos outside a
/// workflow) have no incarnations of their own: a standalone run id used
/// again while a stalled pass clears its expired predecessor may lose the
/// entries the new use wrote before the pass ended; use a fresh id for each
/// standalone run, or workflow runs, where that matters.
///
/// Cheap to clone: clones share their configuration.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory, retention::RetentionSweeper};
///
/// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
/// let (old, recent) = (RunId::new("old-run")?, RunId::new("recent-run")?);
/// for run in [&old, &recent] {
///     store.new_memo(run, 0).put("answer", b"42").await?;
/// }
/// let day_ms = 24 * 60 * 60 * 1000;
/// store.markers().write_standalone(&old, 10 * day_ms).await?;
/// store.markers().write_standalone(&recent, 16 * day_ms).await?;
///
/// let sweeper = RetentionSweeper::builder(store.clone(), Duration::from_secs(7 * 24 * 3600))
///     .page_size(100)
///     .concurrency(4)
///     .build();
/// let report = sweeper.sweep_once(18 * day_ms).await?;
/// assert_eq!((report.runs_cleared, report.entries_deleted), (1, 1));
/// assert!(report.failures.is_empty());
/// assert_eq!(store.new_memo(&old, 0).get("answer").await?, None);
/// assert!(store.new_memo(&recent, 0).get("answer").await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RetentionSweeper {
    config: Arc<SweeperConfig>,
}

#[derive(Debug)]
struct SweeperConfig {
    memo_store: MemoStore,
    runtime_store: Option<Arc<dyn RuntimeStore>>,
    retention: Duration,
    clock: Arc<dyn Clock>,
    page_size: usize,
    concurrency: usize,
    dry_run: bool,
}

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
    /// holds whatever the number of expired runs.
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
            },
        }
    }

    /// How long a run's data is kept after it reached a terminal state.
    pub fn retention(&self) -> Duration {
        self.config.retention
    }

    /// Whether passes only count what they would delete.
    pub fn is_dry_run(&self) -> bool {
        self.config.dry_run
    }

    /// The cutoff a pass at `now_ms` uses: runs terminal strictly before it
    /// are expired, a run terminal at exactly the cutoff is kept.
    pub fn cutoff_ms(&self, now_ms: u64) -> u64 {
        let retention_ms = u64::try_from(self.config.retention.as_millis()).unwrap_or(u64::MAX);
        now_ms.saturating_sub(retention_ms)
    }

    /// Runs one pass at `now_ms` (milliseconds since the Unix epoch) and
    /// reports what it did.
    ///
    /// A run whose clearing failed is named in
    /// [`SweepReport::failures`]; its marker is kept for the next pass, and
    /// the pass goes on with the other runs.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if listing the expired markers fails. Runs of pages
    /// already swept stay swept (their markers are gone); the rest are left
    /// for the next pass.
    pub async fn sweep_once(&self, now_ms: u64) -> Result<SweepReport> {
        let cutoff_ms = self.cutoff_ms(now_ms);
        let span = tracing::info_span!("memo.sweep", cutoff_ms, dry_run = self.config.dry_run);
        async move {
            let mut report = self.sweep_before(cutoff_ms).await?;
            self.tidy_due_index(now_ms, &mut report).await;
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// Deletes the due-run entries due by `now_ms` whose run has ended, is
    /// gone, or is another incarnation now (in a dry run: counts them), so
    /// the index does not keep what the runs it names left behind: an
    /// interrupted attempt's entry once another attempt ended the run, a
    /// signal's entry once a redelivery ran the run, the entries of a run
    /// this pass cleared. Needs a runtime store to read the runs; costs the
    /// listing of the entries due by `now_ms` and a run load per entry (what
    /// a worker's poll costs). An entry of a run that still waits stays, and
    /// so does one due after `now_ms` (a later pass, or a worker, deletes it
    /// once due). Best effort: a failure is logged and the entry is left for
    /// the next pass; a stale entry is harmless meanwhile.
    async fn tidy_due_index(&self, now_ms: u64, report: &mut SweepReport) {
        let config = &*self.config;
        let Some(runs) = &config.runtime_store else {
            return;
        };
        let mut entries = due_index::due_at(&config.memo_store, now_ms);
        loop {
            let due = match entries.try_next().await {
                Ok(Some(due)) => due,
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "listing the due-run index failed; its tidying stops here");
                    break;
                }
            };
            let stale = match runs.load_run(&due.run_id).await {
                Ok(None) => true,
                Ok(Some(record)) => {
                    record.incarnation != due.incarnation || record.status.is_terminal()
                }
                Err(error) => {
                    tracing::warn!(run_id = %due.run_id, %error, "due-run entry kept: its run cannot be read");
                    continue;
                }
            };
            if !stale {
                continue;
            }
            if config.dry_run {
                report.due_entries_deleted += 1;
                continue;
            }
            match due_index::delete(&config.memo_store, &due).await {
                Ok(()) => report.due_entries_deleted += 1,
                Err(error) => {
                    tracing::warn!(run_id = %due.run_id, %error, "stale due-run entry not deleted");
                }
            }
        }
    }

    /// Runs one pass at the configured clock's current time.
    ///
    /// # Errors
    ///
    /// As [`sweep_once`](Self::sweep_once).
    pub async fn sweep_now(&self) -> Result<SweepReport> {
        self.sweep_once(self.config.clock.now_ms()).await
    }

    async fn sweep_before(&self, cutoff_ms: u64) -> Result<SweepReport> {
        let config = &*self.config;
        let mut report = SweepReport::empty(cutoff_ms, config.dry_run);
        let mut pages = config
            .memo_store
            .markers()
            .expired(cutoff_ms)
            .try_chunks(config.page_size);
        loop {
            let page = match pages.try_next().await {
                Ok(Some(page)) => page,
                Ok(None) => break,
                Err(stream::TryChunksError(_, error)) => {
                    tracing::warn!(
                        error = %error,
                        runs_cleared = report.runs_cleared,
                        "listing expired markers failed; the pass stops here"
                    );
                    return Err(error);
                }
            };
            report.pages += 1;
            report.markers_expired += page.len();
            let mut outcomes = stream::iter(page)
                .map(|marker| async move {
                    let mut swept = RunSwept::default();
                    let result = self.sweep_run(&marker, &mut swept).await;
                    (marker, swept, result)
                })
                .buffer_unordered(config.concurrency);
            while let Some((marker, swept, result)) = outcomes.next().await {
                report.record(marker, swept, result);
            }
            tracing::debug!(
                page = report.pages,
                markers_expired = report.markers_expired,
                "page swept"
            );
        }
        tracing::info!(
            markers_expired = report.markers_expired,
            runs_cleared = report.runs_cleared,
            entries_deleted = report.entries_deleted,
            runtime_runs_deleted = report.runtime_runs_deleted,
            failures = report.failures.len(),
            "sweep finished"
        );
        Ok(report)
    }

    /// Clears one expired run (or, in dry-run mode, counts what clearing it
    /// would delete), recording in `swept` what it deleted even if it then
    /// fails. The marker goes last, so any failure keeps it.
    async fn sweep_run(&self, marker: &TerminalMarker, swept: &mut RunSwept) -> Result<()> {
        let config = &*self.config;
        let (run_id, incarnation) = (&marker.run_id, marker.incarnation);
        let span = tracing::debug_span!(
            "memo.sweep.run",
            run_id = %run_id,
            %incarnation,
            terminal_at_ms = marker.terminal_at_ms
        );
        async move {
            let has_record = match self.check_terminal(run_id, incarnation).await? {
                Found::Terminal => true,
                Found::Other => false,
                // A standalone run (memos outside a workflow) is never in a
                // runtime store.
                Found::Nothing if incarnation == Incarnation::STANDALONE => false,
                Found::Nothing => {
                    self.finish_deletion(run_id, incarnation).await?;
                    self.check_nothing_left(run_id, incarnation).await?;
                    false
                }
            };
            if config.dry_run {
                swept.entries = config
                    .memo_store
                    .count_incarnation_entries(run_id, incarnation)
                    .await?;
                swept.runtime_record = has_record;
                return Ok(());
            }
            let cleared = config
                .memo_store
                .clear_incarnation(run_id, incarnation)
                .await;
            swept.entries = match cleared {
                Ok(deleted) => deleted,
                Err(error) => {
                    if let Error::ClearIncomplete { deleted, .. } = &error {
                        swept.entries = *deleted;
                    }
                    return Err(error);
                }
            };
            if let Some(store) = &config.runtime_store {
                swept.runtime_record = store.delete_run(run_id, incarnation).await?;
            }
            config.memo_store.markers().delete(marker).await?;
            tracing::debug!(
                entries = swept.entries,
                runtime_record = swept.runtime_record,
                "run cleared"
            );
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// What the runtime store (if any) holds of the marker's run; an error
    /// if it holds the marker's incarnation in a status that is not
    /// terminal, so that a stray marker can never clear a live run's
    /// entries. A later run of the same id (another incarnation) is not the
    /// marker's run: that the id was used again proves the marker's run was
    /// deleted from this runtime store. If that later run has ended, it is
    /// given its marker (a no-op if it has one): `Runtime::recover` counts
    /// an id with a marker of any incarnation as marked, so a later run
    /// whose own attempt stopped before marking it would otherwise be left
    /// unmarked, and never swept, once this marker is gone.
    async fn check_terminal(&self, run_id: &RunId, incarnation: Incarnation) -> Result<Found> {
        let Some(store) = &self.config.runtime_store else {
            return Ok(Found::Other);
        };
        match store.load_run(run_id).await? {
            None => Ok(Found::Nothing),
            Some(run) if run.incarnation != incarnation => {
                if let Some(terminal_at_ms) = run.terminal_at_ms.filter(|_| !self.config.dry_run) {
                    let later = TerminalMarker {
                        run_id: run_id.clone(),
                        terminal_at_ms,
                        incarnation: run.incarnation,
                    };
                    self.config.memo_store.markers().write(&later).await?;
                }
                Ok(Found::Other)
            }
            Some(run) if run.status.is_terminal() => Ok(Found::Terminal),
            Some(run) => Err(Error::Conflict {
                what: format!("run {run_id}"),
                reason: format!(
                    "it has an expired terminal marker but its status is {}; \
                     nothing was deleted and the marker is kept",
                    run.status
                ),
            }),
        }
    }

    /// Deletes whatever a deletion of the marker's incarnation that stopped
    /// part way left in the runtime store (its log, checkpoints, status
    /// hints), before anything else is decided: the runtime store no longer
    /// holds the run, so nothing else would ever reach those objects, even
    /// if the memo entries are then kept. Touches nothing in a runtime store
    /// that never held the incarnation (a mistyped prefix): incarnations are
    /// drawn at random, and only the incarnation's own objects are deleted.
    async fn finish_deletion(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        if self.config.dry_run {
            return Ok(());
        }
        if let Some(store) = &self.config.runtime_store {
            store.delete_run(run_id, incarnation).await?;
        }
        Ok(())
    }

    /// A marker whose run the runtime store does not hold at all: either a
    /// pass that deleted the run stopped before the marker (then nothing of
    /// the run is left but the marker), or the runtime store is not the one
    /// the workers write to (a prefix mistyped), and the run is alive
    /// elsewhere. A run that still has memo or step-output entries is the
    /// second case as far as anyone can tell: an error, and nothing of it
    /// is deleted.
    async fn check_nothing_left(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        let memo_store = &self.config.memo_store;
        if !memo_store
            .has_incarnation_entries(run_id, incarnation)
            .await?
        {
            return Ok(());
        }
        Err(Error::Conflict {
            what: format!("run {run_id}"),
            reason: "it has an expired terminal marker and memo entries, but the runtime \
                     store does not hold it; nothing was deleted and the marker is kept \
                     (is the runtime store's prefix the one the workers use?)"
                .into(),
        })
    }

    /// Deletes a terminal run now, whatever its age, so that its id can be
    /// used again: its current incarnation's memo and step-output entries
    /// first, then its runtime-store records; `false` if no run of the id
    /// exists. Its terminal marker is left to the next pass past the run's
    /// retention, which deletes it, finding nothing of the run.
    ///
    /// This is the order a pass keeps, and it is what makes a failure part
    /// way safe: while the runtime store holds the run, another call
    /// finishes it; once it does not (the runtime store removes the run's
    /// pointer first, then the rest of its records), only the marker leads
    /// to what is left, and the pass that reaches it deletes that. So the
    /// run gets its marker first if it has none (its last attempt stopped
    /// between the terminal change and the marker). [`RuntimeStore::delete_run`]
    /// alone deletes only the runtime records, and leaves the memo entries to
    /// a pass that must then refuse them (it cannot tell a deleted run from a
    /// runtime store that is not the workers' one): they would be left for
    /// ever.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] if no runtime store is configured (the run's
    /// incarnation and status are unknown without one) or if the run is not
    /// terminal; [`Error::Store`] or [`Error::ClearIncomplete`] if a request
    /// fails, after which calling it again finishes the deletion, or (once
    /// the runtime store no longer holds the run) the next pass past the
    /// run's retention does.
    pub async fn delete_run(&self, run_id: &RunId) -> Result<bool> {
        let Some(store) = &self.config.runtime_store else {
            return Err(Error::Conflict {
                what: format!("run {run_id}"),
                reason: "deleting a run needs the runtime store: \
                         set it with RetentionSweeperBuilder::runtime_store"
                    .into(),
            });
        };
        let Some(run) = store.load_run(run_id).await? else {
            return Ok(false);
        };
        if !run.status.is_terminal() {
            return Err(Error::Conflict {
                what: format!("run {run_id}"),
                reason: format!(
                    "the run is {}; only terminal runs can be deleted",
                    run.status
                ),
            });
        }
        if let Some(terminal_at_ms) = run.terminal_at_ms {
            let marker = TerminalMarker {
                run_id: run_id.clone(),
                terminal_at_ms,
                incarnation: run.incarnation,
            };
            self.config.memo_store.markers().write(&marker).await?;
        }
        self.config
            .memo_store
            .clear_incarnation(run_id, run.incarnation)
            .await?;
        store.delete_run(run_id, run.incarnation).await
    }

    /// Starts a background task that runs a pass at the clock's time, waits
    /// `interval`, and repeats, until [`SweeperHandle::shutdown`] is called
    /// or the Tokio runtime shuts down. Dropping the handle detaches the
    /// sweeper: it keeps sweeping. A failed pass is logged and retried at the
    /// next interval.
    ///
    /// # Panics
    ///
    /// If called outside a Tokio runtime.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use memo_runtime::{MemoStore, object_store::memory::InMemory, retention::RetentionSweeper};
    ///
    /// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    /// let sweeper = RetentionSweeper::builder(store, Duration::from_secs(3600)).build();
    /// let handle = sweeper.spawn(Duration::from_secs(300));
    /// // ... serve traffic ...
    /// let summary = handle.shutdown().await;
    /// assert!(summary.passes <= 1);
    /// # Ok(()) }
    /// ```
    pub fn spawn(&self, interval: Duration) -> SweeperHandle {
        let (stop, stop_rx) = watch::channel(false);
        let (progress_tx, progress) = watch::channel(SweeperSummary::default());
        // The task holds a sender too, so that dropping the handle (and its
        // sender) detaches the sweeper rather than stopping it.
        let detached = stop.clone();
        let passes = self.clone().run_passes(interval, stop_rx, progress_tx);
        let task = tokio::spawn(async move {
            let summary = passes.await;
            drop(detached);
            summary
        });
        SweeperHandle {
            stop,
            progress,
            task,
        }
    }

    async fn run_passes(
        self,
        interval: Duration,
        mut stop: watch::Receiver<bool>,
        progress: watch::Sender<SweeperSummary>,
    ) -> SweeperSummary {
        let mut summary = SweeperSummary::default();
        while !*stop.borrow_and_update() {
            // A pass is never interrupted: stopping is only checked between
            // passes, so a shutdown never leaves a run half-cleared on purpose.
            let outcome = self.sweep_now().await;
            summary.record(outcome);
            progress.send_replace(summary.clone());
            tokio::select! {
                biased;
                // A shutdown (the task's own sender keeps the channel open).
                _ = stop.changed() => break,
                () = tokio::time::sleep(interval) => {}
            }
        }
        tracing::info!(passes = summary.passes, "retention sweeper stopped");
        summary
    }
}

/// What the runtime store holds of a marker's run.
enum Found {
    /// The marker's incarnation, terminal.
    Terminal,
    /// Another incarnation of the id, or no runtime store is configured.
    Other,
    /// No run of the id.
    Nothing,
}

/// What clearing one run deleted (or, in a dry run, would delete).
#[derive(Default)]
struct RunSwept {
    entries: usize,
    runtime_record: bool,
}

/// What one sweep pass did (or, in dry-run mode, would have done).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// Runs terminal strictly before this time (ms since the Unix epoch)
    /// were expired.
    pub cutoff_ms: u64,
    /// Whether this was a dry run, which deleted nothing.
    pub dry_run: bool,
    /// Expired markers seen.
    pub markers_expired: usize,
    /// Pages of expired markers processed.
    pub pages: usize,
    /// Runs cleared completely, their markers deleted (in a dry run: runs
    /// that would be cleared).
    pub runs_cleared: usize,
    /// Memo and step-output entries deleted, by cleared and failed runs alike
    /// (in a dry run: entries of the runs that would be cleared).
    pub entries_deleted: usize,
    /// Runs whose runtime-store records were deleted (in a dry run: that
    /// would be deleted). Always 0 without a runtime store.
    pub runtime_runs_deleted: usize,
    /// The runs that could not be cleared; their markers are kept.
    pub failures: Vec<SweepFailure>,
    /// Entries of the due-run index deleted because their run had ended,
    /// was gone or was another incarnation (in a dry run: that would be
    /// deleted). Always 0 without a runtime store.
    pub due_entries_deleted: usize,
}

/// A run a sweep pass could not clear.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepFailure {
    /// The run.
    pub run_id: RunId,
    /// When its marker says it reached a terminal state.
    pub terminal_at_ms: u64,
    /// What went wrong.
    pub message: String,
}

impl SweepReport {
    fn empty(cutoff_ms: u64, dry_run: bool) -> SweepReport {
        SweepReport {
            cutoff_ms,
            dry_run,
            markers_expired: 0,
            pages: 0,
            runs_cleared: 0,
            entries_deleted: 0,
            runtime_runs_deleted: 0,
            failures: Vec::new(),
            due_entries_deleted: 0,
        }
    }

    /// Whether every expired run was cleared.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
    }

    fn record(&mut self, marker: TerminalMarker, swept: RunSwept, result: Result<()>) {
        self.entries_deleted += swept.entries;
        self.runtime_runs_deleted += usize::from(swept.runtime_record);
        match result {
            Ok(()) => self.runs_cleared += 1,
            Err(error) => {
                tracing::warn!(
                    run_id = %marker.run_id,
                    terminal_at_ms = marker.terminal_at_ms,
                    error = %error,
                    "could not clear an expired run; its marker is kept for the next pass"
                );
                self.failures.push(SweepFailure {
                    run_id: marker.run_id,
                    terminal_at_ms: marker.terminal_at_ms,
                    message: error.to_string(),
                });
            }
        }
    }
}

/// What a background sweeper has done so far: totals over its passes and
/// the latest outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweeperSummary {
    /// Passes finished, failed ones included.
    pub passes: u64,
    /// Passes that failed as a whole (their marker listing failed).
    pub failed_passes: u64,
    /// Runs cleared, over all passes.
    pub runs_cleared: u64,
    /// Entries deleted, over all passes.
    pub entries_deleted: u64,
    /// Runs that could not be cleared, over all passes (a run that failed
    /// twice counts twice).
    pub run_failures: u64,
    /// The report of the latest pass that did not fail as a whole.
    pub last_report: Option<SweepReport>,
    /// The error of the latest pass, if it failed as a whole.
    pub last_error: Option<String>,
}

impl SweeperSummary {
    fn record(&mut self, outcome: Result<SweepReport>) {
        self.passes += 1;
        match outcome {
            Ok(report) => {
                self.runs_cleared += report.runs_cleared as u64;
                self.entries_deleted += report.entries_deleted as u64;
                self.run_failures += report.failures.len() as u64;
                self.last_report = Some(report);
                self.last_error = None;
            }
            Err(error) => {
                tracing::error!(error = %error, "sweep pass failed; retrying at the next interval");
                self.failed_passes += 1;
                self.last_error = Some(error.to_string());
            }
        }
    }
}

/// Controls a background sweeper started by [`RetentionSweeper::spawn`].
///
/// Dropping the handle detaches the sweeper, which keeps sweeping until the
/// Tokio runtime shuts down; [`shutdown`](Self::shutdown) stops it (after
/// its current pass) and waits.
#[derive(Debug)]
pub struct SweeperHandle {
    stop: watch::Sender<bool>,
    progress: watch::Receiver<SweeperSummary>,
    task: JoinHandle<SweeperSummary>,
}

impl SweeperHandle {
    /// What the sweeper has done so far.
    pub fn summary(&self) -> SweeperSummary {
        self.progress.borrow().clone()
    }

    /// A receiver that sees the summary change after every pass: wait for a
    /// pass with [`watch::Receiver::wait_for`].
    pub fn subscribe(&self) -> watch::Receiver<SweeperSummary> {
        self.progress.clone()
    }

    /// Stops the sweeper and waits for it: a pass in progress is finished
    /// first, no new one starts. Returns what it did over its lifetime.
    ///
    /// # Panics
    ///
    /// Resumes the panic if a pass panicked.
    pub async fn shutdown(self) -> SweeperSummary {
        self.stop.send_replace(true);
        match self.task.await {
            Ok(summary) => summary,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Cancelled because the runtime is shutting down.
            Err(_) => self.progress.borrow().clone(),
        }
    }
}
