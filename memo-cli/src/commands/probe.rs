//! `memoctl probe`: does the store keep write-once creates?

use std::process::ExitCode;

use anyhow::Context as _;
use memo_runtime::store::probe_conditional_create;
use serde_json::json;

use crate::output::{outln, print_json};
use crate::store::Store;

/// Creates a probe object twice under the memo store's `probes/` folder and
/// checks that the second create is refused (then deletes the probe).
pub(crate) async fn probe(store: &Store, json: bool) -> anyhow::Result<ExitCode> {
    let prefix = store.memo.prefix();
    probe_conditional_create(store.objects.as_ref(), prefix)
        .await
        .with_context(|| format!("the conditional-create probe of {} failed", store.url))?;
    if json {
        print_json(&json!({ "store": store.url, "conditional_create": true }));
    } else {
        outln!(
            "ok: {} refuses a second conditional create (probed under {:?})",
            store.url,
            prefix.as_ref()
        );
    }
    Ok(ExitCode::SUCCESS)
}
