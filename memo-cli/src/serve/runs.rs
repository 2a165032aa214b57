//! The runs page: runs filtered by status, workflow and id prefix, one page
//! at a time.
//!
//! What a page costs: pages of the runtime store's status index
//! (`list_run_ids_page`, from the cursor, each no longer than what the page
//! can still show), so a page lists about as many ids as it shows, then at
//! most [`SCAN_LIMIT`] runs loaded, [`LOAD_CONCURRENCY`] at a time, whatever
//! the number of runs stored. Runs come in the index's order (see
//! `RuntimeStore::list_run_ids_page`). The id prefix cuts the listed ids
//! before any run is loaded, and a page stops listing after
//! `SCAN_LIMIT * LIST_FACTOR` ids; the workflow filter needs each run's
//! record, so a rare workflow or prefix may take several pages of scanning.

use std::sync::Arc;

use axum::extract::{Query, State};
use futures::{StreamExt as _, stream};
use maud::{Markup, html};
use memo_runtime::RunId;
use memo_runtime::runtime_store::{RunStatus, RunSummary, RuntimeStore};
use serde::Deserialize;

use super::Shared;
use super::page::{Failure, frame, link, status_tag, when};

/// Runs shown on one page.
pub(crate) const PAGE_SIZE: usize = 50;

/// Runs loaded for one page at most, matching or not: a page whose filter
/// matches few runs stops here and offers the next page.
pub(crate) const SCAN_LIMIT: usize = 500;

/// Run ids listed for one page at most, as a multiple of [`SCAN_LIMIT`]:
/// an id prefix that few runs have stops the page here.
pub(crate) const LIST_FACTOR: usize = 10;

/// Runs loaded at once.
pub(crate) const LOAD_CONCURRENCY: usize = 8;

/// The page's query: the filters and the cursor (the page starts after run
/// `after` in status `from`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RunsQuery {
    status: String,
    workflow: String,
    prefix: String,
    from: String,
    after: String,
}

/// Which runs to list.
#[derive(Debug, Default)]
pub(crate) struct RunFilter {
    /// `None`: every status, in lifecycle order.
    pub(crate) status: Option<RunStatus>,
    /// Only runs of this workflow (exact name).
    pub(crate) workflow: Option<String>,
    /// Only run ids that start with this.
    pub(crate) prefix: String,
}

/// One page of runs.
#[derive(Debug, Default)]
pub(crate) struct RunPage {
    pub(crate) runs: Vec<RunSummary>,
    /// Listed runs that could not be loaded, with why.
    pub(crate) damaged: Vec<(RunId, String)>,
    /// Where the next page starts: after this run in this status.
    pub(crate) next: Option<(RunStatus, RunId)>,
    /// Runs loaded for this page.
    pub(crate) scanned: usize,
    /// Run ids listed for this page (loaded or not).
    pub(crate) listed: usize,
    /// Whether the page stopped at [`SCAN_LIMIT`] rather than full.
    pub(crate) capped: bool,
}

/// The runs after `from` that pass `filter`: at most `page_size` of them,
/// loading at most `scan_limit` runs.
pub(crate) async fn page_of_runs(
    store: &dyn RuntimeStore,
    filter: &RunFilter,
    from: Option<(RunStatus, RunId)>,
    page_size: usize,
    scan_limit: usize,
) -> anyhow::Result<RunPage> {
    let statuses = filter.status.map_or(RunStatus::ALL.to_vec(), |s| vec![s]);
    let mut page = RunPage::default();
    for status in statuses {
        let after = match &from {
            Some((from_status, _)) if status < *from_status => continue,
            Some((from_status, after)) if status == *from_status => Some(after),
            _ => None,
        };
        let mut after = after.cloned();
        loop {
            // List only what the page can still load.
            // (With an id prefix, as many as it may load: most ids listed
            // may not have the prefix.)
            let wanted = if filter.prefix.is_empty() {
                (page_size - page.runs.len()).min(scan_limit - page.scanned)
            } else {
                scan_limit - page.scanned
            };
            let listed = store
                .list_run_ids_page(status, after.as_ref(), wanted)
                .await?;
            page.listed += listed.ids.len();
            let candidates: Vec<RunId> = listed
                .ids
                .iter()
                .filter(|id| id.as_str().starts_with(&filter.prefix))
                .cloned()
                .collect();
            let mut loads = stream::iter(candidates)
                .map(|id| async move {
                    let summary = summary(store, &id).await;
                    (id, summary)
                })
                .buffered(LOAD_CONCURRENCY);
            while let Some((id, loaded)) = loads.next().await {
                page.scanned += 1;
                match loaded {
                    // The status index is a hint: a run that moved on is
                    // listed under its new status.
                    Ok(Some(run))
                        if run.status == status
                            && filter.workflow.as_ref().is_none_or(|w| *w == run.workflow) =>
                    {
                        page.runs.push(run);
                    }
                    Ok(_) => {}
                    Err(e) => page.damaged.push((id.clone(), format!("{e:#}"))),
                }
                let full = page.runs.len() >= page_size;
                if full || page.scanned >= scan_limit {
                    page.capped = !full;
                    page.next = Some((status, id));
                    return Ok(page);
                }
            }
            let Some(next) = listed.next else {
                break;
            };
            // An id prefix that few runs have: the page stops listing here.
            if page.listed >= scan_limit * LIST_FACTOR {
                page.capped = true;
                page.next = Some((status, next));
                return Ok(page);
            }
            after = Some(next);
        }
    }
    Ok(page)
}

async fn summary(store: &dyn RuntimeStore, run_id: &RunId) -> anyhow::Result<Option<RunSummary>> {
    let Some(record) = store.load_run(run_id).await? else {
        return Ok(None);
    };
    let steps = store.load_receipts(run_id, None).await?.len() as u64;
    Ok(Some(RunSummary::new(&record, steps)))
}

/// `GET /runs`.
pub(crate) async fn list(
    State(inspector): State<Shared>,
    Query(query): Query<RunsQuery>,
) -> Result<Markup, Failure> {
    let status = parse_status(&query.status)?;
    let from = match (query.from.as_str(), query.after.as_str()) {
        ("", "") => None,
        (from, after) => Some((
            parse_status(from)?.ok_or_else(|| Failure::bad_request("a cursor needs its status"))?,
            RunId::new(after).map_err(|e| Failure::bad_request(format!("{e}")))?,
        )),
    };
    let filter = RunFilter {
        status,
        workflow: Some(query.workflow.clone()).filter(|w| !w.is_empty()),
        prefix: query.prefix.clone(),
    };
    let runs = Arc::clone(&inspector.store.runs);
    let page = page_of_runs(runs.as_ref(), &filter, from.clone(), PAGE_SIZE, SCAN_LIMIT).await?;
    Ok(frame(
        "Runs",
        &inspector.store.url,
        render(&query, from.is_some(), &page),
    ))
}

fn parse_status(text: &str) -> Result<Option<RunStatus>, Failure> {
    if text.is_empty() {
        return Ok(None);
    }
    RunStatus::ALL
        .into_iter()
        .find(|s| s.to_string().eq_ignore_ascii_case(text))
        .map(Some)
        .ok_or_else(|| Failure::bad_request(format!("no such status: {text:?}")))
}

fn render(query: &RunsQuery, paged: bool, page: &RunPage) -> Markup {
    let next = page.next.as_ref().map(|(status, after)| {
        link(
            "/runs",
            &[
                ("status", &query.status),
                ("workflow", &query.workflow),
                ("prefix", &query.prefix),
                ("from", &status.to_string()),
                ("after", after.as_str()),
            ],
        )
    });
    let first = link(
        "/runs",
        &[
            ("status", &query.status),
            ("workflow", &query.workflow),
            ("prefix", &query.prefix),
        ],
    );
    html! {
        h1 { "Runs" }
        form.filters method="get" action="/runs" {
            label { "Status "
                select name="status" {
                    option value="" selected[query.status.is_empty()] { "any" }
                    @for status in RunStatus::ALL {
                        @let name = status.to_string();
                        option value=(name) selected[name.eq_ignore_ascii_case(&query.status)] { (name) }
                    }
                }
            }
            label { "Workflow " input type="text" name="workflow" value=(query.workflow); }
            label { "Run id starts with " input type="text" name="prefix" value=(query.prefix); }
            button type="submit" { "Filter" }
        }
        @if page.runs.is_empty() && page.damaged.is_empty() {
            p.empty { "No runs on this page." }
        } @else {
            table.runs {
                thead { tr {
                    th { "Run" } th { "Workflow" } th { "Status" } th { "Attempts" }
                    th { "Steps" } th { "Created" } th { "Last change" } th { "Lease" }
                } }
                tbody {
                    @for run in &page.runs {
                        tr {
                            td { a.run href={ "/runs/" (run.run_id) } { (run.run_id) } }
                            td { (run.workflow) }
                            td { (status_tag(run.status)) }
                            td.num { (run.attempts) }
                            td.num { (run.steps) }
                            td { (when(run.created_at_ms)) }
                            td { (when(run.updated_at_ms)) }
                            td { @if let Some(lease) = &run.lease { (lease.owner) } }
                        }
                    }
                    @for (run_id, error) in &page.damaged {
                        tr.damaged {
                            td { a.run href={ "/runs/" (run_id) } { (run_id) } }
                            td colspan="7" { "cannot be loaded: " (error) }
                        }
                    }
                }
            }
        }
        p.paging {
            @if paged { a href=(first) { "First page" } " " }
            @if let Some(next) = next {
                a.next href=(next) { "Next page" }
                @if page.capped {
                    " (this page stopped after loading " (page.scanned) " runs)"
                }
            }
        }
        p.cost {
            "Each page lists the run ids of each status it reaches and loads at most "
            (SCAN_LIMIT) " runs."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memo_runtime::runtime_store::InMemoryRuntimeStore;
    use memo_runtime::runtime_store::NewRun;

    /// A store with runs `r-00`..`r-{n-1}`, pending, of workflow `even` or
    /// `odd`.
    async fn store(n: usize) -> InMemoryRuntimeStore {
        let store = InMemoryRuntimeStore::new();
        for i in 0..n {
            store
                .create_run(NewRun {
                    run_id: RunId::new(format!("r-{i:02}")).unwrap(),
                    workflow: if i % 2 == 0 { "even" } else { "odd" }.into(),
                    input: memo_runtime::Bytes::new(),
                    created_at_ms: 1,
                    workflow_version: None,
                })
                .await
                .unwrap();
        }
        store
    }

    fn ids(page: &RunPage) -> Vec<&str> {
        page.runs.iter().map(|r| r.run_id.as_str()).collect()
    }

    #[tokio::test]
    async fn pages_follow_their_cursor_and_load_no_more_than_the_scan_limit() {
        let store = store(25).await;
        let all = RunFilter::default();
        let first = page_of_runs(&store, &all, None, 10, 100).await.unwrap();
        assert_eq!(ids(&first).first(), Some(&"r-00"));
        assert_eq!(first.scanned, 10, "loads stop at a full page");
        let second = page_of_runs(&store, &all, first.next.clone(), 10, 100)
            .await
            .unwrap();
        assert_eq!(ids(&second).first(), Some(&"r-10"));
        let third = page_of_runs(&store, &all, second.next.clone(), 10, 100)
            .await
            .unwrap();
        assert_eq!(ids(&third).len(), 5);
        assert_eq!(third.next, None, "the last page has no next");

        // Five odd runs among the first nine loaded: the page stops at its
        // scan limit and says where to go on.
        let odd = RunFilter {
            workflow: Some("odd".into()),
            ..RunFilter::default()
        };
        let capped = page_of_runs(&store, &odd, None, 10, 9).await.unwrap();
        assert_eq!(ids(&capped), ["r-01", "r-03", "r-05", "r-07"]);
        assert!(capped.capped);
        assert_eq!(capped.scanned, 9);
        let (status, after) = capped.next.clone().unwrap();
        assert_eq!((status, after.as_str()), (RunStatus::Pending, "r-08"));
        let rest = page_of_runs(&store, &odd, capped.next, 10, 9)
            .await
            .unwrap();
        assert_eq!(ids(&rest)[..2], ["r-09", "r-11"]);
    }

    #[tokio::test]
    async fn a_page_lists_only_its_runs_however_many_are_stored() {
        use std::sync::Arc;

        use memo_runtime::object_store::memory::InMemory;
        use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
        use memo_runtime::testing::CountingStore;

        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let store = ObjectStoreRuntimeStore::new(counting.clone(), "rt").with_ordered_listings();
        for i in 0..300 {
            store
                .create_run(NewRun {
                    run_id: RunId::new(format!("r-{i:03}")).unwrap(),
                    workflow: "w".into(),
                    input: memo_runtime::Bytes::new(),
                    created_at_ms: 1,
                    workflow_version: None,
                })
                .await
                .unwrap();
        }
        let all = RunFilter::default();
        counting.reset();
        let first = page_of_runs(&store, &all, None, 10, 100).await.unwrap();
        assert_eq!(ids(&first).len(), 10);
        assert_eq!(first.listed, 10);
        // The page's hints and one past it, not the 300.
        let listed = counting.counts().objects_listed;
        assert_eq!(listed, 11);
        counting.reset();
        let second = page_of_runs(&store, &all, first.next, 10, 100)
            .await
            .unwrap();
        assert_eq!(ids(&second).first(), Some(&"r-010"));
        assert_eq!(counting.counts().objects_listed, 11);
    }

    #[tokio::test]
    async fn a_page_on_a_local_folder_lists_only_its_runs() {
        use std::sync::Arc;

        use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
        use memo_runtime::store::LocalFolder;
        use memo_runtime::testing::CountingStore;

        let dir = tempfile::tempdir().unwrap();
        let folder = LocalFolder::new(dir.path()).unwrap().with_fsync(false);
        let counting = Arc::new(CountingStore::new(folder));
        // As `memoctl` opens a `file://` store.
        let store = ObjectStoreRuntimeStore::new(counting.clone(), "rt")
            .with_read_only_listings()
            .with_ordered_listings();
        for i in 0..300 {
            store
                .create_run(NewRun {
                    run_id: RunId::new(format!("r-{i:03}")).unwrap(),
                    workflow: "w".into(),
                    input: memo_runtime::Bytes::new(),
                    created_at_ms: 1,
                    workflow_version: None,
                })
                .await
                .unwrap();
        }
        let all = RunFilter::default();
        counting.reset();
        let first = page_of_runs(&store, &all, None, 10, 100).await.unwrap();
        assert_eq!(ids(&first)[..2], ["r-000", "r-001"]);
        // The page's hints and one past it, not the folder's 300.
        assert_eq!(counting.counts().objects_listed, 11);
        counting.reset();
        let second = page_of_runs(&store, &all, first.next, 10, 100)
            .await
            .unwrap();
        assert_eq!(ids(&second).first(), Some(&"r-010"));
        assert_eq!(counting.counts().objects_listed, 11);
    }

    #[tokio::test]
    async fn an_id_prefix_loads_only_the_runs_it_names() {
        let store = store(25).await;
        let filter = RunFilter {
            prefix: "r-1".into(),
            ..RunFilter::default()
        };
        let page = page_of_runs(&store, &filter, None, 50, 500).await.unwrap();
        assert_eq!(ids(&page).len(), 10);
        assert!(ids(&page).iter().all(|id| id.starts_with("r-1")));
        assert_eq!(page.scanned, 10, "only the runs with the prefix are loaded");
        let none = RunFilter {
            status: Some(RunStatus::Completed),
            ..RunFilter::default()
        };
        let page = page_of_runs(&store, &none, None, 50, 500).await.unwrap();
        assert!(page.runs.is_empty() && page.next.is_none());
    }
}
