//! Fixtures every test file shares: the backends a test runs on, run-id
//! helpers and the side effects the workflow tests count.
//!
//! ```
//! use memo_tests::fixtures::{Backend, run};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! for backend in Backend::all() {
//!     let memo = backend.memo_store("memo").new_memo(&run("order-1"), 0);
//!     assert_eq!(memo.put("k", b"v").await.unwrap(), "v", "{}", backend.name());
//! }
//! # }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{Commit, NewRun, StepReceipt};
use memo_runtime::store::SqliteStore;
use memo_runtime::testing::FaultInjectingStore;
use memo_runtime::workflow::{Runtime, RuntimeBuilder};
use memo_runtime::{
    Bytes, Memo, MemoStore, RunId, runtime_store::ObjectStoreRuntimeStore, store::LocalFolder,
};

/// What one process of a multi-process test builds: a runtime whose memo
/// store (prefix `memo`) goes through `memo_objects` and whose runtime
/// store (prefix `runs`) through `runs_objects` (separate store instances
/// over one store, or wrappers that stage an interleaving), on the shared
/// `clock`, as worker `name`, with leases of `lease`. A builder, for the
/// test to add its own settings to.
pub fn process_builder(
    memo_objects: Arc<dyn ObjectStore>,
    runs_objects: Arc<dyn ObjectStore>,
    clock: &Arc<ManualClock>,
    name: &str,
    lease: Duration,
) -> RuntimeBuilder {
    Runtime::builder()
        .memo_store(MemoStore::new(memo_objects, "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(runs_objects, "runs")))
        .clock(clock.clone())
        .lease(lease)
        .worker_id(name)
}

/// A checked run id; panics on an invalid one (a typo in a test).
pub fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

/// A new run `run_id` of workflow `w`, with an empty input, created at 0
/// ms: what a test of the runtime store's own calls creates.
pub fn new_run(run_id: &RunId) -> NewRun {
    NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: Bytes::new(),
        created_at_ms: 0,
        workflow_version: None,
    }
}

/// The commit of step `sequence` of `run_id` (step `s`, output `o`,
/// recorded at 2 ms).
pub fn step_commit(run_id: &RunId, sequence: u64) -> Commit {
    let receipt = StepReceipt {
        run_id: run_id.clone(),
        sequence,
        step: "s".into(),
        output: Bytes::from_static(b"o"),
        recorded_at_ms: 2,
        error: None,
        retries: 0,
        last_retried_error: None,
    };
    Commit::step(receipt, 2)
}

/// A run id no other call returns, starting with `label`: for tests that
/// share a store with others (see [`memo_runtime::testing::runtime_store::unique_run_id`]).
pub fn unique_run(label: &str) -> RunId {
    memo_runtime::testing::runtime_store::unique_run_id(label)
}

/// An object store a test runs on: fresh and empty when made, shared by
/// every store built from it, and (for a folder) deleted when the last
/// clone is dropped.
#[derive(Clone)]
pub struct Backend {
    name: &'static str,
    objects: Arc<dyn ObjectStore>,
    /// Keeps a local folder alive as long as the backend.
    folder: Option<Arc<tempfile::TempDir>>,
    /// The database file of a SQLite store (in `folder`).
    sqlite: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").field("name", &self.name).finish()
    }
}

impl Backend {
    /// Every embedded backend, each fresh: an `InMemory` store, a
    /// `LocalFolder` in a new temporary folder and a `SqliteStore` in a new
    /// file.
    pub fn all() -> Vec<Backend> {
        vec![
            Backend::in_memory(),
            Backend::local_folder(),
            Backend::sqlite_file(),
        ]
    }

    /// A fresh `InMemory` store.
    pub fn in_memory() -> Backend {
        Backend {
            name: "in memory",
            objects: Arc::new(InMemory::new()),
            folder: None,
            sqlite: None,
        }
    }

    /// A `LocalFolder` (the store a `file://` URL opens) rooted at a new
    /// temporary folder.
    pub fn local_folder() -> Backend {
        let folder = tempfile::tempdir().unwrap();
        Backend {
            name: "local folder",
            objects: Arc::new(LocalFolder::new(folder.path()).unwrap()),
            folder: Some(Arc::new(folder)),
            sqlite: None,
        }
    }

    /// A `SqliteStore` (the store a `sqlite://` URL opens) in a new file in
    /// a new temporary folder.
    pub fn sqlite_file() -> Backend {
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("memo.db");
        Backend {
            name: "SQLite file",
            objects: Arc::new(SqliteStore::open(&file).unwrap()),
            folder: Some(Arc::new(folder)),
            sqlite: Some(file),
        }
    }

    /// Every embedded backend behind a [`FaultInjectingStore`].
    pub fn all_faulty() -> Vec<Faulty> {
        Backend::all().into_iter().map(Backend::faulty).collect()
    }

    /// This backend behind a [`FaultInjectingStore`] with no rules yet.
    pub fn faulty(self) -> Faulty {
        let faults = Arc::new(FaultInjectingStore::new(self.objects.clone()));
        Faulty {
            backend: Backend {
                objects: faults.clone(),
                ..self
            },
            faults,
        }
    }

    /// The backend's name, for assertion messages.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The object store (a new handle on the same objects each call).
    pub fn objects(&self) -> Arc<dyn ObjectStore> {
        self.objects.clone()
    }

    /// A client of the backend's objects as another process would open
    /// it: a new `LocalFolder` over the folder or a new `SqliteStore` on the
    /// file (single-flight and caches are per store instance, so two of them
    /// are two processes); the one `InMemory` store, which cannot be opened
    /// twice.
    pub fn open(&self) -> Arc<dyn ObjectStore> {
        match (&self.sqlite, &self.folder) {
            (Some(file), _) => Arc::new(SqliteStore::open(file).unwrap()),
            (None, Some(folder)) => Arc::new(LocalFolder::new(folder.path()).unwrap()),
            (None, None) => self.objects(),
        }
    }

    /// A memo store at `prefix`.
    pub fn memo_store(&self, prefix: &str) -> MemoStore {
        MemoStore::new(self.objects(), prefix)
    }

    /// An object-store runtime store at `prefix`.
    pub fn runtime_store(&self, prefix: &str) -> ObjectStoreRuntimeStore {
        ObjectStoreRuntimeStore::new(self.objects(), prefix)
    }
}

/// A [`Backend`] whose requests go through a [`FaultInjectingStore`].
#[derive(Clone)]
pub struct Faulty {
    /// The backend as the code under test sees it: every request passes the
    /// fault injector.
    pub backend: Backend,
    /// The injector: add rules to it, read how many faults fired.
    pub faults: Arc<FaultInjectingStore<Arc<dyn ObjectStore>>>,
}

/// A paid side effect, memoized by hand on `("charge", cents)`: the first
/// call in a memo's namespace charges (counts one in `charges`) and commits
/// the charge's number; every later call returns the committed number.
///
/// # Errors
///
/// The memo's errors.
pub async fn charge(memo: &Memo, cents: u64, charges: &AtomicU64) -> memo_runtime::Result<u64> {
    if let Some(hit) = memo.content_get(&("charge", cents)).await? {
        return Ok(u64::from_le_bytes(hit[..].try_into().unwrap()));
    }
    let n = charges.fetch_add(1, Ordering::SeqCst) + 1;
    let committed = memo
        .content_put(&("charge", cents), n.to_le_bytes())
        .await?;
    Ok(u64::from_le_bytes(committed[..].try_into().unwrap()))
}

/// Every object under `prefix` of `objects` (`""`: the whole store), as
/// sorted paths.
pub async fn stored_under(objects: &dyn ObjectStore, prefix: &str) -> Vec<String> {
    let prefix = memo_runtime::object_store::path::Path::from(prefix);
    let mut paths: Vec<String> = objects
        .list(Some(&prefix))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    paths.sort();
    paths
}

/// Whether the object at `path` is a vacated run pointer: what a deletion
/// of a run leaves at its pointer (`vacant <incarnation>`) until a
/// retention pass's recheck of it (`RuntimeStore::forget_deleted`)
/// removes it, as it removes the run's tombstone.
pub async fn is_vacated_pointer(objects: &dyn ObjectStore, path: &str) -> bool {
    let path = memo_runtime::object_store::path::Path::from(path);
    path.filename() == Some("run")
        && stored_bytes(objects, &path)
            .await
            .is_some_and(|bytes| bytes.starts_with(b"vacant "))
}

/// The bytes of the object at `path` as stored (unframed, unopened);
/// `None` if there is none.
pub async fn stored_bytes(
    objects: &dyn ObjectStore,
    path: &memo_runtime::object_store::path::Path,
) -> Option<Bytes> {
    use memo_runtime::object_store::ObjectStoreExt;
    match objects.get(path).await {
        Ok(got) => Some(got.bytes().await.unwrap()),
        Err(memo_runtime::object_store::Error::NotFound { .. }) => None,
        Err(e) => panic!("{path}: {e}"),
    }
}

/// `paths` (of `objects`) without what a deletion keeps until a retention
/// pass's recheck removes it: the tombstones of deleted incarnations
/// (`runs/tombstones/<run>.<inc>`) and vacated run pointers
/// ([`is_vacated_pointer`]). What must not be left besides them.
pub async fn but_deletion_remains(objects: &dyn ObjectStore, paths: Vec<String>) -> Vec<String> {
    let mut kept = Vec::new();
    for path in paths {
        if !path.contains("tombstones/") && !is_vacated_pointer(objects, &path).await {
            kept.push(path);
        }
    }
    kept
}

/// How many memo and step-output objects of `run` the object store lists,
/// counted without asking [`MemoStore`] (so a bug in its own listing cannot
/// hide them).
pub async fn stored_entries(store: &MemoStore, run: &RunId) -> usize {
    let mut count = 0;
    for folder in ["memos", "step-outputs"] {
        let prefix = store.prefix().clone().join(folder).join(run.as_str());
        let listed: Vec<_> = store
            .object_store()
            .list(Some(&prefix))
            .try_collect()
            .await
            .unwrap();
        count += listed.len();
    }
    count
}

/// Commits `entries` memo entries of `run` (`key-<i>` in steps `i % 50`),
/// 32 at a time: a large run to clear.
pub async fn put_entries(store: &MemoStore, run: &RunId, entries: u32) {
    futures::stream::iter(0..entries)
        .map(|i| {
            let memo = store.new_memo(run, i % 50);
            async move { memo.put(&format!("key-{i}"), i.to_le_bytes()).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
}

/// A seal with every option on: each payload that zstd shrinks is
/// compressed (no minimum size), then encrypted with a fixed test key.
pub fn every_seal_option() -> memo_runtime::seal::Seal {
    use memo_runtime::seal::{Compression, Keyring, Seal};
    let keys = Keyring::new(1, [42; 32]).expect("a valid key version");
    Seal::default()
        .with_compression(Compression::zstd(Compression::DEFAULT_LEVEL, 0))
        .with_encryption(keys)
}
