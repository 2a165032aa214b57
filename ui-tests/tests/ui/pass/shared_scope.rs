//! `scope = shared` and `scope = run`, with the other options.

use memo_runtime::{Memo, memoized};

#[memoized(scope = shared)]
async fn embed(memo: &Memo, text: &str) -> memo_runtime::Result<Vec<u8>> {
    Ok(text.as_bytes().to_vec())
}

#[memoized(scope = run, version = 2)]
async fn per_run(memo: &Memo, n: u64) -> memo_runtime::Result<u64> {
    Ok(n)
}

struct Client;

impl Client {
    #[memoized(skip(self), scope = shared, name = "complete", crate = "memo_runtime")]
    async fn complete<T: serde::Serialize + Sync>(
        &self,
        memo: &Memo,
        prompt: &T,
    ) -> anyhow::Result<String> {
        let _ = prompt;
        Ok(String::new())
    }
}

struct Ctx {
    memo: Memo,
}

#[memoized(memo = &ctx.memo, skip(ctx), scope = shared)]
async fn through_an_expression(ctx: &Ctx, n: u8) -> memo_runtime::Result<u8> {
    Ok(n)
}

fn main() {
    let _ = (
        embed,
        per_run,
        Client::complete::<u8>,
        through_an_expression,
    );
}
