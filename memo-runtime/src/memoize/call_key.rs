//! The key of one memoized call.
//!
//! A call's key is [`content_key`] of
//!
//! - `(name, version, args)` when the function has no type component: a
//!   free function, or an associated one that names neither `self` nor
//!   `Self`, without type or const parameters (this form is pinned by golden
//!   keys and never changes);
//! - `(name, version, args, types)` otherwise, `types` being, in order: the
//!   implementing type (`Self`) for a method, each type and const parameter
//!   in declaration order, then the type of each `impl Trait` key argument.
//!
//! `args` and `types` are one MessagePack array each, so a slice and a tuple
//! encode alike.
//!
//! # How a type enters the key
//!
//! A type enters as its [`type_key`]: [`core::any::type_name`], the type's
//! path as the compiler prints it (`my_crate::billing::Invoice<u64>`); a
//! const parameter enters as its value. `type_name` is the only name of an
//! arbitrary type a generic function can reach without adding bounds to its
//! signature, and it is deterministic: the same source built by the same
//! compiler release gives the same string. It is not promised stable across
//! compiler releases, and it changes when the type, its module or its crate
//! is renamed or moved. A changed type key is a miss, never a wrong hit: the
//! body runs again once. So keys of generic functions and methods may change
//! on a compiler upgrade or such a move; keys of free functions without type
//! parameters never depend on it. `skip(T)` or `skip(Self)` leaves a type out
//! of the key where it cannot change the result.

use crate::{Result, content_key};

use super::bounds::{KeyPart, ReceiverKeyPart};

/// Checks that an argument can be part of the key, and erases its type.
///
/// The check happens here, in one generic bound, and the erased return type
/// does not depend on it: a failed check is one error, at the argument,
/// not a second one where the key is serialized.
pub fn key_part<T: KeyPart>(value: &T) -> &dyn erased_serde::Serialize {
    value
}

/// [`key_part`] for `self`, whose errors suggest `skip(self)`.
pub fn receiver_key_part<T: ReceiverKeyPart>(value: &T) -> &dyn erased_serde::Serialize {
    value
}

/// How the type `T` enters a key: its [`core::any::type_name`] (see the
/// module documentation for why, and what changes it).
pub fn type_key<T: ?Sized>() -> &'static str {
    core::any::type_name::<T>()
}

/// [`type_key`] of the type of `value`: for `impl Trait` arguments, whose
/// type has no name to write.
pub fn type_key_of_val<T: ?Sized>(_value: &T) -> &'static str {
    type_key::<T>()
}

/// The key of a memoized call: [`content_key`] of `(name, version, args)`,
/// or of `(name, version, args, types)` when `types` is not empty.
///
/// For one or more arguments this is
/// `content_key(&(name, version, (arg1, arg2, ..)))`; with none it is
/// `content_key(&(name, version, [(); 0]))`.
///
/// # Errors
///
/// [`crate::Error::Serialization`] if an argument fails to serialize.
pub fn key(
    name: &str,
    version: u32,
    args: &[&dyn erased_serde::Serialize],
    types: &[&dyn erased_serde::Serialize],
) -> Result<String> {
    if types.is_empty() {
        content_key(&(name, version, args))
    } else {
        content_key(&(name, version, args, types))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_types_the_key_is_the_three_part_form_pinned_by_golden_keys() {
        let args: [&dyn erased_serde::Serialize; 1] = [&"refund"];
        assert_eq!(
            key("draft_reply", 0, &args, &[]).unwrap(),
            "8fb84e2d78665becc813f16d23366202a7d7f8bf853209865d64a88b07818b31"
        );
        assert_eq!(
            key("with_unit", 0, &[], &[]).unwrap(),
            "3310765c0e74958cd26ac44946ea5ac006307d0ce98bf50096a8a53e2ee5eab5"
        );
    }

    #[test]
    fn types_are_a_fourth_part() {
        let args: [&dyn erased_serde::Serialize; 1] = [&7u8];
        let types: [&dyn erased_serde::Serialize; 2] = [&type_key::<u16>(), &3usize];
        assert_eq!(
            key("describe", 1, &args, &types).unwrap(),
            content_key(&("describe", 1u32, (7u8,), ("u16", 3u8))).unwrap()
        );
        assert_ne!(
            key("describe", 1, &args, &types).unwrap(),
            key("describe", 1, &args, &[]).unwrap()
        );
    }
}
