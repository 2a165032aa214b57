use memo_runtime::{Memo, memoized};
use serde::Serialize;

#[memoized]
async fn dedupe(memo: &Memo, items: &mut Vec<u32>) -> memo_runtime::Result<usize> {
    items.dedup();
    Ok(items.len())
}

#[derive(Serialize)]
struct Template {
    subject: String,
}

impl Template {
    #[memoized]
    async fn retitle(&mut self, memo: &Memo, suffix: &str) -> memo_runtime::Result<String> {
        self.subject.push_str(suffix);
        Ok(self.subject.clone())
    }
}

fn main() {}
