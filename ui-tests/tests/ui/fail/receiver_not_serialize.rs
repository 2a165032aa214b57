use memo_runtime::{Memo, memoized};

struct Client;

impl Client {
    #[memoized]
    async fn draft(&self, memo: &Memo, body: &str) -> Result<String, memo_runtime::Error> {
        Ok(body.to_owned())
    }
}

fn main() {}
