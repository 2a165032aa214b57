use memo_runtime::{Memo, memoized};

#[memoized]
async fn draft(memo: &Memo, (subject, body): (String, String)) -> memo_runtime::Result<String> {
    Ok(subject + &body)
}

fn main() {}
