//! Large values the tests write and read as blobs (`memo_runtime::blob`):
//! generated a piece at a time and never held whole, and checked against
//! the SHA-256 of the same pieces, computed here apart from memo's.

use std::sync::atomic::{AtomicU32, Ordering};

use futures::StreamExt;
use memo_runtime::blob::{Blob, BlobWriter};
use memo_runtime::{Error, Memo, MemoStore, memoized};
use sha2::{Digest, Sha256};

/// The size of the pieces a [`Generated`] value is written in: 1 MiB and
/// 3 bytes, so pieces never line up with chunks or parts.
pub const PIECE: usize = (1 << 20) + 3;

/// Just over 64 MiB: four times memo's default in-memory limit.
pub const OVER_64_MIB: u64 = (64 << 20) + 1;

/// A value of `len` bytes drawn from `seed`: random bytes, or (if
/// `compressible`) a random 1 KiB line repeated, which zstd shrinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Generated {
    /// Its length in bytes.
    pub len: u64,
    /// What draws its bytes.
    pub seed: u64,
    /// Whether it repeats a short line (compressible) or not.
    pub compressible: bool,
}

impl Generated {
    /// `len` random bytes from `seed`.
    pub fn random(len: u64, seed: u64) -> Generated {
        Generated {
            len,
            seed,
            compressible: false,
        }
    }

    /// `len` bytes of a repeated line from `seed`.
    pub fn compressible(len: u64, seed: u64) -> Generated {
        Generated {
            len,
            seed,
            compressible: true,
        }
    }

    /// Its pieces, in order, each [`PIECE`] bytes but the last.
    pub fn pieces(self) -> impl Iterator<Item = Vec<u8>> {
        let mut state = self.seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let line: Vec<u8> = (0..128).flat_map(|_| next().to_le_bytes()).collect();
        let mut left = self.len;
        let mut at = 0usize;
        std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let len = PIECE.min(usize::try_from(left).unwrap_or(PIECE));
            left -= len as u64;
            let mut piece = Vec::with_capacity(len + 8);
            while piece.len() < len {
                if self.compressible {
                    let start = at % line.len();
                    let n = (line.len() - start).min(len - piece.len());
                    piece.extend_from_slice(&line[start..start + n]);
                    at += n;
                } else {
                    piece.extend_from_slice(&next().to_le_bytes());
                }
            }
            piece.truncate(len);
            Some(piece)
        })
    }

    /// The SHA-256 of its bytes, in lower-case hex.
    pub fn sha256(self) -> String {
        let mut digest = Sha256::new();
        self.pieces().for_each(|piece| digest.update(&piece));
        hex(&digest.finalize())
    }

    /// Writes it into a new blob of `memo`'s step, a piece at a time.
    ///
    /// # Errors
    ///
    /// The blob writer's.
    pub async fn write(self, memo: &Memo) -> Result<Blob, Error> {
        self.write_in_chunks(memo, memo_runtime::blob::DEFAULT_CHUNK_SIZE)
            .await
    }

    /// Writes it into a new blob of `memo`'s step in chunks of
    /// `chunk_size` bytes, a piece at a time.
    ///
    /// # Errors
    ///
    /// The blob writer's.
    pub async fn write_in_chunks(self, memo: &Memo, chunk_size: usize) -> Result<Blob, Error> {
        let mut writer = BlobWriter::new(memo).with_chunk_size(chunk_size)?;
        for piece in self.pieces() {
            writer.write(&piece).await?;
        }
        writer.finish().await
    }
}

/// Writes `value` as a blob, counting the run in `runs`: a memoized side
/// effect whose value is larger than any memo entry may hold.
///
/// # Errors
///
/// The blob writer's.
#[memoized(skip(runs))]
pub async fn export(memo: &Memo, value: &Generated, runs: &AtomicU32) -> Result<Blob, Error> {
    runs.fetch_add(1, Ordering::SeqCst);
    value.write(memo).await
}

/// The size and SHA-256 of what [`Blob::read`] streams from `store`,
/// chunk by chunk (never held whole), and the largest chunk it handed on.
///
/// # Errors
///
/// The first error of the stream.
pub async fn read_back(blob: &Blob, store: &MemoStore) -> Result<ReadBack, Error> {
    let mut stream = blob.read(store);
    let mut digest = Sha256::new();
    let mut back = ReadBack::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        digest.update(&chunk);
        back.len += chunk.len() as u64;
        back.largest_chunk = back.largest_chunk.max(chunk.len());
        back.chunks += 1;
    }
    back.sha256 = hex(&digest.finalize());
    Ok(back)
}

/// What [`read_back`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadBack {
    /// Bytes read.
    pub len: u64,
    /// Their SHA-256, in lower-case hex.
    pub sha256: String,
    /// The largest chunk the stream handed on.
    pub largest_chunk: usize,
    /// How many chunks it handed on.
    pub chunks: usize,
}

/// Asserts that `blob`, read from `store`, is `value` (whose SHA-256,
/// computed once by the caller, is `sha256`), in chunks no larger than the
/// blob's; `what` names the case in messages.
///
/// # Panics
///
/// If the read fails or reads anything else.
pub async fn assert_reads_back(
    blob: &Blob,
    store: &MemoStore,
    (value, sha256): (Generated, &str),
    what: &str,
) {
    let back = read_back(blob, store)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(back.len, value.len, "{what}");
    assert_eq!(back.sha256, sha256, "{what}");
    assert_eq!(blob.sha256(), sha256, "{what}");
    assert!(back.largest_chunk <= blob.chunk_size(), "{what}: {back:?}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cloud check of large values (see [`crate::cloud_checks!`]): a value
/// over the in-memory limit round-trips through `#[memoized]` as a
/// multipart upload, a hit from another client streams it again, a sealed
/// one (compressed and encrypted) reads back, and clearing the run deletes
/// both. `store` opens a new client of the test's prefix each call.
///
/// # Panics
///
/// If any of that fails.
pub async fn large_values_round_trip_through_multipart_uploads(store: impl Fn() -> MemoStore) {
    let id = memo_runtime::RunId::new("large-values").unwrap();
    let value = Generated::random(OVER_64_MIB, 11);
    let expected = (value, &*value.sha256());
    let runs = AtomicU32::new(0);
    let writer = store();
    let blob = export(&writer.new_memo(&id, 0), &value, &runs)
        .await
        .unwrap();
    let reader = store();
    let again = export(&reader.new_memo(&id, 0), &value, &runs)
        .await
        .unwrap();
    assert_eq!((&again, runs.load(Ordering::SeqCst)), (&blob, 1));
    assert_reads_back(&again, &reader, expected, "a hit, another client").await;

    let sealed_store = store().with_seal(crate::fixtures::every_seal_option());
    let sealed = Generated::compressible(17 << 20, 12);
    let sealed_blob = sealed.write(&sealed_store.new_memo(&id, 1)).await.unwrap();
    let sealed_sha = sealed.sha256();
    assert_reads_back(&sealed_blob, &sealed_store, (sealed, &sealed_sha), "sealed").await;

    writer.clear_memos_for_run(&id).await.unwrap();
    for (blob, store) in [(&blob, &reader), (&sealed_blob, &sealed_store)] {
        let error = read_back(blob, store).await.unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { reason, .. } if reason.contains("missing")),
            "{error}"
        );
    }
}
