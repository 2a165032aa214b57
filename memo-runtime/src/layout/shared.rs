//! The names of the shared scope's expiry markers, read back: what a sweep
//! of the shared scope trusts of a name it lists.

use object_store::path::Path;

use super::{MARKER_HOUR_MS, parse_digits, parse_marker_hour};

/// A shared expiry marker's parts, as [`parse_shared_expiry`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedExpiryName {
    pub(crate) hour: u64,
    pub(crate) namespace: String,
    pub(crate) digest: String,
    pub(crate) expires_ms: u64,
    pub(crate) token: u64,
}

/// Parses a shared expiry marker's path; `None` for anything that
/// [`Layout::shared_expiry`](super::Layout::shared_expiry) would not have written.
pub(crate) fn parse_shared_expiry(path: &Path) -> Option<SharedExpiryName> {
    let hour = parse_marker_hour(&path.parent()?)?;
    let name = path.filename()?;
    let (inverted, rest) = name.split_at_checked(20)?;
    let (namespace, rest) = rest.strip_prefix('_')?.split_once('.')?;
    let (digest, token) = rest.split_once('.')?;
    let expires_ms = u64::MAX - parse_digits(inverted)?;
    let lower_hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let well_formed = is_shared_namespace(namespace)
        && lower_hex(digest, 64)
        && lower_hex(token, 16)
        && expires_ms - expires_ms % MARKER_HOUR_MS == hour;
    well_formed.then_some(())?;
    Some(SharedExpiryName {
        hour,
        namespace: namespace.to_owned(),
        digest: digest.to_owned(),
        expires_ms,
        token: u64::from_str_radix(token, 16).ok()?,
    })
}

/// The longest shared namespace, in bytes.
pub(crate) const MAX_SHARED_NAMESPACE_LEN: usize = 64;

/// Whether `namespace` is a shared namespace: 1 to
/// [`MAX_SHARED_NAMESPACE_LEN`] bytes of `[a-z0-9_-]` (lower case only, so
/// two namespaces never share a folder on a case-insensitive one).
pub(crate) fn is_shared_namespace(namespace: &str) -> bool {
    (1..=MAX_SHARED_NAMESPACE_LEN).contains(&namespace.len())
        && namespace
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
}
