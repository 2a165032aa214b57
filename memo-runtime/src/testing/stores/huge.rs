//! `HugeObjects`: an object store in which chosen objects are huge, as a
//! sparse file in a shared folder or a large object in a bucket is, without
//! the test allocating or storing their bytes.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions, Result,
};

use super::lock;

/// The zeros a huge object's body is streamed in, one chunk at a time.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Wraps a store so that chosen paths hold objects of a chosen size (say
/// 1 TiB), made of zeros that are produced only as a reader pulls them.
///
/// A planted object is what reads see at its path, whatever the wrapped
/// store holds there: `get` (and `head`) report its size, listings list it
/// (under its prefix, with its size), a create there is refused as
/// `AlreadyExists`. An overwrite or a delete of the path removes it (a
/// delete is also forwarded, and may answer `NotFound` if only the planted
/// object was there). Use it to check that a reader looks at an object's
/// size before reading its body: one that does not allocates the whole size.
///
/// # Example
///
/// ```
/// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStoreExt};
/// use memo_runtime::testing::HugeObjects;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = HugeObjects::new(InMemory::new());
/// let path = Path::from("memo/runs/r/run");
/// store.plant(path.clone(), 1 << 40);
/// assert_eq!(store.head(&path).await.unwrap().size, 1 << 40);
/// # }
/// ```
pub struct HugeObjects<T> {
    inner: T,
    /// Planted paths and their sizes, shared with the listings in flight.
    planted: Arc<Mutex<BTreeMap<Path, u64>>>,
}

impl<T> HugeObjects<T> {
    /// Wraps `inner`, with nothing planted.
    pub fn new(inner: T) -> Self {
        HugeObjects {
            inner,
            planted: Arc::default(),
        }
    }

    /// Makes the object at `path` one of `size` bytes, from now on.
    pub fn plant(&self, path: Path, size: u64) {
        lock(&self.planted).insert(path, size);
    }

    /// Removes the object planted at `path`; whether there was one.
    pub fn remove(&self, path: &Path) -> bool {
        lock(&self.planted).remove(path).is_some()
    }

    /// The planted paths, in order.
    pub fn planted(&self) -> Vec<Path> {
        lock(&self.planted).keys().cloned().collect()
    }

    fn size_of(&self, path: &Path) -> Option<u64> {
        lock(&self.planted).get(path).copied()
    }

    /// The planted objects below `prefix` (after `offset`, if given).
    fn planted_below(&self, prefix: Option<&Path>, offset: Option<&Path>) -> Vec<ObjectMeta> {
        let prefix = prefix.cloned().unwrap_or_default();
        lock(&self.planted)
            .iter()
            .filter(|(path, _)| path.prefix_match(&prefix).is_some() && *path != &prefix)
            .filter(|(path, _)| offset.is_none_or(|offset| *path > offset))
            .map(|(path, &size)| meta(path.clone(), size))
            .collect()
    }

    /// `listed` with the planted objects in place of what the inner store
    /// holds at their paths, as planted when the listing was asked for: a
    /// plant removed or added while the listing is read changes neither
    /// side, so no path is listed twice (or not at all).
    fn merge(
        &self,
        listed: BoxStream<'static, Result<ObjectMeta>>,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let ours = self.planted_below(prefix, offset);
        let shadowing: std::collections::BTreeSet<Path> =
            ours.iter().map(|meta| meta.location.clone()).collect();
        listed
            .filter(move |item| {
                let shadowed = matches!(item, Ok(meta) if shadowing.contains(&meta.location));
                std::future::ready(!shadowed)
            })
            .chain(stream::iter(ours.into_iter().map(Ok)))
            .boxed()
    }
}

fn meta(location: Path, size: u64) -> ObjectMeta {
    ObjectMeta {
        location,
        last_modified: std::time::SystemTime::UNIX_EPOCH.into(),
        size,
        e_tag: Some(format!("\"huge-{size:x}\"")),
        version: None,
    }
}

/// The body of a planted object in `range`: zeros, a chunk per poll.
fn zeros(range: Range<u64>) -> BoxStream<'static, Result<Bytes>> {
    stream::unfold(range, |range| async move {
        let len = (range.end - range.start).min(ZEROS.len() as u64);
        if len == 0 {
            return None;
        }
        let chunk = Bytes::from_static(&ZEROS[..len as usize]);
        Some((Ok(chunk), range.start + len..range.end))
    })
    .boxed()
}

fn planted_get(location: &Path, size: u64, options: &GetOptions) -> Result<GetResult> {
    let meta = meta(location.clone(), size);
    options.check_preconditions(&meta)?;
    let range = match &options.range {
        Some(range) => range
            .as_range(size)
            .map_err(|e| object_store::Error::Generic {
                store: "HugeObjects",
                source: Box::new(e),
            })?,
        None => 0..size,
    };
    Ok(GetResult {
        payload: GetResultPayload::Stream(zeros(range.clone())),
        attributes: Attributes::default(),
        range,
        meta,
        extensions: Default::default(),
    })
}

impl<T: fmt::Debug> fmt::Debug for HugeObjects<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HugeObjects")
            .field("inner", &self.inner)
            .field("planted", &*lock(&self.planted))
            .finish()
    }
}

impl<T: fmt::Display> fmt::Display for HugeObjects<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HugeObjects({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for HugeObjects<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if self.size_of(location).is_some() {
            if opts.mode == PutMode::Create {
                return Err(object_store::Error::AlreadyExists {
                    path: location.to_string(),
                    source: "a huge object is planted here".into(),
                });
            }
            self.remove(location);
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.remove(location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        match self.size_of(location) {
            Some(size) => planted_get(location, size, &options),
            None => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        match self.size_of(location) {
            // A caller of ranges asks for the bytes it wants: give them.
            Some(size) => Ok(ranges
                .iter()
                .map(|r| Bytes::from(vec![0; (r.end.min(size) - r.start.min(size)) as usize]))
                .collect()),
            None => self.inner.get_ranges(location, ranges).await,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let planted = Arc::clone(&self.planted);
        let unplanted = locations
            .inspect(move |location| {
                if let Ok(location) = location {
                    lock(&planted).remove(location);
                }
            })
            .boxed();
        self.inner.delete_stream(unplanted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.merge(self.inner.list(prefix), prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.merge(
            self.inner.list_with_offset(prefix, offset),
            prefix,
            Some(offset),
        )
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let mut listed = self.inner.list_with_delimiter(prefix).await?;
        let base = prefix.cloned().unwrap_or_default();
        let planted = self.planted_below(prefix, None);
        listed
            .objects
            .retain(|o| !planted.iter().any(|p| p.location == o.location));
        for object in planted {
            let parts: Vec<_> = match object.location.prefix_match(&base) {
                Some(rest) => rest.map(|part| part.as_ref().to_owned()).collect(),
                None => continue,
            };
            match &parts[..] {
                [_] => listed.objects.push(object),
                [folder, _, ..] => {
                    let folder = base.clone().join(folder.as_str());
                    if !listed.common_prefixes.contains(&folder) {
                        listed.common_prefixes.push(folder);
                    }
                }
                [] => {}
            }
        }
        Ok(listed)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.remove(to);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.remove(to);
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::stores::exercise_every_method;
    use crate::{Error, MemoStore, RunId};

    const TIB: u64 = 1 << 40;

    #[tokio::test]
    async fn every_method_reaches_the_inner_store() {
        exercise_every_method(&HugeObjects::new(InMemory::new())).await;
    }

    /// Seed 1695 of the deployment world: a plant removed while a listing
    /// of its folder was in flight showed the path twice (the store's own
    /// object, no longer shadowed, and the plant listed at the start), and
    /// the reader took the log for one with a gap.
    #[tokio::test]
    async fn a_listing_shows_each_path_once_when_a_plant_changes_while_it_is_read() {
        let store = HugeObjects::new(InMemory::new());
        for name in ["a/0", "a/1"] {
            store.put(&name.into(), "s".into()).await.unwrap();
        }
        store.plant("a/0".into(), TIB);
        let removed_meanwhile = store.list(Some(&"a".into()));
        store.remove(&"a/0".into());
        store.plant("a/1".into(), TIB);
        let listed: Vec<_> = removed_meanwhile.try_collect().await.unwrap();
        let mut seen: Vec<_> = listed
            .iter()
            .map(|m| (m.location.to_string(), m.size))
            .collect();
        seen.sort();
        assert_eq!(seen, [("a/0".to_owned(), TIB), ("a/1".to_owned(), 1)]);
    }

    #[tokio::test]
    async fn a_planted_object_is_listed_and_read_with_its_size_and_never_allocated() {
        let store = HugeObjects::new(InMemory::new());
        store.put(&"a/small".into(), "s".into()).await.unwrap();
        store.plant("a/small".into(), TIB);
        store.plant("a/b/deep".into(), 2 * TIB);
        let listed: Vec<_> = store.list(Some(&"a".into())).try_collect().await.unwrap();
        let sizes: BTreeMap<_, _> = listed
            .iter()
            .map(|m| (m.location.to_string(), m.size))
            .collect();
        let expected = [
            ("a/small".to_owned(), TIB),
            ("a/b/deep".to_owned(), 2 * TIB),
        ];
        assert_eq!(sizes, BTreeMap::from(expected));
        let top = store.list_with_delimiter(Some(&"a".into())).await.unwrap();
        assert_eq!(top.common_prefixes, [Path::from("a/b")]);
        assert_eq!(top.objects.len(), 1);
        assert_eq!(top.objects[0].size, TIB);

        let got = store.get(&"a/small".into()).await.unwrap();
        assert_eq!(got.meta.size, TIB);
        let first = got.into_stream().next().await.unwrap().unwrap();
        assert_eq!(first.len(), ZEROS.len());
        let refused = store
            .put_opts(&"a/small".into(), "x".into(), PutMode::Create.into())
            .await;
        assert!(matches!(
            refused,
            Err(object_store::Error::AlreadyExists { .. })
        ));
        store.delete(&"a/small".into()).await.unwrap();
        assert_eq!(store.planted(), [Path::from("a/b/deep")]);
    }

    #[tokio::test]
    async fn memo_refuses_a_planted_huge_entry_before_reading_it() {
        let store = Arc::new(HugeObjects::new(InMemory::new()));
        let run = RunId::new("r").unwrap();
        let writer = MemoStore::new(store.clone(), "memo");
        writer.new_memo(&run, 0).put("k", b"v").await.unwrap();
        let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
        store.plant(listed[0].location.clone(), TIB);

        let reader = MemoStore::new(store.clone(), "memo");
        let error = reader.new_memo(&run, 0).get("k").await.unwrap_err();
        assert!(matches!(error, Error::Corrupt { .. }), "{error}");
    }
}
