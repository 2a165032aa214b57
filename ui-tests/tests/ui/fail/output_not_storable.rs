use memo_runtime::{Memo, memoized};

struct Draft {
    text: String,
}

#[memoized]
async fn draft(memo: &Memo, body: &str) -> Result<Draft, memo_runtime::Error> {
    Ok(Draft { text: body.to_owned() })
}

fn main() {}
