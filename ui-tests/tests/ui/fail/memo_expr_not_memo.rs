use memo_runtime::memoized;

struct Context {
    run: String,
}

#[memoized(memo = ctx.run, skip(ctx))]
async fn draft(ctx: &Context, body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

fn main() {}
