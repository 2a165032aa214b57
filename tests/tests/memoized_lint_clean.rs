//! Generated code is warning-free under the strictest common settings: a
//! user's `#![deny(warnings, clippy::all)]` (and even `clippy::pedantic`)
//! must not trip on the expansion. `cargo clippy --workspace --all-targets
//! -- -D warnings` checks this file.
#![deny(warnings, clippy::all, clippy::pedantic, unused_qualifications)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use memo_runtime::{Memo, memoized};
use memo_tests::fixtures::{Backend, run};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Reply {
    text: String,
}

/// A free function with a borrowed and an owned argument; `runs` counts
/// how often the body ran.
#[memoized(skip(runs))]
async fn reply(
    memo: &Memo,
    runs: &AtomicUsize,
    to: &str,
    tags: BTreeSet<String>,
) -> memo_runtime::Result<Reply> {
    let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(Reply {
        text: format!("{to}: {} (run {run})", tags.len()),
    })
}

/// No key arguments and a unit result.
#[memoized]
async fn ping(memo: &Memo) -> anyhow::Result<()> {
    Ok(())
}

struct Client {
    base: String,
}

impl Client {
    /// A method with a skipped receiver, a `mut` binding and an early return.
    #[memoized(skip(self), name = "client.fetch", version = 3)]
    async fn fetch(&self, memo: &Memo, mut attempts: u8) -> memo_runtime::Result<String> {
        if attempts == 0 {
            return Ok(String::new());
        }
        attempts -= 1;
        Ok(format!("{}#{attempts}", self.base))
    }
}

/// A generic function with a where-clause and `?` on a foreign error.
#[memoized]
async fn parse_all<T>(memo: &Memo, inputs: Vec<String>) -> anyhow::Result<Vec<T>>
where
    T: std::str::FromStr + Serialize + for<'de> Deserialize<'de> + Send,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let mut out = Vec::with_capacity(inputs.len());
    for input in &inputs {
        out.push(input.parse()?);
    }
    Ok(out)
}

#[tokio::test]
async fn strictly_linted_memoized_functions_run_and_hit() -> anyhow::Result<()> {
    let memo = Backend::in_memory()
        .memo_store("lint")
        .new_memo(&run("lint"), 0);
    let tags: BTreeSet<String> = ["a".to_owned()].into();
    let runs = AtomicUsize::new(0);
    let first = reply(&memo, &runs, "ann", tags.clone()).await?;
    let second = reply(&memo, &runs, "ann", tags).await?;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the second call is a hit");
    assert_eq!(first.text, "ann: 1 (run 1)");
    assert_eq!(first, second);
    ping(&memo).await?;
    let client = Client {
        base: "https://example.invalid".into(),
    };
    assert_eq!(client.fetch(&memo, 2).await?, "https://example.invalid#1");
    let parsed: Vec<u16> = parse_all(&memo, vec!["1".into(), "2".into()]).await?;
    assert_eq!(parsed, [1, 2]);
    Ok(())
}
