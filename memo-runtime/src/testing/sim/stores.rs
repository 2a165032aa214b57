//! The store wrappers of a simulated worker: [`Preemptible`] turns every
//! object-store request into await points the simulator can stop a worker
//! at, and audits what a retention sweep deletes; [`Audited`] checks every
//! acknowledged runtime-store change against a fresh instance.

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context as TaskContext, Poll};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result as StoreResult,
};

use super::checker::Checker;
use crate::error::{Error, Result};
use crate::run_id::{Incarnation, RunId};
use crate::runtime_store::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunIdPage, RunPage, RunRecord, RunStatus,
    RunSummary, RuntimeStore, StepReceipt,
};

/// A future that is pending once (waking itself), then ready: a point where
/// the simulator's scheduler may run another worker, or crash this one.
struct AwaitPoint {
    passed: bool,
}

impl Future for AwaitPoint {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        if self.passed {
            return Poll::Ready(());
        }
        self.passed = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

pub(super) fn await_point() -> impl Future<Output = ()> {
    AwaitPoint { passed: false }
}

/// Forwards every request to `inner`, with an await point before each
/// request and another after each write is applied (a worker stopped there
/// has written but never saw the acknowledgement). Paths deleted by a
/// retention sweep are reported to the [`Checker`] as they are deleted.
pub(super) struct Preemptible<T> {
    pub(super) inner: T,
    pub(super) checker: Checker,
    /// Set when a memo entry or an incarnation record this worker wrote
    /// landed in an incarnation that no longer exists (a stale attempt's
    /// late write, a redelivery's record put back after a deletion, seed
    /// 2117) or that has ended (a stale attempt's late write, which may
    /// land while a sweep deletes the run, after its clear of the entries
    /// and before the records go), so that the world may kill the worker
    /// at the await point right after it, before its take-back: the window
    /// no order of requests at the writer closes.
    pub(super) late_write: Option<Arc<AtomicBool>>,
}

impl<T: fmt::Debug> fmt::Debug for Preemptible<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Preemptible")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<T: fmt::Display> fmt::Display for Preemptible<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Preemptible({})", self.inner)
    }
}

impl<T: ObjectStore> Preemptible<T> {
    async fn write<R>(&self, request: impl Future<Output = StoreResult<R>>) -> StoreResult<R> {
        await_point().await;
        let result = request.await;
        await_point().await;
        result
    }

    async fn read<R>(&self, request: impl Future<Output = StoreResult<R>>) -> StoreResult<R> {
        await_point().await;
        request.await
    }
}

impl<T> Preemptible<T> {
    /// Whether `location` is a memo entry or the record of an incarnation
    /// a fresh instance finds no longer exists, or ended.
    fn lands_in_an_ended_incarnation(&self, location: &Path) -> bool {
        let memo_entry = location
            .parts()
            .nth(1)
            .is_some_and(|f| f.as_ref() == crate::layout::MEMOS);
        if !memo_entry && !super::compat::is_incarnation_record(location) {
            return false;
        }
        let Some((run_id, Some(incarnation))) = super::compat::run_of(location) else {
            return false;
        };
        match super::compat::fresh_run(self.checker.objects(), &run_id) {
            Some(Ok(None)) => true,
            Some(Ok(Some(run))) => {
                run.incarnation.as_u64() != incarnation || run.status.is_terminal()
            }
            _ => false,
        }
    }
}

/// `listing`, after an await point.
fn preempted<I: Send + 'static>(listing: BoxStream<'static, I>) -> BoxStream<'static, I> {
    stream::once(await_point())
        .filter_map(|()| std::future::ready(None))
        .chain(listing)
        .boxed()
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for Preemptible<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> StoreResult<PutResult> {
        self.checker.writing(location);
        await_point().await;
        self.checker.burying(location);
        let result = self.inner.put_opts(location, payload, opts).await;
        if result.is_ok() {
            self.checker.landed(location);
        }
        if result.is_ok()
            && let Some(flag) = &self.late_write
            && self.lands_in_an_ended_incarnation(location)
        {
            flag.store(true, Ordering::Release);
        }
        await_point().await;
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> StoreResult<Box<dyn MultipartUpload>> {
        self.write(self.inner.put_multipart_opts(location, opts))
            .await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> StoreResult<GetResult> {
        self.read(self.inner.get_opts(location, options)).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> StoreResult<Vec<Bytes>> {
        self.read(self.inner.get_ranges(location, ranges)).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, StoreResult<Path>>,
    ) -> BoxStream<'static, StoreResult<Path>> {
        let checker = self.checker.clone();
        let audited = locations
            .inspect(move |location| {
                if let Ok(path) = location {
                    checker.deleting(path);
                }
            })
            .boxed();
        preempted(self.inner.delete_stream(audited))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        if let Some(prefix) = prefix {
            self.checker.listing(prefix);
        }
        preempted(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        if let Some(prefix) = prefix {
            self.checker.listing(prefix);
        }
        preempted(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> StoreResult<ListResult> {
        if let Some(prefix) = prefix {
            self.checker.listing(prefix);
        }
        self.read(self.inner.list_with_delimiter(prefix)).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> StoreResult<()> {
        self.write(self.inner.copy_opts(from, to, options)).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> StoreResult<()> {
        self.write(self.inner.rename_opts(from, to, options)).await
    }
}

/// Forwards every request to `inner` after an await point, and nothing
/// more: the key store of a sealed history's workers and operator
/// (`sealed.rs`), so that a read of a run's key interleaves with a sweep
/// deleting the run, and a rewrap's reads and replacements with the
/// forgets and the keys of other processes, as a bucket's round trips do.
/// (Not a [`Preemptible`]: its paths are not the shared store's, which the
/// checker audits.)
#[derive(Debug)]
pub(super) struct Yielding<T>(pub(super) T);

impl<T: fmt::Display> fmt::Display for Yielding<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Yielding({})", self.0)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for Yielding<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> StoreResult<PutResult> {
        await_point().await;
        self.0.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> StoreResult<Box<dyn MultipartUpload>> {
        await_point().await;
        self.0.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> StoreResult<GetResult> {
        await_point().await;
        self.0.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> StoreResult<Vec<Bytes>> {
        await_point().await;
        self.0.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, StoreResult<Path>>,
    ) -> BoxStream<'static, StoreResult<Path>> {
        preempted(self.0.delete_stream(locations))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        preempted(self.0.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, StoreResult<ObjectMeta>> {
        preempted(self.0.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> StoreResult<ListResult> {
        await_point().await;
        self.0.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> StoreResult<()> {
        await_point().await;
        self.0.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> StoreResult<()> {
        await_point().await;
        self.0.rename_opts(from, to, options).await
    }
}

/// A worker's runtime store: forwards to `inner`, reports every
/// [`Error::Corrupt`] it returns, and checks that every change it
/// acknowledges is visible to a fresh instance over the same objects.
#[derive(Debug)]
pub(super) struct Audited<S> {
    pub(super) inner: S,
    pub(super) checker: Checker,
}

impl<S> Audited<S> {
    fn seen<T>(&self, what: &str, result: Result<T>) -> Result<T> {
        if let Err(error @ Error::Corrupt { .. }) = &result {
            self.checker.violation(
                "no read returns a corrupt value",
                format!("{what}: {error}"),
            );
        }
        result
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<S: RuntimeStore> RuntimeStore for Audited<S> {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        let run_id = run.run_id.clone();
        let created = self.inner.create_run(run).await;
        if let Ok(record) = &created {
            self.checker.acknowledged_create(&run_id, record);
            self.checker
                .acknowledged_creation(&run_id, record.incarnation.as_u64());
        }
        self.seen("create_run", created)
    }

    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.seen("load_run", self.inner.load_run(run_id).await)
    }

    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        let applied = self.inner.atomic_apply(run_id, commit.clone()).await;
        if let Ok(record) = &applied {
            self.checker.acknowledged_commit(run_id, &commit, record);
        }
        self.seen("atomic_apply", applied)
    }

    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        self.seen(
            "load_receipts",
            self.inner.load_receipts(run_id, after).await,
        )
    }

    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        self.seen("load_snapshot", self.inner.load_snapshot(run_id).await)
    }

    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        let input_id = input.input_id.clone();
        let appended = self.inner.append_input(run_id, input).await;
        if appended.is_ok() {
            self.checker.acknowledged_input(run_id, &input_id);
        }
        self.seen("append_input", appended)
    }

    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> Result<(InputRecord, Option<RunRecord>)> {
        let input_id = input.input_id.clone();
        let appended = self.inner.append_input_and_load(run_id, input).await;
        if appended.is_ok() {
            self.checker.acknowledged_input(run_id, &input_id);
        }
        self.seen("append_input_and_load", appended)
    }

    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        self.seen("load_inputs", self.inner.load_inputs(run_id).await)
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        self.seen(
            "load_receipts_and_inputs",
            self.inner.load_receipts_and_inputs(run_id).await,
        )
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        let applied = self
            .inner
            .atomic_apply_and_load(run_id, commit.clone())
            .await;
        if let Ok((record, _, _)) = &applied {
            self.checker.acknowledged_commit(run_id, &commit, record);
        }
        self.seen("atomic_apply_and_load", applied)
    }

    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        self.seen("list_runs", self.inner.list_runs(status).await)
    }

    async fn list_run_ids(&self, status: RunStatus) -> Result<Vec<RunId>> {
        self.seen("list_run_ids", self.inner.list_run_ids(status).await)
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunIdPage> {
        self.seen(
            "list_run_ids_page",
            self.inner.list_run_ids_page(status, after, limit).await,
        )
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> Result<RunPage> {
        self.seen(
            "list_runs_page",
            self.inner.list_runs_page(status, after, limit).await,
        )
    }

    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.seen(
            "delete_run",
            self.inner.delete_run(run_id, incarnation).await,
        )
    }

    async fn delete_run_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> Result<crate::runtime_store::RunDeletion> {
        self.seen(
            "delete_run",
            self.inner.delete_run_at(run_id, incarnation, at_ms).await,
        )
    }

    async fn holds_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.seen(
            "holds_remains",
            self.inner.holds_remains(run_id, incarnation).await,
        )
    }

    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Option<bool>> {
        self.seen(
            "holds_deletion",
            self.inner.holds_deletion(run_id, incarnation).await,
        )
    }

    async fn forget_deleted(&self, run_id: &RunId, incarnation: Incarnation) -> Result<()> {
        self.seen(
            "forget_deleted",
            self.inner.forget_deleted(run_id, incarnation).await,
        )
    }

    async fn clear_remains(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.seen(
            "clear_remains",
            self.inner.clear_remains(run_id, incarnation).await,
        )
    }

    async fn forget_deleted_all(&self, deleted: &[(RunId, Incarnation)]) -> Vec<Result<()>> {
        let results = self.inner.forget_deleted_all(deleted).await;
        results
            .into_iter()
            .map(|result| self.seen("forget_deleted_all", result))
            .collect()
    }

    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: u64,
    ) -> Vec<Result<()>> {
        let results = self.inner.forget_deleted_all_at(deleted, at_ms).await;
        results
            .into_iter()
            .map(|result| self.seen("forget_deleted_all", result))
            .collect()
    }

    fn use_clock(&self, clock: std::sync::Arc<dyn crate::clock::Clock>) {
        self.inner.use_clock(clock);
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> Result<()> {
        self.inner
            .record_attempt_cost(run_id, incarnation, cost)
            .await
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> Result<Vec<AttemptCost>> {
        self.seen(
            "load_attempt_costs",
            self.inner.load_attempt_costs(run_id, incarnation).await,
        )
    }
}

/// The objects every worker shares, as the test sees them: no faults, no
/// await points. Reads through it complete on their first poll (an
/// `InMemory` store, or a local folder whose requests run to their end in
/// the poll that makes them).
pub(super) type Shared = Arc<dyn ObjectStore>;
