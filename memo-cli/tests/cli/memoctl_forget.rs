//! `memoctl` run as a process against encrypted local folders that real
//! runs filled: `show` reads a store encrypted with a key file (and fails,
//! naming why, without it), and `forget` makes an ended run unreadable for
//! good, even from a copy of the folder taken before.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use memo_runtime::MemoStore;
use memo_runtime::clock::SystemClock;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RuntimeStore as _};
use memo_runtime::seal::{
    DATA_KEY_STORE_OPTION, ENCRYPTION_KEY_FILE_OPTION, KEY_ENCRYPTION_KEY_FILE_OPTION,
};
use memo_runtime::store::{StoreAndPrefix, store_from_url};
use memo_runtime::workflow::{Runtime, Workflow};
use support::{failed, memoctl, ok, ok_json, run};

const NO_OPTIONS: &[(&str, String)] = &[];

/// A runtime over `opened`'s store, sealed as its URL options say, laid out
/// as the example workers lay it out.
fn sealed_runtime(opened: &StoreAndPrefix) -> Runtime {
    Runtime::builder()
        .memo_store(
            MemoStore::new(Arc::clone(&opened.store), "memo").with_seal(opened.seal.clone()),
        )
        .runtime_store(Arc::new(
            ObjectStoreRuntimeStore::new(Arc::clone(&opened.store), "runtime")
                .with_seal(opened.seal.clone()),
        ))
        .clock(Arc::new(SystemClock))
        .build()
        .expect("a runtime")
}

/// `order-1` completed and `Ticket-42` waiting for its approval.
async fn fill(runtime: &Runtime) {
    let orders = Workflow::new("orders", support::orders);
    runtime
        .run(&run("order-1"), &"order-1".to_string(), &orders)
        .await
        .expect("order-1 completes");
    let approval = Workflow::new("approval", support::approval);
    runtime
        .run(&run("Ticket-42"), &"refund".to_string(), &approval)
        .await
        .expect_err("Ticket-42 waits for its approval");
}

fn key_file(dir: &Path, name: &str, byte: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("1 {}\n", byte.repeat(32))).unwrap();
    path.display().to_string()
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Whether any file under `dir` holds `needle`.
fn any_file_holds(dir: &Path, needle: &[u8]) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            any_file_holds(&entry.path(), needle)
        } else {
            let bytes = std::fs::read(entry.path()).unwrap();
            bytes.windows(needle.len()).any(|w| w == needle)
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn show_reads_a_store_encrypted_with_a_key_file_and_names_the_missing_key_without_it() {
    let (data, keys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = format!("file://{}", data.path().display());
    let options = [(
        ENCRYPTION_KEY_FILE_OPTION,
        key_file(keys.path(), "memo.key", "ab"),
    )];
    let opened = store_from_url(&url, options.iter().cloned()).unwrap();
    fill(&sealed_runtime(&opened)).await;
    assert!(!any_file_holds(data.path(), b"reserved order-1"));

    let shown = ok_json(&memoctl(&url, &options, &["show", "order-1", "--json"]));
    assert_eq!(shown["run"]["status"], "Completed", "{shown}");
    let runs = ok(&memoctl(&url, &options, &["runs"]));
    assert!(runs.contains("Ticket-42"), "{runs}");

    let stderr = failed(&memoctl(&url, NO_OPTIONS, &["show", "order-1"]));
    assert!(stderr.contains("no encryption key"), "{stderr}");
    let wrong = [(
        ENCRYPTION_KEY_FILE_OPTION,
        key_file(keys.path(), "other.key", "cd"),
    )];
    let stderr = failed(&memoctl(&url, &wrong, &["show", "order-1"]));
    assert!(stderr.contains("does not authenticate"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn forget_makes_an_ended_run_unreadable_even_from_a_copy_of_the_store_taken_before() {
    let (data, keys, secrets) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let url = format!("file://{}", data.path().display());
    let options = [
        (
            DATA_KEY_STORE_OPTION,
            format!("file://{}", keys.path().display()),
        ),
        (
            KEY_ENCRYPTION_KEY_FILE_OPTION,
            key_file(secrets.path(), "kek", "ab"),
        ),
    ];
    let opened = store_from_url(&url, options.iter().cloned()).unwrap();
    fill(&sealed_runtime(&opened)).await;
    assert!(!any_file_holds(data.path(), b"reserved order-1"));
    let runs = ObjectStoreRuntimeStore::new(Arc::clone(&opened.store), "runtime")
        .with_seal(opened.seal.clone());
    let incarnation = runs
        .load_run(&run("order-1"))
        .await
        .unwrap()
        .unwrap()
        .incarnation;
    let before = tempfile::tempdir().unwrap();
    copy_folder(data.path(), before.path());
    let copy_url = format!("file://{}", before.path().display());
    let shown = ok_json(&memoctl(
        &copy_url,
        &options,
        &["show", "order-1", "--json"],
    ));
    assert_eq!(shown["run"]["status"], "Completed", "the copy reads before");

    // An open run is refused, and a store without data keys cannot forget.
    let stderr = failed(&memoctl(&url, &options, &["forget", "Ticket-42"]));
    assert!(stderr.contains("cancel it first"), "{stderr}");
    let stderr = failed(&memoctl(&url, NO_OPTIONS, &["forget", "order-1"]));
    assert!(stderr.contains("no per-run data keys"), "{stderr}");

    let said = ok_json(&memoctl(&url, &options, &["forget", "order-1", "--json"]));
    assert_eq!(said["forgotten"], true, "{said}");
    assert_eq!(said["runtime_run_deleted"], true, "{said}");

    // Gone from the store, and unreadable in the copy taken before.
    let stderr = failed(&memoctl(&url, &options, &["show", "order-1"]));
    assert!(stderr.contains("not found"), "{stderr}");
    let stderr = failed(&memoctl(&copy_url, &options, &["show", "order-1"]));
    assert!(stderr.contains("was forgotten"), "{stderr}");
    // The other run still reads, here and in the copy.
    for at in [&url, &copy_url] {
        let shown = ok_json(&memoctl(at, &options, &["show", "Ticket-42", "--json"]));
        assert_eq!(shown["run"]["status"], "Running", "{shown}");
    }
    // Its memo entries too: the copy's `reserve` step entry is unreadable.
    let copy = store_from_url(&copy_url, options.iter().cloned()).unwrap();
    let memo = MemoStore::new(Arc::clone(&copy.store), "memo").with_seal(copy.seal.clone());
    let stock = memo
        .memo_for(&run("order-1"), incarnation, 0)
        .get("stock")
        .await;
    match stock {
        Err(e) => assert!(e.to_string().contains("was forgotten"), "{e}"),
        Ok(found) => panic!("expected the entry unreadable, got {found:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rewrap_moves_every_data_key_to_the_new_key_encryption_key_without_touching_the_data() {
    let (data, keys, secrets) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let url = format!("file://{}", data.path().display());
    let key_store = (
        DATA_KEY_STORE_OPTION,
        format!("file://{}", keys.path().display()),
    );
    let v1 = [
        key_store.clone(),
        (
            KEY_ENCRYPTION_KEY_FILE_OPTION,
            key_file(secrets.path(), "kek", "ab"),
        ),
    ];
    let opened = store_from_url(&url, v1.iter().cloned()).unwrap();
    fill(&sealed_runtime(&opened)).await;
    let data_before = tempfile::tempdir().unwrap();
    copy_folder(data.path(), data_before.path());

    let both = secrets.path().join("kek-1-and-2");
    std::fs::write(
        &both,
        format!("1 {}\n2 {}\n", "ab".repeat(32), "cd".repeat(32)),
    )
    .unwrap();
    let only_v2 = secrets.path().join("kek-2");
    std::fs::write(&only_v2, format!("2 {}\n", "cd".repeat(32))).unwrap();
    let with = |file: &Path| {
        [
            key_store.clone(),
            (KEY_ENCRYPTION_KEY_FILE_OPTION, file.display().to_string()),
        ]
    };
    // Before the rewrap, version 2 alone cannot read the runs.
    let stderr = failed(&memoctl(&url, &with(&only_v2), &["show", "order-1"]));
    assert!(stderr.contains("key version 1"), "{stderr}");
    // Version 2 staged (the first step of a rotation across processes):
    // it is not the current version, so there is nothing to rewrap yet.
    let staged = secrets.path().join("kek-1-and-2-staged");
    std::fs::write(
        &staged,
        format!("1 {}\n2 {} staged\n", "ab".repeat(32), "cd".repeat(32)),
    )
    .unwrap();
    let said = ok_json(&memoctl(&url, &with(&staged), &["rewrap", "--json"]));
    assert_eq!(said["rewrapped"], 0, "{said}");
    assert!(said["already_current"].as_u64().unwrap() >= 2, "{said}");

    let keys = ok_json(&memoctl(&url, &with(&both), &["keys", "--json"]));
    let wrapped_by_v1 = keys["data_keys_by_kek_version"]["1"].as_u64().unwrap();
    assert!(wrapped_by_v1 >= 2, "{keys}");
    assert!(keys["data_key_sealed"].as_u64().unwrap() > 0, "{keys}");
    assert_eq!(keys["by_key_version"], serde_json::json!({}), "{keys}");
    // Every value is encrypted; the markers and hints memo never encrypts
    // are counted apart, so that "no plaintext" can be waited for.
    assert_eq!(keys["plaintext"], 0, "{keys}");
    assert!(keys["never_sealed"].as_u64().unwrap() > 0, "{keys}");

    let said = ok_json(&memoctl(&url, &with(&both), &["rewrap", "--json"]));
    assert!(said["rewrapped"].as_u64().unwrap() >= 2, "{said}");
    let keys = ok_json(&memoctl(&url, &with(&both), &["keys", "--json"]));
    assert_eq!(
        keys["data_keys_by_kek_version"],
        serde_json::json!({ "2": wrapped_by_v1 }),
        "{keys}"
    );
    assert_eq!(said["already_current"], 0, "{said}");
    assert_eq!(said["written_meanwhile"], 0, "{said}");
    assert!(
        same_files(data_before.path(), data.path()),
        "no data was rewritten"
    );

    // Version 1 removed from the key file: every run still reads.
    for run in ["order-1", "Ticket-42"] {
        let shown = ok_json(&memoctl(&url, &with(&only_v2), &["show", run, "--json"]));
        assert_eq!(shown["run"]["run_id"], run, "{shown}");
    }
}

/// Whether the two folders hold the same files with the same bytes.
fn same_files(a: &Path, b: &Path) -> bool {
    fn files(dir: &Path, under: &Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                files(&entry.path(), under, out);
            } else {
                let name = entry.path().strip_prefix(under).unwrap().to_path_buf();
                out.push((name, std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    let (mut x, mut y) = (Vec::new(), Vec::new());
    files(a, a, &mut x);
    files(b, b, &mut y);
    x.sort();
    y.sort();
    x == y
}
