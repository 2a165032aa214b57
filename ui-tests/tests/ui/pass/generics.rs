//! Generic functions: type parameters with bounds and where-clauses,
//! lifetimes, `impl Trait` arguments, `mut` bindings, a generic output.
use std::fmt::Display;

use memo_runtime::{Memo, memoized};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[memoized]
async fn describe<T>(memo: &Memo, item: T) -> memo_runtime::Result<String>
where
    T: Serialize + Display + Send,
{
    Ok(item.to_string())
}

#[memoized]
async fn longest<'a>(memo: &'a Memo, a: &'a str, b: &'a str) -> memo_runtime::Result<String> {
    Ok(if a.len() >= b.len() { a } else { b }.to_owned())
}

#[memoized]
async fn shout(memo: &Memo, text: impl Serialize + AsRef<str>) -> memo_runtime::Result<String> {
    Ok(text.as_ref().to_uppercase())
}

#[memoized]
async fn count_down(memo: &Memo, mut from: u32) -> memo_runtime::Result<Vec<u32>> {
    let mut seen = Vec::new();
    while from > 0 {
        seen.push(from);
        from -= 1;
    }
    Ok(seen)
}

#[memoized]
async fn fetch<T: DeserializeOwned + Serialize + Default>(
    memo: &Memo,
    id: u64,
) -> memo_runtime::Result<T> {
    let _ = id;
    Ok(T::default())
}

#[memoized]
async fn nothing_in_key(memo: &Memo) -> memo_runtime::Result<()> {
    Ok(())
}

/// Its error type is not `Send`; an `Err` is returned at once, never held
/// across an await, so the future is `Send` all the same.
#[memoized]
async fn error_not_send(memo: &Memo, n: u8) -> Result<u8, Box<dyn std::error::Error>> {
    Ok(n)
}

/// Calls each one; the futures stay `Send` so they can be spawned.
async fn calls(memo: &Memo) -> memo_runtime::Result<()> {
    describe(memo, 7u8).await?;
    longest(memo, "a", "bb").await?;
    shout(memo, "hey").await?;
    count_down(memo, 3).await?;
    let _: Vec<String> = fetch(memo, 1).await?;
    nothing_in_key(memo).await
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    let _ = |memo: &'static Memo| assert_send(calls(memo));
    let _ = |memo: &'static Memo| assert_send(error_not_send(memo, 1));
}
