//! [`FaultInjectingStore`]: an [`ObjectStore`] wrapper that fails chosen
//! requests, before the wrapped store sees them or after it applied them.

use std::collections::VecDeque;
use std::fmt;
use std::future::{Future, ready};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::lock;

mod rule;

use rule::Faults;
pub use rule::{Fault, FaultRule, InjectedFault, RequestKind};

/// The `store` named in every injected [`object_store::Error::Generic`].
const STORE: &str = "FaultInjectingStore";

/// An [`ObjectStore`] that forwards every request to `inner`, except those a
/// [`FaultRule`] makes fail.
///
/// A fault either refuses the request before it reaches `inner`
/// ([`Fault::FailBefore`]) or lets `inner` apply it and then reports failure
/// ([`Fault::FailAfter`], a lost acknowledgement). Rules can be scripted
/// exactly ("the next create, after applying it"; "every put under
/// `memos/`") or drawn by chance from a seeded generator, so a failing run
/// can be replayed. The error is an [`object_store::Error::Generic`] whose
/// `store` is `"FaultInjectingStore"` and whose source is an
/// [`InjectedFault`].
///
/// Rules are added, cleared and switched off through `&self`, so a test can
/// keep an `Arc` of the store while the code under test owns another.
///
/// # Example
///
/// ```
/// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStore, ObjectStoreExt, PutMode};
/// use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = FaultInjectingStore::new(InMemory::new());
/// // The next create is applied, but its acknowledgement is lost.
/// store.inject(FaultRule::fail_after(RequestKind::Create).times(1));
///
/// let path = Path::from("memos/run/1/key");
/// let create = store.put_opts(&path, "v".into(), PutMode::Create.into()).await;
/// assert!(create.is_err());
/// // ... yet the object is there, as after a lost acknowledgement.
/// let stored = store.get(&path).await.unwrap().bytes().await.unwrap();
/// assert_eq!(stored.as_ref(), b"v");
/// assert_eq!(store.faults_injected(), 1);
/// # }
/// ```
pub struct FaultInjectingStore<T> {
    inner: T,
    faults: Arc<Mutex<Faults>>,
}

impl<T: ObjectStore> FaultInjectingStore<T> {
    /// Wraps `inner` with no rules, its generator seeded with 0.
    pub fn new(inner: T) -> Self {
        FaultInjectingStore {
            inner,
            faults: Arc::new(Mutex::new(Faults {
                enabled: true,
                rules: Vec::new(),
                rng: StdRng::seed_from_u64(0),
                injected: 0,
            })),
        }
    }

    /// Seeds the generator that probabilistic rules draw from: the same
    /// seed and the same sequence of requests inject the same faults.
    #[must_use]
    pub fn with_seed(self, seed: u64) -> Self {
        lock(&self.faults).rng = StdRng::seed_from_u64(seed);
        self
    }

    /// Adds `rule` after the existing ones.
    pub fn inject(&self, rule: FaultRule) {
        lock(&self.faults).rules.push(rule);
    }

    /// Removes every rule.
    pub fn clear_faults(&self) {
        lock(&self.faults).rules.clear();
    }

    /// Switches fault injection on or off without touching the rules: while
    /// off, every request is forwarded and no rule counts it.
    pub fn set_enabled(&self, enabled: bool) {
        lock(&self.faults).enabled = enabled;
    }

    /// How many faults have been injected since the store was made.
    pub fn faults_injected(&self) -> u64 {
        lock(&self.faults).injected
    }

    /// The wrapped store.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// Unwraps the store.
    pub fn into_inner(self) -> T {
        self.inner
    }

    fn decide(&self, kind: RequestKind, path: &Path) -> Option<Fault> {
        lock(&self.faults).decide(kind, path)
    }

    /// Runs `request` (a lazy future: not polled, not applied, if the fault
    /// comes first) under whatever fault the rules choose.
    async fn guarded<R>(
        &self,
        kind: RequestKind,
        path: &Path,
        request: impl Future<Output = Result<R>>,
    ) -> Result<R> {
        let Some(fault) = self.decide(kind, path) else {
            return request.await;
        };
        if fault == Fault::FailAfter {
            request.await?;
        }
        Err(injected(kind, fault, path))
    }

    fn guarded_listing(
        &self,
        prefix: Option<&Path>,
        list: impl FnOnce() -> BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let path = prefix.cloned().unwrap_or_default();
        match self.decide(RequestKind::List, &path) {
            None => list(),
            Some(Fault::FailBefore) => {
                stream::iter([Err(injected(RequestKind::List, Fault::FailBefore, &path))]).boxed()
            }
            Some(Fault::FailAfter) => {
                let error = injected(RequestKind::List, Fault::FailAfter, &path);
                list().chain(stream::iter([Err(error)])).boxed()
            }
        }
    }
}

fn injected(kind: RequestKind, fault: Fault, path: &Path) -> object_store::Error {
    InjectedFault {
        kind,
        fault,
        path: path.clone(),
    }
    .into_error()
}

/// What became of one path given to `delete_stream`, in input order.
enum DeleteSlot {
    /// Refused before reaching the inner store.
    Refused(Path),
    /// Forwarded; the inner store's result stands.
    Forwarded,
    /// Forwarded; the inner store's success is reported as a failure.
    LostAck(Path),
}

impl<T: ObjectStore> FaultInjectingStore<T> {
    /// Refused paths never reach the inner store, yet the output must keep
    /// input order and the inner store must still see one stream (S3 batches
    /// it), so each input path leaves a slot in a queue and the output merges
    /// the slots with the inner store's results, which come in the same order.
    fn delete_stream_with_faults(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let slots = Arc::new(Mutex::new(VecDeque::new()));
        let faults = Arc::clone(&self.faults);
        let pushed = Arc::clone(&slots);
        let forwarded = locations.filter_map(move |location| {
            let slot = match &location {
                Err(_) => DeleteSlot::Forwarded,
                Ok(path) => match lock(&faults).decide(RequestKind::Delete, path) {
                    None => DeleteSlot::Forwarded,
                    Some(Fault::FailBefore) => DeleteSlot::Refused(path.clone()),
                    Some(Fault::FailAfter) => DeleteSlot::LostAck(path.clone()),
                },
            };
            let forward = !matches!(slot, DeleteSlot::Refused(_));
            lock(&pushed).push_back(slot);
            ready(forward.then_some(location))
        });
        let mut results = self.inner.delete_stream(forwarded.boxed());
        let mut held: Option<Result<Path>> = None;
        let mut inner_done = false;
        stream::poll_fn(move |cx| {
            loop {
                let mut queue = lock(&slots);
                let refused = queue.pop_front_if(|slot| matches!(slot, DeleteSlot::Refused(_)));
                if let Some(DeleteSlot::Refused(path)) = refused {
                    return Poll::Ready(Some(Err(injected(
                        RequestKind::Delete,
                        Fault::FailBefore,
                        &path,
                    ))));
                }
                if let Some(result) = held.take() {
                    return Poll::Ready(Some(match (queue.pop_front(), result) {
                        (Some(DeleteSlot::LostAck(path)), Ok(_)) => {
                            Err(injected(RequestKind::Delete, Fault::FailAfter, &path))
                        }
                        (_, result) => result,
                    }));
                }
                if inner_done {
                    // The inner store may stop early (S3 drops a batch after
                    // an input error); refusals are reported all the same.
                    while let Some(slot) = queue.pop_front() {
                        if let DeleteSlot::Refused(path) = slot {
                            let error = injected(RequestKind::Delete, Fault::FailBefore, &path);
                            return Poll::Ready(Some(Err(error)));
                        }
                    }
                    return Poll::Ready(None);
                }
                // Unlocked before polling: the inner store pulls paths, which
                // pushes slots.
                drop(queue);
                match results.poll_next_unpin(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(result)) => held = Some(result),
                    Poll::Ready(None) => inner_done = true,
                }
            }
        })
        .boxed()
    }
}

/// Names the inner store by its `Display`: its `Debug` may print
/// credentials (an Azure access key, a SAS token).
impl<T: fmt::Display> fmt::Debug for FaultInjectingStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultInjectingStore")
            .field("inner", &format_args!("{}", self.inner))
            .field("faults", &self.faults)
            .finish()
    }
}

impl<T: fmt::Display> fmt::Display for FaultInjectingStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultInjectingStore({})", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for FaultInjectingStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let kind = match opts.mode {
            PutMode::Create => RequestKind::Create,
            PutMode::Overwrite | PutMode::Update(_) => RequestKind::Put,
        };
        self.guarded(kind, location, self.inner.put_opts(location, payload, opts))
            .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let request = self.inner.put_multipart_opts(location, opts);
        self.guarded(RequestKind::Multipart, location, request)
            .await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let kind = if options.head {
            RequestKind::Head
        } else {
            RequestKind::Get
        };
        self.guarded(kind, location, self.inner.get_opts(location, options))
            .await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let request = self.inner.get_ranges(location, ranges);
        self.guarded(RequestKind::Get, location, request).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.delete_stream_with_faults(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.guarded_listing(prefix, || self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.guarded_listing(prefix, || self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let path = prefix.cloned().unwrap_or_default();
        let request = self.inner.list_with_delimiter(prefix);
        self.guarded(RequestKind::List, &path, request).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let request = self.inner.copy_opts(from, to, options);
        self.guarded(RequestKind::Copy, to, request).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let request = self.inner.rename_opts(from, to, options);
        self.guarded(RequestKind::Rename, to, request).await
    }
}

#[cfg(test)]
mod tests {
    use futures::{StreamExt, TryStreamExt};
    use object_store::local::LocalFileSystem;
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutMode};

    use super::*;
    use crate::testing::CountingStore;
    use crate::testing::stores::exercise_every_method;

    async fn exists(store: &dyn ObjectStore, path: &str) -> bool {
        match store.head(&Path::from(path)).await {
            Ok(_) => true,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => panic!("head {path}: {e}"),
        }
    }

    fn fault_of(error: &object_store::Error) -> Fault {
        InjectedFault::find(error).expect("an injected fault").fault
    }

    /// A store whose writes are seen unfaulted through `inner()`.
    fn over_memory() -> FaultInjectingStore<InMemory> {
        FaultInjectingStore::new(InMemory::new())
    }

    #[tokio::test]
    async fn every_method_reaches_the_inner_store_when_no_rule_fires() {
        let store = FaultInjectingStore::new(Arc::new(CountingStore::new(InMemory::new())));
        store.inject(FaultRule::fail_before(RequestKind::Put).at_prefix("elsewhere"));
        let expected = exercise_every_method(&store).await;
        assert_eq!(store.inner().counts(), expected);
        assert_eq!(store.faults_injected(), 0);
    }

    #[tokio::test]
    async fn list_with_offset_reaches_the_inner_stores_own_implementation() {
        let store = FaultInjectingStore::new(CountingStore::new(InMemory::new()));
        let _ = store
            .list_with_offset(None, &Path::from("a"))
            .collect::<Vec<_>>()
            .await;
        let inner = store.inner().counts();
        assert_eq!((inner.lists_with_offset, inner.lists), (1, 0));
    }

    #[tokio::test]
    async fn fail_before_leaves_nothing_written() {
        let store = over_memory();
        store.put(&Path::from("src"), "s".into()).await.unwrap();
        for kind in RequestKind::ALL {
            store.inject(FaultRule::fail_before(kind));
        }

        let put = store.put(&Path::from("put"), "p".into()).await;
        let create = store
            .put_opts(&Path::from("new"), "n".into(), PutMode::Create.into())
            .await;
        let multipart = store.put_multipart(&Path::from("multi")).await;
        let copy = store.copy(&Path::from("src"), &Path::from("copy")).await;
        let rename = store.rename(&Path::from("src"), &Path::from("moved")).await;
        let delete = store.delete(&Path::from("src")).await;
        assert_eq!(fault_of(&put.unwrap_err()), Fault::FailBefore);
        assert_eq!(fault_of(&create.unwrap_err()), Fault::FailBefore);
        assert_eq!(fault_of(&multipart.err().unwrap()), Fault::FailBefore);
        assert_eq!(fault_of(&copy.unwrap_err()), Fault::FailBefore);
        assert_eq!(fault_of(&rename.unwrap_err()), Fault::FailBefore);
        assert_eq!(fault_of(&delete.unwrap_err()), Fault::FailBefore);

        let inner = store.inner();
        for absent in ["put", "new", "multi", "copy", "moved"] {
            assert!(!exists(inner, absent).await, "{absent} was written");
        }
        assert!(exists(inner, "src").await, "src was deleted or moved");
        assert_eq!(store.faults_injected(), 6);
    }

    #[tokio::test]
    async fn fail_after_leaves_the_write_applied() {
        let store = over_memory();
        store.put(&Path::from("src"), "s".into()).await.unwrap();
        store.put(&Path::from("old"), "o".into()).await.unwrap();
        for kind in RequestKind::ALL {
            store.inject(FaultRule::fail_after(kind));
        }

        let put = store.put(&Path::from("put"), "p".into()).await;
        let create = store
            .put_opts(&Path::from("new"), "n".into(), PutMode::Create.into())
            .await;
        let copy = store.copy(&Path::from("src"), &Path::from("copy")).await;
        let rename = store.rename(&Path::from("src"), &Path::from("moved")).await;
        let delete = store.delete(&Path::from("old")).await;
        assert_eq!(fault_of(&put.unwrap_err()), Fault::FailAfter);
        assert_eq!(fault_of(&create.unwrap_err()), Fault::FailAfter);
        assert_eq!(fault_of(&copy.unwrap_err()), Fault::FailAfter);
        assert_eq!(fault_of(&rename.unwrap_err()), Fault::FailAfter);
        assert_eq!(fault_of(&delete.unwrap_err()), Fault::FailAfter);

        let inner = store.inner();
        for present in ["put", "new", "copy", "moved"] {
            assert!(exists(inner, present).await, "{present} was not written");
        }
        for gone in ["src", "old"] {
            assert!(!exists(inner, gone).await, "{gone} is still there");
        }
        let new = inner
            .get(&Path::from("new"))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(new.as_ref(), b"n");
    }

    #[tokio::test]
    async fn fail_after_create_on_a_local_file_system_commits_the_object() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let store = FaultInjectingStore::new(local);
        store.inject(FaultRule::fail_after(RequestKind::Create).times(1));
        let path = Path::from("memos/r/1/k");

        let lost = store
            .put_opts(&path, "v".into(), PutMode::Create.into())
            .await;
        assert_eq!(fault_of(&lost.unwrap_err()), Fault::FailAfter);
        // A retry of the create finds the object its lost acknowledgement committed.
        let retry = store
            .put_opts(&path, "v".into(), PutMode::Create.into())
            .await;
        assert!(matches!(
            retry,
            Err(object_store::Error::AlreadyExists { .. })
        ));
    }

    #[tokio::test]
    async fn injected_errors_are_generic_errors_of_the_fault_injecting_store() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::Get));
        let error = store.get(&Path::from("a/b")).await.unwrap_err();
        let object_store::Error::Generic {
            store: name,
            source,
        } = &error
        else {
            panic!("not a Generic error: {error:?}");
        };
        assert_eq!(*name, "FaultInjectingStore");
        let fault = source.downcast_ref::<InjectedFault>().unwrap();
        assert_eq!(
            *fault,
            InjectedFault {
                kind: RequestKind::Get,
                fault: Fault::FailBefore,
                path: Path::from("a/b"),
            }
        );
        assert!(
            error
                .to_string()
                .contains("injected fault: Get at \"a/b\" failed before")
        );
    }

    #[tokio::test]
    async fn times_fails_exactly_that_many_requests_then_lets_them_through() {
        let store = over_memory();
        store.inject(FaultRule::fail_after(RequestKind::Create).times(2));
        let mut outcomes = Vec::new();
        for i in 0..4 {
            let path = Path::from(format!("k/{i}"));
            outcomes.push(
                store
                    .put_opts(&path, "v".into(), PutMode::Create.into())
                    .await
                    .is_ok(),
            );
        }
        assert_eq!(outcomes, [false, false, true, true]);
        assert_eq!(store.faults_injected(), 2);
        for i in 0..4 {
            assert!(exists(store.inner(), &format!("k/{i}")).await);
        }
    }

    #[tokio::test]
    async fn skip_lets_the_first_requests_through() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::Put).skip(2).times(1));
        let mut outcomes = Vec::new();
        for i in 0..4 {
            outcomes.push(
                store
                    .put(&Path::from(format!("k/{i}")), "v".into())
                    .await
                    .is_ok(),
            );
        }
        assert_eq!(outcomes, [true, true, false, true]);
    }

    #[tokio::test]
    async fn path_filters_choose_which_requests_fail() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::Put).at_prefix("memos"));
        store.inject(
            FaultRule::fail_before(RequestKind::Put).matching(|p| p.as_ref().ends_with(".tmp")),
        );
        let put = |path: &'static str| {
            let store = &store;
            async move { store.put(&Path::from(path), "v".into()).await.is_ok() }
        };
        assert!(!put("memos/run/1").await);
        assert!(
            put("memos-other/run/1").await,
            "prefixes match whole segments"
        );
        assert!(!put("x/y.tmp").await);
        assert!(put("x/y").await);
    }

    #[tokio::test]
    async fn rules_fire_only_on_their_own_kind() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::Create));
        store.put(&Path::from("a"), "v".into()).await.unwrap();
        store.get(&Path::from("a")).await.unwrap();
        store.head(&Path::from("a")).await.unwrap();
        let create = store
            .put_opts(&Path::from("b"), "v".into(), PutMode::Create.into())
            .await;
        assert!(create.is_err());
        assert_eq!(store.faults_injected(), 1);
    }

    async fn pattern(seed: u64) -> Vec<bool> {
        let store = over_memory().with_seed(seed);
        store.inject(FaultRule::fail_before(RequestKind::Put).with_probability(0.5));
        let mut failed = Vec::new();
        for i in 0..64 {
            failed.push(
                store
                    .put(&Path::from(format!("p/{i}")), "v".into())
                    .await
                    .is_err(),
            );
        }
        assert_eq!(
            store.faults_injected(),
            failed.iter().filter(|f| **f).count() as u64
        );
        failed
    }

    #[tokio::test]
    async fn seeded_runs_inject_the_same_faults() {
        let first = pattern(42).await;
        assert_eq!(first, pattern(42).await);
        assert_ne!(first, pattern(43).await);
        let failures = first.iter().filter(|f| **f).count();
        assert!((10..=54).contains(&failures), "{failures} of 64 at p = 0.5");
    }

    #[tokio::test]
    async fn probability_zero_and_one_are_never_and_always() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::Put).with_probability(0.0));
        store.inject(FaultRule::fail_before(RequestKind::Get).with_probability(1.0));
        store.put(&Path::from("a"), "v".into()).await.unwrap();
        assert!(store.get(&Path::from("a")).await.is_err());
    }

    #[tokio::test]
    async fn disabling_forwards_everything_and_keeps_the_rules() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::Put).times(1));
        store.set_enabled(false);
        store.put(&Path::from("a"), "v".into()).await.unwrap();
        store.set_enabled(true);
        assert!(store.put(&Path::from("b"), "v".into()).await.is_err());
        assert!(store.put(&Path::from("c"), "v".into()).await.is_ok());
    }

    #[tokio::test]
    async fn clear_faults_removes_every_rule() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::Put));
        assert!(store.put(&Path::from("a"), "v".into()).await.is_err());
        store.clear_faults();
        store.put(&Path::from("a"), "v".into()).await.unwrap();
        assert_eq!(store.faults_injected(), 1);
    }

    #[tokio::test]
    async fn rules_are_controlled_through_a_shared_handle() {
        let handle = Arc::new(over_memory());
        let owned: Arc<dyn ObjectStore> = handle.clone();
        handle.inject(FaultRule::fail_before(RequestKind::Head));
        assert!(owned.head(&Path::from("a")).await.is_err());
        assert_eq!(handle.faults_injected(), 1);
    }

    async fn delete_with_faults(store: FaultInjectingStore<impl ObjectStore>) {
        for name in ["a", "b", "c", "d", "e"] {
            store.put(&Path::from(name), "v".into()).await.unwrap();
        }
        store.inject(FaultRule::fail_before(RequestKind::Delete).matching(|p| p.as_ref() == "b"));
        store.inject(FaultRule::fail_after(RequestKind::Delete).at_prefix("c"));
        store.inject(FaultRule::fail_before(RequestKind::Delete).at_prefix("d"));

        let paths = ["a", "b", "c", "d", "e"].map(|name| Ok(Path::from(name)));
        let results: Vec<_> = store
            .delete_stream(futures::stream::iter(paths).boxed())
            .collect()
            .await;

        let summary: Vec<_> = results
            .iter()
            .map(|r| match r {
                Ok(path) => Ok(path.to_string()),
                Err(e) => Err(InjectedFault::find(e).map(|f| (f.path.to_string(), f.fault))),
            })
            .collect();
        let ok = |p: &str| Ok(p.to_string());
        let err = |p: &str, f| Err(Some((p.to_string(), f)));
        assert_eq!(
            summary,
            [
                ok("a"),
                err("b", Fault::FailBefore),
                err("c", Fault::FailAfter),
                err("d", Fault::FailBefore),
                ok("e")
            ]
        );
        let inner = store.inner();
        for (name, kept) in [
            ("a", false),
            ("b", true),
            ("c", false),
            ("d", true),
            ("e", false),
        ] {
            assert_eq!(exists(inner, name).await, kept, "{name}");
        }
    }

    #[tokio::test]
    async fn delete_stream_reports_each_fault_in_input_order() {
        delete_with_faults(over_memory()).await;
    }

    #[tokio::test]
    async fn delete_stream_reports_each_fault_in_input_order_on_a_local_file_system() {
        // LocalFileSystem reads ahead of its results: the slots must still line up.
        let dir = tempfile::tempdir().unwrap();
        let local = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        delete_with_faults(FaultInjectingStore::new(local)).await;
    }

    #[tokio::test]
    async fn delete_stream_keeps_the_inner_store_to_one_call() {
        let store = FaultInjectingStore::new(CountingStore::new(InMemory::new()));
        store.inject(FaultRule::fail_before(RequestKind::Delete).times(1));
        let paths = (0..3).map(|i| Ok(Path::from(format!("x/{i}"))));
        let results: Vec<_> = store
            .delete_stream(futures::stream::iter(paths).boxed())
            .collect()
            .await;
        assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
        let inner = store.inner().counts();
        assert_eq!((inner.delete_streams, inner.delete_paths), (1, 2));
    }

    #[tokio::test]
    async fn a_failed_listing_yields_nothing_before_and_everything_after() {
        let store = over_memory();
        for i in 0..3 {
            store
                .put(&Path::from(format!("l/{i}")), "v".into())
                .await
                .unwrap();
        }
        store.inject(FaultRule::fail_before(RequestKind::List).times(1));
        store.inject(FaultRule::fail_after(RequestKind::List).times(1));

        let before: Vec<_> = store.list(Some(&Path::from("l"))).collect().await;
        assert_eq!(before.len(), 1);
        assert_eq!(fault_of(before[0].as_ref().unwrap_err()), Fault::FailBefore);

        let after: Vec<_> = store.list(Some(&Path::from("l"))).collect().await;
        assert_eq!(after.len(), 4);
        assert!(after[..3].iter().all(Result::is_ok));
        assert_eq!(fault_of(after[3].as_ref().unwrap_err()), Fault::FailAfter);

        let listed: Vec<_> = store
            .list(Some(&Path::from("l")))
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed.len(), 3);
    }

    #[tokio::test]
    async fn list_with_delimiter_faults_on_the_prefix() {
        let store = over_memory();
        store.inject(FaultRule::fail_before(RequestKind::List).at_prefix("terminals"));
        assert!(
            store
                .list_with_delimiter(Some(&Path::from("terminals")))
                .await
                .is_err()
        );
        assert!(
            store
                .list_with_delimiter(Some(&Path::from("memos")))
                .await
                .is_ok()
        );
        assert!(store.list_with_delimiter(None).await.is_ok());
    }

    #[test]
    #[should_panic(expected = "not within 0.0..=1.0")]
    fn a_probability_above_one_is_refused() {
        let _ = FaultRule::fail_before(RequestKind::Get).with_probability(1.5);
    }
}
