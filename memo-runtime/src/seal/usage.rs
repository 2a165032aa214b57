//! Which keys a store's objects need: a scan of the start of each object's
//! frame, so that a key version is retired only once nothing sealed with
//! it is kept (`memoctl keys`).

use std::collections::BTreeMap;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};

use crate::envelope::{self, SealedWith};
use crate::error::{Error, Result};

/// How the objects under a prefix are sealed, counted by
/// [`KeyUsage::scan`]: whether a store keyring's key version is still
/// needed (an object names it) before it is dropped from the key file.
///
/// A large value's object (a [`Blob`](crate::blob::Blob)) counts as its
/// first chunk is sealed: one writer seals every chunk alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyUsage {
    /// Objects scanned.
    pub objects: u64,
    /// Objects encrypted with a store keyring, by key version.
    pub by_key_version: BTreeMap<u32, u64>,
    /// Objects encrypted with a run's (or a shared namespace's) data key:
    /// which key-encryption key versions those need,
    /// [`DataKeys::kek_versions`](super::DataKeys::kek_versions) says.
    pub data_key_sealed: u64,
    /// Framed objects that are not encrypted and that memo encrypts in an
    /// encrypted store: values stored before encryption was turned on (or
    /// by a process without it). `Seal::accepting_plaintext` may be turned
    /// off once there are none.
    pub plaintext: u64,
    /// Framed objects that are not encrypted where memo never encrypts
    /// (told by their place in the store's layout): terminal and recheck
    /// markers, due-run entries, status hints, tombstones, shared entries'
    /// expiry markers. Their meaning is in their names, their payload empty
    /// or the run's id; reads never need a key or `accepting_plaintext`
    /// for them.
    pub never_sealed: u64,
    /// Objects with no frame: vacated run pointers, files memo did not
    /// write.
    pub unframed: u64,
    /// Frames of a format version this build does not know (written by a
    /// newer release): they may need any key.
    pub unknown: u64,
}

/// The bytes a blob's chunk record puts before the chunk's frame.
const CHUNK_HEADER_LEN: usize = crate::chunk_frame::HEADER_LEN;

impl KeyUsage {
    /// Counts how every object under `prefix` in `store` is sealed: one
    /// listing, and a read of each object's first bytes (at most 26, a
    /// ranged `GET`, 16 at a time; none for an empty object). An object
    /// deleted between the listing and its read is not counted.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] if the listing or a read fails.
    pub async fn scan(store: &dyn ObjectStore, prefix: &Path) -> Result<KeyUsage> {
        // The listing is read as it comes, a few objects' starts at once:
        // memory does not grow with the store, and a bucket's round trips
        // overlap.
        let mut sealings = store
            .list(Some(prefix))
            .map_err(|e| Error::store(prefix, e))
            .map_ok(|meta| sealing_at(store, meta))
            .try_buffer_unordered(SCAN_READS);
        let mut usage = KeyUsage::default();
        while let Some(sealed) = sealings.try_next().await? {
            if let Some((path, sealed)) = sealed {
                usage.count(&path, sealed);
            }
        }
        Ok(usage)
    }

    /// Adds the counts of `other` (another prefix's scan) to these.
    pub fn add(&mut self, other: &KeyUsage) {
        self.objects += other.objects;
        for (version, count) in &other.by_key_version {
            *self.by_key_version.entry(*version).or_default() += count;
        }
        self.data_key_sealed += other.data_key_sealed;
        self.plaintext += other.plaintext;
        self.never_sealed += other.never_sealed;
        self.unframed += other.unframed;
        self.unknown += other.unknown;
    }

    fn count(&mut self, path: &Path, sealed: SealedWith) {
        self.objects += 1;
        match sealed {
            SealedWith::NoFrame => self.unframed += 1,
            SealedWith::Plaintext if crate::layout::never_sealed(path) => self.never_sealed += 1,
            SealedWith::Plaintext => self.plaintext += 1,
            SealedWith::KeyVersion(version) => {
                *self.by_key_version.entry(version).or_default() += 1;
            }
            SealedWith::DataKey => self.data_key_sealed += 1,
            SealedWith::Unknown => self.unknown += 1,
        }
    }
}

/// How many objects' starts a scan reads at once.
const SCAN_READS: usize = 16;

/// Where the object `meta` lists is and how it was sealed, from its first
/// bytes (`None` if it was deleted since it was listed).
async fn sealing_at(
    store: &dyn ObjectStore,
    meta: ObjectMeta,
) -> Result<Option<(Path, SealedWith)>> {
    let len = meta
        .size
        .min((CHUNK_HEADER_LEN + envelope::SEALING_LEN) as u64);
    if len == 0 {
        return Ok(Some((meta.location, sealing_of(&[]))));
    }
    match store.get_range(&meta.location, 0..len).await {
        Ok(start) => Ok(Some((meta.location, sealing_of(&start)))),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(Error::store(&meta.location, e)),
    }
}

/// How an object beginning with `start` was sealed: a frame, or a blob
/// whose first chunk record holds one.
fn sealing_of(start: &[u8]) -> SealedWith {
    if start.starts_with(crate::chunk_frame::MAGIC) {
        return match start.get(CHUNK_HEADER_LEN..) {
            Some(frame) => envelope::sealed_with(frame),
            None => SealedWith::Unknown,
        };
    }
    envelope::sealed_with(start)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::PutPayload;
    use object_store::memory::InMemory;

    use super::*;
    use crate::run_id::{Incarnation, RunId};
    use crate::seal::{Keyring, Seal};

    fn sealed(path: &str, payload: &[u8], seal: &Seal) -> (Path, bytes::Bytes) {
        let at = Path::from(path);
        let framed = envelope::seal(&at, payload, seal);
        (at, framed)
    }

    #[tokio::test]
    async fn a_scan_counts_each_object_by_the_key_its_frame_names() {
        let store = Arc::new(InMemory::new());
        let v1 = Seal::plain().with_encryption(Keyring::new(1, [1; 32]).unwrap());
        let v2 = Seal::plain().with_encryption(
            Keyring::new(1, [1; 32])
                .unwrap()
                .with_key(2, [2; 32])
                .unwrap(),
        );
        let mut objects = vec![
            sealed("m/a", b"one", &v1),
            sealed("m/b", b"two", &v2),
            sealed("m/c", b"three", &v2),
            sealed("m/d", b"plain", &Seal::plain()),
            (Path::from("m/marker"), bytes::Bytes::new()),
            (Path::from("m/hint"), bytes::Bytes::from_static(b"run-1")),
            (
                Path::from("m/newer"),
                bytes::Bytes::from_static(b"MEMO\x09rest"),
            ),
            (
                Path::from("other/x"),
                envelope::seal(&Path::from("other/x"), b"x", &v1),
            ),
        ];
        // What memo never encrypts, in its place in the layout: framed
        // plaintext, but not a value to migrate.
        let layout = crate::layout::Layout::new("m");
        let (run, inc) = (RunId::new("r-1").unwrap(), Incarnation::from_u64(7));
        for at in [
            layout.marker(crate::layout::TERMINALS, &run, inc, 3),
            layout.status_hint("Completed", &run, inc),
        ] {
            objects.push(sealed(at.as_ref(), run.as_str().as_bytes(), &Seal::plain()));
        }
        // A blob's object: its first chunk record, sealed with version 1.
        let blob = Path::from("m/blob");
        let at = crate::chunk_frame::ChunkAt {
            blob: &blob,
            index: 0,
            last: true,
        };
        let chunk: Vec<u8> = crate::chunk_frame::encode(at, b"large", &v1).concat();
        objects.push((blob.clone(), bytes::Bytes::from(chunk)));
        for (at, bytes) in objects {
            store.put(&at, PutPayload::from(bytes)).await.unwrap();
        }
        let usage = KeyUsage::scan(store.as_ref(), &Path::from("m"))
            .await
            .unwrap();
        assert_eq!(
            usage,
            KeyUsage {
                objects: 10,
                by_key_version: BTreeMap::from([(1, 2), (2, 2)]),
                data_key_sealed: 0,
                plaintext: 1,
                never_sealed: 2,
                unframed: 2,
                unknown: 1,
            }
        );
        let mut both = usage.clone();
        both.add(
            &KeyUsage::scan(store.as_ref(), &Path::from("other"))
                .await
                .unwrap(),
        );
        assert_eq!((both.objects, both.by_key_version[&1]), (11, 3));
    }
}
