//! The expansion names the runtime only through the path it was given: a
//! local `memo_runtime` that is something else does not disturb it, and
//! `crate = "..."` reaches the runtime under another name.
use memo_runtime::Memo;

mod sdk {
    pub(crate) use memo_runtime::*;
}

mod shadowed {
    #[allow(unused_imports)]
    use std as memo_runtime;

    use crate::sdk::{Memo, memoized};

    #[memoized(crate = "crate::sdk")]
    pub async fn through_sdk(memo: &Memo, n: u8) -> crate::sdk::Result<u8> {
        Ok(n)
    }

    #[memoized]
    pub async fn through_default(memo: &Memo, n: u8) -> crate::sdk::Result<u8> {
        Ok(n)
    }
}

fn main() {
    let _ = shadowed::through_sdk;
    let _ = shadowed::through_default;
    let _: Option<Memo> = None;
}
