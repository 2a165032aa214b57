//! A local folder shared with other writers (issue 21): the store memo opens
//! for a `file://` URL never reads, writes, lists or deletes through a
//! symlink or a non-regular file, whatever another writer plants there. Each
//! test works on a real temporary folder, through the public API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::{
    Error, Incarnation, MemoStore, RunId,
    retention::{MARKER_PARTITION_MS, RetentionSweeper},
    store::{LocalFolder, store_from_url},
};

const DAY: u64 = 24 * MARKER_PARTITION_MS;
const NOW: u64 = 100 * DAY;
const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
const NO_OPTIONS: [(&str, &str); 0] = [];

/// A memo store over `root`, opened from its URL as a worker (or memoctl)
/// would: each call is a separate process's view of the folder.
fn open(root: &Path) -> MemoStore {
    let opened = store_from_url(&format!("file://{}", root.display()), NO_OPTIONS).unwrap();
    MemoStore::new(opened.store, "memo")
}

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

/// Every regular file below `folder`.
fn files_below(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                found.push(entry.path());
            }
        }
    }
    found
}

/// The one file a single `put` left below `folder`.
fn only_file_below(folder: &Path) -> PathBuf {
    let files = files_below(folder);
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

fn assert_refused(error: &Error, file: &Path, kind: &str) {
    match error {
        Error::Corrupt { reason, .. } => {
            assert!(reason.contains(kind), "{error}");
            assert!(reason.contains(&file.display().to_string()), "{error}");
        }
        other => panic!("expected a corrupt-object error naming {file:?}, got {other:?}"),
    }
}

/// The attack of issue 21: another writer of a shared folder writes an
/// expired marker for a made-up run and makes that run's memo and
/// step-output folders symlinks to folders elsewhere. The sweep must leave
/// every file there alone, report the run as not cleared, and still clear
/// the real expired run beside it.
#[tokio::test]
async fn a_sweep_never_deletes_through_a_planted_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let worker = open(&root);
    let real = run("real");
    worker.new_memo(&real, 0).put("k", b"v").await.unwrap();
    worker
        .markers()
        .write_standalone(&real, NOW - 30 * DAY)
        .await
        .unwrap();

    // The other writer plants what a sweep of a run named "ghost" would list:
    // `memos/ghost/<incarnation>/<step>/<file>`, outside the store.
    let attacker = open(&root);
    let ghost = run("ghost");
    attacker
        .markers()
        .write_standalone(&ghost, NOW - 30 * DAY)
        .await
        .unwrap();
    let incarnation = Incarnation::STANDALONE.to_string();
    let mut victims = Vec::new();
    for folder in ["memos", "step-outputs"] {
        let outside = dir.path().join(format!("precious-{folder}"));
        std::fs::create_dir_all(outside.join(&incarnation).join("0")).unwrap();
        let victim = outside.join(&incarnation).join("0").join("report.pdf");
        std::fs::write(&victim, "keep me").unwrap();
        victims.push(victim);
        let planted = root.join("memo").join(folder);
        std::fs::create_dir_all(&planted).unwrap();
        std::os::unix::fs::symlink(&outside, planted.join("ghost")).unwrap();
    }

    let sweeper = RetentionSweeper::builder(open(&root), RETENTION).build();
    let report = sweeper.sweep_once(NOW).await.unwrap();

    for victim in &victims {
        assert!(
            victim.exists(),
            "the sweep deleted {victim:?} through a symlink"
        );
    }
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    assert_eq!(report.failures.len(), 1, "{report:?}");
    let failure = &report.failures[0];
    assert_eq!(failure.run_id, ghost);
    assert!(failure.message.contains("symlink"), "{}", failure.message);
    assert!(failure.message.contains("ghost"), "{}", failure.message);
    assert_eq!(open(&root).new_memo(&real, 0).get("k").await.unwrap(), None);
    // The marker stays, so every pass reports the planted folder again.
    let kept = open(&root).markers().list().await.unwrap();
    assert_eq!(kept.iter().map(|m| &m.run_id).collect::<Vec<_>>(), [&ghost]);
}

/// A symlink at an entry's own path is refused as corrupt, naming the file,
/// even when it points at a valid entry: a value is never read from outside.
#[tokio::test]
async fn an_entry_that_is_a_symlink_is_refused_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let id = run("r");
    open(&root)
        .new_memo(&id, 0)
        .put("k", b"value")
        .await
        .unwrap();
    let entry = only_file_below(&root.join("memo").join("memos"));
    let outside = dir.path().join("outside");
    std::fs::rename(&entry, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &entry).unwrap();

    let store = open(&root);
    let error = store.new_memo(&id, 0).get("k").await.unwrap_err();
    assert_refused(&error, &entry, "a symlink");
    let error = store.new_memo(&id, 0).put("k", b"other").await.unwrap_err();
    assert_refused(&error, &entry, "a symlink");
    assert_eq!(std::fs::read(&outside).unwrap().len(), 5 + 18);
}

/// A FIFO at an entry's path makes a read fail at once instead of blocking
/// the reader for ever (the bound is only a guard against a hang).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_at_an_entry_path_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let id = run("r");
    open(&root)
        .new_memo(&id, 0)
        .put("k", b"value")
        .await
        .unwrap();
    let entry = only_file_below(&root.join("memo").join("memos"));
    std::fs::remove_file(&entry).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&entry)
        .status()
        .unwrap();
    assert!(made.success());

    let memo = open(&root).new_memo(&id, 0);
    let read = tokio::time::timeout(Duration::from_secs(30), memo.get("k")).await;
    let Ok(read) = read else {
        // Release the blocked reader so the test ends rather than hangs.
        let _ = std::fs::OpenOptions::new().write(true).open(&entry);
        panic!("reading a FIFO blocked");
    };
    assert_refused(&read.unwrap_err(), &entry, "a FIFO");
    let cleared = open(&root).clear_memos_for_run(&id).await;
    assert!(cleared.is_err(), "{cleared:?}");
    assert!(entry.exists());
}

/// The root the user gives may itself be a symlink (a data disk linked into
/// place); a folder below it may not.
#[tokio::test]
async fn the_root_may_be_a_symlink_but_no_folder_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let root = dir.path().join("linked-root");
    std::os::unix::fs::symlink(&disk, &root).unwrap();
    let id = run("r");
    let store = open(&root);
    store.new_memo(&id, 0).put("k", b"v").await.unwrap();
    assert_eq!(
        open(&root)
            .new_memo(&id, 0)
            .get("k")
            .await
            .unwrap()
            .unwrap(),
        "v"
    );
    assert_eq!(open(&root).clear_memos_for_run(&id).await.unwrap(), 1);

    // The same folder below the root, moved away and linked back.
    let memos = disk.join("memo").join("memos");
    let moved = dir.path().join("moved-memos");
    store.new_memo(&id, 1).put("k", b"v").await.unwrap();
    std::fs::rename(&memos, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &memos).unwrap();
    let error = open(&root).new_memo(&id, 1).get("k").await.unwrap_err();
    assert_refused(&error, &memos, "a symlink");
    let error = open(&root)
        .new_memo(&id, 2)
        .put("k", b"v")
        .await
        .unwrap_err();
    assert_refused(&error, &memos, "a symlink");
    assert!(open(&root).clear_memos_for_run(&id).await.is_err());
    assert_eq!(files_below(&moved).len(), 1);
}

/// The store on its own: listings report a symlinked folder or file as an
/// error item and go on beside it, never into it; deletes refuse it.
#[tokio::test]
async fn listings_never_descend_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    std::fs::write(root.join("a").join("mine"), "m").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("a").join("linked")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), root.join("a").join("file")).unwrap();
    let store = LocalFolder::new(&root).unwrap();

    let listed: Vec<_> = store.list(Some(&"a".into())).collect().await;
    let found: Vec<_> = listed.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(found.len(), 1, "{listed:?}");
    assert_eq!(found[0].location.as_ref(), "a/mine");
    assert_eq!(
        listed.iter().filter(|r| r.is_err()).count(),
        2,
        "{listed:?}"
    );
    assert!(store.list_with_delimiter(Some(&"a".into())).await.is_err());
    assert!(store.delete(&"a/linked/secret".into()).await.is_err());
    assert!(store.get(&"a/linked/secret".into()).await.is_err());
    assert!(outside.join("secret").exists());
}

/// Files this process has open.
fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// A listing opens each folder only when it reads it, so a run of thousands
/// of steps (a folder each) never runs the process out of file handles.
#[tokio::test]
async fn a_listing_of_many_folders_holds_few_files_open() {
    let dir = tempfile::tempdir().unwrap();
    for step in 0..2000 {
        let folder = dir.path().join("run").join(step.to_string());
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("entry"), "v").unwrap();
    }
    let store = LocalFolder::new(dir.path()).unwrap();
    let before = open_files();
    let mut listed = store.list(Some(&"run".into()));
    // The first item comes with a first batch of names read: half the
    // folders are read, the other half found and waiting.
    listed.next().await.unwrap().unwrap();
    let during = open_files();
    assert!(
        during < before + 100,
        "{before} files open before, {during} during"
    );
    let rest: Vec<_> = listed.collect().await;
    assert_eq!(rest.len() + 1, 2000);
    assert!(rest.iter().all(|item| item.is_ok()));
}
