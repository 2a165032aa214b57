//! Run checkpoints: the run folded up to a log position, written once every
//! few entries so that loading a run reads the newest checkpoint and the few
//! entries after it instead of the whole log.
//!
//! A checkpoint is a copy of what the log says, never the only record of a
//! change, so every rule of the log still holds with checkpoints:
//!
//! - it is derived only from committed entries: a writer checkpoints the
//!   state it folded from entries it read or created (and whose run pointer
//!   it checked), up to but not including the position it names;
//! - it is write-once (`PutMode::Create`), and its content is a function of
//!   the entries before its position (the state encodes deterministically),
//!   so two writers of one position write the same bytes, whoever wins;
//! - the log stays authoritative: a commit racing a checkpoint write goes to
//!   the log, after the checkpoint's position, where a reader finds it; a
//!   checkpoint write that fails or never happens only leaves a longer tail
//!   to fold (the next writer checkpoints it);
//! - superseded checkpoints are deleted (best effort), so the folder holds
//!   about one object and listing it is one request whatever the run's
//!   length. A reader whose checkpoint was deleted between its listing and
//!   its read lists again.

use bytes::Bytes;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::ObjectStoreRuntimeStore;
use super::cache::Folded;
use crate::codec;
use crate::error::{Error, Result};
use crate::layout;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::RunState;
use crate::write_once;

/// How many listings of the checkpoint folder a load tries before folding
/// the whole log: each retry means a newer checkpoint replaced the one
/// listed, which takes other writers `interval` commits each time.
const LISTING_ATTEMPTS: usize = 3;

/// A stored checkpoint: the run folded from its log entries before `next`.
#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint<S> {
    incarnation: Incarnation,
    next: u64,
    state: S,
}

impl ObjectStoreRuntimeStore {
    /// The run folded up to its newest checkpoint; `None` if it has none.
    pub(super) async fn load_checkpoint(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<Folded>> {
        for _ in 0..LISTING_ATTEMPTS {
            let mut positions = self.checkpoint_positions(run_id, incarnation).await?;
            let Some(newest) = positions.pop() else {
                return Ok(None);
            };
            let path = self.layout.checkpoint(run_id, incarnation, newest);
            // Deleted since the listing: a newer one replaced it.
            if let Some(bytes) = write_once::read(self.store.as_ref(), &path).await? {
                return self
                    .decode_checkpoint(run_id, incarnation, newest, &bytes)
                    .map(Some);
            }
        }
        Ok(None)
    }

    /// The positions of the incarnation's checkpoints, in order.
    async fn checkpoint_positions(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<u64>> {
        let folder = self.layout.checkpoint_folder(run_id, incarnation);
        let metas: Vec<_> = self
            .store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let mut positions = metas
            .iter()
            .map(|meta| {
                layout::parse_log_position(&meta.location).ok_or_else(|| {
                    Error::corrupt(
                        &meta.location,
                        format!("run {run_id}: not a checkpoint name (20 digits expected)"),
                    )
                })
            })
            .collect::<Result<Vec<u64>>>()?;
        // LocalFileSystem lists in no particular order.
        positions.sort_unstable();
        Ok(positions)
    }

    fn decode_checkpoint(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
        bytes: &[u8],
    ) -> Result<Folded> {
        let path = self.layout.checkpoint(run_id, incarnation, position);
        let what = format!("run {run_id} checkpoint {position}");
        let stored: Checkpoint<RunState> = codec::decode_record(&what, &path, bytes)?;
        let record = stored.state.record();
        if stored.incarnation != incarnation
            || stored.next != position
            || record.incarnation != incarnation
            || record.run_id != *run_id
        {
            return Err(Error::corrupt(
                &path,
                format!(
                    "{what} holds run {} incarnation {} up to entry {}",
                    record.run_id, stored.incarnation, stored.next
                ),
            ));
        }
        Ok(Folded {
            state: stored.state.reindexed(),
            next: position,
            incarnation,
            checkpoint: position,
        })
    }

    /// After a commit: checkpoints the run if `interval` entries were
    /// committed since the newest checkpoint this instance knows of, or if
    /// the run just ended (nothing follows a terminal change, so a reader of
    /// a finished run reads the checkpoint alone). Best effort: the commit
    /// is durable in the log whatever happens here.
    pub(super) async fn checkpoint_if_due(&self, run_id: &RunId, folded: &mut Folded) {
        let due = folded.next - folded.checkpoint >= self.checkpoint_interval
            || folded.state.record().status.is_terminal();
        if !due || folded.next == folded.checkpoint {
            return;
        }
        match self.write_checkpoint(run_id, folded).await {
            Ok(()) => {
                let superseded = folded.checkpoint;
                folded.checkpoint = folded.next;
                if superseded > 0 {
                    let path = self
                        .layout
                        .checkpoint(run_id, folded.incarnation, superseded);
                    if let Err(e) = self.delete_all(vec![path]).await {
                        tracing::debug!(%run_id, error = %e, "superseded checkpoint kept");
                    }
                }
            }
            Err(e) => {
                tracing::debug!(%run_id, position = folded.next, error = %e, "checkpoint not written");
            }
        }
    }

    async fn write_checkpoint(&self, run_id: &RunId, folded: &Folded) -> Result<()> {
        let checkpoint = Checkpoint {
            incarnation: folded.incarnation,
            next: folded.next,
            state: &folded.state,
        };
        let encoded: Bytes = codec::encode_value("a run checkpoint", &checkpoint)?;
        let path = self
            .layout
            .checkpoint(run_id, folded.incarnation, folded.next);
        // Whoever wrote it, the checkpoint at this position holds this state.
        write_once::create_once(self.store.as_ref(), &path, &encoded).await?;
        Ok(())
    }
}
