//! What a pass must know before it deletes something of a run its runtime
//! store does not hold (issue 20, item 11: an operator's sweep through a
//! runtime store at another prefix than the workers').
//!
//! A runtime store that holds nothing of a run's incarnation (no run of
//! its id, or another incarnation of it) is one of two things, which
//! nothing stored of that run tells apart: the workers' store, after a
//! deletion of the run finished there (what is left is its marker, or a
//! due-run entry, which a pass or a worker deletes later), or a store the
//! workers never wrote the run to (a mistyped or defaulted prefix), with
//! the run alive in theirs. So a pass deletes a run's memo entries, marker
//! or due-run entry only with a proof, for that run or for the store:
//!
//! - *for the run*: the runtime store holds the incarnation (its record,
//!   or remains of a deletion of it that stopped part way:
//!   [`RuntimeStore::holds_remains`]). The store then held that run, and
//!   the pass finishes its deletion there before the marker goes;
//! - *for the store* ([`RetentionSweeper::proves_store`]): the store holds
//!   an incarnation that this memo store names (the run of another
//!   expired marker, of a due-run entry, of memo entries
//!   [`RetentionSweeper::delete_run`] cleared, or a later run of a
//!   marker's id that has memo entries). Incarnations are drawn at
//!   random, so only a store a run was created in holds one: this is the
//!   runtime store of the memo store's workers (a deployment has one), and
//!   a run it holds nothing of was deleted there. A store at a mistyped
//!   prefix holds none, and proves nothing.
//!
//! A recheck of a run a pass deleted (the `recheck` module) asks the same
//! of its store before it drops the recheck marker: proved, or holding the
//! deletion's tombstone, which proves it.
//!
//! The store's proof is kept by the sweeper (and its clones) once found.
//! A pass meets it as it goes, and what it meets before the proof waits: a
//! marker whose run is left with nothing but its marker is checked again
//! at the end of the pass, a due-run entry of a run the store does not
//! hold is deleted at the end of the index's listing. Both cost no request more in a pass
//! that finds the proof (the loads it makes anyway prove the store); a
//! deferred marker costs its checks twice, and a marker whose id holds a
//! later run costs a listing of that run's entries while the store is not
//! proved yet. Without the proof they are
//! kept: the marker as a failure that says why, the entry with a warning.
//!
//! What is left unguarded: a runtime store that holds some of the memo
//! store's runs but not the others (two deployments sharing a memo store,
//! or a prefix the workers moved away from with runs left in it) is taken
//! for the workers' one.
//!
//! [`RuntimeStore::holds_remains`]: crate::runtime_store::RuntimeStore::holds_remains

use std::sync::atomic::Ordering;

use super::RetentionSweeper;
use crate::error::{Error, Result};
use crate::memo::EntryFolders;
use crate::retention::TerminalMarker;
use crate::run_id::{Incarnation, RunId};

/// What the runtime store holds of a marker's run.
pub(super) enum Found {
    /// The marker's incarnation, terminal.
    Terminal,
    /// Another incarnation of the id: this one.
    Other(Incarnation),
    /// No run of the id.
    Nothing,
    /// No runtime store is configured.
    Unchecked,
}

/// Whether a pass may go on with a marker whose run the runtime store
/// does not hold.
pub(super) enum Deleted {
    /// It may: the runtime store holds remains of the run, or nothing is
    /// left of it and the store is proved the workers'.
    Here,
    /// Nothing is left of the run but its marker, and the store is not
    /// proved the workers' (yet): the marker is kept.
    Unproven,
}

impl RetentionSweeper {
    /// Whether this sweeper's runtime store is proved to be the one this
    /// memo store's runs were created in (see the module's rustdoc).
    pub(super) fn proves_store(&self) -> bool {
        self.config.proven.load(Ordering::Acquire)
    }

    /// Records that the runtime store held an incarnation this memo store
    /// names.
    pub(super) fn store_proved(&self) {
        self.config.proven.store(true, Ordering::Release);
    }

    /// What the runtime store (if any) holds of the marker's run; an error
    /// if it holds the marker's incarnation in a status that is not
    /// terminal, so that a stray marker can never clear a live run's
    /// entries. A later run of the same id (another incarnation) is not the
    /// marker's run: in the workers' store, that the id was used again
    /// proves the marker's run was deleted there (in a store that holds the
    /// id by chance and never held the marker's run it proves nothing: the
    /// pass goes on only once its store is proved the workers'). If that
    /// later run has ended, it is given its marker (a no-op if it has one): `Runtime::recover` counts
    /// an id with a marker of any incarnation as marked, so a later run
    /// whose own attempt stopped before marking it would otherwise be left
    /// unmarked, and never swept, once this marker is gone. The marker's
    /// incarnation held, terminal or not, proves the store.
    pub(super) async fn check_terminal(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Found> {
        let Some(store) = &self.config.runtime_store else {
            return Ok(Found::Unchecked);
        };
        let run = match store.load_run(run_id).await? {
            None => return Ok(Found::Nothing),
            Some(run) if run.incarnation != incarnation => {
                if let Some(terminal_at_ms) = run.terminal_at_ms.filter(|_| !self.config.dry_run) {
                    let later = TerminalMarker {
                        run_id: run_id.clone(),
                        terminal_at_ms,
                        incarnation: run.incarnation,
                    };
                    self.config.memo_store.markers().write(&later).await?;
                }
                return Ok(Found::Other(run.incarnation));
            }
            Some(run) => run,
        };
        self.store_proved();
        if run.status.is_terminal() {
            return Ok(Found::Terminal);
        }
        Err(Error::Conflict {
            what: format!("run {run_id}"),
            reason: format!(
                "it has an expired terminal marker but its status is {}; \
                 nothing was deleted and the marker is kept",
                run.status
            ),
        })
    }

    /// Whether a pass may go on with a marker whose id the runtime store
    /// holds another incarnation of (`later`): once the store is proved
    /// the workers', or if the memo store has entries of `later` (one
    /// listing, only while the store is not proved): the store then holds
    /// an incarnation the memo store names, and proves itself.
    pub(super) async fn check_used_again(
        &self,
        run_id: &RunId,
        later: Incarnation,
    ) -> Result<bool> {
        if self.proves_store() {
            return Ok(true);
        }
        let named = self
            .config
            .memo_store
            .has_incarnation_entries(run_id, later, EntryFolders::WithStepOutputs)
            .await?;
        if named {
            self.store_proved();
        }
        Ok(named)
    }

    /// A marker whose run the runtime store does not hold at all is one of
    /// three things: a deletion of the run that stopped part way (the
    /// runtime store still holds objects of the incarnation: stored proof
    /// that it held the run); a deletion that finished in the runtime store
    /// and stopped before the marker (nothing of the run is left but the
    /// marker: what a pass that stopped there, or
    /// [`RetentionSweeper::delete_run`], leaves); or a runtime store that is
    /// not the one the workers write to (a prefix mistyped), with the run
    /// alive elsewhere, its memo entries there or already cleared by a
    /// pass of the workers' own that is deleting it right now.
    ///
    /// With remains the pass goes on: it clears the memo entries, then
    /// finishes the runtime store's deletion (its remains go after the
    /// entries, so a failure keeps the proof for the next pass). With
    /// nothing left, it goes on only if the store is proved the workers'
    /// ([`Deleted::Unproven`] otherwise: the pass checks the marker again
    /// once it is, and keeps it if it never is): a store that never held
    /// the run must not drop the marker that leads the workers' passes to
    /// it. Memo or step-output entries left and no remains is the third
    /// case as far as anyone can tell, even in the workers' store: an
    /// error, and nothing of it is deleted.
    ///
    /// Entries and no remains is also what a stale attempt leaves if its
    /// memo entry lands after the deletion's clear of the entries and the
    /// attempt dies before it takes the entry back, while the marker is
    /// still there (the pass stopped, or the marker's delete failed): the
    /// recheck the deletion left clears the entry (see the `recheck`
    /// module), and the pass after that goes on.
    pub(super) async fn check_deleted_here(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Deleted> {
        let config = &*self.config;
        // Both folders, whatever the pass's clears list: a proof is asked
        // of a marker whose run is not found, seldom, and must not miss an
        // entry.
        let has_entries = config
            .memo_store
            .has_incarnation_entries(run_id, incarnation, EntryFolders::WithStepOutputs)
            .await?;
        if !has_entries && self.proves_store() {
            return Ok(Deleted::Here);
        }
        if let Some(store) = &config.runtime_store
            && store.holds_remains(run_id, incarnation).await?
        {
            self.store_proved();
            return Ok(Deleted::Here);
        }
        if !has_entries {
            return Ok(Deleted::Unproven);
        }
        Err(Error::Conflict {
            what: format!("run {run_id}"),
            reason: "it has an expired terminal marker and memo entries, but the runtime \
                     store does not hold it; nothing was deleted and the marker is kept \
                     (is the runtime store's prefix the one the workers use?)"
                .into(),
        })
    }

    /// Whether this pass's runtime store is proved the one that deleted
    /// the incarnation, before its recheck (the `recheck` module): proved
    /// already, or holding the deletion's trace (a tombstone, which proves
    /// the store then). A store that holds no trace and is not proved may
    /// be one at another prefix (seed 30657 of session 47's deployment
    /// survey: an operator's sweep with another runtime-store prefix
    /// rechecked a run the workers' sweep had deleted, cleared nothing of
    /// it there, and deleted the recheck marker, so the record a stale
    /// attempt had put back in the workers' store, before it died, was
    /// left for good); or the workers' own, whose tombstone another
    /// sweeper's recheck of the same marker forgot since this pass listed
    /// it: `false`, and the pass looks again at its end
    /// ([`unrechecked`]). One `HEAD` a recheck, made only until the store
    /// is proved.
    pub(super) async fn deleted_by_this_store(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<bool> {
        let Some(store) = &self.config.runtime_store else {
            return Ok(true);
        };
        if self.proves_store() {
            return Ok(true);
        }
        match store.holds_deletion(run_id, incarnation).await? {
            Some(true) => {
                self.store_proved();
                Ok(true)
            }
            None => Ok(true),
            Some(false) => Ok(false),
        }
    }
}

/// The failure a recheck marker is reported with when its incarnation's
/// deletion is still unproven at the end of the pass and the marker is
/// still there (no other sweeper finished it).
pub(super) fn unrechecked(run_id: &RunId, incarnation: Incarnation) -> Error {
    Error::Conflict {
        what: format!("run {run_id}"),
        reason: format!(
            "its recheck marker names incarnation {incarnation}, of which the runtime \
             store holds no deletion, and the store is not proved the workers' (is its \
             prefix theirs?); nothing was rechecked and the marker is kept"
        ),
    }
}

/// The failure a marker left unproven to the end of its pass is reported
/// with.
pub(super) fn unproven(run_id: &RunId) -> Error {
    Error::Conflict {
        what: format!("run {run_id}"),
        reason: "it has an expired terminal marker, the runtime store holds nothing of \
                 its incarnation, and no run this pass met (it never held this one, or \
                 its deletion finished there); nothing was deleted and the marker is \
                 kept (is the runtime store's prefix the one the workers use?)"
            .into(),
    }
}
