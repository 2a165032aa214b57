//! Writing checkpoints after a commit: a delta every few entries, a base
//! before it when enough items came since the last, and deleting the bases
//! (and older forms of delta) they supersede.

use bytes::Bytes;

use super::super::client::Owner;
use super::{Checkpoint, Checkpointer, Delta, DeltaForm, MIN_BASE_ITEMS};
use crate::codec;
use crate::error::Result;
use crate::read_limit::Limit;
use crate::run_id::RunId;
use crate::runtime_store::object::folded::{Base, Folded};
use crate::write_once::Created;

impl Checkpointer {
    /// After a commit: writes a delta if [`span`](Self::span) entries were
    /// committed since the newest delta this instance knows of (and first a
    /// new base if enough receipts came since the last), or a whole-run
    /// delta if the run just ended (nothing follows a terminal change, so a
    /// reader of a finished run reads that delta alone). Best effort: the
    /// commit is durable in the log whatever happens here.
    pub(in crate::runtime_store::object) async fn write_if_due(
        &self,
        run_id: &RunId,
        folded: &mut Folded,
    ) {
        let terminal = folded.state.record().status.is_terminal();
        let last = folded.checkpoints.delta;
        let due = folded.next.saturating_sub(last) >= self.span(folded) || terminal;
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
        let form = (folded.next, DeltaForm::NewestFirst);
        checkpoints.delta_at = Some(self.delta_path(run_id, folded.incarnation, form));
        // Another writer's delta at this position may name a base this
        // instance replaced: only a delta of ours makes deleting it safe.
        if let Created::Theirs(_) = created {
            return;
        }
        // Deltas of the form written are kept until the run's deletion: a
        // reader finds the newest first however many there are.
        let kept = self
            .client
            .layout()
            .deltas_folder(run_id, folded.incarnation);
        let mut superseded = std::mem::take(&mut checkpoints.superseded);
        superseded.retain(|path| !path.prefix_matches(&kept));
        if let Err(e) = self.client.delete_all(superseded).await {
            tracing::debug!(%run_id, error = %e, "superseded checkpoints kept");
        }
    }

    /// How many log entries may follow the newest delta before the next is
    /// due: `interval`, or one more while the run has no base. A fresh load
    /// reads the newest delta, the base it names and the entries after it
    /// (or, with no delta yet, lists the incarnation's folder and finds no
    /// checkpoint there): a delta that names no base, or none, leaves room
    /// for one more entry in the same `interval + 4` requests, and a run of
    /// 3 steps (5 entries: its start, the steps, its end) then writes only
    /// its terminal delta.
    fn span(&self, folded: &Folded) -> u64 {
        let baseless = folded.checkpoints.base.is_none();
        self.interval.saturating_add(u64::from(baseless))
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
            .client
            .layout()
            .checkpoint(run_id, folded.incarnation, folded.next);
        let written = match codec::encode_value("a run checkpoint", &checkpoint) {
            Ok(encoded) => {
                self.client
                    .create(
                        &path,
                        &encoded,
                        Limit::CHECKPOINT,
                        Owner::Incarnation(run_id, folded.incarnation),
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
                    let old =
                        self.client
                            .layout()
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
            .client
            .layout()
            .delta_newest_first(run_id, folded.incarnation, folded.next);
        self.client
            .create(
                &path,
                &encoded,
                Limit::CHECKPOINT,
                Owner::Incarnation(run_id, folded.incarnation),
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
