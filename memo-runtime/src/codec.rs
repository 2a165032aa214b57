//! The one MessagePack codec of every stored record and payload: run
//! records, log entries, commits, workflow inputs, step outputs, signal
//! payloads and `#[memoized]` values are all written by [`encode`] and read
//! by [`decode`], so a change of record encoding is one diff.
//!
//! Records are MessagePack with named fields (`rmp_serde::to_vec_named`):
//! a field can be added with `#[serde(default)]` and old records still read.
//! This is not the canonical encoding of content keys (`key.rs`), which
//! sorts map entries and is only ever hashed, never stored.

use bytes::Bytes;
use object_store::path::Path;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The encoder's error.
pub(crate) type EncodeError = rmp_serde::encode::Error;

/// The decoder's error.
pub(crate) type DecodeError = rmp_serde::decode::Error;

/// The stored encoding of `value`.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    rmp_serde::to_vec_named(value)
}

/// Reads `bytes` written by [`encode`] as a `T`.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    rmp_serde::from_slice(bytes)
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
