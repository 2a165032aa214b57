//! The cost ledger in object storage: one record per attempt in the
//! incarnation's `cost/` folder (see [`AttemptCost`] for why), written once
//! and deleted with the rest of the incarnation's folder.

use super::ObjectStoreRuntimeStore;
use super::client::Owner;
use crate::codec;
use crate::error::Result;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::AttemptCost;

impl ObjectStoreRuntimeStore {
    /// One create (and a `GET` if the attempt's record exists: the first
    /// is kept).
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
        self.client
            .create(
                &path,
                &bytes,
                Limit::RECORD,
                Owner::Incarnation(run_id, incarnation),
            )
            .await?;
        Ok(())
    }

    /// A listing of the incarnation's `cost/` folder and a `GET` per
    /// attempt recorded.
    pub(super) async fn read_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
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
        // LocalFileSystem lists in no particular order.
        costs.sort_by_key(|cost| cost.attempt);
        Ok(costs)
    }
}
