//! The return type is resolved through a trait, so any alias of `Result`
//! works, and so does any error type that can carry `memo_runtime::Error`.
use memo_runtime::{Memo, memoized};

type MyResult<T> = std::result::Result<T, AppError>;

#[derive(Debug)]
enum AppError {
    Memo(memo_runtime::Error),
}

impl From<memo_runtime::Error> for AppError {
    fn from(e: memo_runtime::Error) -> Self {
        AppError::Memo(e)
    }
}

#[memoized]
async fn with_anyhow(memo: &Memo, n: u32) -> anyhow::Result<u32> {
    anyhow::ensure!(n < 10, "too big");
    Ok(n)
}

#[memoized]
async fn with_own_alias(memo: &Memo, n: u32) -> MyResult<u32> {
    Ok(n)
}

#[memoized]
async fn with_boxed_error(memo: &Memo) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let parsed: u32 = "7".parse()?;
    Ok(parsed.to_string())
}

#[memoized]
async fn with_question_mark(memo: &Memo, text: &str) -> anyhow::Result<u64> {
    let n: u64 = text.parse()?;
    if n == 0 {
        return Err(anyhow::anyhow!("zero"));
    }
    Ok(n)
}

#[memoized]
async fn with_full_path(memo: &Memo) -> ::core::result::Result<bool, memo_runtime::Error> {
    Ok(true)
}

fn main() {
    let _ = (with_anyhow, with_own_alias, with_boxed_error);
    let _ = (with_question_mark, with_full_path);
    let _ = |e: AppError| match e {
        AppError::Memo(inner) => inner,
    };
}
