use memo_runtime::{Memo, memoized};

#[memoized(skip(self))]
async fn draft(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

fn main() {}
