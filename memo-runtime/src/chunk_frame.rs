//! The frame of one chunk of a large value (a [`Blob`](crate::blob::Blob)):
//! a blob's object is its chunks' records one after another, each small
//! enough to check, open and hand on alone, so a value of any size is
//! written and read a chunk at a time.
//!
//! A record (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `b"MEMB"` |
//! | 1 | format version 1 |
//! | 1 | flags: bit 0 set on the blob's last chunk; the rest must be 0 |
//! | 4 | chunk index, from 0 |
//! | 4 | frame length `n` |
//! | `n` | the chunk's bytes framed as every stored value is ([`envelope`]: plain, compressed, encrypted), for the chunk's own path (below) |
//! | 4 | CRC-32 (IEEE) over the domain tag `b"memo blob chunk v1\0"`, the blob's object path, a 0 byte and every byte of the record before it |
//!
//! The chunk's own path is the blob's object path with one more segment,
//! `<index>` or, for the last chunk, `<index>.last`: an encrypted chunk's
//! associated data holds it, so a chunk read at another index, in another
//! blob, or as the last chunk when it was not (a truncated blob) fails to
//! authenticate. A plain chunk gets the same binding from the record's
//! checksum, which covers the blob's path and the header: it detects a
//! chunk copied from elsewhere or a header changed by accident, not by an
//! attacker, as the checksum of every plain frame does; the value's
//! SHA-256, kept in the blob's reference, is checked once the last chunk
//! is read.

use bytes::{BufMut, Bytes, BytesMut};
use object_store::path::Path;

use crate::envelope;
use crate::error::{Error, Result};
use crate::seal::Seal;

pub(crate) const MAGIC: &[u8; 4] = b"MEMB";
const VERSION: u8 = 1;
const LAST: u8 = 1;
const DOMAIN: &[u8] = b"memo blob chunk v1\0";

/// The bytes of a record's header.
pub(crate) const HEADER_LEN: usize = 4 + 1 + 1 + 4 + 4;
/// The bytes of a record's checksum.
pub(crate) const TRAILER_LEN: usize = 4;

/// The most a record of a chunk of `chunk_size` bytes takes.
pub(crate) fn max_record_len(chunk_size: usize) -> usize {
    HEADER_LEN + chunk_size + envelope::MAX_OVERHEAD + TRAILER_LEN
}

/// Where a chunk is read and written, and which one it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkAt<'a> {
    /// The blob's object path.
    pub(crate) blob: &'a Path,
    /// The chunk's index in the blob, from 0.
    pub(crate) index: u32,
    /// Whether it is the blob's last chunk.
    pub(crate) last: bool,
}

impl ChunkAt<'_> {
    /// The path the chunk's frame is sealed for: the blob's path and
    /// `<index>` or `<index>.last`.
    fn sealed_path(&self) -> Path {
        let name = if self.last {
            format!("{}.last", self.index)
        } else {
            self.index.to_string()
        };
        self.blob.clone().join(name)
    }
}

/// The record of `payload`, the chunk at `at`, sealed by `seal`: its
/// header, its frame and its checksum, to be written in this order (three
/// buffers, so the frame is never copied again).
pub(crate) fn encode(at: ChunkAt<'_>, payload: &[u8], seal: &Seal) -> [Bytes; 3] {
    let frame = envelope::seal(&at.sealed_path(), payload, seal);
    let frame_len = u32::try_from(frame.len()).expect("a chunk's frame fits in 4 GiB");
    let mut header = BytesMut::with_capacity(HEADER_LEN);
    header.put_slice(MAGIC);
    header.put_u8(VERSION);
    header.put_u8(if at.last { LAST } else { 0 });
    header.put_u32_le(at.index);
    header.put_u32_le(frame_len);
    let crc = checksum(at.blob, &header, &frame);
    [
        header.freeze(),
        frame,
        Bytes::copy_from_slice(&crc.to_le_bytes()),
    ]
}

/// A record's header, read before its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The chunk's index.
    pub(crate) index: u32,
    /// Whether it is the blob's last chunk.
    pub(crate) last: bool,
    /// The length of its frame.
    pub(crate) frame_len: usize,
}

/// Checks and reads a record's header (the first [`HEADER_LEN`] bytes of
/// `header`) of a blob at `blob` whose chunks hold at most `chunk_size`
/// bytes.
///
/// # Errors
///
/// [`Error::Corrupt`] naming `blob` if it is not a chunk record of a version
/// this build reads, or declares a frame larger than a chunk's.
pub(crate) fn read_header(blob: &Path, header: &[u8], chunk_size: usize) -> Result<Header> {
    let corrupt = |reason: String| Error::corrupt(blob, reason);
    if &header[..4] != MAGIC {
        return Err(corrupt("not a blob chunk (bad magic)".into()));
    }
    if header[4] != VERSION {
        return Err(corrupt(format!(
            "unknown blob chunk version {} (this build reads version {VERSION})",
            header[4]
        )));
    }
    if header[5] & !LAST != 0 {
        return Err(corrupt(format!(
            "unknown blob chunk flags {:#04x}",
            header[5]
        )));
    }
    let index = u32::from_le_bytes(header[6..10].try_into().expect("4 bytes"));
    let frame_len = u32::from_le_bytes(header[10..14].try_into().expect("4 bytes")) as usize;
    let most = max_record_len(chunk_size) - HEADER_LEN - TRAILER_LEN;
    if frame_len > most {
        return Err(corrupt(format!(
            "chunk {index} declares a {frame_len}-byte frame, over the {most} bytes a chunk \
             of {chunk_size} bytes takes"
        )));
    }
    Ok(Header {
        index,
        last: header[5] & LAST != 0,
        frame_len,
    })
}

/// Checks the record of the chunk at `at` (its `header`, `frame` and
/// `trailer`, as read) and opens its frame with `seal`: the chunk's bytes,
/// at most `chunk_size` of them.
///
/// # Errors
///
/// [`Error::Corrupt`] naming the blob's path and the chunk if the checksum
/// fails or the frame does not open for the chunk's own path (a chunk moved
/// from another index, another blob, or truncated after it; a wrong key; a
/// plaintext chunk in an encrypted store).
pub(crate) fn open(
    at: ChunkAt<'_>,
    header: &[u8],
    frame: Bytes,
    trailer: &[u8],
    seal: &Seal,
    chunk_size: usize,
) -> Result<Bytes> {
    let stored = u32::from_le_bytes(trailer.try_into().expect("4 bytes"));
    let actual = checksum(at.blob, header, &frame);
    if stored != actual {
        return Err(Error::corrupt(
            at.blob,
            format!(
                "chunk {} fails its checksum (stored {stored:#010x}, computed {actual:#010x}): \
                 damaged, or moved from another blob",
                at.index
            ),
        ));
    }
    envelope::open(&at.sealed_path(), frame, seal, chunk_size as u64).map_err(|e| match e {
        Error::Corrupt { path, reason } => Error::corrupt(
            at.blob,
            format!("chunk {} (sealed for {path}): {reason}", at.index),
        ),
        other => other,
    })
}

fn checksum(blob: &Path, header: &[u8], frame: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(DOMAIN);
    crc.update(blob.as_ref().as_bytes());
    crc.update(&[0]);
    crc.update(header);
    crc.update(frame);
    crc.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::{Compression, Keyring};

    fn record(parts: &[Bytes; 3]) -> Vec<u8> {
        parts.iter().flat_map(|b| b.iter().copied()).collect()
    }

    fn reopen(at: ChunkAt<'_>, bytes: &[u8], seal: &Seal) -> Result<Bytes> {
        let header = read_header(at.blob, &bytes[..HEADER_LEN], 64)?;
        let frame_end = HEADER_LEN + header.frame_len;
        open(
            ChunkAt {
                index: header.index,
                last: header.last,
                ..at
            },
            &bytes[..HEADER_LEN],
            Bytes::copy_from_slice(&bytes[HEADER_LEN..frame_end]),
            &bytes[frame_end..],
            seal,
            64,
        )
    }

    #[test]
    fn the_chunk_record_is_pinned() {
        // A change here is a change of stored data format. The checksum was
        // computed independently (Python: zlib.crc32 of
        // b"memo blob chunk v1\0" + b"m/blobs/b" + b"\0" + header + frame).
        let blob = Path::from("m/blobs/b");
        let at = ChunkAt {
            blob: &blob,
            index: 2,
            last: true,
        };
        let bytes = record(&encode(at, b"hi", &Seal::plain()));
        let mut golden = b"MEMB\x01\x01\x02\x00\x00\x00\x14\x00\x00\x00".to_vec();
        golden.extend_from_slice(b"MEMO\x01\x00\x02\x00\x00\x00\x00\x00\x00\x00hi5]WX");
        golden.extend_from_slice(&GOLDEN_CRC.to_le_bytes());
        assert_eq!(bytes, golden, "the stored chunk record changed");
        assert_eq!(&reopen(at, &bytes, &Seal::plain()).unwrap()[..], b"hi");
    }

    const GOLDEN_CRC: u32 = 0xf8b4_31d2;

    #[test]
    fn a_chunk_opens_only_where_it_was_written() {
        let blob = Path::from("m/blobs/b");
        let other = Path::from("m/blobs/c");
        let keys = Keyring::new(1, [7; 32]).unwrap();
        for seal in [
            Seal::plain(),
            Seal::plain().with_compression(Compression::zstd(1, 1)),
            Seal::plain().with_encryption(keys),
        ] {
            let at = ChunkAt {
                blob: &blob,
                index: 1,
                last: false,
            };
            let bytes = record(&encode(at, &[b'x'; 40], &seal));
            assert_eq!(reopen(at, &bytes, &seal).unwrap().len(), 40);
            // The same record read in another blob.
            let moved = ChunkAt { blob: &other, ..at };
            let error = reopen(moved, &bytes, &seal).unwrap_err();
            assert!(
                matches!(&error, Error::Corrupt { path, .. } if path == "m/blobs/c"),
                "{error}"
            );
            // A header that says it is another chunk, or the last one.
            for (offset, byte) in [(6, 0u8), (5, LAST)] {
                let mut changed = bytes.clone();
                changed[offset] = byte;
                let error = reopen(at, &changed, &seal).unwrap_err();
                assert!(
                    matches!(&error, Error::Corrupt { reason, .. } if reason.contains("chunk")),
                    "{error}"
                );
            }
        }
    }

    #[test]
    fn an_oversize_frame_is_refused_from_its_header() {
        let blob = Path::from("m/blobs/b");
        let mut header = b"MEMB\x01\x00\x00\x00\x00\x00".to_vec();
        header.extend_from_slice(&u32::MAX.to_le_bytes());
        let error = read_header(&blob, &header, 64).unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { reason, .. } if reason.contains("declares")),
            "{error}"
        );
    }
}
