//! One module per command.

mod cancel;
mod cost;
mod export;
mod forget;
mod keys;
pub(crate) mod markers;
mod probe;
mod rewrap;
mod runs;
mod show;
mod signal;
mod sweep;
mod waits;

pub(crate) use cancel::{cancel, request_cancel};
pub(crate) use export::{Selection, export};
pub(crate) use forget::forget;
pub(crate) use keys::keys;
pub(crate) use markers::{MarkersPage, markers};
pub(crate) use probe::probe;
pub(crate) use rewrap::rewrap;
pub(crate) use runs::{Listing, Page, Sort, runs, runs_page};
pub(crate) use show::show;
pub(crate) use signal::{send_signal, signal};
pub(crate) use sweep::{sweep, sweeper};

use anyhow::Context as _;
use memo_runtime::RunId;
use memo_runtime::runtime_store::{RunRecord, RuntimeStore};

use crate::store::Store;

/// Parses a run id given on the command line.
fn run_id(run: &str) -> anyhow::Result<RunId> {
    RunId::new(run).context("not a run id")
}

/// Loads run `run_id`; an error if it does not exist.
async fn existing_run(store: &Store, run_id: &RunId) -> anyhow::Result<RunRecord> {
    store
        .runs
        .load_run(run_id)
        .await
        .with_context(|| format!("cannot load run {run_id} from {}", store.url))?
        .with_context(|| {
            format!(
                "run {run_id} not found in {} (runtime store at {:?}; see --runs-prefix)",
                store.url,
                store.runs.prefix().as_ref()
            )
        })
}
