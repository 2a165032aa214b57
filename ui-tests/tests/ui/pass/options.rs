//! Every option at once, with the memo coming from another parameter.
use memo_runtime::{Memo, memoized};

struct Context {
    memo: Memo,
}

impl Context {
    fn memo(&self) -> &Memo {
        &self.memo
    }
}

struct Client;

#[memoized(
    name = "draft_reply",
    version = 2,
    skip(client, ctx),
    memo = ctx.memo(),
    crate = "::memo_runtime",
)]
async fn draft(ctx: &Context, client: &Client, body: &str) -> memo_runtime::Result<String> {
    let _ = client;
    Ok(body.to_owned())
}

fn main() {
    let _ = draft;
}
