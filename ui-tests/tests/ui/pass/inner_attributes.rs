//! Inner attributes at the start of the body keep working: they apply to
//! the body as written.
use memo_runtime::{Memo, memoized};

#[memoized]
async fn tally(memo: &Memo, items: Vec<u32>) -> memo_runtime::Result<u32> {
    #![allow(unused_mut)]
    #![deny(unused_variables)]
    let mut total: u32 = items.iter().sum();
    Ok(total)
}

#[memoized]
async fn documented(memo: &Memo) -> memo_runtime::Result<()> {
    //! An inner doc comment is an inner attribute too.
    Ok(())
}

fn main() {
    let _ = (tally, documented);
}
