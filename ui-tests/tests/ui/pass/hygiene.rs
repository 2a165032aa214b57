//! The expansion's own locals cannot be named by the user's parameters or
//! body, and `skip(...)` names raw identifiers as written without `r#`.
use memo_runtime::{Memo, memoized};

#[memoized]
async fn look_alike(
    memo: &Memo,
    __memo_handle: &str,
    __memo_key: u8,
    __memo_body: u8,
    __memo_codec: u8,
) -> memo_runtime::Result<String> {
    let __memo_fake_return = __memo_body + __memo_codec;
    Ok(format!("{__memo_handle}{__memo_key}{__memo_fake_return}"))
}

struct Client;

#[memoized(skip(type, r#match))]
async fn raw(memo: &Memo, r#type: &Client, r#match: &Client, n: u8) -> memo_runtime::Result<u8> {
    let _ = (r#type, r#match);
    Ok(n)
}

fn main() {
    let _ = (look_alike, raw);
}
