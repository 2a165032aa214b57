use memo_runtime::{Memo, memoized};

#[memoized(scope = shraed)]
async fn typo(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

#[memoized(scope = "shared")]
async fn quoted(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

#[memoized(scope = global)]
async fn unknown(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

#[memoized(scope = shared, scope = run)]
async fn twice(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

fn main() {}
