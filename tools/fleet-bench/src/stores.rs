//! The wrappers a worker process puts around memo's stores: a bucket's
//! distance ([`Distant`]) and the moment a run completes ([`Completions`]).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use memo_runtime::runtime_store::{
    AttemptCost, Commit, InputRecord, NewInput, NewRun, RunIdPage, RunPage, RunRecord, RunStatus,
    RunSummary, RuntimeStore, StatusChange, StepReceipt,
};
use memo_runtime::testing::forward_object_store;
use memo_runtime::{Bytes, Incarnation, RunId};

/// Requests by (request kind, object kind): `("GET", "memo entry")`.
pub(crate) type Breakdown = BTreeMap<(String, String), u64>;

/// An [`ObjectStore`] as far away as a bucket: every request waits a fixed
/// `latency` before it is sent (a listing or a delete stream once, before
/// its first item). It also counts the bytes that reads return and the
/// requests by the kind of object they reach (the totals by request kind
/// are `CountingStore`'s).
pub(crate) struct Distant {
    inner: Arc<dyn ObjectStore>,
    latency: Duration,
    bytes_read: Arc<AtomicU64>,
    breakdown: Arc<Mutex<Breakdown>>,
}

impl Distant {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, latency: Duration) -> Distant {
        Distant {
            inner,
            latency,
            bytes_read: Arc::default(),
            breakdown: Arc::default(),
        }
    }

    /// Requests so far by request kind and object kind.
    pub(crate) fn breakdown(&self) -> Breakdown {
        self.breakdown.lock().expect("breakdown").clone()
    }

    fn count(&self, request: &str, path: &Path) {
        count(&self.breakdown, request, path);
    }

    /// Bytes returned by reads (`get`, ranges) so far.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }

    pub(crate) fn reset(&self) {
        self.bytes_read.store(0, Ordering::Relaxed);
        self.breakdown.lock().expect("breakdown").clear();
    }

    async fn wait(&self) {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
    }

    /// `stream`, its first item held back by the latency.
    fn delayed<T: Send + 'static>(&self, stream: BoxStream<'static, T>) -> BoxStream<'static, T> {
        let latency = self.latency;
        futures::stream::once(async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            stream
        })
        .flatten()
        .boxed()
    }
}

impl fmt::Display for Distant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Distant({}, +{:?})", self.inner, self.latency)
    }
}

impl fmt::Debug for Distant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Distant {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let request = match opts.mode {
            PutMode::Create => "PUT (create)",
            PutMode::Overwrite | PutMode::Update(_) => "PUT (overwrite)",
        };
        self.count(request, location);
        self.wait().await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.count("PUT (multipart)", location);
        self.wait().await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        self.count(if head { "HEAD" } else { "GET" }, location);
        self.wait().await;
        let got = self.inner.get_opts(location, options).await?;
        if !head {
            let read = got.range.end - got.range.start;
            self.bytes_read.fetch_add(read, Ordering::Relaxed);
        }
        Ok(got)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.count("GET", location);
        self.wait().await;
        let got = self.inner.get_ranges(location, ranges).await?;
        let read: usize = got.iter().map(Bytes::len).sum();
        self.bytes_read.fetch_add(read as u64, Ordering::Relaxed);
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let breakdown = Arc::clone(&self.breakdown);
        let locations = locations.inspect(move |location| {
            if let Ok(location) = location {
                count(&breakdown, "DELETE", location);
            }
        });
        self.delayed(self.inner.delete_stream(locations.boxed()))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.count("LIST", &prefix.cloned().unwrap_or_default());
        self.delayed(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.count("LIST", &prefix.cloned().unwrap_or_default());
        self.delayed(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.count("LIST", &prefix.cloned().unwrap_or_default());
        self.wait().await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.count("COPY", to);
        self.wait().await;
        self.inner.copy_opts(from, to, options).await
    }

    forward_object_store!(self.inner => rename_opts);
}

fn count(breakdown: &Mutex<Breakdown>, request: &str, path: &Path) {
    let key = (request.to_string(), object_kind(path).to_string());
    *breakdown.lock().expect("breakdown").entry(key).or_default() += 1;
}

/// What kind of memo object `path` is (or, for a listing, holds), from the
/// stored layout (`memo-runtime/src/layout.rs`), below the `memo` and
/// `runs` prefixes the workers give their two stores.
fn object_kind(path: &Path) -> &'static str {
    let parts: Vec<&str> = path.as_ref().split('/').collect();
    let Some(start) = parts.iter().position(|p| *p == "memo" || *p == "runs") else {
        return "other";
    };
    match &parts[start + 1..] {
        ["memos", ..] => "memo entry",
        ["terminals", ..] => "terminal marker",
        ["due", ..] => "due-run entry",
        ["probes", ..] => "create probe",
        ["runs-by-status", ..] => "status hint",
        ["runs", _, "run"] => "run pointer",
        ["runs", _, _, "run"] => "incarnation record",
        ["runs", _, _, "log", ..] => "run log entry",
        ["runs", _, _, "checkpoint", ..] => "checkpoint",
        ["runs", _, _, "delta" | "deltas", ..] => "checkpoint delta",
        ["runs", ..] => "run folder",
        _ => "other",
    }
}

/// A [`RuntimeStore`] that tells `on_completed` each run whose completion
/// it committed, as the commit returns (where a run ends, end to end), and
/// counts the calls the workflow runtime makes to it, by method.
pub(crate) struct Completions<F> {
    inner: Arc<dyn RuntimeStore>,
    on_completed: F,
    calls: Mutex<BTreeMap<&'static str, u64>>,
}

impl<F: Fn(&RunId) + Send + Sync> Completions<F> {
    pub(crate) fn new(inner: Arc<dyn RuntimeStore>, on_completed: F) -> Self {
        Completions {
            inner,
            on_completed,
            calls: Mutex::default(),
        }
    }

    fn call(&self, method: &'static str) {
        *self.calls.lock().expect("calls").entry(method).or_default() += 1;
    }
}

/// The calls a [`Completions`] counted, by method; cleared by `reset`.
pub(crate) trait CountsCalls {
    fn calls(&self) -> BTreeMap<&'static str, u64>;
    fn reset(&self);
}

impl<F> CountsCalls for Completions<F> {
    fn calls(&self) -> BTreeMap<&'static str, u64> {
        self.calls.lock().expect("calls").clone()
    }

    fn reset(&self) {
        self.calls.lock().expect("calls").clear();
    }
}

impl<F> fmt::Debug for Completions<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completions")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<F: Fn(&RunId) + Send + Sync> RuntimeStore for Completions<F> {
    async fn create_run(&self, run: NewRun) -> memo_runtime::Result<RunRecord> {
        self.call("create_run");
        self.inner.create_run(run).await
    }

    async fn load_run(&self, run_id: &RunId) -> memo_runtime::Result<Option<RunRecord>> {
        self.call("load_run");
        self.inner.load_run(run_id).await
    }

    async fn atomic_apply(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> memo_runtime::Result<RunRecord> {
        self.call("atomic_apply");
        let completes = matches!(commit.status, Some(StatusChange::Completed { .. }));
        let record = self.inner.atomic_apply(run_id, commit).await?;
        if completes && record.status == RunStatus::Completed {
            (self.on_completed)(run_id);
        }
        Ok(record)
    }

    async fn load_receipts(
        &self,
        run_id: &RunId,
        after: Option<u64>,
    ) -> memo_runtime::Result<Vec<StepReceipt>> {
        self.call("load_receipts");
        self.inner.load_receipts(run_id, after).await
    }

    async fn load_snapshot(&self, run_id: &RunId) -> memo_runtime::Result<Option<Bytes>> {
        self.call("load_snapshot");
        self.inner.load_snapshot(run_id).await
    }

    async fn append_input(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> memo_runtime::Result<InputRecord> {
        self.call("append_input");
        self.inner.append_input(run_id, input).await
    }

    async fn append_input_and_load(
        &self,
        run_id: &RunId,
        input: NewInput,
    ) -> memo_runtime::Result<(InputRecord, Option<RunRecord>)> {
        self.call("append_input_and_load");
        self.inner.append_input_and_load(run_id, input).await
    }

    async fn load_inputs(&self, run_id: &RunId) -> memo_runtime::Result<Vec<InputRecord>> {
        self.call("load_inputs");
        self.inner.load_inputs(run_id).await
    }

    async fn load_receipts_and_inputs(
        &self,
        run_id: &RunId,
    ) -> memo_runtime::Result<(Vec<StepReceipt>, Vec<InputRecord>)> {
        self.call("load_receipts_and_inputs");
        self.inner.load_receipts_and_inputs(run_id).await
    }

    async fn atomic_apply_and_load(
        &self,
        run_id: &RunId,
        commit: Commit,
    ) -> memo_runtime::Result<(RunRecord, Vec<StepReceipt>, Vec<InputRecord>)> {
        // An attempt's start: never the run's completion.
        self.call("atomic_apply_and_load");
        self.inner.atomic_apply_and_load(run_id, commit).await
    }

    async fn list_runs(&self, status: RunStatus) -> memo_runtime::Result<Vec<RunSummary>> {
        self.call("list_runs");
        self.inner.list_runs(status).await
    }

    async fn list_run_ids(&self, status: RunStatus) -> memo_runtime::Result<Vec<RunId>> {
        self.call("list_run_ids");
        self.inner.list_run_ids(status).await
    }

    async fn list_run_ids_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> memo_runtime::Result<RunIdPage> {
        self.call("list_run_ids_page");
        self.inner.list_run_ids_page(status, after, limit).await
    }

    async fn list_runs_page(
        &self,
        status: RunStatus,
        after: Option<&RunId>,
        limit: usize,
    ) -> memo_runtime::Result<RunPage> {
        self.call("list_runs_page");
        self.inner.list_runs_page(status, after, limit).await
    }

    async fn delete_run(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> memo_runtime::Result<bool> {
        self.call("delete_run");
        self.inner.delete_run(run_id, incarnation).await
    }

    async fn delete_run_at(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        at_ms: u64,
    ) -> memo_runtime::Result<memo_runtime::runtime_store::RunDeletion> {
        self.call("delete_run");
        self.inner.delete_run_at(run_id, incarnation, at_ms).await
    }

    async fn holds_remains(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> memo_runtime::Result<bool> {
        self.call("holds_remains");
        self.inner.holds_remains(run_id, incarnation).await
    }

    async fn holds_deletion(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> memo_runtime::Result<Option<bool>> {
        self.call("holds_deletion");
        self.inner.holds_deletion(run_id, incarnation).await
    }

    async fn forget_deleted(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> memo_runtime::Result<()> {
        self.call("forget_deleted");
        self.inner.forget_deleted(run_id, incarnation).await
    }

    async fn clear_remains(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> memo_runtime::Result<bool> {
        self.call("clear_remains");
        self.inner.clear_remains(run_id, incarnation).await
    }

    async fn forget_deleted_all(
        &self,
        deleted: &[(RunId, Incarnation)],
    ) -> Vec<memo_runtime::Result<()>> {
        self.call("forget_deleted_all");
        self.inner.forget_deleted_all(deleted).await
    }

    async fn forget_deleted_all_at(
        &self,
        deleted: &[(RunId, Incarnation)],
        at_ms: u64,
    ) -> Vec<memo_runtime::Result<()>> {
        self.call("forget_deleted_all");
        self.inner.forget_deleted_all_at(deleted, at_ms).await
    }

    fn use_clock(&self, clock: Arc<dyn memo_runtime::clock::Clock>) {
        self.inner.use_clock(clock);
    }

    async fn record_attempt_cost(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
        cost: &AttemptCost,
    ) -> memo_runtime::Result<()> {
        self.call("record_attempt_cost");
        self.inner
            .record_attempt_cost(run_id, incarnation, cost)
            .await
    }

    async fn load_attempt_costs(
        &self,
        run_id: &RunId,
        incarnation: Incarnation,
    ) -> memo_runtime::Result<Vec<AttemptCost>> {
        self.call("load_attempt_costs");
        self.inner.load_attempt_costs(run_id, incarnation).await
    }
}
