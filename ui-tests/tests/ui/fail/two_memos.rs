use memo_runtime::{Memo, memoized};

#[memoized]
async fn draft(primary: &Memo, audit: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

fn main() {}
