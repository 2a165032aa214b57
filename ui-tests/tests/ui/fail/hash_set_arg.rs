use std::collections::HashSet;

use memo_runtime::{Memo, memoized};

#[memoized]
async fn notify(memo: &Memo, recipients: &HashSet<String>) -> memo_runtime::Result<usize> {
    Ok(recipients.len())
}

fn main() {}
