use memo_runtime::{Memo, memoized};

#[memoized]
const async fn draft(memo: &Memo) -> memo_runtime::Result<u32> {
    Ok(1)
}

fn main() {}
