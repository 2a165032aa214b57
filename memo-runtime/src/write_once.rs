//! The write-once mechanism every stored record goes through: create the
//! object only if it is absent, and otherwise read back and return what is
//! committed, so every writer of a path ends up with one value.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};

use crate::envelope;
use crate::error::{Error, Result};
use crate::read_limit::{Limit, read_bounded};
use crate::seal::Seal;

/// How many times a create whose outcome is unknown is tried before the error
/// is returned.
const CREATE_ATTEMPTS: u32 = 3;

/// The outcome of [`create_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Created {
    /// This call's create committed.
    Ours(Bytes),
    /// The same bytes are committed, but whether this call wrote them (an
    /// acknowledgement lost) or an earlier writer did is unknown.
    Same(Bytes),
    /// Another writer committed other bytes first; its payload.
    Theirs(Bytes),
}

impl Created {
    /// The committed payload, whoever wrote it.
    pub(crate) fn into_payload(self) -> Bytes {
        match self {
            Created::Ours(b) | Created::Same(b) | Created::Theirs(b) => b,
        }
    }

    /// The committed payload, whoever wrote it.
    pub(crate) fn payload(&self) -> &Bytes {
        match self {
            Created::Ours(b) | Created::Same(b) | Created::Theirs(b) => b,
        }
    }

    /// The outcome of writing `ours` where `committed` is known committed
    /// already, without a request.
    pub(crate) fn of_committed(ours: &[u8], committed: Bytes) -> Created {
        classify(ours, committed)
    }
}

/// Reads and unframes the object at `path`, sealed by `seal`; `None` if it
/// does not exist.
///
/// # Errors
///
/// [`Error::Store`] if the read fails, [`Error::Corrupt`] if the object is
/// larger than `limit` (checked before its body is read, and again for its
/// payload once decompressed) or the frame does not check against `seal`.
pub(crate) async fn read(
    store: &dyn ObjectStore,
    path: &Path,
    limit: Limit,
    seal: &Seal,
) -> Result<Option<Bytes>> {
    let Some(framed) = read_bounded(store, path, limit).await? else {
        return Ok(None);
    };
    let seal = seal
        .for_reading(path, crate::envelope::data_key_id(&framed))
        .await?;
    let payload = envelope::open(path, framed, &seal, limit.max_payload())?;
    if payload.len() as u64 > limit.max_payload() {
        return Err(limit.payload_exceeded(path, payload.len() as u64));
    }
    Ok(Some(payload))
}

/// Creates the object at `path` holding `payload` (framed and sealed by
/// `seal`) unless one exists, and returns the payload that is committed
/// there.
///
/// A failure whose effect is unknown (a timeout, a lost acknowledgement) is
/// settled by reading back: if the object exists, its content is the answer,
/// whoever wrote it; if not, the create is tried again.
///
/// The framed object, and the payload before compression, must fit
/// `limit`, the limit its reads are held to, so that memo never writes what
/// it would refuse to read.
///
/// # Errors
///
/// [`Error::TooLarge`] if the framed object is larger than `limit` (nothing
/// is written); [`Error::ConditionalPutUnsupported`] if the backend cannot
/// create conditionally; [`Error::Store`] if the create keeps failing and
/// nothing is committed; [`Error::Corrupt`] if the committed object does not
/// check.
pub(crate) async fn create_once(
    store: &dyn ObjectStore,
    path: &Path,
    payload: &[u8],
    limit: Limit,
    seal: &Seal,
) -> Result<Created> {
    // Held to the plain frame's size whatever the seal: a sealed frame may
    // take a little more in the store, and reads allow for that.
    let size = payload.len() + envelope::OVERHEAD;
    if !limit.admits(size as u64) {
        return Err(Error::TooLarge {
            key: path.to_string(),
            size,
            limit: usize::try_from(limit.bytes()).unwrap_or(usize::MAX),
        });
    }
    let seal = seal.for_writing(path).await?;
    let framed = envelope::seal(path, payload, &seal);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let opts = PutOptions::from(PutMode::Create);
        let outcome = store
            .put_opts(path, PutPayload::from(framed.clone()), opts)
            .await;
        let failure = match outcome {
            Ok(_) => return Ok(Created::Ours(envelope::payload_of_sealed(&framed, payload))),
            Err(object_store::Error::NotImplemented { .. }) => {
                return Err(Error::ConditionalPutUnsupported {
                    path: path.to_string(),
                });
            }
            Err(e @ object_store::Error::AlreadyExists { .. })
            | Err(e @ object_store::Error::Precondition { .. }) => {
                match read(store, path, limit, &seal).await? {
                    Some(committed) => return Ok(classify(payload, committed)),
                    // Swept between our create and the read: try again.
                    None => e,
                }
            }
            Err(e) => match read(store, path, limit, &seal).await {
                Ok(Some(committed)) => return Ok(classify(payload, committed)),
                Ok(None) | Err(_) => e,
            },
        };
        if attempt >= CREATE_ATTEMPTS {
            return Err(Error::store(path, failure));
        }
        tracing::debug!(%path, attempt, error = %failure, "create outcome unknown; retrying");
    }
}

fn classify(ours: &[u8], committed: Bytes) -> Created {
    if committed == ours {
        Created::Same(committed)
    } else {
        Created::Theirs(committed)
    }
}
