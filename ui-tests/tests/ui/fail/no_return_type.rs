use memo_runtime::{Memo, memoized};

#[memoized]
async fn send(memo: &Memo, body: &str) {
    let _ = body;
}

fn main() {}
