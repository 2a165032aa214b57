//! The meter of the cost ledger: what the requests and memoized calls of
//! one workflow attempt cost, counted as they are made, and the
//! [`ObjectStore`] wrapper that counts them.
//!
//! # How requests reach the meter
//!
//! The workflow runtime sets a [`Meter`] as a task-local while it drives an
//! attempt ([`Meter::scope`]). Every [`MemoStore`] and
//! [`ObjectStoreRuntimeStore`] wraps the object store it is built over in a
//! [`Metered`] store, which counts each request into the task's meter, if
//! it has one, when the request is made. So the requests of memoized calls,
//! of `Memo::get`/`put`, of the runtime store's commits and reads, and of
//! lease renewals are counted without any of them knowing, and a request
//! made outside an attempt (an operator's read, a sweep) is counted
//! nowhere. A task spawned by a step's body does not inherit the meter: its
//! requests are not in the ledger.
//!
//! # What it costs when no attempt is metered
//!
//! A request through [`Metered`] with no meter set asks the task-local once
//! (a thread-local read) and calls the wrapped store's method, returning
//! its future or stream as it is: no allocation, no extra future, no extra
//! poll. With a meter set, counting is a few relaxed atomic additions, made
//! when the request is made (so a request counts whether it succeeds or
//! not, as a bucket bills it); only `delete_stream` wraps its input to
//! count the paths that flow through it. `cargo bench -p memo-runtime
//! --bench memo -- metered` measures a `get` with and without the wrapper
//! (BENCHMARKS.md, "The cost ledger").
//!
//! Both stores hand out the store they were given, not the wrapper
//! ([`object_store`](ObjectStoreRuntimeStore::object_store)), so a store
//! built over another's object store counts each request once.
//!
//! [`MemoStore`]: crate::MemoStore
//! [`ObjectStoreRuntimeStore`]: crate::runtime_store::ObjectStoreRuntimeStore

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use crate::write_once::Created;

tokio::task_local! {
    /// The meter of the attempt this task drives, if it drives one.
    static METER: Arc<Meter>;
}

/// What one attempt has cost so far: requests by the kind a bucket bills,
/// bytes uploaded, memo entries written and memoized calls run or reused.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    gets: AtomicU64,
    puts: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    bytes_written: AtomicU64,
    entries_written: AtomicU64,
    entry_bytes: AtomicU64,
    calls_run: AtomicU64,
    calls_reused: AtomicU64,
    paid_nanodollars: AtomicU64,
    saved_nanodollars: AtomicU64,
}

/// A [`Meter`]'s counts at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// `GET` and `HEAD` requests (`get_opts`, `get_ranges`).
    pub(crate) gets: u64,
    /// `PUT` requests of any mode, conditional creates included, and
    /// copies, renames and multipart uploads (each one request).
    pub(crate) puts: u64,
    /// Listing requests, one per call (`list`, `list_with_offset`,
    /// `list_with_delimiter`).
    pub(crate) lists: u64,
    /// Objects deleted (the paths that flowed into `delete_stream`).
    pub(crate) deletes: u64,
    /// Bytes of the payloads given to `put_opts`.
    pub(crate) bytes_written: u64,
    /// Memo entries this attempt created (a write that found the entry
    /// committed by someone else is not one).
    pub(crate) entries_written: u64,
    /// The payload bytes of those entries.
    pub(crate) entry_bytes: u64,
    /// Memoized calls whose body ran and returned a value.
    pub(crate) calls_run: u64,
    /// Memoized calls answered by a committed value, their body not run.
    pub(crate) calls_reused: u64,
    /// The declared cost of the calls run, in billionths of a dollar.
    pub(crate) paid_nanodollars: u64,
    /// The declared cost of the calls reused, in billionths of a dollar.
    pub(crate) saved_nanodollars: u64,
}

impl Meter {
    /// The meter of the current task, if it drives an attempt.
    pub(crate) fn current() -> Option<Arc<Meter>> {
        METER.try_with(Arc::clone).ok()
    }

    /// Runs `work` with `meter` as the task's meter.
    pub(crate) async fn scope<F: Future>(meter: Arc<Meter>, work: F) -> F::Output {
        METER.scope(meter, work).await
    }

    /// The counts now.
    pub(crate) fn reading(&self) -> Reading {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Reading {
            gets: read(&self.gets),
            puts: read(&self.puts),
            lists: read(&self.lists),
            deletes: read(&self.deletes),
            bytes_written: read(&self.bytes_written),
            entries_written: read(&self.entries_written),
            entry_bytes: read(&self.entry_bytes),
            calls_run: read(&self.calls_run),
            calls_reused: read(&self.calls_reused),
            paid_nanodollars: read(&self.paid_nanodollars),
            saved_nanodollars: read(&self.saved_nanodollars),
        }
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Runs `f` on the task's meter, if it has one.
fn with_meter(f: impl FnOnce(&Meter)) {
    let _ = METER.try_with(|meter| f(meter));
}

/// Counts a memo entry this attempt's create committed (not one another
/// writer committed, nor one whose writer is unknown).
pub(crate) fn entry_created(created: &Created) {
    if let Created::Ours(payload) = created {
        with_meter(|m| {
            add(&m.entries_written, 1);
            add(&m.entry_bytes, payload.len() as u64);
        });
    }
}

/// A memoized call's body ran and returned a value; it was declared to
/// cost `nanodollars`.
pub(crate) fn call_run(nanodollars: u64) {
    with_meter(|m| {
        add(&m.calls_run, 1);
        add(&m.paid_nanodollars, nanodollars);
    });
}

/// A memoized call was answered by a committed value; its body, declared
/// to cost `nanodollars`, did not run.
pub(crate) fn call_reused(nanodollars: u64) {
    with_meter(|m| {
        add(&m.calls_reused, 1);
        add(&m.saved_nanodollars, nanodollars);
    });
}

/// A declared cost in dollars, in billionths of a dollar: a negative or
/// not-a-number cost is none, a huge one saturates.
pub(crate) fn nanodollars(dollars: f64) -> u64 {
    if dollars.is_nan() || dollars <= 0.0 {
        0
    } else {
        // `as` saturates at u64::MAX.
        (dollars * 1e9).round() as u64
    }
}

/// An [`ObjectStore`] that counts each request made through it into the
/// current task's [`Meter`], if it has one, and otherwise only forwards.
pub(crate) struct Metered {
    inner: Arc<dyn ObjectStore>,
}

impl Metered {
    /// `inner`, its requests counted.
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> Arc<Metered> {
        Arc::new(Metered { inner })
    }

    /// The store it wraps, uncounted: what a `MemoStore` or a runtime
    /// store hands out as its object store, so that a store built over it
    /// counts each request once.
    pub(crate) fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }
}

/// As the wrapped store: every `Debug` and `Display` of a store memo prints
/// stays what it was.
impl fmt::Debug for Metered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl fmt::Display for Metered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

/// Counts one request with `count` if an attempt is metered, then makes
/// it with `call`.
fn counted<R>(count: impl FnOnce(&Meter), call: impl FnOnce() -> R) -> R {
    let _ = METER.try_with(|meter| count(meter));
    call()
}

/// The future every async method of `ObjectStore` returns (as
/// `#[async_trait]` writes it): the wrapped store's is returned as it is.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

// Written by hand rather than with `#[async_trait]`: an `async fn` here
// would box a second future around the wrapped store's on every request,
// metered or not. For the same reason each call goes to the wrapped
// `dyn ObjectStore` itself (`inner.as_ref()`), not to `Arc`'s impl of the
// trait, which boxes one more (measured: 50 ns on an `InMemory` `HEAD`).
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Metered {
    fn put_opts<'l0, 'l1, 'async_trait>(
        &'l0 self,
        location: &'l1 Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Boxed<'async_trait, PutResult>
    where
        'l0: 'async_trait,
        'l1: 'async_trait,
        Self: 'async_trait,
    {
        let bytes = payload.content_length() as u64;
        counted(
            |m| {
                add(&m.puts, 1);
                add(&m.bytes_written, bytes);
            },
            || self.inner.as_ref().put_opts(location, payload, opts),
        )
    }

    fn put_multipart_opts<'l0, 'l1, 'async_trait>(
        &'l0 self,
        location: &'l1 Path,
        opts: PutMultipartOptions,
    ) -> Boxed<'async_trait, Box<dyn MultipartUpload>>
    where
        'l0: 'async_trait,
        'l1: 'async_trait,
        Self: 'async_trait,
    {
        counted(
            |m| add(&m.puts, 1),
            || self.inner.as_ref().put_multipart_opts(location, opts),
        )
    }

    fn get_opts<'l0, 'l1, 'async_trait>(
        &'l0 self,
        location: &'l1 Path,
        options: GetOptions,
    ) -> Boxed<'async_trait, GetResult>
    where
        'l0: 'async_trait,
        'l1: 'async_trait,
        Self: 'async_trait,
    {
        counted(
            |m| add(&m.gets, 1),
            || self.inner.as_ref().get_opts(location, options),
        )
    }

    fn get_ranges<'l0, 'l1, 'l2, 'async_trait>(
        &'l0 self,
        location: &'l1 Path,
        ranges: &'l2 [Range<u64>],
    ) -> Boxed<'async_trait, Vec<Bytes>>
    where
        'l0: 'async_trait,
        'l1: 'async_trait,
        'l2: 'async_trait,
        Self: 'async_trait,
    {
        counted(
            |m| add(&m.gets, 1),
            || self.inner.as_ref().get_ranges(location, ranges),
        )
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let Some(meter) = Meter::current() else {
            return self.inner.as_ref().delete_stream(locations);
        };
        let locations = locations.inspect(move |location| {
            if location.is_ok() {
                add(&meter.deletes, 1);
            }
        });
        self.inner.as_ref().delete_stream(locations.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        counted(|m| add(&m.lists, 1), || self.inner.as_ref().list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        counted(
            |m| add(&m.lists, 1),
            || self.inner.as_ref().list_with_offset(prefix, offset),
        )
    }

    fn list_with_delimiter<'l0, 'l1, 'async_trait>(
        &'l0 self,
        prefix: Option<&'l1 Path>,
    ) -> Boxed<'async_trait, ListResult>
    where
        'l0: 'async_trait,
        'l1: 'async_trait,
        Self: 'async_trait,
    {
        counted(
            |m| add(&m.lists, 1),
            || self.inner.as_ref().list_with_delimiter(prefix),
        )
    }

    fn copy_opts<'l0, 'l1, 'l2, 'async_trait>(
        &'l0 self,
        from: &'l1 Path,
        to: &'l2 Path,
        options: CopyOptions,
    ) -> Boxed<'async_trait, ()>
    where
        'l0: 'async_trait,
        'l1: 'async_trait,
        'l2: 'async_trait,
        Self: 'async_trait,
    {
        counted(
            |m| add(&m.puts, 1),
            || self.inner.as_ref().copy_opts(from, to, options),
        )
    }

    fn rename_opts<'l0, 'l1, 'l2, 'async_trait>(
        &'l0 self,
        from: &'l1 Path,
        to: &'l2 Path,
        options: RenameOptions,
    ) -> Boxed<'async_trait, ()>
    where
        'l0: 'async_trait,
        'l1: 'async_trait,
        'l2: 'async_trait,
        Self: 'async_trait,
    {
        counted(
            |m| add(&m.puts, 1),
            || self.inner.as_ref().rename_opts(from, to, options),
        )
    }
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::*;
    use crate::testing::{CountingStore, exercise_every_method};

    #[tokio::test]
    async fn a_request_counts_only_in_a_metered_task() {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let store = Metered::new(counting.clone());
        let path = Path::from("a/b");
        store.put(&path, "xyz".into()).await.unwrap();
        let meter = Arc::new(Meter::default());
        Meter::scope(meter.clone(), async {
            store.put(&path, "four".into()).await.unwrap();
            store.get(&path).await.unwrap();
            store.head(&path).await.unwrap();
            let _: Vec<_> = store.list(None).collect().await;
            store.delete(&path).await.unwrap();
        })
        .await;
        let reading = meter.reading();
        assert_eq!(
            (reading.puts, reading.gets, reading.lists, reading.deletes),
            (1, 2, 1, 1),
            "{reading:?}"
        );
        assert_eq!(reading.bytes_written, 4);
        // The store below saw every request, the unmetered first put too.
        assert_eq!(counting.counts().puts, 2);
    }

    #[tokio::test]
    async fn a_store_built_over_anothers_object_store_counts_each_request_once() {
        let memo = crate::MemoStore::new(Arc::new(InMemory::new()), "memo");
        let runs = crate::runtime_store::ObjectStoreRuntimeStore::new(
            Arc::clone(memo.object_store()),
            "runs",
        );
        let again = crate::MemoStore::new(Arc::clone(runs.object_store()), "memo");
        let meter = Arc::new(Meter::default());
        Meter::scope(meter.clone(), async {
            again
                .object_store()
                .head(&Path::from("x"))
                .await
                .unwrap_err();
            again.store().head(&Path::from("x")).await.unwrap_err();
        })
        .await;
        assert_eq!(meter.reading().gets, 1);
    }

    #[tokio::test]
    async fn every_method_reaches_the_wrapped_store() {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let meter = Arc::new(Meter::default());
        Meter::scope(
            meter.clone(),
            exercise_every_method(Metered::new(counting.clone()).as_ref()),
        )
        .await;
        let reading = meter.reading();
        let below = counting.counts();
        assert_eq!(
            reading.gets,
            below.gets + below.get_ranges + below.heads,
            "{reading:?} {below:?}"
        );
        assert_eq!(
            reading.puts,
            below.puts + below.creates + below.multipart_uploads + below.copies + below.renames
        );
        assert_eq!(
            reading.lists,
            below.lists + below.lists_with_offset + below.lists_with_delimiter
        );
        assert_eq!(reading.deletes, below.delete_paths);
        assert_eq!(reading.bytes_written, below.bytes_put);
    }

    #[test]
    fn declared_costs_are_billionths_of_a_dollar() {
        assert_eq!(nanodollars(0.002), 2_000_000);
        assert_eq!(nanodollars(-1.0), 0);
        assert_eq!(nanodollars(f64::NAN), 0);
        assert_eq!(nanodollars(f64::INFINITY), u64::MAX);
    }
}
