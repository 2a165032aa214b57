//! `memoctl runs`: a table of runs.

use std::process::ExitCode;

use anyhow::Context as _;
use memo_runtime::RunId;
use memo_runtime::object_store::path::Path;
use memo_runtime::runtime_store::{RunStatus, RunSummary, RuntimeStore, Usage};
use serde_json::json;

use super::{cost, waits};
use crate::output::{Table, errln, now_ms, outln, print_json, time};
use crate::store::Store;

/// How `memoctl runs --sort` orders the runs it lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Sort {
    /// By what each run cost, most first ([`cost::run_dollars`] of its
    /// ledger's total); runs without a ledger last, in listing order.
    Cost,
}

/// Which runs `memoctl runs` (without `--limit`) lists, and in what order.
pub(crate) struct Listing<'a> {
    /// Only runs in this status (every status if `None`).
    pub(crate) status: Option<RunStatus>,
    /// Only runs of this workflow (every workflow if `None`).
    pub(crate) workflow: Option<&'a str>,
    /// Only the open runs suspended in a wait.
    pub(crate) waiting: bool,
    pub(crate) sort: Option<Sort>,
}

/// Lists the runs in `status` (every status if `None`) of `workflow` (every
/// workflow if `None`), in status then run-id order (or by `sort`). A run
/// that cannot be loaded is reported on stderr and fails the command, after
/// the others are printed. With `waiting`, lists only the open runs
/// suspended in a wait, with what they wait for and until when.
pub(crate) async fn runs(
    store: &Store,
    listing: Listing<'_>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Listing {
        status,
        workflow,
        waiting,
        sort,
    } = listing;
    if waiting {
        return waiting_runs(store, workflow, json).await;
    }
    let statuses = status.map_or(RunStatus::ALL.to_vec(), |s| vec![s]);
    let mut listed = Vec::new();
    let mut damaged = 0;
    for status in statuses {
        let runs = match store.runs.list_runs(status).await {
            Ok(runs) => runs,
            // Some run cannot be loaded: find which, run by run.
            Err(_) => one_by_one(store, status, &mut damaged).await?,
        };
        listed.extend(
            runs.into_iter()
                .filter(|run| workflow.is_none_or(|w| w == run.workflow)),
        );
    }
    let (listed, costs) = sorted(store, listed, sort).await?;
    if json {
        print_json(&json!(listed_json(&listed, costs.as_deref())));
        if listed.is_empty()
            && let Some(note) = store_is_empty(store).await?
        {
            errln!("memoctl: no runs: {note}");
        }
    } else {
        print_table(store, &listed, costs.as_deref()).await?;
    }
    Ok(if damaged == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Which page of runs `memoctl runs --limit` lists.
pub(crate) struct Page<'a> {
    /// The runs of this status only (`None`: of every status, in status
    /// order).
    pub(crate) status: Option<RunStatus>,
    /// The cursor the page before printed: its last run (with `status`),
    /// or `<status>.<run>` (without).
    pub(crate) after: Option<&'a str>,
    pub(crate) limit: usize,
}

/// Lists one page of at most `page.limit` runs in `page.status` (in every
/// status, one after the other, if `None`), of `workflow`, if given, after
/// the page is listed (so a page may show fewer rows than its limit),
/// loading only the page's runs ([`RuntimeStore::list_runs_page`]), and
/// prints the next page's cursor. A listed run that left the status since
/// is skipped; one that cannot be loaded is reported on stderr and fails
/// the command, after the others are printed.
pub(crate) async fn runs_page(
    store: &Store,
    page: Page<'_>,
    workflow: Option<&str>,
    sort: Option<Sort>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Page {
        status,
        after,
        limit,
    } = page;
    // Where the page starts: a status, and the run after which it starts.
    let (first, mut after) = match (status, after) {
        (Some(status), after) => (status, after.map(super::run_id).transpose()?),
        (None, None) => (RunStatus::ALL[0], None),
        (None, Some(cursor)) => {
            let bad = || {
                anyhow::anyhow!(
                    "not a cursor of runs of every status: {cursor:?} (expected \
                     <status>.<run id>, as the page before printed)"
                )
            };
            let (status, run) = cursor.split_once('.').ok_or_else(bad)?;
            let status = crate::parse_status(status).map_err(|_| bad())?;
            (status, Some(super::run_id(run)?))
        }
    };
    let statuses = match status {
        Some(status) => vec![status],
        None => RunStatus::ALL.into_iter().filter(|s| *s >= first).collect(),
    };
    let mut damaged = 0;
    let mut runs: Vec<RunSummary> = Vec::new();
    let mut next = None;
    for (at, &status) in statuses.iter().enumerate() {
        let wanted = limit - runs.len();
        let listed_page = match store
            .runs
            .list_runs_page(status, after.as_ref(), wanted)
            .await
        {
            Ok(page) => page,
            // Some run cannot be loaded: find which, run by run.
            Err(_) => {
                let ids = store
                    .runs
                    .list_run_ids_page(status, after.as_ref(), wanted)
                    .await
                    .with_context(|| format!("cannot list {status} runs in {}", store.url))?;
                let loaded = load_each(store, status, ids.ids, &mut damaged).await;
                memo_runtime::runtime_store::RunPage::new(loaded, ids.next)
            }
        };
        after = None;
        runs.extend(listed_page.runs);
        if let Some(last) = listed_page.next {
            next = Some((status, last));
            break;
        }
        // Full at the end of a status: the next page starts after this
        // status's last run, in the statuses after it.
        if runs.len() >= limit
            && at + 1 < statuses.len()
            && let Some(last) = runs.last()
        {
            next = Some((status, last.run_id.clone()));
            break;
        }
    }
    let listed: Vec<RunSummary> = runs
        .into_iter()
        .filter(|run| workflow.is_none_or(|w| w == run.workflow))
        .collect();
    let next = next.map(|(status_of, last)| match status {
        Some(_) => last.to_string(),
        None => format!("{}.{last}", status_of.to_string().to_lowercase()),
    });
    let (listed, costs) = sorted(store, listed, sort).await?;
    if json {
        print_json(&json!({
            "runs": listed_json(&listed, costs.as_deref()),
            "next": next,
        }));
    } else {
        print_table(store, &listed, costs.as_deref()).await?;
        if let Some(next) = &next {
            outln!("next page: --after {next}");
        }
    }
    Ok(if damaged == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `listed` as `sort` orders it, with each run's total cost (`None` for a
/// run without a ledger) when it is ordered by cost.
async fn sorted(
    store: &Store,
    listed: Vec<RunSummary>,
    sort: Option<Sort>,
) -> anyhow::Result<(Vec<RunSummary>, Option<Vec<Option<Usage>>>)> {
    let Some(Sort::Cost) = sort else {
        return Ok((listed, None));
    };
    let mut costed = Vec::with_capacity(listed.len());
    for run in listed {
        let costs = cost::ledger(store, &run.run_id, run.incarnation).await?;
        let total = (!costs.is_empty()).then(|| Usage::total(&costs));
        costed.push((run, total));
    }
    // Stable: equal costs (and runs without a ledger) keep their order.
    costed.sort_by(|(_, a), (_, b)| {
        let dollars = |usage: &Option<Usage>| usage.as_ref().map_or(-1.0, cost::run_dollars);
        dollars(b).total_cmp(&dollars(a))
    });
    let (runs, costs) = costed.into_iter().unzip();
    Ok((runs, Some(costs)))
}

fn listed_json(listed: &[RunSummary], costs: Option<&[Option<Usage>]>) -> Vec<serde_json::Value> {
    listed
        .iter()
        .enumerate()
        .map(|(at, run)| {
            let mut json = run_json(run);
            if let Some(costs) = costs {
                json["cost"] = match &costs[at] {
                    Some(usage) => json!({
                        "requests": usage.requests(),
                        "s3_request_dollars": cost::request_dollars(usage),
                        "paid_dollars": usage.paid_dollars(),
                        "dollars": cost::run_dollars(usage),
                    }),
                    None => serde_json::Value::Null,
                };
            }
            json
        })
        .collect()
}

async fn print_table(
    store: &Store,
    listed: &[RunSummary],
    costs: Option<&[Option<Usage>]>,
) -> anyhow::Result<()> {
    let mut header = vec![
        "RUN",
        "WORKFLOW",
        "STATUS",
        "ATTEMPTS",
        "STEPS",
        "LAST CHANGE",
        "VERSION",
    ];
    if costs.is_some() {
        header.extend(["REQUESTS", "COST"]);
    }
    let mut table = Table::new(&header);
    for (at, run) in listed.iter().enumerate() {
        let mut row = vec![
            run.run_id.to_string(),
            run.workflow.clone(),
            run.status.to_string(),
            run.attempts.to_string(),
            run.steps.to_string(),
            time(run.updated_at_ms),
            // A run continues only on its version: an operator checks here
            // that some worker still registers it.
            run.workflow_version.clone().unwrap_or_else(|| "-".into()),
        ];
        if let Some(costs) = costs {
            match &costs[at] {
                Some(usage) => row.extend([
                    usage.requests().to_string(),
                    cost::dollars(cost::run_dollars(usage)),
                ]),
                None => row.extend(["-".to_string(), "-".to_string()]),
            }
        }
        table.row(row);
    }
    let empty = match store_is_empty(store).await? {
        Some(note) => format!("no runs: {note}"),
        None => "no runs".into(),
    };
    table.print_or(&empty);
    Ok(())
}

/// When the runtime store's prefix holds nothing at all (not even an ended
/// run's hint), which is more often a wrong `--runs-prefix` than a store with
/// no runs: a note saying so, with the folders the URL's prefix does hold.
async fn store_is_empty(store: &Store) -> anyhow::Result<Option<String>> {
    let prefix = store.runs.prefix();
    let listing = |at: &Path| {
        let at = at.clone();
        async move {
            store
                .objects
                .list_with_delimiter(Some(&at))
                .await
                .with_context(|| format!("cannot list {at} in {}", store.url))
        }
    };
    let under_runs = listing(prefix).await?;
    if !under_runs.objects.is_empty() || !under_runs.common_prefixes.is_empty() {
        return Ok(None);
    }
    let under_base = listing(&store.base).await?;
    let folders: Vec<_> = under_base
        .common_prefixes
        .iter()
        .filter_map(|folder| folder.filename())
        .map(|name| format!("{name:?}"))
        .collect();
    let found = if folders.is_empty() {
        "nothing".to_string()
    } else {
        format!("the folders {}", folders.join(", "))
    };
    Ok(Some(format!(
        "nothing is stored under {:?} in {} (the runtime store's prefix: is --runs-prefix \
         where the workers keep their runs?); the store's prefix holds {found}",
        prefix.as_ref(),
        store.url
    )))
}

/// The runs in `status`, each listed on its own, so that the ones that
/// cannot be loaded are reported (and counted in `damaged`) while the others
/// are listed.
async fn one_by_one(
    store: &Store,
    status: RunStatus,
    damaged: &mut usize,
) -> anyhow::Result<Vec<RunSummary>> {
    let ids = store
        .runs
        .list_run_ids(status)
        .await
        .with_context(|| format!("cannot list {status} runs in {}", store.url))?;
    Ok(load_each(store, status, ids, damaged).await)
}

/// The runs `ids` still in `status`, each loaded on its own; the ones that
/// cannot be loaded are reported (and counted in `damaged`).
async fn load_each(
    store: &Store,
    status: RunStatus,
    ids: Vec<RunId>,
    damaged: &mut usize,
) -> Vec<RunSummary> {
    let mut runs = Vec::new();
    for run_id in ids {
        match load(store, &run_id).await {
            // The status listing is a hint: a run that moved on is listed
            // under its new status instead.
            Ok(Some(run)) if run.status == status => runs.push(run),
            Ok(_) => {}
            Err(e) => {
                errln!("memoctl: error: cannot load run {run_id}: {e:#}");
                *damaged += 1;
            }
        }
    }
    runs
}

async fn load(store: &Store, run_id: &RunId) -> anyhow::Result<Option<RunSummary>> {
    let Some(record) = store.runs.load_run(run_id).await? else {
        return Ok(None);
    };
    let steps = store.runs.load_receipts(run_id, None).await?.len() as u64;
    Ok(Some(RunSummary::new(&record, steps)))
}

fn run_json(record: &RunSummary) -> serde_json::Value {
    json!({
        "run_id": record.run_id.as_str(),
        "incarnation": record.incarnation.to_string(),
        "workflow": record.workflow,
        "workflow_version": record.workflow_version,
        "status": record.status.to_string(),
        "attempts": record.attempts,
        "steps": record.steps,
        "created_at_ms": record.created_at_ms,
        "updated_at_ms": record.updated_at_ms,
        "terminal_at_ms": record.terminal_at_ms,
    })
}

/// The open runs (pending or running) whose last receipt is a wait: what
/// they wait for and until when. Costs a listing per open status and a read
/// of each open run's receipts.
async fn waiting_runs(
    store: &Store,
    workflow: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let now = now_ms();
    let mut rows = Vec::new();
    for status in [RunStatus::Pending, RunStatus::Running] {
        let runs = store
            .runs
            .list_runs(status)
            .await
            .with_context(|| format!("cannot list {status} runs in {}", store.url))?;
        for run in runs {
            if workflow.is_some_and(|w| w != run.workflow) {
                continue;
            }
            let receipts = store
                .runs
                .load_receipts(&run.run_id, None)
                .await
                .with_context(|| format!("cannot read run {} in {}", run.run_id, store.url))?;
            if let Some((what, until)) = waits::waiting(&receipts) {
                rows.push((run, what, until));
            }
        }
    }
    if json {
        print_json(&json!(
            rows.iter()
                .map(|(run, what, until)| json!({
                    "run_id": run.run_id.as_str(),
                    "workflow": run.workflow,
                    "waits_for": what,
                    "until_ms": until,
                }))
                .collect::<Vec<_>>()
        ));
    } else {
        let mut table = Table::new(&["RUN", "WORKFLOW", "WAITS FOR", "UNTIL"]);
        for (run, what, until) in &rows {
            table.row(vec![
                run.run_id.to_string(),
                run.workflow.clone(),
                what.clone(),
                waits::when(*until, now),
            ]);
        }
        table.print_or("no waiting runs");
    }
    Ok(ExitCode::SUCCESS)
}
