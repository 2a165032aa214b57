//! A run's log: reading the run pointer and the log entries, folding them
//! into the run's state, and the commit loop that creates the next entry.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;

use super::client::Owner;
use super::folded::Folded;
use super::runs::Refreshed;
use super::{CONCURRENCY, Creation, Entry, ObjectStoreRuntimeStore};
use crate::codec;
use crate::error::{Error, Result};
use crate::layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, RunState, Verdict};
use crate::write_once::Created;

impl ObjectStoreRuntimeStore {
    /// Whether the run pointer names `incarnation`.
    pub(super) async fn is_current(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<bool> {
        let current = self.read_creation(run_id).await?;
        Ok(current.is_some_and(|c| c.incarnation == incarnation))
    }

    /// Reads the run's creation, its newest checkpoint and the log entries
    /// after it, and folds them.
    pub(super) async fn fold_from_storage(&self, run_id: &RunId) -> Result<Option<Folded>> {
        match self.read_creation(run_id).await? {
            Some(creation) => self.fold_current(run_id, creation).await,
            None => Ok(None),
        }
    }

    /// Folds the incarnation `creation`, which the run pointer was just read
    /// to name: its newest checkpoint and the log entries after it.
    ///
    /// A deletion removes the pointer first and then the rest, so a fold
    /// that began before it may find checkpoints and entries gone and take
    /// the run for corrupt: a corrupt fold counts only if the pointer still
    /// names the incarnation; otherwise the run is read again as it is now.
    pub(super) async fn fold_current(
        &self,
        run_id: &RunId,
        creation: Creation,
    ) -> Result<Option<Folded>> {
        let mut creation = creation;
        let mut deleted_meanwhile = false;
        loop {
            let incarnation = creation.incarnation;
            match self.fold_incarnation(run_id, creation).await {
                Err(e @ Error::Corrupt { .. }) if !deleted_meanwhile => {
                    match self.read_creation(run_id).await? {
                        Some(now) if now.incarnation == incarnation => return Err(e),
                        Some(now) => creation = now,
                        None => return Ok(None),
                    }
                    deleted_meanwhile = true;
                }
                folded => return folded.map(Some),
            }
        }
    }

    async fn fold_incarnation(&self, run_id: &RunId, creation: Creation) -> Result<Folded> {
        let incarnation = creation.incarnation;
        let created = RunState::new(creation.run, incarnation);
        let mut folded = self.load_checkpoint(run_id, created).await?;
        self.fold_tail(run_id, &mut folded).await?;
        Ok(folded)
    }

    /// Folds every log entry from `folded.next` on: one listing, then the
    /// entries, read concurrently.
    async fn fold_tail(&self, run_id: &RunId, folded: &mut Folded) -> Result<()> {
        // Nothing follows a terminal change.
        if folded.state.record().status.is_terminal() {
            return Ok(());
        }
        let incarnation = folded.incarnation;
        let positions = self.log_positions(run_id, incarnation, folded.next).await?;
        let mut entries = futures::stream::iter(positions)
            .map(|position| async move {
                let bytes = self.read_entry(run_id, incarnation, position).await?;
                Ok::<_, Error>((position, bytes))
            })
            .buffered(CONCURRENCY);
        while let Some((position, bytes)) = entries.try_next().await? {
            let Some(bytes) = bytes else {
                return Err(self.missing_entry(run_id, incarnation, position));
            };
            self.fold_entry(run_id, folded, &bytes)?;
        }
        Ok(())
    }

    /// The positions from `from` on in the run's log folder, checked to be
    /// dense. Listed with an offset, so that backends that list from an
    /// offset (S3, GCS, Azure) do not page through the entries before it.
    pub(super) async fn log_positions(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        from: u64,
    ) -> Result<Vec<u64>> {
        let folder = self.client.layout().log_folder(run_id, incarnation);
        let listing = match from.checked_sub(1) {
            Some(before) => {
                let offset = self.log_path(run_id, incarnation, before);
                self.client.store().list_with_offset(Some(&folder), &offset)
            }
            None => self.client.store().list(Some(&folder)),
        };
        let metas: Vec<_> = listing
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let mut positions = Vec::with_capacity(metas.len());
        for meta in metas {
            let position = layout::parse_log_position(&meta.location).ok_or_else(|| {
                Error::corrupt(
                    &meta.location,
                    format!("run {run_id}: not a log entry name (20 digits expected)"),
                )
            })?;
            // A backend may list from the start whatever the offset.
            if position >= from {
                positions.push(position);
            }
        }
        // LocalFileSystem lists in no particular order.
        positions.sort_unstable();
        // Dense from `from`: each position is `from` plus its index (which,
        // as the positions are distinct and sorted, cannot overflow).
        if let Some((i, _)) =
            (positions.iter().enumerate()).find(|&(i, &p)| from.checked_add(i as u64) != Some(p))
        {
            return Err(self.missing_entry(run_id, incarnation, from.saturating_add(i as u64)));
        }
        Ok(positions)
    }

    /// Reads the log entry at `position`, naming the run and the position
    /// if it is corrupt.
    pub(super) async fn read_entry(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
    ) -> Result<Option<Bytes>> {
        let path = self.log_path(run_id, incarnation, position);
        self.client
            .read(
                &path,
                Limit::RECORD,
                Owner::Incarnation(run_id, incarnation),
            )
            .await
            .map_err(|e| match e {
                Error::Corrupt { path, reason } => Error::Corrupt {
                    path,
                    reason: format!("run {run_id} log entry {position}: {reason}"),
                },
                e => e,
            })
    }

    pub(super) fn missing_entry(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
    ) -> Error {
        Error::corrupt(
            self.log_path(run_id, incarnation, position),
            format!("run {run_id} log entry {position} is missing but later entries exist"),
        )
    }

    /// Folds the changes written after `folded.next`: `true` if there were
    /// any.
    ///
    /// One read tells whether the run moved on. If it did, it may have moved
    /// by one entry or by thousands, so the rest is caught up as a fresh load
    /// reads a run: from the newest checkpoint delta if it is ahead of the
    /// cached state, then the log after it, so the cost is that of a fresh
    /// load plus that one read, whatever happened since the run was cached.
    pub(super) async fn catch_up(&self, run_id: &RunId, folded: &mut Folded) -> Result<bool> {
        let Some(bytes) = self
            .read_entry(run_id, folded.incarnation, folded.next)
            .await?
        else {
            return Ok(false);
        };
        self.fold_entry(run_id, folded, &bytes)?;
        self.fold_newer(run_id, folded).await?;
        Ok(true)
    }

    /// Folds the changes after `folded.next`, known to be behind: from the
    /// newest delta if it is ahead, then the log after it.
    pub(super) async fn fold_newer(&self, run_id: &RunId, folded: &mut Folded) -> Result<()> {
        self.skip_to_newer_checkpoint(run_id, folded).await?;
        self.fold_tail(run_id, folded).await
    }

    /// Folds the log entry at `folded.next`, which every writer checked
    /// against the entries before it: one that does not apply, or names
    /// another incarnation than its folder, is corrupt.
    pub(super) fn fold_entry(
        &self,
        run_id: &RunId,
        folded: &mut Folded,
        bytes: &[u8],
    ) -> Result<()> {
        let position = folded.next;
        let path = self.log_path(run_id, folded.incarnation, position);
        let what = format!("run {run_id} log entry {position}");
        let entry: Entry<Change> = codec::decode_record(&what, &path, bytes)?;
        if entry.incarnation != folded.incarnation {
            return Err(Error::corrupt(
                &path,
                format!(
                    "{what} names incarnation {} in the folder of incarnation {}",
                    entry.incarnation, folded.incarnation
                ),
            ));
        }
        let Some(after) = position.checked_add(1) else {
            return Err(Error::corrupt(
                &path,
                format!("{what} is past the last position"),
            ));
        };
        match folded.state.check(&entry.change) {
            Ok(Verdict::Apply(plan)) => folded.state.apply(entry.change, plan),
            Ok(Verdict::AlreadyApplied) => {
                return Err(Error::corrupt(
                    &path,
                    format!("{what} repeats an earlier change"),
                ));
            }
            Err(e) => {
                return Err(Error::corrupt(
                    &path,
                    format!("{what} does not follow from the entries before it: {e}"),
                ));
            }
        }
        folded.next = after;
        Ok(())
    }

    /// Commits `change` to the run, and returns what `answer` reads from the
    /// run after it.
    pub(super) async fn change<T>(
        &self,
        run_id: &RunId,
        change: Change,
        answer: impl Fn(&RunState) -> T,
    ) -> Result<T> {
        let slot = self.cache.slot(run_id);
        let mut guard = slot.lock().await;
        if guard.is_none() {
            self.refresh(run_id, &mut guard).await?;
        }
        loop {
            let Some(folded) = guard.as_mut() else {
                return Err(Error::RunNotFound {
                    run_id: run_id.to_string(),
                });
            };
            // A new change must also fit the limits (a run's pending inputs
            // are counted as it stands, so judged like the rules).
            let verdict = folded.state.check(&change).and_then(|verdict| {
                if let Verdict::Apply(_) = verdict {
                    self.limits.admit(&folded.state, &change)?;
                }
                Ok(verdict)
            });
            let plan = match verdict {
                Ok(Verdict::AlreadyApplied) => return Ok(answer(&folded.state)),
                Ok(Verdict::Apply(plan)) => plan,
                // The cache may be behind: judge only against the latest log.
                Err(e) => match self.refresh(run_id, &mut guard).await? {
                    Refreshed::Unchanged => return Err(e),
                    Refreshed::Changed | Refreshed::Missing => continue,
                },
            };
            self.write_status_hint(run_id, &folded.state, &change)
                .await?;
            // The status that hint is for, if the change moves the run.
            let hinted = match &change {
                Change::Commit(crate::runtime_store::Commit {
                    status: Some(status),
                    ..
                }) => Some(status.status()).filter(|&s| s != folded.state.record().status),
                _ => None,
            };
            let entry = Entry {
                incarnation: folded.incarnation,
                change: &change,
            };
            let encoded = codec::encode_value("a runtime-store change", &entry)?;
            let path = self.log_path(run_id, folded.incarnation, folded.next);
            let Some(after) = folded.next.checked_add(1) else {
                return Err(Error::corrupt(
                    &path,
                    format!("run {run_id}: the log has no position after its last"),
                ));
            };
            match self
                .client
                .create(
                    &path,
                    &encoded,
                    Limit::RECORD,
                    Owner::Incarnation(run_id, folded.incarnation),
                )
                .await?
            {
                // At position `next` either way: an identical change there
                // is this change, applied once.
                created @ (Created::Ours(_) | Created::Same(_)) => {
                    if !self.is_current(run_id, folded.incarnation).await? {
                        // The incarnation was deleted and its log freed under
                        // us: the change went into a dead run.
                        if let Created::Ours(_) = created {
                            let _ = self.client.delete_all(vec![path]).await;
                        }
                        // And the hint written for it: the deletion removed
                        // the incarnation's hints before, and none would
                        // ever look for this one.
                        if let Some(status) = hinted {
                            self.drop_stale_hint(status, run_id, folded.incarnation)
                                .await;
                        }
                        *guard = None;
                        return Err(Error::Conflict {
                            what: format!("run {run_id}"),
                            reason: "the run was deleted while the change was written; \
                                     nothing was applied"
                                .into(),
                        });
                    }
                    let before = folded.state.record().status;
                    folded.state.apply(change, plan);
                    folded.next = after;
                    if folded.state.record().status != before {
                        self.drop_stale_hint(before, run_id, folded.incarnation)
                            .await;
                    }
                    self.checkpoint_if_due(run_id, folded).await;
                    let answered = answer(&folded.state);
                    self.cache.reweigh(run_id, &slot, guard.as_ref());
                    return Ok(answered);
                }
                // Another writer came first, maybe by many entries: caught
                // up as a read is, the pointer first, so that the leftovers
                // of a deleted incarnation are never folded (the change is
                // then judged against the run the pointer names, if any).
                Created::Theirs(bytes) => {
                    self.fold_entry(run_id, folded, &bytes)?;
                    self.refresh_known(run_id, &mut guard, true).await?;
                }
            }
        }
    }
}
