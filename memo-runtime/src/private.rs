//! The items `#[memoized]`'s expansion names, as `memo_runtime::__private`.
//!
//! Not public API: everything here may change in any release. It is public
//! only because macro-generated code in the user's crate must reach it. The
//! engine itself lives in the `memoize` module.

#[doc(hidden)]
pub use crate::key::HexDigest;
#[doc(hidden)]
pub use crate::memoize::bounds::{
    FromMemoError, KeyPart, MemoHandle, MemoParam, MemoResult, ReceiverKeyPart, StoredValue,
    memo_of, memo_param, shared_memo,
};
#[doc(hidden)]
pub use crate::memoize::call_key::{CallKey, type_key, type_key_of_val};
#[doc(hidden)]
pub use crate::memoize::engine::{Call, Codec, codec};
