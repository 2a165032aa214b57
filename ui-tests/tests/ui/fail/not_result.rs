use memo_runtime::{Memo, memoized};

#[memoized]
async fn draft(memo: &Memo, body: &str) -> String {
    body.to_owned()
}

fn main() {}
