//! `memoctl export --to DIR`: copies chosen runs, with everything their
//! replay needs, into a local folder, so that real histories can be kept as
//! test fixtures (a replay check, a resume in a test) without the bucket.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunRecord, RunStatus, RuntimeStore};
use memo_runtime::store::store_from_url;
use serde_json::json;

use super::{existing_run, run_id};
use crate::output::{Table, outln, print_json};
use crate::store::Store;

/// How many objects are copied at once.
const CONCURRENCY: usize = 16;

/// Which runs `memoctl export` copies: the runs named (all runs if none),
/// of `workflow` and in `status` if given.
#[derive(Debug)]
pub(crate) struct Selection<'a> {
    pub(crate) runs: &'a [String],
    pub(crate) workflow: Option<&'a str>,
    pub(crate) status: Option<RunStatus>,
}

/// What copying one run took.
struct Copied {
    record: RunRecord,
    objects: usize,
    bytes: u64,
}

/// Copies the runs `selection` chooses from `store` into the folder `to`
/// (created if missing), at the same paths under the same memo and runs
/// prefixes: each run's record, log, checkpoints and signals, its status
/// hint, and its memo entries. Terminal markers and due-run entries are not
/// copied (an export is a fixture, not a deployment: nothing sweeps or
/// wakes it). Each copied run is then read back from the folder and
/// compared with the source; a run that changed while it was copied is
/// reported, and fails the command: export it again.
pub(crate) async fn export(
    store: &Store,
    to: &std::path::Path,
    selection: Selection<'_>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let chosen = choose(store, &selection).await?;
    let (folder, target) = open_folder(to)?;
    let mut copied = Vec::new();
    for record in chosen {
        copied.push(copy_run(store, &target, record).await?);
    }
    let exported_runs = ObjectStoreRuntimeStore::new(
        Arc::clone(&target),
        relocate(&store.base, &Path::default(), store.runs.prefix())?,
    );
    let mut changed = Vec::new();
    for run in &copied {
        let read = exported_runs
            .load_run(&run.record.run_id)
            .await
            .with_context(|| format!("cannot read the exported run {}", run.record.run_id))?;
        if read.as_ref() != Some(&run.record) {
            changed.push(run.record.run_id.clone());
        }
    }
    let (objects, bytes) = copied
        .iter()
        .fold((0, 0), |(o, b), run| (o + run.objects, b + run.bytes));
    if json {
        print_json(&json!({
            "to": folder,
            "runs": copied.iter().map(|run| json!({
                "run_id": run.record.run_id.as_str(),
                "workflow": run.record.workflow,
                "workflow_version": run.record.workflow_version,
                "status": run.record.status.to_string(),
                "objects": run.objects,
                "bytes": run.bytes,
            })).collect::<Vec<_>>(),
            "objects": objects,
            "bytes": bytes,
            "changed_while_copied": changed.iter().map(|id| id.as_str()).collect::<Vec<_>>(),
        }));
    } else {
        let mut table = Table::new(&["RUN", "WORKFLOW", "VERSION", "STATUS", "OBJECTS", "BYTES"]);
        for run in &copied {
            table.row(vec![
                run.record.run_id.to_string(),
                run.record.workflow.clone(),
                run.record
                    .workflow_version
                    .clone()
                    .unwrap_or_else(|| "-".into()),
                run.record.status.to_string(),
                run.objects.to_string(),
                run.bytes.to_string(),
            ]);
        }
        table.print_or("no runs chosen");
        outln!(
            "exported {} runs ({objects} objects, {bytes} bytes) to {folder} \
             (read it with --store {folder})",
            copied.len()
        );
    }
    if changed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        let ids: Vec<_> = changed.iter().map(|id| id.to_string()).collect();
        crate::output::errln!(
            "memoctl: error: runs changed while they were copied (export them again): {}",
            ids.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}

/// The runs `selection` names, each loaded.
async fn choose(store: &Store, selection: &Selection<'_>) -> anyhow::Result<Vec<RunRecord>> {
    let mut chosen = Vec::new();
    if selection.runs.is_empty() {
        let statuses = selection
            .status
            .map_or(RunStatus::ALL.to_vec(), |s| vec![s]);
        for status in statuses {
            let ids = store
                .runs
                .list_run_ids(status)
                .await
                .with_context(|| format!("cannot list {status} runs in {}", store.url))?;
            for id in ids {
                let record = existing_run(store, &id).await?;
                // The status listing is a hint: a run that moved on is
                // listed under its new status.
                if record.status == status {
                    chosen.push(record);
                }
            }
        }
    } else {
        for run in selection.runs {
            let record = existing_run(store, &run_id(run)?).await?;
            if selection.status.is_none_or(|s| s == record.status) {
                chosen.push(record);
            }
        }
    }
    chosen.retain(|record| selection.workflow.is_none_or(|w| w == record.workflow));
    chosen.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    chosen.dedup_by(|a, b| a.run_id == b.run_id);
    Ok(chosen)
}

/// The folder `to` as a store (created if missing), and its `file://` URL.
fn open_folder(to: &std::path::Path) -> anyhow::Result<(String, Arc<dyn ObjectStore>)> {
    std::fs::create_dir_all(to)
        .with_context(|| format!("cannot create the folder {}", to.display()))?;
    let absolute = std::fs::canonicalize(to)
        .with_context(|| format!("cannot find the folder {}", to.display()))?;
    let Some(absolute) = absolute.to_str() else {
        bail!("the folder {} is not a UTF-8 path", absolute.display());
    };
    let url = format!("file://{absolute}");
    let opened = store_from_url(&url, Vec::<(String, String)>::new())
        .with_context(|| format!("cannot open the folder {absolute} as a store"))?;
    Ok((url, opened.store))
}

/// `path`, which is under `from`, moved under `to` at the same relative
/// path.
fn relocate(from: &Path, to: &Path, path: &Path) -> anyhow::Result<Path> {
    let Some(relative) = path.prefix_match(from) else {
        bail!("{path} is not under the store's prefix {from}");
    };
    Ok(Path::from_iter(to.parts().chain(relative)))
}

/// Copies one run's objects from `store` to `target`.
async fn copy_run(
    store: &Store,
    target: &Arc<dyn ObjectStore>,
    record: RunRecord,
) -> anyhow::Result<Copied> {
    let run_id = &record.run_id;
    let mut paths = store
        .runs
        .list_run_objects(&record)
        .await
        .with_context(|| format!("cannot list the objects of run {run_id}"))?;
    paths.extend(
        store
            .memo
            .list_entry_paths(run_id, record.incarnation)
            .await
            .with_context(|| format!("cannot list the memo entries of run {run_id}"))?,
    );
    let sizes: Vec<Option<u64>> = futures::stream::iter(paths)
        .map(|path| copy_object(store, target, path))
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let sizes: Vec<u64> = sizes.into_iter().flatten().collect();
    Ok(Copied {
        objects: sizes.len(),
        bytes: sizes.iter().sum(),
        record,
    })
}

/// Copies one object; `None` if it is gone (superseded since it was
/// listed: a checkpoint, a stale status hint).
async fn copy_object(
    store: &Store,
    target: &Arc<dyn ObjectStore>,
    path: Path,
) -> anyhow::Result<Option<u64>> {
    let read = match store.objects.get(&path).await {
        Ok(read) => read,
        Err(memo_runtime::object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {path} in {}", store.url)),
    };
    let bytes = read
        .bytes()
        .await
        .with_context(|| format!("cannot read {path} in {}", store.url))?;
    let to = relocate(&store.base, &Path::default(), &path)?;
    let size = bytes.len() as u64;
    target
        .put(&to, bytes.into())
        .await
        .with_context(|| format!("cannot write {to} in the export folder"))?;
    Ok(Some(size))
}
