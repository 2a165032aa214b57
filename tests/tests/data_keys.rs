//! Per-run data keys and crypto-shredding: each run incarnation's payloads
//! are sealed with a data key of its own, wrapped by a key-encryption key
//! and kept in a key store apart from the data; forgetting the key makes the
//! run unreadable for good, even from a copy of the data taken before.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use memo_runtime::retention::RetentionSweeper;
use memo_runtime::runtime_store::{
    Commit, NewRun, ObjectStoreRuntimeStore, RuntimeStore, StatusChange,
};
use memo_runtime::seal::{Compression, DataKeys, Keyring, Seal};
use memo_runtime::testing::{memo_store as memo_suite, runtime_store as runs_suite};
use memo_runtime::{Error, Incarnation, MemoStore, RunId};
use memo_tests::fixtures::{Backend, run};
use memo_tests::pause::{Held, Pauses, wait_reached};

/// The key-encryption key of version 1.
fn kek_v1() -> Keyring {
    Keyring::new(1, [11; 32]).unwrap()
}

/// A seal with per-run data keys kept in `key_store`, wrapped by `kek`.
fn seal(key_store: &Arc<InMemory>, kek: Keyring) -> Seal {
    let keys = DataKeys::new(kek, key_store.clone(), "keys");
    Seal::default()
        .with_compression(Compression::zstd(Compression::DEFAULT_LEVEL, 0))
        .with_data_keys(keys)
}

/// The memo store and runtime store of `objects`, sealed by `seal`.
fn stores(objects: &Arc<InMemory>, seal: &Seal) -> (MemoStore, ObjectStoreRuntimeStore) {
    let memo = MemoStore::new(objects.clone(), "memo").with_seal(seal.clone());
    let runs = ObjectStoreRuntimeStore::new(objects.clone(), "runtime").with_seal(seal.clone());
    (memo, runs)
}

/// Every object of `store`, copied into a new store: a copy of the bucket
/// (or what versioning or a lifecycle rule keeps of it).
async fn copy_of(store: &InMemory) -> Arc<InMemory> {
    let copy = Arc::new(InMemory::new());
    let all: Vec<_> = store.list(None).try_collect().await.unwrap();
    for meta in all {
        let bytes = store
            .get(&meta.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        copy.put(&meta.location, PutPayload::from(bytes))
            .await
            .unwrap();
    }
    copy
}

/// Every object of `store` with its bytes.
async fn contents(store: &InMemory) -> Vec<(Path, Bytes)> {
    let mut all: Vec<_> = store.list(None).try_collect().await.unwrap();
    all.sort_by(|a, b| a.location.cmp(&b.location));
    let mut out = Vec::new();
    for meta in all {
        let bytes = store
            .get(&meta.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        out.push((meta.location, bytes));
    }
    out
}

/// Where the memo store at prefix `memo` keeps the entry `key` of a run
/// (whose id has no capitals), as `layout.rs` says.
fn entry_path(run: &RunId, incarnation: Incarnation, step: u32, key: &str) -> Path {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Path::from(format!("memo/memos/{run}/{incarnation}/{step}/{digest}"))
}

/// A run with an input, one memo entry and a completed status.
async fn finished_run(memo: &MemoStore, runs: &ObjectStoreRuntimeStore, run_id: &RunId) {
    let created = runs
        .create_run(NewRun {
            run_id: run_id.clone(),
            workflow: "wf".into(),
            input: Bytes::from_static(b"secret input"),
            created_at_ms: 1,
            workflow_version: None,
        })
        .await
        .unwrap();
    memo.memo_for(run_id, created.incarnation, 0)
        .put("reply", b"secret reply")
        .await
        .unwrap();
    runs.atomic_apply(run_id, Commit::status(StatusChange::start_attempt(1), 2))
        .await
        .unwrap();
    let done = StatusChange::Completed {
        output: Bytes::from_static(b"secret output"),
    };
    runs.atomic_apply(run_id, Commit::status(done, 3))
        .await
        .unwrap();
}

/// A [`finished_run`] whose terminal marker says it ended at 3 ms, for a
/// sweep to clear: its incarnation.
async fn swept_at_3(
    memo: &MemoStore,
    runs: &ObjectStoreRuntimeStore,
    run_id: &RunId,
) -> Incarnation {
    finished_run(memo, runs, run_id).await;
    let incarnation = runs.load_run(run_id).await.unwrap().unwrap().incarnation;
    memo.markers()
        .write(&memo_runtime::retention::TerminalMarker {
            run_id: run_id.clone(),
            terminal_at_ms: 3,
            incarnation,
        })
        .await
        .unwrap();
    incarnation
}

fn is_corrupt(result: Result<impl std::fmt::Debug, Error>, says: &str) {
    match result {
        Err(Error::Corrupt { reason, .. }) => assert!(reason.contains(says), "{reason}"),
        other => panic!("expected Corrupt ({says}), got {other:?}"),
    }
}

#[tokio::test]
async fn a_forgotten_run_can_never_be_read_again_even_from_a_copy_taken_before() {
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let seal = seal(&key_store, kek_v1());
    let (memo, runs) = stores(&objects, &seal);
    let (forgotten, kept) = (run("forgotten"), run("kept"));
    finished_run(&memo, &runs, &forgotten).await;
    finished_run(&memo, &runs, &kept).await;
    let incarnation = runs
        .load_run(&forgotten)
        .await
        .unwrap()
        .unwrap()
        .incarnation;
    // Standalone memos of the run id have a key of their own, forgotten too.
    memo.new_memo(&forgotten, 0)
        .put("k", b"standalone")
        .await
        .unwrap();
    let copy = copy_of(&objects).await;

    // Nothing stored holds a payload in the clear.
    for (path, bytes) in contents(&objects).await {
        assert!(
            !bytes.windows(6).any(|w| w == b"secret"),
            "{path} is in the clear"
        );
    }
    // The copy reads, with the same keys, before the run is forgotten.
    let (copy_memo, copy_runs) = stores(&copy, &seal);
    assert!(copy_runs.load_run(&forgotten).await.unwrap().is_some());

    let keys = seal.data_keys().unwrap();
    assert_eq!(keys.forget_run(&forgotten).await.unwrap(), 2);

    // The live store, a fresh process over it, and the copy taken before:
    // every object of the run is unreadable, each an error naming why (a
    // standalone entry a miss). (The
    // memo store that wrote the entries keeps their values in its entry
    // cache until the run is cleared, as `memoctl forget` and the sweeper
    // do; its runtime store reads the run again.)
    let fresh = seal_from_scratch(&key_store);
    let (fresh_memo, fresh_runs) = stores(&objects, &fresh);
    let (copy_fresh_memo, copy_fresh_runs) = stores(&copy, &fresh);
    let (cold_memo, _) = stores(&objects, &seal);
    for (memo, runs) in [
        (&cold_memo, &runs),
        (&fresh_memo, &fresh_runs),
        (&copy_memo, &copy_runs),
        (&copy_fresh_memo, &copy_fresh_runs),
    ] {
        is_corrupt(runs.load_run(&forgotten).await, "was forgotten");
        is_corrupt(
            memo.memo_for(&forgotten, incarnation, 0).get("reply").await,
            "was forgotten",
        );
        // A standalone entry of a forgotten key reads as a miss (its run was
        // cleared, see `DataKeys`, *Standalone runs*): unreadable all the same.
        assert_eq!(memo.new_memo(&forgotten, 0).get("k").await.unwrap(), None);
        // The other run is untouched.
        let other = runs.load_run(&kept).await.unwrap().unwrap();
        assert_eq!(&other.input[..], b"secret input");
    }
    // Nothing in the copy or the key store can open it: the key store no
    // longer names the run.
    let names: Vec<_> = key_store.list(None).try_collect().await.unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].location.as_ref().contains("kept"));
}

#[tokio::test]
async fn keys_kept_in_the_data_bucket_would_survive_in_a_copy_of_it() {
    // Why the key store must be apart: with the wrapped keys beside the
    // data, forgetting deletes them from the bucket but not from a copy of
    // it, and the key-encryption key still unwraps them there.
    let objects = Arc::new(InMemory::new());
    let keys = DataKeys::new(kek_v1(), objects.clone(), "keys");
    let seal = Seal::default().with_data_keys(keys.clone());
    let (memo, runs) = stores(&objects, &seal);
    let forgotten = run("forgotten");
    finished_run(&memo, &runs, &forgotten).await;
    let copy = copy_of(&objects).await;
    keys.forget_run(&forgotten).await.unwrap();
    let in_copy = DataKeys::new(kek_v1(), copy.clone(), "keys");
    let (_, copy_runs) = stores(&copy, &Seal::default().with_data_keys(in_copy));
    let read = copy_runs.load_run(&forgotten).await.unwrap().unwrap();
    assert_eq!(&read.input[..], b"secret input", "the copy still reads");
}

/// The seal of another process: the same key store and key-encryption
/// key, and an empty cache.
fn seal_from_scratch(key_store: &Arc<InMemory>) -> Seal {
    seal(key_store, kek_v1())
}

#[tokio::test]
async fn a_ciphertext_moved_between_runs_or_incarnations_is_corrupt() {
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let (memo, _) = stores(&objects, &seal(&key_store, kek_v1()));
    let (a, b) = (run("a"), run("b"));
    let first = Incarnation::from_u64(1);
    let second = Incarnation::from_u64(2);
    memo.memo_for(&a, first, 0).put("k", b"of a").await.unwrap();
    memo.memo_for(&b, first, 0).put("k", b"of b").await.unwrap();
    memo.memo_for(&a, second, 0)
        .put("k", b"of a, again")
        .await
        .unwrap();
    let entry = |run: &RunId, incarnation: Incarnation| entry_path(run, incarnation, 0, "k");
    let of_a = objects
        .get(&entry(&a, first))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(of_a[4], 3, "a frame that names its data key");
    for (run, incarnation) in [(&b, first), (&a, second)] {
        objects
            .put(&entry(run, incarnation), PutPayload::from(of_a.clone()))
            .await
            .unwrap();
        let fresh = MemoStore::new(objects.clone(), "memo").with_seal(seal(&key_store, kek_v1()));
        is_corrupt(
            fresh.memo_for(run, incarnation, 0).get("k").await,
            "does not authenticate for this path",
        );
    }
}

#[tokio::test]
async fn rotating_the_key_encryption_key_keeps_old_runs_readable_without_rewriting_them() {
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let (memo, runs) = stores(&objects, &seal(&key_store, kek_v1()));
    let old = run("old");
    finished_run(&memo, &runs, &old).await;
    let data_before = contents(&objects).await;

    // A ring without version 1 cannot unwrap the old run's key yet.
    let only_v2 = Keyring::new(2, [22; 32]).unwrap();
    let (_, runs_v2) = stores(&objects, &seal(&key_store, only_v2.clone()));
    is_corrupt(runs_v2.load_run(&old).await, "key version 1");

    // Version 2 joins the ring; rewrapping touches the key store only.
    let both = kek_v1().with_key(2, [22; 32]).unwrap();
    let rotated = seal(&key_store, both);
    let report = rotated.data_keys().unwrap().rewrap().await.unwrap();
    assert_eq!((report.rewrapped, report.current), (1, 0));
    assert_eq!(
        contents(&objects).await,
        data_before,
        "no data was rewritten"
    );
    let again = rotated.data_keys().unwrap().rewrap().await.unwrap();
    assert_eq!((again.rewrapped, again.current), (0, 1));

    // Version 1 destroyed: the old run still reads, and new runs write.
    let (memo_v2, runs_v2) = stores(&objects, &seal(&key_store, only_v2));
    let read = runs_v2.load_run(&old).await.unwrap().unwrap();
    assert_eq!(&read.input[..], b"secret input");
    let new = run("new");
    finished_run(&memo_v2, &runs_v2, &new).await;
    assert!(runs_v2.load_run(&new).await.unwrap().is_some());
}

#[tokio::test]
async fn the_sweeper_forgets_the_data_key_of_each_run_it_clears() {
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let seal = seal(&key_store, kek_v1());
    let (memo, runs) = stores(&objects, &seal);
    let (swept, standalone) = (run("swept"), run("standalone"));
    swept_at_3(&memo, &runs, &swept).await;
    memo.new_memo(&standalone, 0).put("k", b"v").await.unwrap();
    memo.markers()
        .write_standalone(&standalone, 3)
        .await
        .unwrap();
    let copy = copy_of(&objects).await;

    let sweeper = RetentionSweeper::builder(memo.clone(), Duration::from_secs(1))
        .runtime_store(Arc::new(runs) as _)
        .build();
    let report = sweeper.sweep_once(10_000).await.unwrap();
    assert_eq!(report.runs_cleared, 2, "{report:?}");
    assert!(
        key_store
            .list(None)
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .is_empty(),
        "every swept run's key is gone"
    );
    let (copy_memo, copy_runs) = stores(&copy, &seal_from_scratch(&key_store));
    is_corrupt(copy_runs.load_run(&swept).await, "was forgotten");
    // A standalone entry of a forgotten key is a miss (see `DataKeys`,
    // *Standalone runs*): nothing of it is read.
    assert_eq!(
        copy_memo.new_memo(&standalone, 0).get("k").await.unwrap(),
        None
    );
}

/// A read of a run that meets the sweep deleting it: the reader reads the
/// run's pointer (or a memo entry) just before the sweep deletes it, and
/// looks up the data key just after the sweep forgot it (a key store in
/// another bucket answers a round trip later). It reads what a read a
/// moment later does: no run, and a miss. Before, both were
/// `Error::Corrupt` ("the run was forgotten"), as for an object whose key
/// is gone while it stands, which stays corrupt (the test above).
#[tokio::test]
async fn a_read_racing_the_sweep_of_its_run_finds_it_gone_not_corrupt() {
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let (memo, runs) = stores(&objects, &seal(&key_store, kek_v1()));
    let swept = run("swept");
    let incarnation = swept_at_3(&memo, &runs, &swept).await;

    // Two readers in processes of their own, each held at its lookup of
    // the run's key: one loads the run, the other reads its memo entry.
    let reader = |held: Held| {
        let (paused, pause) = Pauses::new(key_store.clone(), held, Path::from("keys"));
        let keys = DataKeys::new(kek_v1(), Arc::new(paused), "keys");
        (
            stores(&objects, &Seal::default().with_data_keys(keys)),
            pause,
        )
    };
    let ((_, pointer_reader), pointer_pause) = reader(Held::Get);
    let ((entry_reader, _), entry_pause) = reader(Held::Get);
    let load = {
        let swept = swept.clone();
        tokio::spawn(async move { pointer_reader.load_run(&swept).await })
    };
    let get = {
        let swept = swept.clone();
        tokio::spawn(async move {
            entry_reader
                .memo_for(&swept, incarnation, 0)
                .get("reply")
                .await
        })
    };
    wait_reached(pointer_pause.reached, "the run load's key lookup").await;
    wait_reached(entry_pause.reached, "the entry read's key lookup").await;

    let sweeper = RetentionSweeper::builder(memo.clone(), Duration::from_secs(1))
        .runtime_store(Arc::new(runs) as _)
        .build();
    let report = sweeper.sweep_once(10_000).await.unwrap();
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    assert!(keys_of(&key_store, &swept).await.is_empty());

    pointer_pause.release.send(()).unwrap();
    entry_pause.release.send(()).unwrap();
    let loaded = load.await.unwrap();
    assert!(matches!(loaded, Ok(None)), "{loaded:?}");
    let got = get.await.unwrap();
    assert!(matches!(got, Ok(None)), "{got:?}");
}

#[tokio::test]
async fn data_sealed_with_a_store_keyring_or_plain_reads_as_before() {
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let ring = Keyring::new(1, [5; 32]).unwrap();
    let before = MemoStore::new(objects.clone(), "memo")
        .with_seal(Seal::default().with_encryption(ring.clone()));
    let r = run("r");
    before
        .new_memo(&r, 0)
        .put("old", b"sealed with the ring")
        .await
        .unwrap();
    let plain = MemoStore::new(objects.clone(), "memo").with_seal(Seal::plain());
    plain
        .new_memo(&r, 1)
        .put("older", b"in the clear")
        .await
        .unwrap();

    let keys = DataKeys::new(kek_v1(), key_store.clone(), "keys");
    let after = MemoStore::new(objects.clone(), "memo").with_seal(
        Seal::default()
            .with_encryption(ring)
            .with_data_keys(keys)
            .accepting_plaintext(),
    );
    let old = after.new_memo(&r, 0).get("old").await.unwrap().unwrap();
    assert_eq!(&old[..], b"sealed with the ring");
    let older = after.new_memo(&r, 1).get("older").await.unwrap().unwrap();
    assert_eq!(&older[..], b"in the clear");
    after.new_memo(&r, 2).put("new", b"v").await.unwrap();
    let new = entry_path(&r, Incarnation::STANDALONE, 2, "new");
    let framed = objects.get(&new).await.unwrap().bytes().await.unwrap();
    assert_eq!(framed[4], 3, "new writes use the run's data key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_with_data_keys_on_every_backend() {
    for backend in Backend::all() {
        let seal = seal(&Arc::new(InMemory::new()), kek_v1());
        memo_suite::run_suite(|| MemoStore::new(backend.open(), "memo").with_seal(seal.clone()))
            .await;
        runs_suite::run_object_store_suite(
            || backend.open(),
            |objects| ObjectStoreRuntimeStore::new(objects, "runs").with_seal(seal.clone()),
        )
        .await;
    }
}

#[tokio::test]
async fn a_blob_is_sealed_with_its_runs_data_key_and_forgetting_the_run_makes_it_unreadable() {
    use memo_runtime::blob::BlobWriter;
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let seal = seal(&key_store, kek_v1());
    let (memo, _) = stores(&objects, &seal);
    let run_id = run("blob");
    let value: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut writer = BlobWriter::new(&memo.new_memo(&run_id, 0))
        .with_chunk_size(64 << 10)
        .unwrap();
    writer.write(&value).await.unwrap();
    let blob = writer.finish().await.unwrap();

    // A fresh process with the same keys reads it back.
    let (fresh, _) = stores(&objects, &seal_from_scratch(&key_store));
    let read: Vec<Bytes> = blob.read(&fresh).try_collect().await.unwrap();
    assert_eq!(read.concat(), value);

    seal.data_keys().unwrap().forget_run(&run_id).await.unwrap();
    let (fresh, _) = stores(&objects, &seal_from_scratch(&key_store));
    let read: Result<Vec<Bytes>, Error> = blob.read(&fresh).try_collect().await;
    is_corrupt(read, "was forgotten");
}

/// An object store that, at the first create of `runtime/runs/<run>/run` (a
/// run pointer), first lets a rival process create the run: the wrapped
/// store's own pointer create then loses the race.
struct RivalCreatesFirst {
    inner: Arc<InMemory>,
    rival: std::sync::Mutex<Option<(ObjectStoreRuntimeStore, NewRun)>>,
}

impl std::fmt::Debug for RivalCreatesFirst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RivalCreatesFirst")
    }
}

impl std::fmt::Display for RivalCreatesFirst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RivalCreatesFirst({})", self.inner)
    }
}

#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for RivalCreatesFirst {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: memo_runtime::object_store::PutOptions,
    ) -> memo_runtime::object_store::Result<memo_runtime::object_store::PutResult> {
        let pointer = location.as_ref().starts_with("runtime/runs/")
            && location.filename() == Some("run")
            && location.parts().count() == 4;
        if pointer && matches!(opts.mode, memo_runtime::object_store::PutMode::Create) {
            let rival = self.rival.lock().unwrap().take();
            if let Some((store, run)) = rival {
                store.create_run(run).await.unwrap();
            }
        }
        self.inner.put_opts(location, payload, opts).await
    }

    memo_runtime::testing::forward_object_store!(self.inner => put_multipart_opts, get_opts,
        get_ranges, delete_stream, list, list_with_offset, list_with_delimiter, copy_opts,
        rename_opts);
}

/// The keys the key store holds for `run`.
async fn keys_of(key_store: &InMemory, run: &RunId) -> Vec<Path> {
    let folder = Path::from(format!("keys/runs/{run}"));
    key_store
        .list(Some(&folder))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .unwrap()
}

/// A creator whose pointer create loses to another process's made a data
/// key for its own incarnation (to seal the pointer it tried): no run ever
/// has that incarnation, so it is forgotten at once, and the key store
/// holds the winner's key alone.
#[tokio::test]
async fn a_creator_that_loses_the_pointer_race_forgets_the_key_it_made() {
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let raced = run("raced");
    let new_run = NewRun {
        run_id: raced.clone(),
        workflow: "wf".into(),
        input: Bytes::from_static(b"secret input"),
        created_at_ms: 1,
        workflow_version: None,
    };
    let rival = ObjectStoreRuntimeStore::new(objects.clone(), "runtime")
        .with_seal(seal_from_scratch(&key_store));
    let losing = Arc::new(RivalCreatesFirst {
        inner: objects.clone(),
        rival: std::sync::Mutex::new(Some((rival, new_run.clone()))),
    });
    let loser = ObjectStoreRuntimeStore::new(losing.clone(), "runtime")
        .with_seal(seal_from_scratch(&key_store));
    let created = loser.create_run(new_run).await.unwrap();
    assert!(
        losing.rival.lock().unwrap().is_none(),
        "the rival went first"
    );

    let keys = keys_of(&key_store, &raced).await;
    assert_eq!(
        keys,
        [Path::from(format!(
            "keys/runs/{raced}/{}",
            created.incarnation
        ))],
        "the winner's key alone"
    );
    // The run reads, from a fresh process.
    let (_, fresh) = stores(&objects, &seal_from_scratch(&key_store));
    let read = fresh.load_run(&raced).await.unwrap().unwrap();
    assert_eq!(read.incarnation, created.incarnation);
}

/// `testing::open_frame_with_keys` opens what a store with data keys wrote
/// (version-3 frames): a run pointer, a log entry's record and a memo
/// entry, each with its run's key fetched from the key store; a forgotten
/// run's frames are errors naming why. `open_frame` alone cannot.
#[tokio::test]
async fn open_frame_with_keys_opens_frames_sealed_with_a_runs_data_key() {
    use memo_runtime::testing::{open_frame, open_frame_with_keys};
    let (objects, key_store) = (Arc::new(InMemory::new()), Arc::new(InMemory::new()));
    let seal = seal(&key_store, kek_v1());
    let (memo, runs) = stores(&objects, &seal);
    let opened = run("opened");
    finished_run(&memo, &runs, &opened).await;
    let incarnation = runs.load_run(&opened).await.unwrap().unwrap().incarnation;
    let read = |path: Path| {
        let objects = objects.clone();
        async move { objects.get(&path).await.unwrap().bytes().await.unwrap() }
    };
    let fresh = seal_from_scratch(&key_store);

    let entry = entry_path(&opened, incarnation, 0, "reply");
    let framed = read(entry.clone()).await;
    assert_eq!(framed[4], 3, "a data-key frame");
    let payload = open_frame_with_keys("memo", &entry, framed.clone(), &fresh)
        .await
        .unwrap();
    assert!(payload.windows(12).any(|w| w == b"secret reply"));
    is_corrupt(
        open_frame(&entry, framed.clone(), &fresh),
        "was not fetched",
    );

    let pointer = Path::from(format!("runtime/runs/{opened}/run"));
    let payload = open_frame_with_keys("runtime", &pointer, read(pointer.clone()).await, &fresh)
        .await
        .unwrap();
    assert!(payload.windows(12).any(|w| w == b"secret input"));

    // Read under the wrong prefix, the entry lies in no run.
    is_corrupt(
        open_frame_with_keys("elsewhere", &entry, framed.clone(), &fresh).await,
        "lies in no run",
    );
    seal.data_keys().unwrap().forget_run(&opened).await.unwrap();
    is_corrupt(
        open_frame_with_keys("memo", &entry, framed, &seal_from_scratch(&key_store)).await,
        "was forgotten",
    );
}
