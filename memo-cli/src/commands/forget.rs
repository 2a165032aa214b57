//! `memoctl forget RUN`: crypto-shred a run, then clear what is left of it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use memo_runtime::runtime_store::RuntimeStore as _;
use serde_json::json;

use super::run_id;
use crate::output::{outln, print_json};
use crate::store::Store;

/// Forgets run `run`: deletes its current incarnation's memo entries and
/// runtime records, as `RetentionSweeper::delete_run` does, then every data
/// key of its id (each incarnation's, and its standalone memos'), so that
/// none of its data can be read again, wherever a copy of it is kept
/// (bucket versions, lifecycle rules, a copy of the bucket); then the
/// entries its other incarnations left. An open run is refused (cancel it
/// first), and so is a store without per-run data keys (the
/// `data_key_store` and `key_encryption_key_file` options).
pub(crate) async fn forget(store: &Store, run: &str, json: bool) -> anyhow::Result<ExitCode> {
    let run_id = run_id(run)?;
    let Some(keys) = store.memo.seal().data_keys() else {
        bail!(
            "{} has no per-run data keys, so its data cannot be forgotten by deleting a key: \
             open it with --option data_key_store=URL --option key_encryption_key_file=PATH",
            store.url
        );
    };
    let record = store
        .runs
        .load_run(&run_id)
        .await
        .with_context(|| format!("cannot load run {run_id} from {}", store.url))?;
    if let Some(record) = &record
        && !record.status.is_terminal()
    {
        bail!(
            "run {run_id} is {}: cancel it first (memoctl cancel), then forget it",
            record.status
        );
    }
    // Cleared first: deleting a run's runtime records reads its pointer (so
    // that a later run of the id is never deleted), which a forgotten key
    // makes unreadable. If clearing fails, nothing is forgotten yet: run
    // the command again.
    let runtime_deleted = match &record {
        Some(_) => super::sweeper(store, Duration::ZERO, false)
            .delete_run(&run_id)
            .await
            .with_context(|| format!("cannot clear run {run_id}; nothing is forgotten yet"))?,
        None => false,
    };
    keys.forget_run(&run_id)
        .await
        .with_context(|| format!("cannot delete the data keys of run {run_id}"))?;
    // From here on none of the run can be read. Its earlier incarnations'
    // and standalone entries go too: all are unreadable now.
    store
        .memo
        .clear_memos_for_run(&run_id)
        .await
        .with_context(|| format!("run {run_id} is forgotten, but clearing its entries failed"))?;
    if json {
        print_json(&json!({
            "run_id": run_id.as_str(),
            "forgotten": true,
            "runtime_run_deleted": runtime_deleted,
        }));
    } else {
        outln!(
            "forgot run {run_id}: its data keys are deleted, so none of its data can be read \
             again; its memo entries{} are cleared",
            if runtime_deleted {
                " and runtime records"
            } else {
                ""
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
