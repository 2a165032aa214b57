//! Large values: a [`Blob`] is a value written and read as a stream of
//! chunks, so a `#[memoized]` function or a workflow step can return
//! gigabytes without memo holding them in memory, and the memo entry or
//! step receipt that returns it holds only a small reference.
//!
//! A memo value is held whole in memory and refused over
//! [`MemoStore::max_value_size`] (16 MiB by default): that limit is a
//! policy for values, not a ceiling for data. A value larger than it, or
//! produced piece by piece, is written with a [`BlobWriter`] made from the
//! step's [`Memo`]; [`BlobWriter::finish`] returns the [`Blob`], a
//! reference (where the value is, its size, chunk size and SHA-256) that
//! the function returns as its value. A hit returns the same reference,
//! and [`Blob::read`] streams the value back a chunk at a time.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
//! use std::sync::Arc;
//! use futures::TryStreamExt;
//! use memo_runtime::blob::{Blob, BlobWriter};
//! use memo_runtime::{Error, Memo, MemoStore, RunId, memoized, object_store::memory::InMemory};
//!
//! #[memoized]
//! async fn export(memo: &Memo, rows: u32) -> Result<Blob, Error> {
//!     let mut blob = BlobWriter::new(memo);
//!     for row in 0..rows {
//!         blob.write(format!("row {row}\n").as_bytes()).await?;
//!     }
//!     blob.finish().await
//! }
//!
//! let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
//! let memo = store.new_memo(&RunId::new("nightly")?, 0);
//! let blob = export(&memo, 1000).await?;
//! assert_eq!(blob, export(&memo, 1000).await?, "a hit returns the same reference");
//! let bytes: Vec<u8> = blob
//!     .read(&store)
//!     .try_fold(Vec::new(), |mut all, chunk| async move {
//!         all.extend_from_slice(&chunk);
//!         Ok(all)
//!     })
//!     .await?;
//! assert_eq!(bytes.len() as u64, blob.size());
//! # Ok(()) }
//! ```
//!
//! # How a blob is stored, and why
//!
//! One object per value, at `memos/<run>/<inc>/<step>/blobs/<token>` under
//! the store's prefix: in the memo folder of the run incarnation and step
//! that wrote it, so clearing, sweeping or exporting the run takes it with
//! the run's memo entries, with no request more; `<token>` is drawn by the writer, so no two writers ever write
//! one object. The object is written with the store's multipart upload
//! (`object_store`'s [`put_multipart`](object_store::ObjectStore::put_multipart_opts)
//! and [`WriteMultipart`]: S3's, GCS's and Azure's multipart or block
//! uploads; on a local folder a staging file renamed into place), in parts
//! of [`PART_SIZE`] bytes with at most two parts in flight, and read with
//! one streamed `GET`. One object, rather than an object per chunk, keeps a
//! value one request to find, delete or copy, and leaves the parts and
//! their retries to the clouds' own upload protocol.
//!
//! The object is its chunks' records one after another (the record is
//! described in the stored-format guide): each chunk holds
//! [`chunk_size`](BlobWriter::with_chunk_size) bytes of the value (the
//! last one fewer), framed and sealed as every memo value is (compressed,
//! and encrypted, as the store's [`Seal`] says), for a
//! path that names the chunk's index and whether it is the last. So every
//! chunk is checked as it is read: an encrypted chunk moved to another
//! index, another blob or run, a blob cut after any chunk, or chunks put in
//! another order, fail to open, and a plain chunk's checksum binds it the
//! same way against accidents. The reference holds the value's size and
//! SHA-256, checked when the last chunk is read, before it is handed on:
//! a stream that ends without an error delivered exactly the value that
//! was committed. (A reader that must not act on any byte of a plaintext
//! blob before the whole is checked waits for the stream's end.)
//!
//! # Write once, crash safe
//!
//! The blob is written first and its reference committed after, as the
//! memo entry or step receipt that holds it: racing writers of one call
//! each upload their own blob, and all converge on the one reference that
//! committed, as for any memo value. A writer that crashes or is dropped
//! mid-upload leaves no reference, so nothing can read its partial object;
//! a dropped [`BlobWriter`] aborts its upload, and an upload cut short by a
//! crash is, on the clouds, an unfinished multipart upload that the
//! bucket's `AbortIncompleteMultipartUpload` lifecycle rule removes, and
//! on a local folder a staging file in the run's blob folder. A loser's
//! blob, finished but not referenced, stays until its run is swept.
//!
//! # Memory
//!
//! A writer holds the chunk it fills and that chunk's frame while it is
//! sealed, and the upload holds two parts' bytes: two parts in flight, or
//! one in flight and the one being filled (a chunk waits until fewer than
//! two are in flight). A part shares the frames of its records, so it keeps
//! whole the frames its first and last bytes belong to: the two parts keep
//! at most one chunk's frame more than their own bytes. In all a writer
//! takes at most about `2 × part + 3 × chunk`, besides the bytes its caller
//! holds and a zstd context per thread that compresses (made at the
//! thread's first compression and kept); a reader holds one chunk's record
//! (and, compressed, the chunk it opens to). Neither grows with the value. Measured by `tests/tests/large_values_memory.rs`
//! (a counting allocator, every thread of the process) for a 1 GiB value
//! written to and read from a local folder:
//!
//! | chunk size | part size | write peak | read peak |
//! |---|---|---|---|
//! | 1 MiB | 8 MiB | 20 MiB | 2 MiB |
//! | 4 MiB (default) | 8 MiB | 25 MiB | 4 MiB |
//! | 16 MiB | 16 MiB | 65 MiB | 16 MiB |
//!
//! A SQLite file (`store::SqliteStore`, the `sqlite` feature) keeps the
//! same bound: its upload is staged in a file, and it writes and reads a
//! value 1 MiB at a time (the same test, under a 16 MiB limit on SQLite's
//! own heap). An `InMemory` store holds every object in memory, so there
//! only the copies are saved.
//!
//! # Limits
//!
//! A blob is read by the [`MemoStore`] of the same prefix and seal that
//! wrote it (any process's): its reference names it within that store.
//! Return a blob only from a memo of a run, not from a
//! `#[memoized(scope = shared)]` call: a blob belongs to the run that wrote
//! it and is swept with it, while a shared entry outlives the run, and its
//! reference would then name a missing blob (an [`Error::Corrupt`] naming
//! the path). A cloud's multipart upload takes at most 10,000 parts: with
//! [`PART_SIZE`] parts a blob is at most about 78 GiB there; larger chunks
//! make larger parts.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, Stream, StreamExt};
use object_store::path::Path;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chunk_frame;
use crate::error::Result;
use crate::memo::MemoStore;
use crate::run_id::{Incarnation, RunId};
use crate::seal::Seal;
#[cfg(doc)]
use crate::{error::Error, memo::Memo};
#[cfg(doc)]
use object_store::WriteMultipart;

mod read;
mod write;

use read::Reader;
pub use write::BlobWriter;

/// The default number of a value's bytes in each chunk: 4 MiB.
pub const DEFAULT_CHUNK_SIZE: usize = 4 * 1024 * 1024;

/// The largest chunk size: 64 MiB. A reader holds a chunk in memory, so
/// the chunk size that a reference names bounds what reading it may take.
pub const MAX_CHUNK_SIZE: usize = 64 * 1024 * 1024;

/// The size of the parts a blob is uploaded in (8 MiB), or the chunk size
/// if larger: above S3's 5 MiB smallest part.
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// How many parts of one blob are uploaded at once.
const PARTS_IN_FLIGHT: usize = 2;

/// A reference to a large value stored as a stream of chunks: what a
/// `#[memoized]` function or a workflow step returns in place of the value
/// (see [the module](self)).
///
/// It is small (well under 200 bytes encoded) and `Serialize`, so it is
/// stored in the memo entry or step receipt like any value; the value
/// itself is read with [`Blob::read`].
///
/// Its encoding is part of the stored format: a MessagePack map with the
/// fields `run`, `incarnation`, `step`, `id`, `size`, `chunk_size` and
/// `sha256` (as `#[memoized]` and steps encode values), pinned by
/// `a_blob_reference_is_pinned`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blob {
    run: RunId,
    incarnation: Incarnation,
    step: u32,
    id: u64,
    size: u64,
    chunk_size: u32,
    /// Lower-case hex.
    sha256: String,
}

impl fmt::Debug for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Blob")
            .field("run", &self.run.as_str())
            .field("incarnation", &self.incarnation)
            .field("step", &self.step)
            .field("id", &format_args!("{:016x}", self.id))
            .field("size", &self.size)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

impl Blob {
    /// The value's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The value's SHA-256, in lower-case hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The run that wrote it.
    pub fn run_id(&self) -> &RunId {
        &self.run
    }

    /// The incarnation of the run that wrote it.
    pub fn incarnation(&self) -> Incarnation {
        self.incarnation
    }

    /// The step number of the memo that wrote it.
    pub fn step_number(&self) -> u32 {
        self.step
    }

    /// How many of the value's bytes each chunk holds (the last one fewer).
    pub fn chunk_size(&self) -> usize {
        self.chunk_size as usize
    }

    /// The path of its object in `store`.
    pub fn path(&self, store: &MemoStore) -> Path {
        store
            .layout()
            .blob(&self.run, self.incarnation, self.step, self.id)
    }

    /// The value, streamed from `store` a chunk at a time (each item one
    /// chunk, of [`chunk_size`](Self::chunk_size) bytes but the last), each
    /// checked before it is handed on; the value's size and SHA-256 are
    /// checked before the last chunk is. `store` is a [`MemoStore`] of the
    /// prefix and seal the blob was written with. Nothing is requested
    /// until the stream is first polled.
    ///
    /// # Errors
    ///
    /// An item is [`Error::Corrupt`], naming the blob's path and the chunk,
    /// if the object is missing (swept with its run), larger than its
    /// reference allows, truncated, holds its chunks in another order or a
    /// chunk of another blob, fails a checksum or does not decrypt, or ends
    /// with another size or SHA-256 than the reference's; [`Error::Store`]
    /// if a request fails. The stream ends after its first error.
    pub fn read(&self, store: &MemoStore) -> BlobStream {
        let reader = Reader {
            path: self.path(store),
            seal: run_seal(store, &self.run, self.incarnation),
            store: store.clone(),
            blob: self.clone(),
            body: None,
            held: Bytes::new(),
            assembled: BytesMut::new(),
            index: 0,
            read: 0,
            digest: Sha256::new(),
            done: false,
        };
        BlobStream {
            chunks: futures::stream::try_unfold(reader, Reader::next_chunk).boxed(),
        }
    }

    /// The most its object may take: every chunk's record around the
    /// value's bytes.
    fn max_object_size(&self) -> u64 {
        let chunk = u64::from(self.chunk_size.max(1));
        let chunks = self.size.div_ceil(chunk).max(1);
        let per_chunk = (chunk_frame::max_record_len(0)) as u64;
        chunks.saturating_mul(per_chunk).saturating_add(self.size)
    }
}

/// The chunks of a [`Blob`]'s value, as [`Blob::read`] streams them.
#[must_use = "a stream does nothing unless polled"]
pub struct BlobStream {
    chunks: BoxStream<'static, Result<Bytes>>,
}

impl fmt::Debug for BlobStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobStream").finish_non_exhaustive()
    }
}

impl Stream for BlobStream {
    type Item = Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes>>> {
        self.chunks.poll_next_unpin(cx)
    }
}

/// The seal of a blob of incarnation `incarnation` of `run` in `store`:
/// the one its run's memo entries are sealed with, so that whatever makes
/// the run's entries unreadable makes its blobs unreadable too.
fn run_seal(store: &MemoStore, run: &RunId, incarnation: Incarnation) -> Seal {
    store.seal().for_run(run, incarnation).into_owned()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::TryStreamExt;
    use object_store::memory::InMemory;

    use object_store::{ObjectStore, ObjectStoreExt};

    use super::*;
    use crate::chunk_frame::{HEADER_LEN, TRAILER_LEN};
    use crate::error::Error;
    use crate::memo::Memo;
    use crate::seal::{Compression, Keyring, Seal};

    fn run(id: &str) -> RunId {
        RunId::new(id).unwrap()
    }

    /// A value whose every 4 bytes differ from its neighbours'.
    fn value(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[i % 4])
            .collect()
    }

    async fn write(memo: &Memo, bytes: &[u8], chunk_size: usize) -> Blob {
        let mut writer = BlobWriter::new(memo).with_chunk_size(chunk_size).unwrap();
        // In pieces that do not line up with the chunks.
        for piece in bytes.chunks(7) {
            writer.write(piece).await.unwrap();
        }
        writer.finish().await.unwrap()
    }

    async fn read_all(blob: &Blob, store: &MemoStore) -> Result<Vec<u8>> {
        blob.read(store)
            .try_fold(Vec::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await
    }

    fn seals() -> Vec<Seal> {
        vec![
            Seal::plain(),
            Seal::plain().with_compression(Compression::zstd(1, 1)),
            Seal::default().with_encryption(Keyring::new(1, [9; 32]).unwrap()),
        ]
    }

    #[tokio::test]
    async fn a_blob_round_trips_in_every_size_and_seal() {
        for seal in seals() {
            let store = MemoStore::new(Arc::new(InMemory::new()), "m").with_seal(seal);
            let memo = store.new_memo(&run("r"), 1);
            for len in [0, 1, 63, 64, 65, 64 * 3, 1000] {
                let bytes = value(len);
                let blob = write(&memo, &bytes, 64).await;
                assert_eq!(blob.size(), len as u64);
                assert_eq!(blob.sha256(), hex(&Sha256::digest(&bytes)));
                assert_eq!(read_all(&blob, &store).await.unwrap(), bytes, "{len}");
                // Every chunk but the last holds a whole chunk.
                let sizes: Vec<usize> = blob
                    .read(&store)
                    .map_ok(|c| c.len())
                    .try_collect()
                    .await
                    .unwrap();
                assert!(sizes.iter().rev().skip(1).all(|&s| s == 64), "{sizes:?}");
            }
        }
    }

    /// The object of `blob`, its records split apart.
    async fn records(store: &MemoStore, blob: &Blob) -> Vec<Vec<u8>> {
        let object = store
            .object_store()
            .get(&blob.path(store))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let mut records = Vec::new();
        let mut rest = &object[..];
        while !rest.is_empty() {
            let len = u32::from_le_bytes(rest[10..14].try_into().unwrap()) as usize;
            let (record, after) = rest.split_at(HEADER_LEN + len + TRAILER_LEN);
            records.push(record.to_vec());
            rest = after;
        }
        records
    }

    async fn replace(store: &MemoStore, blob: &Blob, records: &[Vec<u8>]) {
        store
            .object_store()
            .put(&blob.path(store), records.concat().into())
            .await
            .unwrap();
    }

    async fn read_error(store: &MemoStore, blob: &Blob) -> String {
        let error = read_all(blob, store).await.unwrap_err();
        let Error::Corrupt { path, reason } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(*path, blob.path(store).to_string());
        reason.clone()
    }

    #[tokio::test]
    async fn truncated_reordered_and_moved_chunks_are_errors_naming_the_blob() {
        for seal in seals() {
            let store = MemoStore::new(Arc::new(InMemory::new()), "m").with_seal(seal);
            let memo = store.new_memo(&run("r"), 1);
            let blob = write(&memo, &value(64 * 3 + 5), 64).await;
            let other = write(&memo, &value(64 * 3 + 5).repeat(1), 64).await;
            let chunks = records(&store, &blob).await;
            assert_eq!(chunks.len(), 4);

            // Cut after a whole chunk, or inside one.
            replace(&store, &blob, &chunks[..3]).await;
            assert!(read_error(&store, &blob).await.contains("truncated"));
            let mut cut = chunks.concat();
            cut.truncate(cut.len() - 3);
            replace(&store, &blob, &[cut]).await;
            assert!(read_error(&store, &blob).await.contains("truncated"));

            // Two chunks swapped.
            let mut swapped = chunks.clone();
            swapped.swap(1, 2);
            replace(&store, &blob, &swapped).await;
            assert!(read_error(&store, &blob).await.contains("out of order"));

            // A chunk of another blob (the same bytes at the same index).
            let mut moved = chunks.clone();
            moved[1] = records(&store, &other).await[1].clone();
            replace(&store, &blob, &moved).await;
            assert!(read_error(&store, &blob).await.contains("chunk 1"));

            // Bytes after the last chunk.
            let mut longer = chunks.clone();
            longer.push(chunks[0].clone());
            replace(&store, &blob, &longer).await;
            let reason = read_error(&store, &blob).await;
            assert!(
                reason.contains("after its last chunk") || reason.contains("over the"),
                "{reason}"
            );

            // The whole object moved to another blob's path.
            replace(&store, &other, &chunks).await;
            assert!(read_error(&store, &other).await.contains("chunk 0"));

            // Gone.
            store
                .object_store()
                .delete(&blob.path(&store))
                .await
                .unwrap();
            assert!(read_error(&store, &blob).await.contains("missing"));
        }
    }

    #[tokio::test]
    async fn a_plaintext_blob_is_refused_by_an_encrypted_store() {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let plain = MemoStore::new(Arc::clone(&objects), "m").with_seal(Seal::plain());
        let blob = write(&plain.new_memo(&run("r"), 0), b"secret", 64).await;
        let keys = Keyring::new(1, [1; 32]).unwrap();
        let encrypted =
            MemoStore::new(objects, "m").with_seal(Seal::default().with_encryption(keys));
        assert!(
            read_error(&encrypted, &blob)
                .await
                .contains("not encrypted")
        );
    }

    #[tokio::test]
    async fn a_dropped_writer_leaves_nothing_to_read() {
        let objects = Arc::new(InMemory::new());
        let store = MemoStore::new(objects.clone(), "m");
        let mut writer = BlobWriter::new(&store.new_memo(&run("r"), 0))
            .with_chunk_size(64)
            .unwrap();
        writer.write(&value(1000)).await.unwrap();
        let path = writer.path().clone();
        drop(writer);
        tokio::task::yield_now().await;
        assert!(objects.head(&path).await.is_err(), "no object is published");
    }

    #[test]
    fn a_blob_reference_is_pinned() {
        let blob = Blob {
            run: run("Run-1"),
            incarnation: Incarnation::from_u64(0xab),
            step: 3,
            id: 0x12,
            size: 5,
            chunk_size: 64,
            sha256: "e".repeat(64),
        };
        let encoded = rmp_serde::to_vec_named(&blob).unwrap();
        let mut golden = b"\x87\xa3run\xa5Run-1\xabincarnation\xcc\xab\xa4step\x03\xa2id\x12\
            \xa4size\x05\xaachunk_size\x40\xa6sha256\xd9\x40"
            .to_vec();
        golden.extend_from_slice("e".repeat(64).as_bytes());
        assert_eq!(encoded, golden, "the stored reference changed");
        assert_eq!(rmp_serde::from_slice::<Blob>(&encoded).unwrap(), blob);
    }
}
