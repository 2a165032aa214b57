//! The plainest shape: a free `async fn` with a `&Memo` parameter.
use memo_runtime::{Memo, memoized};

#[memoized]
async fn greet(memo: &Memo, name: &str) -> Result<String, memo_runtime::Error> {
    Ok(format!("hello, {name}"))
}

/// Unit results and no key arguments.
#[memoized]
async fn send_once(memo: &Memo) -> memo_runtime::Result<()> {
    Ok(())
}

fn main() {
    let _ = greet;
    let _ = send_once;
}
