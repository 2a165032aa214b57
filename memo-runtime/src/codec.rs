//! The one MessagePack codec of every stored record and payload: run
//! records, log entries, commits, workflow inputs, step outputs, signal
//! payloads and `#[memoized]` values are all written by [`encode`] and read
//! by [`decode`], so a change of record encoding is one diff.
//!
//! Records are MessagePack with named fields (`rmp_serde::to_vec_named`):
//! a field can be added with `#[serde(default)]` and old records still read.
//! This is not the canonical encoding of content keys (`key.rs`), which
//! sorts map entries and is only ever hashed, never stored.
//!
//! Nesting: values are written and read at most [`MAX_NESTING_DEPTH`] (128)
//! levels of arrays and maps deep; the bytes of the encoding did not
//! change. Before the limit, memo read up to rmp-serde's 1,024 levels (and
//! a worker could overflow its stack doing so). What old data does: memo's
//! own records never nest that deep; a user's value (a `#[memoized]`
//! value, step output, run input or signal payload) stored 129 to 1,024
//! levels deep by an earlier memo now reads as [`Error::Decode`] naming it
//! (a `#[memoized]` call then fails without re-running its body, a
//! pending signal is refused), and a record as [`Error::Corrupt`].

use bytes::Bytes;
use object_store::path::Path;
use serde::Serialize;
use serde::de::{DeserializeOwned, IgnoredAny};

use crate::error::{Error, Result};

/// The encoder's error.
pub(crate) type EncodeError = rmp_serde::encode::Error;

/// The decoder's error.
pub(crate) type DecodeError = rmp_serde::decode::Error;

/// The deepest nesting of arrays and maps (a struct is a map) that memo
/// stores and reads back: 128 levels, as `serde_json` allows.
///
/// Each level costs the decoder stack: rmp-serde's own limit (1,024) lets a
/// stored value overflow a Tokio worker thread's 2 MiB stack in a debug
/// build, aborting the process. Decoding stops at this depth with
/// [`Error::Decode`] (or [`Error::Corrupt`] for a record) instead, and a
/// value nested deeper is refused when it is stored
/// ([`Error::Serialization`]), so that memo never commits what it could
/// not read back.
pub const MAX_NESTING_DEPTH: usize = 128;

/// The stored encoding of `value`.
///
/// # Errors
///
/// The encoder's error, or a value nested deeper than
/// [`MAX_NESTING_DEPTH`].
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let bytes = rmp_serde::to_vec_named(value)?;
    // Read back with the reader's limit: what passes here always decodes.
    if let Err(DecodeError::DepthLimitExceeded) = decode::<IgnoredAny>(&bytes) {
        return Err(EncodeError::Syntax(format!(
            "the value is nested deeper than {MAX_NESTING_DEPTH} levels of arrays and maps, \
             the most memo reads back"
        )));
    }
    Ok(bytes)
}

/// Reads `bytes` written by [`encode`] as a `T`.
///
/// # Errors
///
/// The decoder's error; [`DecodeError::DepthLimitExceeded`] for a value
/// nested deeper than [`MAX_NESTING_DEPTH`].
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let mut decoder = rmp_serde::Deserializer::from_read_ref(bytes);
    // rmp-serde refuses the level at which its counter reaches zero.
    decoder.set_max_depth(MAX_NESTING_DEPTH + 1);
    T::deserialize(&mut decoder)
}

/// [`encode`], failing with [`Error::Serialization`] naming `what`.
pub(crate) fn encode_value<T: Serialize + ?Sized>(what: &str, value: &T) -> Result<Bytes> {
    encode(value)
        .map(Bytes::from)
        .map_err(|e| Error::serialization(what, e))
}

/// [`decode`] of a value the caller chose the type of: bytes that do not
/// decode as `T` are [`Error::Decode`] naming `what` and `location` (the
/// type may have changed; a code fix can read them).
pub(crate) fn decode_value<T: DeserializeOwned>(
    what: &str,
    location: &str,
    bytes: &[u8],
) -> Result<T> {
    decode(bytes).map_err(|e| Error::decode(what, location, e))
}

/// [`decode`] of a record memo wrote under `path`: one that does not decode
/// is corrupt (or from an incompatible version), never skipped.
pub(crate) fn decode_record<T: DeserializeOwned>(
    what: &str,
    path: &Path,
    bytes: &[u8],
) -> Result<T> {
    decode(bytes).map_err(|e| Error::corrupt(path, format!("{what} does not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Record {
        name: String,
        count: u32,
    }

    #[test]
    fn records_are_messagepack_with_named_fields() {
        let record = Record {
            name: "a".into(),
            count: 1,
        };
        let bytes = encode(&record).unwrap();
        // fixmap(2) "name" "a" "count" 1
        assert_eq!(
            bytes,
            b"\x82\xa4name\xa1a\xa5count\x01".to_vec(),
            "the stored record encoding changed"
        );
        assert_eq!(decode::<Record>(&bytes).unwrap(), record);
    }

    /// `depth` arrays, each holding the next; the innermost is empty.
    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct Nested(Vec<Nested>);

    fn nested(depth: usize) -> Nested {
        (1..depth).fold(Nested(Vec::new()), |inner, _| Nested(vec![inner]))
    }

    /// MessagePack of `depth` nested one-element arrays around `nil`.
    fn nested_bytes(depth: usize) -> Vec<u8> {
        let mut bytes = vec![0x91; depth];
        bytes.push(0xc0);
        bytes
    }

    #[test]
    fn values_nest_up_to_the_limit_and_no_deeper() {
        let at_limit = nested(MAX_NESTING_DEPTH);
        let bytes = encode(&at_limit).unwrap();
        assert_eq!(decode::<Nested>(&bytes).unwrap(), at_limit);

        let err = encode_value("a deep value", &nested(MAX_NESTING_DEPTH + 1)).unwrap_err();
        assert!(
            matches!(&err, Error::Serialization { what, .. } if what == "a deep value"),
            "{err:?}"
        );
        assert!(err.to_string().contains("nested deeper than 128"), "{err}");

        for depth in [MAX_NESTING_DEPTH + 1, 1_000, 100_000] {
            let err = decode_value::<IgnoredAny>("a deep value", "run r1", &nested_bytes(depth))
                .unwrap_err();
            assert!(
                matches!(
                    &err,
                    Error::Decode { what, source: DecodeError::DepthLimitExceeded, .. }
                        if what == "a deep value"
                ),
                "{depth}: {err:?}"
            );
        }
        decode::<IgnoredAny>(&nested_bytes(MAX_NESTING_DEPTH)).unwrap();
        let err =
            decode_record::<IgnoredAny>("a run", &Path::from("runs/r1/run"), &nested_bytes(1_000))
                .unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("depth limit exceeded")),
            "{err:?}"
        );
    }

    #[test]
    fn an_undecodable_value_names_what_and_where() {
        let err = decode_value::<Record>("the input", "run r1", b"\xc1").unwrap_err();
        assert!(matches!(
            &err,
            Error::Decode { what, path, .. } if what == "the input" && path == "run r1"
        ));
        let err =
            decode_record::<Record>("a run", &Path::from("runs/r1/run"), b"\xc1").unwrap_err();
        assert!(matches!(&err, Error::Corrupt { path, .. } if path == "runs/r1/run"));
    }

    #[test]
    fn codec_errors_keep_the_underlying_error_as_their_source() {
        use std::error::Error as _;
        let err = decode_value::<Record>("the input", "run r1", b"\xc1").unwrap_err();
        let source = err.source().expect("a decode error has a source");
        assert!(source.downcast_ref::<DecodeError>().is_some(), "{source:?}");
        assert_eq!(
            err.to_string(),
            format!("cannot decode the input stored at run r1: {source}")
        );

        struct Unencodable;
        impl Serialize for Unencodable {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no encoding"))
            }
        }
        let err = encode_value("a value", &Unencodable).unwrap_err();
        let source = err.source().expect("a serialization error has a source");
        assert!(source.downcast_ref::<EncodeError>().is_some(), "{source:?}");
        assert_eq!(err.to_string(), "cannot serialize a value: no encoding");
    }
}
