//! The write-once mechanism every stored record goes through: create the
//! object only if it is absent, and otherwise read back and return what is
//! committed, so every writer of a path ends up with one value.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, PutResult, UpdateVersion,
};

use crate::envelope;
use crate::error::{Error, Result};
use crate::read_limit::{Limit, read_bounded};
use crate::seal::{Opening, PLAIN, Seal};

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
/// does not exist, or is an entry of a cleared standalone run (see
/// [`Seal::for_reading_entry`]).
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
    Ok(
        match read_entry(store, path, limit, seal, Vacancy::Refused).await? {
            Found::Value(payload, _) => Some(payload),
            Found::Absent | Found::Stale(_) => None,
            Found::Vacant(..) => unreachable!("vacancy is refused"),
        },
    )
}

/// How a vacated run pointer begins: `vacant <incarnation>`, unframed (a
/// frame begins with `MEMO`), written by a deletion's conditional update of
/// the pointer it read (`runtime_store/object/pointer.rs`).
pub(crate) const VACANT: &[u8] = b"vacant ";

/// What follows the incarnation in a vacated pointer a recheck marked for
/// its delete: `vacant <incarnation> swept <mark>[ at <ms>]`
/// (`runtime_store/object/pointer.rs`).
pub(crate) const SWEPT: &[u8] = b" swept ";

/// Whether a vacated pointer's bytes are a recheck's mark, whose delete
/// follows: a create that finds one never replaces it (the delete would
/// remove its pointer) but gives up, and its caller decides from the
/// mark's age whether to wait for the path to be free or to replace it
/// (`RunPointer::current_unless_new`).
pub(crate) fn is_swept(vacant: &[u8]) -> bool {
    vacant.starts_with(VACANT) && vacant.windows(SWEPT.len()).any(|w| w == SWEPT)
}

/// What a run pointer's path holds ([`read_pointer_slot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A committed payload, and the version read.
    Value(Bytes, UpdateVersion),
    /// A vacated pointer: its bytes, and the version read, for a
    /// conditional update of it.
    Vacant(Bytes, UpdateVersion),
    /// No object.
    Absent,
}

/// Reads the run pointer at `path`, sealed by `seal`, with its version:
/// as [`read`], but a vacated pointer (see [`VACANT`]) reads as such,
/// where at any other path it is not a frame, and so corrupt.
///
/// # Errors
///
/// As [`read`].
pub(crate) async fn read_pointer_slot(
    store: &dyn ObjectStore,
    path: &Path,
    limit: Limit,
    seal: &Seal,
) -> Result<Slot> {
    Ok(
        match read_entry(store, path, limit, seal, Vacancy::Read).await? {
            Found::Value(payload, version) => Slot::Value(payload, version),
            Found::Vacant(bytes, version) => Slot::Vacant(bytes, version),
            Found::Absent | Found::Stale(_) => Slot::Absent,
        },
    )
}

/// Whether a read takes an object that begins with [`VACANT`] for a
/// vacated run pointer (run pointers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vacancy {
    Read,
    Refused,
}

/// What [`read_entry`] found at a path.
enum Found {
    /// A committed payload, and the version read.
    Value(Bytes, UpdateVersion),
    /// No object.
    Absent,
    /// An entry of a cleared standalone run: a miss, which a create
    /// replaces; the version read, for a conditional update of it.
    Stale(UpdateVersion),
    /// A vacated run pointer ([`Vacancy::Read`] only): a miss, which a
    /// create replaces by a conditional update of the version read.
    Vacant(Bytes, UpdateVersion),
}

/// How many times [`read_entry`] reads an object again whose data key it
/// found forgotten, and which changed since its last read, before it gives
/// up: each change is a deletion and a new run of the id within one read.
const MAX_REREADS: u32 = 3;

async fn read_entry(
    store: &dyn ObjectStore,
    path: &Path,
    limit: Limit,
    seal: &Seal,
    vacancy: Vacancy,
) -> Result<Found> {
    let Some((mut framed, mut version)) = read_bounded(store, path, limit).await? else {
        return Ok(Found::Absent);
    };
    let mut rereads = 0;
    let seal = loop {
        if vacancy == Vacancy::Read && framed.starts_with(VACANT) {
            return Ok(Found::Vacant(framed, version));
        }
        let key = envelope::data_key_ref(&framed);
        let forgotten = match seal.for_reading_entry(path, key).await? {
            Opening::With(seal) => break seal,
            Opening::Stale => {
                tracing::debug!(%path, "an entry of a cleared standalone run reads as a miss");
                return Ok(Found::Stale(version));
            }
            Opening::Forgotten(error) => error,
        };
        // Its key is not in the key store. A run's key is forgotten only
        // once its objects are deleted, so the object may have been read
        // just before its run's deletion and the key looked up just after:
        // read it again, and take what is there now (nothing, or what
        // replaced it: a vacated pointer, another incarnation's).
        if rereads == MAX_REREADS {
            return Err(forgotten);
        }
        rereads += 1;
        match read_bounded(store, path, limit).await? {
            None => return Ok(Found::Absent),
            Some((again, _)) if again == framed => return Err(forgotten),
            Some((again, again_version)) => (framed, version) = (again, again_version),
        }
    };
    let payload = envelope::open(path, framed, &seal, limit.max_payload())?;
    if payload.len() as u64 > limit.max_payload() {
        return Err(limit.payload_exceeded(path, payload.len() as u64));
    }
    Ok(Found::Value(payload, version))
}

/// Creates the object at `path` holding `payload` (framed and sealed by
/// `seal`) unless one exists, and returns the payload that is committed
/// there.
///
/// A failure whose effect is unknown (a timeout, a lost acknowledgement) is
/// settled by reading back: if the object exists, its content is the answer,
/// whoever wrote it; if not, the create is tried again.
///
/// An entry of a cleared standalone run found at `path` (one that reads as
/// a miss) is replaced, sealed again with the key the key store holds now:
/// by a conditional update of the entry read, so that of two writers
/// replacing it one wins and the other reads the winner's value back
/// (memo's [`LocalFolder`](crate::store::LocalFolder), which `file://`
/// opens, has one since issue 26: `local/update.rs`). A store with none
/// (`object_store`'s `LocalFileSystem` given directly) deletes it and
/// creates `path` again; two writers that found it at the same moment may
/// then both commit, one after the other, and get different values, as
/// two uses racing the run's clear may.
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
    let landed = create(
        store,
        path,
        payload,
        limit,
        seal,
        WhenGone::CreateAgain,
        None,
    )
    .await?;
    Ok(landed
        .expect("a create that finds its path gone tries again")
        .created)
}

/// Creates the marker at `path` (plain, holding `payload`) unless one is
/// there: `Ok(true)` if this call's create committed it, `Ok(false)` if it
/// was there already (or is there now and whose it is cannot be told).
///
/// A marker's meaning is all in its name (a terminal marker, a due-run
/// entry, a status hint: listed, never read), so a create that finds the
/// path taken is the answer, without the read back [`create_once`] makes
/// to learn what a record holds: one `GET` fewer each time a marker is
/// written again (a worker waking an ended run writes its terminal marker
/// again, two workers moving a wake-up write one entry). That read proved
/// only that the marker was there a round trip later, and a deletion just
/// after it is as likely as one just before, so no caller could lean on it.
/// Any other failure (an outcome unknown, a store that answers a taken
/// path otherwise) goes the way of [`create_once`], whose read settles it.
///
/// # Errors
///
/// As [`create_once`].
pub(crate) async fn create_marker(
    store: &dyn ObjectStore,
    path: &Path,
    payload: &[u8],
    limit: Limit,
) -> Result<bool> {
    let size = payload.len() + envelope::OVERHEAD;
    if limit.admits(size as u64) {
        let framed = envelope::seal(path, payload, &PLAIN);
        let opts = PutOptions::from(PutMode::Create);
        match store.put_opts(path, PutPayload::from(framed), opts).await {
            Ok(_) => return Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => return Ok(false),
            Err(e) => tracing::debug!(%path, error = %e, "marker create failed; settling it"),
        }
    }
    let created = create_once(store, path, payload, limit, &PLAIN).await?;
    Ok(matches!(created, Created::Ours(_)))
}

/// [`create_once`] of an object that must never take the place of another
/// writer's object that was at `path` and is gone: `None` where
/// `create_once` would create it again after its create found the path
/// taken (or could not tell) and the read back found nothing, and the
/// create's error where `create_once` would try it again after a read that
/// failed. The run pointer is created so (`runtime_store/object/pointer.rs`):
/// the pointer that was there may be a run's, removed by a stale deletion,
/// and the run is restored from its record by the next reader; a new run's
/// pointer in its place would take the place of a run whose creation was
/// acknowledged.
///
/// A vacated pointer at `path` (see [`VACANT`]) is no object to this
/// create: it is replaced by a conditional update of the version read, so
/// that of two creators one wins and the other reads the winner's pointer,
/// as two creates of a free path end; `None` if that version changed into
/// nothing, and after a create whose outcome is unknown that finds one
/// (our pointer may have landed and been vacated since). A caller that
/// read a vacated pointer (`vacant`, the version read) sends the update
/// first, where a create would find the path taken.
///
/// # Errors
///
/// As [`create_once`]; [`Error::Store`] after one create whose outcome a
/// read could not settle.
pub(crate) async fn create_unless_taken(
    store: &dyn ObjectStore,
    path: &Path,
    payload: &[u8],
    limit: Limit,
    seal: &Seal,
    vacant: Option<UpdateVersion>,
) -> Result<Option<Landed>> {
    create(store, path, payload, limit, seal, WhenGone::GiveUp, vacant).await
}

/// What [`create_unless_taken`] committed, or found committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Landed {
    /// What is committed, and whose.
    pub(crate) created: Created,
    /// The entity tag the store answered this call's create with
    /// ([`Created::Ours`] only, on a store that gives one): a listing that
    /// shows the same tag at the path shows this call's object, unread.
    pub(crate) e_tag: Option<String>,
}

impl Landed {
    /// Whether `listed`, the entity tag a listing shows at the path, is
    /// this call's create's: both known and equal, ignoring the quotes
    /// that some stores put around one and not the other (Azure's
    /// listings give the tag unquoted, its answers to a put quoted).
    pub(crate) fn is_listed_as(&self, listed: Option<&str>) -> bool {
        let unquoted = |tag: &str| tag.trim_matches('"').to_owned();
        match (&self.e_tag, listed) {
            (Some(ours), Some(listed)) => unquoted(ours) == unquoted(listed),
            _ => false,
        }
    }
}

/// What a create does when its create found the path taken, or failed with
/// an unknown outcome, and the read back finds the path empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WhenGone {
    /// Creates it again: the object there was swept meanwhile, or the
    /// create never landed ([`create_once`]).
    CreateAgain,
    /// Answers `None` ([`create_unless_taken`]).
    GiveUp,
}

/// [`create_once`] and [`create_unless_taken`]; `vacant`, a vacated
/// pointer's version to replace first.
async fn create(
    store: &dyn ObjectStore,
    path: &Path,
    payload: &[u8],
    limit: Limit,
    seal: &Seal,
    when_gone: WhenGone,
    vacant: Option<UpdateVersion>,
) -> Result<Option<Landed>> {
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
    let mut sealed = seal.for_writing(path).await?;
    let mut framed = envelope::seal(path, payload, &sealed);
    let vacancy = match when_gone {
        WhenGone::GiveUp => Vacancy::Read,
        WhenGone::CreateAgain => Vacancy::Refused,
    };
    // The entry of a cleared standalone run found at `path`, or a vacated
    // pointer, to replace.
    let mut stale = vacant;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = match stale.take() {
            None => {
                let opts = PutOptions::from(PutMode::Create);
                store
                    .put_opts(path, PutPayload::from(framed.clone()), opts)
                    .await
            }
            Some(version) => replace(store, path, &framed, version).await,
        };
        let failure = match outcome {
            Ok(put) => {
                let ours = envelope::payload_of_sealed(&framed, payload);
                return Ok(Some(Landed {
                    created: Created::Ours(ours),
                    e_tag: put.e_tag,
                }));
            }
            Err(object_store::Error::NotImplemented { .. }) => {
                return Err(Error::ConditionalPutUnsupported {
                    path: path.to_string(),
                });
            }
            // Committed first by another writer (or, replacing, replaced
            // or cleared by one).
            Err(e @ object_store::Error::AlreadyExists { .. })
            | Err(e @ object_store::Error::Precondition { .. })
            | Err(e @ object_store::Error::NotFound { .. }) => {
                match read_entry(store, path, limit, &sealed, vacancy).await? {
                    Found::Value(committed, _) => return Ok(Some(found(payload, committed))),
                    Found::Absent if when_gone == WhenGone::GiveUp => return Ok(None),
                    // Swept between our create and the read: try again.
                    Found::Absent => e,
                    // A pointer a recheck marked for its delete, which
                    // follows unconditionally: replaced, ours would go with
                    // it (seed 27027 of session 51's quiet-world survey).
                    // Given up: the caller reads the id again, and waits
                    // for the delete, or replaces a mark old enough.
                    Found::Vacant(bytes, _) if is_swept(&bytes) => return Ok(None),
                    // Refused: ours did not land, and a vacated pointer
                    // (whatever was there before it) is replaced by a
                    // conditional update, which one writer wins.
                    Found::Stale(version) | Found::Vacant(_, version) => {
                        stale = Some(version);
                        e
                    }
                }
            }
            Err(e) => match read_entry(store, path, limit, &sealed, vacancy).await {
                Ok(Found::Value(committed, _)) => return Ok(Some(found(payload, committed))),
                // Not created, or created and gone; or another writer's,
                // gone: which, no one can tell. And a vacated pointer may
                // be ours, landed and vacated by a deletion since.
                Ok(Found::Absent | Found::Vacant(..)) if when_gone == WhenGone::GiveUp => {
                    return Ok(None);
                }
                Ok(Found::Stale(version)) => {
                    stale = Some(version);
                    e
                }
                Ok(Found::Absent | Found::Vacant(..)) | Err(_) => e,
            },
        };
        // A second create could land where another writer's object was
        // and went, unseen (a create taken by it whose answer was lost);
        // a conditional update of a vacated pointer cannot.
        let replacing = stale.is_some();
        if attempt >= CREATE_ATTEMPTS || (when_gone == WhenGone::GiveUp && !replacing) {
            return Err(Error::store(path, failure));
        }
        if replacing && vacancy == Vacancy::Refused {
            // The entry there was sealed with a generation of its run's
            // key that the key store no longer holds; ours may have been
            // too (fetched before the same forget): seal it with the key
            // the store holds now.
            sealed = seal.for_writing(path).await?;
            framed = envelope::seal(path, payload, &sealed);
        }
        tracing::debug!(%path, attempt, error = %failure, "create outcome unknown; retrying");
    }
}

/// Writes `framed` at `path` over the entry of a cleared standalone run
/// read there as `version` (see [`create_once`]).
async fn replace(
    store: &dyn ObjectStore,
    path: &Path,
    framed: &Bytes,
    version: UpdateVersion,
) -> object_store::Result<PutResult> {
    if version.e_tag.is_some() || version.version.is_some() {
        let opts = PutOptions::from(PutMode::Update(version));
        match store
            .put_opts(path, PutPayload::from(framed.clone()), opts)
            .await
        {
            Err(object_store::Error::NotImplemented { .. }) => {}
            other => return other,
        }
    }
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    let opts = PutOptions::from(PutMode::Create);
    store
        .put_opts(path, PutPayload::from(framed.clone()), opts)
        .await
}

/// What a create that found `committed` at its path came to: no tag of
/// ours (whether our create wrote it is unknown).
fn found(ours: &[u8], committed: Bytes) -> Landed {
    Landed {
        created: classify(ours, committed),
        e_tag: None,
    }
}

fn classify(ours: &[u8], committed: Bytes) -> Created {
    if committed == ours {
        Created::Same(committed)
    } else {
        Created::Theirs(committed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::{CountingStore, FaultInjectingStore, FaultRule, RequestKind};

    const PATH: &str = "runs/r/run";

    /// A store whose next create is refused before it lands, reported as
    /// failed: an outcome the writer cannot tell from a lost answer.
    fn failing_once() -> Arc<FaultInjectingStore<InMemory>> {
        let store = Arc::new(FaultInjectingStore::new(InMemory::new()));
        store.inject(FaultRule::fail_before(RequestKind::Create).times(1));
        store
    }

    #[tokio::test]
    async fn a_create_whose_outcome_is_unknown_is_tried_again_unless_it_must_not_take_a_place() {
        let path = Path::from(PATH);
        let store = failing_once();
        let created = create_once(store.as_ref(), &path, b"a", Limit::RECORD, &PLAIN).await;
        assert!(matches!(created, Ok(Created::Ours(_))), "{created:?}");

        // Nothing there once read back: the pointer of another run may
        // have been there and gone, so no second create.
        let store = failing_once();
        let created =
            create_unless_taken(store.as_ref(), &path, b"a", Limit::RECORD, &PLAIN, None).await;
        assert!(matches!(created, Ok(None)), "{created:?}");
        assert!(store.inner().head(&path).await.is_err(), "nothing written");
    }

    #[tokio::test]
    async fn a_create_that_finds_the_path_taken_answers_with_what_is_there() {
        let path = Path::from(PATH);
        let store = InMemory::new();
        create_once(&store, &path, b"theirs", Limit::RECORD, &PLAIN)
            .await
            .unwrap();
        let created =
            create_unless_taken(&store, &path, b"ours", Limit::RECORD, &PLAIN, None).await;
        assert!(
            matches!(&created, Ok(Some(Landed { created: Created::Theirs(b), e_tag: None }))
                if b.as_ref() == b"theirs"),
            "{created:?}"
        );
        let again =
            create_unless_taken(&store, &path, b"theirs", Limit::RECORD, &PLAIN, None).await;
        assert!(
            matches!(
                again,
                Ok(Some(Landed {
                    created: Created::Same(_),
                    e_tag: None
                }))
            ),
            "{again:?}"
        );
    }

    /// A marker written again is answered by its create, with no read
    /// back; a create whose answer was lost is settled as a record's is.
    #[tokio::test]
    async fn a_marker_found_there_is_answered_without_a_read() {
        let path = Path::from("due/0/1_r.i");
        let store = CountingStore::new(InMemory::new());
        assert!(
            create_marker(&store, &path, b"", Limit::MARKER)
                .await
                .unwrap()
        );
        assert!(
            !create_marker(&store, &path, b"", Limit::MARKER)
                .await
                .unwrap()
        );
        let counts = store.counts();
        assert_eq!((counts.creates, counts.gets), (2, 0), "{counts:?}");

        // The first create landed and its answer was lost: the second
        // finds it there, and whose it is cannot be told.
        let store = FaultInjectingStore::new(InMemory::new());
        store.inject(FaultRule::fail_after(RequestKind::Create).times(1));
        assert!(
            !create_marker(&store, &path, b"", Limit::MARKER)
                .await
                .unwrap()
        );
        assert!(store.inner().head(&path).await.is_ok());
        // Refused before it landed: the second create is ours.
        let store = failing_once();
        assert!(
            create_marker(store.as_ref(), &path, b"", Limit::MARKER)
                .await
                .unwrap()
        );
        assert!(store.inner().head(&path).await.is_ok());
    }

    /// The tag a create answers with is the one a listing shows at the
    /// path, on the stores a test can hold (`InMemory`, the embedded
    /// default's `LocalFolder` and `object_store`'s local store; the
    /// clouds' are checked by `a_new_runs_creation_reads_no_object`).
    #[tokio::test]
    async fn a_listing_shows_the_tag_a_create_answered_with_until_the_object_is_replaced() {
        let folders = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let local = object_store::local::LocalFileSystem::new_with_prefix(folders[0].path());
        let stores: [Arc<dyn ObjectStore>; 3] = [
            Arc::new(InMemory::new()),
            Arc::new(crate::local::LocalFolder::new(folders[1].path()).unwrap()),
            Arc::new(local.unwrap()),
        ];
        let path = Path::from(PATH);
        for store in stores {
            let listed = async || {
                let listing = store.list_with_delimiter(Some(&Path::from("runs/r"))).await;
                let listing = listing.unwrap();
                listing.objects.into_iter().find(|o| o.location == path)
            };
            let landed =
                create_unless_taken(store.as_ref(), &path, b"ours", Limit::RECORD, &PLAIN, None)
                    .await
                    .unwrap()
                    .unwrap();
            assert!(matches!(landed.created, Created::Ours(_)), "{store}");
            let tag = listed().await.unwrap().e_tag;
            assert!(
                landed.is_listed_as(tag.as_deref()),
                "{store}: {landed:?} {tag:?}"
            );

            // Deleted (a stale deletion) and created again by another
            // writer, with bytes of the same length: another tag.
            store.delete(&path).await.unwrap();
            create_once(store.as_ref(), &path, b"them", Limit::RECORD, &PLAIN)
                .await
                .unwrap();
            let tag = listed().await.unwrap().e_tag;
            assert!(
                !landed.is_listed_as(tag.as_deref()),
                "{store}: {landed:?} {tag:?}"
            );
        }
    }

    #[test]
    fn a_tag_is_compared_without_its_quotes_and_an_unknown_one_never_matches() {
        let ours = |e_tag: Option<&str>| Landed {
            created: Created::Ours(Bytes::new()),
            e_tag: e_tag.map(str::to_owned),
        };
        assert!(ours(Some("\"0x8D9\"")).is_listed_as(Some("0x8D9")));
        assert!(ours(Some("0x8D9")).is_listed_as(Some("\"0x8D9\"")));
        assert!(!ours(Some("\"0x8D9\"")).is_listed_as(Some("0x8DA")));
        assert!(!ours(None).is_listed_as(Some("0x8D9")));
        assert!(!ours(Some("0x8D9")).is_listed_as(None));
    }

    /// A vacated run pointer is no object to a pointer's create: replaced
    /// by a conditional update, which one of two creators wins (the other
    /// reads the winner's pointer, as after two creates of a free path),
    /// on the stores a test can hold. At any other path it is not a
    /// frame: corrupt, never a miss.
    #[tokio::test]
    async fn a_vacated_pointer_is_replaced_once_and_is_corrupt_anywhere_else() {
        let folder = tempfile::tempdir().unwrap();
        let stores: [Arc<dyn ObjectStore>; 2] = [
            Arc::new(InMemory::new()),
            Arc::new(crate::local::LocalFolder::new(folder.path()).unwrap()),
        ];
        for store in stores {
            let path = Path::from(PATH);
            store
                .put(&path, PutPayload::from_static(b"vacant 0000000000000001"))
                .await
                .unwrap();
            let slot = read_pointer_slot(store.as_ref(), &path, Limit::RECORD, &PLAIN).await;
            let Ok(Slot::Vacant(bytes, version)) = slot else {
                panic!("{store}: {slot:?}");
            };
            assert_eq!(&bytes[..], b"vacant 0000000000000001", "{store}");

            // A creator that read the vacated version loses to one that
            // replaced it first.
            let first =
                create_unless_taken(store.as_ref(), &path, b"a", Limit::RECORD, &PLAIN, None).await;
            assert!(
                matches!(&first, Ok(Some(Landed { created: Created::Ours(b), .. })) if b.as_ref() == b"a"),
                "{store}: {first:?}"
            );
            let late = store
                .put_opts(
                    &path,
                    PutPayload::from_static(b"b"),
                    PutOptions::from(PutMode::Update(version)),
                )
                .await;
            assert!(
                matches!(late, Err(object_store::Error::Precondition { .. })),
                "{store}: {late:?}"
            );
            let second =
                create_unless_taken(store.as_ref(), &path, b"b", Limit::RECORD, &PLAIN, None).await;
            assert!(
                matches!(&second, Ok(Some(Landed { created: Created::Theirs(b), .. })) if b.as_ref() == b"a"),
                "{store}: {second:?}"
            );

            let entry = Path::from("memos/r/entry");
            store
                .put(&entry, PutPayload::from_static(b"vacant 0000000000000001"))
                .await
                .unwrap();
            let read = read(store.as_ref(), &entry, Limit::RECORD, &PLAIN).await;
            assert!(
                matches!(read, Err(Error::Corrupt { .. })),
                "{store}: {read:?}"
            );
        }
    }
}
