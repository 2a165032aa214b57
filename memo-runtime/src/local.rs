//! The local-folder store: `object_store`'s `LocalFileSystem`, made to refuse
//! every path that reaches through a symlink or ends at anything but a
//! regular file, so that no other writer of a shared folder can steer memo
//! outside it.
//!
//! `LocalFileSystem` follows symlinks everywhere: its listings descend into
//! a symlinked folder, and a delete removes whatever a listing returned. A
//! writer of a shared folder could plant an expired marker for a made-up run
//! and make that run's memo folder a symlink to a folder elsewhere; a sweep
//! would then delete every file there. A FIFO at an entry's path blocks a
//! read for ever. [`LocalFolder`] acts only on regular files reached through
//! real folders below its root.
//!
//! # How each call is made safe, and the window that is left
//!
//! Reads, deletes and puts leave no window: they walk the path one
//! folder at a time with `openat(O_DIRECTORY | O_NOFOLLOW)` from the root, so
//! every folder they pass is a real folder at the moment it is passed, and
//! then act on the last name *relative to the folder handle they hold*: a
//! read opens it with `O_NOFOLLOW | O_NONBLOCK` (a FIFO opens without
//! blocking) and checks the opened handle with `fstat` before returning it;
//! a delete `unlinkat`s it (holding the lock a conditional update takes on
//! the file, see below), which removes a symlink itself, never its
//! target; a `put` (the only write memo makes) creates the folders it lacks
//! with `mkdirat`, writes a staging file opened with `O_CREAT | O_EXCL |
//! O_NOFOLLOW` and publishes it with `linkat` (a create) or `renameat` (an
//! overwrite), all in that folder, as `LocalFileSystem` does by path. A
//! conditional update (`PutMode::Update`, which `LocalFileSystem` lacks)
//! renames over the file only while it holds a lock on it and the file is
//! still the version read: see `update.rs`.
//! Swapping a folder for a symlink after the walk passed it changes nothing:
//! the handles already point at the real folders.
//!
//! Listings walk the same way (a handle per folder, `fstatat` without
//! following for each name) and never descend through a symlink: a symlink
//! or a non-regular file in a listed folder is an error item naming it, and
//! the walk goes on beside it.
//!
//! A multipart upload (what a blob's writer makes) is staged as a `put`
//! is: its staging file created in real folders reached from the root,
//! each part written at its offset through the handle, then renamed into
//! place in the folder it holds. Copies and renames, which memo never
//! makes, are checked by the same walk and then delegated to
//! `LocalFileSystem`, which
//! resolves the path again: a writer that swaps a folder on the way for a
//! symlink between the check and the call could redirect them.
//!
//! The root itself, as given by the user, may be a symlink: it is resolved
//! once, when the store is built. Everything below it must be real.
//!
//! # Durability: what a power loss keeps
//!
//! A `put` is published by one `linkat` or `renameat` of a complete staging
//! file, so a reader sees the whole object or none, and once the call
//! returns, a crash of the *process* cannot undo it: the kernel holds it.
//! A *power loss* (or a kernel crash) can, unless the file and the folders
//! that name it reached the disk. By default ([`LocalFolder::with_fsync`]
//! `true`) a `put`:
//!
//! 1. `fsync`s the staging file before it is linked or renamed into place,
//!    so the name can never point at data that was not written;
//! 2. `fsync`s each folder it created (`mkdirat`) in its parent, that is,
//!    the parent, before going on (also when another writer created it in
//!    the same instant: `EEXIST` is synced too);
//! 3. `fsync`s the folder holding the object after the link or rename (and
//!    the removal of the staging name), before it returns.
//!
//! So an acknowledged write (a memo entry, a step commit, a run pointer)
//! survives a power loss. A folder found already present is not synced
//! again: its creator synced it before acknowledging its own write. The
//! one window left is a folder another writer created an instant earlier
//! and has not yet synced; on journaling file systems (ext4, XFS) the
//! `fsync` of our file commits that earlier `mkdir` with it.
//!
//! A delete `fsync`s the folder it removed the name from before it returns,
//! for two reasons that matter to memo. Deletes are ordered: a run's
//! deletion removes its incarnation record before its pointer, a sweep
//! removes a run's entries before its terminal marker. If a power loss undid
//! an earlier delete but kept a later one, a record would be back without
//! its pointer, and the next read would restore the pointer from it (a
//! deleted run back from the dead); entries back without their marker would
//! never be swept again, and a later run of the same id would find them.
//! For a write-once entry alone the value that reappears is the one that
//! was written, and a superseded checkpoint that reappears is superseded
//! again by the next one, but the store cannot tell these deletes from the
//! ordered ones.
//!
//! Two kinds of delete are not synced: a status hint's and a due-run
//! entry's (see [`is_unsynced_delete`]). Both are index entries that memo
//! checks against the run before it acts on one, and every delete of one
//! is best effort, made after what it follows is durable: a hint once the
//! run's change is committed, a due-run entry once the run's terminal
//! marker is written (or once a poll acted on it). A crash just before
//! such a delete leaves the entry where it was, a state memo meets and
//! resolves anyway (a listing tidies a stale hint, a poll or a sweep
//! deletes an entry whose run has ended or moved on), and a power loss
//! that undoes the delete leaves the same state. Neither brings anything
//! back: memo restores a run from its record only, never from a hint or an
//! entry, so no later delete relies on one of these having reached the
//! disk. Each is a sync fewer: three a run.
//!
//! Folders a delete empties are removed without a
//! sync: an empty folder that reappears holds nothing. memo's index folders
//! that run after run enters and leaves (a status-hint folder, the due-run
//! index's folder) are kept when they empty, so that the next run does not
//! create them again: a folder's creation costs a sync of its parent.
//!
//! With [`LocalFolder::with_fsync`] `false` (the `file://` store option
//! `fsync=false`) no call syncs: everything survives a crash of the process,
//! and a power loss may lose or undo the last writes and deletes (each
//! object stays whole or absent, never torn). That suits a cache, tests, or
//! a disk whose loss is covered otherwise.
//!
//! A multipart upload (a blob) is synced as a `put` is: each folder it
//! created, then the staging file before it is renamed into place, then
//! the folder holding it before the completion returns. Copies and
//! renames, which memo never makes, are `LocalFileSystem`'s and never sync.

use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Write};
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use backon::{BackoffBuilder, ExponentialBuilder};
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions,
};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

mod multipart;
mod ordered;
mod update;

/// The name this store gives in `object_store::Error::Generic`.
const STORE: &str = "LocalFolder";

/// How many names a listing reads per blocking task (as `LocalFileSystem`).
const LIST_CHUNK: usize = 1024;

/// How many deletes run at once (as `LocalFileSystem`).
const DELETE_CONCURRENCY: usize = 10;

/// A store in a local folder that never reads, writes, lists or deletes
/// through a symlink or a non-regular file.
///
/// It is what [`store_from_url`](crate::store::store_from_url) opens for a
/// `file://` URL. Paths map to files exactly as in `object_store`'s
/// [`LocalFileSystem`], which does the writes, so a folder written by one
/// is read by the other. A path that reaches through a symlink, or ends at
/// a FIFO, a socket or a device, is refused; memo reports the refusal as
/// [`Error::Corrupt`](crate::Error::Corrupt) naming the object and the file.
/// Reads, deletes, listings and `put`s act relative to folder handles
/// opened without following symlinks, so no race can redirect them, and
/// so do multipart uploads (a blob's); copies and renames (which memo never makes) are
/// checked and then made by path, which leaves the window described in the
/// repository's `SECURITY.md`.
///
/// Unlike `LocalFileSystem`, it has a conditional update
/// ([`PutMode::Update`] with the e-tag a read reported): the file is
/// replaced only if it is still that version, and of writers racing to
/// replace one version exactly one wins; the others get
/// `Error::Precondition`, across processes (an `flock` on the file while it
/// is checked and replaced; a missing file is `Precondition` too).
///
/// # Durability
///
/// By default every `put` and delete waits for the disk (`fsync` of the
/// file before it is published and of its folder after, and of the parent
/// of every folder a `put` creates), so an acknowledged commit survives a
/// power loss, not only a crash of the process. Deletes of memo's status
/// hints and due-run entries are the exception: a power loss may bring one
/// back, which memo resolves as it resolves a crash just before the
/// delete.
/// [`with_fsync(false)`](LocalFolder::with_fsync) (the `file://` store
/// option `fsync=false`) skips every sync: faster, and a power loss may
/// then lose the last acknowledged writes. The module's source explains
/// each sync and why deletes are synced too.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memo_runtime::store::LocalFolder;
/// use memo_runtime::object_store::ObjectStoreExt;
///
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir(dir.path().join("elsewhere"))?;
/// std::fs::write(dir.path().join("elsewhere/secret"), "keep")?;
/// let root = dir.path().join("store");
/// std::fs::create_dir_all(root.join("memos"))?;
/// std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("memos/run"))?;
///
/// let store = LocalFolder::new(&root)?;
/// assert!(store.get(&"memos/run/secret".into()).await.is_err());
/// assert!(store.delete(&"memos/run/secret".into()).await.is_err());
/// assert!(dir.path().join("elsewhere/secret").exists());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LocalFolder {
    inner: LocalFileSystem,
    /// The resolved root folder, shared with blocking tasks.
    root: Arc<PathBuf>,
    /// Whether writes and deletes wait for the disk.
    syncs: Syncs,
}

impl LocalFolder {
    /// A store rooted at the folder `root`, which must exist.
    ///
    /// `root` may be a symlink (say `/var/lib/memo` linked to a data disk):
    /// it is resolved here, once. Every folder below it must be a real one.
    ///
    /// # Errors
    ///
    /// An `object_store` error if `root` cannot be resolved (it does not
    /// exist, or is not readable).
    pub fn new(root: impl AsRef<std::path::Path>) -> object_store::Result<LocalFolder> {
        let root = root.as_ref();
        let resolved = std::fs::canonicalize(root).map_err(|e| io_error(root, e))?;
        let inner = LocalFileSystem::new_with_prefix(&resolved)?;
        Ok(LocalFolder {
            inner,
            root: Arc::new(resolved),
            syncs: Syncs::new(true),
        })
    }

    /// This store, with every `put` and delete waiting for the disk
    /// (`fsync`, the default) or not (`false`).
    ///
    /// With `true`, an acknowledged write or delete survives a power loss
    /// (but a status hint's or a due-run entry's delete); with `false`,
    /// only a crash of the process (a power loss may lose the last ones; no
    /// object is ever torn). See the
    /// [type's documentation](LocalFolder#durability).
    ///
    /// ```
    /// use memo_runtime::store::LocalFolder;
    ///
    /// let dir = tempfile::tempdir()?;
    /// assert!(LocalFolder::new(dir.path())?.fsyncs());
    /// let scratch = LocalFolder::new(dir.path())?.with_fsync(false);
    /// assert!(!scratch.fsyncs());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_fsync(mut self, fsync: bool) -> LocalFolder {
        self.syncs.on = fsync;
        self
    }

    /// Whether writes and deletes wait for the disk
    /// ([`with_fsync`](LocalFolder::with_fsync)).
    pub fn fsyncs(&self) -> bool {
        self.syncs.on
    }

    /// The resolved root folder.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Checks, before a write, that `location` reaches through no symlink.
    async fn check_write(&self, location: &Path) -> object_store::Result<()> {
        let root = Arc::clone(&self.root);
        let location = location.clone();
        blocking(move || check_write(&root, &location)).await
    }
}

impl std::fmt::Display for LocalFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalFolder({}", self.root.display())?;
        if !self.syncs.on {
            f.write_str(", without fsync")?;
        }
        f.write_str(")")
    }
}

/// A path a [`LocalFolder`] refused to act on: it reaches through a symlink,
/// or ends at something other than a regular file (or a folder, for a
/// listing). memo maps it to [`Error::Corrupt`](crate::Error::Corrupt).
#[derive(Debug, thiserror::Error)]
#[error(
    "{} is {kind}: a local store reads, writes, lists and deletes only regular files \
     in real folders below its root, never through a symlink (did another writer of \
     the folder put it there?)",
    file.display()
)]
pub(crate) struct Refused {
    /// The object path (or listed prefix) the call was about.
    pub(crate) location: String,
    /// The file found in the way.
    file: PathBuf,
    /// What it is: "a symlink", "a FIFO", ...
    kind: &'static str,
}

/// The refusal inside `error`, if it is one.
pub(crate) fn refusal(error: &object_store::Error) -> Option<&Refused> {
    match error {
        object_store::Error::Generic { store, source } if *store == STORE => {
            source.downcast_ref::<Refused>()
        }
        _ => None,
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for LocalFolder {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if !opts.attributes.is_empty() {
            // As LocalFileSystem, which answers NotImplemented for these.
            return self.inner.put_opts(location, payload, opts).await;
        }
        let root = Arc::clone(&self.root);
        let location = location.clone();
        let syncs = self.syncs.clone();
        blocking(move || match &opts.mode {
            // LocalFileSystem has none; see `update`.
            PutMode::Update(version) => update::update(&root, &location, &payload, version, &syncs),
            mode => put(&root, &location, &payload, mode, &syncs),
        })
        .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if !opts.attributes.is_empty() {
            // As LocalFileSystem, which answers NotImplemented for these.
            self.check_write(location).await?;
            return self.inner.put_multipart_opts(location, opts).await;
        }
        let root = Arc::clone(&self.root);
        let location = location.clone();
        let syncs = self.syncs.clone();
        let upload = blocking(move || multipart::Upload::start(&root, &location, &syncs)).await?;
        Ok(Box::new(upload))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let root = Arc::clone(&self.root);
        let location = location.clone();
        blocking(move || get(&root, location, options)).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let root = Arc::clone(&self.root);
        let location = location.clone();
        let ranges = ranges.to_vec();
        blocking(move || {
            let (file, path) = open_regular(&root, &location)?;
            ranges
                .iter()
                .map(|range| read_range(&file, &path, range))
                .collect()
        })
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let root = Arc::clone(&self.root);
        let syncs = self.syncs.clone();
        locations
            .map(move |location| {
                let root = Arc::clone(&root);
                let syncs = syncs.clone();
                async move {
                    let location = location?;
                    blocking(move || delete(&root, &location, &syncs).map(|()| location)).await
                }
            })
            .buffered(DELETE_CONCURRENCY)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let walk = Walk::new(Arc::clone(&self.root), prefix.cloned().unwrap_or_default());
        stream::unfold(Some(walk), |walk| async move {
            let mut walk = walk?;
            let chunk = blocking(move || {
                let items: Vec<_> = walk.by_ref().take(LIST_CHUNK).collect();
                Ok((items, walk))
            })
            .await;
            match chunk {
                Ok((items, _)) if items.is_empty() => None,
                Ok((items, walk)) => Some((stream::iter(items), Some(walk))),
                Err(e) => Some((stream::iter(vec![Err(e)]), None)),
            }
        })
        .flatten()
        .boxed()
    }

    /// In lexical order of paths, as object storage lists: see the
    /// `ordered` module for what a listing that stops early costs.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        ordered::list_in_order(
            Arc::clone(&self.root),
            prefix.cloned().unwrap_or_default(),
            offset.clone(),
        )
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let root = Arc::clone(&self.root);
        let prefix = prefix.cloned().unwrap_or_default();
        blocking(move || list_one_level(&root, &prefix)).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.check_write(from).await?;
        self.check_write(to).await?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.check_write(from).await?;
        self.check_write(to).await?;
        self.inner.rename_opts(from, to, options).await
    }
}

/// Runs file-system calls off the async threads when there is a runtime
/// (as `LocalFileSystem` does).
async fn blocking<T, F>(f: F) -> object_store::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> object_store::Result<T> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(f).await?,
        Err(_) => f(),
    }
}

/// Whether a store's writes and deletes wait for the disk, and (in this
/// crate's tests) a log of every sync made, in order, so that a test fails
/// if one is dropped.
#[derive(Clone, Debug)]
struct Syncs {
    on: bool,
    #[cfg(test)]
    log: Arc<std::sync::Mutex<Vec<Synced>>>,
}

/// One sync a store made (tests only).
#[cfg(test)]
#[derive(Clone, Debug, PartialEq, Eq)]
enum Synced {
    /// A staging file's data, before it was published.
    File(PathBuf),
    /// A folder's names.
    Folder(PathBuf),
}

impl Syncs {
    fn new(on: bool) -> Syncs {
        Syncs {
            on,
            #[cfg(test)]
            log: Arc::default(),
        }
    }

    /// `fsync`s the open file `fd` (at `file`, for messages), if on.
    fn file(&self, fd: impl AsFd, file: &std::path::Path) -> object_store::Result<()> {
        if !self.on {
            return Ok(());
        }
        rustix::fs::fsync(fd).map_err(|e| io_error(file, e.into()))?;
        #[cfg(test)]
        self.record(Synced::File(file.to_path_buf()));
        Ok(())
    }

    /// `fsync`s `folder`, so that the names just added to or removed from
    /// it reach the disk, if on.
    fn folder(&self, folder: &Folder) -> object_store::Result<()> {
        if !self.on {
            return Ok(());
        }
        rustix::fs::fsync(&folder.fd).map_err(|e| io_error(&folder.file, e.into()))?;
        #[cfg(test)]
        self.record(Synced::Folder(folder.file.clone()));
        Ok(())
    }

    /// `fsync`s the folder at `path`, opened by path (for the root's
    /// ancestors, outside the store), if on.
    fn folder_at(&self, path: &std::path::Path) -> object_store::Result<()> {
        if !self.on {
            return Ok(());
        }
        let fd = rustix::fs::open(path, dir_flags(), Mode::empty())
            .map_err(|e| io_error(path, e.into()))?;
        self.folder(&Folder {
            fd,
            file: path.to_path_buf(),
        })
    }

    #[cfg(test)]
    fn record(&self, synced: Synced) {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(synced);
    }
}

/// Creates the folder `root` and any missing above it, as
/// `create_dir_all`, then syncs the parent of each folder it created, so
/// that the new root is still there after a power loss (if `fsync`).
pub(crate) fn create_root(root: &std::path::Path, fsync: bool) -> object_store::Result<()> {
    create_root_syncing(root, &Syncs::new(fsync))
}

fn create_root_syncing(root: &std::path::Path, syncs: &Syncs) -> object_store::Result<()> {
    // The folders missing, deepest first, and the first one that exists.
    let mut missing = Vec::new();
    let mut present = Some(root);
    while let Some(at) = present {
        if at.exists() {
            break;
        }
        missing.push(at);
        present = at.parent();
    }
    std::fs::create_dir_all(root).map_err(|e| io_error(root, e))?;
    if missing.is_empty() {
        return Ok(());
    }
    // Each folder that holds a created one: the one that existed, and
    // every created one but the deepest (the root itself).
    let holders = present.into_iter().chain(missing.iter().skip(1).copied());
    for holder in holders {
        syncs.folder_at(holder)?;
    }
    Ok(())
}

/// A folder reached from the root without following a symlink: its handle,
/// and its file-system path for messages.
struct Folder {
    fd: OwnedFd,
    file: PathBuf,
}

impl Folder {
    /// The root folder. It was resolved when the store was built; a symlink
    /// put in its place since is followed, as the user's own choice of root.
    fn root(root: &std::path::Path) -> object_store::Result<Folder> {
        let fd = rustix::fs::open(root, dir_flags(), Mode::empty())
            .map_err(|e| io_error(root, e.into()))?;
        Ok(Folder {
            fd,
            file: root.to_path_buf(),
        })
    }

    /// The root folder; `None` if it is gone (a listing of it is empty, as
    /// with `LocalFileSystem`).
    fn root_if_present(root: &std::path::Path) -> object_store::Result<Option<Folder>> {
        match Folder::root(root) {
            Ok(folder) => Ok(Some(folder)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The real folder `name` in this one; `None` if it does not exist.
    fn child(&self, name: &str, location: &Path) -> object_store::Result<Option<Folder>> {
        let file = self.file.join(name);
        match rustix::fs::openat(
            &self.fd,
            name,
            dir_flags() | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Some(Folder { fd, file })),
            Err(Errno::NOENT) => Ok(None),
            // A symlink (ELOOP with O_NOFOLLOW) or not a folder at all: say which.
            Err(Errno::LOOP | Errno::NOTDIR) => match self.stat(name) {
                Ok(Some(stat)) if file_type(&stat) == FileType::Directory => {
                    Err(io_error(&file, Errno::NOTDIR.into()))
                }
                Ok(Some(stat)) => Err(refused(location, file, kind(file_type(&stat)))),
                Ok(None) => Ok(None),
                Err(e) => Err(io_error(&file, e)),
            },
            Err(e) => Err(io_error(&file, e.into())),
        }
    }

    /// The folder at `parts` below this one, each a real folder; `None` if
    /// one is missing.
    fn descend<'a>(
        self,
        parts: impl IntoIterator<Item = &'a str>,
        location: &Path,
    ) -> object_store::Result<Option<Folder>> {
        let mut folder = self;
        for part in parts {
            match folder.child(part, location)? {
                Some(child) => folder = child,
                None => return Ok(None),
            }
        }
        Ok(Some(folder))
    }

    /// The real folder `name` in this one, created if missing; this folder
    /// synced then, so that the new name survives a power loss.
    fn child_or_create(
        &self,
        name: &str,
        location: &Path,
        syncs: &Syncs,
    ) -> object_store::Result<Folder> {
        if let Some(child) = self.child(name, location)? {
            return Ok(child);
        }
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o777)) {
            // Synced on EEXIST too: another writer created it an instant
            // ago and may not have synced it yet, and this put must not be
            // acknowledged on a folder that a power loss can take away.
            Ok(()) | Err(Errno::EXIST) => self.sync_names(syncs)?,
            Err(e) => return Err(io_error(&self.file.join(name), e.into())),
        }
        // Opened again without following: a symlink put in its place since
        // is refused.
        self.child(name, location)?
            .ok_or_else(|| not_found(&self.file.join(name)))
    }

    /// Syncs this folder's names, if `syncs` is on.
    fn sync_names(&self, syncs: &Syncs) -> object_store::Result<()> {
        syncs.folder(self)
    }

    /// Writes `payload` to a new staging file `<name>#<n>` in this folder
    /// (hidden from listings), synced if `syncs` is on; its name, size,
    /// inode and modified time.
    fn stage(
        &self,
        name: &str,
        payload: &PutPayload,
        syncs: &Syncs,
    ) -> object_store::Result<(String, u64, u64, SystemTime)> {
        let (staging, mut written) = self.open_staging(name)?;
        let file = self.file.join(&staging);
        let outcome = payload
            .iter()
            .try_for_each(|chunk| written.write_all(chunk))
            .map_err(|e| io_error(&file, e))
            // The data on the disk before any name points at it.
            .and_then(|()| syncs.file(&written, &file))
            .and_then(|()| written.metadata().map_err(|e| io_error(&file, e)));
        match outcome {
            Ok(metadata) => {
                let modified = metadata.modified().unwrap_or(UNIX_EPOCH);
                Ok((staging, metadata.len(), metadata.ino(), modified))
            }
            Err(e) => {
                let _ = rustix::fs::unlinkat(&self.fd, &staging, AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Creates a new, empty staging file `<name>#<n>` in this folder
    /// (hidden from listings), never through a symlink: its name, and the
    /// file open for writing.
    fn open_staging(&self, name: &str) -> object_store::Result<(String, File)> {
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        for n in 0u32.. {
            let staging = format!("{name}#{n}");
            match rustix::fs::openat(&self.fd, &staging, flags, Mode::from_raw_mode(0o666)) {
                Ok(fd) => return Ok((staging, File::from(fd))),
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(io_error(&self.file.join(&staging), e.into())),
            }
        }
        unreachable!("a staging name is free before u32::MAX of them are taken")
    }

    /// What `name` in this folder is, without following it; `None` if absent.
    fn stat(&self, name: &str) -> io::Result<Option<Stat>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(stat)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// The real folder holding `location`'s file, and the file's name in it;
/// `None` if a folder on the way does not exist.
fn parent_of(
    root: &std::path::Path,
    location: &Path,
) -> object_store::Result<Option<(Folder, String)>> {
    let parts: Vec<_> = location.parts().collect();
    let Some((name, folders)) = parts.split_last() else {
        return Err(object_store::Error::Generic {
            store: STORE,
            source: format!("{location:?} names no file").into(),
        });
    };
    let folder = Folder::root(root)?.descend(folders.iter().map(|p| p.as_ref()), location)?;
    Ok(folder.map(|folder| (folder, name.as_ref().to_owned())))
}

/// Checks before a write that every existing folder on the way to
/// `location` is real and that its file, if any, is a regular file.
fn check_write(root: &std::path::Path, location: &Path) -> object_store::Result<()> {
    let (folder, name) = match parent_of(root, location) {
        Ok(Some(found)) => found,
        // Missing folders, the root included, are created by the write, as
        // `LocalFileSystem` does.
        Ok(None) | Err(object_store::Error::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    let file = folder.file.join(&name);
    match folder.stat(&name).map_err(|e| io_error(&file, e))? {
        None => Ok(()),
        Some(stat) => match file_type(&stat) {
            // A folder at a file's path: LocalFileSystem answers as it does.
            FileType::RegularFile | FileType::Directory => Ok(()),
            other => Err(refused(location, file, kind(other))),
        },
    }
}

/// Opens `location`'s file for reading: a regular file, reached through
/// real folders, opened without following a symlink or blocking on a FIFO.
fn open_regular(root: &std::path::Path, location: &Path) -> object_store::Result<(File, PathBuf)> {
    let Some((folder, name)) = parent_of(root, location)? else {
        return Err(not_found(&root.join(location.as_ref())));
    };
    let path = folder.file.join(&name);
    // Looked at first so that a FIFO or a device is never opened at all; the
    // open refuses a symlink, and the check of the opened handle below
    // catches anything swapped in between.
    match folder.stat(&name).map_err(|e| io_error(&path, e))? {
        None => return Err(not_found(&path)),
        Some(stat) => match file_type(&stat) {
            FileType::RegularFile => {}
            // As LocalFileSystem: a folder is no object.
            FileType::Directory => return Err(not_found(&path)),
            other => return Err(refused(location, path, kind(other))),
        },
    }
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(&folder.fd, name.as_str(), flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) => return Err(not_found(&path)),
        Err(Errno::LOOP) => return Err(refused(location, path, "a symlink")),
        Err(e) => return Err(io_error(&path, e.into())),
    };
    let opened = rustix::fs::fstat(file.as_fd()).map_err(|e| io_error(&path, e.into()))?;
    match file_type(&opened) {
        FileType::RegularFile => Ok((file, path)),
        FileType::Directory => Err(not_found(&path)),
        other => Err(refused(location, path, kind(other))),
    }
}

/// Writes `payload` at `location` as `LocalFileSystem` does (a staging file
/// `<name>#<n>`, published by a hard link for a create, by a rename for an
/// overwrite), but relative to real folders opened from the root without
/// following a symlink, creating the missing ones: no race can make the
/// write land outside the folder.
///
/// A delete elsewhere in the folder removes the folders it empties
/// ([`remove_emptied_folders`]), possibly between this put's creating a
/// folder and its staging file landing there (a folder with the staging file
/// in it is no longer empty, so from then on it stays): a folder that
/// vanished on the way is `NotFound`, and the put walks again from the root
/// after a short pause. A put has no other `NotFound` to report.
///
/// The pause is jittered: two processes doing the same work on one folder
/// run in step, and without it one of them can lose the same race every
/// time (CI saw a put lose it 17 times in a row on a loaded machine).
fn put(
    root: &std::path::Path,
    location: &Path,
    payload: &PutPayload,
    mode: &PutMode,
    syncs: &Syncs,
) -> object_store::Result<PutResult> {
    again_after_folder_races(|| put_once(root, location, payload, mode, syncs))
}

/// Runs `attempt` until it reports anything but `NotFound` (a folder on the
/// way removed under it), pausing between tries; the last `NotFound` once
/// the pauses run out.
fn again_after_folder_races<T>(
    mut attempt: impl FnMut() -> object_store::Result<T>,
) -> object_store::Result<T> {
    let mut pauses = folder_race_pauses();
    loop {
        match attempt() {
            Err(object_store::Error::NotFound { .. }) if let Some(pause) = pauses.next() => {
                std::thread::sleep(pause);
            }
            done => return done,
        }
    }
}

/// The pauses before a put walks again because a folder on its way was
/// removed under it: up to 64, from about 10 µs doubling to 1 ms, each
/// jittered, so at most about 60 ms in all before the put gives up.
fn folder_race_pauses() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_micros(10))
        .with_max_delay(Duration::from_millis(1))
        .with_max_times(64)
        .with_jitter()
        .build()
}

fn put_once(
    root: &std::path::Path,
    location: &Path,
    payload: &PutPayload,
    mode: &PutMode,
    syncs: &Syncs,
) -> object_store::Result<PutResult> {
    let (folder, name) = object_folder(root, location, syncs)?;
    let name = name.as_str();
    let path = folder.file.join(name);
    let (staging, size, inode, modified) = folder.stage(name, payload, syncs)?;
    let published = match mode {
        PutMode::Create => {
            rustix::fs::linkat(&folder.fd, &staging, &folder.fd, name, AtFlags::empty())
        }
        _ => rustix::fs::renameat(&folder.fd, &staging, &folder.fd, name),
    };
    // Gone already after a rename; the link's other name after a link.
    let _ = rustix::fs::unlinkat(&folder.fd, &staging, AtFlags::empty());
    match published {
        // The new name (and the staging name's removal) on the disk before
        // the write is acknowledged.
        Ok(()) => folder.sync_names(syncs).map(|()| PutResult {
            e_tag: meta(location.clone(), modified, size, inode).e_tag,
            version: None,
            extensions: Default::default(),
        }),
        Err(Errno::EXIST) => Err(object_store::Error::AlreadyExists {
            path: path.display().to_string(),
            source: Box::new(io::Error::from(Errno::EXIST)),
        }),
        Err(e) => Err(io_error(&path, e.into())),
    }
}

/// The real folder that holds `location`'s file, made with the folders
/// missing on the way (each synced in its parent, if `syncs` is on), and
/// the file's name in it; an error if something other than a regular file
/// or a folder has that name.
fn object_folder(
    root: &std::path::Path,
    location: &Path,
    syncs: &Syncs,
) -> object_store::Result<(Folder, String)> {
    let parts: Vec<_> = location.parts().collect();
    let Some((name, folders)) = parts.split_last() else {
        return Err(object_store::Error::Generic {
            store: STORE,
            source: format!("{location:?} names no file").into(),
        });
    };
    let mut folder = match Folder::root(root) {
        // The root itself is the user's: recreated as given, as
        // LocalFileSystem does.
        Err(object_store::Error::NotFound { .. }) => {
            create_root_syncing(root, syncs)?;
            Folder::root(root)?
        }
        opened => opened?,
    };
    for part in folders {
        folder = folder.child_or_create(part.as_ref(), location, syncs)?;
    }
    let name = name.as_ref();
    let path = folder.file.join(name);
    if let Some(stat) = folder.stat(name).map_err(|e| io_error(&path, e))? {
        match file_type(&stat) {
            FileType::RegularFile | FileType::Directory => {}
            other => return Err(refused(location, path, kind(other))),
        }
    }
    Ok((folder, name.to_owned()))
}

fn get(
    root: &std::path::Path,
    location: Path,
    options: GetOptions,
) -> object_store::Result<GetResult> {
    let (file, path) = open_regular(root, &location)?;
    let metadata = file.metadata().map_err(|e| io_error(&path, e))?;
    let meta = object_meta(location, &metadata);
    options.check_preconditions(&meta)?;
    let range = match &options.range {
        Some(range) => range
            .as_range(meta.size)
            .map_err(|e| object_store::Error::Generic {
                store: STORE,
                source: Box::new(e),
            })?,
        None => 0..meta.size,
    };
    Ok(GetResult {
        payload: GetResultPayload::File(file, path),
        attributes: Attributes::default(),
        range,
        meta,
        extensions: Default::default(),
    })
}

fn read_range(
    file: &File,
    path: &std::path::Path,
    range: &Range<u64>,
) -> object_store::Result<Bytes> {
    let size = file.metadata().map_err(|e| io_error(path, e))?.len();
    let end = range.end.min(size);
    if range.start > end {
        return Err(io_error(
            path,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("range {range:?} starts after the end of the file ({size} bytes)"),
            ),
        ));
    }
    let len =
        usize::try_from(end - range.start).map_err(|e| io_error(path, io::Error::other(e)))?;
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, range.start)
        .map_err(|e| io_error(path, e))?;
    Ok(buf.into())
}

/// How many times in a row a delete finds its file replaced by an update
/// between opening and locking it before it deletes without the lock.
const MAX_REPLACED: u32 = 64;

/// Deletes `location`'s file, relative to the real folder holding it, and
/// syncs that folder if `syncs` is on: memo orders some deletes (a run's
/// record before its pointer, a run's entries before its marker), and a
/// power loss that undid an earlier one but kept a later one would bring a
/// deleted run back (see the module's documentation).
///
/// It holds the lock a conditional update takes on the file (`update.rs`)
/// while it unlinks the name, so that the delete lands before the update's
/// check (which then finds the object gone) or after its rename (and
/// deletes what it wrote), never between them, where the rename would
/// bring the deleted object back: a data key forgotten while a rewrap
/// replaced it would be readable again.
fn delete(root: &std::path::Path, location: &Path, syncs: &Syncs) -> object_store::Result<()> {
    let Some((folder, name)) = parent_of(root, location)? else {
        return Err(not_found(&root.join(location.as_ref())));
    };
    let path = folder.file.join(&name);
    let mut replaced = 0;
    // Held until the name is unlinked (`None` where the file cannot be
    // opened to take it).
    let lock = loop {
        match folder.stat(&name).map_err(|e| io_error(&path, e))? {
            None => return Err(not_found(&path)),
            Some(stat) => match file_type(&stat) {
                FileType::RegularFile => {}
                FileType::Directory => return Err(io_error(&path, Errno::ISDIR.into())),
                other => return Err(refused(location, path, kind(other))),
            },
        }
        match update::lock_named(&folder, &name, &path)? {
            update::Locked::Held(file, _) => break Some(file),
            update::Locked::Gone => return Err(not_found(&path)),
            update::Locked::Unlockable => break None,
            // An update renamed another file over the name after it was
            // opened: lock that one. After many in a row, delete unlocked.
            update::Locked::Replaced if replaced < MAX_REPLACED => replaced += 1,
            update::Locked::Replaced => break None,
        }
    };
    // Relative to the folder handle: a swap of any folder on the way no
    // longer matters, and a symlink swapped in for the file is what unlinkat
    // removes, never its target.
    let unlinked = rustix::fs::unlinkat(&folder.fd, name.as_str(), AtFlags::empty());
    drop(lock);
    match unlinked {
        Ok(()) => {
            if !is_unsynced_delete(location) {
                folder.sync_names(syncs)?;
            }
            drop(folder);
            // Not synced: an emptied folder that reappears holds nothing.
            remove_emptied_folders(root, location);
            Ok(())
        }
        Err(Errno::NOENT) => Err(not_found(&path)),
        Err(e) => Err(io_error(&path, e.into())),
    }
}

/// After `location`'s file was deleted, removes the folders on its way that
/// are now empty, deepest first, stopping at the first that is not (or is
/// gone, or is not a real folder) and never removing the root: clears and
/// sweeps otherwise leave every run's folders behind, and later listings
/// walk them. Best effort: the delete succeeded whatever happens here.
///
/// Each folder is removed relative to a handle on its parent, reached from
/// the root through real folders only (as every call of this store walks),
/// with `unlinkat(AT_REMOVEDIR)`, which removes an empty real folder and
/// refuses a symlink: nothing outside the root is touched. A writer racing
/// the removal of its folder creates it again (`LocalFileSystem` retries a
/// staged upload whose folder is gone), and a folder holding a write in
/// progress is not empty.
///
/// The index folders that run after run enters and leaves
/// ([`is_kept_index_folder`]) are kept: the next run would create each
/// again, at the cost of a sync of its parent. A kept folder is not empty
/// for the folders above it, so the walk stops there.
fn remove_emptied_folders(root: &std::path::Path, location: &Path) {
    let parts: Vec<_> = location.parts().collect();
    // The folders holding the file, deepest first; the root is not one.
    for depth in (1..parts.len()).rev() {
        let folder: Path = parts[..depth].iter().cloned().collect();
        if is_kept_index_folder(&folder) {
            return;
        }
        let Ok(Some((parent, name))) = parent_of(root, &folder) else {
            return;
        };
        if rustix::fs::unlinkat(&parent.fd, name.as_str(), AtFlags::REMOVEDIR).is_err() {
            return;
        }
    }
}

/// Whether a delete of `location` returns without syncing its folder: a
/// status hint (`…/runs-by-status/<status>/<run>.<inc>`) or a due-run entry
/// (`…/due/<hour>/<due>_<run>.<inc>`, or `…/due/<hour>/<due>-<tag>/<run>.<inc>`
/// for a tagged one), as `layout.rs` names them. A power loss may undo such
/// a delete, which memo tolerates (see the module's documentation,
/// "Durability"). The folders are matched whole (a status among the five,
/// an hour of 20 digits, a tag of 16 hex digits), so that no other object
/// memo writes, whatever its run id, is taken for one.
pub(crate) fn is_unsynced_delete(location: &Path) -> bool {
    const RUNS_BY_STATUS: &str = "runs-by-status";
    const DUE: &str = "due";
    const STATUSES: [&str; 5] = ["Pending", "Running", "Completed", "Failed", "Cancelled"];
    // The folders holding the object, nearest first.
    let mut folders = location
        .as_ref()
        .rsplit(object_store::path::DELIMITER)
        .skip(1);
    let hour = |name: &str| name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit());
    let tagged = |name: &str| {
        name.split_once('-').is_some_and(|(due, tag)| {
            hour(due)
                && tag.len() == 16
                && tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    };
    match (folders.next(), folders.next(), folders.next()) {
        (Some(status), Some(RUNS_BY_STATUS), _) => STATUSES.contains(&status),
        (Some(hour_name), Some(DUE), _) => hour(hour_name),
        (Some(tag_name), Some(hour_name), Some(DUE)) => tagged(tag_name) && hour(hour_name),
        _ => false,
    }
}

/// Whether a delete that empties `folder` keeps it: one of memo's index
/// folders that runs write into and leave again, one after another (named
/// in `layout.rs`): a status-hint folder (`runs-by-status/<status>`, which
/// a run enters and leaves at each status), the `runs-by-status` folder
/// above them, and the due-run index's `due` folder (its hour folders are
/// removed: one an hour, they would pile up). Removed, each would be created
/// again by the next run, a sync of its parent each time: three syncs a
/// run, one run at a time. A run whose id is spelled like one of these
/// names keeps an emptied folder too: an empty folder, nothing else.
fn is_kept_index_folder(folder: &Path) -> bool {
    const RUNS_BY_STATUS: &str = "runs-by-status";
    const DUE: &str = "due";
    let parent = folder.parent();
    let parent_name = parent.as_ref().and_then(Path::filename);
    matches!(folder.filename(), Some(RUNS_BY_STATUS | DUE)) || parent_name == Some(RUNS_BY_STATUS)
}

/// A depth-first walk of the files below a prefix, one real folder at a time.
struct Walk {
    root: Arc<PathBuf>,
    prefix: Path,
    /// Folders found and not read yet.
    pending: Vec<Found>,
    /// The folder being read, with its store path.
    current: Option<(Dir, Arc<Folder>, Path)>,
    started: bool,
}

/// A folder a walk found: opened only when its turn comes, so that a walk
/// holds a few files open (about one per level) however wide the tree.
struct Found {
    parent: Arc<Folder>,
    name: String,
    location: Path,
}

impl Walk {
    fn new(root: Arc<PathBuf>, prefix: Path) -> Walk {
        Walk {
            root,
            prefix,
            pending: Vec::new(),
            current: None,
            started: false,
        }
    }

    /// Opens the prefix's folder, the first time.
    fn start(&mut self) -> object_store::Result<()> {
        self.started = true;
        let parts: Vec<_> = self.prefix.parts().collect();
        let Some(root) = Folder::root_if_present(&self.root)? else {
            return Ok(());
        };
        let folder = root.descend(parts.iter().map(|p| p.as_ref()), &self.prefix)?;
        if let Some(folder) = folder {
            self.read(folder, self.prefix.clone())?;
        }
        Ok(())
    }

    /// Makes `folder` the one being read.
    fn read(&mut self, folder: Folder, location: Path) -> object_store::Result<()> {
        self.current = None;
        let dir = Dir::read_from(&folder.fd).map_err(|e| io_error(&folder.file, e.into()))?;
        self.current = Some((dir, Arc::new(folder), location));
        Ok(())
    }

    /// The next item from the folder being read, or `None` once it is done.
    fn next_in_current(&mut self) -> Option<object_store::Result<ObjectMeta>> {
        loop {
            let (dir, folder, at) = self.current.as_mut()?;
            let entry = match dir.read()? {
                Ok(entry) => entry,
                Err(e) => return Some(Err(io_error(&folder.file, e.into()))),
            };
            let name = match listed_name(entry.file_name(), &folder.file) {
                Ok(Some(name)) => name,
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            };
            match visit(folder, at, &name) {
                Ok(Visit::Skip) => {}
                Ok(Visit::File(meta)) => return Some(Ok(meta)),
                Ok(Visit::Folder(location)) => self.pending.push(Found {
                    parent: Arc::clone(folder),
                    name,
                    location,
                }),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl Iterator for Walk {
    type Item = object_store::Result<ObjectMeta>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.started
            && let Err(e) = self.start()
        {
            return Some(Err(e));
        }
        loop {
            if let Some(item) = self.next_in_current() {
                return Some(item);
            }
            let found = self.pending.pop()?;
            // Opened without following: a folder swapped for a symlink since
            // it was found is refused here.
            let opened = found.parent.child(&found.name, &found.location);
            let read = match opened {
                Ok(Some(folder)) => self.read(folder, found.location),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = read {
                self.current = None;
                return Some(Err(e));
            }
        }
    }
}

/// What one name in a listed folder is.
enum Visit {
    /// Gone meanwhile, or a half-written upload.
    Skip,
    File(ObjectMeta),
    /// A real folder, at this store path.
    Folder(Path),
}

fn visit(folder: &Folder, at: &Path, name: &str) -> object_store::Result<Visit> {
    let file = folder.file.join(name);
    let location = child_path(at, name, &file)?;
    let Some(stat) = folder.stat(name).map_err(|e| io_error(&file, e))? else {
        return Ok(Visit::Skip);
    };
    match file_type(&stat) {
        FileType::RegularFile if is_upload_in_progress(name) => Ok(Visit::Skip),
        FileType::RegularFile => Ok(Visit::File(stat_meta(location, &stat))),
        FileType::Directory => Ok(Visit::Folder(location)),
        other => Err(refused(&location, file, kind(other))),
    }
}

fn list_one_level(root: &std::path::Path, prefix: &Path) -> object_store::Result<ListResult> {
    let mut listed = ListResult {
        common_prefixes: Vec::new(),
        objects: Vec::new(),
        extensions: Default::default(),
    };
    let parts: Vec<_> = prefix.parts().collect();
    let Some(root) = Folder::root_if_present(root)? else {
        return Ok(listed);
    };
    let Some(folder) = root.descend(parts.iter().map(|p| p.as_ref()), prefix)? else {
        return Ok(listed);
    };
    let mut dir = Dir::read_from(&folder.fd).map_err(|e| io_error(&folder.file, e.into()))?;
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(|e| io_error(&folder.file, e.into()))?;
        let Some(name) = listed_name(entry.file_name(), &folder.file)? else {
            continue;
        };
        match visit(&folder, prefix, &name)? {
            Visit::Skip => {}
            Visit::File(meta) => listed.objects.push(meta),
            Visit::Folder(path) => listed.common_prefixes.push(path),
        }
    }
    listed.common_prefixes.sort();
    Ok(listed)
}

/// A listed name as UTF-8; `None` for `.` and `..`.
fn listed_name(name: &CStr, folder: &std::path::Path) -> object_store::Result<Option<String>> {
    let bytes = name.to_bytes();
    if bytes == b"." || bytes == b".." {
        return Ok(None);
    }
    match std::str::from_utf8(bytes) {
        Ok(name) => Ok(Some(name.to_owned())),
        Err(e) => Err(io_error(
            &folder.join(String::from_utf8_lossy(bytes).as_ref()),
            io::Error::new(io::ErrorKind::InvalidData, e),
        )),
    }
}

/// The store path of the file `name` in the folder at `at`, as
/// `LocalFileSystem` maps it (a file's name is its path part as written).
fn child_path(at: &Path, name: &str, file: &std::path::Path) -> object_store::Result<Path> {
    let joined = if at.as_ref().is_empty() {
        name.to_owned()
    } else {
        format!("{at}/{name}")
    };
    Path::parse(joined).map_err(|e| io_error(file, io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// `LocalFileSystem` stages an upload as `<name>#<digits>` and hides it from
/// listings.
fn is_upload_in_progress(name: &str) -> bool {
    match name.split_once('#') {
        Some((_, suffix)) => !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

/// The object's metadata, with `LocalFileSystem`'s e-tag (inode, modified
/// time in microseconds, size), so both stores agree on it.
fn object_meta(location: Path, metadata: &std::fs::Metadata) -> ObjectMeta {
    let modified = metadata.modified().unwrap_or(UNIX_EPOCH);
    meta(location, modified, metadata.len(), metadata.ino())
}

fn stat_meta(location: Path, stat: &Stat) -> ObjectMeta {
    let secs = u64::try_from(stat.st_mtime).unwrap_or(0);
    let nanos = u32::try_from(stat.st_mtime_nsec).unwrap_or(0);
    let modified = UNIX_EPOCH + Duration::new(secs, nanos);
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    // The field's type differs between targets.
    #[allow(clippy::useless_conversion)]
    let inode = u64::from(stat.st_ino);
    meta(location, modified, size, inode)
}

fn meta(location: Path, modified: SystemTime, size: u64, inode: u64) -> ObjectMeta {
    let micros = modified
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    ObjectMeta {
        location,
        last_modified: modified.into(),
        size,
        e_tag: Some(format!("\"{inode:x}-{micros:x}-{size:x}\"")),
        version: None,
    }
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC
}

fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

fn kind(file_type: FileType) -> &'static str {
    match file_type {
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::RegularFile => "a regular file where a folder belongs",
        FileType::Directory => "a folder",
        FileType::Unknown => "a file of unknown kind",
    }
}

fn refused(location: &Path, file: PathBuf, kind: &'static str) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: Box::new(Refused {
            location: location.to_string(),
            file,
            kind,
        }),
    }
}

fn not_found(file: &std::path::Path) -> object_store::Error {
    object_store::Error::NotFound {
        path: file.display().to_string(),
        source: Box::new(io::Error::from(io::ErrorKind::NotFound)),
    }
}

/// An I/O error, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", file.display())]
struct FileError {
    file: PathBuf,
    #[source]
    source: io::Error,
}

fn io_error(file: &std::path::Path, source: io::Error) -> object_store::Error {
    if source.kind() == io::ErrorKind::NotFound {
        return not_found(file);
    }
    object_store::Error::Generic {
        store: STORE,
        source: Box::new(FileError {
            file: file.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Processes on one folder (the order workers of the examples): each
    /// deletes its object and removes the folder it emptied while the others
    /// create objects in that folder. Four of them, doing the same work in
    /// step, make a put lose that race many times in a row (an unjittered
    /// retry lost it 17 times in CI). Bounded: 4 threads, 1,000 rounds.
    #[test]
    fn a_put_into_a_folder_another_delete_just_emptied_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let workers: Vec<_> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|who| {
                let root = root.clone();
                std::thread::spawn(move || {
                    for round in 0..1_000 {
                        let location = Path::from(format!("memo/probes/{who}-{round}"));
                        // Without syncs: the race is the point, not the disk.
                        let syncs = Syncs::new(false);
                        put(&root, &location, &"p".into(), &PutMode::Create, &syncs)
                            .unwrap_or_else(|e| panic!("{who}, round {round}: {e}"));
                        delete(&root, &location, &syncs).unwrap();
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
    }

    /// A put that loses the folder race many times in a row (a loaded
    /// machine, processes in step) still lands: more than the 16 immediate
    /// tries that CI once saw all lost.
    #[test]
    fn a_put_walks_again_after_losing_the_folder_race_forty_times() {
        let mut tries = 0;
        let landed = again_after_folder_races(|| {
            tries += 1;
            if tries <= 40 {
                Err(not_found(std::path::Path::new("memo/probes")))
            } else {
                Ok(tries)
            }
        });
        assert_eq!(landed.unwrap(), 41);
    }

    /// The retries are bounded: a folder that keeps vanishing is reported.
    #[test]
    fn a_put_reports_not_found_once_its_pauses_run_out() {
        let mut tries = 0;
        let gave_up = again_after_folder_races::<()>(|| {
            tries += 1;
            Err(not_found(std::path::Path::new("memo/probes")))
        });
        assert!(matches!(gave_up, Err(object_store::Error::NotFound { .. })));
        assert_eq!(tries, 65, "one try and one more after each of 64 pauses");
    }

    /// Anything but `NotFound` is not a folder race and is reported at once.
    #[test]
    fn a_put_reports_other_errors_at_once() {
        let mut tries = 0;
        let refused = again_after_folder_races::<()>(|| {
            tries += 1;
            Err(io_error(
                std::path::Path::new("memo/probes"),
                io::Error::from(io::ErrorKind::PermissionDenied),
            ))
        });
        assert!(matches!(refused, Err(object_store::Error::Generic { .. })));
        assert_eq!(tries, 1);
    }

    #[tokio::test]
    async fn every_method_acts_in_the_folder_as_local_file_system_does() {
        let dir = tempfile::tempdir().unwrap();
        crate::testing::exercise_every_method(&LocalFolder::new(dir.path()).unwrap()).await;
    }

    /// Paths, sizes, times and e-tags as `LocalFileSystem` reports them, so
    /// that the two can share a folder.
    #[tokio::test]
    async fn both_stores_agree_on_what_a_listing_and_a_read_report() {
        use futures::TryStreamExt;
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let ours = LocalFolder::new(dir.path()).unwrap();
        let theirs = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        ours.put(&"a/b/c".into(), "v".into()).await.unwrap();
        ours.put(&"a/d".into(), "vv".into()).await.unwrap();
        let sorted = |mut listed: Vec<ObjectMeta>| {
            listed.sort_by(|x, y| x.location.cmp(&y.location));
            listed
        };
        let listed = sorted(ours.list(Some(&"a".into())).try_collect().await.unwrap());
        let expected = sorted(theirs.list(Some(&"a".into())).try_collect().await.unwrap());
        assert_eq!(listed.len(), 2);
        assert_eq!(listed, expected);
        let top = ours.list_with_delimiter(Some(&"a".into())).await.unwrap();
        let expected = theirs.list_with_delimiter(Some(&"a".into())).await.unwrap();
        assert_eq!(
            (top.common_prefixes, top.objects),
            (expected.common_prefixes, expected.objects)
        );
        let head = ours.head(&"a/b/c".into()).await.unwrap();
        assert_eq!(head, theirs.head(&"a/b/c".into()).await.unwrap());
    }

    /// As `LocalFileSystem`: a root removed under the store lists nothing,
    /// reads nothing, and a write makes it again.
    #[tokio::test]
    async fn a_store_whose_root_is_gone_lists_nothing_and_a_write_recreates_it() {
        use futures::TryStreamExt;
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        std::fs::create_dir(&root).unwrap();
        let store = LocalFolder::new(&root).unwrap();
        std::fs::remove_dir(&root).unwrap();

        let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
        assert!(listed.is_empty());
        assert!(
            store
                .list_with_delimiter(None)
                .await
                .unwrap()
                .objects
                .is_empty()
        );
        let missing = store.get(&"a/b".into()).await;
        assert!(matches!(missing, Err(object_store::Error::NotFound { .. })));
        store.put(&"a/b".into(), "v".into()).await.unwrap();
        assert_eq!(
            store
                .get(&"a/b".into())
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
            "v"
        );
    }

    /// The syncs a store made since the last call, in order.
    fn synced(store: &LocalFolder) -> Vec<Synced> {
        std::mem::take(&mut *store.syncs.log.lock().unwrap())
    }

    /// A durable create into folders that do not exist yet: the staging
    /// file before it is published, the parent of each folder created, and
    /// the object's folder after the link. Removing any one of these syncs
    /// fails the test.
    #[tokio::test]
    async fn a_durable_create_syncs_the_file_then_every_folder_it_changed() {
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        assert!(store.fsyncs(), "fsync is the default");
        let root = store.root().to_path_buf();
        store
            .put_opts(&"a/b/c".into(), "v".into(), PutMode::Create.into())
            .await
            .unwrap();
        assert_eq!(
            synced(&store),
            [
                Synced::Folder(root.clone()),
                Synced::Folder(root.join("a")),
                Synced::File(root.join("a/b/c#0")),
                Synced::Folder(root.join("a/b")),
            ]
        );

        // An overwrite into the existing folder: the file, then its folder.
        store.put(&"a/b/c".into(), "w".into()).await.unwrap();
        assert_eq!(
            synced(&store),
            [
                Synced::File(root.join("a/b/c#0")),
                Synced::Folder(root.join("a/b")),
            ]
        );
        let read = store.get(&"a/b/c".into()).await.unwrap().bytes().await;
        assert_eq!(read.unwrap(), "w");
    }

    /// A multipart upload (a blob's) is synced as a put is: the parent of
    /// each folder it created, the staging file before it is renamed into
    /// place, the object's folder after. Removing any one of these syncs
    /// fails the test; so does publishing through `LocalFileSystem`, whose
    /// syncs this store does not make.
    #[tokio::test]
    async fn a_durable_multipart_upload_syncs_as_a_put_does() {
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        let root = store.root().to_path_buf();
        let mut upload = store.put_multipart(&"a/b/c".into()).await.unwrap();
        // Parts land at their offsets whatever order they finish in.
        let (first, second) = (upload.put_part("hel".into()), upload.put_part("lo".into()));
        second.await.unwrap();
        first.await.unwrap();
        assert_eq!(
            synced(&store),
            [Synced::Folder(root.clone()), Synced::Folder(root.join("a"))],
            "the folders it made, at once"
        );
        upload.complete().await.unwrap();
        assert_eq!(
            synced(&store),
            [
                Synced::File(root.join("a/b/c#0")),
                Synced::Folder(root.join("a/b")),
            ]
        );
        let read = store.get(&"a/b/c".into()).await.unwrap().bytes().await;
        assert_eq!(read.unwrap(), "hello");

        // Aborted, or dropped unfinished: no staging file is left, nothing
        // is published, and nothing more is synced.
        let mut aborted = store.put_multipart(&"a/b/d".into()).await.unwrap();
        aborted.put_part("x".into()).await.unwrap();
        aborted.abort().await.unwrap();
        let dropped = store.put_multipart(&"a/b/e".into()).await.unwrap();
        drop(dropped);
        let mut left: Vec<_> = std::fs::read_dir(root.join("a/b"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["c"]);
        assert_eq!(synced(&store), []);
    }

    /// An upload completed before one of its parts was written fails,
    /// rather than publishing a hole of zeros where that part goes, and
    /// leaves no staging file; the object it would have replaced stands.
    #[tokio::test]
    async fn an_upload_completed_before_a_part_is_written_fails_whole() {
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        store.put(&"a/early".into(), "old".into()).await.unwrap();
        let mut upload = store.put_multipart(&"a/early".into()).await.unwrap();
        upload.put_part("one".into()).await.unwrap();
        let never_polled = upload.put_part("two".into());
        upload.put_part("six".into()).await.unwrap();
        let error = upload.complete().await.unwrap_err().to_string();
        assert!(error.contains("6 of its 9 bytes"), "{error}");
        drop(never_polled);
        let read = store.get(&"a/early".into()).await.unwrap().bytes().await;
        assert_eq!(read.unwrap(), "old");
        let left: Vec<_> = std::fs::read_dir(store.root().join("a"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, ["early"]);
    }

    /// A blob written to a local folder (a multipart upload) is on the
    /// disk, with its name, before its writer returns the reference.
    #[tokio::test]
    async fn a_blob_on_a_local_folder_is_synced_before_it_is_referenced() {
        let dir = tempfile::tempdir().unwrap();
        let folder = Arc::new(LocalFolder::new(dir.path()).unwrap());
        let root = folder.root().to_path_buf();
        let memo = crate::MemoStore::new(Arc::clone(&folder) as Arc<dyn ObjectStore>, "memo");
        let run = crate::RunId::new("blob").unwrap();
        let mut writer = crate::blob::BlobWriter::new(&memo.new_memo(&run, 0))
            .with_chunk_size(1 << 10)
            .unwrap();
        writer.write(&[7; 5000]).await.unwrap();
        let at = writer.path().clone();
        writer.finish().await.unwrap();
        let object = root.join(at.as_ref());
        let staging = format!("{}#0", object.display());
        let log = synced(&folder);
        let file = log
            .iter()
            .position(|s| *s == Synced::File(staging.clone().into()))
            .unwrap_or_else(|| panic!("the blob's file was not synced: {log:?}"));
        assert_eq!(
            log.get(file + 1),
            Some(&Synced::Folder(object.parent().unwrap().to_path_buf())),
            "then its folder: {log:?}"
        );
    }

    /// A create that loses to an existing object is not acknowledged, and
    /// its staging file (synced) is gone.
    #[tokio::test]
    async fn a_refused_create_leaves_no_staging_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        let root = store.root().to_path_buf();
        store
            .put_opts(&"a".into(), "v".into(), PutMode::Create.into())
            .await
            .unwrap();
        synced(&store);
        let second = store
            .put_opts(&"a".into(), "w".into(), PutMode::Create.into())
            .await;
        assert!(matches!(
            second,
            Err(object_store::Error::AlreadyExists { .. })
        ));
        assert_eq!(synced(&store), [Synced::File(root.join("a#0"))]);
        assert!(!root.join("a#0").exists());
    }

    /// A durable delete syncs the folder it removed the name from (memo's
    /// ordered deletes rely on it); the folders it empties are removed
    /// without one.
    #[tokio::test]
    async fn a_durable_delete_syncs_the_folder_it_removed_the_name_from() {
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        let root = store.root().to_path_buf();
        store.put(&"a/b/c".into(), "v".into()).await.unwrap();
        synced(&store);
        store.delete(&"a/b/c".into()).await.unwrap();
        assert_eq!(synced(&store), [Synced::Folder(root.join("a/b"))]);
        assert!(!root.join("a").exists(), "emptied folders are removed");
    }

    /// The index folders that runs enter and leave stay when a delete
    /// empties them, so the next run's hint or due entry creates no folder
    /// and syncs no parent (three syncs a run fewer, one run at a time); a
    /// due entry's hour folder and a run's own folders are removed as
    /// before. Fails if the kept folders are removed again.
    #[tokio::test]
    async fn index_folders_that_runs_enter_and_leave_stay_when_they_empty() {
        use object_store::ObjectStoreExt;

        use crate::layout::Layout;
        use crate::run_id::{Incarnation, RunId};

        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        let root = store.root().to_path_buf();
        let (runs, memo) = (Layout::new("runs"), Layout::new("memo"));
        let inc = Incarnation::random();
        let folders_synced = |store: &LocalFolder| -> Vec<PathBuf> {
            synced(store)
                .into_iter()
                .filter_map(|s| match s {
                    Synced::Folder(folder) => Some(folder),
                    Synced::File(_) => None,
                })
                .collect()
        };
        let [first, second] = ["run-1", "run-2"].map(|id| RunId::new(id).unwrap());
        let hint = |id: &RunId| runs.status_hint("Pending", id, inc);
        let due = |id: &RunId| memo.due_entry(id, inc, 7_200_000, None);
        let log = |id: &RunId| runs.log_entry(id, inc, 0);
        for path in [hint(&first), due(&first), log(&first)] {
            store.put(&path, "v".into()).await.unwrap();
            store.delete(&path).await.unwrap();
        }
        synced(&store);
        let hour = root.join("memo/due").join(format!("{:020}", 7_200_000));
        assert!(root.join("runs/runs-by-status/Pending").is_dir());
        assert!(root.join("memo/due").is_dir());
        assert!(!hour.exists(), "an hour folder is removed");
        assert!(
            !root.join("runs/runs").exists(),
            "a run's folders are removed"
        );

        store.put(&hint(&second), "v".into()).await.unwrap();
        assert_eq!(
            folders_synced(&store),
            [root.join("runs/runs-by-status/Pending")]
        );
        store.put(&due(&second), "v".into()).await.unwrap();
        assert_eq!(folders_synced(&store), [root.join("memo/due"), hour]);
    }

    /// The deletes left unsynced are a status hint's and a due-run entry's
    /// (tagged or not), as memo's layout builds their paths, and no other
    /// object's of the layout's table, whatever the run id or namespace
    /// (ids spelled like the index folders' own names included).
    #[test]
    fn only_status_hints_and_due_entries_are_deleted_without_a_sync() {
        use crate::layout::{self, Layout, MEMOS, RECHECKS, STEP_OUTPUTS, TERMINALS};
        use crate::run_id::{Incarnation, RunId};
        use crate::runtime_store::RunStatus;

        // Fails to compile if a status is added: its hint must be checked.
        let segment = |status: RunStatus| match status {
            RunStatus::Pending
            | RunStatus::Running
            | RunStatus::Completed
            | RunStatus::Failed
            | RunStatus::Cancelled => status.path_segment(),
        };
        let inc = Incarnation::random();
        for prefix in ["p", "pre/fix", "", "due", "runs-by-status"] {
            let layout = Layout::new(prefix);
            for name in [
                "order-1",
                "due",
                "runs-by-status",
                "Pending",
                "00000000000003600000",
            ] {
                let id = RunId::new(name).unwrap();
                let mut unsynced: Vec<Path> = RunStatus::ALL
                    .iter()
                    .map(|&status| layout.status_hint(segment(status), &id, inc))
                    .collect();
                unsynced.push(layout.due_entry(&id, inc, 3_600_007, None));
                unsynced.push(layout.due_entry(&id, inc, 3_600_007, Some(u64::MAX)));
                unsynced.push(layout.due_entry(&id, inc, 0, Some(0)));
                for path in &unsynced {
                    assert!(is_unsynced_delete(path), "{path}");
                }
                let synced = [
                    layout.entry(MEMOS, &id, inc, 1, "ab"),
                    layout.entry(STEP_OUTPUTS, &id, inc, 1, "ab"),
                    layout.blob(&id, inc, 1, 7),
                    layout.marker(TERMINALS, &id, inc, 3_600_007),
                    layout.marker(RECHECKS, &id, inc, 3_600_007),
                    layout.run_pointer(&id),
                    layout.incarnation_record(&id, inc),
                    layout.incarnation_tombstone(&id, inc),
                    layout.log_entry(&id, inc, 20),
                    layout.checkpoint(&id, inc, 20),
                    layout.delta(&id, inc, 20),
                    layout
                        .delta_v2_folder(&id, inc)
                        .join("00000000000000000020"),
                    layout.delta_newest_first(&id, inc, 20),
                    layout.attempt_cost(&id, inc, 2),
                    layout.shared_entries(name).join("ab"),
                    layout.shared_expiry(name, "ab", 3_600_007, 7),
                    layout::probe(layout.prefix(), 7),
                ];
                for path in &synced {
                    assert!(!is_unsynced_delete(path), "{path}");
                }
            }
        }
    }

    /// A delete of a status hint or a due-run entry syncs no folder; a
    /// delete of a log entry still syncs its folder. Fails if either sync
    /// decision is turned around.
    #[tokio::test]
    async fn a_delete_of_a_hint_or_a_due_entry_is_not_synced() {
        use object_store::ObjectStoreExt;

        use crate::layout::Layout;
        use crate::run_id::{Incarnation, RunId};

        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        let root = store.root().to_path_buf();
        let (runs, memo) = (Layout::new("runs"), Layout::new("memo"));
        let (id, inc) = (RunId::new("run-1").unwrap(), Incarnation::random());
        let log = runs.log_entry(&id, inc, 0);
        let hint = runs.status_hint("Running", &id, inc);
        for path in [
            hint.clone(),
            memo.due_entry(&id, inc, 7_200_000, None),
            memo.due_entry(&id, inc, 7_200_000, Some(9)),
            log.clone(),
        ] {
            store.put(&path, "v".into()).await.unwrap();
        }
        synced(&store);
        store.delete(&hint).await.unwrap();
        store
            .delete(&memo.due_entry(&id, inc, 7_200_000, None))
            .await
            .unwrap();
        store
            .delete(&memo.due_entry(&id, inc, 7_200_000, Some(9)))
            .await
            .unwrap();
        assert_eq!(synced(&store), []);
        store.delete(&log).await.unwrap();
        let log_folder = root.join(runs.log_folder(&id, inc).as_ref());
        assert_eq!(synced(&store), [Synced::Folder(log_folder)]);
    }

    /// The folders a delete keeps when it empties them, as memo's layout
    /// builds their paths: the status-hint folders, the folder above them
    /// and the due-run index's folder, with a prefix or without; never a
    /// run's, an hour's or a memo's folder.
    #[test]
    fn only_index_folders_that_runs_enter_and_leave_are_kept_when_empty() {
        use crate::layout::{Layout, MEMOS, TERMINALS};
        use crate::run_id::{Incarnation, RunId};

        let (id, inc) = (RunId::new("order-1").unwrap(), Incarnation::random());
        for prefix in ["p", "pre/fix", "", "due", "runs-by-status"] {
            let layout = Layout::new(prefix);
            let kept = [
                layout.status_folder("Pending"),
                layout.status_folder("Completed"),
                layout.status_folder("Pending").parent().unwrap(),
                layout.due_folder(),
            ];
            for folder in &kept {
                assert!(is_kept_index_folder(folder), "{folder}");
            }
            let removed = [
                layout.due_hour(3_600_000),
                layout.marker_hour(TERMINALS, 0),
                layout.run_pointer(&id).parent().unwrap(),
                layout.log_entry(&id, inc, 0).parent().unwrap(),
                layout.incarnation_records(&id, inc),
                layout.step_folder(MEMOS, &id, inc, 1),
                layout.status_hint("Pending", &id, inc),
            ];
            for folder in &removed {
                assert!(!is_kept_index_folder(folder), "{folder}");
            }
        }
    }

    /// A root removed under the store and made again by a write: the
    /// folder holding it is synced too.
    #[tokio::test]
    async fn a_root_made_again_by_a_durable_write_is_synced_in_its_parent() {
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().canonicalize().unwrap();
        let root = parent.join("store");
        std::fs::create_dir(&root).unwrap();
        let store = LocalFolder::new(&root).unwrap();
        std::fs::remove_dir(&root).unwrap();
        store.put(&"x".into(), "v".into()).await.unwrap();
        assert_eq!(
            synced(&store),
            [
                Synced::Folder(parent),
                Synced::File(root.join("x#0")),
                Synced::Folder(root),
            ]
        );
    }

    /// Without fsync no call syncs, and everything still works.
    #[tokio::test]
    async fn without_fsync_no_call_syncs() {
        use futures::TryStreamExt;
        use object_store::ObjectStoreExt;

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        std::fs::create_dir(&root).unwrap();
        let store = LocalFolder::new(&root).unwrap().with_fsync(false);
        assert!(!store.fsyncs());
        // Gone, so that the put makes the root again too.
        std::fs::remove_dir(&root).unwrap();
        store
            .put_opts(&"a/b/c".into(), "v".into(), PutMode::Create.into())
            .await
            .unwrap();
        store.put(&"a/b/c".into(), "w".into()).await.unwrap();
        store.put(&"a/d".into(), "x".into()).await.unwrap();
        store.delete(&"a/b/c".into()).await.unwrap();
        let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(synced(&store), []);
    }

    /// The root a `file://` URL names, created with its missing parents:
    /// each folder that gained one is synced.
    #[test]
    fn a_created_root_is_synced_in_every_folder_that_gained_one() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let root = top.join("x/y/z");
        let syncs = Syncs::new(true);
        create_root_syncing(&root, &syncs).unwrap();
        assert!(root.is_dir());
        let log = std::mem::take(&mut *syncs.log.lock().unwrap());
        assert_eq!(
            log,
            [
                Synced::Folder(top.clone()),
                Synced::Folder(top.join("x/y")),
                Synced::Folder(top.join("x")),
            ]
        );
        // Present already: nothing to sync.
        create_root_syncing(&root, &syncs).unwrap();
        assert_eq!(syncs.log.lock().unwrap().len(), 0);
    }
}
