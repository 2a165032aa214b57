//! Attributes, doc comments, visibility and the signature come through
//! untouched; the user's `use` lines in the body cannot shadow generated
//! names.
#![deny(missing_docs)]
//! A crate with documented items.

use memo_runtime::{Memo, memoized};

/// Documented, `pub`, `#[must_use]`: all kept.
#[must_use = "the draft is the point"]
#[memoized(name = "draft")]
pub async fn draft(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    #[allow(unused_imports)]
    use std::result::Result as __memo_body;
    Ok(body.to_owned())
}

pub(crate) mod inner {
    use memo_runtime::{Memo, memoized};

    /// `pub(crate)` in a module.
    #[memoized]
    pub(crate) async fn r#type(memo: &Memo) -> memo_runtime::Result<u8> {
        Ok(1)
    }
}

fn main() {
    let _ = draft;
    let _ = inner::r#type;
}
