//! Type parameters, const parameters, `impl Trait` arguments and the
//! implementing type are part of the key; `skip(T)` and `skip(Self)` leave
//! one out.
use std::marker::PhantomData;

use memo_runtime::{Memo, memoized};
use serde::Serialize;

#[memoized]
async fn convert<From: Serialize + Sync, To, const SCALE: u32>(
    memo: &Memo,
    value: From,
    unit: impl Serialize + Sync,
) -> memo_runtime::Result<u32> {
    let _ = (value, unit, PhantomData::<To>);
    Ok(SCALE)
}

trait Transport {}

struct Smtp;

impl Transport for Smtp {}

#[memoized(skip(transport, T))]
async fn deliver<T: Transport + Sync>(
    memo: &Memo,
    transport: &T,
    to: &str,
) -> memo_runtime::Result<String> {
    let _ = transport;
    Ok(to.to_owned())
}

struct Mailer;

impl Mailer {
    #[memoized(skip(self, Self))]
    async fn send(&self, memo: &Memo, to: &str) -> memo_runtime::Result<String> {
        Ok(to.to_owned())
    }

    /// No receiver, but `Self` in the signature: still a method's key.
    #[memoized]
    async fn build(memo: &Memo, name: &str) -> memo_runtime::Result<String>
    where
        Self: Sized,
    {
        Ok(name.to_owned())
    }
}

async fn calls(memo: &Memo) -> memo_runtime::Result<u32> {
    convert::<u8, (), 2>(memo, 1, "mm").await
}

fn main() {
    let _ = calls;
    let _ = deliver::<Smtp>;
    let _ = (Mailer::send, Mailer::build);
}
