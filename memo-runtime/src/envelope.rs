//! The frame around every stored value: magic, version, flags, length and a
//! checksum, so a damaged or foreign object is an error and never a miss.
//!
//! Layout (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MEMO"` |
//! | 1 | format version, currently 1 |
//! | 1 | flags: bits 0–3 the codec (0 = raw bytes); the rest must be 0 |
//! | 8 | payload length `n` |
//! | `n` | payload |
//! | 4 | CRC-32 (IEEE) over everything before it |
//!
//! The checksum comes last so a truncated object fails either the length or
//! the checksum check, whichever it reaches first.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"MEMO";
const VERSION: u8 = 1;
const CODEC_RAW: u8 = 0;
const HEADER_LEN: usize = 4 + 1 + 1 + 8;
const TRAILER_LEN: usize = 4;

/// Bytes the frame adds to a payload.
pub(crate) const OVERHEAD: usize = HEADER_LEN + TRAILER_LEN;

/// Frames `payload` for storage.
pub(crate) fn seal(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + OVERHEAD);
    out.put_slice(MAGIC);
    out.put_u8(VERSION);
    out.put_u8(CODEC_RAW);
    out.put_u64_le(payload.len() as u64);
    out.put_slice(payload);
    let crc = crc32fast::hash(&out);
    out.put_u32_le(crc);
    out.freeze()
}

/// The payload of a frame that [`seal`] just made (no check, no copy).
pub(crate) fn payload_of_sealed(framed: &Bytes) -> Bytes {
    framed.slice(HEADER_LEN..framed.len() - TRAILER_LEN)
}

/// Checks the frame of the object at `path` and returns its payload, a slice
/// of `framed` (no copy).
///
/// # Errors
///
/// [`Error::Corrupt`] naming `path` and the failed check.
pub(crate) fn open(path: &impl std::fmt::Display, framed: Bytes) -> Result<Bytes> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    if framed.len() < OVERHEAD {
        return Err(corrupt(format!(
            "{} bytes is shorter than the {OVERHEAD}-byte frame",
            framed.len()
        )));
    }
    if &framed[..4] != MAGIC {
        return Err(corrupt("not a memo object (bad magic)".into()));
    }
    if framed[4] != VERSION {
        return Err(corrupt(format!(
            "unknown format version {} (this build reads version {VERSION})",
            framed[4]
        )));
    }
    if framed[5] != CODEC_RAW {
        return Err(corrupt(format!("unknown flags {:#04x}", framed[5])));
    }
    let len = u64::from_le_bytes(framed[6..HEADER_LEN].try_into().expect("8 bytes"));
    let expected = (framed.len() - OVERHEAD) as u64;
    if len != expected {
        return Err(corrupt(format!(
            "frame declares {len} payload bytes but holds {expected} (truncated or extended)"
        )));
    }
    let body_end = framed.len() - TRAILER_LEN;
    let stored = u32::from_le_bytes(framed[body_end..].try_into().expect("4 bytes"));
    let actual = crc32fast::hash(&framed[..body_end]);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        )));
    }
    Ok(framed.slice(HEADER_LEN..body_end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn corrupt_reason(framed: Bytes) -> String {
        match open(&"p/x", framed) {
            Err(Error::Corrupt { path, reason }) => {
                assert_eq!(path, "p/x");
                reason
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn round_trips_empty_and_nonempty_payloads() {
        for payload in [&b""[..], b"v", &[0u8; 1000]] {
            assert_eq!(&open(&"p", seal(payload)).unwrap()[..], payload);
        }
    }

    #[test]
    fn the_frame_is_pinned() {
        // A change here is a change of stored data format; the checksum was
        // computed independently (Python: zlib.crc32).
        let framed = seal(b"hi");
        assert_eq!(
            &framed[..],
            b"MEMO\x01\x00\x02\x00\x00\x00\x00\x00\x00\x00hi5]WX"
        );
    }

    #[test]
    fn payload_is_a_slice_of_the_frame() {
        let framed = seal(b"abc");
        let payload = open(&"p", framed.clone()).unwrap();
        assert_eq!(payload.as_ptr(), framed[HEADER_LEN..].as_ptr());
    }

    #[test]
    fn foreign_unknown_version_and_flags_are_corrupt() {
        assert!(
            corrupt_reason(Bytes::from_static(b"hello, world! this is json")).contains("magic")
        );
        let mut v = seal(b"x").to_vec();
        v[4] = 9;
        assert!(corrupt_reason(v.into()).contains("version 9"));
        let mut f = seal(b"x").to_vec();
        f[5] = 1;
        assert!(corrupt_reason(f.into()).contains("flags"));
        assert!(corrupt_reason(Bytes::new()).contains("shorter"));
    }

    proptest! {
        #[test]
        fn any_single_bit_flip_is_detected(payload in proptest::collection::vec(any::<u8>(), 0..64), bit in any::<usize>()) {
            let mut framed = seal(&payload).to_vec();
            let bit = bit % (framed.len() * 8);
            framed[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(open(&"p", framed.into()).is_err());
        }

        #[test]
        fn any_truncation_or_extension_is_detected(payload in proptest::collection::vec(any::<u8>(), 0..64), cut in any::<usize>(), extra in 1usize..8) {
            let framed = seal(&payload);
            let cut = cut % framed.len();
            prop_assert!(open(&"p", framed.slice(..cut)).is_err());
            let mut longer = framed.to_vec();
            longer.extend(std::iter::repeat_n(0u8, extra));
            prop_assert!(open(&"p", longer.into()).is_err());
        }
    }
}
