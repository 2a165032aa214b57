//! A creator giving up the incarnation it created, once its record stood
//! and the pointer did not name it: or keeping it, if a reader restored it
//! and wrote to it meanwhile.

use std::future::Future;

use object_store::path::Path;

use super::{Creation, Recorded, RunPointer};
use crate::error::Result;
use crate::run_id::{Incarnation, RunId};

/// How many times each request of a give-up is tried. No one else takes a
/// given-up incarnation back: a give-up that stops at a failed request
/// leaves it as it stood, and if a reader restored its pointer meanwhile
/// (the incarnation may have been run and deleted while its creator
/// stalled), it is current again, for ever (seed 970 of session 25: the
/// record's delete was applied, then reported failed, and the restored
/// pointer stayed, a run with the old input that no delivery of the id's
/// new input could ever replace).
const GIVE_UP_ATTEMPTS: u32 = 3;

/// `request`, tried again after a failure, up to [`GIVE_UP_ATTEMPTS`]
/// times. Every request of a give-up can be repeated: deletes and reads
/// are, a record's create finds its own bytes (`Created::Same`), and a
/// vacate reads the pointer again (finding it vacated by its first try).
pub(super) async fn tried<T, F: Future<Output = Result<T>>>(
    request: impl FnMut() -> F,
) -> Result<T> {
    super::super::again::tried(GIVE_UP_ATTEMPTS, request).await
}

impl RunPointer {
    /// Gives up the incarnation `creation`, whose record (`record`) was
    /// just written and found with the pointer not naming it; unless a
    /// reader restored the pointer from that record meanwhile and wrote to
    /// the run, which is then kept.
    ///
    /// The creator cannot tell why its pointer is missing. The incarnation
    /// may have been run and deleted while its creator stalled before its
    /// record (seeds 3311 and 1215 of session 23), and its record then
    /// brings a deleted run back: a reader that finds the pointer missing
    /// between our create of the record and its delete restores the pointer
    /// from it (its check of the record passes while ours stands). So the
    /// incarnation is removed as a deletion removes it: the record, the
    /// pointer vacated if it names the incarnation (a restorer creates the
    /// pointer and then reads the record, we delete the record and then
    /// read the pointer, so a restore that saw the record is seen here),
    /// and the record once more, for a reader that wrote it back meanwhile.
    ///
    /// Or a stale deletion of an earlier run of the id removed the pointer
    /// of a run that is new and whole (seed 1778 of session 24), and a
    /// reader that restored it may have acted on it: started it, given it a
    /// signal it acknowledged. Removing it then would lose what was
    /// acknowledged and leave the log entries with nothing naming them. So
    /// a restored incarnation whose log has an entry is kept (its record
    /// written back, its pointer restored) and the creator answers with it
    /// as it is now. The order makes every write seen: a writer creates its
    /// entry and then reads the pointer, and counts the entry as committed
    /// only if the pointer names the incarnation. We look for log entry 0
    /// before vacating the pointer (found: nothing is changed) and once
    /// more after: a writer whose check passed read the pointer before our
    /// update, so its entry (and so entry 0, as entries are created in
    /// order) was created before our second look. A writer whose check
    /// comes after our update finds the pointer vacated and the record
    /// gone and takes its entry back; if we saw the entry before that
    /// take-back, the run is kept without it, as a run nothing was
    /// committed to. The update is conditional on the version read (see
    /// `RunPointer::vacate`), but the look after it is still needed, for
    /// writers that checked before it.
    ///
    /// A new incarnation whose pointer still names it is given up the same
    /// way when another incarnation's record stands beside its own
    /// ([`record_new`](RunPointer::record_new)): read as if restored, it
    /// is kept if a reader already wrote to it (a reader that found its
    /// pointer in the round trips of the creator's check, and started it:
    /// then both runs stand, a window left open), and otherwise its pointer
    /// is vacated and the other run's restored from its record.
    ///
    /// What is left: a deleted incarnation that a reader restored is kept
    /// if its log has entry 0 (the reader ran it again, or a deletion that
    /// stopped part way left it), where before it was removed; and a
    /// creation of another incarnation of the id in the round trip between
    /// our pointer's vacate and our restore makes the restore fail: the run
    /// is then given up, and what was written to it is lost.
    pub(super) async fn give_up(
        &self,
        run_id: &RunId,
        creation: &Creation,
        bytes: &[u8],
        record: &Path,
    ) -> Result<Recorded> {
        let incarnation = creation.incarnation;
        let delete = |path: &Path| {
            let path = path.clone();
            tried(move || self.client.delete_all(vec![path.clone()]))
        };
        delete(record).await?;
        let restored = tried(|| self.read_pointer(run_id))
            .await?
            .is_some_and(|(c, _)| c.incarnation == incarnation);
        if restored {
            if self.written(run_id, incarnation).await? {
                return self.keep(run_id, creation, bytes).await;
            }
            tried(|| self.vacate(run_id, incarnation, None)).await?;
        }
        delete(record).await?;
        if restored && self.written(run_id, incarnation).await? {
            return self.keep(run_id, creation, bytes).await;
        }
        // The other run's pointer a stale delete removed (the rival our
        // check by listing found), or a later run's our delete hit on a
        // store with no conditional update, is restored.
        tried(|| self.current(run_id)).await?;
        Ok(Recorded::GivenUp)
    }

    /// Whether incarnation `incarnation` has log entry 0: whether anyone
    /// wrote to it. One `HEAD` (more after a failure).
    async fn written(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        let entry = self.client.layout().log_entry(run_id, incarnation, 0);
        tried(|| self.client.exists(&entry)).await
    }

    /// Keeps the incarnation `creation` that [`give_up`](Self::give_up)
    /// found restored and written to: its record written back, then the
    /// pointer read (and restored from the record if it is missing). If
    /// another incarnation is current by then, ours is removed after all.
    async fn keep(&self, run_id: &RunId, creation: &Creation, bytes: &[u8]) -> Result<Recorded> {
        let incarnation = creation.incarnation;
        tried(|| self.create_record(run_id, creation, bytes)).await?;
        let current = tried(|| self.current(run_id)).await?;
        if current.is_some_and(|c| c.incarnation == incarnation) {
            tracing::warn!(%run_id, %incarnation,
                "a run restored and written to while its creator stalled is kept");
            return Ok(Recorded::Restored);
        }
        tried(|| self.remove(run_id, incarnation, None)).await?;
        Ok(Recorded::GivenUp)
    }
}
