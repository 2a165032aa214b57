//! The `#[memoized]` attribute of memo, re-exported as
//! [`memo_runtime::memoized`](https://docs.rs/memo-runtime/latest/memo_runtime/attr.memoized.html).
//!
//! Depend on `memo-runtime` and use the attribute from there: the code it
//! generates names only `memo_runtime::__private`, so this crate alone is not
//! usable.
//!
//! The pipeline reads in stages, one file each: `item` parses the function
//! (the signature strictly, the body as tokens), `attr` parses the options,
//! `valid` checks them against the signature and produces a `valid::Plan`,
//! `expand` generates the function.

mod attr;
mod expand;
mod item;
mod valid;

use proc_macro::TokenStream;

// The documentation is a file of its own so that memo-runtime can run its
// examples as doctests (see `MemoizedDocExamples` in its `lib.rs`): this is a
// proc-macro crate, whose doctests cargo builds for the host, with a second
// copy of memo-runtime and everything under it.
#[doc = include_str!("memoized.md")]
#[proc_macro_attribute]
pub fn memoized(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::memoized(args.into(), item.into()).into()
}
