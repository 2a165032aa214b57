//! Loading a run from its checkpoints: the newest delta, the base it names
//! (or the newest base), each checked as it is decoded.

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;

use super::super::client::Owner;
use super::{Checkpoint, Checkpointer, Delta, DeltaForm, LISTING_ATTEMPTS};
use crate::codec;
use crate::error::{Error, Result};
use crate::layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::object::folded::{Base, Checkpoints, Folded};
use crate::runtime_store::state::RunState;

/// How many names of a listing of `deltas/` a load reads at most to find
/// the newest: one page of an S3 or GCS listing (one request), the deltas
/// of a run's first 4,000 log entries at the default interval.
const NEWEST_AMONG: usize = 1_000;

/// What reading the newest delta found.
enum DeltaRead {
    Loaded(Box<Folded>),
    /// Deleted since the listing: a newer one replaced it.
    Gone,
    /// It names a base that is gone.
    BaseGone,
}

impl Checkpointer {
    /// The run folded up to its newest checkpoint, or as `created` if it
    /// has none.
    pub(in crate::runtime_store::object) async fn load(
        &self,
        run_id: &RunId,
        created: RunState,
    ) -> Result<Folded> {
        let incarnation = created.record().incarnation;
        let mut vanished = None;
        for _ in 0..LISTING_ATTEMPTS {
            let newest = match self.newest_kept_delta(run_id, incarnation).await? {
                Some(newest) => Some(newest),
                // None of the form written: a run younger than its first
                // delta, or written before that form. One listing of the
                // incarnation's folder tells the first (no checkpoint
                // folder at all: the log is the whole run) from the second
                // (the older deltas and the bases are listed), so that a
                // young run costs the listings a run with deltas costs.
                None if vanished.is_none()
                    && !self.has_checkpoints(run_id, incarnation).await? =>
                {
                    return Ok(Folded::created(created, incarnation));
                }
                None => self.newest_older_delta(run_id, incarnation).await?,
            };
            let Some(newest) = newest else {
                // A delta is deleted only once a newer one settled: one that
                // vanished with none after it went with its incarnation's
                // folder, which a deletion lists once the run's pointer is
                // gone. Folding the rest (nothing, or a part) would read
                // the deleted run as just created, for a writer to commit
                // into its freed log (seed 101): the caller's pointer read
                // tells a deletion from a corrupt run.
                if let Some(path) = vanished {
                    return Err(Error::corrupt(
                        path,
                        format!(
                            "run {run_id}: its checkpoint delta vanished, and no newer one exists"
                        ),
                    ));
                }
                return self.load_base(run_id, created, None).await;
            };
            match self.read_delta(run_id, incarnation, newest, None).await? {
                DeltaRead::Loaded(folded) => return Ok(*folded),
                DeltaRead::Gone => vanished = Some(self.delta_path(run_id, incarnation, newest)),
                DeltaRead::BaseGone => {
                    let unusable = self.delta_path(run_id, incarnation, newest);
                    return self.load_base(run_id, created, Some(unusable)).await;
                }
            }
        }
        self.load_base(run_id, created, None).await
    }

    /// Replaces `folded` with the run read from the newest delta if that is
    /// ahead of it: how a cached run that fell behind skips the log entries
    /// the delta covers. The cached receipts stand in for the delta's base
    /// where they cover it (both are copies of the same log entries), so the
    /// base is read only if it is ahead of the cache too. A delta whose base
    /// is gone is passed over for the newest base, as in a fresh load, if
    /// that is ahead of `folded`.
    pub(in crate::runtime_store::object) async fn skip_to_newer(
        &self,
        run_id: &RunId,
        folded: &mut Folded,
    ) -> Result<()> {
        let incarnation = folded.incarnation;
        for _ in 0..LISTING_ATTEMPTS {
            let Some(newest) = self.newest_delta(run_id, incarnation).await? else {
                return Ok(());
            };
            if newest.0 <= folded.next {
                return Ok(());
            }
            match self
                .read_delta(run_id, incarnation, newest, Some(&folded.state))
                .await?
            {
                DeltaRead::Loaded(newer) => {
                    let mut newer = *newer;
                    let known = std::mem::take(&mut folded.checkpoints);
                    let checkpoints = &mut newer.checkpoints;
                    checkpoints.superseded = known.superseded;
                    // What this instance wrote before is older than the
                    // delta read, and deleted with what it supersedes.
                    checkpoints.superseded.extend(known.delta_at);
                    let newer_base = checkpoints.base.as_ref().map(|b| b.position);
                    if let Some(old) = known.base
                        && newer_base.is_some_and(|new| new > old.position)
                    {
                        let old =
                            self.client
                                .layout()
                                .checkpoint(run_id, incarnation, old.position);
                        checkpoints.superseded.push(old);
                    }
                    *folded = newer;
                    return Ok(());
                }
                DeltaRead::Gone => {}
                DeltaRead::BaseGone => {
                    // As a fresh load does: the newest base, if it is ahead.
                    let unusable = self.delta_path(run_id, incarnation, newest);
                    let fallback = folded.state.clone();
                    let based = self.load_base(run_id, fallback, Some(unusable)).await?;
                    if based.next > folded.next {
                        let mut based = based;
                        let known = std::mem::take(&mut folded.checkpoints);
                        let superseded = &mut based.checkpoints.superseded;
                        superseded.extend(known.superseded);
                        superseded.extend(known.delta_at);
                        *folded = based;
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The run folded up to its newest base, or as `created` if it has
    /// none. `unusable` is a delta that names a base that is gone: it is
    /// deleted once a newer delta of this instance settles.
    async fn load_base(
        &self,
        run_id: &RunId,
        created: RunState,
        unusable: Option<Path>,
    ) -> Result<Folded> {
        let incarnation = created.record().incarnation;
        let mut none = Folded::created(created, incarnation);
        none.checkpoints.superseded.extend(unusable);
        let folder = self.client.layout().checkpoint_folder(run_id, incarnation);
        for _ in 0..LISTING_ATTEMPTS {
            let Some(newest) = self.positions(run_id, &folder, "checkpoint").await?.pop() else {
                return Ok(none);
            };
            let path = self.client.layout().checkpoint(run_id, incarnation, newest);
            // Deleted since the listing: a newer one replaced it.
            let Some(bytes) = self
                .client
                .read(
                    &path,
                    Limit::CHECKPOINT,
                    Owner::Incarnation(run_id, incarnation),
                )
                .await?
            else {
                continue;
            };
            let state = self.decode_base(run_id, incarnation, newest, &bytes)?;
            let base = Base::of(newest, &state);
            return Ok(Folded {
                state: state.reindexed(),
                next: newest,
                incarnation,
                checkpoints: Checkpoints {
                    delta: 0,
                    delta_at: None,
                    base: Some(base),
                    superseded: none.checkpoints.superseded,
                },
                pointer_version: None,
            });
        }
        Ok(none)
    }

    /// Reads the delta at `position` and the base it names, and joins them.
    /// `known` is the run folded from the log up to an earlier position:
    /// where it holds every receipt the base holds, they are taken from it
    /// rather than read again.
    async fn read_delta(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        (position, form): (u64, DeltaForm),
        known: Option<&RunState>,
    ) -> Result<DeltaRead> {
        let path = self.delta_path(run_id, incarnation, (position, form));
        let Some(bytes) = self
            .client
            .read(
                &path,
                Limit::CHECKPOINT,
                Owner::Incarnation(run_id, incarnation),
            )
            .await?
        else {
            return Ok(DeltaRead::Gone);
        };
        let what = format!("run {run_id} checkpoint delta {position}");
        let delta: Delta<RunState> = codec::decode_record(&what, &path, &bytes)?;
        let record = delta.state.record();
        let base_after = delta.base.is_some_and(|p| p > position);
        if delta.incarnation != incarnation
            || delta.next != position
            || position == u64::MAX
            || record.incarnation != incarnation
            || record.run_id != *run_id
            || base_after
            || (delta.base.is_none() && (delta.receipts_from, delta.inputs_from) != (0, 0))
        {
            return Err(Error::corrupt(
                &path,
                format!(
                    "{what} holds run {} incarnation {} up to entry {} over base {:?}",
                    record.run_id, delta.incarnation, delta.next, delta.base
                ),
            ));
        }
        if let Err(reason) = delta.state.check_stored(delta.receipts_from) {
            return Err(Error::corrupt(&path, format!("{what}: {reason}")));
        }
        let (state, base) = match delta.base {
            None => (delta.state, None),
            Some(p) => {
                // Where the base holds inputs, where they stand in it is
                // known only from the base itself.
                let covered = known
                    .filter(|k| k.receipt_count() >= delta.receipts_from && delta.inputs_from == 0);
                let base = match covered {
                    Some(known) => known.with_receipts_before(delta.receipts_from),
                    None => {
                        let base_path = self.client.layout().checkpoint(run_id, incarnation, p);
                        let read = self
                            .client
                            .read(
                                &base_path,
                                Limit::CHECKPOINT,
                                Owner::Incarnation(run_id, incarnation),
                            )
                            .await?;
                        let Some(bytes) = read else {
                            return Ok(DeltaRead::BaseGone);
                        };
                        self.decode_base(run_id, incarnation, p, &bytes)?
                    }
                };
                let held = (base.receipt_count(), base.input_count());
                // What the next delta may leave to this base: its inputs if
                // they were read, none if not.
                let known_base = Base::of(p, &base);
                let joined = (held.0 == delta.receipts_from && held.1 >= delta.inputs_from)
                    .then(|| {
                        let standings = &delta.standings;
                        delta.state.joined_to(base, delta.inputs_from, standings)
                    })
                    .flatten();
                let Some(state) = joined else {
                    return Err(Error::corrupt(
                        &path,
                        format!(
                            "{what} follows receipt {} and input {} of base {p}, \
                             which holds {} and {}",
                            delta.receipts_from, delta.inputs_from, held.0, held.1
                        ),
                    ));
                };
                if let Err(reason) = state.check_stored(0) {
                    return Err(Error::corrupt(
                        &path,
                        format!("{what} over base {p}: {reason}"),
                    ));
                }
                (state, Some(known_base))
            }
        };
        Ok(DeltaRead::Loaded(Box::new(Folded {
            state: state.reindexed(),
            next: position,
            incarnation,
            checkpoints: Checkpoints {
                delta: position,
                delta_at: Some(path),
                base,
                superseded: Vec::new(),
            },
            pointer_version: None,
        })))
    }

    /// The newest delta of the incarnation: the first name of a listing of
    /// `deltas/` in order (one request, whatever the folder holds), or, if
    /// the run has none there (a run younger than its first delta, or data
    /// written before them), the newest of the older forms under `delta/`.
    async fn newest_delta(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<(u64, DeltaForm)>> {
        if let Some(newest) = self.newest_kept_delta(run_id, incarnation).await? {
            return Ok(Some(newest));
        }
        self.newest_older_delta(run_id, incarnation).await
    }

    /// The newest delta of the form written (under `deltas/`), if any.
    async fn newest_kept_delta(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<(u64, DeltaForm)>> {
        let kept = self.client.layout().deltas_folder(run_id, incarnation);
        // Below every name (each has 20 digits), so the listing starts at
        // the first. S3, GCS, Azure and memo's local folder list from an
        // offset in order, so the first name is the newest; the rest of the
        // first page (which those stores return whole in its one request)
        // is read too, so that of a store that lists in no order
        // (`object_store`'s `LocalFileSystem`) the newest of up to
        // `NEWEST_AMONG` deltas is found. Past that, any delta found is
        // still right to load from (only the log tail after it is longer).
        let offset = kept.clone().join("0");
        let mut listing = (self.client.store())
            .list_with_offset(Some(&kept), &offset)
            .take(NEWEST_AMONG);
        let mut newest: Option<u64> = None;
        while let Some(meta) = listing
            .try_next()
            .await
            .map_err(|e| Error::store(&kept, e))?
        {
            let position = layout::parse_log_position(&meta.location)
                .map(|inverted| u64::MAX - inverted)
                .filter(|&p| {
                    self.delta_path(run_id, incarnation, (p, DeltaForm::NewestFirst))
                        == meta.location
                });
            let Some(position) = position else {
                return Err(Error::corrupt(
                    &meta.location,
                    format!("run {run_id}: not a delta name (20 digits expected)"),
                ));
            };
            newest = newest.max(Some(position));
        }
        Ok(newest.map(|position| (position, DeltaForm::NewestFirst)))
    }

    /// Whether the incarnation's folder holds a folder of checkpoints of
    /// any form (deltas, older deltas, bases): one delimited listing, which
    /// names the folders, not what they hold.
    async fn has_checkpoints(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let layout = self.client.layout();
        let folder = layout.incarnation_records(run_id, incarnation);
        let listing = (self.client.store())
            .list_with_delimiter(Some(&folder))
            .await
            .map_err(|e| Error::store(&folder, e))?;
        let checkpoints = [
            layout.deltas_folder(run_id, incarnation),
            layout.delta_folder(run_id, incarnation),
            layout.checkpoint_folder(run_id, incarnation),
        ];
        Ok(listing
            .common_prefixes
            .iter()
            .any(|prefix| checkpoints.contains(prefix)))
    }

    /// The newest delta of the older forms, both under `delta/` (the newer
    /// form first at one position), so one listing finds them.
    async fn newest_older_delta(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<(u64, DeltaForm)>> {
        let folder = self.client.layout().delta_folder(run_id, incarnation);
        let v2 = self.client.layout().delta_v2_folder(run_id, incarnation);
        let metas = self.client.list(&folder).await?;
        let mut newest = None;
        for meta in metas {
            let form = if meta.location.prefix_matches(&v2) {
                DeltaForm::InputsInBase
            } else {
                DeltaForm::Whole
            };
            let position = layout::parse_log_position(&meta.location);
            let expected = position.map(|p| self.delta_path(run_id, incarnation, (p, form)));
            let Some(position) = position.filter(|_| expected.as_ref() == Some(&meta.location))
            else {
                return Err(Error::corrupt(
                    &meta.location,
                    format!("run {run_id}: not a delta name (20 digits expected)"),
                ));
            };
            newest = newest.max(Some((position, form)));
        }
        Ok(newest)
    }

    /// The positions in a checkpoint folder (`what`: "delta" or
    /// "checkpoint"), in order.
    async fn positions(&self, run_id: &RunId, folder: &Path, what: &str) -> Result<Vec<u64>> {
        let metas = self.client.list(folder).await?;
        let mut positions = metas
            .iter()
            .map(|meta| {
                layout::parse_log_position(&meta.location).ok_or_else(|| {
                    Error::corrupt(
                        &meta.location,
                        format!("run {run_id}: not a {what} name (20 digits expected)"),
                    )
                })
            })
            .collect::<Result<Vec<u64>>>()?;
        // LocalFileSystem lists in no particular order.
        positions.sort_unstable();
        Ok(positions)
    }

    /// Decodes the base at `position` (its input index not yet rebuilt).
    fn decode_base(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
        bytes: &[u8],
    ) -> Result<RunState> {
        let path = self
            .client
            .layout()
            .checkpoint(run_id, incarnation, position);
        let what = format!("run {run_id} checkpoint {position}");
        let stored: Checkpoint<RunState> = codec::decode_record(&what, &path, bytes)?;
        let record = stored.state.record();
        if stored.incarnation != incarnation
            || stored.next != position
            || position == u64::MAX
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
        if let Err(reason) = stored.state.check_stored(0) {
            return Err(Error::corrupt(&path, format!("{what}: {reason}")));
        }
        Ok(stored.state)
    }
}
