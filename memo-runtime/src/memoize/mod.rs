//! The runtime half of `#[memoized]`: what its expansion calls, reached
//! only through the hidden `__private` re-exports (`src/private.rs`).
//!
//! - `bounds`: the traits the expansion checks arguments, the memo and the
//!   return type against, each reporting a misuse in `#[memoized]`'s words.
//! - `call_key`: the key of one call (name, version, arguments, types).
//! - `engine`: one call from key to committed value (its single flight,
//!   so identical concurrent calls in one process run the body once, is
//!   the memo store's: `memo::flight`).

pub(crate) mod bounds;
pub(crate) mod call_key;
pub(crate) mod engine;
