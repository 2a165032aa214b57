//! Multipart uploads to a local folder, what a blob's writer makes: each
//! part written at its offset into a staging file made as a `put`'s is (in
//! real folders, the missing ones created and synced), then published by a
//! rename with the syncs of a `put`: the file before its name, its folder
//! after.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::UNIX_EPOCH;

use async_trait::async_trait;
use futures::FutureExt;
use object_store::path::Path;
use object_store::{MultipartUpload, PutPayload, PutResult, UploadPart};
use rustix::fs::AtFlags;

use super::{Folder, Syncs, again_after_folder_races, blocking, io_error, meta, object_folder};

/// An upload in progress: its staging file, until completed or aborted.
pub(super) struct Upload {
    staged: Arc<Staged>,
    /// Where the next part goes.
    offset: u64,
    /// Completed or aborted: the staging file is no longer this upload's.
    ended: bool,
}

/// The staging file of an upload, and where it is published.
struct Staged {
    folder: Folder,
    staging: String,
    name: String,
    location: Path,
    /// Taken by completion or abort, so a part written later fails.
    file: Mutex<Option<File>>,
    /// The bytes the parts wrote: the upload's length once every part is.
    written: AtomicU64,
    syncs: Syncs,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("location", &self.staged.location.as_ref())
            .field("staging", &self.staged.staging)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl Upload {
    /// Starts an upload to `location` (blocking): its folders made, its
    /// staging file created.
    pub(super) fn start(
        root: &std::path::Path,
        location: &Path,
        syncs: &Syncs,
    ) -> object_store::Result<Upload> {
        // A delete elsewhere may remove a folder this made before the
        // staging file lands in it: walk again, as a put does.
        let (folder, name, staging, file) = again_after_folder_races(|| {
            let (folder, name) = object_folder(root, location, syncs)?;
            let (staging, file) = folder.open_staging(&name)?;
            Ok((folder, name, staging, file))
        })?;
        Ok(Upload {
            staged: Arc::new(Staged {
                folder,
                staging,
                name,
                location: location.clone(),
                file: Mutex::new(Some(file)),
                written: AtomicU64::new(0),
                syncs: syncs.clone(),
            }),
            offset: 0,
            ended: false,
        })
    }
}

impl Staged {
    fn staging_path(&self) -> std::path::PathBuf {
        self.folder.file.join(&self.staging)
    }

    fn take_file(&self) -> object_store::Result<File> {
        self.file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or(object_store::Error::Generic {
                store: super::STORE,
                source: format!("the upload to {} has ended", self.location).into(),
            })
    }

    /// Writes `data` at `offset` of the staging file.
    fn write(&self, offset: u64, data: &PutPayload) -> object_store::Result<()> {
        let file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(file) = file.as_ref() else {
            return Err(object_store::Error::Generic {
                store: super::STORE,
                source: format!("the upload to {} has ended", self.location).into(),
            });
        };
        let mut at = offset;
        for chunk in data.iter() {
            file.write_all_at(chunk, at)
                .map_err(|e| io_error(&self.staging_path(), e))?;
            at += chunk.len() as u64;
        }
        self.written.fetch_add(at - offset, Ordering::Relaxed);
        Ok(())
    }

    /// Syncs the staging file, renames it into place and syncs its folder:
    /// the object is whole on the disk before it is acknowledged. Refused,
    /// the staging file removed, unless the parts wrote all `len` bytes: a
    /// part not written yet would be a hole of zeros in the object.
    fn publish(&self, len: u64) -> object_store::Result<PutResult> {
        let file = self.take_file()?;
        let written = self.written.load(Ordering::Relaxed);
        if written != len {
            self.remove_staging();
            return Err(object_store::Error::Generic {
                store: super::STORE,
                source: format!(
                    "the upload to {} was completed with {written} of its {len} bytes \
                     written: complete it once every part's future has finished",
                    self.location
                )
                .into(),
            });
        }
        let staging_path = self.staging_path();
        let published = self
            .syncs
            .file(&file, &staging_path)
            .and_then(|()| file.metadata().map_err(|e| io_error(&staging_path, e)))
            .and_then(|metadata| {
                rustix::fs::renameat(&self.folder.fd, &self.staging, &self.folder.fd, &self.name)
                    .map_err(|e| io_error(&self.folder.file.join(&self.name), e.into()))?;
                Ok(metadata)
            });
        let metadata = match published {
            Ok(metadata) => metadata,
            Err(e) => {
                self.remove_staging();
                return Err(e);
            }
        };
        self.folder.sync_names(&self.syncs)?;
        let modified = metadata.modified().unwrap_or(UNIX_EPOCH);
        Ok(PutResult {
            e_tag: meta(
                self.location.clone(),
                modified,
                metadata.len(),
                metadata.ino(),
            )
            .e_tag,
            version: None,
            extensions: Default::default(),
        })
    }

    fn remove_staging(&self) {
        let _ = rustix::fs::unlinkat(&self.folder.fd, &self.staging, AtFlags::empty());
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let offset = self.offset;
        self.offset += data.content_length() as u64;
        let staged = Arc::clone(&self.staged);
        blocking(move || staged.write(offset, &data)).boxed()
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.ended = true;
        let (staged, len) = (Arc::clone(&self.staged), self.offset);
        blocking(move || staged.publish(len)).await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.ended = true;
        let staged = Arc::clone(&self.staged);
        blocking(move || {
            staged.take_file()?;
            staged.remove_staging();
            Ok(())
        })
        .await
    }
}

impl Drop for Upload {
    /// An upload dropped before it ended leaves no staging file.
    fn drop(&mut self) {
        if !self.ended {
            self.staged.remove_staging();
        }
    }
}
