use memo_runtime::{Memo, memoized};

#[memoized(nmae = "draft", retries = 3)]
async fn draft(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

fn main() {}
