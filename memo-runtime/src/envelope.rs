//! The frame around every stored value: magic, version, what was done to
//! the payload (codec, compression, encryption and key version), length and
//! a checksum, so a damaged, foreign, moved or downgraded object is an error
//! and never a miss or another value.
//!
//! Two versions are written, and both read (all integers little-endian).
//! A payload stored as it is (no compression, no encryption) is framed in
//! version 1, the frame of every memo before seals, so that older readers
//! still read it:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MEMO"` |
//! | 1 | format version 1 |
//! | 1 | flags: bits 0–3 the codec (0 = raw bytes); the rest must be 0 |
//! | 8 | payload length `n` |
//! | `n` | payload |
//! | 4 | CRC-32 (IEEE) over everything before it |
//!
//! A compressed or encrypted payload is framed in version 2:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MEMO"` |
//! | 1 | format version 2 |
//! | 1 | codec: 0 = raw bytes |
//! | 1 | compression: 0 = none, 1 = zstd |
//! | 1 | encryption: 0 = none, 1 = XChaCha20-Poly1305 |
//! | 4 | key version (0 when not encrypted) |
//! | 8 | body length `n` |
//! | `n` | body |
//! | 4 | CRC-32 (IEEE) over everything before it |
//!
//! A payload encrypted with a run's data key (see
//! [`DataKeys`](crate::seal::DataKeys)) is framed in version 3, which is
//! version 2 with the data key named:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MEMO"` |
//! | 1 | format version 3 |
//! | 1 | codec: 0 = raw bytes |
//! | 1 | compression: 0 = none, 1 = zstd |
//! | 1 | encryption: 1 = XChaCha20-Poly1305 |
//! | 4 | data key generation: 1, or a standalone run's key's generation |
//! | 8 | data key id: the run incarnation whose data key sealed it (0 for a standalone run's or a shared namespace's) |
//! | 8 | body length `n` |
//! | `n` | body |
//! | 4 | CRC-32 (IEEE) over everything before it |
//!
//! The run (or namespace) is the one the object is read for: its path
//! says it, and a reader of a run's pointer, which does not know the
//! incarnation beforehand, learns it from the id. The generation is 1 but
//! for a standalone run's key made since generations (a random number, 2
//! or more, that the key store records beside the key; see
//! [`DataKeys`](crate::seal::DataKeys), *Standalone runs*); a frame
//! written before generations records 1 there, the generation of every
//! key stored without one. Version 2 frames (sealed with a store keyring)
//! and version 1 frames still read as before.
//!
//! The body, compressed: the payload's length (8 bytes) then one zstd
//! frame. Encrypted: a random 24-byte nonce, the ciphertext of the
//! (compressed) body, and the 16-byte Poly1305 tag. The associated data of
//! the encryption is a domain tag, the 20-byte header and the object's path
//! (store prefix, run, incarnation, step, key or record), so a ciphertext
//! read at any other path, or with a header changed, fails to authenticate
//! (version 3's domain tag is `memo frame v3`; its header is 28 bytes).
//!
//! The checksum comes last so a truncated object fails either the length or
//! the checksum check, whichever it reaches first.

use std::cell::RefCell;

use bytes::{BufMut, Bytes, BytesMut};
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::seal::{Compression, KeyRef, Keyring, Seal};

const MAGIC: &[u8; 4] = b"MEMO";
const PLAIN_VERSION: u8 = 1;
const SEALED_VERSION: u8 = 2;
const DATA_KEY_VERSION: u8 = 3;
const CODEC_RAW: u8 = 0;
const COMPRESSION_NONE: u8 = 0;
const COMPRESSION_ZSTD: u8 = 1;
const CIPHER_NONE: u8 = 0;
const CIPHER_XCHACHA20_POLY1305: u8 = 1;
const PLAIN_HEADER_LEN: usize = 4 + 1 + 1 + 8;
const SEALED_HEADER_LEN: usize = 4 + 1 + 1 + 1 + 1 + 4 + 8;
const DATA_KEY_HEADER_LEN: usize = SEALED_HEADER_LEN + 8;
const TRAILER_LEN: usize = 4;
const LENGTH_LEN: usize = 8;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// Binds a ciphertext to memo's frame, so no other use of a key can make
/// one that reads here.
const AAD_DOMAIN: &[u8] = b"memo frame v2\0";
const DATA_KEY_AAD_DOMAIN: &[u8] = b"memo frame v3\0";

/// Bytes a plain (version 1) frame adds to a payload.
pub(crate) const OVERHEAD: usize = PLAIN_HEADER_LEN + TRAILER_LEN;

/// The most bytes any frame adds to a payload: a compressed body is kept
/// only where it is smaller than the payload, and encryption adds its nonce
/// and tag.
pub(crate) const MAX_OVERHEAD: usize = DATA_KEY_HEADER_LEN + TRAILER_LEN + NONCE_LEN + TAG_LEN;

/// The key a frame is encrypted with.
#[derive(Clone, Copy)]
enum FrameKey<'a> {
    /// A store keyring's key of this version (frame version 2).
    Ring(u32, &'a XChaCha20Poly1305),
    /// The data key named so (frame version 3).
    Data(KeyRef, &'a XChaCha20Poly1305),
}

impl FrameKey<'_> {
    fn cipher(&self) -> &XChaCha20Poly1305 {
        match self {
            FrameKey::Ring(_, cipher) | FrameKey::Data(_, cipher) => cipher,
        }
    }
}

/// The key `seal` writes with: its fetched data key, else its keyring's
/// current key.
fn write_key(seal: &Seal) -> Option<FrameKey<'_>> {
    if let Some((key, cipher)) = seal.data_key() {
        return Some(FrameKey::Data(key, cipher));
    }
    debug_assert!(
        seal.data_keys().is_none_or(|keys| !keys.writes()) || seal.keys().is_some(),
        "a seal with data keys writes only once its key is fetched (Seal::for_writing)"
    );
    seal.keys()
        .and_then(Keyring::current)
        .map(|(version, cipher)| FrameKey::Ring(version, cipher))
}

/// The data key a version-3 frame names (its id and generation), if
/// `framed` is one.
pub(crate) fn data_key_ref(framed: &[u8]) -> Option<KeyRef> {
    if framed.len() < DATA_KEY_HEADER_LEN || &framed[..4] != MAGIC || framed[4] != DATA_KEY_VERSION
    {
        return None;
    }
    let id = u64::from_le_bytes(
        framed[SEALED_HEADER_LEN - 8..SEALED_HEADER_LEN]
            .try_into()
            .expect("8 bytes"),
    );
    let generation = u32::from_le_bytes(framed[8..12].try_into().expect("4 bytes"));
    Some(KeyRef { id, generation })
}

/// The bytes of a frame's start that say how it was sealed
/// ([`sealed_with`]).
pub(crate) const SEALING_LEN: usize = 12;

/// How an object was sealed, as the start of its frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SealedWith {
    /// Not a frame (a vacated run pointer, a file memo did not write), or
    /// too short to say.
    NoFrame,
    /// A frame whose payload is not encrypted.
    Plaintext,
    /// Encrypted with a store keyring's key of this version.
    KeyVersion(u32),
    /// Encrypted with a run's (or a namespace's) data key.
    DataKey,
    /// A frame of a format version this build does not know (a newer
    /// release's).
    Unknown,
}

/// How the frame beginning with `start` (its first [`SEALING_LEN`] bytes,
/// or all of a shorter object) was sealed.
pub(crate) fn sealed_with(start: &[u8]) -> SealedWith {
    if start.len() < 5 || &start[..4] != MAGIC {
        return SealedWith::NoFrame;
    }
    match start[4] {
        PLAIN_VERSION => SealedWith::Plaintext,
        SEALED_VERSION if start.len() >= SEALING_LEN => match start[7] {
            CIPHER_NONE => SealedWith::Plaintext,
            _ => SealedWith::KeyVersion(u32::from_le_bytes(
                start[8..12].try_into().expect("4 bytes"),
            )),
        },
        DATA_KEY_VERSION => SealedWith::DataKey,
        SEALED_VERSION => SealedWith::NoFrame,
        _ => SealedWith::Unknown,
    }
}

/// Frames `payload` for storage at `path` as `seal` says.
pub(crate) fn seal(path: &Path, payload: &[u8], seal: &Seal) -> Bytes {
    let compressed = compress(payload, seal.compression());
    let key = write_key(seal);
    if compressed.is_none() && key.is_none() {
        return frame_plain(payload);
    }
    let body = match &compressed {
        Some(zstd) => Body::Zstd {
            len: payload.len() as u64,
            zstd,
        },
        None => Body::Raw(payload),
    };
    frame_sealed(path, body, key)
}

/// The committed payload of `framed`, which [`seal`] just made of
/// `payload`: a slice of the frame (no copy) where the frame holds it as
/// it is.
pub(crate) fn payload_of_sealed(framed: &Bytes, payload: &[u8]) -> Bytes {
    if framed[4] == PLAIN_VERSION {
        framed.slice(PLAIN_HEADER_LEN..framed.len() - TRAILER_LEN)
    } else {
        Bytes::copy_from_slice(payload)
    }
}

fn frame_plain(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + OVERHEAD);
    out.put_slice(MAGIC);
    out.put_u8(PLAIN_VERSION);
    out.put_u8(CODEC_RAW);
    out.put_u64_le(payload.len() as u64);
    out.put_slice(payload);
    let crc = crc32fast::hash(&out);
    out.put_u32_le(crc);
    out.freeze()
}

/// What a version-2 frame holds before encryption.
enum Body<'a> {
    Raw(&'a [u8]),
    /// A payload of `len` bytes compressed to one zstd frame.
    Zstd {
        len: u64,
        zstd: &'a [u8],
    },
}

impl Body<'_> {
    fn compression(&self) -> u8 {
        match self {
            Body::Raw(_) => COMPRESSION_NONE,
            Body::Zstd { .. } => COMPRESSION_ZSTD,
        }
    }

    fn len(&self) -> usize {
        match self {
            Body::Raw(raw) => raw.len(),
            Body::Zstd { zstd, .. } => LENGTH_LEN + zstd.len(),
        }
    }

    fn put(&self, out: &mut BytesMut) {
        match self {
            Body::Raw(raw) => out.put_slice(raw),
            Body::Zstd { len, zstd } => {
                out.put_u64_le(*len);
                out.put_slice(zstd);
            }
        }
    }
}

/// The zstd frame of `payload`, if `compression` asks for it and the
/// compressed body is smaller than the payload.
fn compress(payload: &[u8], compression: Compression) -> Option<Vec<u8>> {
    let Compression::Zstd { level, min_size } = compression else {
        return None;
    };
    if payload.len() < min_size {
        return None;
    }
    let zstd = COMPRESSOR.with_borrow_mut(|cached| {
        // A zstd context costs more to make than a small payload takes to
        // compress: each thread keeps one, set to the level asked for.
        if cached.as_ref().is_none_or(|(at, _)| *at != level) {
            *cached = Some((level, zstd::bulk::Compressor::new(level).ok()?));
        }
        let (_, compressor) = cached.as_mut()?;
        compressor.compress(payload).ok()
    })?;
    (LENGTH_LEN + zstd.len() < payload.len()).then_some(zstd)
}

thread_local! {
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

fn frame_sealed(path: &Path, body: Body<'_>, key: Option<FrameKey<'_>>) -> Bytes {
    frame_sealed_with(path, body, key, random_nonce)
}

fn random_nonce() -> XNonce {
    let mut nonce = XNonce::default();
    // A random 192-bit nonce never repeats in practice, whoever writes with
    // the key, so writers need no counter to share one.
    crate::seal::fill_random(&mut nonce);
    nonce
}

fn frame_sealed_with(
    path: &Path,
    body: Body<'_>,
    key: Option<FrameKey<'_>>,
    nonce: impl FnOnce() -> XNonce,
) -> Bytes {
    let sealed_len = body.len()
        + if key.is_some() {
            NONCE_LEN + TAG_LEN
        } else {
            0
        };
    let mut out = BytesMut::with_capacity(DATA_KEY_HEADER_LEN + sealed_len + TRAILER_LEN);
    out.put_slice(MAGIC);
    out.put_u8(match key {
        Some(FrameKey::Data(..)) => DATA_KEY_VERSION,
        _ => SEALED_VERSION,
    });
    out.put_u8(CODEC_RAW);
    out.put_u8(body.compression());
    out.put_u8(if key.is_some() {
        CIPHER_XCHACHA20_POLY1305
    } else {
        CIPHER_NONE
    });
    match key {
        None => out.put_u32_le(0),
        Some(FrameKey::Ring(version, _)) => out.put_u32_le(version),
        Some(FrameKey::Data(key, _)) => {
            out.put_u32_le(key.generation);
            out.put_u64_le(key.id);
        }
    }
    out.put_u64_le(sealed_len as u64);
    match key {
        None => body.put(&mut out),
        Some(key) => {
            let cipher = key.cipher();
            let nonce = nonce();
            let aad = associated_data(&out, path);
            out.put_slice(&nonce);
            let start = out.len();
            body.put(&mut out);
            let tag = cipher
                .encrypt_in_place_detached(&nonce, &aad, &mut out[start..])
                .expect("a payload within memo's limits is never too long to encrypt");
            out.put_slice(&tag);
        }
    }
    let crc = crc32fast::hash(&out);
    out.put_u32_le(crc);
    out.freeze()
}

/// What an encrypted body is bound to: memo's frame, its header (what was
/// done to the payload, with which key) and where the object lives.
fn associated_data(header: &[u8], path: &Path) -> Vec<u8> {
    let path = path.as_ref().as_bytes();
    let domain = if header[4] == DATA_KEY_VERSION {
        DATA_KEY_AAD_DOMAIN
    } else {
        AAD_DOMAIN
    };
    let mut aad = Vec::with_capacity(domain.len() + header.len() + path.len());
    aad.extend_from_slice(domain);
    aad.extend_from_slice(header);
    aad.extend_from_slice(path);
    aad
}

/// Checks the frame of the object at `path` against `seal` and returns its
/// payload, of at most `max_payload` bytes once decompressed. The payload
/// of a plain frame is a slice of `framed` (no copy).
///
/// # Errors
///
/// [`Error::Corrupt`] naming `path` and the failed check: a damaged,
/// truncated or foreign object; an encrypted one that does not
/// authenticate for `path` (moved or copied from another path, run or
/// incarnation, or sealed with another key), whose key version `seal`
/// lacks, or that `seal` cannot decrypt; a plaintext one where `seal`
/// requires encryption.
pub(crate) fn open(path: &Path, framed: Bytes, seal: &Seal, max_payload: u64) -> Result<Bytes> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    if framed.len() >= 5 && &framed[..4] == MAGIC {
        match framed[4] {
            SEALED_VERSION => return open_sealed(path, framed, seal, max_payload, false),
            DATA_KEY_VERSION => return open_sealed(path, framed, seal, max_payload, true),
            _ => {}
        }
    }
    let payload = open_plain(path, framed)?;
    if !seal.reads_plaintext() {
        return Err(corrupt(PLAINTEXT_REFUSED.into()));
    }
    Ok(payload)
}

const PLAINTEXT_REFUSED: &str = "the object is not encrypted, and this store requires \
     encryption: a plaintext object is refused so that none can be planted or downgraded \
     (data stored before encryption was turned on reads with `Seal::accepting_plaintext`)";

/// Checks a version-1 frame.
fn open_plain(path: &Path, framed: Bytes) -> Result<Bytes> {
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
    if framed[4] != PLAIN_VERSION {
        return Err(corrupt(format!(
            "unknown format version {} (this build reads versions {PLAIN_VERSION} to \
             {DATA_KEY_VERSION})",
            framed[4]
        )));
    }
    if framed[5] != CODEC_RAW {
        return Err(corrupt(format!("unknown flags {:#04x}", framed[5])));
    }
    let body = checked_body(path, &framed, PLAIN_HEADER_LEN)?;
    Ok(framed.slice(body))
}

/// The range of the body of a frame whose header is `header_len` bytes,
/// after the length and checksum checks.
fn checked_body(path: &Path, framed: &[u8], header_len: usize) -> Result<std::ops::Range<usize>> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    let len = u64::from_le_bytes(
        framed[header_len - 8..header_len]
            .try_into()
            .expect("8 bytes"),
    );
    let expected = (framed.len() - header_len - TRAILER_LEN) as u64;
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
    Ok(header_len..body_end)
}

/// Checks a version-2 frame (or, `data_key`, a version-3 one), decrypts and
/// decompresses its body.
fn open_sealed(
    path: &Path,
    framed: Bytes,
    seal: &Seal,
    max_payload: u64,
    data_key: bool,
) -> Result<Bytes> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    let header_len = if data_key {
        DATA_KEY_HEADER_LEN
    } else {
        SEALED_HEADER_LEN
    };
    let min = header_len + TRAILER_LEN;
    if framed.len() < min {
        return Err(corrupt(format!(
            "{} bytes is shorter than the {min}-byte frame",
            framed.len()
        )));
    }
    let (codec, compression, cipher) = (framed[5], framed[6], framed[7]);
    let key_version = u32::from_le_bytes(framed[8..12].try_into().expect("4 bytes"));
    let body = checked_body(path, &framed, header_len)?;
    if codec != CODEC_RAW {
        return Err(corrupt(format!("unknown codec {codec}")));
    }
    if compression > COMPRESSION_ZSTD {
        return Err(corrupt(format!("unknown compression {compression}")));
    }
    let body = match (cipher, key_version) {
        (CIPHER_XCHACHA20_POLY1305, 1..) if data_key => {
            let key = data_key_ref(&framed).expect("a version-3 frame of its full header");
            let id = key.id;
            let cipher = match seal.data_key() {
                Some((at, cipher)) if at == key => cipher,
                _ => {
                    return Err(corrupt(format!(
                        "the object is encrypted with data key {id:016x} (generation {}), \
                         which was not fetched for this read",
                        key.generation
                    )));
                }
            };
            decrypt_with(path, &framed[..header_len], &framed[body], cipher, || {
                format!("the data key {id:016x}")
            })?
        }
        _ if data_key => {
            return Err(corrupt(format!(
                "unknown encryption {cipher} with data key generation {key_version}"
            )));
        }
        (CIPHER_NONE, 0) => {
            if !seal.reads_plaintext() {
                return Err(corrupt(PLAINTEXT_REFUSED.into()));
            }
            framed.slice(body)
        }
        (CIPHER_XCHACHA20_POLY1305, 1..) => decrypt(
            path,
            &framed[..SEALED_HEADER_LEN],
            &framed[body],
            seal,
            key_version,
        )?,
        _ => {
            return Err(corrupt(format!(
                "unknown encryption {cipher} with key version {key_version}"
            )));
        }
    };
    match compression {
        COMPRESSION_ZSTD => decompress(path, &body, max_payload),
        _ => Ok(body),
    }
}

fn decrypt(path: &Path, header: &[u8], body: &[u8], seal: &Seal, version: u32) -> Result<Bytes> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    let Some(keys) = seal.keys() else {
        return Err(corrupt(format!(
            "the object is encrypted (key version {version}) and this store has no \
             encryption key: give it the keyring the data was written with (turning \
             encryption on across processes, give every process the key as staged before \
             any process writes with it: the encryption guide's \"Turning it on\")"
        )));
    };
    let Some(cipher) = keys.get(version) else {
        return Err(corrupt(format!(
            "the object is encrypted with {}",
            keys.lacks(version)
        )));
    };
    decrypt_with(path, header, body, cipher, || {
        format!("another key of version {version}")
    })
}

/// Decrypts `body` of the frame whose header is `header` with `cipher`;
/// `key` names the key in the error of a body that does not authenticate.
fn decrypt_with(
    path: &Path,
    header: &[u8],
    body: &[u8],
    cipher: &XChaCha20Poly1305,
    key: impl FnOnce() -> String,
) -> Result<Bytes> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    if body.len() < NONCE_LEN + TAG_LEN {
        return Err(corrupt(format!(
            "an encrypted body of {} bytes is shorter than its nonce and tag",
            body.len()
        )));
    }
    let (nonce, rest) = body.split_at(NONCE_LEN);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
    let mut plaintext = ciphertext.to_vec();
    cipher
        .decrypt_in_place_detached(
            XNonce::from_slice(nonce),
            &associated_data(header, path),
            &mut plaintext,
            Tag::from_slice(tag),
        )
        .map_err(|_| {
            corrupt(format!(
                "the encrypted object does not authenticate for this path: it was moved or \
                 copied here from another path, run or incarnation, or sealed with {}, or \
                 altered",
                key()
            ))
        })?;
    Ok(plaintext.into())
}

fn decompress(path: &Path, body: &[u8], max_payload: u64) -> Result<Bytes> {
    let corrupt = |reason: String| Error::corrupt(path, reason);
    if body.len() < LENGTH_LEN {
        return Err(corrupt("a compressed body without its length".into()));
    }
    let len = u64::from_le_bytes(body[..LENGTH_LEN].try_into().expect("8 bytes"));
    if len > max_payload {
        return Err(corrupt(format!(
            "the compressed payload declares {len} bytes, over the {max_payload} bytes \
             it may take"
        )));
    }
    let len = usize::try_from(len).expect("a length within the limit fits usize");
    let payload = DECOMPRESSOR
        .with_borrow_mut(|cached| {
            if cached.is_none() {
                *cached = Some(zstd::bulk::Decompressor::new()?);
            }
            let decompressor = cached.as_mut().expect("made above");
            decompressor.decompress(&body[LENGTH_LEN..], len)
        })
        .map_err(|e| corrupt(format!("the compressed payload does not decompress: {e}")))?;
    if payload.len() != len {
        return Err(corrupt(format!(
            "the compressed payload declares {len} bytes but holds {}",
            payload.len()
        )));
    }
    Ok(payload.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::Keyring;
    use proptest::prelude::*;

    const MAX: u64 = 1 << 20;

    fn p(path: &str) -> Path {
        Path::from(path)
    }

    fn plain() -> Seal {
        Seal::plain()
    }

    fn compressed() -> Seal {
        Seal::plain().with_compression(Compression::zstd(1, 0))
    }

    fn keys() -> Keyring {
        Keyring::new(1, [7; 32]).unwrap()
    }

    fn encrypted() -> Seal {
        Seal::plain().with_encryption(keys())
    }

    fn both() -> Seal {
        compressed().with_encryption(keys())
    }

    fn corrupt_reason(path: &str, framed: Bytes, seal: &Seal) -> String {
        match open(&p(path), framed, seal, MAX) {
            Err(Error::Corrupt { path: at, reason }) => {
                assert_eq!(at, path);
                reason
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    /// `seal` of `payload` at `path` with the nonce 0, 1, 2, ...
    fn sealed_with_fixed_nonce(path: &str, payload: &[u8], seal: &Seal) -> Bytes {
        let compressed = compress(payload, seal.compression());
        let body = match &compressed {
            Some(zstd) => Body::Zstd {
                len: payload.len() as u64,
                zstd,
            },
            None => Body::Raw(payload),
        };
        let nonce = || {
            let mut nonce = XNonce::default();
            for (i, byte) in nonce.iter_mut().enumerate() {
                *byte = i as u8;
            }
            nonce
        };
        frame_sealed_with(&p(path), body, write_key(seal), nonce)
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex(hex: &str) -> Bytes {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect::<Vec<_>>()
            .into()
    }

    #[test]
    fn round_trips_every_combination() {
        let long = b"a value that repeats, a value that repeats, a value that repeats".repeat(20);
        for seal in [plain(), compressed(), encrypted(), both()] {
            for payload in [&b""[..], b"v", &[0u8; 1000], &long] {
                let framed = super::seal(&p("m/x"), payload, &seal);
                assert_eq!(payload_of_sealed(&framed, payload), payload);
                assert_eq!(&open(&p("m/x"), framed, &seal, MAX).unwrap()[..], payload);
            }
        }
    }

    #[test]
    fn the_frame_is_pinned() {
        // Version 1, still written for a payload stored as it is: a change
        // here is a change of stored data format; the checksum was computed
        // independently (Python: zlib.crc32).
        let framed = seal(&p("p"), b"hi", &plain());
        assert_eq!(
            &framed[..],
            b"MEMO\x01\x00\x02\x00\x00\x00\x00\x00\x00\x00hi5]WX"
        );
    }

    #[test]
    fn a_frame_of_today_still_decodes_in_every_store() {
        // Written by every memo before version 2: plain stores read it as
        // before; an encrypted one only while migrating.
        let old = Bytes::from_static(b"MEMO\x01\x00\x02\x00\x00\x00\x00\x00\x00\x00hi5]WX");
        for seal in [plain(), compressed(), encrypted().accepting_plaintext()] {
            assert_eq!(&open(&p("p"), old.clone(), &seal, MAX).unwrap()[..], b"hi");
        }
    }

    /// The version-2 goldens, one for each of compression and encryption,
    /// at path `m/r/1/k` with key version 1 (all bytes 7) and the nonce
    /// 0, 1, 2, ... (a real write draws a random nonce). The encrypted ones
    /// were decrypted independently by `tools/check_sealed_goldens.py`
    /// (Python's `cryptography` and a hand-written HChaCha20), the zstd
    /// frame by the `zstd` command.
    const GOLDEN_PAYLOAD: &[u8] = b"hello hello hello hello hello hello hello hello";
    const GOLDEN_COMPRESSED: &str = "4d454d4f02000100000000001d000000000000002f0000000000000028b52ffd202f6500003068656c6c6f20010002952287237e79";
    const GOLDEN_ENCRYPTED: &str = "4d454d4f02000001010000005700000000000000000102030405060708090a0b0c0d0e0f1011121314151617c072c7e9953c33c049abee678e87c3c030f65072789b58519b78dbedf5ecfcf26f52e04c9df1329c79c15c185bc09f1ab7fa43df3ae0b0839df8f74bceed17592c8868";
    const GOLDEN_BOTH: &str = "4d454d4f02000101010000004500000000000000000102030405060708090a0b0c0d0e0f10111213141516178717ab85fa1c5ba50d72aebac6cdcaac5fe65072789b5851f21db514b814e46d498306cab04c4c79b5f04538c76b1c51ad";

    #[test]
    fn the_sealed_frames_are_pinned() {
        for (seal, golden) in [
            (compressed(), GOLDEN_COMPRESSED),
            (encrypted(), GOLDEN_ENCRYPTED),
            (both(), GOLDEN_BOTH),
        ] {
            let framed = sealed_with_fixed_nonce("m/r/1/k", GOLDEN_PAYLOAD, &seal);
            assert_eq!(hex(&framed), golden, "the stored frame changed");
            assert_eq!(
                &open(&p("m/r/1/k"), unhex(golden), &seal, MAX).unwrap()[..],
                GOLDEN_PAYLOAD
            );
        }
    }

    /// The version-3 goldens: as the version-2 ones, sealed with the data
    /// key of id 1 (all bytes 9) instead of a keyring's key. Decrypted
    /// independently by `tools/check_sealed_goldens.py`.
    const GOLDEN_DATA_KEY: &str = "4d454d4f030000010100000001000000000000005700000000000000000102030405060708090a0b0c0d0e0f101112131415161737223c076d9626770bc508de9e422beeaf330f92211428db6aaddeed5e3cbe7774c43d626c567ed376672e8e3592fc2a0b22759a72d4213cee5c0afd3e7c1ced3d91e7";
    const GOLDEN_DATA_KEY_COMPRESSED: &str = "4d454d4f030001010100000001000000000000004500000000000000000102030405060708090a0b0c0d0e0f10111213141516177047506b02b64e124f1c4803d6082282c0230f92211428db03c8b01413b0f3e0adb7dde9b900679d19f522b00ca3a89cb5";

    fn data_keyed(seal: Seal) -> Seal {
        seal.with_fetched_data_key(1, 1, [9; 32])
    }

    /// A version-3 golden sealed with a standalone run's key of a
    /// generation (id 0, generation `0x12345678`, all bytes 9). Decrypted
    /// independently by `tools/check_sealed_goldens.py`.
    const GOLDEN_GENERATION: &str = "4d454d4f030000017856341200000000000000005700000000000000000102030405060708090a0b0c0d0e0f101112131415161737223c076d9626770bc508de9e422beeaf330f92211428db6aaddeed5e3cbe7774c43d626c567ed376672e8e3592fc463d7d6463965508583235cb18919079dc7793c9";

    #[test]
    fn the_frames_sealed_with_a_data_key_are_pinned() {
        for (seal, golden) in [
            (data_keyed(Seal::plain()), GOLDEN_DATA_KEY),
            (data_keyed(compressed()), GOLDEN_DATA_KEY_COMPRESSED),
        ] {
            let framed = sealed_with_fixed_nonce("m/r/1/k", GOLDEN_PAYLOAD, &seal);
            assert_eq!(hex(&framed), golden, "the stored frame changed");
            assert_eq!(
                data_key_ref(&framed),
                Some(KeyRef {
                    id: 1,
                    generation: 1
                })
            );
            assert_eq!(
                &open(&p("m/r/1/k"), unhex(golden), &seal, MAX).unwrap()[..],
                GOLDEN_PAYLOAD
            );
        }
    }

    #[test]
    fn a_data_keyed_frame_opens_only_with_its_own_key_fetched() {
        let framed = seal(&p("p/x"), b"secret", &data_keyed(Seal::plain()));
        assert_eq!(framed[4], DATA_KEY_VERSION);
        let other_id = Seal::plain().with_fetched_data_key(2, 1, [9; 32]);
        assert!(corrupt_reason("p/x", framed.clone(), &other_id).contains("not fetched"));
        let other_key = Seal::plain().with_fetched_data_key(1, 1, [8; 32]);
        assert!(
            corrupt_reason("p/x", framed.clone(), &other_key).contains("does not authenticate")
        );
        // A keyring cannot open it, nor can a plain store read it.
        assert!(corrupt_reason("p/x", framed.clone(), &encrypted()).contains("not fetched"));
        assert!(corrupt_reason("p/x", framed, &plain()).contains("not fetched"));
    }

    #[test]
    fn a_frame_sealed_with_a_generation_names_it_and_opens_only_with_it() {
        let seal = Seal::plain().with_fetched_data_key(0, 0x1234_5678, [9; 32]);
        let framed = sealed_with_fixed_nonce("m/r/1/k", GOLDEN_PAYLOAD, &seal);
        assert_eq!(hex(&framed), GOLDEN_GENERATION, "the stored frame changed");
        let key = KeyRef {
            id: 0,
            generation: 0x1234_5678,
        };
        assert_eq!(data_key_ref(&framed), Some(key));
        assert_eq!(
            &open(&p("m/r/1/k"), framed.clone(), &seal, MAX).unwrap()[..],
            GOLDEN_PAYLOAD
        );
        // The same key under another generation is not the one it names;
        // a generation changed in the frame (checksum mended) does not
        // authenticate.
        let other = Seal::plain().with_fetched_data_key(0, 0x1234_5679, [9; 32]);
        assert!(corrupt_reason("m/r/1/k", framed.clone(), &other).contains("not fetched"));
        let mut moved = framed.to_vec();
        moved[8..12].copy_from_slice(&0x1234_5679u32.to_le_bytes());
        let end = moved.len() - TRAILER_LEN;
        let crc = crc32fast::hash(&moved[..end]);
        moved[end..].copy_from_slice(&crc.to_le_bytes());
        assert!(corrupt_reason("m/r/1/k", moved.into(), &other).contains("does not authenticate"));
        // Generation 0 is no generation.
        let mut zero = framed.to_vec();
        zero[8..12].copy_from_slice(&[0; 4]);
        let crc = crc32fast::hash(&zero[..end]);
        zero[end..].copy_from_slice(&crc.to_le_bytes());
        assert!(corrupt_reason("m/r/1/k", zero.into(), &seal).contains("generation 0"));
    }

    #[test]
    fn payload_of_a_plain_frame_is_a_slice_of_it() {
        let framed = seal(&p("p"), b"abc", &plain());
        let payload = open(&p("p"), framed.clone(), &plain(), MAX).unwrap();
        assert_eq!(payload.as_ptr(), framed[PLAIN_HEADER_LEN..].as_ptr());
        assert_eq!(
            payload_of_sealed(&framed, b"abc").as_ptr(),
            framed[PLAIN_HEADER_LEN..].as_ptr()
        );
    }

    #[test]
    fn foreign_unknown_version_and_flags_are_corrupt() {
        let reason = |framed| corrupt_reason("p/x", framed, &plain());
        assert!(reason(Bytes::from_static(b"hello, world! this is json")).contains("magic"));
        let mut v = seal(&p("p/x"), b"x", &plain()).to_vec();
        v[4] = 9;
        assert!(reason(v.into()).contains("version 9"));
        let mut f = seal(&p("p/x"), b"x", &plain()).to_vec();
        f[5] = 1;
        assert!(reason(f.into()).contains("flags"));
        assert!(reason(Bytes::new()).contains("shorter"));
    }

    #[test]
    fn incompressible_or_small_payloads_are_stored_as_they_are() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect();
        let default = Seal::default();
        assert_eq!(seal(&p("p"), &noise, &default)[4], PLAIN_VERSION);
        assert_eq!(seal(&p("p"), &[b'a'; 100], &default)[4], PLAIN_VERSION);
        let text = seal(&p("p"), &[b'a'; 4096], &default);
        assert_eq!((text[4], text[6]), (SEALED_VERSION, COMPRESSION_ZSTD));
        assert!(text.len() < 100, "{}", text.len());
    }

    #[test]
    fn a_moved_or_copied_ciphertext_is_corrupt_naming_where_it_was_read() {
        for seal in [encrypted(), both()] {
            let framed = super::seal(
                &p("memo/memos/r1/0000000000000001/0/k"),
                &[b'a'; 600],
                &seal,
            );
            for elsewhere in [
                "memo/memos/r2/0000000000000001/0/k",
                "memo/memos/r1/0000000000000002/0/k",
                "memo/memos/r1/0000000000000001/1/k",
                "other/memos/r1/0000000000000001/0/k",
            ] {
                let reason = corrupt_reason(elsewhere, framed.clone(), &seal);
                assert!(
                    reason.contains("does not authenticate for this path"),
                    "{reason}"
                );
            }
        }
    }

    #[test]
    fn a_wrong_or_missing_key_is_corrupt() {
        let framed = seal(&p("p/x"), b"secret", &encrypted());
        let other = Seal::plain().with_encryption(Keyring::new(1, [8; 32]).unwrap());
        assert!(corrupt_reason("p/x", framed.clone(), &other).contains("does not authenticate"));
        let newer = Seal::plain().with_encryption(Keyring::new(2, [7; 32]).unwrap());
        assert!(corrupt_reason("p/x", framed.clone(), &newer).contains("key version 1"));
        assert!(corrupt_reason("p/x", framed.clone(), &plain()).contains("no encryption key"));
        // A ring holding the old key beside the new one reads it: rotation.
        let rotated = Seal::plain().with_encryption(keys().with_key(2, [9; 32]).unwrap());
        assert_eq!(
            &open(&p("p/x"), framed, &rotated, MAX).unwrap()[..],
            b"secret"
        );
        assert_eq!(
            seal(&p("p/y"), b"new", &rotated)[8],
            2,
            "writes use the newest key"
        );
    }

    #[test]
    fn an_encrypted_store_refuses_plaintext_unless_migrating() {
        for framed in [
            seal(&p("p/x"), b"planted", &plain()),
            seal(&p("p/x"), &[b'a'; 600], &compressed()),
        ] {
            for seal in [encrypted(), both()] {
                assert!(
                    corrupt_reason("p/x", framed.clone(), &seal).contains("not encrypted"),
                    "{framed:?}"
                );
                let migrating = seal.accepting_plaintext();
                open(&p("p/x"), framed.clone(), &migrating, MAX).unwrap();
            }
        }
    }

    #[test]
    fn a_header_changed_under_a_ciphertext_does_not_authenticate() {
        // Recompute the checksum, as an attacker would: the header is bound
        // to the ciphertext all the same.
        let framed = seal(&p("p/x"), &[b'a'; 600], &both());
        assert_eq!(framed[6], COMPRESSION_ZSTD);
        let mut changed = framed.to_vec();
        changed[6] = COMPRESSION_NONE;
        let end = changed.len() - TRAILER_LEN;
        let crc = crc32fast::hash(&changed[..end]);
        changed[end..].copy_from_slice(&crc.to_le_bytes());
        assert!(corrupt_reason("p/x", changed.into(), &both()).contains("does not authenticate"));
    }

    #[test]
    fn a_compressed_payload_over_its_limit_is_refused_before_it_is_inflated() {
        let framed = seal(&p("p/x"), &[0u8; 100_000], &compressed());
        assert!(framed.len() < 200);
        let err = open(&p("p/x"), framed, &compressed(), 99_999).unwrap_err();
        assert!(err.to_string().contains("over the 99999 bytes"), "{err}");
    }

    proptest! {
        #[test]
        fn any_single_bit_flip_is_detected(payload in proptest::collection::vec(any::<u8>(), 0..64), bit in any::<usize>(), which in 0usize..5) {
            let seal = [plain(), compressed(), encrypted(), both(), data_keyed(compressed())][which % 5].clone();
            let mut framed = super::seal(&p("p"), &payload, &seal).to_vec();
            let bit = bit % (framed.len() * 8);
            framed[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(open(&p("p"), framed.into(), &seal, MAX).is_err());
        }

        #[test]
        fn any_truncation_or_extension_is_detected(payload in proptest::collection::vec(any::<u8>(), 0..64), cut in any::<usize>(), extra in 1usize..8, which in 0usize..5) {
            let seal = [plain(), compressed(), encrypted(), both(), data_keyed(compressed())][which % 5].clone();
            let framed = super::seal(&p("p"), &payload, &seal);
            let cut = cut % framed.len();
            prop_assert!(open(&p("p"), framed.slice(..cut), &seal, MAX).is_err());
            let mut longer = framed.to_vec();
            longer.extend(std::iter::repeat_n(0u8, extra));
            prop_assert!(open(&p("p"), longer.into(), &seal, MAX).is_err());
        }
    }
}
