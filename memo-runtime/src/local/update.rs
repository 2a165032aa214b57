//! A conditional update on a local folder (`PutMode::Update`), which
//! `LocalFileSystem` does not have: the object is replaced only if it is
//! still the version the writer read (its e-tag, as `get` reports it), and
//! of writers racing to replace one version, one wins and every other gets
//! `Precondition`, across processes.
//!
//! The update opens the object's file and takes an exclusive `flock` on
//! it (advisory: updates and deletes take it), then checks, holding it,
//! that the name still names that file (`fstatat` without following: same
//! inode) and that the file's e-tag is the one expected; then it stages
//! the new content and `renameat`s it over the name, as an overwrite does,
//! and lets the lock go. A second updater of the same version either opened the
//! same file and waits for the lock, then finds the name pointing at
//! another file, or opened the new file, whose e-tag differs: either way
//! `Precondition`. A missing object is `Precondition` too, as on the
//! clouds. A delete takes the same lock before it unlinks the name, so it
//! lands before an update's check (which then finds the object gone) or
//! after its rename (and deletes what the update wrote), never between
//! them, as on the clouds, where an update of a deleted object is refused.
//! Before deletes took it, a delete landing while an update staged its
//! content was undone by the rename: a data key forgotten while a rewrap
//! replaced it was back, readable again (`DataKeys` on a folder key
//! store, a sweeper forgetting beside a rewrap).
//!
//! memo updates in two places: a standalone memo's entry sealed with a key
//! generation forgotten since is replaced by the next put of its key
//! (`write_once::create_once`), and `DataKeys::rewrap` writes each key
//! back only if it is still the one read. Before this, a local folder had
//! no conditional update and memo replaced such an entry by a delete then
//! a create, and two puts racing there could both commit (issue 26).

use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use object_store::path::Path;
use object_store::{PutPayload, PutResult, UpdateVersion};
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::{Folder, Syncs, again_after_folder_races, io_error, meta, parent_of};

/// Replaces `location` with `payload` if its e-tag is `version`'s (see the
/// module).
pub(super) fn update(
    root: &std::path::Path,
    location: &Path,
    payload: &PutPayload,
    version: &UpdateVersion,
    syncs: &Syncs,
) -> object_store::Result<PutResult> {
    again_after_folder_races(|| update_once(root, location, payload, version, syncs))
}

fn update_once(
    root: &std::path::Path,
    location: &Path,
    payload: &PutPayload,
    version: &UpdateVersion,
    syncs: &Syncs,
) -> object_store::Result<PutResult> {
    let Some(expected) = version.e_tag.as_deref() else {
        return Err(precondition(location, "the update names no e-tag"));
    };
    let Some((folder, name)) = parent_of(root, location)? else {
        return Err(precondition(location, "the object does not exist"));
    };
    let name = name.as_str();
    let path = folder.file.join(name);
    // Held until `file` is dropped, after the rename.
    let (file, held) = match lock_named(&folder, name, &path)? {
        Locked::Held(file, held) => (file, held),
        Locked::Gone => return Err(precondition(location, "the object was deleted")),
        Locked::Replaced => return Err(precondition(location, "the object was replaced")),
        Locked::Unlockable => {
            return Err(io_error(
                &path,
                std::io::Error::other("the object cannot be opened to lock it"),
            ));
        }
    };
    let modified = held.modified().unwrap_or(std::time::UNIX_EPOCH);
    let current = meta(location.clone(), modified, held.len(), held.ino()).e_tag;
    if current.as_deref() != Some(expected) {
        return Err(precondition(
            location,
            "the object's e-tag is not the one read",
        ));
    }
    let (staging, size, inode, modified) = folder.stage(name, payload, syncs)?;
    let renamed = rustix::fs::renameat(&folder.fd, &staging, &folder.fd, name);
    if let Err(e) = renamed {
        let _ = rustix::fs::unlinkat(&folder.fd, &staging, AtFlags::empty());
        return Err(io_error(&path, e.into()));
    }
    folder.sync_names(syncs)?;
    drop(file);
    Ok(PutResult {
        e_tag: meta(location.clone(), modified, size, inode).e_tag,
        version: None,
        extensions: Default::default(),
    })
}

/// What [`lock_named`] found.
pub(super) enum Locked {
    /// The file `name` names, opened and locked (the lock is held until it
    /// is dropped), and its metadata.
    Held(std::fs::File, std::fs::Metadata),
    /// Nothing is named so any more.
    Gone,
    /// Another file was renamed over the name between its opening and its
    /// locking (an update landed).
    Replaced,
    /// The name cannot be opened to lock it (no read permission, or no
    /// longer a regular file): only a delete goes on without the lock.
    Unlockable,
}

/// Opens the file `name` names in `folder` (at `path`) and takes the lock
/// updates and deletes hold: exclusive, released when the file is dropped.
/// A file renamed over the name before the lock was taken is `Replaced`.
pub(super) fn lock_named(
    folder: &Folder,
    name: &str,
    path: &std::path::Path,
) -> object_store::Result<Locked> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(&folder.fd, name, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(Errno::NOENT) => return Ok(Locked::Gone),
        Err(Errno::ACCESS | Errno::LOOP | Errno::PERM) => return Ok(Locked::Unlockable),
        Err(e) => return Err(io_error(path, e.into())),
    };
    rustix::fs::flock(file.as_fd(), FlockOperation::LockExclusive)
        .map_err(|e| io_error(path, e.into()))?;
    let held = file.metadata().map_err(|e| io_error(path, e))?;
    match folder.stat(name).map_err(|e| io_error(path, e))? {
        None => Ok(Locked::Gone),
        Some(named) if named.st_ino == held.ino() && named.st_dev == held.dev() => {
            Ok(Locked::Held(file, held))
        }
        Some(_) => Ok(Locked::Replaced),
    }
}

fn precondition(location: &Path, why: &str) -> object_store::Error {
    object_store::Error::Precondition {
        path: location.to_string(),
        source: why.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};

    use super::super::LocalFolder;
    use super::*;

    fn update_of(version: UpdateVersion) -> PutOptions {
        PutOptions::from(PutMode::Update(version))
    }

    fn version_of(result: &PutResult) -> UpdateVersion {
        UpdateVersion {
            e_tag: result.e_tag.clone(),
            version: None,
        }
    }

    #[tokio::test]
    async fn an_update_replaces_only_the_version_read_and_never_a_missing_object() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalFolder::new(dir.path()).unwrap();
        let at = Path::from("memos/run/0/entry");
        let first = store.put(&at, "v1".into()).await.unwrap();
        let read = store.get(&at).await.unwrap();
        assert_eq!(read.meta.e_tag, first.e_tag, "get and put report one e-tag");

        let second = store
            .put_opts(&at, "v2".into(), update_of(version_of(&first)))
            .await
            .unwrap();
        assert_eq!(
            &store.get(&at).await.unwrap().bytes().await.unwrap()[..],
            b"v2"
        );
        // The version read first is gone: a second update of it fails.
        let stale = store
            .put_opts(&at, "v3".into(), update_of(version_of(&first)))
            .await
            .unwrap_err();
        assert!(
            matches!(stale, object_store::Error::Precondition { .. }),
            "{stale}"
        );
        assert_eq!(
            &store.get(&at).await.unwrap().bytes().await.unwrap()[..],
            b"v2"
        );

        store.delete(&at).await.unwrap();
        let missing = store
            .put_opts(&at, "v4".into(), update_of(version_of(&second)))
            .await
            .unwrap_err();
        assert!(
            matches!(missing, object_store::Error::Precondition { .. }),
            "{missing}"
        );
        assert!(store.get(&at).await.is_err(), "an update creates nothing");
        let no_tag = UpdateVersion {
            e_tag: None,
            version: None,
        };
        let err = store
            .put_opts(&at, "v5".into(), update_of(no_tag))
            .await
            .unwrap_err();
        assert!(
            matches!(err, object_store::Error::Precondition { .. }),
            "{err}"
        );
    }

    /// A delete racing an update of the object it deletes (a forget of a
    /// data key racing a rewrap of it): the delete lands before the
    /// update's check or after its rename, so the object is gone either
    /// way. Unlocked, a delete landing while the update stages its
    /// content (an fsync here, to widen that window as a slow disk does)
    /// was undone by the rename: the forgotten key was back.
    #[test]
    fn a_delete_racing_an_update_never_leaves_the_object_behind() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let at = Path::from("keys/runs/order/1");
        for round in 0..50 {
            let first = super::super::put(
                &root,
                &at,
                &PutPayload::from(format!("r{round}")),
                &PutMode::Overwrite,
                &Syncs::new(false),
            )
            .unwrap();
            let version = version_of(&first);
            let start = Arc::new(Barrier::new(2));
            let updater = {
                let (root, at, start) = (root.clone(), at.clone(), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    let payload = PutPayload::from(format!("r{round}-rewrapped"));
                    update(&root, &at, &payload, &version, &Syncs::new(true))
                })
            };
            start.wait();
            super::super::delete(&root, &at, &Syncs::new(false)).unwrap();
            match updater.join().unwrap() {
                Ok(_) | Err(object_store::Error::Precondition { .. }) => {}
                Err(e) => panic!("round {round}: {e}"),
            }
            assert!(
                !root.join(at.as_ref()).exists(),
                "round {round}: the deleted object is back"
            );
        }
    }

    /// Eight writers, each with a store of its own (as eight processes
    /// have), update the version they all read at once, for 200 rounds:
    /// each round exactly one wins, and the object holds its value.
    #[test]
    fn of_writers_racing_to_update_one_version_exactly_one_wins() {
        const WRITERS: usize = 8;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let at = Path::from("memos/run/0/raced");
        let syncs = Syncs::new(false);
        for round in 0..200 {
            let first = super::super::put(
                &root,
                &at,
                &PutPayload::from(format!("r{round}")),
                &PutMode::Overwrite,
                &syncs,
            )
            .unwrap();
            let version = version_of(&first);
            let start = Arc::new(Barrier::new(WRITERS));
            let writers: Vec<_> = (0..WRITERS)
                .map(|who| {
                    let (root, at, version) = (root.clone(), at.clone(), version.clone());
                    let start = Arc::clone(&start);
                    std::thread::spawn(move || {
                        let payload = PutPayload::from(format!("r{round}-w{who}"));
                        start.wait();
                        update(&root, &at, &payload, &version, &Syncs::new(false))
                            .map(|_| who)
                            .map_err(|e| {
                                assert!(
                                    matches!(e, object_store::Error::Precondition { .. }),
                                    "{e}"
                                );
                            })
                    })
                })
                .collect();
            let won: Vec<usize> = writers
                .into_iter()
                .filter_map(|writer| writer.join().unwrap().ok())
                .collect();
            assert_eq!(won.len(), 1, "round {round}: winners {won:?}");
            let held = std::fs::read(root.join(at.as_ref())).unwrap();
            assert_eq!(held, format!("r{round}-w{}", won[0]).into_bytes());
        }
    }
}
