//! The run pointer: which incarnation of a run id is current, how a run is
//! created under it, and how a deletion removes it without ever losing
//! another incarnation's.
//!
//! # Vacated, not deleted
//!
//! The pointer `runs/<run>/run` is one object per run id, shared by every
//! incarnation of the id, and object stores (object_store 0.14 on every
//! backend) delete without a condition. A deletion checks that the pointer
//! names its incarnation and then changes it; whatever happens between the
//! two is invisible to it. Two deletions of one expired run (every worker
//! runs a sweeper) and a redelivery can interleave so: both read the
//! pointer naming `X`; the first removes it; the redelivery creates `Y`
//! under the id; the second, still holding its read of `X`, removes the
//! pointer, which now names `Y`.
//!
//! So a deletion does not delete the pointer: it *vacates* it, a
//! conditional update (`PutMode::Update`, which S3, GCS, Azure, memo's
//! `LocalFolder`, `SqliteStore` and `InMemory` have) of the version it
//! read to `vacant <incarnation>` (unframed; [`vacated`]), which the
//! second deletion's update, of a version that is no longer there, cannot
//! make. A vacated pointer reads as no pointer, and a creator (or a
//! restorer) replaces it by a conditional update too, as it creates a free
//! path: of two, one wins. It stays until a retention pass's recheck of
//! the deletion, with the tombstone ([`sweep_vacated`](RunPointer::sweep_vacated)),
//! and the id's folder is never empty while a stale deletion of it can be
//! in flight: a creator's listing before its create never finds the id new
//! beside a run created after a deletion (seeds 1392 and 703 of session
//! 43's widened world, where a stale delete landing between two creations
//! gave the id two runs, or took a run's acknowledged commits back).
//!
//! The recheck marks the vacated pointer swept first (`vacant <inc> swept
//! <mark> at <ms>`, a conditional update one of two rechecks wins, with the
//! recheck's time; [`swept`]) and then deletes it, unconditionally: a
//! creator that replaced the mark between the two, as it replaces a
//! vacated pointer, lost its pointer to that delete (seed 27027 of session
//! 51's quiet-world survey: a second creator then took the freed path, and
//! a step commit acknowledged to one of the two runs was missing from what
//! a fresh reader saw). So a creator, or a restorer, never replaces a
//! swept pointer while its mark is younger than [`SWEPT_PATIENCE_MS`] by
//! the creation's time: a creation is refused ([`Error::Conflict`], to try
//! again) until the delete has landed and the path is free. Past that, the
//! recheck is taken for stopped between its mark and its delete (which
//! would otherwise hold the id for ever): a creation replaces the mark,
//! and a later recheck of the deletion deletes it. A mark with no time (an
//! older release's, or a caller's of `forget_deleted`, who gives none) is
//! replaced at once, as every mark was before.
//!
//! # Why a pointer needs a second copy
//!
//! A pointer may still go missing under a run: a release before vacated
//! pointers deleted it unconditionally in every deletion (and a fleet in
//! the middle of a deploy runs both); the recheck's delete of a vacated
//! pointer, stalled past a creation of the id, removes the new run's; a
//! store with no conditional update (`object_store`'s `LocalFileSystem`
//! given directly) deletes where it would vacate. What such a delete
//! removes must be restorable, and a missing pointer must never be taken
//! for a missing run while it is restorable:
//!
//! - every incarnation keeps a copy of its pointer in its own folder, its
//!   *record* `runs/<run>/<inc>/run`, written after its pointer and before
//!   its creation is acknowledged to anyone (a creator checks the pointer
//!   again once the record exists, and gives the run up, unacknowledged, if
//!   the pointer names another incarnation by then);
//! - a deletion of `X` deletes `X`'s record *before* it vacates the
//!   pointer, so once the pointer is vacated (or gone) `X` can never come
//!   back;
//! - a missing pointer is not read as a missing run: the reader looks for
//!   an incarnation record in the id's folder and, if one is there, restores
//!   the pointer from it (a create, so two restorers agree) and reads that
//!   run (a vacated pointer reads as a missing one). Readers, writers
//!   checking that their incarnation is current, creators and deleters all
//!   go through this, so a pointer removed by a stale delete is put back
//!   by whoever looks next, and no one creates a new incarnation or reports
//!   the run gone in the meantime (a creator first lists the id's folder:
//!   one that holds nothing has neither a pointer nor a record, and
//!   anything there is read as above);
//! - a deletion deletes its record once more after it vacated the
//!   pointer, so no reader ever restores the incarnation it deletes;
//! - the record of an open incarnation that has none (its creator stopped
//!   between its pointer and its record) is written only while the pointer
//!   still names it, read after the record was found missing: a reader that
//!   read the pointer before a deletion and the log after it sees the
//!   finished run as just created, and writing its record back would let
//!   the next reader restore it.
//!
//! A creator that gives its incarnation up (the pointer no longer named it
//! once the record stood) removes it as a deletion does, record, pointer
//! vacated if it names the incarnation, record again: a reader that found the pointer
//! missing between the creator's record and its take-back restores the
//! pointer from that record, and the given-up incarnation (which may have
//! been run and deleted while its creator stalled) would otherwise be
//! current again (seeds 3311 and 1215 of session 23's survey). Unless the
//! reader that restored it also wrote to it (seed 1778 of session 24: a
//! stale deletion of the earlier run removed the pointer of a new one, and
//! a signal restored and started it; the stale delete is now a recheck's,
//! or an older release's): such an incarnation is kept, and its
//! creator answers with it (see `RunPointer::give_up` for the order).
//!
//! A writer of a record whose pointer check comes after its write can
//! still die between the two: a redelivery that folded the run as open,
//! found the record missing because a deletion had just removed it, read
//! the pointer before the deletion removed it, and stalled, writes the
//! deleted incarnation's record after the deletion ended. Restored from,
//! that record would bring the deleted run back as just created, and it
//! would run again (seed 2117 of session 27's survey). So a deletion first
//! leaves the incarnation's *tombstone* (`tombstones/<run>.<inc>`, beside
//! `runs/`), and a reader that finds a record with no pointer takes the
//! record back, never restoring it, if the incarnation has a tombstone (a
//! `HEAD`, on that path only). A retention pass's recheck of the swept run
//! deletes the tombstone (`RuntimeStore::forget_deleted`), after clearing
//! what late writers left: a record put back later still than that is
//! restored, as a memo entry written later than that stays (the recheck's
//! stated limit).
//!
//! A restorer that races the run's own deletion (it listed the record, the
//! deletion then removed the record and vacated the pointer, and its
//! create restored the pointer) reads the record again after its create
//! and vacates the pointer it restored if the record is gone.
//!
//! A creator's check once its record stands is a listing of the id's
//! folder, not a read of the pointer alone: a stale delete of the pointer
//! that lands after another creator's run stood and before this creator's
//! create (both listings before their creates found the id new) leaves
//! the path free, and the create succeeds beside a run whose creation was
//! acknowledged. The listing shows that run's record (one not buried), and
//! the creator gives its own run up and reads the id again, which restores
//! the other's pointer (session 43, the window seed 9071's fix left). Every
//! creator lists after its record, so of two records that stand at once,
//! at least one creator sees the other's. Until that check, the new run is
//! the id's current run to every reader, and a reader that acts on it
//! (starts it, answers a redelivery with it) makes its creator keep it
//! (`give_up`), beside the other (RELIABILITY.md, "The window one round
//! trip earlier"). Since deletions vacate the pointer, this takes a
//! delete that no release makes now: the id's folder is empty only once
//! the one unconditional delete left (the recheck's, of the pointer it
//! marked swept, which one recheck wins) has landed, so two listings that
//! find it empty both come after that delete, and it cannot land again
//! on the pointer of a run created since (unless the store's client sends
//! it again, or an older release or a store with no conditional update
//! deletes where memo now vacates).
//!
//! A create of the pointer that finds it taken and then, read back, gone
//! (a stale delete landed in between) is not tried again: the
//! pointer that was there may be a run's whose creation was acknowledged,
//! and restorable from its record; a creator gives its incarnation up and
//! reads the id again (restoring that run, and answering with it), and a
//! restorer reads the id again (seed 9071 of session 42's survey: a second
//! creator's new run took the first's place, and the first came back, to
//! run again, once the second's was deleted). A create whose outcome is
//! unknown and finds nothing there is not tried again either: it may have
//! been refused for a pointer that went since.
//!
//! Incarnations written before records existed have none: such a run is
//! given its record by the next `create_run` of its id (a redelivery). A
//! pointer removed by a stale delete before that is lost, as before.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ListResult, UpdateVersion};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use futures::StreamExt;

use super::client::{CONCURRENCY, Client, Owner, Replaced};
use crate::codec;
use crate::error::{Error, Result};
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{DeletionBegan, NewRun};
use crate::write_once::{self, Created, Landed, Slot, VACANT};

mod give_up;

/// How many times a read of the pointer starts over because it changed
/// while the read restored it. Each start over means a deletion or a
/// creation of the id finished meanwhile.
pub(super) const POINTER_ATTEMPTS: usize = 4;

/// The stored run pointer. `incarnation` is drawn at random for each
/// creation, so that an instance that cached a run which was then deleted
/// and created again under the same id can tell the new run from the old.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Creation {
    pub(super) run: NewRun,
    pub(super) incarnation: Incarnation,
}

/// What a creation finds under its id ([`RunPointer::current_unless_new`]).
pub(super) enum Prior {
    /// The id's current run, its pointer's bytes, and the version read
    /// (`None` for a pointer the read restored).
    Run(Creation, Bytes, Option<UpdateVersion>),
    /// No run: a free path, or a vacated pointer of this version, which
    /// the creation's update replaces.
    Free(Option<UpdateVersion>),
}

/// What [`RunPointer::create`] came to.
pub(super) enum Birth {
    /// The pointer and the record stand: the run exists.
    Born,
    /// The pointer was removed before the record stood, and a reader
    /// restored it from the record and wrote to the run meanwhile: the run
    /// exists (these are its pointer's bytes) and may have moved on.
    Restored(Bytes),
    /// The pointer was ours, but another incarnation took it before the
    /// record stood, or another incarnation's record stood beside ours:
    /// given up, unacknowledged.
    Overtaken,
    /// Another incarnation's pointer (these bytes) was there first.
    Taken(Creation, Bytes),
    /// A pointer was there, or may have been, and is gone: read the id
    /// again (it may be a run to restore), this incarnation given up.
    Vanished,
}

/// What became of an incarnation whose record was written.
#[derive(Debug, PartialEq, Eq)]
enum Recorded {
    /// The pointer names it: it exists.
    Current,
    /// A reader restored its pointer and wrote to it while its pointer was
    /// missing: it exists (see [`RunPointer::give_up`]).
    Restored,
    /// Given up and removed.
    GivenUp,
}

/// The run pointers of one store, and the per-incarnation records they are
/// restored from.
#[derive(Clone)]
pub(super) struct RunPointer {
    client: Arc<Client>,
    /// Pointers vacated by a deletion that a recheck's [`names`](Self::names)
    /// read, by run id: the incarnation deleted and the version read, which
    /// the same recheck's mark ([`mark_swept`](Self::mark_swept)) updates
    /// without reading the pointer again. Taken by that mark; at most
    /// [`SEEN_VACANT`] kept (a recheck that failed between the two leaves
    /// its entry until the next recheck of the run).
    seen_vacant: Arc<Mutex<HashMap<RunId, (Incarnation, UpdateVersion)>>>,
}

/// How long after a recheck marked a vacated pointer swept (by the time in
/// its mark) a creator, or another recheck, may replace or delete the mark
/// itself: past this, the recheck is taken for stopped between its mark
/// and its delete (its sweeper died), and the id is not held for ever. A
/// recheck stalled that long between the two still removes the new run's
/// pointer, as a stalled delete of a release before the mark did (the
/// module's notes).
pub(super) const SWEPT_PATIENCE_MS: u64 = 60_000;

/// How many vacated pointers' versions [`RunPointer`] keeps between a
/// recheck's read and its mark: more than a retention pass rechecks at
/// once. Past it, all are forgotten, and each mark reads its pointer.
const SEEN_VACANT: usize = 4_096;

impl RunPointer {
    pub(super) fn new(client: Arc<Client>) -> RunPointer {
        RunPointer {
            client,
            seen_vacant: Arc::default(),
        }
    }

    /// Whether the run pointer names `incarnation`.
    pub(super) async fn is_current(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<bool> {
        let current = self.current(run_id).await?;
        Ok(current.is_some_and(|c| c.incarnation == incarnation))
    }

    /// The current incarnation of the run: its pointer, or, if the pointer
    /// is missing, the incarnation whose record is left (the pointer is then
    /// restored); `None` if the run does not exist.
    pub(super) async fn current(&self, run_id: &RunId) -> Result<Option<Creation>> {
        Ok(self
            .current_with_bytes(run_id)
            .await?
            .map(|(creation, _)| creation))
    }

    /// [`current`](Self::current), with the pointer's bytes.
    pub(super) async fn current_with_bytes(
        &self,
        run_id: &RunId,
    ) -> Result<Option<(Creation, Bytes)>> {
        Ok(self
            .current_versioned(run_id)
            .await?
            .map(|(creation, bytes, _)| (creation, bytes)))
    }

    /// [`current_with_bytes`](Self::current_with_bytes), with the version of
    /// the pointer read if it was read as it stands (`None` for one this
    /// call restored): what a deletion of the incarnation updates to vacate
    /// it, without reading it again ([`remove`](Self::remove)).
    pub(super) async fn current_versioned(
        &self,
        run_id: &RunId,
    ) -> Result<Option<(Creation, Bytes, Option<UpdateVersion>)>> {
        for _ in 0..POINTER_ATTEMPTS {
            if let Some((creation, bytes, version)) = self.read_versioned(run_id).await? {
                return Ok(Some((creation, bytes, Some(version))));
            }
            let Some((orphan, bytes)) = self.orphaned_record(run_id).await? else {
                return Ok(None);
            };
            if let Some((creation, bytes)) = self.restore_pointer(run_id, orphan, bytes).await? {
                return Ok(Some((creation, bytes, None)));
            }
        }
        Err(self.kept_changing(run_id))
    }

    /// [`current_with_bytes`](Self::current_with_bytes) for a creation,
    /// which expects the id to be new: one listing of the id's folder
    /// answers [`Prior::Free`] if it holds neither the pointer nor any
    /// incarnation's folder (where a record would be), and, if it holds
    /// the pointer and no incarnation's folder, one read of the pointer
    /// answers with the run it names, or `Free` with the version of a
    /// vacated one (a deleted run's id used again: the create updates that
    /// version, where it would find the path taken). Anything else is read
    /// as `current_with_bytes` reads it. A new id costs one request instead
    /// of two (the pointer's `GET` and the listing for an orphaned record),
    /// a deleted one's two instead of three (and its create one instead of
    /// three); an id in use costs one more, and one whose folder holds an
    /// incarnation's folder but no run reads the pointer once more after
    /// finding none (to wait for a recheck's mark, below, or replace a
    /// vacated pointer at the version read).
    ///
    /// `Free` says only what the listing and the read saw: the creator's
    /// create (or update) of the pointer decides, as after
    /// `current_with_bytes` found none (a pointer created since, listed
    /// late or not, makes that create find it taken, or that update find
    /// the version changed).
    ///
    /// A vacated pointer a recheck marked swept (its delete follows) is not
    /// replaced, since that delete would remove the new run's pointer
    /// (seed 27027 of session 51's quiet-world survey): the creation is
    /// refused, [`Error::Conflict`], for its caller to try again once the
    /// delete landed, unless the mark is [`SWEPT_PATIENCE_MS`] old by the
    /// creator's clock (`now_ms`), or holds no time (see
    /// [`free_unless_swept`]).
    pub(super) async fn current_unless_new(&self, run_id: &RunId, now_ms: u64) -> Result<Prior> {
        let listing = self.id_folder(run_id).await?;
        if listing.common_prefixes.is_empty() {
            if listing.objects.is_empty() {
                return Ok(Prior::Free(None));
            }
            let path = self.path(run_id);
            match self.slot(run_id).await? {
                Slot::Vacant(bytes, version) => {
                    return free_unless_swept(run_id, &bytes, version, now_ms);
                }
                Slot::Value(bytes, version) => {
                    let creation = decode_creation(run_id, &path, &bytes, None)?;
                    return Ok(Prior::Run(creation, bytes, Some(version)));
                }
                Slot::Absent => {}
            }
        }
        Ok(match self.current_versioned(run_id).await? {
            Some((creation, bytes, version)) => Prior::Run(creation, bytes, version),
            // No run: a pointer a recheck is about to delete is waited for
            // here too (a create would find it taken, and give up).
            None => match self.slot(run_id).await? {
                Slot::Vacant(bytes, version) => {
                    return free_unless_swept(run_id, &bytes, version, now_ms);
                }
                Slot::Value(..) | Slot::Absent => Prior::Free(None),
            },
        })
    }

    /// One delimited listing of the id's folder: the pointer among its
    /// objects, each incarnation's folder among its prefixes.
    async fn id_folder(&self, run_id: &RunId) -> Result<ListResult> {
        let folder = self.client.layout().runs_folder(run_id);
        (self.client.store())
            .list_with_delimiter(Some(&folder))
            .await
            .map_err(|e| Error::store(&folder, e))
    }

    /// Whether the pointer, as stored, names `incarnation`: one `GET`, and
    /// no restore of a missing pointer (which [`is_current`](Self::is_current)
    /// makes). What a caller about to delete the objects of an incarnation
    /// it knows deleted asks, to leave alone one that is the run's again.
    ///
    /// A pointer that the deletion of `incarnation` vacated is remembered
    /// with its version, for the recheck's mark of it (see
    /// [`mark_swept`](Self::mark_swept)).
    pub(super) async fn names(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let path = self.path(run_id);
        match self.slot(run_id).await? {
            Slot::Value(bytes, _) => {
                let creation = decode_creation(run_id, &path, &bytes, None)?;
                Ok(creation.incarnation == incarnation)
            }
            Slot::Vacant(bytes, version) => {
                if bytes == vacated(incarnation) {
                    let mut seen = self.seen_vacant();
                    if seen.len() >= SEEN_VACANT {
                        seen.clear();
                    }
                    seen.insert(run_id.clone(), (incarnation, version));
                }
                Ok(false)
            }
            Slot::Absent => Ok(false),
        }
    }

    /// The version of the pointer vacated by the deletion of `incarnation`
    /// that [`names`](Self::names) read last, taken.
    fn take_seen_vacant(&self, run_id: &RunId, incarnation: Incarnation) -> Option<UpdateVersion> {
        let mut seen = self.seen_vacant();
        match seen.remove(run_id) {
            Some((seen, version)) if seen == incarnation => Some(version),
            _ => None,
        }
    }

    fn seen_vacant(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RunId, (Incarnation, UpdateVersion)>> {
        self.seen_vacant
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the pointer's path holds, vacated or not, with its version.
    async fn slot(&self, run_id: &RunId) -> Result<Slot> {
        let path = self.path(run_id);
        (self.client)
            .read_pointer_slot(&path, Limit::RECORD, Owner::Run(run_id))
            .await
    }

    /// Reads the pointer object only; `None` if it is missing or vacated.
    async fn read_pointer(&self, run_id: &RunId) -> Result<Option<(Creation, Bytes)>> {
        Ok(self
            .read_versioned(run_id)
            .await?
            .map(|(creation, bytes, _)| (creation, bytes)))
    }

    /// [`read_pointer`](Self::read_pointer), with the version read.
    async fn read_versioned(
        &self,
        run_id: &RunId,
    ) -> Result<Option<(Creation, Bytes, UpdateVersion)>> {
        let path = self.path(run_id);
        match self.slot(run_id).await? {
            Slot::Value(bytes, version) => {
                let creation = decode_creation(run_id, &path, &bytes, None)?;
                Ok(Some((creation, bytes, version)))
            }
            Slot::Vacant(..) | Slot::Absent => Ok(None),
        }
    }

    /// Makes the pointer not name `incarnation`, which the caller removes:
    /// vacated (see the module's notes) by a conditional update of the
    /// version read, read again if it changed meanwhile (a pointer of the
    /// incarnation restored from its record: its bytes, another version).
    /// A pointer that names another incarnation, or none, is left alone:
    /// a deletion that stalled between its read and its update never
    /// removes a later run's pointer.
    ///
    /// `true` if the store has no conditional update and the pointer was
    /// deleted instead, as a release before vacated pointers deleted it:
    /// the caller reads the id again once its incarnation cannot be
    /// restored, which restores what the delete may have removed of a
    /// later run.
    ///
    /// `read`: the version of the pointer, naming `incarnation`, that the
    /// caller read (the deletion's load of the run), updated first without
    /// reading the pointer again; the pointer is read only if that version
    /// changed since (or the store has no conditional update, whose delete
    /// follows a read as before).
    pub(super) async fn vacate(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        read: Option<UpdateVersion>,
    ) -> Result<bool> {
        let path = self.path(run_id);
        if let Some(version) = read {
            let updated = (self.client)
                .update_if(&path, version, vacated(incarnation))
                .await?;
            if updated == Some(Replaced::Updated) {
                return Ok(false);
            }
        }
        for _ in 0..POINTER_ATTEMPTS {
            let Some((current, _, version)) = self.read_versioned(run_id).await? else {
                return Ok(false);
            };
            if current.incarnation != incarnation {
                return Ok(false);
            }
            match (self.client)
                .replace_if(&path, version, vacated(incarnation))
                .await?
            {
                Replaced::Updated => return Ok(false),
                Replaced::Deleted => return Ok(true),
                Replaced::Changed => {}
            }
        }
        Err(self.kept_changing(run_id))
    }

    /// Removes the vacated pointers that the deletions of `deleted` (each
    /// a run id and the incarnation deleted) left, once a retention pass's
    /// recheck forgot their tombstones: a read of each pointer (none for
    /// one this instance's recheck just read vacated, [`names`](Self::names)),
    /// and for each still vacated by that incarnation's deletion an update
    /// marking it swept; then one `delete_stream` of those. A pointer of
    /// the id in any other state is left alone. Each one's result, in their
    /// order.
    ///
    /// This is the one unconditional delete of a run pointer: object
    /// stores have no conditional delete, and a vacated pointer left for
    /// ever would keep one object per deleted run id. Two rechecks of one
    /// deletion (every worker's sweeper may have deleted the run) must not
    /// both delete it: a delete that stalls past a new creation of the id
    /// would remove the new run's pointer, and the creator of a third run
    /// whose listing found the id's folder empty before would take its
    /// place (seed 9071's window). So the recheck first marks the vacated
    /// pointer swept, a conditional update that one recheck wins, and only
    /// the winner deletes; a swept pointer reads as vacated, and a creator
    /// waits for its delete rather than replace it (the module's notes). A
    /// recheck whose update's answer was lost reads the pointer back and
    /// finds its own mark (each recheck's is its own). Another recheck's
    /// mark is that recheck's to delete: this one answers
    /// [`Error::Deferred`] (its recheck marker is kept) while the mark is
    /// younger than [`SWEPT_PATIENCE_MS`] by this recheck's time, and once
    /// it is older (that recheck stopped between its mark and its delete,
    /// or its delete failed) marks it again as its own, by a conditional
    /// update of the version read (a creation that replaced the old mark
    /// meanwhile keeps its pointer), and deletes it; a mark with no time
    /// (an older release's) is left for a creation to replace. What is left: a
    /// winner's delete stalled from before a creation of the id until
    /// after it removes that run's pointer, which is restored from its
    /// record as a pointer removed by a release before vacated pointers is.
    ///
    /// `at_ms`, the recheck's time (`None` for a caller with no clock, whose
    /// mark then holds none, as an older release's did), goes into its mark.
    pub(super) async fn sweep_vacated(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: Option<u64>,
    ) -> Vec<Result<()>> {
        let marks: Vec<Result<Option<Path>>> = futures::stream::iter(deleted.to_vec())
            .map(|(run_id, incarnation)| async move {
                self.mark_swept(&run_id, incarnation, at_ms).await
            })
            .buffered(CONCURRENCY)
            .collect()
            .await;
        let swept: Vec<Path> = marks.iter().flatten().flatten().cloned().collect();
        let mut deletes = crate::deletes::delete_each(self.client.store().as_ref(), swept)
            .await
            .into_iter();
        marks
            .into_iter()
            .map(|mark| match mark? {
                Some(_) => deletes.next().expect("a result per path").map(drop),
                None => Ok(()),
            })
            .collect()
    }

    /// The pointer of `run_id`, marked swept if the deletion of
    /// `incarnation` vacated it and nothing changed it since: its path,
    /// for [`sweep_vacated`](Self::sweep_vacated) to delete.
    ///
    /// A pointer this instance's recheck read vacated just before
    /// ([`names`](Self::names)) is updated at the version read, without
    /// reading it again; it is read only if that version changed since.
    async fn mark_swept(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: Option<u64>,
    ) -> Result<Option<Path>> {
        let path = self.path(run_id);
        // This recheck's own mark: an update whose answer was lost is known
        // by it when read back, where another recheck's mark is left.
        let mark = swept(incarnation, crate::run_id::unique_token(), at_ms);
        if let Some(version) = self.take_seen_vacant(run_id, incarnation) {
            match (self.client).update_if(&path, version, mark.clone()).await {
                Ok(Some(Replaced::Updated)) => return Ok(Some(path)),
                // Changed since it was read (or no conditional update):
                // read it as below.
                Ok(_) => {}
                Err(error) => return self.own_mark(run_id, path, &mark, error).await,
            }
        }
        let Slot::Vacant(bytes, version) = self.slot(run_id).await? else {
            return Ok(None);
        };
        if bytes != vacated(incarnation) {
            let marked = [&vacated(incarnation)[..], write_once::SWEPT].concat();
            // Another recheck's mark, a minute old: marked again (at the
            // version read, so that a creation that replaced it meanwhile
            // keeps its pointer) and deleted as this recheck's own.
            if !bytes.starts_with(&marked) || !another_mark_stopped(run_id, &bytes, at_ms)? {
                return Ok(None);
            }
        }
        match (self.client).replace_if(&path, version, mark.clone()).await {
            Ok(Replaced::Updated) => Ok(Some(path)),
            Ok(Replaced::Changed | Replaced::Deleted) => Ok(None),
            Err(error) => self.own_mark(run_id, path, &mark, error).await,
        }
    }

    /// After a mark's update failed: the pointer's path if it holds `mark`
    /// (the update landed and its answer was lost), else the error.
    async fn own_mark(
        &self,
        run_id: &RunId,
        path: Path,
        mark: &[u8],
        error: Error,
    ) -> Result<Option<Path>> {
        match self.slot(run_id).await? {
            Slot::Vacant(bytes, _) if bytes == mark => Ok(Some(path)),
            _ => Err(error),
        }
    }

    /// The one incarnation of the run whose record exists, with the record's
    /// bytes; `None` if none has one.
    async fn orphaned_record(&self, run_id: &RunId) -> Result<Option<(Creation, Bytes)>> {
        let listing = self.id_folder(run_id).await?;
        let mut found: Option<(Creation, Bytes)> = None;
        for incarnation_folder in listing.common_prefixes {
            let Some(incarnation) = incarnation_folder
                .filename()
                .and_then(Incarnation::parse_hex)
            else {
                continue;
            };
            let path = self.client.layout().incarnation_record(run_id, incarnation);
            let Some(bytes) = self
                .client
                .read(
                    &path,
                    Limit::RECORD,
                    Owner::Incarnation(run_id, incarnation),
                )
                .await?
            else {
                continue;
            };
            let creation = decode_creation(run_id, &path, &bytes, Some(incarnation))?;
            if self.is_buried(run_id, incarnation).await? {
                // A deleted incarnation's record, put back by a late writer
                // (see `bury`): never restored, taken back.
                tracing::warn!(%run_id, %incarnation,
                    "record of a deleted incarnation found again; taken back");
                self.client.delete_all(vec![path]).await?;
                continue;
            }
            if let Some((other, _)) = &found {
                return Err(Error::corrupt(
                    &path,
                    format!(
                        "run {run_id} has no pointer and two incarnation records, \
                         {} and {incarnation}: which is current is unknown",
                        other.incarnation
                    ),
                ));
            }
            found = Some((creation, bytes));
        }
        Ok(found)
    }

    /// Creates the missing pointer from `orphan`'s record: the current
    /// incarnation then, or `None` if the pointer changed meanwhile and must
    /// be read again.
    async fn restore_pointer(
        &self,
        run_id: &RunId,
        orphan: Creation,
        bytes: Bytes,
    ) -> Result<Option<(Creation, Bytes)>> {
        let path = self.path(run_id);
        let created = self
            .client
            .create_unless_taken(
                &path,
                &bytes,
                Limit::RECORD,
                Owner::Incarnation(run_id, orphan.incarnation),
                None,
            )
            .await?;
        // Taken, and gone when read: whichever pointer that was, the id is
        // read again (a second create could restore this record over a run
        // restorable from its own, as a creator's could: `create`).
        let Some(landed) = created else {
            return Ok(None);
        };
        match landed.created {
            // `Same`: restored by another restorer too, or by our create
            // whose answer was lost; checked as our own, since the record
            // may be gone by now either way.
            Created::Ours(_) | Created::Same(_) => {
                let record = self
                    .client
                    .layout()
                    .incarnation_record(run_id, orphan.incarnation);
                if self
                    .client
                    .read(
                        &record,
                        Limit::RECORD,
                        Owner::Incarnation(run_id, orphan.incarnation),
                    )
                    .await?
                    .is_some()
                {
                    tracing::warn!(%run_id, incarnation = %orphan.incarnation,
                        "run pointer restored from its incarnation record");
                    return Ok(Some((orphan, bytes)));
                }
                // The run's deletion removed its record (and then its pointer)
                // after we listed it: take back the pointer we restored
                // (the caller reads the id again).
                self.vacate(run_id, orphan.incarnation, None).await?;
                Ok(None)
            }
            // Another incarnation was created, or restored, meanwhile.
            Created::Theirs(theirs) => {
                let current = decode_creation(run_id, &path, &theirs, None)?;
                Ok(Some((current, theirs)))
            }
        }
    }

    /// Makes sure incarnation `creation` (whose pointer bytes are `bytes`)
    /// has its record: `false` if the pointer no longer names it once the
    /// record exists, and the record was taken back.
    ///
    /// The caller folded the incarnation as open. That fold read the
    /// pointer and then the log: if the incarnation was deleted between the
    /// two, the fold saw what was left of its log (nothing, once the
    /// deletion got that far) and took the finished run for one just
    /// created. So a missing record is written only if the pointer, read
    /// again after the record was found missing, still names the
    /// incarnation: a deletion removes the record, then the pointer, then
    /// the log, so a pointer that still names the incarnation means its log
    /// was whole when the fold read it. Writing the record of a deleted
    /// incarnation would bring it back: a reader that finds the pointer
    /// missing restores it from the record, and the run then reads as
    /// created, with no history, and runs again.
    ///
    /// The check after a record is created keeps a deletion's removal of the
    /// record from being undone: a deletion deletes the record before the
    /// pointer, so a record created after the deletion's is found with the
    /// pointer gone (or naming a later run) and is removed again.
    pub(super) async fn ensure_record(
        &self,
        run_id: &RunId,
        creation: &Creation,
        bytes: &[u8],
    ) -> Result<bool> {
        let path = self
            .client
            .layout()
            .incarnation_record(run_id, creation.incarnation);
        if self
            .client
            .read(
                &path,
                Limit::RECORD,
                Owner::Incarnation(run_id, creation.incarnation),
            )
            .await?
            .is_some()
        {
            return Ok(true);
        }
        let current = self.read_pointer(run_id).await?;
        if current.is_none_or(|(c, _)| c.incarnation != creation.incarnation) {
            return Ok(false);
        }
        Ok(self.write_record(run_id, creation, bytes).await? != Recorded::GivenUp)
    }

    /// [`ensure_record`](Self::ensure_record) for an incarnation known to
    /// have no record yet (one this call just created).
    async fn write_record(
        &self,
        run_id: &RunId,
        creation: &Creation,
        bytes: &[u8],
    ) -> Result<Recorded> {
        let path = self
            .client
            .layout()
            .incarnation_record(run_id, creation.incarnation);
        self.create_record(run_id, creation, bytes).await?;
        // Read again after a failure: a creator that stops here leaves a
        // record no one would take back.
        let current = give_up::tried(|| self.read_pointer(run_id)).await?;
        if current.is_some_and(|(c, _)| c.incarnation == creation.incarnation) {
            return Ok(Recorded::Current);
        }
        self.give_up(run_id, creation, bytes, &path).await
    }

    /// [`write_record`](Self::write_record) for the new incarnation
    /// `creation`, whose pointer this call created (`landed`, with the
    /// pointer's bytes `bytes`): the check after the record is one listing
    /// of the id's folder instead of a read of the pointer, and the
    /// incarnation is given up (as there) if the pointer is missing, names
    /// another incarnation, or stands beside another incarnation's record
    /// that is not buried.
    ///
    /// That record is a run a stale deletion took the pointer of before
    /// this creation's create (seed 9071's window, session 43): its creator
    /// found the pointer naming it once its record stood, so its creation
    /// may have been acknowledged, and it may be running; the listing that
    /// told this creator the id was new came before its pointer. Read
    /// again after the give-up, the id restores that run's pointer from its
    /// record, and the creator answers with it. Every creator writes its
    /// record and then lists, so of two whose records stand at once at
    /// least one sees the other's (both may, and both give up: the id is
    /// read again). A record being taken back (a creator giving up, a
    /// deletion's, a buried one) may make a creator give up for nothing:
    /// it reads the id again, as after any give-up.
    ///
    /// The pointer is read only if the listing's entity tag for it is not
    /// the one the store answered the create with (another object at the
    /// path, or a store whose tags differ between the two): a creation's
    /// check is a listing where it was a `GET`, plus a `HEAD` of another
    /// incarnation's record (and of its tombstone, if one stands) for each
    /// other incarnation's folder, which a new id has none of.
    async fn record_new(
        &self,
        creation: &Creation,
        landed: &Landed,
        bytes: &[u8],
    ) -> Result<Recorded> {
        let run_id = &creation.run.run_id;
        let incarnation = creation.incarnation;
        let path = self.client.layout().incarnation_record(run_id, incarnation);
        self.create_record(run_id, creation, bytes).await?;
        // Listed again after a failure, as `write_record` reads again.
        let listing = give_up::tried(|| self.id_folder(run_id)).await?;
        let pointer = self.path(run_id);
        let current = match listing.objects.iter().find(|o| o.location == pointer) {
            None => false,
            Some(listed) if landed.is_listed_as(listed.e_tag.as_deref()) => true,
            Some(_) => give_up::tried(|| self.read_pointer(run_id))
                .await?
                .is_some_and(|(c, _)| c.incarnation == incarnation),
        };
        if current && self.rival(run_id, incarnation, &listing).await?.is_none() {
            return Ok(Recorded::Current);
        }
        self.give_up(run_id, creation, bytes, &path).await
    }

    /// An incarnation other than `ours` whose folder `listing` (of the
    /// id's folder) shows, with a record and no tombstone: a `HEAD` of
    /// each other incarnation's record, and of the tombstone of one found.
    async fn rival(
        &self,
        run_id: &RunId,
        ours: Incarnation,
        listing: &ListResult,
    ) -> Result<Option<Incarnation>> {
        for folder in &listing.common_prefixes {
            let Some(incarnation) = folder.filename().and_then(Incarnation::parse_hex) else {
                continue;
            };
            if incarnation == ours {
                continue;
            }
            let record = self.client.layout().incarnation_record(run_id, incarnation);
            if give_up::tried(|| self.client.exists(&record)).await?
                && !give_up::tried(|| self.is_buried(run_id, incarnation)).await?
            {
                tracing::warn!(%run_id, incarnation = %ours, rival = %incarnation,
                    "a new run's record stands beside another run's; given up");
                return Ok(Some(incarnation));
            }
        }
        Ok(None)
    }

    /// Creates the record of `creation` (whose pointer bytes are `bytes`);
    /// one that differs from the pointer is corrupt.
    async fn create_record(&self, run_id: &RunId, creation: &Creation, bytes: &[u8]) -> Result<()> {
        let path = self
            .client
            .layout()
            .incarnation_record(run_id, creation.incarnation);
        if let Created::Theirs(_) = self
            .client
            .create(
                &path,
                bytes,
                Limit::RECORD,
                Owner::Incarnation(run_id, creation.incarnation),
            )
            .await?
        {
            return Err(Error::corrupt(
                &path,
                format!(
                    "the record of run {run_id} incarnation {} differs from its pointer",
                    creation.incarnation
                ),
            ));
        }
        Ok(())
    }

    /// Removes the record of incarnation `incarnation`, which the caller
    /// read as current and terminal (or, in `keep`, kept and then found
    /// not current), and vacates its pointer; the rest of the
    /// incarnation's folder is the caller's to delete.
    ///
    /// The record goes first: from then on the incarnation cannot be
    /// restored. The pointer is vacated only if it still names the
    /// incarnation, by a conditional update ([`vacate`](Self::vacate)): if
    /// a concurrent deletion of the same incarnation vacated it first and a
    /// new run of the id was created since, the new run's pointer stands.
    ///
    /// `read`: the version of the pointer naming `incarnation` that the
    /// caller's load of the run read, if it has it (see
    /// [`vacate`](Self::vacate)).
    pub(super) async fn remove(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        read: Option<UpdateVersion>,
    ) -> Result<()> {
        let record = self.client.layout().incarnation_record(run_id, incarnation);
        self.client.delete_all(vec![record.clone()]).await?;
        // Vacated, conditionally on the version read: a deletion that finds
        // the pointer naming another run (or none: another deletion of
        // this run got there first) leaves it alone, and one whose update
        // lands after a later run took the pointer changes nothing.
        let deleted = self.vacate(run_id, incarnation, read).await?;
        // And the record once more: a redelivery that folded the run while
        // it was still open may have written it back between our two
        // deletes (it found the record gone and the pointer still there),
        // and no reader may ever restore the incarnation this deletes.
        self.client.delete_all(vec![record]).await?;
        if deleted {
            // A store with no conditional update: the delete may have hit
            // a later run's pointer, restored now from its record.
            self.current(run_id).await?;
        }
        Ok(())
    }

    /// The path of incarnation `incarnation`'s tombstone.
    fn tombstone_path(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.client
            .layout()
            .incarnation_tombstone(run_id, incarnation)
    }

    /// Leaves the tombstone of incarnation `incarnation`, which the caller
    /// is about to delete: from then on a record of it found without a
    /// pointer is taken back, never restored. A writer that read the
    /// incarnation as open before its deletion (a redelivery's
    /// `ensure_record`, stalled for as long as the run's retention) may
    /// write its record after the deletion removed it, and die before its
    /// check after the write takes it back: without the tombstone the next
    /// reader restored the pointer from that record, and the deleted run
    /// read as just created and ran again (seed 2117 of session 27's
    /// survey). Kept until a retention pass's recheck of the run
    /// ([`unbury`](Self::unbury)).
    ///
    /// It holds `at_ms`, the time the deleter's clock read, if it has one
    /// (in decimal digits; empty without), and answers when the deletion
    /// began: `at_ms` if this call created it, else what the deleter that
    /// did wrote (a `GET`; see [`buried_at`](Self::buried_at)); a caller
    /// with no time is answered `Unrecorded`, unread.
    pub(super) async fn bury(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: Option<u64>,
    ) -> Result<DeletionBegan> {
        let path = self.tombstone_path(run_id, incarnation);
        // Plain, as every marker: it names no data. Found there: an
        // earlier deletion of the incarnation left it, and its time holds.
        let store = self.client.store().as_ref();
        let created =
            write_once::create_marker(store, &path, &tombstone(at_ms), Limit::MARKER).await?;
        match at_ms {
            Some(at_ms) if created => Ok(DeletionBegan::At(at_ms)),
            // Read back only for a caller that asks when the deletion began.
            Some(_) => self.buried_at(run_id, incarnation).await,
            None => Ok(DeletionBegan::Unrecorded),
        }
    }

    /// When the deletion of incarnation `incarnation` began, as its
    /// tombstone says (see [`bury`](Self::bury)): the time it holds;
    /// `Unrecorded` if it holds none (written by `RuntimeStore::delete_run`,
    /// or by a release before tombstones were dated); `Forgotten` if there
    /// is none (a recheck deleted it). One `GET`.
    pub(super) async fn buried_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<DeletionBegan> {
        let path = self.tombstone_path(run_id, incarnation);
        let store = self.client.store().as_ref();
        let read = write_once::read(store, &path, Limit::MARKER, &crate::seal::PLAIN).await?;
        Ok(match read {
            None => DeletionBegan::Forgotten,
            Some(payload) => {
                tombstone_time(&payload).map_or(DeletionBegan::Unrecorded, DeletionBegan::At)
            }
        })
    }

    /// Whether incarnation `incarnation` has a tombstone (see
    /// [`bury`](Self::bury)): a `HEAD`, made for a record found without a
    /// pointer, and by a recheck not yet sure of its store
    /// (`RuntimeStore::holds_deletion`).
    pub(super) async fn is_buried(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let path = self.tombstone_path(run_id, incarnation);
        self.client.exists(&path).await
    }

    /// Deletes the tombstone of incarnation `incarnation`, once a recheck
    /// cleared what late writers left of it.
    pub(super) async fn unbury(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        let path = self.tombstone_path(run_id, incarnation);
        self.client.delete_all(vec![path]).await
    }

    /// The tombstones of `deleted` (see [`unbury`](Self::unbury)), in one
    /// `delete_stream`: each one's result, in their order.
    pub(super) async fn unbury_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<()>> {
        let layout = self.client.layout();
        let paths = deleted
            .iter()
            .map(|(run_id, incarnation)| layout.incarnation_tombstone(run_id, *incarnation))
            .collect();
        crate::deletes::delete_each(self.client.store().as_ref(), paths)
            .await
            .into_iter()
            .map(|deleted| deleted.map(drop))
            .collect()
    }

    /// Creates the pointer of the new incarnation `creation` (replacing the
    /// vacated pointer whose version `vacant` is, if the creator read one),
    /// then its record: the run exists once both stand and the pointer
    /// still names it (see the module's notes).
    pub(super) async fn create(
        &self,
        creation: &Creation,
        vacant: Option<UpdateVersion>,
    ) -> Result<Birth> {
        let run_id = &creation.run.run_id;
        let encoded = codec::encode_value("a run", creation)?;
        let path = self.path(run_id);
        let created = self
            .client
            .create_unless_taken(
                &path,
                &encoded,
                Limit::RECORD,
                Owner::Incarnation(run_id, creation.incarnation),
                vacant,
            )
            .await?;
        // Taken, and gone when read (or not known to be ours): the pointer
        // there may have been an acknowledged run's, removed by a stale
        // deletion and restorable from its record, which a second create
        // would take the place of (seed 9071 of session 42's survey).
        let Some(landed) = created else {
            return Ok(Birth::Vanished);
        };
        match &landed.created {
            // `Same`: our create, whose acknowledgement was lost.
            Created::Ours(bytes) | Created::Same(bytes) => {
                // Acknowledged only once its record exists: a stale
                // deletion may remove the pointer before that, and then a
                // new run of the id may take its place.
                Ok(match self.record_new(creation, &landed, bytes).await? {
                    Recorded::Current => Birth::Born,
                    Recorded::Restored => Birth::Restored(bytes.clone()),
                    Recorded::GivenUp => Birth::Overtaken,
                })
            }
            Created::Theirs(bytes) => {
                let theirs = decode_creation(run_id, &path, bytes, None)?;
                Ok(Birth::Taken(theirs, bytes.clone()))
            }
        }
    }

    fn path(&self, run_id: &RunId) -> Path {
        self.client.layout().run_pointer(run_id)
    }

    /// The error of a read or creation that found the pointer changed at
    /// each of its [`POINTER_ATTEMPTS`].
    pub(super) fn kept_changing(&self, run_id: &RunId) -> Error {
        Error::Conflict {
            what: format!("run {run_id}"),
            reason: "the run was deleted and created again while it was read; try again".into(),
        }
    }
}

/// What a deletion of `incarnation` leaves at the run's pointer: `vacant
/// <incarnation>`, unframed (see [`VACANT`]). Pinned by
/// `records::a_vacated_run_pointer_is_pinned`.
pub(super) fn vacated(incarnation: Incarnation) -> Bytes {
    let mut bytes = VACANT.to_vec();
    bytes.extend_from_slice(incarnation.to_string().as_bytes());
    Bytes::from(bytes)
}

/// A vacated pointer that a recheck marked for its delete
/// ([`RunPointer::sweep_vacated`]): `vacant <incarnation> swept <mark>`,
/// the mark drawn by that recheck (16 hex digits), so that it knows its
/// own update read back.
///
/// With the recheck's time, ` at <ms>` follows the mark (in decimal
/// digits): how long the mark has stood, for a creator or another recheck
/// to tell a recheck that stopped between its mark and its delete
/// ([`SWEPT_PATIENCE_MS`]). Pinned by `records::a_vacated_run_pointer_is_pinned`.
pub(super) fn swept(incarnation: Incarnation, mark: u64, at_ms: Option<u64>) -> Bytes {
    let mut bytes = vacated(incarnation).to_vec();
    bytes.extend_from_slice(write_once::SWEPT);
    bytes.extend_from_slice(format!("{mark:016x}").as_bytes());
    if let Some(at_ms) = at_ms {
        bytes.extend_from_slice(format!("{SWEPT_AT}{at_ms}").as_bytes());
    }
    Bytes::from(bytes)
}

/// What precedes the time in a swept pointer's mark.
const SWEPT_AT: &str = " at ";

/// The time a vacated pointer's bytes say a recheck marked it swept:
/// `None` for a pointer not marked, or marked with no time (an older
/// release's mark, or a caller's with no clock).
pub(super) fn swept_at(vacant: &[u8]) -> Option<u64> {
    if !write_once::is_swept(vacant) {
        return None;
    }
    let (_, at) = std::str::from_utf8(vacant).ok()?.rsplit_once(SWEPT_AT)?;
    decimal_ms(at.as_bytes())
}

/// What a creation at `now_ms` that read the vacated pointer `bytes` at
/// `version` may do: replace it ([`Prior::Free`] with the version), unless
/// a recheck marked it swept less than [`SWEPT_PATIENCE_MS`] ago, whose
/// delete would remove the new pointer: then [`Error::Conflict`], to try
/// again once that delete landed. A mark with no time is replaced, as a
/// release before the time replaced every mark.
fn free_unless_swept(
    run_id: &RunId,
    bytes: &[u8],
    version: UpdateVersion,
    now_ms: u64,
) -> Result<Prior> {
    match swept_at(bytes) {
        Some(at_ms) if now_ms < at_ms.saturating_add(SWEPT_PATIENCE_MS) => Err(Error::Conflict {
            what: format!("run {run_id}"),
            reason: "its earlier run's deletion is being finished (a retention pass's \
                     recheck is about to delete its pointer); try again shortly"
                .into(),
        }),
        _ => Ok(Prior::Free(Some(version))),
    }
}

/// Whether a recheck at `at_ms` takes the pointer of `run_id`, which
/// another recheck of the same deletion marked swept (`bytes`), for its
/// own to mark and delete: once the mark is [`SWEPT_PATIENCE_MS`] old
/// (that recheck stopped between its mark and its delete);
/// [`Error::Deferred`] while it is younger (that recheck deletes it);
/// `false` for a mark with no time, or a recheck with no clock (a creation
/// replaces it, as before).
fn another_mark_stopped(run_id: &RunId, bytes: &[u8], at_ms: Option<u64>) -> Result<bool> {
    let (Some(marked_at), Some(at_ms)) = (swept_at(bytes), at_ms) else {
        return Ok(false);
    };
    if at_ms >= marked_at.saturating_add(SWEPT_PATIENCE_MS) {
        return Ok(true);
    }
    Err(Error::Deferred {
        what: format!("run {run_id}'s vacated pointer"),
        reason: "another recheck of its deletion marked it for its delete; a recheck deletes \
                 it if that mark still stands a minute on"
            .into(),
    })
}

/// What a deletion that began at `at_ms` writes in the incarnation's
/// tombstone: the time in decimal digits (framed as a plain marker), or
/// nothing for a deleter with no time ([`RunPointer::bury`]). Pinned by
/// `records::a_dated_tombstone_is_pinned`.
pub(super) fn tombstone(at_ms: Option<u64>) -> Vec<u8> {
    at_ms
        .map(|at_ms| at_ms.to_string())
        .unwrap_or_default()
        .into_bytes()
}

/// The time a tombstone's payload holds (see [`tombstone`]): `None` for
/// an empty one (a deleter with no time, or a release before tombstones
/// were dated) or one that holds anything else.
pub(super) fn tombstone_time(payload: &[u8]) -> Option<u64> {
    decimal_ms(payload)
}

/// A time in milliseconds written in decimal digits, and nothing else (a
/// sign, a space or a digit too many is none): how a tombstone and a
/// pointer's mark store their time.
fn decimal_ms(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Decodes a pointer or record at `path`, checked to name `run_id` (and
/// `incarnation`, for a record).
fn decode_creation(
    run_id: &RunId,
    path: &Path,
    bytes: &[u8],
    incarnation: Option<Incarnation>,
) -> Result<Creation> {
    let creation: Creation = codec::decode_record("the run's creation", path, bytes)?;
    if creation.run.run_id != *run_id {
        return Err(Error::corrupt(
            path,
            format!(
                "the creation record of run {run_id} names run {}",
                creation.run.run_id
            ),
        ));
    }
    if let Some(expected) = incarnation.filter(|&i| i != creation.incarnation) {
        return Err(Error::corrupt(
            path,
            format!(
                "the record of run {run_id} incarnation {expected} names incarnation {}",
                creation.incarnation
            ),
        ));
    }
    Ok(creation)
}
