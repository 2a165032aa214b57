//! `memoctl markers`: which runs ended when, and which expired.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;

use crate::output::{self, Table, duration, now_ms, print_json, time};
use crate::store::Store;

/// Lists terminal markers, oldest first: all of them, or (`expired`) only
/// those older than `retention`, which a sweep would clear now.
pub(crate) async fn markers(
    store: &Store,
    expired: bool,
    retention: Duration,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let now = now_ms();
    let cutoff = now.saturating_sub(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX));
    let listed = if expired {
        store.memo.markers().list_expired(cutoff).await
    } else {
        store.memo.markers().list().await
    };
    let mut markers =
        listed.with_context(|| format!("cannot list terminal markers in {}", store.url))?;
    markers.sort_by(|a, b| (a.terminal_at_ms, &a.run_id).cmp(&(b.terminal_at_ms, &b.run_id)));
    // Expired is what a sweep uses: terminal strictly before the cutoff.
    let is_expired = |at: u64| at < cutoff;
    if json {
        print_json(&json!(
            markers
                .iter()
                .map(|m| json!({
                    "run_id": m.run_id.as_str(),
                    "incarnation": m.incarnation.to_string(),
                    "terminal_at_ms": m.terminal_at_ms,
                    "expired": is_expired(m.terminal_at_ms),
                }))
                .collect::<Vec<_>>()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&["RUN", "INCARNATION", "ENDED", "AGE", "EXPIRED"]);
    for m in &markers {
        let expired = is_expired(m.terminal_at_ms);
        table.row(vec![
            m.run_id.to_string(),
            m.incarnation.to_string(),
            time(m.terminal_at_ms),
            duration(now.saturating_sub(m.terminal_at_ms)),
            if expired { "yes" } else { "no" }.into(),
        ]);
    }
    let retention = output::retention(retention);
    table.print_or(&if expired {
        format!("no markers older than the retention of {retention}")
    } else {
        "no terminal markers".into()
    });
    Ok(ExitCode::SUCCESS)
}
