//! The record a wrapped data key is stored as in the key store, and what
//! its wrap is bound to.
//!
//! Two versions are written, and both read (integers little-endian).
//! Version 1 holds the key of a run incarnation or a shared namespace, and
//! the standalone keys made before generations:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MKEY"` |
//! | 1 | format version 1 |
//! | 4 | version of the key-encryption key that wrapped it |
//! | 2 | wrapped length `n` (at most 4096) |
//! | `n` | the wrapped key, as the key-encryption key made it |
//! | 4 | CRC-32 (IEEE) over everything before it |
//!
//! Version 2 holds the key of a standalone run (`runs/<run>/0000000000000000`),
//! with its **generation**: a number drawn at random (2 or more) when the
//! key is made, which the frame of every payload sealed with it records in
//! its data key version field (see `envelope`), so that a payload sealed
//! with a key that was forgotten since is told apart from one sealed with
//! the key the store holds now:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MKEY"` |
//! | 1 | format version 2 |
//! | 4 | generation (2 or more) |
//! | 4 | version of the key-encryption key that wrapped it |
//! | 2 | wrapped length `n` (at most 4096) |
//! | `n` | the wrapped key |
//! | 4 | CRC-32 (IEEE) over everything before it |
//!
//! A version-1 record is generation 1, the generation every version-3
//! frame written before generations records. The wrap of a version-1
//! record is bound to `memo data key v1\0` and the key's name; of a
//! version-2 record to `memo data key v2\0`, the name, `#` and the
//! generation in 8 hex digits, so a wrapped key copied under another name,
//! or relabelled with another generation, does not unwrap.

use bytes::{BufMut, Bytes, BytesMut};

use super::wrap::WrappedKey;
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"MKEY";
const VERSION: u8 = 1;
const GENERATIONAL_VERSION: u8 = 2;
const HEADER_LEN: usize = 4 + 1 + 4 + 2;
const GENERATIONAL_HEADER_LEN: usize = HEADER_LEN + 4;
/// What every wrap is bound to besides the key's name, so no other use of
/// a key-encryption key makes a wrapped key memo accepts.
const CONTEXT_DOMAIN: &[u8] = b"memo data key v1\0";
const GENERATIONAL_CONTEXT_DOMAIN: &[u8] = b"memo data key v2\0";

/// The generation of every key that has none of its own: a run
/// incarnation's, a shared namespace's, a standalone run's made before
/// generations (and what a version-3 frame written before them records).
pub(crate) const FIRST_GENERATION: u32 = 1;

/// A wrapped data key as the key store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyRecord {
    /// `None` for a version-1 record (generation 1).
    pub(super) generation: Option<u32>,
    pub(super) wrapped: WrappedKey,
}

impl KeyRecord {
    /// The generation of the key: [`FIRST_GENERATION`] for a version-1
    /// record.
    pub(super) fn generation(&self) -> u32 {
        self.generation.unwrap_or(FIRST_GENERATION)
    }

    /// What the wrap of the key named `name` is bound to.
    pub(super) fn context(&self, name: &str) -> Vec<u8> {
        context(name, self.generation)
    }

    pub(super) fn encode(&self) -> Result<Bytes> {
        let len = self.wrapped.bytes().len();
        if len > WrappedKey::MAX_LEN {
            return Err(Error::InvalidConfig {
                what: "key-encryption key".into(),
                reason: format!(
                    "a wrapped data key of {len} bytes, over the {} memo stores",
                    WrappedKey::MAX_LEN
                ),
            });
        }
        let mut out = BytesMut::with_capacity(GENERATIONAL_HEADER_LEN + len + 4);
        out.put_slice(MAGIC);
        match self.generation {
            None => out.put_u8(VERSION),
            Some(generation) => {
                out.put_u8(GENERATIONAL_VERSION);
                out.put_u32_le(generation);
            }
        }
        out.put_u32_le(self.wrapped.kek_version());
        out.put_u16_le(len as u16);
        out.put_slice(self.wrapped.bytes());
        let crc = crc32fast::hash(&out);
        out.put_u32_le(crc);
        Ok(out.freeze())
    }

    pub(super) fn decode(bytes: &[u8]) -> std::result::Result<KeyRecord, String> {
        if bytes.len() < HEADER_LEN + 4 || &bytes[..4] != MAGIC {
            return Err("not a memo data key (bad magic or too short)".into());
        }
        let (generation, rest) = match bytes[4] {
            VERSION => (None, &bytes[5..]),
            GENERATIONAL_VERSION if bytes.len() >= GENERATIONAL_HEADER_LEN + 4 => {
                let generation = u32::from_le_bytes(bytes[5..9].try_into().expect("4 bytes"));
                if generation <= FIRST_GENERATION {
                    return Err(format!(
                        "generation {generation} in a version-2 data key (generations there \
                         are 2 or more)"
                    ));
                }
                (Some(generation), &bytes[9..])
            }
            GENERATIONAL_VERSION => return Err("not a memo data key (too short)".into()),
            other => return Err(format!("unknown data key format version {other}")),
        };
        let header_len = bytes.len() - rest.len() + 6;
        let kek_version = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
        let len = usize::from(u16::from_le_bytes(rest[4..6].try_into().expect("2 bytes")));
        if bytes.len() != header_len + len + 4 {
            return Err(format!(
                "the data key declares {len} wrapped bytes but holds {}",
                bytes.len().saturating_sub(header_len + 4)
            ));
        }
        let body_end = header_len + len;
        let stored = u32::from_le_bytes(bytes[body_end..].try_into().expect("4 bytes"));
        if stored != crc32fast::hash(&bytes[..body_end]) {
            return Err("the data key's checksum does not match".into());
        }
        Ok(KeyRecord {
            generation,
            wrapped: WrappedKey::new(kek_version, bytes[header_len..body_end].to_vec()),
        })
    }
}

/// What the wrap of the key named `name`, of `generation` (`None`: a
/// version-1 record), is bound to.
pub(super) fn context(name: &str, generation: Option<u32>) -> Vec<u8> {
    match generation {
        None => [CONTEXT_DOMAIN, name.as_bytes()].concat(),
        Some(generation) => [
            GENERATIONAL_CONTEXT_DOMAIN,
            name.as_bytes(),
            format!("#{generation:08x}").as_bytes(),
        ]
        .concat(),
    }
}

/// A new generation for a standalone run's key: random (from the
/// operating system, or a simulated history's seed), 2 or more. Drawn, not
/// counted, because a forget deletes the key and with it any count; two
/// keys of one name share a generation once in 2^32 makings, and then a
/// payload sealed with the older one reads as corrupt instead of as a miss
/// (never as a value).
pub(super) fn new_generation() -> u32 {
    loop {
        let mut bytes = [0u8; 4];
        super::fill_random(&mut bytes);
        let generation = u32::from_le_bytes(bytes);
        if generation > FIRST_GENERATION {
            return generation;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_wrapped_key_record_is_pinned() {
        // Checksum computed independently (Python: zlib.crc32).
        let v1 = KeyRecord {
            generation: None,
            wrapped: WrappedKey::new(2, vec![0xaa, 0xbb]),
        };
        let record = v1.encode().unwrap();
        assert_eq!(hex(&record), "4d4b455901020000000200aabb545936a1");
        assert_eq!(KeyRecord::decode(&record).unwrap(), v1);
        assert_eq!(v1.generation(), FIRST_GENERATION);
        let mut damaged = record.to_vec();
        damaged[12] ^= 1;
        assert!(
            KeyRecord::decode(&damaged)
                .unwrap_err()
                .contains("checksum")
        );
    }

    #[test]
    fn the_wrapped_standalone_key_record_with_its_generation_is_pinned() {
        // Checksum computed independently (Python:
        // zlib.crc32(bytes.fromhex("4d4b45590278563412020000000200aabb"))).
        let v2 = KeyRecord {
            generation: Some(0x1234_5678),
            wrapped: WrappedKey::new(2, vec![0xaa, 0xbb]),
        };
        let record = v2.encode().unwrap();
        assert_eq!(hex(&record), "4d4b45590278563412020000000200aabb35f7db53");
        assert_eq!(KeyRecord::decode(&record).unwrap(), v2);
        assert_eq!(v2.generation(), 0x1234_5678);
        let mut damaged = record.to_vec();
        damaged[6] ^= 1;
        assert!(
            KeyRecord::decode(&damaged)
                .unwrap_err()
                .contains("checksum")
        );
        // Generations 0 and 1 are not written in version 2.
        for generation in [0u32, 1] {
            let mut low = record[..5].to_vec();
            low.extend_from_slice(&generation.to_le_bytes());
            low.extend_from_slice(&record[9..record.len() - 4]);
            let crc = crc32fast::hash(&low);
            low.extend_from_slice(&crc.to_le_bytes());
            assert!(
                KeyRecord::decode(&low)
                    .unwrap_err()
                    .contains("generations there are 2 or more")
            );
        }
    }

    #[test]
    fn the_wrap_context_names_the_key_and_its_generation() {
        let name = "runs/r/0000000000000000";
        assert_eq!(
            context(name, None),
            b"memo data key v1\0runs/r/0000000000000000"
        );
        assert_eq!(
            context(name, Some(0xab)),
            b"memo data key v2\0runs/r/0000000000000000#000000ab"
        );
        assert!((0..100).all(|_| new_generation() > FIRST_GENERATION));
    }
}
