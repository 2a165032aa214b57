use memo_runtime::{Memo, memoized};

#[memoized]
async fn draft(memo: &Memo, body: &str) -> Result<String, String> {
    Ok(body.to_owned())
}

fn main() {}
