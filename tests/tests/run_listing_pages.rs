//! Listings of run ids by status that page
//! (`RuntimeStore::list_run_ids_page`): one page costs the same whatever the
//! number of runs, and paging through lists every run once, across page
//! boundaries, on every backend.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::{
    Commit, InMemoryRuntimeStore, InputRecord, NewInput, NewRun, ObjectStoreRuntimeStore,
    RunRecord, RunStatus, RunSummary, RuntimeStore, StatusChange, StepReceipt,
};
use memo_runtime::store::{LocalFolder, SqliteStore};
use memo_runtime::testing::CountingStore;
use memo_runtime::{Bytes, Incarnation, Result, RunId};
use memo_tests::fixtures::run;

/// Plants a `Running` status hint for each of `n` runs, as the runtime
/// store writes them (`rt/runs-by-status/Running/<run>.<inc>`), without
/// the runs: a listing of ids reads only the hints.
async fn plant_running_hints(objects: &InMemory, n: usize) {
    for i in 0..n {
        let path = Path::from(format!(
            "rt/runs-by-status/Running/run-{i:06}.{:016x}",
            i + 1
        ));
        objects.put(&path, "x".into()).await.unwrap();
    }
}

/// Every page of `status` with `limit`, checked as it goes: a page before
/// the last is full and its cursor is its last id.
async fn all_pages(store: &dyn RuntimeStore, status: RunStatus, limit: usize) -> Vec<Vec<RunId>> {
    let mut pages = Vec::new();
    let mut after: Option<RunId> = None;
    loop {
        let page = store
            .list_run_ids_page(status, after.as_ref(), limit)
            .await
            .unwrap();
        assert!(page.ids.len() <= limit.max(1));
        let next = page.next.clone();
        if let Some(next) = &next {
            assert_eq!(
                page.ids.len(),
                limit.max(1),
                "a page before the last is full"
            );
            assert_eq!(page.ids.last(), Some(next));
        }
        pages.push(page.ids);
        match next {
            Some(next) => after = Some(next),
            None => return pages,
        }
        assert!(pages.len() < 10_000, "paging does not end");
    }
}

/// Pages through `status` with every `limit` given and checks that the
/// pages, in order, list exactly what `list_run_ids` lists, each id once.
async fn check_paging(store: &dyn RuntimeStore, status: RunStatus, limits: &[usize]) {
    let all: BTreeSet<RunId> = store
        .list_run_ids(status)
        .await
        .unwrap()
        .into_iter()
        .collect();
    for &limit in limits {
        let pages = all_pages(store, status, limit).await;
        let listed: Vec<RunId> = pages.concat();
        let distinct: BTreeSet<RunId> = listed.iter().cloned().collect();
        assert_eq!(
            distinct.len(),
            listed.len(),
            "an id listed twice with limit {limit}"
        );
        assert_eq!(distinct, all, "limit {limit}");
        // The same order on every page size.
        let one_page = store
            .list_run_ids_page(status, None, all.len() + 1)
            .await
            .unwrap();
        assert_eq!(one_page.next, None);
        assert_eq!(listed, one_page.ids, "limit {limit}");
    }
}

/// Ids whose path segments sort otherwise than the ids (capitals, `-`
/// before `.`, prefixes of each other), so that page boundaries fall
/// between runs whose hints' names are neighbours.
const IDS: [&str; 12] = [
    "a", "a-1", "A", "a_b", "ab", "Ab", "AB", "b", "b-", "b-0", "z9", "Zz",
];

async fn create_runs(store: &dyn RuntimeStore, ids: &[&str]) {
    for id in ids {
        store
            .create_run(NewRun {
                run_id: run(id),
                workflow: "w".into(),
                input: Bytes::new(),
                created_at_ms: 0,
                workflow_version: None,
            })
            .await
            .unwrap();
    }
}

async fn start(store: &dyn RuntimeStore, id: &str) {
    store
        .atomic_apply(&run(id), Commit::status(StatusChange::start_attempt(1), 1))
        .await
        .unwrap();
}

#[tokio::test]
async fn one_page_costs_the_same_with_1k_and_100k_runs() {
    let mut costs = Vec::new();
    for n in [1_000, 100_000] {
        let objects = InMemory::new();
        plant_running_hints(&objects, n).await;
        let counting = Arc::new(CountingStore::new(objects));
        let store = ObjectStoreRuntimeStore::new(counting.clone(), "rt").with_ordered_listings();

        counting.reset();
        let first = store
            .list_run_ids_page(RunStatus::Running, None, 50)
            .await
            .unwrap();
        let first_cost = counting.counts();
        assert_eq!(first.ids.len(), 50);
        assert_eq!(first.ids[0], run("run-000000"));
        assert_eq!(first.next, Some(run("run-000049")));

        // A page from a cursor in the middle.
        counting.reset();
        let middle = store
            .list_run_ids_page(RunStatus::Running, Some(&run("run-000499")), 50)
            .await
            .unwrap();
        let middle_cost = counting.counts();
        assert_eq!(middle.ids.first(), Some(&run("run-000500")));
        assert_eq!(middle.next, Some(run("run-000549")));

        // The page and the one hint past it, in one listing.
        assert_eq!(
            (first_cost.lists_with_offset, first_cost.objects_listed),
            (1, 51)
        );
        assert_eq!(
            (middle_cost.lists_with_offset, middle_cost.objects_listed),
            (1, 51)
        );
        costs.push((n, first_cost, middle_cost));
    }
    assert_eq!(costs[0].1, costs[1].1, "first page: {costs:?}");
    assert_eq!(costs[0].2, costs[1].2, "middle page: {costs:?}");
}

#[tokio::test]
async fn paging_lists_every_run_once_in_memory() {
    let store = InMemoryRuntimeStore::new();
    create_runs(&store, &IDS).await;
    for id in &IDS[..7] {
        start(&store, id).await;
    }
    for status in [RunStatus::Pending, RunStatus::Running, RunStatus::Completed] {
        check_paging(&store, status, &[0, 1, 2, 3, 5, 6, 7, 8, 13]).await;
    }
    let running = store
        .list_run_ids_page(RunStatus::Running, None, 100)
        .await
        .unwrap();
    assert_eq!(running.ids.len(), 7);
    // A cursor that is no listed run still pages from where it would be.
    let page = store
        .list_run_ids_page(RunStatus::Pending, Some(&run("az")), 2)
        .await
        .unwrap();
    assert_eq!(page.ids, [run("b"), run("b-")]);
}

/// The path segment of `id` in the short form (`=` before each capital).
fn segment(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_uppercase() {
                format!("={}", c.to_ascii_lowercase())
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Fills `objects` with [`IDS`], the first seven `Running`, and pages
/// through each status with `store`, which lists `objects`.
async fn check_paging_on(objects: Arc<dyn ObjectStore>, store: &ObjectStoreRuntimeStore) {
    create_runs(store, &IDS).await;
    for id in &IDS[..7] {
        start(store, id).await;
    }
    // A second hint of runs in `Running` (of an older incarnation, as a
    // stalled deletion leaves one): each run is still listed once, also
    // where its hints straddle a page boundary.
    for id in ["a", "a_b", "AB"] {
        let current = store.load_run(&run(id)).await.unwrap().unwrap().incarnation;
        assert_ne!(current, Incarnation::from_u64(0));
        let stale = Path::from(format!(
            "rt/runs-by-status/Running/{}.{}",
            segment(id),
            Incarnation::from_u64(0)
        ));
        objects.put(&stale, "x".into()).await.unwrap();
    }
    for status in [RunStatus::Pending, RunStatus::Running, RunStatus::Completed] {
        check_paging(store, status, &[0, 1, 2, 3, 5, 6, 7, 8, 13]).await;
    }
    let running = store
        .list_run_ids_page(RunStatus::Running, None, 100)
        .await
        .unwrap();
    let expected: BTreeSet<RunId> = IDS[..7].iter().map(|id| run(id)).collect();
    assert_eq!(
        running.ids.iter().cloned().collect::<BTreeSet<_>>(),
        expected
    );
    assert_eq!(running.ids.len(), 7);
}

#[tokio::test]
async fn paging_lists_every_run_once_on_object_storage_that_lists_in_order() {
    let objects = Arc::new(InMemory::new());
    let store = ObjectStoreRuntimeStore::new(objects.clone(), "rt").with_ordered_listings();
    check_paging_on(objects, &store).await;
}

#[tokio::test]
async fn paging_lists_every_run_once_on_a_local_folder() {
    // A folder lists in no particular order: pages are still in order.
    let dir = tempfile::tempdir().unwrap();
    let objects = Arc::new(LocalFolder::new(dir.path()).unwrap());
    let store = ObjectStoreRuntimeStore::new(objects.clone(), "rt");
    check_paging_on(objects, &store).await;
}

#[tokio::test]
async fn paging_lists_every_run_once_on_a_local_folder_that_lists_in_order() {
    // A folder lists from an offset in order: pages stop their listing.
    let dir = tempfile::tempdir().unwrap();
    let objects = Arc::new(LocalFolder::new(dir.path()).unwrap().with_fsync(false));
    let store = ObjectStoreRuntimeStore::new(objects.clone(), "rt").with_ordered_listings();
    check_paging_on(objects, &store).await;
}

#[tokio::test]
async fn paging_lists_every_run_once_on_a_sqlite_file_that_lists_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let objects =
        Arc::new(SqliteStore::open_with_fsync(dir.path().join("memo.db"), false).unwrap());
    let store = ObjectStoreRuntimeStore::new(objects.clone(), "rt").with_ordered_listings();
    check_paging_on(objects, &store).await;
}

#[tokio::test]
async fn one_page_on_a_local_folder_lists_the_page_not_the_folder() {
    // The folder's names are read whole, but only the page's are kept and
    // returned (see `LocalFolder`'s `list_with_offset`).
    one_page_lists_the_page_not_the_rest(|dir| LocalFolder::new(dir).unwrap().with_fsync(false))
        .await;
}

#[tokio::test]
async fn one_page_on_a_sqlite_file_lists_the_page_not_the_table() {
    one_page_lists_the_page_not_the_rest(|dir| {
        SqliteStore::open_with_fsync(dir.join("memo.db"), false).unwrap()
    })
    .await;
}

/// With 200 and then 3,000 `Running` hints in a store `open` makes in a
/// fresh folder, a first page and a page from a cursor in the middle each
/// list the page and one hint past it, in one listing: the same whatever
/// the number of hints.
async fn one_page_lists_the_page_not_the_rest<S: ObjectStore>(
    open: impl Fn(&std::path::Path) -> S,
) {
    let mut costs = Vec::new();
    for n in [200, 3_000] {
        let dir = tempfile::tempdir().unwrap();
        let objects = open(dir.path());
        for i in 0..n {
            let path = Path::from(format!(
                "rt/runs-by-status/Running/run-{i:06}.{:016x}",
                i + 1
            ));
            objects.put(&path, "x".into()).await.unwrap();
        }
        let counting = Arc::new(CountingStore::new(objects));
        let store = ObjectStoreRuntimeStore::new(counting.clone(), "rt").with_ordered_listings();
        counting.reset();
        let first = store
            .list_run_ids_page(RunStatus::Running, None, 50)
            .await
            .unwrap();
        let first_cost = counting.counts();
        assert_eq!(first.ids[0], run("run-000000"));
        assert_eq!(first.next, Some(run("run-000049")));
        counting.reset();
        let middle = store
            .list_run_ids_page(RunStatus::Running, Some(&run("run-000099")), 50)
            .await
            .unwrap();
        let middle_cost = counting.counts();
        assert_eq!(middle.ids.first(), Some(&run("run-000100")));
        assert_eq!(middle.next, Some(run("run-000149")));
        for cost in [first_cost, middle_cost] {
            assert_eq!((cost.lists_with_offset, cost.objects_listed), (1, 51));
        }
        costs.push((first_cost, middle_cost));
    }
    assert_eq!(costs[0], costs[1], "{costs:?}");
}

#[tokio::test]
async fn a_pending_page_tidies_and_skips_unborn_hints() {
    for ordered in [true, false] {
        pending_page_tidies_and_skips_unborn_hints(ordered).await;
    }
}

async fn pending_page_tidies_and_skips_unborn_hints(ordered: bool) {
    let objects = Arc::new(InMemory::new());
    let mut store = ObjectStoreRuntimeStore::new(objects.clone(), "rt");
    if ordered {
        store = store.with_ordered_listings();
    }
    create_runs(&store, &["p-1", "p-3"]).await;
    // A creation that stopped between its hint and its pointer: `p-2`
    // never existed, and `p-4` neither, past the last live run.
    let unborn = [
        Path::from("rt/runs-by-status/Pending/p-2.0000000000000007"),
        Path::from("rt/runs-by-status/Pending/p-4.0000000000000007"),
    ];
    for hint in &unborn {
        objects.put(hint, "x".into()).await.unwrap();
    }

    let first = store
        .list_run_ids_page(RunStatus::Pending, None, 1)
        .await
        .unwrap();
    assert_eq!(first.ids, [run("p-1")]);
    // The hint past the page was unborn: the cursor says a live run follows.
    assert_eq!(first.next, Some(run("p-1")));
    let second = store
        .list_run_ids_page(RunStatus::Pending, first.next.as_ref(), 1)
        .await
        .unwrap();
    assert_eq!(second.ids, [run("p-3")]);
    // Only an unborn hint follows: the listing ends here.
    assert_eq!(second.next, None);
    for hint in &unborn {
        assert!(objects.head(hint).await.is_err(), "{hint} kept");
    }
}

/// A backend that implements only what it must: its pages come from the
/// trait's default, over its whole listing.
#[derive(Debug, Default)]
struct DefaultPaging {
    inner: InMemoryRuntimeStore,
}

#[async_trait]
impl RuntimeStore for DefaultPaging {
    async fn create_run(&self, run: NewRun) -> Result<RunRecord> {
        self.inner.create_run(run).await
    }
    async fn load_run(&self, run_id: &RunId) -> Result<Option<RunRecord>> {
        self.inner.load_run(run_id).await
    }
    async fn atomic_apply(&self, run_id: &RunId, commit: Commit) -> Result<RunRecord> {
        self.inner.atomic_apply(run_id, commit).await
    }
    async fn load_receipts(&self, run_id: &RunId, after: Option<u64>) -> Result<Vec<StepReceipt>> {
        self.inner.load_receipts(run_id, after).await
    }
    async fn load_snapshot(&self, run_id: &RunId) -> Result<Option<Bytes>> {
        self.inner.load_snapshot(run_id).await
    }
    async fn append_input(&self, run_id: &RunId, input: NewInput) -> Result<InputRecord> {
        self.inner.append_input(run_id, input).await
    }
    async fn load_inputs(&self, run_id: &RunId) -> Result<Vec<InputRecord>> {
        self.inner.load_inputs(run_id).await
    }
    async fn list_runs(&self, status: RunStatus) -> Result<Vec<RunSummary>> {
        // In reverse, so the default must order the ids itself.
        let mut runs = self.inner.list_runs(status).await?;
        runs.reverse();
        Ok(runs)
    }
    async fn delete_run(&self, run_id: &RunId, incarnation: Incarnation) -> Result<bool> {
        self.inner.delete_run(run_id, incarnation).await
    }
}

#[tokio::test]
async fn the_default_pages_any_backend() {
    let store = DefaultPaging::default();
    create_runs(&store, &IDS).await;
    check_paging(&store, RunStatus::Pending, &[0, 1, 2, 5, 11, 12, 13]).await;
    let page = store
        .list_run_ids_page(RunStatus::Pending, Some(&run("az")), 2)
        .await
        .unwrap();
    assert_eq!(page.ids, [run("b"), run("b-")]);
    assert_eq!(page.next, Some(run("b-")));
}

/// Creates the `Running` runs `ids` on `store`.
async fn running(store: &dyn RuntimeStore, ids: &[String]) {
    for id in ids {
        create_runs(store, &[id.as_str()]).await;
        start(store, id).await;
    }
}

#[tokio::test]
async fn a_page_of_summaries_loads_only_its_runs_whatever_the_number_of_runs() {
    let ids: Vec<String> = (0..60).map(|i| format!("run-{i:03}")).collect();
    let mut costs = Vec::new();
    for others in [100, 2_000] {
        let dir = tempfile::tempdir().unwrap();
        let folder = LocalFolder::new(dir.path()).unwrap().with_fsync(false);
        let counting = Arc::new(CountingStore::new(folder));
        // No run cache: each summary is read from the folder.
        let store = ObjectStoreRuntimeStore::new(counting.clone(), "rt")
            .with_ordered_listings()
            .with_cached_runs(0);
        running(&store, &ids).await;
        // Many more runs in the status, after the page in the listing:
        // their hints, as the store writes them.
        for i in 0..others {
            let hint = Path::from(format!(
                "rt/runs-by-status/Running/zz-{i:06}.{:016x}",
                i + 1
            ));
            counting.put(&hint, "".into()).await.unwrap();
        }

        counting.reset();
        let page = store
            .list_runs_page(RunStatus::Running, None, 50)
            .await
            .unwrap();
        let cost = counting.counts();
        let listed: Vec<&str> = page.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(listed, ids[..50], "the page's runs, in order");
        assert!(page.runs.iter().all(|r| r.status == RunStatus::Running));
        assert_eq!(page.runs[0].steps, 0);
        assert_eq!(page.next, Some(run("run-049")));
        // One listing from the start, stopped after a chunk of the
        // folder's; the page's runs read, and no other run (each lists its
        // newest-first deltas from an offset: 50 more).
        assert!(cost.lists_with_offset <= 1 + 50, "{cost:?}");
        assert!(cost.objects_listed < 200, "{cost:?}");
        assert!(cost.gets >= 50, "every summary is read: {cost:?}");
        // One summary read per run (its pointer, then its log), not its
        // record and its receipts apart.
        assert!(cost.gets <= 2 * 50, "two reads per run: {cost:?}");

        // The next page: ten runs, then hints of runs that do not exist
        // (not loaded as summaries).
        counting.reset();
        let next = store
            .list_runs_page(RunStatus::Running, page.next.as_ref(), 50)
            .await
            .unwrap();
        let next_cost = counting.counts();
        assert_eq!(next.runs.len(), 10);
        assert_eq!(next.next, Some(run("zz-000039")));
        costs.push((others, cost, next_cost));
    }
    assert_eq!(costs[0].1, costs[1].1, "first page: {costs:?}");
    assert_eq!(costs[0].2, costs[1].2, "second page: {costs:?}");
}
