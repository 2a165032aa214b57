//! The status-hint index: one small object per (status, run incarnation)
//! that lets `list_runs` read only the runs in a status, written before a
//! change moves a run into it and deleted once the run left it.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStoreExt};

use super::client::{CONCURRENCY, Client};
use super::pointer::RunPointer;
use crate::error::{Error, Result};
use crate::layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::state::{Change, RunState};
use crate::runtime_store::{RunIdPage, RunStatus};
use crate::write_once;

/// The status hints of one store: how they are written, listed and tidied.
pub(super) struct HintIndex {
    client: Arc<Client>,
    /// Whose pointer tells a live hint from a stale one.
    pointer: RunPointer,
    /// Whether a listing deletes the stale hints it meets (see
    /// `with_read_only_listings`).
    tidy: bool,
    /// Whether the store lists in lexical order (see `with_ordered_listings`).
    ordered: bool,
}

impl HintIndex {
    /// An index that tidies what it lists and reads listings in any order.
    pub(super) fn new(client: Arc<Client>, pointer: RunPointer) -> HintIndex {
        HintIndex {
            client,
            pointer,
            tidy: true,
            ordered: false,
        }
    }

    /// The same index, deleting no stale hint it lists.
    pub(super) fn read_only(self) -> HintIndex {
        HintIndex {
            tidy: false,
            ..self
        }
    }

    /// The same index, over a store that lists in lexical order.
    pub(super) fn ordered(self) -> HintIndex {
        HintIndex {
            ordered: true,
            ..self
        }
    }

    /// Before a change moves the run into a status, records the hint that
    /// lets [`RuntimeStore::list_runs`] find it there. A hint without the
    /// change (a crash or a conflict in between) is only a wasted read later.
    pub(super) async fn write_for(
        &self,
        run_id: &RunId,
        state: &RunState,
        change: &Change,
    ) -> Result<()> {
        let Change::Commit(commit) = change else {
            return Ok(());
        };
        let Some(status) = &commit.status else {
            return Ok(());
        };
        let status = status.status();
        let record = state.record();
        if record.status == status {
            return Ok(());
        }
        self.write(status, run_id, record.incarnation).await
    }

    pub(super) async fn write(
        &self,
        status: RunStatus,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<()> {
        let path = self
            .client
            .layout()
            .status_hint(status.path_segment(), run_id, incarnation);
        // Plain, as every marker: a hint names no data, and is read by
        // listings that hold no run's key.
        write_once::create_marker(
            self.client.store().as_ref(),
            &path,
            run_id.as_str().as_bytes(),
            Limit::MARKER,
        )
        .await?;
        Ok(())
    }

    /// Deletes the hint of a status the run has left for good (statuses
    /// only move forward). Best effort: the change is committed whatever
    /// happens here, and a hint left behind only costs a later listing a
    /// read, after which that listing deletes it (unless it is read-only).
    pub(super) async fn drop(&self, left: RunStatus, run_id: &RunId, incarnation: Incarnation) {
        let hint = self
            .client
            .layout()
            .status_hint(left.path_segment(), run_id, incarnation);
        if let Err(e) = self.client.delete_all(vec![hint]).await {
            tracing::debug!(run_id = %run_id, status = %left, error = %e, "stale status hint kept");
        }
    }

    /// The runs (and incarnations) hinted to be in `status`. Objects that
    /// are not hints are skipped with a warning.
    pub(super) async fn list(&self, status: RunStatus) -> Result<Vec<(RunId, Incarnation)>> {
        let folder = self.client.layout().status_folder(status.path_segment());
        let hints = self.client.list(&folder).await?;
        Ok(hints
            .iter()
            .filter_map(|hint| {
                let parsed = layout::parse_status_hint(&hint.location);
                if parsed.is_none() {
                    tracing::warn!(path = %hint.location, "not a run status hint; skipped");
                }
                parsed
            })
            .collect())
    }

    /// One page of the run ids hinted to be in `status` after `after`, in
    /// the hints' order. On a store that lists in order
    /// ([`with_ordered_listings`](super::ObjectStoreRuntimeStore::with_ordered_listings)): one listing
    /// from the cursor's offset, read only as far as the page and one hint
    /// past it (each further batch of hints is read only if the ones before
    /// were not enough). On any other: the whole listing after the cursor,
    /// keeping only the first runs wanted. For `Pending`, each hint kept is
    /// checked against its run's pointer and tidied as
    /// [`live_pending_hints`](Self::live_pending) tidies it, so a page
    /// lists no hint of an unborn incarnation and its cursor says whether a
    /// live one follows.
    pub(super) async fn page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        let limit = limit.max(1);
        let folder = self.client.layout().status_folder(status.path_segment());
        // An ordered listing starts from an offset even on the first page:
        // a local folder lists in order only from one.
        let mut offset = match after {
            Some(after) => Some(
                self.client
                    .layout()
                    .status_hints_after(status.path_segment(), after),
            ),
            None => self.ordered.then(|| folder.clone()),
        };
        let listing = |offset: Option<&Path>| match offset {
            None => self.client.store().list(Some(&folder)),
            Some(offset) => self.client.store().list_with_offset(Some(&folder), offset),
        };
        let mut ordered = self.ordered.then(|| listing(offset.as_ref()));
        let mut ids: Vec<RunId> = Vec::new();
        let mut ended = false;
        while !ended && ids.len() <= limit {
            // The runs still wanted: the page's rest and one past it.
            let wanted = limit + 1 - ids.len();
            let batch = match ordered.as_mut() {
                Some(hints) => {
                    let mut batch = Vec::with_capacity(wanted);
                    while batch.len() < wanted {
                        let Some(hint) = hints.next().await else {
                            ended = true;
                            break;
                        };
                        let hint = hint.map_err(|e| Error::store(&folder, e))?;
                        batch.extend(parse_hint(&hint.location));
                    }
                    batch
                }
                None => {
                    let (batch, more) = first_hints(listing(offset.as_ref()), wanted)
                        .await
                        .map_err(|e| Error::store(&folder, e))?;
                    ended = !more;
                    if let Some((run_id, _)) = batch.last() {
                        offset = Some(
                            self.client
                                .layout()
                                .status_hints_after(status.path_segment(), run_id),
                        );
                    }
                    batch
                }
            };
            let batch = if status == RunStatus::Pending {
                self.live_pending(batch).await?
            } else {
                batch
            };
            for (run_id, _) in batch {
                // The hints of one run (its incarnations) come together.
                if ids.last() != Some(&run_id) {
                    ids.push(run_id);
                }
            }
        }
        // Stops the listing: nothing past the page is read.
        drop(ordered);
        let next = if ids.len() > limit {
            ids.truncate(limit);
            ids.last().cloned()
        } else {
            None
        };
        Ok(RunIdPage::new(ids, next))
    }

    /// Deletes a hint that a listing found stale, unless listings are
    /// read-only ([`with_read_only_listings`](super::ObjectStoreRuntimeStore::with_read_only_listings)).
    ///
    /// `unborn`: the hint's incarnation was not the run's when the listing
    /// read it. Such a hint is of a deleted incarnation, or of one whose
    /// creator stopped (or gave up) between the hint and the pointer, or of
    /// one whose creator is between them right now: a creator writes the
    /// `Pending` hint, then the pointer, and the delete may land after its
    /// pointer. So the pointer is read again after the delete, and the hint
    /// written back if it now names the incarnation. With the creator's own
    /// check of its hint once its pointer and record stand (see
    /// [`ensure_pending`](Self::ensure_pending)), a created run
    /// keeps its hint whichever comes first: if the delete lands before the
    /// creator's check, the check writes the hint again; if after, the
    /// pointer was written before the delete, so the read after it finds
    /// the incarnation current and writes the hint back (a run deleted
    /// meanwhile gets a hint that the next tidying listing removes). A
    /// creator that stops for good between its pointer and its check leaves
    /// the run without its hint; the next `create_run` of the id (the
    /// caller's retry, a queue's redelivery) writes it back before it
    /// answers. Until then, and while a creation is under way, a listing of
    /// `Pending` runs may leave the run out.
    pub(super) async fn tidy(
        &self,
        status: RunStatus,
        run_id: &RunId,
        incarnation: Incarnation,
        unborn: bool,
    ) -> Result<()> {
        if !self.tidy {
            return Ok(());
        }
        let hint = self
            .client
            .layout()
            .status_hint(status.path_segment(), run_id, incarnation);
        self.client.delete_all(vec![hint]).await?;
        if unborn && self.pointer.is_current(run_id, incarnation).await? {
            self.write(status, run_id, incarnation).await?;
        }
        Ok(())
    }

    /// The `Pending` hints whose incarnation is the run's current one (and
    /// those whose run could not be read, for the caller to read and
    /// report); the others are tidied away, as a listing by status does.
    ///
    /// A creator that stopped between its `Pending` hint and its pointer
    /// leaves a hint of an incarnation that never exists: no deletion looks
    /// for it, and recovery, which lists `Pending` run ids, would meet it at
    /// every start. Only `Pending` hints can be of an unborn incarnation,
    /// and they are few (runs not yet started), so each costs a read of its
    /// run's pointer here.
    pub(super) async fn live_pending(
        &self,
        hints: Vec<(RunId, Incarnation)>,
    ) -> Result<Vec<(RunId, Incarnation)>> {
        let kept: Vec<Option<(RunId, Incarnation)>> = futures::stream::iter(hints)
            .map(|(run_id, incarnation)| async move {
                match self.pointer.is_current(&run_id, incarnation).await {
                    Ok(true) | Err(_) => Ok(Some((run_id, incarnation))),
                    Ok(false) => {
                        self.tidy(RunStatus::Pending, &run_id, incarnation, true)
                            .await?;
                        Ok::<_, Error>(None)
                    }
                }
            })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(kept.into_iter().flatten().collect())
    }

    /// The last step of a creation, once its pointer and record stand, and
    /// of an idempotent `create_run` of a run not started yet: writes the
    /// `Pending` hint again if a tidying listing deleted it between its
    /// write and the pointer's (see [`tidy`](Self::tidy)). One `HEAD` when
    /// it is there: only its existence counts (listings never read a
    /// hint's content either).
    pub(super) async fn ensure_pending(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<()> {
        let hint = self.client.layout().status_hint(
            RunStatus::Pending.path_segment(),
            run_id,
            incarnation,
        );
        match self.client.store().head(&hint).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => {
                self.write(RunStatus::Pending, run_id, incarnation).await
            }
            Err(e) => Err(Error::store(&hint, e)),
        }
    }

    /// Whether a hint of `hinted` can never again be true of a run in `actual`
    /// (statuses only move forward).
    pub(super) fn is_stale(hinted: RunStatus, actual: RunStatus) -> bool {
        hinted != actual && (actual.is_terminal() || hinted == RunStatus::Pending)
    }
}

/// A hint's run and incarnation; `None` (with a warning) for an object that
/// is not a hint.
fn parse_hint(location: &Path) -> Option<(RunId, Incarnation)> {
    let parsed = layout::parse_status_hint(location);
    if parsed.is_none() {
        tracing::warn!(path = %location, "not a run status hint; skipped");
    }
    parsed
}

/// The hints of the first `runs` runs (in the hints' order) of a listing in
/// any order, holding no more than those while it reads, in order; and
/// whether the listing held hints of other runs after them.
async fn first_hints(
    mut listing: BoxStream<'static, object_store::Result<ObjectMeta>>,
    runs: usize,
) -> object_store::Result<(Vec<(RunId, Incarnation)>, bool)> {
    // Keyed by the hint's name without its incarnation (`<run>.`), which
    // sorts runs as their hints' names do.
    let mut first: BTreeMap<String, Vec<(RunId, Incarnation)>> = BTreeMap::new();
    let mut more = false;
    while let Some(hint) = listing.next().await {
        let hint = hint?;
        let Some(parsed) = parse_hint(&hint.location) else {
            continue;
        };
        let name = hint.location.filename().unwrap_or_default();
        let key = name[..=name.rfind('.').unwrap_or(0)].to_string();
        if first.len() == runs && !first.contains_key(&key) {
            more = true;
            let last = first.keys().next_back().cloned().unwrap_or_default();
            if key > last {
                continue;
            }
            first.remove(&last);
        }
        first.entry(key).or_default().push(parsed);
    }
    let hints = first
        .into_values()
        .flat_map(|mut hints| {
            hints.sort_by_key(|(_, incarnation)| *incarnation);
            hints
        })
        .collect();
    Ok((hints, more))
}
