//! Run checkpoints: the run folded up to a log position, so that loading a
//! run reads a checkpoint and the few entries after it instead of the whole
//! log.
//!
//! Checkpoints come at two levels, so that a long run is not copied whole
//! every few entries (which uploads bytes growing with the square of its
//! length):
//!
//! - a *base* (`checkpoint/<p>`) is the whole run up to `p`, written rarely:
//!   when the receipts and inputs since the previous base reach `2·√items`
//!   (at least [`MIN_BASE_ITEMS`]), so a run of `n` steps and signals
//!   uploads about `n^1.5` items' worth of checkpoints rather than `n²`;
//! - a *delta* (`delta/v2/<q>`) is the run up to `q` without the receipts
//!   and inputs (signals) of the base it names, and where those inputs
//!   stand now if that moved since the base (the record and snapshot stay
//!   whole: they change in place), written every few entries; at the
//!   terminal change it names no base and holds the whole run, so a finished
//!   run is read from it alone. Deltas written before inputs were kept in
//!   bases (`delta/<q>`, every input whole) are still read; a run of `n`
//!   signals made them write about `n²` signals' worth.
//!
//! A load reads the newest delta and its base and folds the log after the
//! delta; with no delta (data written before deltas existed, or a run
//! younger than its first one) it reads the newest base, as before.
//!
//! A checkpoint is read with the distrust a log entry gets: a log entry is
//! checked against the rules as it is folded, a checkpoint against what
//! those rules keep true (`RunState::check_stored`: receipts dense and each
//! with its commit digest, positions and attempt counts below their
//! largest value, each input once), so a damaged or forged one is
//! `Corrupt` naming it, never a panic or an overflow later.
//!
//! A checkpoint is a copy of what the log says, never the only record of a
//! change, so every rule of the log still holds with checkpoints:
//!
//! - it is derived only from committed entries: a writer checkpoints the
//!   state it folded from entries it read or created (and whose run pointer
//!   it checked), up to but not including the position it names;
//! - it is write-once (`PutMode::Create`). A base's content is a function of
//!   the entries before its position (the state encodes deterministically),
//!   so two writers of one base write the same bytes. Two writers of one
//!   delta position may not (one may name an older base): the first create
//!   stands, and the loser deletes nothing on the strength of its own;
//! - a delta is created only after the base it names exists: one this
//!   instance read, or whose create it saw settle. A base write that fails
//!   leaves the next delta naming the previous base;
//! - the log stays authoritative: a commit racing a checkpoint write goes to
//!   the log, after the checkpoint's position, where a reader finds it; a
//!   checkpoint write that fails or never happens only leaves a longer tail
//!   to fold (the next writer checkpoints it);
//! - superseded deltas and bases are deleted (best effort), but only once a
//!   newer delta of this instance settled, so each folder holds about one
//!   object and listing it is one request whatever the run's length. The
//!   newest base is kept when the run ends, for readers that know bases
//!   only. A reader whose delta was deleted between its listing and its
//!   read lists again; one whose delta names a base deleted meanwhile (a
//!   writer that was behind named an old base) reads the newest base and
//!   the longer tail after it instead.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use serde::{Deserialize, Serialize};

use super::ObjectStoreRuntimeStore;
use super::cache::Folded;
use crate::codec;
use crate::error::{Error, Result};
use crate::layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::InputPhase;
use crate::runtime_store::state::{RunState, Standing};
use crate::write_once::{self, Created};

/// How many listings of a checkpoint folder a load tries before it reads
/// less: each retry means a newer checkpoint replaced the one listed, which
/// takes other writers `interval` commits each time.
const LISTING_ATTEMPTS: usize = 3;

/// The fewest receipts and inputs a new base takes over the previous one.
/// Below `2·√items` (the interval that balances the bytes of bases against
/// those of deltas) a run of a few hundred steps would write a base every
/// few dozen; runs shorter than this never write one.
const MIN_BASE_ITEMS: u64 = 32;

/// A stored base: the run folded from its log entries before `next`.
#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint<S> {
    incarnation: Incarnation,
    next: u64,
    state: S,
}

/// A stored delta: the run folded from its log entries before `next`,
/// without the first `receipts_from` receipts and the first `inputs_from`
/// inputs, which the base at `base` holds (`None`: no base, both are 0 and
/// `state` is whole). `standings` says where those of the base's inputs
/// stand now that stand otherwise in the base (`(index, phase, consumer)`).
///
/// Deltas under `delta/v2/` have this form; those directly under `delta/`
/// (written before inputs were kept in bases) lack the last two fields,
/// which decode as 0 and empty: their `state` holds every input.
#[derive(Debug, Serialize, Deserialize)]
struct Delta<S> {
    incarnation: Incarnation,
    next: u64,
    base: Option<u64>,
    receipts_from: u64,
    #[serde(default)]
    inputs_from: u64,
    #[serde(default)]
    standings: Vec<(u64, InputPhase, Option<u64>)>,
    state: S,
}

/// A base, as the deltas that name it need it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Base {
    position: u64,
    receipts: u64,
    inputs: u64,
    /// Where each of its inputs stands in it, if this instance knows (it
    /// read or wrote the base); if not, a delta names where every one of
    /// them stands now.
    standings: Option<Vec<Standing>>,
}

impl Base {
    fn of(position: u64, state: &RunState) -> Base {
        Base {
            position,
            receipts: state.receipt_count(),
            inputs: state.input_count(),
            standings: Some(state.standings(state.input_count())),
        }
    }
}

/// Which of the two forms of delta a stored one has (see [`Delta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DeltaForm {
    /// `delta/<position>`: every input in its state.
    Whole,
    /// `delta/v2/<position>`: inputs kept in the base.
    InputsInBase,
}

/// What one instance knows of a run's checkpoints.
#[derive(Debug, Default)]
pub(super) struct Checkpoints {
    /// The position of the newest delta this instance read or wrote (0:
    /// none, so one is due as soon as the run has `interval` entries).
    delta: u64,
    /// Where that delta is stored.
    delta_at: Option<Path>,
    /// The base the next delta names: one this instance read, or whose
    /// create it saw settle.
    base: Option<Base>,
    /// Deltas and bases newer ones replaced, deleted once a delta of this
    /// instance settles.
    superseded: Vec<Path>,
}

/// What reading the newest delta found.
enum DeltaRead {
    Loaded(Box<Folded>),
    /// Deleted since the listing: a newer one replaced it.
    Gone,
    /// It names a base that is gone.
    BaseGone,
}

impl ObjectStoreRuntimeStore {
    /// The run folded up to its newest checkpoint, or as `created` if it
    /// has none.
    pub(super) async fn load_checkpoint(
        &self,
        run_id: &RunId,
        created: RunState,
    ) -> Result<Folded> {
        let incarnation = created.record().incarnation;
        for _ in 0..LISTING_ATTEMPTS {
            let Some(newest) = self.newest_delta(run_id, incarnation).await? else {
                return self.load_base(run_id, created, None).await;
            };
            match self.read_delta(run_id, incarnation, newest, None).await? {
                DeltaRead::Loaded(folded) => return Ok(*folded),
                DeltaRead::Gone => {}
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
    pub(super) async fn skip_to_newer_checkpoint(
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
                        let old = self.layout.checkpoint(run_id, incarnation, old.position);
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
        let folder = self.layout.checkpoint_folder(run_id, incarnation);
        for _ in 0..LISTING_ATTEMPTS {
            let Some(newest) = self.positions(run_id, &folder, "checkpoint").await?.pop() else {
                return Ok(none);
            };
            let path = self.layout.checkpoint(run_id, incarnation, newest);
            // Deleted since the listing: a newer one replaced it.
            let Some(bytes) =
                write_once::read(self.store.as_ref(), &path, Limit::CHECKPOINT, &self.seal).await?
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
        let Some(bytes) =
            write_once::read(self.store.as_ref(), &path, Limit::CHECKPOINT, &self.seal).await?
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
                        let base_path = self.layout.checkpoint(run_id, incarnation, p);
                        let read = write_once::read(
                            self.store.as_ref(),
                            &base_path,
                            Limit::CHECKPOINT,
                            &self.seal,
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
        })))
    }

    /// The newest delta of the incarnation, of either form (the newer form
    /// first at one position): both lie under `delta/`, so one listing
    /// finds them.
    async fn newest_delta(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<(u64, DeltaForm)>> {
        let folder = self.layout.delta_folder(run_id, incarnation);
        let v2 = self.layout.delta_v2_folder(run_id, incarnation);
        let metas: Vec<_> = self
            .store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(&folder, e))?;
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

    fn delta_path(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        (position, form): (u64, DeltaForm),
    ) -> Path {
        match form {
            DeltaForm::Whole => self.layout.delta(run_id, incarnation, position),
            DeltaForm::InputsInBase => self.layout.delta_v2(run_id, incarnation, position),
        }
    }

    /// The positions in a checkpoint folder (`what`: "delta" or
    /// "checkpoint"), in order.
    async fn positions(&self, run_id: &RunId, folder: &Path, what: &str) -> Result<Vec<u64>> {
        let metas: Vec<_> = self
            .store
            .list(Some(folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(folder, e))?;
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
        let path = self.layout.checkpoint(run_id, incarnation, position);
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

    /// After a commit: writes a delta if `interval` entries were committed
    /// since the newest delta this instance knows of (and first a new base
    /// if enough receipts came since the last), or a whole-run delta if the
    /// run just ended (nothing follows a terminal change, so a reader of a
    /// finished run reads that delta alone). Best effort: the commit is
    /// durable in the log whatever happens here.
    pub(super) async fn checkpoint_if_due(&self, run_id: &RunId, folded: &mut Folded) {
        let terminal = folded.state.record().status.is_terminal();
        let last = folded.checkpoints.delta;
        let due = folded.next.saturating_sub(last) >= self.checkpoint_interval || terminal;
        if !due || folded.next == last {
            return;
        }
        if !terminal && base_due(folded) {
            self.rebase(run_id, folded).await;
        }
        let base = if terminal {
            None
        } else {
            folded.checkpoints.base.clone()
        };
        let created = match self.write_delta(run_id, folded, base).await {
            Ok(created) => created,
            Err(e) => {
                tracing::debug!(%run_id, position = folded.next, error = %e, "checkpoint delta not written");
                return;
            }
        };
        let checkpoints = &mut folded.checkpoints;
        checkpoints.superseded.extend(checkpoints.delta_at.take());
        checkpoints.delta = folded.next;
        let form = (folded.next, DeltaForm::InputsInBase);
        checkpoints.delta_at = Some(self.delta_path(run_id, folded.incarnation, form));
        // Another writer's delta at this position may name a base this
        // instance replaced: only a delta of ours makes deleting it safe.
        if let Created::Theirs(_) = created {
            return;
        }
        let superseded = std::mem::take(&mut checkpoints.superseded);
        if let Err(e) = self.delete_all(superseded).await {
            tracing::debug!(%run_id, error = %e, "superseded checkpoints kept");
        }
    }

    /// Writes a base at `folded.next` and makes the next delta name it, if
    /// its create settles as this state.
    async fn rebase(&self, run_id: &RunId, folded: &mut Folded) {
        let checkpoint = Checkpoint {
            incarnation: folded.incarnation,
            next: folded.next,
            state: &folded.state,
        };
        let path = self
            .layout
            .checkpoint(run_id, folded.incarnation, folded.next);
        let written = match codec::encode_value("a run checkpoint", &checkpoint) {
            Ok(encoded) => {
                write_once::create_once(
                    self.store.as_ref(),
                    &path,
                    &encoded,
                    Limit::CHECKPOINT,
                    &self.seal,
                )
                .await
            }
            Err(e) => Err(e),
        };
        match written {
            Ok(Created::Ours(_) | Created::Same(_)) => {
                let base = Base::of(folded.next, &folded.state);
                let checkpoints = &mut folded.checkpoints;
                if let Some(old) = checkpoints.base.replace(base) {
                    let old = self
                        .layout
                        .checkpoint(run_id, folded.incarnation, old.position);
                    checkpoints.superseded.push(old);
                }
            }
            Ok(Created::Theirs(_)) => {
                tracing::debug!(%run_id, position = folded.next, "another checkpoint at this position");
            }
            Err(e) => {
                tracing::debug!(%run_id, position = folded.next, error = %e, "checkpoint not written");
            }
        }
    }

    async fn write_delta(
        &self,
        run_id: &RunId,
        folded: &Folded,
        base: Option<Base>,
    ) -> Result<Created> {
        let state = &folded.state;
        let (receipts_from, inputs_from) = base.as_ref().map_or((0, 0), |b| (b.receipts, b.inputs));
        // Only the base's inputs that moved since it, if this instance
        // knows where they stood in it; otherwise every one of them.
        let then = base.as_ref().and_then(|b| b.standings.as_deref());
        let standings = (0..)
            .zip(state.standings(inputs_from))
            .filter(|(i, now)| {
                let then = then.and_then(|then| then.get(usize::try_from(*i).ok()?));
                then != Some(now)
            })
            .map(|(i, (phase, consumed_by))| (i, phase, consumed_by))
            .collect();
        let delta = Delta {
            incarnation: folded.incarnation,
            next: folded.next,
            base: base.as_ref().map(|b| b.position),
            receipts_from,
            inputs_from,
            standings,
            state: state.without_first(receipts_from, inputs_from),
        };
        let encoded: Bytes = codec::encode_value("a run checkpoint delta", &delta)?;
        let path = self
            .layout
            .delta_v2(run_id, folded.incarnation, folded.next);
        write_once::create_once(
            self.store.as_ref(),
            &path,
            &encoded,
            Limit::CHECKPOINT,
            &self.seal,
        )
        .await
    }
}

/// Whether enough receipts and inputs came since the base for a new one:
/// at least `2·√items`, which keeps the bytes of deltas (each up to that
/// many items, every `interval` entries) and of bases (each the whole run)
/// of the same order, about `n^1.5` items' worth for a run of `n` steps
/// and inputs.
fn base_due(folded: &Folded) -> bool {
    let state = &folded.state;
    let items = state.receipt_count().saturating_add(state.input_count());
    let based =
        (folded.checkpoints.base.as_ref()).map_or(0, |b| b.receipts.saturating_add(b.inputs));
    let since = items.saturating_sub(based);
    since >= MIN_BASE_ITEMS.max(2 * items.isqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_bytes(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The stored form of a delta that leaves receipts and inputs to its
    /// base (`delta/v2/`): a data format, pinned byte for byte (`()` stands
    /// in for the run state, whose form this change leaves as it was).
    #[test]
    fn a_delta_that_leaves_inputs_to_its_base_is_pinned() {
        let delta = Delta {
            incarnation: Incarnation::from_u64(0xab),
            next: 72,
            base: Some(64),
            receipts_from: 3,
            inputs_from: 2,
            standings: vec![(1, InputPhase::Consumed, Some(2))],
            state: (),
        };
        let encoded = codec::encode(&delta).unwrap();
        assert_eq!(
            hex(&encoded),
            "87ab696e6361726e6174696f6eccaba46e65787448a46261736540ad72656365697074735f66726f6d03\
             ab696e707574735f66726f6d02a97374616e64696e6773919301a8436f6e73756d656402a57374617465c0"
        );
        // A delta of the release before decodes with nothing left to its
        // base's inputs.
        let old = "85ab696e6361726e6174696f6eccaba46e65787444a46261736540\
                   ad72656365697074735f66726f6d03a57374617465c0";
        let old: Delta<()> = codec::decode(&hex_bytes(old)).unwrap();
        assert_eq!((old.inputs_from, old.standings.len()), (0, 0));
    }
}
