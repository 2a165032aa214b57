//! A run's log: one write-once object per change after the run's creation
//! (its pointer), at dense positions from 0, in the incarnation's own
//! folder. The log lists its positions, reads and folds its entries into a
//! run's state, and appends the next one; it is the record of every change,
//! which checkpoints only copy.

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;
use serde::{Deserialize, Serialize};

use super::client::{CONCURRENCY, Client, Owner};
use super::folded::Folded;
use crate::codec;
use crate::error::{Error, Result};
use crate::layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, Verdict};
use crate::write_once::Created;

/// A stored log entry: a change and the incarnation of the run it is for.
#[derive(Debug, Serialize, Deserialize)]
struct Entry<C> {
    incarnation: Incarnation,
    change: C,
}

/// The run logs of one store.
#[derive(Clone)]
pub(super) struct RunLog {
    client: Arc<Client>,
}

impl RunLog {
    pub(super) fn new(client: Arc<Client>) -> RunLog {
        RunLog { client }
    }

    /// Folds every log entry from `folded.next` on: one listing, then the
    /// entries, read concurrently.
    pub(super) async fn fold_tail(&self, run_id: &RunId, folded: &mut Folded) -> Result<()> {
        // Nothing follows a terminal change.
        if folded.state.record().status.is_terminal() {
            return Ok(());
        }
        let incarnation = folded.incarnation;
        let positions = self.positions(run_id, incarnation, folded.next).await?;
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
    async fn positions(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        from: u64,
    ) -> Result<Vec<u64>> {
        let folder = self.client.layout().log_folder(run_id, incarnation);
        let listing = match from.checked_sub(1) {
            Some(before) => {
                let offset = self.path(run_id, incarnation, before);
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
    async fn read_entry(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
    ) -> Result<Option<Bytes>> {
        let path = self.path(run_id, incarnation, position);
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

    fn missing_entry(&self, run_id: &RunId, incarnation: Incarnation, position: u64) -> Error {
        Error::corrupt(
            self.path(run_id, incarnation, position),
            format!("run {run_id} log entry {position} is missing but later entries exist"),
        )
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
        let path = self.path(run_id, folded.incarnation, position);
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

    /// Folds the entry at `folded.next` if there is one: `true` if there
    /// was, so the run moved on since it was folded.
    pub(super) async fn fold_next(&self, run_id: &RunId, folded: &mut Folded) -> Result<bool> {
        let Some(bytes) = self
            .read_entry(run_id, folded.incarnation, folded.next)
            .await?
        else {
            return Ok(false);
        };
        self.fold_entry(run_id, folded, &bytes)?;
        Ok(true)
    }

    /// Creates `change` at `folded.next`, checked against `folded` by the
    /// caller: what is committed there (whoever wrote it), and the position
    /// after it.
    pub(super) async fn append(
        &self,
        run_id: &RunId,
        folded: &Folded,
        change: &Change,
    ) -> Result<(Created, u64)> {
        let entry = Entry {
            incarnation: folded.incarnation,
            change,
        };
        let encoded = codec::encode_value("a runtime-store change", &entry)?;
        let path = self.path(run_id, folded.incarnation, folded.next);
        let Some(after) = folded.next.checked_add(1) else {
            return Err(Error::corrupt(
                &path,
                format!("run {run_id}: the log has no position after its last"),
            ));
        };
        let created = self
            .client
            .create(
                &path,
                &encoded,
                Limit::RECORD,
                Owner::Incarnation(run_id, folded.incarnation),
            )
            .await?;
        Ok((created, after))
    }

    fn path(&self, run_id: &RunId, incarnation: Incarnation, position: u64) -> Path {
        self.client
            .layout()
            .log_entry(run_id, incarnation, position)
    }
}
