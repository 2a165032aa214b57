//! A multipart upload: its parts staged in a file, written into the
//! object's row when it completes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore, PutOptions, PutPayload, PutResult, UploadPart};

use super::writer::Job;
use super::{SqliteStore, generic, lock};

/// A multipart upload: its parts staged in a file beside the database
/// that no name points to (the system removes it once it is closed, when
/// the upload ends or its process dies), written into the object's row
/// when it completes. It holds no part in memory once the part is staged.
#[derive(Debug)]
pub(super) struct Upload {
    store: SqliteStore,
    location: Path,
    /// The staging file, made with the first part.
    staged: Arc<Mutex<Staged>>,
    /// Where the next part starts in it.
    len: u64,
}

/// What the parts staged so far left.
#[derive(Debug, Default)]
struct Staged {
    file: Option<std::fs::File>,
    /// The bytes written to it: the upload's length once every part is.
    written: u64,
}

impl Upload {
    /// An upload to `location`, with nothing staged yet.
    pub(super) fn new(store: SqliteStore, location: Path) -> Upload {
        Upload {
            store,
            location,
            staged: Arc::new(Mutex::new(Staged::default())),
            len: 0,
        }
    }

    /// The folder the staging file is made in: the database's, so that
    /// what is staged takes the room the database will.
    fn folder(&self) -> PathBuf {
        match self.store.inner.file.parent() {
            Some(folder) if !folder.as_os_str().is_empty() => folder.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }
}

#[async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        use std::io::{Seek, SeekFrom, Write};

        let at = self.len;
        self.len += data.content_length() as u64;
        let staged = Arc::clone(&self.staged);
        let folder = self.folder();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut staged = lock(&staged);
                let file = match staged.file.as_mut() {
                    Some(file) => file,
                    None => staged.file.insert(tempfile::tempfile_in(&folder)?),
                };
                // Parts may be staged in any order: each at its place.
                file.seek(SeekFrom::Start(at))?;
                for bytes in &data {
                    file.write_all(bytes)?;
                }
                staged.written += data.content_length() as u64;
                Ok::<_, std::io::Error>(())
            })
            .await
            .map_err(generic)?
            .map_err(generic)
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let Staged { file, written } = std::mem::take(&mut *lock(&self.staged));
        let len = std::mem::take(&mut self.len);
        if written != len {
            // A part not written yet would be a hole of zeros in the value.
            return Err(generic(format!(
                "the upload was completed with {written} of its {len} bytes written: \
                 complete it once every part's future has finished"
            )));
        }
        let Some(file) = file else {
            // No part: an empty value.
            return self
                .store
                .put_opts(&self.location, PutPayload::default(), PutOptions::default())
                .await;
        };
        let path = self.location.to_string();
        self.store
            .write(|reply| Job::PutStaged {
                path,
                file,
                len,
                reply,
            })
            .await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        drop(std::mem::take(&mut *lock(&self.staged)));
        self.len = 0;
        Ok(())
    }
}
