//! `memoctl rewrap`: wrap every data key again with the current version of
//! the key-encryption key.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::json;

use crate::output::{errln, outln, print_json};
use crate::store::Store;

/// Rewraps every data key of the store's key store with the current
/// version of its key-encryption key (the highest in the key file that is
/// not staged), rewriting the key store only, never the data: afterwards
/// older versions can be removed from the key file, unless a process made
/// keys with one of them while this ran (then it says so and fails: that
/// process does not have the current version yet).
pub(crate) async fn rewrap(store: &Store, json: bool) -> anyhow::Result<ExitCode> {
    let Some(keys) = store.memo.seal().data_keys() else {
        bail!(
            "{} has no per-run data keys to rewrap: open it with --option data_key_store=URL \
             --option key_encryption_key_file=PATH",
            store.url
        );
    };
    let report = keys
        .rewrap()
        .await
        .context("the rewrap stopped; the keys before the failure are rewrapped, run it again")?;
    if json {
        print_json(&json!({
            "rewrapped": report.rewrapped,
            "already_current": report.current,
            "written_meanwhile": report.written_meanwhile,
        }));
    } else {
        outln!(
            "{} data key(s) rewrapped with the current key-encryption key, {} already were",
            report.rewrapped,
            report.current
        );
    }
    if report.written_meanwhile > 0 {
        errln!(
            "{} of them were made with an older key-encryption key while the rewrap ran: a \
             process still wraps with it. Keep the older versions in every key file until every \
             process has the current one, then run `memoctl rewrap` again.",
            report.written_meanwhile
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
