use memo_runtime::{Memo, memoized};

#[memoized(crate = "not a path")]
async fn draft(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

fn main() {}
