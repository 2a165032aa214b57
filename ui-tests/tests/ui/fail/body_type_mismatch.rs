use memo_runtime::{Memo, memoized};

#[memoized]
async fn draft(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.len())
}

fn main() {}
