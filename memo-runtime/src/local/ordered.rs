//! [`LocalFolder::list_with_offset`](super::LocalFolder): a listing in
//! lexical order of paths from an offset, as S3, GCS and Azure list, with a
//! bounded cost for a reader that stops early.
//!
//! A folder's names come back from the file system in no particular order,
//! so the names after an offset can only be found by reading all of them.
//! What this walk bounds is everything else: reading a folder, it keeps only
//! the first [`FIRST_BATCH`] names after where it is (a heap of that size,
//! no `stat`), and `stat`s a name only when the listing returns it. A reader
//! that stops after `k` objects of a folder of `n` names has made one read
//! of the folder's names (`getdents`), held at most `max(k, 1,024)` of them,
//! and `stat`ed about `k` (those returned, and the rest of a chunk of at
//! most [`LIST_CHUNK`](super::LIST_CHUNK) the stream prepared), whatever
//! `n`. A reader that goes on makes the folder read again from the last name
//! taken, each time keeping twice as many names: reading `n` names through
//! costs about `2 + log2(n / 1,024)` reads of the folder, and never holds
//! more names than it has already returned, or 1,024.
//!
//! Order: a path sorts as its string. In a folder, a file sorts by its name
//! and a folder by its name followed by `/` (so folder `a` comes after file
//! `a-b` and before file `a0`, as `a/x` sorts between them).

use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt};
use object_store::ObjectMeta;
use object_store::path::Path;
use rustix::fs::{Dir, FileType};

use super::{
    Folder, LIST_CHUNK, Visit, blocking, file_type, io_error, is_upload_in_progress, listed_name,
    visit,
};

/// Names a read of a folder keeps at most the first time; a further read of
/// the same folder keeps as many as were taken from it before, if more.
pub(super) const FIRST_BATCH: usize = 1024;

/// Objects the first blocking task of a listing prepares; later tasks
/// prepare twice as many, up to `LIST_CHUNK`, so a reader that takes a page
/// makes few `stat`s past it.
const FIRST_CHUNK: usize = 64;

/// The objects below `prefix` whose path sorts after `offset`, in order.
pub(super) fn list_in_order(
    root: Arc<std::path::PathBuf>,
    prefix: Path,
    offset: Path,
) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
    let walk = OrderedWalk::new(root, prefix, offset);
    stream::unfold(Some((walk, FIRST_CHUNK)), |state| async move {
        let (mut walk, chunk) = state?;
        let prepared = blocking(move || {
            let items: Vec<_> = walk.by_ref().take(chunk).collect();
            Ok((items, walk))
        })
        .await;
        match prepared {
            Ok((items, _)) if items.is_empty() => None,
            Ok((items, walk)) => {
                let next = (chunk * 2).min(LIST_CHUNK);
                Some((stream::iter(items), Some((walk, next))))
            }
            Err(e) => Some((stream::iter(vec![Err(e)]), None)),
        }
    })
    .flatten()
    .boxed()
}

/// A depth-first walk in lexical order, one batch of a folder's names at a
/// time.
pub(super) struct OrderedWalk {
    root: Arc<std::path::PathBuf>,
    prefix: Path,
    /// Where the walk starts, relative to `prefix` (`None`: from the start);
    /// taken when the walk starts.
    from: Option<Start>,
    started: bool,
    /// The folders being read, outermost first.
    levels: Vec<Level>,
    /// Reads of folders' names made so far (tests check the cost with it).
    reads: usize,
}

/// Where a walk starts within its prefix.
enum Start {
    /// After this path, relative to the prefix's folder.
    After(String),
    /// Nothing below the prefix sorts after the offset.
    Nowhere,
}

/// A folder the walk is in.
struct Level {
    folder: Folder,
    location: Path,
    /// For the folder's first read: the offset below it (its names sort
    /// after it, except the folder that holds it).
    from: Option<String>,
    /// The key of the last name taken: each further read starts after it.
    last: Option<String>,
    /// Names of the last read not returned yet, in order.
    batch: VecDeque<Name>,
    /// Whether the last read kept every name left.
    complete: bool,
    /// Names returned (or entered) from this folder so far.
    taken: usize,
}

/// A name a read kept.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Name {
    /// How it sorts: the name, and `/` after a folder's.
    key: String,
    name: String,
    folder: bool,
    /// For the folder that holds the offset: the offset below it.
    from: Option<String>,
}

impl OrderedWalk {
    pub(super) fn new(root: Arc<std::path::PathBuf>, prefix: Path, offset: Path) -> OrderedWalk {
        let from = relative_offset(&prefix, &offset);
        OrderedWalk {
            root,
            prefix,
            from,
            started: false,
            levels: Vec::new(),
            reads: 0,
        }
    }

    /// The most names held by any one folder now.
    #[cfg(test)]
    fn most_held(&self) -> usize {
        self.levels.iter().map(|l| l.batch.len()).max().unwrap_or(0)
    }

    fn start(&mut self) -> object_store::Result<()> {
        self.started = true;
        let from = match self.from.take() {
            Some(Start::Nowhere) => return Ok(()),
            Some(Start::After(after)) => Some(after),
            None => None,
        };
        let Some(root) = Folder::root_if_present(&self.root)? else {
            return Ok(());
        };
        let parts: Vec<_> = self.prefix.parts().collect();
        let folder = root.descend(parts.iter().map(|p| p.as_ref()), &self.prefix)?;
        if let Some(folder) = folder {
            self.enter(folder, self.prefix.clone(), from)?;
        }
        Ok(())
    }

    fn enter(
        &mut self,
        folder: Folder,
        location: Path,
        from: Option<String>,
    ) -> object_store::Result<()> {
        let mut level = Level {
            folder,
            location,
            from,
            last: None,
            batch: VecDeque::new(),
            complete: false,
            taken: 0,
        };
        self.reads += 1;
        level.read()?;
        self.levels.push(level);
        Ok(())
    }
}

impl Iterator for OrderedWalk {
    type Item = object_store::Result<ObjectMeta>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.started
            && let Err(e) = self.start()
        {
            return Some(Err(e));
        }
        loop {
            let level = self.levels.last_mut()?;
            let Some(name) = level.batch.pop_front() else {
                if level.complete {
                    self.levels.pop();
                } else {
                    self.reads += 1;
                    if let Err(e) = level.read() {
                        self.levels.clear();
                        return Some(Err(e));
                    }
                }
                continue;
            };
            level.last = Some(name.key);
            level.taken += 1;
            if name.folder {
                let location = level.location.clone().join(name.name.as_str());
                // Opened without following: a folder swapped for a symlink
                // since it was read is refused here.
                let entered = match level.folder.child(&name.name, &location) {
                    Ok(Some(folder)) => self.enter(folder, location, name.from),
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                };
                if let Err(e) = entered {
                    return Some(Err(e));
                }
                continue;
            }
            match visit(&level.folder, &level.location, &name.name) {
                Ok(Visit::File(meta)) => return Some(Ok(meta)),
                // Gone, or a folder now where a file was read: its place
                // in the order is past.
                Ok(Visit::Skip | Visit::Folder(_)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl Level {
    /// Reads the folder's names and keeps the first of them after where
    /// the walk is: [`FIRST_BATCH`], or as many as were taken from the
    /// folder already if that is more, so what a folder holds never
    /// outgrows what the walk returned from it while reads stay few.
    fn read(&mut self) -> object_store::Result<()> {
        let size = self.taken.max(FIRST_BATCH);
        let from = self.from.take();
        let mut kept: BinaryHeap<Name> = BinaryHeap::new();
        let mut complete = true;
        let mut dir =
            Dir::read_from(&self.folder.fd).map_err(|e| io_error(&self.folder.file, e.into()))?;
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| io_error(&self.folder.file, e.into()))?;
            let Some(name) = listed_name(entry.file_name(), &self.folder.file)? else {
                continue;
            };
            let folder = match entry.file_type() {
                FileType::Directory => true,
                // The file system did not say: ask it.
                FileType::Unknown => self
                    .folder
                    .stat(&name)
                    .map_err(|e| io_error(&self.folder.file.join(&name), e))?
                    .is_some_and(|stat| file_type(&stat) == FileType::Directory),
                _ => false,
            };
            if !folder && is_upload_in_progress(&name) {
                continue;
            }
            let key = if folder {
                format!("{name}/")
            } else {
                name.clone()
            };
            let mut below = None;
            let after = match (&self.last, &from) {
                (Some(last), _) => key > *last,
                (None, Some(from)) if folder && from.starts_with(&key) => {
                    below = Some(from[key.len()..].to_owned());
                    true
                }
                (None, Some(from)) => key > *from,
                (None, None) => true,
            };
            if !after {
                continue;
            }
            if kept.len() == size {
                complete = false;
                if kept.peek().is_some_and(|greatest| greatest.key < key) {
                    continue;
                }
                kept.pop();
            }
            kept.push(Name {
                key,
                name,
                folder,
                from: below,
            });
        }
        self.batch = kept.into_sorted_vec().into();
        self.complete = complete;
        Ok(())
    }
}

/// Where a listing of `prefix` from `offset` starts, relative to the
/// prefix's folder.
fn relative_offset(prefix: &Path, offset: &Path) -> Option<Start> {
    let offset = offset.as_ref();
    if prefix.as_ref().is_empty() {
        return (!offset.is_empty()).then(|| Start::After(offset.to_owned()));
    }
    let folder = format!("{prefix}/");
    match offset.strip_prefix(&folder) {
        Some(rest) => Some(Start::After(rest.to_owned())),
        None if offset < folder.as_str() => None,
        None => Some(Start::Nowhere),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LocalFolder;
    use futures::TryStreamExt as _;
    use object_store::memory::InMemory;
    use object_store::{ObjectStore, ObjectStoreExt as _};

    /// Names whose order as paths differs from their order as names: a
    /// folder `a` sorts after `a-b` and `a.c` and before `a0`.
    const PATHS: [&str; 12] = [
        "p/a-b", "p/a.c", "p/a/x", "p/a/y/z", "p/a/y-1", "p/a0", "p/b", "p/b/c", "p/ba", "p/c.1",
        "p/c/d", "q/e",
    ];

    async fn listed(store: &dyn ObjectStore, prefix: &str, offset: &str) -> Vec<String> {
        store
            .list_with_offset(Some(&Path::from(prefix)), &Path::from(offset))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_folder_lists_from_an_offset_in_the_order_object_storage_does() {
        let dir = tempfile::tempdir().unwrap();
        let folder = LocalFolder::new(dir.path()).unwrap();
        let memory = InMemory::new();
        for path in PATHS {
            // `p/b` is a folder on disk; in memory it is a file too.
            if path == "p/b" {
                continue;
            }
            folder.put(&Path::from(path), "x".into()).await.unwrap();
            memory.put(&Path::from(path), "x".into()).await.unwrap();
        }
        let mut offsets: Vec<String> = PATHS.iter().map(|p| p.to_string()).collect();
        offsets
            .extend(["", "p", "p/", "p/a", "p/a/", "p/a/y", "p/a-", "p/zz", "z"].map(String::from));
        for prefix in ["p", "p/a", ""] {
            for offset in &offsets {
                assert_eq!(
                    listed(&folder, prefix, offset).await,
                    listed(&memory, prefix, offset).await,
                    "prefix {prefix:?}, offset {offset:?}"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_listing_that_stops_early_holds_and_reads_a_bounded_batch() {
        let dir = tempfile::tempdir().unwrap();
        let folder = LocalFolder::new(dir.path()).unwrap();
        let n = 3 * FIRST_BATCH;
        for i in 0..n {
            let path = Path::from(format!("f/{i:05}"));
            folder.put(&path, "x".into()).await.unwrap();
        }
        let root = Arc::new(dir.path().canonicalize().unwrap());

        // A page of ten from the middle: one read, at most a batch held.
        let mut walk = OrderedWalk::new(root.clone(), Path::from("f"), Path::from("f/01000"));
        let page: Vec<_> = walk
            .by_ref()
            .take(10)
            .map(|m| m.unwrap().location)
            .collect();
        assert_eq!(page[0].as_ref(), "f/01001");
        assert_eq!(page[9].as_ref(), "f/01010");
        assert_eq!(walk.reads, 1);
        assert!(walk.most_held() < FIRST_BATCH);

        // Read through: every name once, in order, in few reads.
        let mut walk = OrderedWalk::new(root, Path::from("f"), Path::from("f"));
        let mut all = Vec::new();
        let mut most_held = 0;
        while let Some(meta) = walk.next() {
            all.push(meta.unwrap().location.to_string());
            most_held = most_held.max(walk.most_held());
            // Never more held than returned, past the first batch.
            assert!(
                walk.most_held() <= all.len().max(FIRST_BATCH),
                "{}",
                all.len()
            );
        }
        let expected: Vec<_> = (0..n).map(|i| format!("f/{i:05}")).collect();
        assert_eq!(all, expected);
        // 1,024 names kept, then 1,024, then the last 1,024 of the 2,048
        // the third read may keep.
        assert_eq!(walk.reads, 3);
        assert!(most_held < FIRST_BATCH);
    }
}
