//! The cost ledger in object storage: the entry of the attempt that ended
//! the run in its terminal log entry ([`Commit::cost`]), and one record per
//! other attempt (one that suspended or stopped) in the incarnation's
//! `cost/` folder (see [`AttemptCost`] for why), written once and deleted
//! with the rest of the incarnation's folder.
//!
//! [`Commit::cost`]: crate::runtime_store::Commit::cost

use object_store::path::Path;

use super::ObjectStoreRuntimeStore;
use super::client::Owner;
use crate::codec;
use crate::error::{Error, Result};
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::AttemptCost;
use crate::write_once::Created;

/// How many `DELETE`s a record taken back gets.
const TAKE_BACK_ATTEMPTS: u32 = 3;

impl ObjectStoreRuntimeStore {
    /// One create and a `GET` of the run's pointer (and a `GET` if the
    /// attempt's record exists: the first is kept).
    ///
    /// The attempt writing it may be a stale one: paused past its lease,
    /// while another attempt took the run over, ended it, and a deletion
    /// removed the incarnation (its marker too, if a sweep did it). Its
    /// record would then land in a folder no deletion lists again. So the
    /// writer reads the pointer after its create, as a log append does, and
    /// takes its record back if the incarnation is not current: a deletion
    /// removes the pointer before it lists the folder, so a record written
    /// before a pointer read that still names the incarnation is listed by
    /// any deletion to come; a read that fails takes the record back too
    /// (the ledger loses it, as it loses one whose write fails); a
    /// `DELETE` of a record taken back that fails is tried again (seed 9217
    /// of the deployment world). A writer that dies between the two, or
    /// whose every `DELETE` fails, leaves the record (as it leaves a status
    /// hint).
    pub(super) async fn write_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> Result<()> {
        let path = self
            .client
            .layout()
            .attempt_cost(run_id, incarnation, cost.attempt);
        let bytes = codec::encode_value("an attempt's cost", cost)?;
        let created = self
            .client
            .create(
                &path,
                &bytes,
                Limit::RECORD,
                Owner::Incarnation(run_id, incarnation),
            )
            .await?;
        let Created::Ours(_) = created else {
            return Ok(());
        };
        match self.runs.is_current(run_id, incarnation).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.take_back(path).await?;
                Err(Error::Conflict {
                    what: format!("run {run_id}"),
                    reason: "the run was deleted while the attempt's cost was recorded; \
                             the record was taken back"
                        .into(),
                })
            }
            // Whether the run is still there is unknown: the record goes
            // too, lost to the ledger as one whose write failed would be,
            // rather than maybe left where no deletion looks.
            Err(error) => {
                self.take_back(path).await?;
                Err(error)
            }
        }
    }

    /// Deletes a record taken back, trying again after a failure (up to
    /// [`TAKE_BACK_ATTEMPTS`] `DELETE`s): no one else will, as no deletion
    /// lists the folder again.
    async fn take_back(&self, path: Path) -> Result<()> {
        super::again::tried(TAKE_BACK_ATTEMPTS, || {
            self.client.delete_all(vec![path.clone()])
        })
        .await
    }

    /// A read of the run (for the entry its terminal commit carried), a
    /// listing of the incarnation's `cost/` folder and a `GET` per attempt
    /// recorded there.
    pub(super) async fn read_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        let ending = self
            .runs
            .read(run_id, |state| {
                let current = state.record().incarnation == incarnation;
                state.ending_cost().filter(|_| current).cloned()
            })
            .await?
            .flatten();
        let folder = self.client.layout().cost_folder(run_id, incarnation);
        let listed = self.client.list(&folder).await?;
        let mut costs = Vec::with_capacity(listed.len());
        for meta in listed {
            let path = meta.location;
            // Deleted since the listing: the run is being deleted.
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
            costs.push(codec::decode_record::<AttemptCost>(
                "an attempt's cost",
                &path,
                &bytes,
            )?);
        }
        // In attempt order (LocalFileSystem lists in no particular order).
        Ok(AttemptCost::ledger(costs, ending.as_ref()))
    }
}
