//! Reading a blob: its object streamed a chunk at a time, each chunk
//! checked before it is handed on.

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use sha2::{Digest, Sha256};

use crate::chunk_frame::{self, ChunkAt, HEADER_LEN, TRAILER_LEN};
use crate::error::{Error, Result};
use crate::memo::MemoStore;
use crate::seal::Seal;
use std::borrow::Cow;

use super::{Blob, MAX_CHUNK_SIZE, hex};

/// Where a [`BlobStream`] is in its blob's object.
pub(super) struct Reader {
    pub(super) store: MemoStore,
    /// What the blob's chunks are sealed with.
    pub(super) seal: Seal,
    pub(super) blob: Blob,
    pub(super) path: Path,
    /// The object's body, once requested.
    pub(super) body: Option<BoxStream<'static, object_store::Result<Bytes>>>,
    /// What is left of the last piece of the body.
    pub(super) held: Bytes,
    /// A record's field whose bytes came in more than one piece.
    pub(super) assembled: BytesMut,
    /// The index of the next chunk.
    pub(super) index: u32,
    /// The value's bytes read so far.
    pub(super) read: u64,
    pub(super) digest: Sha256,
    /// Whether the last chunk was read.
    pub(super) done: bool,
}

impl Reader {
    pub(super) async fn next_chunk(mut self) -> Result<Option<(Bytes, Reader)>> {
        if self.done {
            return Ok(None);
        }
        if self.body.is_none() {
            self.open().await?;
        }
        let chunk_size = self.blob.chunk_size();
        let Some(header_bytes) = self.take(HEADER_LEN).await? else {
            return Err(self.corrupt(format!(
                "the object ends after chunk {} of a {}-byte value, before its last chunk \
                 (truncated)",
                i64::from(self.index) - 1,
                self.blob.size
            )));
        };
        let header = chunk_frame::read_header(&self.path, &header_bytes, chunk_size)?;
        if header.index != self.index {
            return Err(self.corrupt(format!(
                "chunk {} is where chunk {} belongs: the chunks are out of order",
                header.index, self.index
            )));
        }
        let truncated = |this: &Reader| {
            this.corrupt(format!(
                "the object ends inside chunk {} (truncated)",
                header.index
            ))
        };
        let Some(frame) = self.take(header.frame_len).await? else {
            return Err(truncated(&self));
        };
        let Some(trailer) = self.take(TRAILER_LEN).await? else {
            return Err(truncated(&self));
        };
        // With data keys, the key the first chunk's frame names is fetched
        // once; after that the seal holds it.
        if let Cow::Owned(seal) = self
            .seal
            .for_reading(&self.path, crate::envelope::data_key_ref(&frame))
            .await?
        {
            self.seal = seal;
        }
        let at = ChunkAt {
            blob: &self.path,
            index: header.index,
            last: header.last,
        };
        let chunk = chunk_frame::open(at, &header_bytes, frame, &trailer, &self.seal, chunk_size)?;
        self.check_chunk_len(header.last, chunk.len())?;
        self.digest.update(&chunk);
        self.read += chunk.len() as u64;
        self.index = self.index.wrapping_add(1);
        if header.last {
            self.check_whole().await?;
            self.done = true;
            if chunk.is_empty() {
                return Ok(None);
            }
        }
        Ok(Some((chunk, self)))
    }

    /// Requests the object, after checking the reference and the object's
    /// size against it.
    async fn open(&mut self) -> Result<()> {
        let blob = &self.blob;
        if !(1..=MAX_CHUNK_SIZE).contains(&blob.chunk_size()) {
            return Err(self.corrupt(format!(
                "its reference names a chunk size of {} bytes, outside 1 to {MAX_CHUNK_SIZE}",
                blob.chunk_size
            )));
        }
        let got = match self.store.object_store().get(&self.path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(self.corrupt(
                    "the blob its reference names is missing: swept with the run that wrote \
                     it, or the reference comes from another store"
                        .to_owned(),
                ));
            }
            Err(e) => return Err(Error::store(&self.path, e)),
        };
        let most = blob.max_object_size();
        if got.meta.size > most {
            return Err(self.corrupt(format!(
                "the object is {} bytes, over the {most} bytes a {}-byte value takes",
                got.meta.size, blob.size
            )));
        }
        self.body = Some(got.into_stream());
        Ok(())
    }

    /// The next `n` bytes of the body, or `None` if it ends before them.
    async fn take(&mut self, n: usize) -> Result<Option<Bytes>> {
        loop {
            if self.assembled.is_empty() && self.held.len() >= n {
                return Ok(Some(self.held.split_to(n)));
            }
            if self.assembled.is_empty() {
                self.assembled.reserve(n);
            }
            let moved = (n - self.assembled.len()).min(self.held.len());
            self.assembled.extend_from_slice(&self.held.split_to(moved));
            if self.assembled.len() == n {
                return Ok(Some(self.assembled.split().freeze()));
            }
            let body = self.body.as_mut().expect("opened before it is read");
            match body.next().await {
                Some(Ok(piece)) => self.held = piece,
                Some(Err(e)) => return Err(Error::store(&self.path, e)),
                None => return Ok(None),
            }
        }
    }

    fn check_chunk_len(&self, last: bool, len: usize) -> Result<()> {
        let chunk_size = self.blob.chunk_size();
        let fits = if last {
            len <= chunk_size
        } else {
            len == chunk_size
        };
        if !fits || self.read + len as u64 > self.blob.size {
            return Err(self.corrupt(format!(
                "chunk {} holds {len} bytes, where a{} chunk of a {}-byte value in {chunk_size}-byte \
                 chunks holds {}",
                self.index,
                if last { " last" } else { "" },
                self.blob.size,
                if last {
                    self.blob.size.saturating_sub(self.read)
                } else {
                    chunk_size as u64
                }
            )));
        }
        Ok(())
    }

    /// After the last chunk: the size, the SHA-256, and nothing after it.
    async fn check_whole(&mut self) -> Result<()> {
        if self.read != self.blob.size {
            return Err(self.corrupt(format!(
                "the value ends at {} bytes; its reference says {} (truncated)",
                self.read, self.blob.size
            )));
        }
        let digest = hex(&std::mem::take(&mut self.digest).finalize());
        if digest != self.blob.sha256 {
            return Err(self.corrupt(format!(
                "the value's SHA-256 is {digest}; its reference says {}",
                self.blob.sha256
            )));
        }
        if self.take(1).await?.is_some() {
            return Err(self.corrupt("the object holds bytes after its last chunk".to_owned()));
        }
        Ok(())
    }

    fn corrupt(&self, reason: String) -> Error {
        Error::corrupt(&self.path, format!("blob: {reason}"))
    }
}
