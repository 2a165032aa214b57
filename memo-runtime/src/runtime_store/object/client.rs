//! The client every component of the store reads and writes through: the
//! object store, where each record lies ([`Layout`]) and how records are
//! sealed. Shared by `Arc`, as `object_store`'s `AmazonS3` shares its
//! `S3Client`; it keeps no state of any run.

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
};

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::read_limit::Limit;
use crate::run_id::{Incarnation, RunId};
use crate::seal::Seal;
use crate::write_once::{self, Created, Landed, Slot};

/// How many objects are read at once.
pub(super) const CONCURRENCY: usize = 8;

/// Whose data key seals a record (see [`Seal::with_data_keys`]): a run
/// incarnation's, or, reading a run's pointer before its incarnation is
/// known, the run's (the frame names the incarnation).
#[derive(Clone, Copy)]
pub(super) enum Owner<'a> {
    Incarnation(&'a RunId, Incarnation),
    Run(&'a RunId),
}

/// What [`Client::replace_if`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Replaced {
    /// This call's conditional update replaced the version read.
    Updated,
    /// The object changed or went since it was read: nothing was written.
    Changed,
    /// The store has no conditional update: the object was deleted,
    /// whatever it was by then.
    Deleted,
}

/// The objects of one runtime store.
#[derive(Clone)]
pub(super) struct Client {
    store: Arc<dyn ObjectStore>,
    layout: Layout,
    seal: Seal,
}

impl Client {
    pub(super) fn new(store: Arc<dyn ObjectStore>, layout: Layout, seal: Seal) -> Client {
        Client {
            store,
            layout,
            seal,
        }
    }

    /// The same objects, sealed with `seal`.
    pub(super) fn sealed(self, seal: Seal) -> Client {
        Client { seal, ..self }
    }

    pub(super) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub(super) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The store's seal: the one every record and checkpoint is sealed
    /// with (status hints are [`PLAIN`](crate::seal::PLAIN)).
    pub(super) fn seal(&self) -> &Seal {
        &self.seal
    }

    /// The seal of `owner`'s records.
    fn seal_of(&self, owner: Owner<'_>) -> std::borrow::Cow<'_, Seal> {
        match owner {
            Owner::Incarnation(run_id, incarnation) => self.seal.for_run(run_id, incarnation),
            Owner::Run(run_id) => self.seal.for_run_id(run_id),
        }
    }

    /// Reads `owner`'s sealed record at `path` (see [`write_once::read`]).
    pub(super) async fn read(
        &self,
        path: &Path,
        limit: Limit,
        owner: Owner<'_>,
    ) -> Result<Option<Bytes>> {
        write_once::read(self.store.as_ref(), path, limit, &self.seal_of(owner)).await
    }

    /// Creates `owner`'s sealed record at `path` unless one exists (see
    /// [`write_once::create_once`]).
    pub(super) async fn create(
        &self,
        path: &Path,
        payload: &[u8],
        limit: Limit,
        owner: Owner<'_>,
    ) -> Result<Created> {
        let seal = self.seal_of(owner);
        write_once::create_once(self.store.as_ref(), path, payload, limit, &seal).await
    }

    /// [`create`](Self::create), but `None` rather than a second create
    /// where another writer's object was and went, and a vacated pointer
    /// replaced, first by an update of `vacant` if that version was read
    /// (see [`write_once::create_unless_taken`]).
    pub(super) async fn create_unless_taken(
        &self,
        path: &Path,
        payload: &[u8],
        limit: Limit,
        owner: Owner<'_>,
        vacant: Option<UpdateVersion>,
    ) -> Result<Option<Landed>> {
        let seal = self.seal_of(owner);
        let store = self.store.as_ref();
        write_once::create_unless_taken(store, path, payload, limit, &seal, vacant).await
    }

    /// Reads the run pointer at `path`, vacated or not, with its version
    /// (see [`write_once::read_pointer_slot`]).
    pub(super) async fn read_pointer_slot(
        &self,
        path: &Path,
        limit: Limit,
        owner: Owner<'_>,
    ) -> Result<Slot> {
        write_once::read_pointer_slot(self.store.as_ref(), path, limit, &self.seal_of(owner)).await
    }

    /// Replaces the object at `path` with `bytes`, as they are (unframed),
    /// if it is still the `version` read: [`Replaced::Updated`] if this
    /// call replaced it, [`Replaced::Changed`] if it changed or went since.
    /// Of writers updating one version, one wins; an update sent again
    /// after its acknowledgement was lost finds the version it wrote, and
    /// answers `Changed`. A store with no conditional update
    /// (`object_store`'s `LocalFileSystem` given directly), or a version
    /// with nothing to match, deletes the object instead, unconditionally:
    /// [`Replaced::Deleted`].
    pub(super) async fn replace_if(
        &self,
        path: &Path,
        version: UpdateVersion,
        bytes: Bytes,
    ) -> Result<Replaced> {
        if let Some(replaced) = self.update_if(path, version, bytes).await? {
            return Ok(replaced);
        }
        self.delete_all(vec![path.clone()]).await?;
        Ok(Replaced::Deleted)
    }

    /// [`replace_if`](Self::replace_if)'s conditional update alone: `None`
    /// where it would delete the object instead (a store with no
    /// conditional update, or a version with nothing to match).
    pub(super) async fn update_if(
        &self,
        path: &Path,
        version: UpdateVersion,
        bytes: Bytes,
    ) -> Result<Option<Replaced>> {
        if version.e_tag.is_none() && version.version.is_none() {
            return Ok(None);
        }
        let opts = PutOptions::from(PutMode::Update(version));
        match self
            .store
            .put_opts(path, PutPayload::from(bytes), opts)
            .await
        {
            Ok(_) => Ok(Some(Replaced::Updated)),
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => Ok(Some(Replaced::Changed)),
            Err(object_store::Error::NotImplemented { .. }) => Ok(None),
            Err(e) => Err(Error::store(path, e)),
        }
    }

    /// Whether an object stands at `path`: one `HEAD`, its content unread.
    pub(super) async fn exists(&self, path: &Path) -> Result<bool> {
        match self.store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(Error::store(path, e)),
        }
    }

    /// The objects under `folder`, in the order the store lists them.
    pub(super) async fn list(&self, folder: &Path) -> Result<Vec<ObjectMeta>> {
        self.store
            .list(Some(folder))
            .try_collect()
            .await
            .map_err(|e| Error::store(folder, e))
    }

    /// Deletes `paths` in one [`delete_stream`](ObjectStore::delete_stream),
    /// which a store that deletes in bulk sends as batches (S3: one
    /// `DeleteObjects` request per 1,000 paths, where deleting them one by
    /// one sent one request each); a path already gone counts as deleted.
    /// Every path is tried; the first failure is returned.
    pub(super) async fn delete_all(&self, paths: Vec<Path>) -> Result<()> {
        let (Some(first), count) = (paths.first().cloned(), paths.len()) else {
            return Ok(());
        };
        let mut results = self
            .store
            .delete_stream(futures::stream::iter(paths.into_iter().map(Ok)).boxed());
        let mut failed = None;
        while let Some(result) = results.next().await {
            match result {
                // LocalFileSystem reports deleting a missing object.
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            None => Ok(()),
            Some(e) if count == 1 => Err(Error::store(&first, e)),
            Some(e) => Err(Error::store(
                format!("{first} (the first of {count} paths deleted together)"),
                e,
            )),
        }
    }
}
