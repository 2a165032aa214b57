//! The traits `#[memoized]`'s expansion checks its inputs against.
//!
//! Each carries `#[diagnostic::on_unimplemented]`, so that a misuse caught
//! by the type checker (an argument that is not `Serialize`, a return type
//! that is not a `Result`) is reported in `#[memoized]`'s own words at the
//! user's token.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Memo};

/// A return type `#[memoized]` can work with: `Result<T, E>` under any
/// alias, with a storable `T` and an `E` that can carry memo's errors.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` needs a `Result` return type, found `{Self}`",
    label = "only `Ok` values are committed, so this must be a `Result`",
    note = "write `Result<T, E>` (or an alias such as `anyhow::Result<T>`) with \
            `T: Serialize + DeserializeOwned` and `E: From<memo_runtime::Error>`"
)]
pub trait MemoResult: Sized {
    /// The committed value.
    type Ok;
    /// The function's error, never committed.
    type Err;

    /// Splits into the standard `Result`.
    fn into_result(self) -> core::result::Result<Self::Ok, Self::Err>;

    /// Builds from the standard `Result`.
    fn from_result(result: core::result::Result<Self::Ok, Self::Err>) -> Self;
}

impl<T, E> MemoResult for core::result::Result<T, E> {
    type Ok = T;
    type Err = E;

    fn into_result(self) -> Self {
        self
    }

    fn from_result(result: Self) -> Self {
        result
    }
}

/// An `Ok` type that can be committed and read back.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` cannot store `{Self}`: the `Ok` type must implement \
               `Serialize` and `DeserializeOwned`",
    label = "the `Ok` type of this `Result` is committed to the memo",
    note = "derive `serde::Serialize` and `serde::Deserialize` for `{Self}`, and own \
            its data (no borrowed fields): it is read back from storage"
)]
pub trait StoredValue: Serialize + DeserializeOwned {}

impl<T: Serialize + DeserializeOwned> StoredValue for T {}

/// An error type that can carry memo's own errors.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` needs an error type that can carry `memo_runtime::Error`; \
               `{Self}` cannot",
    label = "the memo's own failures (storage, decoding) are returned as this error",
    note = "implement `From<memo_runtime::Error>` for `{Self}`, or use \
            `memo_runtime::Error`, `anyhow::Error` or `Box<dyn std::error::Error>`"
)]
pub trait FromMemoError: From<Error> {}

impl<E: From<Error>> FromMemoError for E {}

/// An argument that can be part of a key.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` cannot put `{Self}` in the key: it does not implement `Serialize`",
    label = "this argument is part of the key",
    note = "derive `serde::Serialize` for the argument's type, or leave the argument out \
            of the key with `#[memoized(skip(name))]`"
)]
pub trait KeyPart: Serialize {}

impl<T: Serialize + ?Sized> KeyPart for T {}

/// A receiver that can be part of a key.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` cannot put `self` in the key: `{Self}` does not implement `Serialize`",
    label = "`self` is part of the key unless skipped",
    note = "add `skip(self)` to the attribute: `#[memoized(skip(self))]`, or derive \
            `serde::Serialize` for `{Self}`"
)]
pub trait ReceiverKeyPart: Serialize {}

impl<T: Serialize + ?Sized> ReceiverKeyPart for T {}

/// Something that holds a [`Memo`]: what `memo = ...` may name.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` needs a `Memo`, found `{Self}`",
    label = "this must be a `Memo`, `&Memo` or `&mut Memo`",
    note = "point `memo = ...` at an expression of type `&Memo`, e.g. `memo = ctx.memo()`"
)]
pub trait MemoHandle {
    /// The memo.
    fn memo_handle(&self) -> &Memo;
}

impl MemoHandle for Memo {
    fn memo_handle(&self) -> &Memo {
        self
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for &H {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for &mut H {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for Arc<H> {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

impl<H: MemoHandle + ?Sized> MemoHandle for Box<H> {
    fn memo_handle(&self) -> &Memo {
        (**self).memo_handle()
    }
}

/// A parameter taken for the memo because its type is named `Memo`: it must
/// really be memo's [`Memo`], or a domain type of that name would silently
/// be left out of the key.
#[diagnostic::on_unimplemented(
    message = "`#[memoized]` took this parameter for the memo because its type is named \
               `Memo`, but `{Self}` is not `memo_runtime::Memo`",
    label = "a parameter of type `Memo`, `&Memo` or `&mut Memo` is taken for the memo",
    note = "say where the memo comes from with `#[memoized(memo = ...)]`, e.g. \
            `memo = ctx.memo()`; then every other parameter is part of the key"
)]
pub trait MemoParam {
    /// The memo.
    fn memo_param(&self) -> &Memo;
}

impl MemoParam for Memo {
    fn memo_param(&self) -> &Memo {
        self
    }
}

impl MemoParam for &Memo {
    fn memo_param(&self) -> &Memo {
        self
    }
}

impl MemoParam for &mut Memo {
    fn memo_param(&self) -> &Memo {
        self
    }
}

/// The memo behind `handle`, for `memo = <expr>`.
pub fn memo_of<H: MemoHandle + ?Sized>(handle: &H) -> &Memo {
    handle.memo_handle()
}

/// The memo behind a parameter taken for the memo by its type's name;
/// checks that it is memo's [`Memo`].
pub fn memo_param<P: MemoParam>(param: &P) -> &Memo {
    param.memo_param()
}

/// The shared-scope memo of a call's memo, for `scope = shared` (see
/// [`Memo::shared`]).
pub fn shared_memo(memo: &Memo) -> Memo {
    memo.shared()
}
