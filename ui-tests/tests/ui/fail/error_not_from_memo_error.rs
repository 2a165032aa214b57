use memo_runtime::{Memo, memoized};

#[derive(Debug)]
struct AppError;

#[memoized]
async fn draft(memo: &Memo, body: &str) -> Result<String, AppError> {
    Ok(body.to_owned())
}

fn main() {}
