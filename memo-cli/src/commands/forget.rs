//! `memoctl forget RUN`: crypto-shred a run, then clear what is left of it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use memo_runtime::runtime_store::RuntimeStore as _;
use serde_json::json;

use super::run_id;
use crate::output::{outln, print_json};
use crate::store::Store;

/// Forgets run `run`: deletes every data key of its id (each incarnation's,
/// and its standalone memos'), so that none of its data can be read again,
/// wherever a copy of it is kept (bucket versions, lifecycle rules, a copy
/// of the bucket); then deletes its memo entries and runtime records, as
/// `RetentionSweeper::delete_run` does. An open run is refused (cancel it
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
    let keys_deleted = keys
        .forget_run(&run_id)
        .await
        .with_context(|| format!("cannot delete the data keys of run {run_id}"))?;
    // The run is unreadable from here on; what follows only frees the space.
    let runtime_deleted = match &record {
        Some(_) => super::sweeper(store, Duration::ZERO, false)
            .delete_run(&run_id)
            .await
            .with_context(|| format!("run {run_id} is forgotten, but clearing it failed"))?,
        None => false,
    };
    // Every incarnation's entries (and its standalone memos'): all are
    // unreadable now.
    let entries_deleted = store
        .memo
        .clear_memos_for_run(&run_id)
        .await
        .with_context(|| format!("run {run_id} is forgotten, but clearing its entries failed"))?;
    if json {
        print_json(&json!({
            "run_id": run_id.as_str(),
            "data_keys_deleted": keys_deleted,
            "entries_deleted": entries_deleted,
            "runtime_run_deleted": runtime_deleted,
        }));
    } else {
        outln!(
            "forgot run {run_id}: {keys_deleted} data key(s) deleted, so none of its data can be \
             read again; {entries_deleted} memo entries and {} deleted",
            if runtime_deleted {
                "its runtime records"
            } else {
                "no runtime records"
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
