//! How large a stored object may be for what it should hold, and the one
//! read that checks it before reading the body: an object larger than memo
//! ever writes (a sparse 1 TiB file in a shared folder costs its writer
//! nothing; a huge object in a bucket) is refused as corrupt, naming its
//! path, instead of making the reader allocate its size and abort.
//!
//! Writes are held to the same limits (see `write_once::create_once`), so
//! memo never writes an object that it would then refuse to read.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, UpdateVersion};

use crate::envelope;
use crate::error::{Error, Result};

const MIB: u64 = 1024 * 1024;

/// What a sealed frame may add beyond a plain one's overhead: its payload
/// is held to the same limit once opened.
const SEALED_SLACK: u64 = (envelope::MAX_OVERHEAD - envelope::OVERHEAD) as u64;

/// The most a kind of stored object may take in the store, frame included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limit {
    /// The limit in bytes, frame included.
    bytes: u64,
    /// What the object holds, for messages ("a memo entry").
    what: &'static str,
}

impl Limit {
    /// A runtime-store record: a run's creation (with its input), a log
    /// entry (one change: a step's receipt, an input or signal, a status).
    /// Four times memo's default value limit, for a receipt or input that
    /// carries a value the size of a large memo value.
    pub(crate) const RECORD: Limit = Limit {
        bytes: 64 * MIB,
        what: "a runtime-store record",
    };

    /// A run checkpoint, base or delta: a base holds every receipt of its
    /// run, so it is the largest object memo writes.
    pub(crate) const CHECKPOINT: Limit = Limit {
        bytes: 1024 * MIB,
        what: "a run checkpoint",
    };

    /// A terminal marker or status hint: empty, or a run id.
    pub(crate) const MARKER: Limit = Limit {
        bytes: 4096,
        what: "a marker",
    };

    /// A memo or step-output entry of a store whose values may be up to
    /// `max_value_size` bytes.
    pub(crate) fn memo_entry(max_value_size: usize) -> Limit {
        let frame = envelope::OVERHEAD as u64;
        Limit {
            bytes: u64::try_from(max_value_size)
                .unwrap_or(u64::MAX)
                .saturating_add(frame),
            what: "a memo entry",
        }
    }

    /// The limit in bytes, frame included.
    pub(crate) fn bytes(self) -> u64 {
        self.bytes
    }

    /// Whether `size` bytes fit.
    pub(crate) fn admits(self, size: u64) -> bool {
        size <= self.bytes
    }

    /// Whether a stored object of `size` bytes may hold a payload within
    /// the limit: a plain frame, or a sealed one with its larger header,
    /// nonce and tag.
    fn admits_object(self, size: u64) -> bool {
        size <= self.bytes.saturating_add(SEALED_SLACK)
    }

    /// The largest payload within the limit, as a plain frame holds it.
    pub(crate) fn max_payload(self) -> u64 {
        self.bytes.saturating_sub(envelope::OVERHEAD as u64)
    }

    /// The error of a payload of `size` bytes, over [`Limit::max_payload`],
    /// at `path`.
    pub(crate) fn payload_exceeded(self, path: &Path, size: u64) -> Error {
        Error::corrupt(
            path,
            format!(
                "the payload is {size} bytes, over the {} bytes {} may hold: memo never \
                 writes one this large, and does not read it",
                self.max_payload(),
                self.what
            ),
        )
    }

    fn exceeded(self, path: &Path, size: u64) -> Error {
        Error::corrupt(
            path,
            format!(
                "the object is {size} bytes, over the {} bytes {} may take: \
                 memo never writes one this large, and does not read it",
                self.bytes.saturating_add(SEALED_SLACK),
                self.what
            ),
        )
    }
}

/// Reads the object at `path` whole, unless it is larger than `limit`;
/// `None` if it does not exist. With it, the version of the object read
/// (its e-tag and version, as far as the store tells them): what a
/// conditional update of that object names.
///
/// The size is the one the store reports with the object's metadata, known
/// before the body is read: an oversize object costs one request and no
/// allocation.
///
/// # Errors
///
/// [`Error::Corrupt`] naming the path and both sizes if the object is
/// larger than `limit`; [`Error::Store`] if a request fails.
pub(crate) async fn read_bounded(
    store: &dyn ObjectStore,
    path: &Path,
    limit: Limit,
) -> Result<Option<(Bytes, UpdateVersion)>> {
    let got = match store.get(path).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(Error::store(path, e)),
    };
    if !limit.admits_object(got.meta.size) {
        return Err(limit.exceeded(path, got.meta.size));
    }
    let version = UpdateVersion {
        e_tag: got.meta.e_tag.clone(),
        version: got.meta.version.clone(),
    };
    match got.bytes().await {
        // A store whose body outgrew the size it announced.
        Ok(body) if !limit.admits_object(body.len() as u64) => {
            Err(limit.exceeded(path, body.len() as u64))
        }
        Ok(body) => Ok(Some((body, version))),
        // Deleted between the head of the response and its body.
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(Error::store(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::PLAIN;
    use crate::write_once;
    use object_store::memory::InMemory;

    const SMALL: Limit = Limit {
        bytes: 32,
        what: "a test object",
    };

    #[tokio::test]
    async fn an_object_over_its_limit_is_corrupt_before_its_body_is_read() {
        let store = InMemory::new();
        let path = Path::from("memo/big");
        // 32 bytes and the room a sealed frame takes beyond a plain one.
        let most = 32 + SEALED_SLACK as usize;
        store.put(&path, vec![0u8; most + 1].into()).await.unwrap();
        let error = read_bounded(&store, &path, SMALL).await.unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { path, reason }
                if path == "memo/big" && reason.contains("87 bytes") && reason.contains("86 bytes")),
            "{error}"
        );
        store.put(&path, vec![0u8; most].into()).await.unwrap();
        assert_eq!(
            read_bounded(&store, &path, SMALL)
                .await
                .unwrap()
                .unwrap()
                .0
                .len(),
            most
        );
    }

    #[tokio::test]
    async fn memo_never_writes_what_it_would_refuse_to_read() {
        let store = InMemory::new();
        let path = Path::from("memo/big");
        let payload = [1u8; 32 - envelope::OVERHEAD + 1];
        let error = write_once::create_once(&store, &path, &payload, SMALL, &PLAIN)
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::TooLarge {
                    size: 33,
                    limit: 32,
                    ..
                }
            ),
            "{error}"
        );
        assert!(store.head(&path).await.is_err(), "nothing is written");
        let fits = &payload[1..];
        write_once::create_once(&store, &path, fits, SMALL, &PLAIN)
            .await
            .unwrap();
        assert_eq!(
            write_once::read(&store, &path, SMALL, &PLAIN)
                .await
                .unwrap()
                .unwrap(),
            fits
        );
    }

    #[test]
    fn a_memo_entry_may_hold_a_value_of_the_limit_and_its_largest_frame() {
        let limit = Limit::memo_entry(100);
        assert!(limit.admits(100 + envelope::OVERHEAD as u64));
        assert!(!limit.admits(101 + envelope::OVERHEAD as u64));
        assert!(limit.admits_object(100 + envelope::MAX_OVERHEAD as u64));
        assert!(!limit.admits_object(101 + envelope::MAX_OVERHEAD as u64));
    }
}
