use memo_runtime::memoized;

#[memoized]
async fn draft(body: &str) -> memo_runtime::Result<String> {
    Ok(body.to_owned())
}

fn main() {}
