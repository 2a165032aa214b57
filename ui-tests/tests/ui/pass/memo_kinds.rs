//! The memo may be `&Memo`, `&mut Memo`, an owned `Memo`, under any path,
//! or any expression that yields one of those (or an `Arc<Memo>`).
use std::sync::Arc;

use memo_runtime::memoized;

#[memoized]
async fn by_ref(memo: &memo_runtime::Memo, n: u8) -> memo_runtime::Result<u8> {
    Ok(n)
}

#[memoized]
async fn by_mut_ref(memo: &mut memo_runtime::Memo, n: u8) -> memo_runtime::Result<u8> {
    Ok(n)
}

#[memoized]
async fn owned(memo: memo_runtime::Memo, n: u8) -> memo_runtime::Result<u8> {
    let _still_usable = memo.step_number();
    Ok(n)
}

#[memoized(memo = shared)]
async fn shared(shared: Arc<memo_runtime::Memo>, n: u8) -> memo_runtime::Result<u8> {
    Ok(n)
}

/// With `memo = ...`, no other parameter is taken for the memo: `audit`
/// would be part of the key, so it is skipped.
#[memoized(memo = memo, skip(audit))]
async fn chosen(
    memo: &memo_runtime::Memo,
    audit: &memo_runtime::Memo,
    n: u8,
) -> memo_runtime::Result<u8> {
    let _ = audit;
    Ok(n)
}

/// `memo = &param` names the parameter as well: it is not in the key.
#[memoized(memo = &memo)]
async fn borrowed(memo: memo_runtime::Memo, n: u8) -> memo_runtime::Result<u8> {
    Ok(n)
}

fn main() {
    let _ = borrowed;
    let _ = (by_ref, by_mut_ref, owned, shared, chosen);
}
