use memo_runtime::{Memo, memoized};

#[memoized(skip(clinet))]
async fn draft(memo: &Memo, client: &str, body: &str) -> memo_runtime::Result<String> {
    Ok(format!("{client}{body}"))
}

fn main() {}
