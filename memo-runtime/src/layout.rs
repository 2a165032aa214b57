//! The stored layout: every object path memo writes, built and parsed in one
//! place, so a change of layout is one diff (and one golden test).
//!
//! # Version 2 (current)
//!
//! Under a store's prefix, with `<run>` the run-id segment (see
//! [`run_segment`]), `<inc>` the run's [`Incarnation`] (16 hex digits) and
//! `<step>` a step number in decimal:
//!
//! | object | path |
//! |---|---|
//! | memo entry | `memos/<run>/<inc>/<step>/<sha256(key)>` |
//! | step-output entry (no longer written) | `step-outputs/<run>/<inc>/<step>/<sha256(payload)>` |
//! | terminal marker | `terminals/<hour>/<u64::MAX - at_ms>_<run>.<inc>` |
//! | recheck marker (a swept incarnation, cleared again at `due_ms`) | `rechecks/<hour>/<u64::MAX - due_ms>_<run>.<inc>` |
//! | run pointer (runtime store) | `runs/<run>/run` |
//! | incarnation record (runtime store) | `runs/<run>/<inc>/run` |
//! | incarnation tombstone (a deleted incarnation, until its recheck) | `tombstones/<run>.<inc>` |
//! | run log entry | `runs/<run>/<inc>/log/<position, 20 digits>` |
//! | run checkpoint (a base) | `runs/<run>/<inc>/checkpoint/<position, 20 digits>` |
//! | run checkpoint delta (before inputs were kept in bases; read, no longer written) | `runs/<run>/<inc>/delta/<position, 20 digits>` |
//! | run checkpoint delta (before deltas were kept until the run's deletion; read, no longer written) | `runs/<run>/<inc>/delta/v2/<position, 20 digits>` |
//! | run checkpoint delta | `runs/<run>/<inc>/deltas/<u64::MAX - position, 20 digits>` |
//! | attempt cost (the cost ledger: an attempt that did not end the run) | `runs/<run>/<inc>/cost/<attempt, 10 digits>` |
//! | status hint | `runs-by-status/<status>/<run>.<inc>` |
//! | due-run entry | `due/<hour>/<due_ms, 20 digits>_<run>.<inc>` |
//! | due-run entry of its writer's own (a signal's wake-up) | `due/<hour>/<due_ms, 20 digits>-<tag, 16 hex digits>/<run>.<inc>` |
//! | conditional-create probe (deleted at once) | `probes/<token, 16 hex digits>` |
//! | shared entry | `shared/entries/<ns>/<sha256(key)>` |
//! | shared expiry marker | `shared/expiry/<hour>/<u64::MAX - expires_ms>_<ns>.<sha256(key)>.<token, 16 hex digits>` |
//! | blob (a large value's chunks) | `memos/<run>/<inc>/<step>/blobs/<token, 16 hex digits>` |
//!
//! A run checkpoint holds the run folded from its log entries before
//! `<position>`: a copy of what the log says, never the only record of a
//! change. Checkpoints were added to version 2 without changing its number,
//! because they are additive both ways: data without checkpoints (written
//! before they existed, or by a writer that crashed before writing one) is
//! read by folding the log from its start, as before; and a reader that does
//! not know checkpoints folds the whole log, which is still complete, and
//! deletes the checkpoint folder with the rest of the incarnation's folder.
//!
//! A checkpoint delta holds the run folded from its log entries before
//! `<position>` without the step receipts that the base it names (a
//! checkpoint) holds, or the whole run if it names none. Deltas were added
//! the same way, additive both ways: data without deltas (written before
//! them) is read from the newest checkpoint and the log after it, as before,
//! at the cost of one more listing (of the empty delta folder); a reader
//! that knows checkpoints only reads the newest base and folds the longer
//! log tail after it (the log is complete, so it reads the same run), and
//! deletes the delta folder with the rest of the incarnation's folder.
//!
//! Deltas under `delta/v2/` leave the base's inputs (signals) to the base,
//! as deltas leave it its receipts, and say only where those inputs stand
//! now: a delta that copied every input made a run of `n` signals write
//! about `n²` signals' worth. The move is safe both ways: this version reads
//! deltas of either form (both are listed by the one listing of `delta/`,
//! and an old one holds every input); a reader of the release before it
//! finds a `v2` delta's position in its listing, finds no delta of its own
//! form there, takes it for one deleted meanwhile and, after its retries,
//! reads the newest base and the longer log tail after it (the log is
//! complete, so it reads the same run), and it deletes the `v2` folder with
//! the rest of the incarnation's folder. Bases are unchanged.
//!
//! Deltas under `deltas/` (the same record as a `v2` delta) are named
//! `u64::MAX - position`, so the newest sorts first, and are kept until the
//! run's deletion rather than deleted as each newer one settles (which cost
//! a `DELETE` per delta, one every few steps): a reader finds the newest by
//! reading the first name of a listing in order, one request however many
//! the folder holds. Safe both ways: this version lists `deltas/` first and
//! reads the older forms under `delta/` only when it is empty; a reader of
//! the release before never lists `deltas/`, so it reads the newest base
//! (bases are unchanged and still written) and the longer log tail after it
//! (the log is complete, so it reads the same run), and it deletes the
//! folder with the rest of the incarnation's folder.
//!
//! Run segments have two forms (see [`run_segment`]): the short form (the
//! id with each capital written `=` and the letter in lower case) for every
//! segment of up to [`MAX_SHORT_RUN_SEGMENT`] (196) bytes, and a long form
//! (the id in lower case, `==` and a hex case mask, at most 162 bytes) for
//! ids with more capitals, so that every name fits a local folder's 255-byte
//! file names, and every key under a prefix of up to 512 bytes fits S3's,
//! GCS's and Azure's 1,024 (pinned for every valid id by
//! `every_name_fits_every_backend_for_every_valid_id`). The long form was
//! added to version 2 without changing its number: every id whose short
//! form is at most 196 bytes (every id with at most 68 capitals) maps to the
//! paths it always had, so its data reads unchanged. An id with more
//! capitals was written in the short form before (up to 256 bytes; on a
//! local folder most such runs could not be created or could not get their
//! terminal marker, names over 255 bytes), and this version does not read
//! such data: its run is not found, its markers and status hints are skipped
//! as foreign. Finish or delete such runs before upgrading.
//!
//! Step-output entries are no longer written: step receipts in the runtime
//! store replaced them, and `MemoStore::put_step_output` (which wrote under
//! the standalone incarnation whatever run it was used in) was removed. Data
//! written before keeps its folder: clears and sweeps still delete a run's
//! `step-outputs` entries with its memo entries, and nothing reads them. A
//! retention pass lists the runs' `step-outputs` folders only if the store
//! holds such an entry when the pass first clears or rechecks a run (one
//! listing of at most one key a pass); a release from before their
//! removal, still running, that writes one for a run a pass is clearing
//! after that listing leaves it to the run's recheck, in a later pass.
//!
//! Recheck markers (a sweep leaves one per workflow incarnation it
//! deletes; a pass at `due_ms` clears the incarnation's folders again, for
//! a stale writer's late write) are additive too: a release before them
//! never lists `rechecks/`, so after a rollback they stay, empty objects,
//! until a pass of a release that knows them.
//!
//! Incarnation tombstones (left by a deletion, removed by the swept run's
//! recheck) are additive too: a release before them never reads
//! `tombstones/` (it restores a record found with no pointer, as it did),
//! and after a rollback they stay until a pass of a release that knows them.
//!
//! A deleted run's pointer is vacated (`vacant <inc>`, unframed), not
//! deleted, until the deletion's recheck: not additive for a release
//! before it, which reads a vacated pointer as corrupt and refuses that
//! id (changing nothing) until the recheck or a newer release's run of the
//! id replaces it (`docs/guide/stored-format.md`).
//!
//! An incarnation record is a copy of the run pointer in the incarnation's
//! own folder, from which a pointer that a stalled deletion removed is
//! restored. Records were added to version 2 the same way, additive both
//! ways: an incarnation written before them has none until the next
//! `create_run` of its id writes it (until then a stalled deletion can
//! remove its pointer for good, as before); a reader that does not know
//! records never reads them, and deletes them with the rest of the
//! incarnation's folder.
//!
//! Runs record the workflow runtime's own waits as step receipts whose step
//! names start with `memo.` (no new object, record or field): `memo.sleep`
//! (output: the wake time, a MessagePack `u64` of ms since the Unix epoch),
//! `memo.signal-deadline:<name>` (output: the deadline, likewise),
//! `memo.signal-timeout:<name>` (output: MessagePack nil), and
//! `memo.wait:<name>` (empty output), which marks a run suspended in
//! `Context::wait_for_signal` and precedes the wait's `signal:<name>`
//! receipt; `memo.select` (output: a MessagePack `(u64, [String])`, the
//! deadline, `u64::MAX` for none, and the signal names of a
//! `Context::select`), followed by the winner's `signal:<name>` receipt or
//! `memo.select-timeout` (output: MessagePack nil). These were added to version 2 without changing its number:
//! histories written before them never contain them and replay as before
//! (a wait finds its `signal:<name>` receipt where it always was). A runtime
//! from before them reading a history that does contain them (a rollback)
//! reports `Error::NonDeterminism` at the first one and leaves the run open:
//! finish or cancel runs that sleep or wait before rolling back.
//!
//! Due-run entries (the due-run index, `workflow::DueRun`) name a run
//! incarnation that waits for something due at `<due_ms>` (a timer, a
//! signal deadline, a signal that arrived, the expiry of an attempt's
//! lease), in the hour folder that holds `<due_ms>` (`<hour>` is `<due_ms>`
//! rounded down to the hour, as a marker's): within an hour the earliest
//! entry sorts first. The object is empty (a frame with no payload, as a
//! marker's): everything is in its name. Entries were added to version 2
//! without changing its number, additive both ways: a run written before
//! them has none, and is found by `Runtime::recover` as before; a reader
//! that does not know them never lists `due/`. An entry is only a hint: a
//! worker that wakes a run that is not due (ended, not yet due, another
//! incarnation) writes nothing to the run and deletes the entry.
//!
//! An entry whose writer must be the only one to hold it (a signal's
//! wake-up: `workflow/due.rs` says why) is named by a tag its writer draws,
//! in a folder of its own beside the others, `<due_ms>-<tag>/<run>.<inc>`
//! (a name of its own: a worker that listed an entry of the same run and
//! due time before, and deletes it once it woke the run, never deletes
//! this one; in a folder, because the longest `<due_ms>_<run>.<inc>` is
//! already as long as a local folder's names may be). Keys still sort by
//! due time first (a tagged entry before an untagged one of the same
//! millisecond). Added to version 2 without changing its number: a reader
//! from before them skips a tagged entry as a foreign object (so only
//! upgraded workers wake a run for a signal an upgraded process sent, and
//! the workers are upgraded before the processes that send signals), and
//! untagged entries are unchanged.
//!
//! Shared entries (`memo_runtime::shared`) hold the values of memoized calls
//! in the shared scope: keyed by the call alone (function name, version,
//! arguments), in a namespace `<ns>` (1 to 64 bytes of `[a-z0-9_-]`), apart
//! from every run's folder, so no clear or sweep of a run reaches them. Each
//! is written after an expiry marker naming it, in the hour folder that
//! holds its expiry time (`<hour>`, as a terminal marker's, and inverted the
//! same way, so the expired markers of the hour that holds a cutoff are
//! listed from an offset); a sweep of the shared scope lists only the
//! expired hours, deletes each entry its expired markers name, then the
//! markers. Both were added to version 2 without changing its number,
//! additive both ways: data written before them has none, and a reader that
//! does not know them never lists `shared/`.
//!
//! Attempt costs (the cost ledger, `runtime_store::AttemptCost`): what an
//! attempt cost (requests by kind, bytes uploaded, memo entries written,
//! memoized calls run and reused with their declared cost), a MessagePack
//! record with named fields (`the_attempt_cost_record_is_pinned`), in the
//! `cost` field of the run's terminal log entry for the attempt that ended
//! it (and `ending_cost` of the checkpoint of the end; both left out when
//! absent), else written once, framed and sealed, in `cost/` when the
//! attempt suspends or stops. Added to version 2 without changing its
//! number, additive both ways: a run written before them reads as having no
//! ledger; an older reader ignores the fields, never lists `cost/`, and
//! deletes it with the rest of the incarnation's folder.
//!
//! Workflow versions add a field, no object: a run started on a version
//! (`Workflow::with_version`) carries `workflow_version` in its run pointer
//! and incarnation record (in the created run, `NewRun`) and in the run
//! record its checkpoints hold; a run without one is written exactly as
//! before (the field is left out), so data of unversioned workflows is
//! unchanged both ways. This was added to version 2 without changing its
//! number: a record written before versions reads as a run with no version
//! (pinned by the goldens in `runtime_store/object/records.rs`); a runtime
//! from before versions reading a versioned run ignores the field and drives
//! the run with whatever code it has, as it did every run, so roll back only
//! once no open run has a version (`memoctl runs` shows each run's).
//!
//! Blobs (`memo_runtime::blob`) hold values streamed a chunk at a time:
//! one object per value, its chunk records one after another (see
//! `chunk_frame.rs`), in the `blobs` folder of the step's memo folder (a
//! memo entry's name is 64 hex digits, never `blobs`), named by a token
//! its writer drew; the memo entry or step receipt that returns the value
//! holds only a reference naming it. Under the step's memo folder, a blob
//! is listed, cleared, swept and exported with the run's entries, with no
//! request more. Blobs were added to version 2 without changing its
//! number, additive both ways: data written before them has none; a reader
//! that does not know them never reads one (a reference is a value it
//! cannot decode, `Error::Decode`, as any type it does not know), skips
//! them with a warning when it lists a run's entries, and clears and sweeps
//! them with the run.
//!
//! Version 1 had no incarnation segment and wrote run ids as they are. Its
//! memo entries and markers are not read by version 2 (a v1 entry is a
//! miss, a v1 marker is skipped as foreign); [`MemoStore::clear_memos_for_run`]
//! still deletes a v1 run's entries. Drain runs in flight before upgrading.
//!
//! [`MemoStore::clear_memos_for_run`]: crate::MemoStore::clear_memos_for_run

use object_store::path::{Path, PathPart};

use crate::run_id::{Incarnation, RunId};

mod markers;
mod segment;
mod shared;

#[cfg(any(doc, test))]
use segment::MAX_SHORT_RUN_SEGMENT;
#[cfg(any(test, feature = "testing"))]
pub(crate) use segment::parse_run_segment;
pub(crate) use segment::run_segment;
use segment::{incarnation_name, parse_incarnation_name};
pub(crate) use shared::{MAX_SHARED_NAMESPACE_LEN, is_shared_namespace, parse_shared_expiry};

pub(crate) const MEMOS: &str = "memos";
pub(crate) const STEP_OUTPUTS: &str = "step-outputs";
/// The folder of a step's blobs (large values, streamed), in its memo
/// folder: `memos/<run>/<inc>/<step>/blobs/<token>`.
pub(crate) const BLOB_FOLDER: &str = "blobs";
pub(crate) const TERMINALS: &str = "terminals";
pub(crate) const RECHECKS: &str = "rechecks";
const RUNS: &str = "runs";
const RUNS_BY_STATUS: &str = "runs-by-status";
pub(crate) const TOMBSTONES: &str = "tombstones";
const PROBES: &str = "probes";
const DUE: &str = "due";
const SHARED: &str = "shared";
const SHARED_ENTRIES: &str = "entries";
const SHARED_EXPIRY: &str = "expiry";

/// The width of a marker's hour folder, in milliseconds.
pub(crate) const MARKER_HOUR_MS: u64 = 60 * 60 * 1000;

/// `<prefix>/probes/<token>`: the object a conditional-create probe creates
/// twice and deletes; `token` is unique per probe, so concurrent start-ups
/// never take each other's probe for their own first create.
pub(crate) fn probe(prefix: &Path, token: u64) -> Path {
    prefix.clone().join(PROBES).join(format!("{token:016x}"))
}

/// The paths of one store prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    base: Path,
}

impl Layout {
    pub(crate) fn new(prefix: impl Into<String>) -> Layout {
        Layout {
            base: Path::from(prefix.into()),
        }
    }

    pub(crate) fn prefix(&self) -> &Path {
        &self.base
    }

    /// `<folder>`: every run's entries in `folder` ([`MEMOS`] or
    /// [`STEP_OUTPUTS`]).
    pub(crate) fn entry_root(&self, folder: &str) -> Path {
        self.base.clone().join(folder)
    }

    /// `<folder>/<run>`: every incarnation of a run in `folder`
    /// ([`MEMOS`] or [`STEP_OUTPUTS`]).
    pub(crate) fn run_folder(&self, folder: &str, run_id: &RunId) -> Path {
        self.entry_root(folder).join(run_segment(run_id))
    }

    /// `<folder>/<run>/<inc>`: one incarnation of a run in `folder`.
    pub(crate) fn incarnation_folder(
        &self,
        folder: &str,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Path {
        self.run_folder(folder, run_id)
            .join(incarnation.to_string())
    }

    /// `<folder>/<run>/<inc>/<step>/<digest>`: tests and `testing` build entry
    /// paths whole with it; the runtime joins the same parts a step at a time.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn entry(
        &self,
        folder: &str,
        run_id: &RunId,
        incarnation: Incarnation,
        step: u32,
        digest: &str,
    ) -> Path {
        self.step_folder(folder, run_id, incarnation, step)
            .join(digest)
    }

    /// `<folder>/<run>/<inc>/<step>`: the folder of one step's entries, so
    /// a caller making many of them builds it once.
    pub(crate) fn step_folder(
        &self,
        folder: &str,
        run_id: &RunId,
        incarnation: Incarnation,
        step: u32,
    ) -> Path {
        self.incarnation_folder(folder, run_id, incarnation)
            .join(PathPart::from(step.to_string()))
    }

    /// `due`: the due-run index.
    pub(crate) fn due_folder(&self) -> Path {
        self.base.clone().join(DUE)
    }

    /// `due/<hour>`: the due-run entries of the hour starting at `hour_ms`.
    pub(crate) fn due_hour(&self, hour_ms: u64) -> Path {
        self.due_folder().join(format!("{hour_ms:020}"))
    }

    /// `due/<hour>/<due_ms>_<run>.<inc>`, or, for an entry tagged by its
    /// writer, `due/<hour>/<due_ms>-<tag>/<run>.<inc>`.
    pub(crate) fn due_entry(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        due_ms: u64,
        tag: Option<u64>,
    ) -> Path {
        let hour = due_ms - due_ms % MARKER_HOUR_MS;
        let name = incarnation_name(run_id, incarnation);
        match tag {
            None => self.due_hour(hour).join(format!("{due_ms:020}_{name}")),
            Some(tag) => self
                .due_hour(hour)
                .join(format!("{due_ms:020}-{tag:016x}"))
                .join(name),
        }
    }

    /// `memos/<run>/<inc>/<step>/blobs/<token>`: the object of a blob that
    /// step `step` of the incarnation wrote, `token` drawn by its writer.
    pub(crate) fn blob(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        step: u32,
        token: u64,
    ) -> Path {
        self.step_folder(MEMOS, run_id, incarnation, step)
            .join(BLOB_FOLDER)
            .join(format!("{token:016x}"))
    }

    /// `shared/entries/<ns>`: the shared entries of one namespace.
    pub(crate) fn shared_entries(&self, namespace: &str) -> Path {
        self.base
            .clone()
            .join(SHARED)
            .join(SHARED_ENTRIES)
            .join(PathPart::from(namespace))
    }

    /// `shared/expiry`: the expiry markers of shared entries.
    pub(crate) fn shared_expiry_folder(&self) -> Path {
        self.base.clone().join(SHARED).join(SHARED_EXPIRY)
    }

    /// `shared/expiry/<hour>`: the expiry markers of the hour starting at
    /// `hour_ms`.
    pub(crate) fn shared_expiry_hour(&self, hour_ms: u64) -> Path {
        self.shared_expiry_folder().join(format!("{hour_ms:020}"))
    }

    /// `shared/expiry/<hour>/<inverted>_<ns>.<digest>.<token>`: the marker
    /// that the shared entry `<ns>/<digest>` expires at `expires_ms`,
    /// written by the writer of `token` (unique per write, so two writers'
    /// markers of one entry never share a name, and the writer that loses
    /// the race deletes its own only).
    pub(crate) fn shared_expiry(
        &self,
        namespace: &str,
        digest: &str,
        expires_ms: u64,
        token: u64,
    ) -> Path {
        let hour = expires_ms - expires_ms % MARKER_HOUR_MS;
        self.shared_expiry_hour(hour).join(format!(
            "{:020}_{namespace}.{digest}.{token:016x}",
            u64::MAX - expires_ms
        ))
    }

    /// The first name in an expiry hour folder at or after which every
    /// marker expired strictly before `cutoff_ms` (markers sort latest
    /// expiry first).
    pub(crate) fn shared_expiry_offset(&self, hour_ms: u64, cutoff_ms: u64) -> Path {
        self.shared_expiry_hour(hour_ms)
            .join(format!("{:020}z", u64::MAX - cutoff_ms))
    }

    /// The run pointer: the creation record naming a run's current
    /// incarnation.
    pub(crate) fn run_pointer(&self, run_id: &RunId) -> Path {
        self.runs_folder(run_id).join("run")
    }

    /// `runs/<run>`: every runtime record of a run id.
    pub(crate) fn runs_folder(&self, run_id: &RunId) -> Path {
        self.base.clone().join(RUNS).join(run_segment(run_id))
    }

    /// `runs/<run>/<inc>`: every runtime record of one incarnation but its
    /// pointer.
    pub(crate) fn incarnation_records(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.runs_folder(run_id).join(incarnation.to_string())
    }

    /// `tombstones/<run>.<inc>`: the empty tombstone of a deleted
    /// incarnation, until its recheck, by which a record a late writer puts
    /// back is taken back, never restored (see the runtime store's `pointer`
    /// module). Read by name only, never listed.
    pub(crate) fn incarnation_tombstone(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.base
            .clone()
            .join(TOMBSTONES)
            .join(incarnation_name(run_id, incarnation))
    }

    /// `runs/<run>/<inc>/run`: the incarnation's copy of its run pointer,
    /// from which a pointer removed by a stale deletion is restored.
    pub(crate) fn incarnation_record(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.incarnation_records(run_id, incarnation).join("run")
    }

    pub(crate) fn log_folder(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.incarnation_records(run_id, incarnation).join("log")
    }

    pub(crate) fn log_entry(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
    ) -> Path {
        self.log_folder(run_id, incarnation)
            .join(format!("{position:020}"))
    }

    /// `runs/<run>/<inc>/checkpoint`: the incarnation's checkpoints.
    pub(crate) fn checkpoint_folder(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.incarnation_records(run_id, incarnation)
            .join("checkpoint")
    }

    /// The checkpoint of the run folded from its log entries before
    /// `position`.
    pub(crate) fn checkpoint(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
    ) -> Path {
        self.checkpoint_folder(run_id, incarnation)
            .join(format!("{position:020}"))
    }

    /// `runs/<run>/<inc>/delta`: the incarnation's checkpoint deltas.
    pub(crate) fn delta_folder(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.incarnation_records(run_id, incarnation).join("delta")
    }

    /// The checkpoint delta of the run folded from its log entries before
    /// `position`.
    pub(crate) fn delta(&self, run_id: &RunId, incarnation: Incarnation, position: u64) -> Path {
        self.delta_folder(run_id, incarnation)
            .join(format!("{position:020}"))
    }

    /// `runs/<run>/<inc>/delta/v2`: the incarnation's checkpoint deltas
    /// that leave the base's inputs to it.
    pub(crate) fn delta_v2_folder(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.delta_folder(run_id, incarnation).join("v2")
    }

    /// The checkpoint delta (inputs kept in the base) of the run folded
    /// from its log entries before `position`.
    pub(crate) fn delta_v2(&self, run_id: &RunId, incarnation: Incarnation, position: u64) -> Path {
        self.delta_v2_folder(run_id, incarnation)
            .join(format!("{position:020}"))
    }

    /// `runs/<run>/<inc>/deltas`: the incarnation's checkpoint deltas
    /// (inputs kept in the base), named newest first.
    pub(crate) fn deltas_folder(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.incarnation_records(run_id, incarnation).join("deltas")
    }

    /// The checkpoint delta (inputs kept in the base) of the run folded
    /// from its log entries before `position`, named `u64::MAX - position`
    /// so that a listing in order (as object storage lists) finds the
    /// newest first.
    pub(crate) fn delta_newest_first(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        position: u64,
    ) -> Path {
        self.deltas_folder(run_id, incarnation)
            .join(format!("{:020}", u64::MAX - position))
    }

    /// `runs/<run>/<inc>/cost`: the incarnation's cost ledger.
    pub(crate) fn cost_folder(&self, run_id: &RunId, incarnation: Incarnation) -> Path {
        self.incarnation_records(run_id, incarnation).join("cost")
    }

    /// What attempt `attempt` of the incarnation cost, in its cost ledger:
    /// named by the attempt in 10 digits, so they list in attempt order.
    pub(crate) fn attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        attempt: u32,
    ) -> Path {
        self.cost_folder(run_id, incarnation)
            .join(format!("{attempt:010}"))
    }

    /// The folder of one status in the status-hint index; `status` is the
    /// status's own segment (`RunStatus::path_segment`), so that this
    /// module stays below the runtime store.
    pub(crate) fn status_folder(&self, status: &str) -> Path {
        self.base
            .clone()
            .join(RUNS_BY_STATUS)
            .join(PathPart::from(status))
    }

    pub(crate) fn status_hint(
        &self,
        status: &str,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Path {
        self.status_folder(status)
            .join(incarnation_name(run_id, incarnation))
    }

    /// A path after every status hint of `run_id` in `status` and before
    /// the hints of every run whose segment sorts after its segment: the
    /// offset from which a listing of the status's hints continues past
    /// `run_id`. A hint name is `<run>.` and 16 lower-case hex digits, and
    /// `.` is in no segment, so `<run>.g` sorts after every hint of `<run>`
    /// and before any other run's.
    pub(crate) fn status_hints_after(&self, status: &str, run_id: &RunId) -> Path {
        self.status_folder(status)
            .join(format!("{}.g", run_segment(run_id)))
    }
}

/// Parses an hour folder's name; `None` for anything else.
pub(crate) fn parse_marker_hour(folder: &Path) -> Option<u64> {
    let start = parse_digits(folder.filename()?)?;
    (start % MARKER_HOUR_MS == 0).then_some(start)
}

/// Parses a marker path into (hour, run, incarnation, at_ms); `None` for
/// anything that [`Layout::marker`] would not have written.
pub(crate) fn parse_marker(path: &Path) -> Option<(u64, RunId, Incarnation, u64)> {
    let hour = parse_marker_hour(&path.parent()?)?;
    let name = path.filename()?;
    let (inverted, rest) = name.split_at_checked(20)?;
    let (run_id, incarnation) = parse_incarnation_name(rest.strip_prefix('_')?)?;
    let at_ms = u64::MAX - parse_digits(inverted)?;
    (at_ms - at_ms % MARKER_HOUR_MS == hour).then_some((hour, run_id, incarnation, at_ms))
}

/// Parses a due-run entry's path, tagged or not, into its parts; `None`
/// for anything that [`Layout::due_entry`] would not have written.
pub(crate) fn parse_due_entry(path: &Path) -> Option<DueEntryName> {
    let folder = path.parent()?;
    let name = path.filename()?;
    let (hour, due, tag, incarnation_name) = match parse_marker_hour(&folder) {
        Some(hour) => {
            let (due, rest) = name.split_at_checked(20)?;
            (hour, due, None, rest.strip_prefix('_')?)
        }
        None => {
            let hour = parse_marker_hour(&folder.parent()?)?;
            let (due, tag) = folder.filename()?.split_once('-')?;
            (hour, due, Some(parse_hex_token(tag)?), name)
        }
    };
    let (run_id, incarnation) = parse_incarnation_name(incarnation_name)?;
    let due_ms = parse_digits(due)?;
    (due_ms - due_ms % MARKER_HOUR_MS == hour).then_some(DueEntryName {
        hour,
        run_id,
        incarnation,
        due_ms,
        tag,
    })
}

/// A due-run entry's path, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DueEntryName {
    /// The hour folder it is in.
    pub(crate) hour: u64,
    pub(crate) run_id: RunId,
    pub(crate) incarnation: Incarnation,
    pub(crate) due_ms: u64,
    /// Its writer's tag, if it has one.
    pub(crate) tag: Option<u64>,
}

/// Parses a token written as 16 lower-case hex digits.
fn parse_hex_token(s: &str) -> Option<u64> {
    let hex = s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    hex.then(|| u64::from_str_radix(s, 16).ok()).flatten()
}

/// Whether `path` is where a memo store or a runtime store keeps an object
/// memo never encrypts, under whatever prefix: a terminal or recheck
/// marker, a due-run entry, a status hint, a tombstone, a shared entry's
/// expiry marker, a probe. Their meaning is in their names (their payload
/// is empty or names the run), so their frames say plaintext in an
/// encrypted store too. Told by the folders and names the layout gives
/// them, which no object memo seals has: each of those lies in a run's,
/// an incarnation's, a step's or a namespace's folder, never directly in
/// one of these.
pub(crate) fn never_sealed(path: &Path) -> bool {
    let parts: Vec<PathPart<'_>> = path.parts().collect();
    let from_end = |n: usize| {
        let at = parts.len().checked_sub(n + 1)?;
        Some(parts[at].as_ref())
    };
    let Some(name) = from_end(0) else {
        return false;
    };
    let (folder, grandparent, great) = (from_end(1), from_end(2), from_end(3));
    // Each place is checked on its own: a prefix may be named like another
    // place's folder (`terminals/tombstones/<run>.<inc>`).
    let marker = matches!(grandparent, Some(TERMINALS | RECHECKS)) && parse_marker(path).is_some();
    let due = (grandparent == Some(DUE) || great == Some(DUE)) && parse_due_entry(path).is_some();
    let hint_or_tombstone = (grandparent == Some(RUNS_BY_STATUS) || folder == Some(TOMBSTONES))
        && parse_incarnation_name(name).is_some();
    let expiry = great == Some(SHARED)
        && grandparent == Some(SHARED_EXPIRY)
        && folder.is_some_and(|hour| parse_digits(hour).is_some())
        && name.contains('_');
    let probe = folder == Some(PROBES) && parse_hex_token(name).is_some();
    marker || due || hint_or_tombstone || expiry || probe
}

/// Parses a status hint's file name into the run and incarnation it names.
pub(crate) fn parse_status_hint(path: &Path) -> Option<(RunId, Incarnation)> {
    parse_incarnation_name(path.filename()?)
}

/// Parses a log entry's (or a checkpoint's, or a delta's) file name into its position.
pub(crate) fn parse_log_position(path: &Path) -> Option<u64> {
    parse_digits(path.filename()?)
}

pub(super) fn parse_digits(s: &str) -> Option<u64> {
    if s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::segment::short_segment;
    use super::*;
    use crate::run_id::MAX_RUN_ID_LEN;
    use crate::runtime_store::RunStatus;

    fn run(id: &str) -> RunId {
        RunId::new(id).unwrap()
    }

    #[test]
    fn run_segments_are_lower_case_and_one_to_one() {
        assert_eq!(run_segment(&run("order-1")), "order-1");
        assert_eq!(run_segment(&run("Order_1")), "=order_1");
        assert_eq!(run_segment(&run("AbC")), "=ab=c");
        for id in ["order-1", "Order-1", "ORDER-1", "a_B-c9", "Z"] {
            let segment = run_segment(&run(id));
            assert_eq!(segment, segment.to_ascii_lowercase());
            assert_eq!(parse_run_segment(&segment), Some(run(id)));
        }
        assert_ne!(
            run_segment(&run("Order-1")).to_ascii_lowercase(),
            run_segment(&run("order-1")).to_ascii_lowercase()
        );
        for foreign in ["", "=", "a=", "=1", "Abc", "a.b", "a/b"] {
            assert_eq!(parse_run_segment(foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn ids_with_many_capitals_get_the_long_form_and_round_trip() {
        // Pinned: a change here is a change of the stored format.
        let capitals = "A".repeat(128);
        let mixed = format!("{}{}", "Ab-".repeat(42), "CD");
        let goldens = [
            (
                capitals.clone(),
                format!("{}=={}", "a".repeat(128), "f".repeat(32)),
            ),
            // 86 letters, 44 capitals + 42 '-': 128 + 44 = 172, short form.
            (mixed.clone(), short_segment(&mixed)),
            // 69 capitals and 59 digits: 197 bytes, one over the short form.
            (
                format!("{}{}", "Q".repeat(69), "7".repeat(59)),
                format!("{}{}=={}8", "q".repeat(69), "7".repeat(59), "f".repeat(17)),
            ),
            // 68 capitals: exactly the short form's bound.
            (
                format!("{}{}", "Q".repeat(68), "7".repeat(60)),
                format!("{}{}", "=q".repeat(68), "7".repeat(60)),
            ),
            // Letters X y Z then 100 Q: 1011, 24 times 1111, then 111 and a
            // padding 0.
            (
                format!("XyZ{}", "Q".repeat(100)),
                format!("xyz{}==b{}e", "q".repeat(100), "f".repeat(24)),
            ),
            // '-' is not a letter: 94 letters, all capitals.
            (
                format!("{}{}", "A-".repeat(34), "B".repeat(60)),
                format!("{}{}=={}c", "a-".repeat(34), "b".repeat(60), "f".repeat(23)),
            ),
        ];
        for (id, segment) in &goldens {
            let run_id = run(id);
            assert_eq!(&run_segment(&run_id), segment, "{id}");
            assert_eq!(parse_run_segment(segment), Some(run_id), "{segment}");
            assert_eq!(segment, &segment.to_ascii_lowercase());
        }
        // Names no id is written as: a short form too long, a long form for
        // an id whose short form fits, a mask with bits past the letters.
        for foreign in [
            "=a".repeat(99),
            "abc==e".to_string(),
            format!("{}==", "a".repeat(128)),
            format!("{}=={}1", "a".repeat(128), "f".repeat(32)),
            format!("{}=={}", "a".repeat(128), "F".repeat(32)),
            format!("{}=={}", "A".repeat(128), "f".repeat(32)),
        ] {
            assert_eq!(parse_run_segment(&foreign), None, "{foreign:?}");
        }
    }

    /// Every name of one run incarnation, under `layout`.
    fn every_path(layout: &Layout, id: &RunId, inc: Incarnation) -> Vec<Path> {
        let mut paths = vec![
            layout.entry(MEMOS, id, inc, u32::MAX, &"f".repeat(64)),
            layout.entry(STEP_OUTPUTS, id, inc, u32::MAX, &"f".repeat(64)),
            layout.marker(TERMINALS, id, inc, u64::MAX),
            layout.marker(TERMINALS, id, inc, 0),
            layout.marker(RECHECKS, id, inc, u64::MAX),
            layout.due_entry(id, inc, u64::MAX, None),
            layout.due_entry(id, inc, u64::MAX, Some(u64::MAX)),
            layout.run_pointer(id),
            layout.incarnation_tombstone(id, inc),
            layout.log_entry(id, inc, u64::MAX),
            layout.checkpoint(id, inc, u64::MAX),
            layout.delta(id, inc, u64::MAX),
            layout.delta_newest_first(id, inc, 0),
            layout.attempt_cost(id, inc, u32::MAX),
            probe(layout.prefix(), u64::MAX),
        ];
        for status in RunStatus::ALL {
            paths.push(layout.status_hint(status.path_segment(), id, inc));
        }
        paths
    }

    #[test]
    fn every_name_fits_every_backend_for_every_valid_id() {
        // The longest file name a local folder takes, less what
        // `LocalFileSystem` appends to stage a write (`#` and a counter).
        const MAX_NAME: usize = 255 - 21;
        // S3's and GCS's longest key (in bytes), Azure's longest blob name
        // (in characters, here all ASCII).
        const MAX_KEY: usize = 1024;
        // A prefix as long as any deployment would use: 512 bytes.
        let prefix = vec!["p".repeat(63); 8].join("/");
        let layout = Layout::new(prefix.clone());
        let inc = Incarnation::from_u64(u64::MAX);
        // A name's length depends on the id's length, its number of
        // capitals and (in the long form) its number of letters: every
        // length and number of capitals, the rest letters or not.
        let mut longest = 0;
        for len in 1..=MAX_RUN_ID_LEN {
            for capitals in 0..=len {
                let long_form = len + capitals > MAX_SHORT_RUN_SEGMENT;
                let fillers: &[char] = if long_form { &['z', '-'] } else { &['z'] };
                for &filler in fillers {
                    let id: String = (0..len)
                        .map(|i| if i < capitals { 'A' } else { filler })
                        .collect();
                    let id = run(&id);
                    let segment = run_segment(&id);
                    assert_eq!(parse_run_segment(&segment).as_ref(), Some(&id));
                    for path in every_path(&layout, &id, inc) {
                        let key = path.as_ref();
                        assert_eq!(Path::parse(key).ok().as_ref(), Some(&path), "{key}");
                        assert!(key.len() <= MAX_KEY, "{} bytes: {key}", key.len());
                        // Azure's limit on a blob name's segments.
                        assert!(path.parts().count() <= 254, "{key}");
                        longest = longest.max(key.len() - prefix.len());
                        for part in path.parts() {
                            let name = part.as_ref();
                            assert!(name.len() <= MAX_NAME, "{} bytes: {name}", name.len());
                        }
                    }
                    let marker = layout.marker(TERMINALS, &id, inc, 7);
                    assert_eq!(parse_marker(&marker), Some((0, id.clone(), inc, 7)));
                    for tag in [None, Some(u64::MAX)] {
                        let due = layout.due_entry(&id, inc, 7, tag);
                        let parsed = parse_due_entry(&due).expect("an entry");
                        assert_eq!(
                            (parsed.hour, &parsed.run_id, parsed.incarnation),
                            (0, &id, inc)
                        );
                        assert_eq!((parsed.due_ms, parsed.tag), (7, tag));
                    }
                    let hint = layout.status_hint("Running", &id, inc);
                    assert_eq!(parse_status_hint(&hint), Some((id, inc)));
                }
            }
        }
        // What the prefix may take, as the module's note says.
        assert!(longest + 512 <= MAX_KEY, "{longest}");
    }

    #[test]
    fn the_layout_is_pinned() {
        let layout = Layout::new("pre/fix");
        let (id, inc) = (run("Run_1"), Incarnation::from_u64(0xab));
        let paths = [
            layout.entry(MEMOS, &id, inc, 7, "d1").to_string(),
            layout.entry(STEP_OUTPUTS, &id, inc, 2, "d2").to_string(),
            layout.marker(TERMINALS, &id, inc, 3_600_001).to_string(),
            layout.run_pointer(&id).to_string(),
            layout.incarnation_record(&id, inc).to_string(),
            layout.log_entry(&id, inc, 3).to_string(),
            layout
                .status_hint(RunStatus::Running.path_segment(), &id, inc)
                .to_string(),
            layout.checkpoint(&id, inc, 64).to_string(),
            layout.delta(&id, inc, 68).to_string(),
            layout.delta_v2(&id, inc, 72).to_string(),
            layout.delta_newest_first(&id, inc, 76).to_string(),
            probe(layout.prefix(), 0xcd).to_string(),
            layout.due_entry(&id, inc, 3_600_001, None).to_string(),
            layout
                .due_entry(&id, inc, 3_600_001, Some(0x9c))
                .to_string(),
            layout.shared_entries("llm-v1").join("d3").to_string(),
            layout
                .shared_expiry("llm-v1", &"e".repeat(64), 3_600_001, 0xef)
                .to_string(),
            layout.blob(&id, inc, 4, 0x12).to_string(),
            layout.attempt_cost(&id, inc, 2).to_string(),
            layout.marker(RECHECKS, &id, inc, 3_600_001).to_string(),
            layout.incarnation_tombstone(&id, inc).to_string(),
        ];
        assert_eq!(
            paths,
            [
                "pre/fix/memos/=run_1/00000000000000ab/7/d1".to_string(),
                "pre/fix/step-outputs/=run_1/00000000000000ab/2/d2".to_string(),
                format!(
                    "pre/fix/terminals/00000000000003600000/{}_=run_1.00000000000000ab",
                    u64::MAX - 3_600_001
                ),
                "pre/fix/runs/=run_1/run".to_string(),
                "pre/fix/runs/=run_1/00000000000000ab/run".to_string(),
                "pre/fix/runs/=run_1/00000000000000ab/log/00000000000000000003".to_string(),
                "pre/fix/runs-by-status/Running/=run_1.00000000000000ab".to_string(),
                "pre/fix/runs/=run_1/00000000000000ab/checkpoint/00000000000000000064".to_string(),
                "pre/fix/runs/=run_1/00000000000000ab/delta/00000000000000000068".to_string(),
                "pre/fix/runs/=run_1/00000000000000ab/delta/v2/00000000000000000072".to_string(),
                "pre/fix/runs/=run_1/00000000000000ab/deltas/18446744073709551539".to_string(),
                "pre/fix/probes/00000000000000cd".to_string(),
                "pre/fix/due/00000000000003600000/00000000000003600001_=run_1.00000000000000ab"
                    .to_string(),
                "pre/fix/due/00000000000003600000/00000000000003600001-000000000000009c/=run_1.00000000000000ab"
                    .to_string(),
                "pre/fix/shared/entries/llm-v1/d3".to_string(),
                format!(
                    "pre/fix/shared/expiry/00000000000003600000/{}_llm-v1.{}.00000000000000ef",
                    u64::MAX - 3_600_001,
                    "e".repeat(64)
                ),
                "pre/fix/memos/=run_1/00000000000000ab/4/blobs/0000000000000012".to_string(),
                "pre/fix/runs/=run_1/00000000000000ab/cost/0000000002".to_string(),
                format!(
                    "pre/fix/rechecks/00000000000003600000/{}_=run_1.00000000000000ab",
                    u64::MAX - 3_600_001
                ),
                "pre/fix/tombstones/=run_1.00000000000000ab".to_string(),
            ]
        );
    }

    #[test]
    fn due_entries_tagged_or_not_round_trip_sort_by_due_time_and_foreign_names_do_not_parse() {
        let layout = Layout::new("p");
        let (id, inc) = (run("A-b_C"), Incarnation::random());
        for due_ms in [0, 1, 3_599_999, 3_600_000, u64::MAX] {
            for tag in [None, Some(0), Some(0xfeed), Some(u64::MAX)] {
                let path = layout.due_entry(&id, inc, due_ms, tag);
                let hour = due_ms - due_ms % MARKER_HOUR_MS;
                assert_eq!(
                    parse_due_entry(&path),
                    Some(DueEntryName {
                        hour,
                        run_id: id.clone(),
                        incarnation: inc,
                        due_ms,
                        tag
                    })
                );
            }
        }
        // Due time first, tagged or not; within a millisecond, tagged first.
        let in_order = [
            layout.due_entry(&id, inc, 5, Some(u64::MAX)),
            layout.due_entry(&run("z"), inc, 5, None),
            layout.due_entry(&run("a"), inc, 6, Some(0)),
            layout.due_entry(&id, inc, 6, None),
            layout.due_entry(&run("a"), inc, 7, None),
            layout.due_entry(&run("a"), inc, 8, Some(1)),
        ];
        assert!(in_order.is_sorted_by(|a, b| a.as_ref() < b.as_ref()));
        let hour = layout.due_hour(0);
        for foreign in [
            "x",
            "00000000000000000001_r",
            "00000000000003600000_r.zz",
            "00000000000000000001-00000000000000001/r.0000000000000001",
            "00000000000000000001-000000000000000G/r.0000000000000001",
            "00000000000000000001-000000000000000A/r.0000000000000001",
            "00000000000000000001_0000000000000001/r.0000000000000001",
            "00000000000003600000-0000000000000001/r.0000000000000001",
            "00000000000000000001-0000000000000001/r.zz",
        ] {
            assert_eq!(
                parse_due_entry(&hour.clone().join(foreign)),
                None,
                "{foreign}"
            );
        }
    }

    #[test]
    fn shared_expiry_markers_round_trip_and_foreign_names_do_not_parse() {
        let layout = Layout::new("p");
        let digest = "0123456789abcdef".repeat(4);
        let longest = "n".repeat(MAX_SHARED_NAMESPACE_LEN);
        for namespace in ["default", "a", "llm_v-2", longest.as_str()] {
            for expires_ms in [0, 1, 3_599_999, 3_600_000, u64::MAX / 2] {
                let path = layout.shared_expiry(namespace, &digest, expires_ms, u64::MAX);
                let hour = expires_ms - expires_ms % MARKER_HOUR_MS;
                assert_eq!(
                    parse_shared_expiry(&path),
                    Some(shared::SharedExpiryName {
                        hour,
                        namespace: namespace.to_owned(),
                        digest: digest.clone(),
                        expires_ms,
                        token: u64::MAX,
                    })
                );
                assert!(path.filename().unwrap().len() <= 255 - 21, "{path}");
            }
        }
        // Later expiries sort first, as markers do.
        let (late, early) = (
            layout.shared_expiry("a", &digest, 7, 1),
            layout.shared_expiry("a", &digest, 6, 0),
        );
        assert!(late.as_ref() < early.as_ref());
        let hour = layout.shared_expiry_hour(0);
        let inverted = u64::MAX - 5;
        for foreign in [
            "x".to_string(),
            format!("{inverted}_a"),
            format!("{inverted}_a.{digest}"),
            format!("{inverted}_a.{digest}.{}", "F".repeat(16)),
            format!("{inverted}_a.{digest}.{}", "f".repeat(15)),
            format!("{inverted}_A.{digest}.{}", "0".repeat(16)),
            format!("{inverted}_a.{}.{}", &digest[1..], "0".repeat(16)),
            format!("{inverted}_a.{}.{}", digest.to_uppercase(), "0".repeat(16)),
            format!("{inverted}_.{digest}.{}", "0".repeat(16)),
        ] {
            assert_eq!(
                parse_shared_expiry(&hour.clone().join(foreign.as_str())),
                None,
                "{foreign}"
            );
        }
        for bad in [
            "",
            "A",
            "a.b",
            "a/b",
            &"n".repeat(MAX_SHARED_NAMESPACE_LEN + 1),
        ] {
            assert!(!is_shared_namespace(bad), "{bad:?}");
        }
    }

    #[test]
    fn every_status_has_its_pinned_hint_folder() {
        let layout = Layout::new("p");
        let folders = RunStatus::ALL.map(|s| layout.status_folder(s.path_segment()).to_string());
        assert_eq!(
            folders,
            ["Pending", "Running", "Completed", "Failed", "Cancelled"]
                .map(|s| format!("p/runs-by-status/{s}"))
        );
    }

    /// What `KeyUsage` counts as never sealed: every object memo writes
    /// unencrypted by design, at every place the layout gives it, and none
    /// of the objects it seals, even of runs (and namespaces) named like
    /// those places' folders.
    #[test]
    fn never_sealed_objects_are_told_by_their_place_in_the_layout() {
        let inc = Incarnation::from_u64(0xab);
        for prefix in [
            "p",
            "a/b",
            "terminals",
            "runs-by-status",
            "due",
            "shared/expiry",
        ] {
            let layout = Layout::new(prefix);
            let id = run("r-1");
            let never = [
                layout.marker(TERMINALS, &id, inc, 7_200_123),
                layout.marker(RECHECKS, &id, inc, 7_200_123),
                layout.marker(TERMINALS, &id, Incarnation::STANDALONE, 5),
                layout.due_entry(&id, inc, 7_200_123, None),
                layout.due_entry(&id, inc, 7_200_123, Some(0xfeed)),
                layout.status_hint("Completed", &id, inc),
                layout.incarnation_tombstone(&id, inc),
                layout.shared_expiry("ns", &"d".repeat(64), 7_200_123, 0xbeef),
                probe(layout.prefix(), 0x1234),
            ];
            for path in &never {
                assert!(never_sealed(path), "{path}");
            }
            for name in [
                "r-1",
                "terminals",
                "rechecks",
                "due",
                "runs-by-status",
                "tombstones",
                "shared",
                "expiry",
                "probes",
                "Completed",
            ] {
                let id = run(name);
                let digest = "d".repeat(64);
                let sealed = [
                    layout.entry(MEMOS, &id, inc, 0, &digest),
                    layout.entry(STEP_OUTPUTS, &id, inc, 3, &digest),
                    layout.blob(&id, inc, 0, 0x1234),
                    layout.run_pointer(&id),
                    layout.incarnation_record(&id, inc),
                    layout.log_entry(&id, inc, 4),
                    layout.checkpoint(&id, inc, 4),
                    layout.delta(&id, inc, 4),
                    layout.attempt_cost(&id, inc, 1),
                    layout.shared_entries(name).join(digest.as_str()),
                ];
                for path in &sealed {
                    assert!(!never_sealed(path), "{path}");
                }
            }
        }
    }

    #[test]
    fn markers_round_trip_and_foreign_names_do_not_parse() {
        let layout = Layout::new("p");
        let (id, inc) = (run("A-b_C"), Incarnation::random());
        for at_ms in [0, 1, 3_599_999, 3_600_000, u64::MAX / 2] {
            let path = layout.marker(TERMINALS, &id, inc, at_ms);
            let hour = at_ms - at_ms % MARKER_HOUR_MS;
            assert_eq!(parse_marker(&path), Some((hour, id.clone(), inc, at_ms)));
        }
        let hour = layout.marker_hour(TERMINALS, 0);
        for foreign in ["x", "00000000000000000001_r", "18446744073709551614_r.zz"] {
            assert_eq!(parse_marker(&hour.clone().join(foreign)), None, "{foreign}");
        }
    }
}
