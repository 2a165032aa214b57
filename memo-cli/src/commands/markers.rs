//! `memoctl markers`: which runs ended when, and which expired.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use memo_runtime::retention::TerminalMarker;
use memo_runtime::{Incarnation, RunId};
use serde_json::json;

use crate::output::{self, Table, duration, now_ms, outln, print_json, time};
use crate::store::Store;

/// Which page of markers `memoctl markers --limit` lists.
pub(crate) struct MarkersPage<'a> {
    /// The cursor: the last marker of the page before, as printed
    /// ([`cursor`]).
    pub(crate) after: Option<&'a str>,
    pub(crate) limit: usize,
}

/// Lists terminal markers, oldest first (by time, then run id and
/// incarnation): all of them, or (`expired`) only those older than
/// `retention`, which a sweep would clear now. With `page`, lists one page
/// of them (through [`Markers::expired_page`], which lists the hour
/// partitions from the cursor's on, as far as the page goes) and prints
/// the next page's cursor.
///
/// [`Markers::expired_page`]: memo_runtime::retention::Markers::expired_page
pub(crate) async fn markers(
    store: &Store,
    expired: bool,
    retention: Duration,
    page: Option<MarkersPage<'_>>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let now = now_ms();
    let cutoff = now.saturating_sub(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX));
    let (markers, next) = match page {
        Some(MarkersPage { after, limit }) => {
            let after = after.map(parse_cursor).transpose()?;
            // Every marker ended before the end of time.
            let before = if expired { cutoff } else { u64::MAX };
            let page = store
                .memo
                .markers()
                .expired_page(before, after.as_ref(), limit)
                .await
                .with_context(|| format!("cannot list terminal markers in {}", store.url))?;
            (page.markers, Some(page.next))
        }
        None => {
            let listed = if expired {
                store.memo.markers().list_expired(cutoff).await
            } else {
                store.memo.markers().list().await
            };
            let mut markers =
                listed.with_context(|| format!("cannot list terminal markers in {}", store.url))?;
            markers.sort_by(|a, b| {
                (a.terminal_at_ms, &a.run_id, a.incarnation).cmp(&(
                    b.terminal_at_ms,
                    &b.run_id,
                    b.incarnation,
                ))
            });
            (markers, None)
        }
    };
    // Expired is what a sweep uses: terminal strictly before the cutoff.
    let is_expired = |at: u64| at < cutoff;
    if json {
        let listed: Vec<_> = markers
            .iter()
            .map(|m| {
                json!({
                    "run_id": m.run_id.as_str(),
                    "incarnation": m.incarnation.to_string(),
                    "terminal_at_ms": m.terminal_at_ms,
                    "expired": is_expired(m.terminal_at_ms),
                })
            })
            .collect();
        match next {
            Some(next) => print_json(&json!({
                "markers": listed,
                "next": next.as_ref().map(cursor),
            })),
            None => print_json(&json!(listed)),
        }
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
    if let Some(Some(next)) = &next {
        outln!("next page: --after {}", cursor(next));
    }
    Ok(ExitCode::SUCCESS)
}

/// A marker as a page's cursor: `<ended ms>.<run id>.<incarnation>` (a run
/// id has no `.`), as `memoctl markers` and the inspector print it.
pub(crate) fn cursor(marker: &TerminalMarker) -> String {
    format!(
        "{}.{}.{}",
        marker.terminal_at_ms, marker.run_id, marker.incarnation
    )
}

/// The marker a [`cursor`] names.
pub(crate) fn parse_cursor(text: &str) -> anyhow::Result<TerminalMarker> {
    let bad = || {
        anyhow::anyhow!(
            "not a marker cursor: {text:?} (expected <ended ms>.<run id>.<incarnation>, \
             as the page before printed)"
        )
    };
    let mut parts = text.splitn(3, '.');
    let (Some(at), Some(run_id), Some(incarnation)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    Ok(TerminalMarker {
        run_id: RunId::new(run_id).map_err(|_| bad())?,
        terminal_at_ms: at.parse().map_err(|_| bad())?,
        incarnation: Incarnation::from_u64(
            u64::from_str_radix(incarnation, 16).map_err(|_| bad())?,
        ),
    })
}
