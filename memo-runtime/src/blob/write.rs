//! Writing a blob: chunks sealed and uploaded as parts of one object,
//! the reference returned last.

use std::borrow::Cow;
use std::fmt;

use bytes::BytesMut;
use futures::stream::{Stream, StreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, PutMultipartOptions, WriteMultipart};
use sha2::{Digest, Sha256};

use crate::chunk_frame::{self, ChunkAt};
use crate::error::{Error, Result};
use crate::memo::{Memo, MemoStore};
use crate::run_id::{Incarnation, RunId, unique_token};
use crate::seal::Seal;

use super::{Blob, DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, PART_SIZE, PARTS_IN_FLIGHT, hex, run_seal};

/// Writes a large value a chunk at a time into a [`Blob`] of the run and
/// step of a [`Memo`]; see [the module](super).
///
/// Write the value with [`write`](Self::write) (or
/// [`write_stream`](Self::write_stream)), then [`finish`](Self::finish)
/// for the reference to return. A writer dropped before it finished (a
/// failed body, a cancelled call) aborts its upload: nothing references
/// what it wrote.
pub struct BlobWriter {
    store: MemoStore,
    /// What the chunks are sealed with.
    seal: Seal,
    run: RunId,
    incarnation: Incarnation,
    step: u32,
    id: u64,
    path: Path,
    chunk_size: usize,
    /// The chunk being filled.
    buffer: BytesMut,
    /// The index of the next chunk to upload.
    index: u32,
    /// The value's bytes written so far.
    size: u64,
    digest: Sha256,
    /// Started with the first chunk's upload.
    upload: Option<WriteMultipart>,
    /// Set once an upload failed: the writer takes nothing more.
    failed: bool,
}

impl fmt::Debug for BlobWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobWriter")
            .field("path", &self.path.as_ref())
            .field("chunk_size", &self.chunk_size)
            .field("written", &self.size)
            .finish_non_exhaustive()
    }
}

impl BlobWriter {
    /// A writer of a new blob in `memo`'s run, incarnation and step, in
    /// chunks of [`DEFAULT_CHUNK_SIZE`], sealed by `memo`'s store's seal.
    /// Nothing is written until the first chunk is full.
    pub fn new(memo: &Memo) -> BlobWriter {
        let store = memo.memo_store().clone();
        let id = unique_token();
        let path = store
            .layout()
            .blob(memo.run_id(), memo.incarnation(), memo.step_number(), id);
        BlobWriter {
            seal: run_seal(&store, memo.run_id(), memo.incarnation()),
            store,
            run: memo.run_id().clone(),
            incarnation: memo.incarnation(),
            step: memo.step_number(),
            id,
            path,
            chunk_size: DEFAULT_CHUNK_SIZE,
            buffer: BytesMut::new(),
            index: 0,
            size: 0,
            digest: Sha256::new(),
            upload: None,
            failed: false,
        }
    }

    /// The same writer with chunks of `bytes` bytes: larger chunks make
    /// fewer, larger records and parts, and take more memory to write and
    /// read.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `bytes` is 0 or over [`MAX_CHUNK_SIZE`],
    /// or if something was written already.
    pub fn with_chunk_size(mut self, bytes: usize) -> Result<BlobWriter> {
        let invalid = |reason: String| Error::InvalidConfig {
            what: "blob chunk size".into(),
            reason,
        };
        if !(1..=MAX_CHUNK_SIZE).contains(&bytes) {
            return Err(invalid(format!(
                "{bytes} bytes is outside 1 to {MAX_CHUNK_SIZE}"
            )));
        }
        if self.size > 0 {
            return Err(invalid("set it before writing".into()));
        }
        self.chunk_size = bytes;
        Ok(self)
    }

    /// The path of the blob's object.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `bytes` to the value, uploading each chunk as it fills
    /// (waiting while two parts are in flight).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if an upload fails; the writer then takes nothing
    /// more ([`Error::InvalidWrite`]), and its upload is aborted when it is
    /// dropped.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.check_usable()?;
        let mut rest = bytes;
        while !rest.is_empty() {
            // A full chunk is uploaded only once more bytes come, so the
            // last one is known to be the last when it is sealed.
            if self.buffer.len() == self.chunk_size {
                self.upload_chunk(false).await?;
            }
            if self.buffer.is_empty() {
                self.buffer.reserve(self.chunk_size);
            }
            let taken = (self.chunk_size - self.buffer.len()).min(rest.len());
            self.buffer.extend_from_slice(&rest[..taken]);
            self.size += taken as u64;
            rest = &rest[taken..];
        }
        Ok(())
    }

    /// Appends every item of `stream` to the value, in order.
    ///
    /// # Errors
    ///
    /// The first error of `stream`, or of [`write`](Self::write) converted
    /// into `E`.
    pub async fn write_stream<S, B, E>(&mut self, stream: S) -> Result<(), E>
    where
        S: Stream<Item = Result<B, E>>,
        B: AsRef<[u8]>,
        E: From<Error>,
    {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            self.write(item?.as_ref()).await?;
        }
        Ok(())
    }

    /// Uploads the last chunk, completes the upload and returns the
    /// reference to return from the memoized function or step.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if an upload or its completion fails (the upload is
    /// aborted); [`Error::InvalidWrite`] if an earlier write failed.
    pub async fn finish(mut self) -> Result<Blob> {
        self.check_usable()?;
        self.upload_chunk(true).await?;
        let upload = self
            .upload
            .take()
            .expect("the last chunk started the upload");
        if let Err(e) = upload.finish().await {
            self.failed = true;
            return Err(Error::store(&self.path, e));
        }
        Ok(Blob {
            run: self.run.clone(),
            incarnation: self.incarnation,
            step: self.step,
            id: self.id,
            size: self.size,
            chunk_size: u32::try_from(self.chunk_size).expect("at most MAX_CHUNK_SIZE"),
            sha256: hex(&std::mem::take(&mut self.digest).finalize()),
        })
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidWrite {
                run_id: self.run.to_string(),
                reason: format!(
                    "an upload of the blob {} failed; write the value again with a new writer",
                    self.path
                ),
            });
        }
        Ok(())
    }

    /// Seals the chunk in the buffer and hands it to the upload.
    async fn upload_chunk(&mut self, last: bool) -> Result<()> {
        let result = self.try_upload_chunk(last).await;
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    async fn try_upload_chunk(&mut self, last: bool) -> Result<()> {
        if self.index == u32::MAX && !last {
            return Err(Error::InvalidWrite {
                run_id: self.run.to_string(),
                reason: format!(
                    "the blob {} would take more than 2^32 chunks: use larger chunks",
                    self.path
                ),
            });
        }
        let chunk = self.buffer.split().freeze();
        self.digest.update(&chunk);
        // With data keys, the run's key is fetched (or made) once, at the
        // first chunk; after that the seal holds it.
        if let Cow::Owned(seal) = self.seal.for_writing(&self.path).await? {
            self.seal = seal;
        }
        let at = ChunkAt {
            blob: &self.path,
            index: self.index,
            last,
        };
        let record = chunk_frame::encode(at, &chunk, &self.seal);
        drop(chunk);
        let upload = match &mut self.upload {
            Some(upload) => upload,
            None => {
                let multipart = self
                    .store
                    .object_store()
                    .put_multipart_opts(&self.path, PutMultipartOptions::default())
                    .await
                    .map_err(|e| Error::store(&self.path, e))?;
                let part_size = PART_SIZE.max(self.chunk_size);
                self.upload
                    .insert(WriteMultipart::new_with_chunk_size(multipart, part_size))
            }
        };
        upload
            .wait_for_capacity(PARTS_IN_FLIGHT)
            .await
            .map_err(|e| Error::store(&self.path, e))?;
        for bytes in record {
            upload.put(bytes);
        }
        self.index = self.index.wrapping_add(1);
        Ok(())
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        let Some(upload) = self.upload.take() else {
            return;
        };
        // Not finished: abort, so the store drops the parts (a local
        // folder its staging file, the clouds the uploaded parts).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let path = self.path.clone();
            runtime.spawn(async move {
                if let Err(e) = upload.abort().await {
                    tracing::debug!(%path, error = %e, "aborting an unfinished blob upload failed");
                }
            });
        }
    }
}
