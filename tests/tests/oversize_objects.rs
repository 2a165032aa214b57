//! Oversize objects (issue 21): a stored object larger than memo ever writes
//! for its kind is refused as corrupt, naming its path, before its body is
//! read. Each test plants a sparse 1 TiB file (it costs no disk) in place of
//! an object memo wrote in a real folder; reading it whole would abort the
//! reader on the allocation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::{Commit, NewRun, StatusChange, StepReceipt};
use memo_runtime::{
    Bytes, Error, MemoStore, RunId,
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
    store::store_from_url,
};

const TIB: u64 = 1 << 40;
const NO_OPTIONS: [(&str, &str); 0] = [];

/// The store a `file://` URL opens on `root`: a new one per call, as a new
/// process would open it (no cache carries over).
fn objects(root: &Path) -> Arc<dyn ObjectStore> {
    store_from_url(&format!("file://{}", root.display()), NO_OPTIONS)
        .unwrap()
        .store
}

fn runtime_store(root: &Path, checkpoint_interval: u64) -> ObjectStoreRuntimeStore {
    ObjectStoreRuntimeStore::new(objects(root), "memo")
        .with_checkpoint_interval(checkpoint_interval)
}

/// Makes the file at `path` a sparse file of 1 TiB.
fn inflate(path: &Path) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(TIB).unwrap();
}

/// Every regular file below `folder`.
fn files_below(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            } else {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

/// The files of `kind` ("log", "delta", "checkpoint", "run") of the one run
/// in the folder.
fn run_files(root: &Path, kind: &str) -> Vec<PathBuf> {
    let runs = root.join("memo").join("runs");
    files_below(&runs)
        .into_iter()
        .filter(|f| {
            let folder = f.strip_prefix(&runs).unwrap().parent().unwrap();
            match kind {
                // The pointer (`runs/<run>/run`), not the incarnation's copy.
                "run" => f.file_name().unwrap() == "run" && folder.components().count() == 1,
                // Files in a folder of that name at any depth (deltas:
                // `deltas/<u64::MAX - p>`).
                _ => folder.components().any(|c| c.as_os_str() == kind),
            }
        })
        .collect()
}

/// The error names the object (`in_path`) and the size found.
fn assert_oversize(error: &Error, in_path: &str) {
    match error {
        Error::Corrupt { path, reason } => {
            assert!(path.contains(in_path), "{error}");
            assert!(reason.contains(&TIB.to_string()), "{error}");
        }
        other => panic!("expected a corrupt-object error at {in_path}, got {other:?}"),
    }
}

async fn started_run(store: &dyn RuntimeStore, id: &str, steps: u64) -> RunId {
    let run_id = RunId::new(id).unwrap();
    let new = NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: Bytes::from_static(b"input"),
        created_at_ms: 0,
        workflow_version: None,
    };
    store.create_run(new).await.unwrap();
    let start = Commit::status(StatusChange::start_attempt(1), 1);
    store.atomic_apply(&run_id, start).await.unwrap();
    for sequence in 0..steps {
        let receipt = StepReceipt {
            run_id: run_id.clone(),
            sequence,
            step: format!("step-{sequence}"),
            output: Bytes::from(format!("output of {sequence}")),
            recorded_at_ms: 2 + sequence,
            error: None,
            retries: 0,
            last_retried_error: None,
        };
        let commit = Commit::step(receipt, 2 + sequence);
        store.atomic_apply(&run_id, commit).await.unwrap();
    }
    run_id
}

#[tokio::test]
async fn a_huge_memo_entry_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = RunId::new("r").unwrap();
    let store = MemoStore::new(objects(dir.path()), "memo");
    store.new_memo(&run_id, 0).put("k", b"v").await.unwrap();
    let [entry] = &files_below(dir.path())[..] else {
        panic!("one entry expected");
    };
    inflate(entry);

    let fresh = MemoStore::new(objects(dir.path()), "memo");
    let error = fresh.new_memo(&run_id, 0).get("k").await.unwrap_err();
    assert_oversize(&error, "memo/memos/r/");
    // A writer of the same key reads the committed entry back: refused too.
    let fresh = MemoStore::new(objects(dir.path()), "memo");
    let error = fresh.new_memo(&run_id, 0).put("k", b"v").await.unwrap_err();
    assert_oversize(&error, "memo/memos/r/");
}

/// The limit a reader holds entries to is its own value limit and the
/// frame: a process with a smaller limit refuses a larger committed entry.
#[tokio::test]
async fn a_store_refuses_entries_over_its_own_value_limit() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = RunId::new("r").unwrap();
    let larger = MemoStore::new(objects(dir.path()), "memo").with_max_value_size(100);
    larger
        .new_memo(&run_id, 0)
        .put("k", [7u8; 100])
        .await
        .unwrap();

    let smaller = MemoStore::new(objects(dir.path()), "memo").with_max_value_size(99);
    let error = smaller.new_memo(&run_id, 0).get("k").await.unwrap_err();
    assert!(
        matches!(&error, Error::Corrupt { path, reason } if path.contains("memo/memos/r/") && reason.contains("memo entry")),
        "{error}"
    );
    let same = MemoStore::new(objects(dir.path()), "memo").with_max_value_size(100);
    assert_eq!(
        same.new_memo(&run_id, 0)
            .get("k")
            .await
            .unwrap()
            .unwrap()
            .len(),
        100
    );
}

#[tokio::test]
async fn a_huge_run_log_entry_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = started_run(&runtime_store(dir.path(), 4), "r", 1).await;
    let entries = run_files(dir.path(), "log");
    assert_eq!(entries.len(), 2, "{entries:?}");
    inflate(&entries[1]);

    let error = runtime_store(dir.path(), 4)
        .load_run(&run_id)
        .await
        .unwrap_err();
    assert_oversize(&error, "/log/");
}

#[tokio::test]
async fn a_huge_run_pointer_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = started_run(&runtime_store(dir.path(), 4), "r", 0).await;
    // The pointer itself, not the incarnation record beside the log.
    let pointer = dir.path().join("memo").join("runs").join("r").join("run");
    assert!(pointer.is_file(), "no run pointer at {}", pointer.display());
    inflate(&pointer);

    let error = runtime_store(dir.path(), 4)
        .load_run(&run_id)
        .await
        .unwrap_err();
    assert_oversize(&error, "memo/runs/r/run");
}

#[tokio::test]
async fn a_huge_checkpoint_delta_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = started_run(&runtime_store(dir.path(), 1), "r", 2).await;
    let deltas = run_files(dir.path(), "deltas");
    assert!(!deltas.is_empty());
    for delta in &deltas {
        inflate(delta);
    }

    let error = runtime_store(dir.path(), 1)
        .load_run(&run_id)
        .await
        .unwrap_err();
    assert_oversize(&error, "/deltas/");
}

#[tokio::test]
async fn a_huge_checkpoint_base_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    // Enough receipts for a base (at least 32).
    let run_id = started_run(&runtime_store(dir.path(), 4), "r", 40).await;
    let bases = run_files(dir.path(), "checkpoint");
    assert!(!bases.is_empty());
    for base in &bases {
        inflate(base);
    }

    let error = runtime_store(dir.path(), 4)
        .load_run(&run_id)
        .await
        .unwrap_err();
    assert_oversize(&error, "/checkpoint/");
}
