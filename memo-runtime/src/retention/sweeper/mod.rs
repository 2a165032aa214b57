//! Retention: clearing what runs left behind once their terminal marker is
//! older than the retention period, in passes or in a background task.

mod background;
mod builder;
mod due;
mod proof;
mod recheck;
mod report;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use futures::stream::{self, StreamExt, TryStreamExt};
use tracing::Instrument;

pub use background::{SweeperHandle, SweeperSummary};
pub use builder::{
    DEFAULT_RECHECK_AFTER, DEFAULT_SWEEP_CONCURRENCY, DEFAULT_SWEEP_PAGE_SIZE,
    RetentionSweeperBuilder,
};
pub use report::{SweepFailure, SweepReport};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::memo::{EntryFolders, MemoStore};
use crate::retention::TerminalMarker;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{DeletionBegan, RuntimeStore};
use proof::{Deleted, Found};

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
///    there (once the pass has proved its store the workers', see below);
///    a marker of a workflow run the runtime store does not hold at
///    all deletes nothing while the run has memo entries left and the
///    runtime store holds no remains of its incarnation (the runtime store
///    may be the wrong one); with remains ([`RuntimeStore::holds_remains`]:
///    a deletion of it that stopped part way) the pass goes on, and its
///    steps below finish the deletion; with nothing left of the run but
///    its marker (what a pass that stopped before the marker, or
///    [`RetentionSweeper::delete_run`], leaves) only once the pass has
///    proved its runtime store the workers' one, by finding in it a run
///    this memo store names (the run of another marker or of a due-run
///    entry): a store at a mistyped prefix, which holds none, keeps the
///    marker of a run alive in the workers' store, as a failure; a
///    standalone run's marker ([`Incarnation::STANDALONE`]) names no
///    runtime-store run;
/// 2. clears the memo and step-output entries of the marker's incarnation
///    ([`MemoStore::clear_incarnation`]), and of no other: a run created
///    again under the same id is another incarnation and is never touched
///    (step-output entries are no longer written: the pass lists a run's
///    step-output folder only if the store held one when the pass first
///    cleared a run, one listing of the step-output folders a pass);
/// 3. deletes that incarnation's runtime-store records, if a runtime store
///    is configured ([`RuntimeStore::delete_run`]);
/// 4. forgets the incarnation's data key, if the memo store's seal has data
///    keys ([`DataKeys::forget_incarnation`](crate::seal::DataKeys::forget_incarnation)):
///    from then on nothing of it can be read, even what bucket versions or
///    a copy of the bucket keep;
/// 5. leaves a recheck marker for the incarnation (workflow runs only),
///    due [`recheck_after`](RetentionSweeperBuilder::recheck_after) later:
///    a pass at or after that time clears the incarnation's folders once
///    more, for what a stale attempt wrote there after step 2 and died
///    before taking it back (the recheck is what clears such a write: a
///    second clear right after step 3, as passes made before, narrowed its
///    window only by step 3's round trips, at two listings a run);
/// 6. deletes the marker, only if every step before it succeeded: with
///    the markers of the other runs of its page cleared so, in one
///    `delete_stream` once the page's runs are done (on S3 one
///    `DeleteObjects` request per page of up to 1,000 markers). A pass that
///    stops before that (a crash) leaves the page's markers, each with
///    nothing of its run left: the next pass deletes them once it has
///    proved its runtime store the workers' (below).
///
/// After the markers, a pass tidies the due-run index (the entries of runs
/// that ended or are gone) and the shared scope's expired entries. An
/// entry of a run the runtime store does not hold at all goes only under
/// the same proof as a marker with nothing left: a sweep through a runtime
/// store that never held a run deletes neither its marker nor its due-run
/// entry, and one that holds none of this memo store's runs deletes
/// nothing of workflow runs at all (it reports the markers it kept as
/// failures). A runtime store that holds some of them is taken for the
/// workers' one.
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
    /// How long after a sweep deletes a workflow run a pass clears its
    /// folders once more (the `recheck` module).
    recheck_after: Duration,
    /// Whether the runtime store is proved to be the one this memo store's
    /// runs were created in (the `proof` module).
    proven: AtomicBool,
    /// The recheck markers the last pass found still there at its end with
    /// no deletion of theirs in an unproved runtime store (the `recheck`
    /// module): a failure if the next pass finds them so again.
    unrechecked: std::sync::Mutex<std::collections::HashSet<(RunId, Incarnation)>>,
}

impl RetentionSweeper {
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

    /// When `marker` expires: `retention` past its run's end (a pass after
    /// that time finds it expired).
    fn expired_at_ms(&self, marker: &TerminalMarker) -> u64 {
        let retention_ms = u64::try_from(self.config.retention.as_millis()).unwrap_or(u64::MAX);
        marker.terminal_at_ms.saturating_add(retention_ms)
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
            let folders = PassFolders::default();
            let mut report = self.sweep_before(now_ms, cutoff_ms, &folders).await?;
            self.recheck_swept(now_ms, &mut report, &folders).await;
            self.tidy_due_index(now_ms, &mut report).await;
            self.sweep_shared(now_ms, &mut report).await;
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// Deletes the shared entries (`#[memoized(scope = shared)]`) whose time
    /// to live ran out by `now_ms` ([`SharedEntries::sweep`]; in a dry run:
    /// counts their markers), so that a sweeper in every worker keeps the
    /// shared scope in bounds too. Costs a listing of the expired hours and
    /// two `delete_stream`s per 1,000 expired entries (their entries, then
    /// their markers). Sweepers running at once are safe: an
    /// entry is deleted by whichever comes first, the other finds it gone
    /// and counts nothing; a live entry is never listed. A failure is
    /// logged and counted in [`SweepReport::shared_failures`], and the
    /// marker is kept for the next pass.
    ///
    /// [`SharedEntries::sweep`]: crate::shared::SharedEntries::sweep
    async fn sweep_shared(&self, now_ms: u64, report: &mut SweepReport) {
        let entries = self.config.memo_store.shared_entries();
        if self.config.dry_run {
            let counted = entries
                .expired(now_ms)
                .try_fold(0, |n, _| futures::future::ready(Ok(n + 1)))
                .await;
            match counted {
                Ok(n) => report.shared_markers_expired = n,
                Err(error) => {
                    tracing::warn!(%error, "listing the expired shared entries failed");
                    report.shared_failures += 1;
                }
            }
            return;
        }
        match entries.sweep(now_ms).await {
            Ok(swept) => {
                report.shared_markers_expired = swept.markers_expired;
                report.shared_entries_deleted = swept.entries_deleted;
                report.shared_failures = swept.failures;
            }
            Err(error) => {
                tracing::warn!(%error, "listing the expired shared entries failed; the next pass tries again");
                report.shared_failures += 1;
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

    async fn sweep_before(
        &self,
        now_ms: u64,
        cutoff_ms: u64,
        folders: &PassFolders,
    ) -> Result<SweepReport> {
        let config = &*self.config;
        let mut report = SweepReport::empty(cutoff_ms, config.dry_run);
        let mut unproven = Vec::new();
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
            self.sweep_page(now_ms, page, &mut report, &mut unproven, folders)
                .await;
            tracing::debug!(
                page = report.pages,
                markers_expired = report.markers_expired,
                "page swept"
            );
        }
        // The markers left with nothing else of their run, met before the
        // pass proved its runtime store the workers' (the `proof` module):
        // checked again now that it is; kept, as failures, if it is not.
        if self.proves_store() {
            let mut again = Vec::new();
            self.sweep_page(now_ms, unproven, &mut report, &mut again, folders)
                .await;
            unproven = again;
        }
        for marker in unproven {
            let error = proof::unproven(&marker.run_id);
            report.record(marker, RunSwept::default(), Err(error));
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

    /// Sweeps the runs of `markers`, a bounded number at once, into
    /// `report`; the markers a run of which nothing else is left, in a
    /// runtime store not proved the workers' yet, go to `unproven`.
    async fn sweep_page(
        &self,
        now_ms: u64,
        markers: Vec<TerminalMarker>,
        report: &mut SweepReport,
        unproven: &mut Vec<TerminalMarker>,
        folders: &PassFolders,
    ) {
        let mut outcomes = stream::iter(markers)
            .map(|marker| async move {
                let mut swept = RunSwept::default();
                let result = self.sweep_run(&marker, now_ms, &mut swept, folders).await;
                (marker, swept, result)
            })
            .buffer_unordered(self.config.concurrency);
        let mut cleared = Vec::new();
        while let Some((marker, swept, result)) = outcomes.next().await {
            match result {
                Ok(Swept::Unproven) => unproven.push(marker),
                Ok(Swept::Cleared) => cleared.push((marker, swept)),
                Err(error) => report.record(marker, swept, Err(error)),
            }
        }
        drop(outcomes);
        self.delete_markers(cleared, report).await;
    }

    /// Deletes the markers of runs this pass cleared, all in one
    /// `delete_stream` (on S3 one request per 1,000 markers, where it was
    /// one per run), and records each run: cleared, or failed with its
    /// marker kept for the next pass if its marker could not be deleted.
    /// In a dry run, records them and deletes nothing.
    async fn delete_markers(
        &self,
        cleared: Vec<(TerminalMarker, RunSwept)>,
        report: &mut SweepReport,
    ) {
        let deleted = if self.config.dry_run {
            cleared.iter().map(|_| Ok(())).collect()
        } else {
            let markers = cleared.iter().map(|(marker, _)| marker);
            self.config.memo_store.markers().delete_all(markers).await
        };
        for ((marker, swept), deleted) in cleared.into_iter().zip(deleted) {
            report.record(marker, swept, deleted);
        }
    }

    /// Clears one expired run (or, in dry-run mode, counts what clearing it
    /// would delete), recording in `swept` what it deleted even if it then
    /// fails. Its marker is the caller's to delete once this succeeded (with
    /// the rest of its page's), so any failure keeps it.
    async fn sweep_run(
        &self,
        marker: &TerminalMarker,
        now_ms: u64,
        swept: &mut RunSwept,
        folders: &PassFolders,
    ) -> Result<Swept> {
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
                Found::Unchecked => false,
                // A standalone run (memos outside a workflow) is never in a
                // runtime store.
                Found::Nothing | Found::Other(_) if incarnation == Incarnation::STANDALONE => false,
                // The id used again: as much a deleted run as one never
                // held, unless the store is the workers' (the `proof`
                // module).
                Found::Other(later) => {
                    if !self.check_used_again(run_id, later).await? {
                        return Ok(Swept::Unproven);
                    }
                    false
                }
                Found::Nothing => match self.check_deleted_here(run_id, incarnation).await? {
                    Deleted::Here => false,
                    Deleted::Unproven => return Ok(Swept::Unproven),
                },
            };
            let folders = folders.get(&config.memo_store).await;
            if config.dry_run {
                swept.entries = config
                    .memo_store
                    .count_incarnation_entries(run_id, incarnation, folders)
                    .await?;
                swept.runtime_record = has_record;
                return Ok(Swept::Cleared);
            }
            let cleared = config
                .memo_store
                .clear_incarnation_in(run_id, incarnation, folders)
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
            // A stale attempt's memo entry that lands from here on (its
            // check of the lease came before the clear above) is the
            // recheck's to delete, an hour after the deletion began, if the
            // attempt dies before it takes the entry back itself. When it
            // began is what its first deleter recorded (this pass, another
            // sweep of the run at once, or one that stopped part way), so
            // that every sweep of the run leaves the same recheck marker
            // (the `recheck` module).
            let mut began = DeletionBegan::At(now_ms);
            if let Some(store) = &config.runtime_store {
                let deletion = store.delete_run_at(run_id, incarnation, now_ms).await?;
                swept.runtime_record = deletion.existed;
                began = deletion.began;
            }
            // Last before the marker: deleting a run's records reads its
            // pointer, which a forgotten key would make unreadable. From
            // here on nothing of the run can be read, even what bucket
            // versions or a copy of the bucket keep.
            forget_data_key(config, run_id, incarnation).await?;
            let since_ms = match began {
                DeletionBegan::At(at_ms) => Some(at_ms),
                DeletionBegan::Unrecorded => Some(self.expired_at_ms(marker)),
                // Its recheck ran already: nothing is left to recheck.
                DeletionBegan::Forgotten => None,
            };
            if let Some(since_ms) = since_ms {
                self.leave_recheck(run_id, incarnation, since_ms, now_ms)
                    .await?;
            }
            tracing::debug!(
                entries = swept.entries,
                runtime_record = swept.runtime_record,
                "run cleared; its marker goes with its page's"
            );
            Ok(Swept::Cleared)
        }
        .instrument(span)
        .await
    }

    /// Deletes a terminal run now, whatever its age, so that its id can be
    /// used again: its current incarnation's memo and step-output entries
    /// first, then its runtime-store records; `false` if no run of the id
    /// exists. Its terminal marker is left to the next pass past the run's
    /// retention, which deletes it, finding nothing of the run, once that
    /// pass has proved its runtime store the workers' (see the type's
    /// rustdoc): this sweeper's passes have if the deletion cleared memo
    /// entries of the run; a pass of another sweeper, once it meets a run
    /// of this memo store in the runtime store.
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
        let cleared = self
            .config
            .memo_store
            .clear_incarnation(run_id, run.incarnation)
            .await?;
        if cleared > 0 {
            // The memo store had entries of the incarnation this runtime
            // store holds: it is the workers' (the `proof` module), and the
            // next pass of this sweeper may drop the marker left behind.
            self.store_proved();
        }
        let now_ms = self.config.clock.now_ms();
        let deletion = store.delete_run_at(run_id, run.incarnation, now_ms).await?;
        forget_data_key(&self.config, run_id, run.incarnation).await?;
        let since_ms = match deletion.began {
            DeletionBegan::At(at_ms) => Some(at_ms),
            DeletionBegan::Unrecorded => Some(now_ms),
            // A pass deleted the run since this call read it, and its
            // recheck has run already: nothing is left to recheck.
            DeletionBegan::Forgotten => None,
        };
        if let Some(since_ms) = since_ms {
            self.leave_recheck(run_id, run.incarnation, since_ms, now_ms)
                .await?;
        }
        Ok(deletion.existed)
    }
}

/// Forgets the data key of a run incarnation being cleared, if the memo
/// store's seal has data keys ([`DataKeys::forget_incarnation`]).
///
/// [`DataKeys::forget_incarnation`]: crate::seal::DataKeys::forget_incarnation
async fn forget_data_key(
    config: &SweeperConfig,
    run_id: &RunId,
    incarnation: Incarnation,
) -> Result<()> {
    if let Some(keys) = config.memo_store.seal().data_keys() {
        keys.forget_incarnation(run_id, incarnation).await?;
    }
    Ok(())
}

/// Which entry folders a pass's clears list, asked of the memo store
/// ([`MemoStore::entry_folders`]: one listing) the first time the pass
/// clears or rechecks a run, so a pass with nothing to clear asks nothing.
/// Per pass: a store given step-output entries (by a release from before
/// they were dropped) is listed for them from the next pass on.
#[derive(Default)]
struct PassFolders(tokio::sync::OnceCell<EntryFolders>);

impl PassFolders {
    async fn get(&self, memo_store: &MemoStore) -> EntryFolders {
        *self.0.get_or_init(|| memo_store.entry_folders()).await
    }
}

/// What clearing one run deleted (or, in a dry run, would delete).
#[derive(Default)]
struct RunSwept {
    entries: usize,
    runtime_record: bool,
}

/// What a pass did with one expired marker that did not fail.
enum Swept {
    /// Its run was cleared (in a dry run: would be); its marker is left
    /// for the page's batch (`delete_markers`).
    Cleared,
    /// Nothing of the run is left but the marker, and the runtime store is
    /// not proved the workers' (yet): nothing was deleted.
    Unproven,
}
