//! What every page shares: the frame around it, error pages, and how a
//! stored payload and a time are shown.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use memo_runtime::runtime_store::RunStatus;

use crate::output::{decode_payload, duration, now_ms, time};

/// How many characters of a payload's JSON a page shows; the rest is cut,
/// with the sizes said.
pub(crate) const SHOWN_PAYLOAD_CHARS: usize = 4_096;

/// A whole page: the header with the store's URL and the navigation, then
/// `body`.
pub(crate) fn frame(title: &str, store_url: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · memo inspector" }
                link rel="stylesheet" href="/assets/inspector.css";
            }
            body {
                header {
                    a.brand href="/runs" { "memo inspector" }
                    nav {
                        a href="/runs" { "Runs" }
                        a href="/retention" { "Retention" }
                    }
                    span.store title="the store" { (store_url) }
                }
                main { (body) }
            }
        }
    }
}

/// A page that says why a request failed, with its HTTP status.
#[derive(Debug)]
pub(crate) struct Failure {
    status: StatusCode,
    title: &'static str,
    message: String,
}

impl Failure {
    pub(crate) fn new(status: StatusCode, title: &'static str, message: impl Into<String>) -> Self {
        Failure {
            status,
            title,
            message: message.into(),
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::NOT_FOUND, "Not found", message)
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::BAD_REQUEST, "Bad request", message)
    }

    /// The store failed: its error chain, as the command line prints it.
    pub(crate) fn store(error: &anyhow::Error) -> Self {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Store error",
            format!("{error:#}"),
        )
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        // A failure page has no store URL to show: it may be an answer to
        // a request that proved nothing (no token).
        let body = frame(
            self.title,
            "",
            html! {
                h1 { (self.title) }
                p.failure { (self.message) }
                p { a href="/runs" { "Back to the runs" } }
            },
        );
        (self.status, body).into_response()
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure::store(&error)
    }
}

/// A stored payload: its JSON (from MessagePack) in a block, cut at
/// [`SHOWN_PAYLOAD_CHARS`], with its size; or only its size if it is not
/// MessagePack.
pub(crate) fn payload(bytes: &[u8]) -> Markup {
    let size = bytes.len();
    match decode_payload(bytes) {
        Ok(value) => {
            let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
            let chars = text.chars().count();
            let shown: String = text.chars().take(SHOWN_PAYLOAD_CHARS).collect();
            html! {
                pre.payload { (shown) }
                @if chars > SHOWN_PAYLOAD_CHARS {
                    p.truncated {
                        "truncated: the first " (SHOWN_PAYLOAD_CHARS) " of " (chars)
                        " characters of JSON; the payload is " (bytes_size(size as u64))
                    }
                } @else {
                    span.size { (bytes_size(size as u64)) }
                }
            }
        }
        Err(why) => html! {
            span.raw { (bytes_size(size as u64)) ", " (why) " (not shown)" }
        },
    }
}

/// `12 B`, `4.0 KiB`, `3.2 MiB`.
pub(crate) fn bytes_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b < KIB => format!("{b} B"),
        b if b < KIB * KIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{:.1} MiB", b as f64 / (KIB * KIB) as f64),
    }
}

/// A time (ms since the epoch) as RFC 3339, with how long ago or ahead.
pub(crate) fn when(ms: u64) -> Markup {
    let now = now_ms();
    let relative = if ms <= now {
        format!("{} ago", duration(now - ms))
    } else {
        format!("in {}", duration(ms - now))
    };
    html! { time title=(relative) { (time(ms)) } " " span.ago { "(" (relative) ")" } }
}

/// A run status as a coloured tag.
pub(crate) fn status_tag(status: RunStatus) -> Markup {
    let class = match status {
        RunStatus::Pending => "pending",
        RunStatus::Running => "running",
        RunStatus::Completed => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    };
    html! { span class={ "status " (class) } { (status) } }
}

/// `path` with the query `pairs` (each value URL-encoded; empty ones left
/// out).
pub(crate) fn link(path: &str, pairs: &[(&str, &str)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs.iter().filter(|(_, value)| !value.is_empty()) {
        query.append_pair(name, value);
    }
    let query = query.finish();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_longer_than_a_page_are_cut_with_their_sizes() {
        let long = "x".repeat(SHOWN_PAYLOAD_CHARS * 2);
        let packed = rmp_serde::to_vec(&long).unwrap();
        let shown = payload(&packed).into_string();
        assert!(shown.contains("truncated"), "{shown}");
        assert!(shown.contains(&bytes_size(packed.len() as u64)), "{shown}");
        assert!(
            !shown.contains(&long[..=SHOWN_PAYLOAD_CHARS]),
            "cut: {shown}"
        );
        let short = payload(&rmp_serde::to_vec(&"ok").unwrap()).into_string();
        assert!(!short.contains("truncated"), "{short}");
    }

    #[test]
    fn raw_bytes_show_only_their_size() {
        let shown = payload(b"\xc1 raw <b>").into_string();
        assert!(shown.contains("9 B, not MessagePack"), "{shown}");
        assert!(!shown.contains("<b>"), "{shown}");
    }

    #[test]
    fn links_encode_their_query() {
        assert_eq!(link("/runs", &[]), "/runs");
        assert_eq!(
            link("/runs", &[("workflow", "a&b=<c>"), ("prefix", "")]),
            "/runs?workflow=a%26b%3D%3Cc%3E"
        );
    }
}
