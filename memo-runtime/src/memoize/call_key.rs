//! The key of one memoized call.
//!
//! A call's key is [`content_key`](crate::content_key) of
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
//! encode alike. [`CallKey`] writes that encoding argument by argument,
//! each serialized by its own monomorphic code, as fast as a hand-written
//! `content_key` of the tuple.
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

use serde::Serialize;

use crate::key::{HexDigest, KeyHasher};
use crate::{Error, Result};

use super::bounds::{KeyPart, ReceiverKeyPart};

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

/// The key of a memoized call, written part by part: [`new`](Self::new),
/// then every argument ([`arg`](Self::arg), [`receiver`](Self::receiver)),
/// then every type part ([`type_part`](Self::type_part)), in order.
///
/// Each argument's bound is checked in its own call, at the argument, and
/// nowhere else: a failed check is one error.
pub struct CallKey {
    key: KeyHasher,
    types: usize,
    types_started: bool,
    error: Option<Error>,
}

impl CallKey {
    /// Starts the key of a call of `name` at `version` with `args` key
    /// arguments and `types` type parts.
    pub fn new(name: &str, version: u32, args: usize, types: usize) -> CallKey {
        let mut key = CallKey {
            key: KeyHasher::new(),
            types,
            types_started: false,
            error: None,
        };
        let parts = if types == 0 { 3 } else { 4 };
        key.write(|k| k.array(parts));
        key.write(|k| k.value(name));
        key.write(|k| k.value(&version));
        key.write(|k| k.array(args));
        key
    }

    /// Adds an argument.
    pub fn arg<T: KeyPart + ?Sized>(&mut self, value: &T) {
        self.write(|k| k.value(value));
    }

    /// Adds the receiver (its errors suggest `skip(self)`).
    pub fn receiver<T: ReceiverKeyPart + ?Sized>(&mut self, value: &T) {
        self.write(|k| k.value(value));
    }

    /// Adds a type part: a [`type_key`], or a const parameter's value.
    pub fn type_part<T: Serialize + ?Sized>(&mut self, value: &T) {
        if !self.types_started {
            self.types_started = true;
            let types = self.types;
            self.write(|k| k.array(types));
        }
        self.write(|k| k.value(value));
    }

    /// The key, on the stack: a hit needs no allocation for it.
    ///
    /// # Errors
    ///
    /// [`Error::Serialization`] if an argument failed to serialize.
    pub fn finish(self) -> Result<HexDigest> {
        match self.error {
            None => Ok(self.key.finish_digest()),
            Some(error) => Err(error),
        }
    }

    /// Writes a part unless an earlier one failed.
    fn write(&mut self, part: impl FnOnce(&mut KeyHasher) -> Result<()>) {
        if self.error.is_none()
            && let Err(e) = part(&mut self.key)
        {
            self.error = Some(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::content_key;

    use super::*;

    #[test]
    fn without_types_the_key_is_the_three_part_form_pinned_by_golden_keys() {
        let mut key = CallKey::new("draft_reply", 0, 1, 0);
        key.arg("refund");
        assert_eq!(
            key.finish().unwrap().as_str(),
            "8fb84e2d78665becc813f16d23366202a7d7f8bf853209865d64a88b07818b31"
        );
        assert_eq!(
            CallKey::new("with_unit", 0, 0, 0)
                .finish()
                .unwrap()
                .as_str(),
            "3310765c0e74958cd26ac44946ea5ac006307d0ce98bf50096a8a53e2ee5eab5"
        );
        let mut key = CallKey::new("send_email", 1, 2, 0);
        key.arg("a@example.com");
        key.arg(&3u8);
        assert_eq!(
            key.finish().unwrap().as_str(),
            content_key(&("send_email", 1u32, ("a@example.com", 3u8))).unwrap()
        );
    }

    #[test]
    fn types_are_a_fourth_part() {
        let mut key = CallKey::new("describe", 1, 1, 2);
        key.receiver(&7u8);
        key.type_part(type_key::<u16>());
        key.type_part(&3usize);
        assert_eq!(
            key.finish().unwrap().as_str(),
            content_key(&("describe", 1u32, (7u8,), ("u16", 3u8))).unwrap()
        );
    }

    #[test]
    fn the_first_failing_argument_is_the_error() {
        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no encoding"))
            }
        }
        let mut key = CallKey::new("f", 0, 2, 0);
        key.arg(&Fails);
        key.arg(&1u8);
        assert!(
            matches!(key.finish(), Err(Error::Serialization { source, .. }) if source.to_string() == "no encoding")
        );
    }
}
