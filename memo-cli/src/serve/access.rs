//! Who may use the inspector and which requests may change the store.
//!
//! - With a token, every request carries it (a cookie set by the first
//!   visit's `?token=`, or `Authorization: Bearer`); without one, the
//!   inspector listens on loopback only (or read-only), and a request whose
//!   `Host` names another machine is refused: a web page that rebinds its own
//!   name to 127.0.0.1 must not read the store through the visitor's browser.
//! - Actions are POSTs carrying the process's CSRF token (a random secret
//!   put in every form, which another site's page cannot read), from this
//!   origin (`Origin`, `Sec-Fetch-Site`), and none in read-only mode.
//! - Every response forbids scripts, frames and foreign form targets
//!   (Content-Security-Policy), on top of the templates' escaping.

use std::net::SocketAddr;

use anyhow::Context as _;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::page::Failure;

/// The headers every response carries: no script runs, nothing is framed,
/// forms post only here, nothing is cached, no address is sent to another
/// site. (`same-origin`, not `no-referrer`: under `no-referrer` a browser
/// sends `Origin: null` with the inspector's own forms, which the action
/// check refuses.)
const SECURITY_HEADERS: [(header::HeaderName, &str); 5] = [
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'",
    ),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "same-origin"),
    (header::CACHE_CONTROL, "no-store"),
    (header::X_FRAME_OPTIONS, "DENY"),
];

/// The access rules of one inspector process.
pub(crate) struct Access {
    token: Option<String>,
    read_only: bool,
    /// This process's CSRF token: 32 random bytes, hex.
    csrf: String,
    /// The cookie that keeps the token, named after the port (cookies are
    /// per host, not per port).
    cookie: String,
    /// Whether a request's `Host` must be a loopback name: no token guards
    /// the inspector, only its loopback address does.
    loopback_hosts_only: bool,
}

impl Access {
    pub(crate) fn new(
        token: Option<String>,
        read_only: bool,
        bound: SocketAddr,
    ) -> anyhow::Result<Access> {
        if let Some(token) = &token {
            check_token(token)?;
        }
        let mut secret = [0_u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("cannot draw the CSRF token from the system's randomness")?;
        let csrf = secret.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Access {
            loopback_hosts_only: token.is_none() && bound.ip().is_loopback(),
            token,
            read_only,
            csrf,
            cookie: format!("memo-inspector-token-{}", bound.port()),
        })
    }

    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    pub(crate) fn read_only(&self) -> bool {
        self.read_only
    }

    /// The CSRF token to put in every form that posts an action.
    pub(crate) fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Refuses an action (a POST) unless the inspector acts, the form
    /// carries this process's CSRF token and the browser says it comes from
    /// this origin.
    pub(crate) fn check_action(&self, headers: &HeaderMap, csrf: &str) -> Result<(), Failure> {
        self.check_acts()?;
        if !same_secret(csrf, &self.csrf) {
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                "Refused",
                "the form's CSRF token is missing or not this inspector's (was it restarted?): \
                 go back, reload the page and try again",
            ));
        }
        let cross_site = header_str(headers, "sec-fetch-site").is_some_and(|s| s == "cross-site");
        let foreign_origin = header_str(headers, header::ORIGIN.as_str()).is_some_and(|origin| {
            let host = header_str(headers, header::HOST.as_str()).unwrap_or_default();
            origin != format!("http://{host}") && origin != format!("https://{host}")
        });
        if cross_site || foreign_origin {
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                "Refused",
                "the action comes from another site's page",
            ));
        }
        Ok(())
    }

    /// Refuses any action, and the pages that confirm one, in read-only
    /// mode.
    pub(crate) fn check_acts(&self) -> Result<(), Failure> {
        if self.read_only {
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                "Read-only",
                "this inspector was started with --read-only: it takes no action",
            ));
        }
        Ok(())
    }

    /// The token the request carries: its cookie, or `Authorization: Bearer`.
    fn presented<'r>(&self, headers: &'r HeaderMap) -> Option<&'r str> {
        let bearer = header_str(headers, header::AUTHORIZATION.as_str())
            .and_then(|value| value.strip_prefix("Bearer "));
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.cookie)
            .map(|(_, value)| value);
        bearer.or(cookie)
    }
}

/// The middleware every request passes: the host check, the token, and the
/// security headers on whatever the handler answers.
pub(crate) async fn guard(
    State(inspector): State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    let access = &inspector.access;
    let response = match refusal(access, &request) {
        None => next.run(request).await,
        Some(refusal) => refusal,
    };
    with_security_headers(response)
}

/// The answer instead of the request, if it is refused (or, for a first
/// visit with the token, redirected).
fn refusal(access: &Access, request: &Request) -> Option<Response> {
    let headers = request.headers();
    if access.loopback_hosts_only && !host_is_loopback(headers) {
        return Some(
            Failure::new(
                StatusCode::FORBIDDEN,
                "Refused",
                "this inspector answers only requests addressed to 127.0.0.1, localhost or [::1] \
             (the Host header names another machine)",
            )
            .into_response(),
        );
    }
    // The style sheet holds nothing of the store; the refusal pages use it.
    let Some(token) = &access.token else {
        return None;
    };
    if request.uri().path().starts_with("/assets/") {
        return None;
    }
    if let Some(given) = query_token(request) {
        if !same_secret(&given, token) {
            return Some(unauthorized());
        }
        // Keep the token in a cookie and drop it from the address bar (and
        // from the history).
        let cookie = format!(
            "{}={token}; Path=/; HttpOnly; SameSite=Strict",
            access.cookie
        );
        let mut response = (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, request.uri().path().to_string())],
        )
            .into_response();
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return Some(response);
    }
    match access.presented(headers) {
        Some(given) if same_secret(given, token) => None,
        _ => Some(unauthorized()),
    }
}

fn unauthorized() -> Response {
    Failure::new(
        StatusCode::UNAUTHORIZED,
        "Token needed",
        "this inspector needs its token: open http://HOST:PORT/?token=TOKEN once, with the \
         token it was started with",
    )
    .into_response()
}

/// The `token` parameter of the request's query, if any.
fn query_token(request: &Request) -> Option<String> {
    let query = request.uri().query()?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
}

fn with_security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Whether the request's `Host` is a loopback name: `127.x.y.z`,
/// `localhost` or `[::1]`, with any port.
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = header_str(headers, header::HOST.as_str()) else {
        return false;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(name, _)| name)
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A token travels in a cookie and a header: it must be non-empty and of
/// characters both take as they are.
fn check_token(token: &str) -> anyhow::Result<()> {
    let fits = |c: char| c.is_ascii_alphanumeric() || "-._~+/=".contains(c);
    if token.is_empty() || !token.chars().all(fits) {
        anyhow::bail!(
            "--token must be letters, digits and -._~+/= only (a random one: \
             `openssl rand -hex 32`)"
        );
    }
    Ok(())
}

/// Compares two secrets in time that depends on their lengths only.
fn same_secret(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0_u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        headers
    }

    #[test]
    fn only_loopback_names_are_loopback_hosts() {
        for host in [
            "127.0.0.1:7070",
            "localhost:80",
            "LOCALHOST",
            "[::1]:7070",
            "127.9.9.9",
        ] {
            assert!(host_is_loopback(&with_host(host)), "{host}");
        }
        for host in [
            "evil.example:7070",
            "localhost.evil.example",
            "10.0.0.1:7070",
            "[2001:db8::1]:80",
            "",
        ] {
            assert!(!host_is_loopback(&with_host(host)), "{host}");
        }
        assert!(!host_is_loopback(&HeaderMap::new()));
    }

    #[test]
    fn tokens_are_what_a_cookie_and_a_header_carry_as_they_are() {
        for good in ["s3cret-token", "a1B2_c3~/+=", &"f".repeat(64)] {
            assert!(check_token(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "two words",
            "semi;colon",
            "quo\"te",
            "comma,",
            "é",
            "back\\slash",
        ] {
            assert!(check_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_match_only_when_equal() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
        assert!(!same_secret("", "abc"));
    }
}
