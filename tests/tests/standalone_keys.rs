//! Standalone memos on a store with per-run data keys, used by several
//! processes while one of them clears the run and forgets its key (issue
//! 20's survey, issue 26 item 2).
//!
//! Every standalone use of a run id shares one key name. A process that
//! holds the key in its cache when another process forgets it (a sweeper in
//! every worker clears expired standalone runs; an operator forgets runs)
//! must not then write what no one else can read: not sealed with the
//! forgotten key ("the data key ... is not in the key store"), nor with the
//! old key under a new one ("does not authenticate"), either of which
//! poisoned the key for good, since a put finds the entry there and cannot
//! read it. Each test stages processes as separate `MemoStore`s over
//! separate store instances and separate `DataKeys` (each its own key
//! cache), over one data store and one key store; after the forget, every
//! read is the committed value or a miss, never an error, and the key
//! works again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{
    GetOptions, GetResult, ObjectMeta, ObjectStore, ObjectStoreExt, PutOptions, PutPayload,
    PutResult,
};
use memo_runtime::seal::{Compression, DataKeys, Keyring, Seal};
use memo_runtime::testing::forward_object_store;
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::{Error, Incarnation, MemoStore, RunId};
use memo_tests::fixtures::{Backend, run};
use memo_tests::pause::{Held, Pauses, wait_reached};
use tokio::sync::oneshot;

const KEY: &str = "quote";

/// One process: a memo store over its own instance of `data`, sealed with
/// data keys of its own (its own cache of unwrapped keys) over `keys`.
fn process(data: Arc<dyn ObjectStore>, keys: &Backend) -> MemoStore {
    let kek = Keyring::new(1, [11; 32]).unwrap();
    let data_keys = DataKeys::new(kek, keys.open(), "keys");
    MemoStore::new(data, "memo").with_seal(
        Seal::default()
            .with_compression(Compression::zstd(Compression::DEFAULT_LEVEL, 0))
            .with_data_keys(data_keys),
    )
}

/// What a sweep of a standalone run's marker (or an operator) does: clear
/// its entries, then forget its key.
async fn clear_and_forget(store: &MemoStore, run_id: &RunId) {
    store.clear_memos_for_run(run_id).await.unwrap();
    let keys = store.seal().data_keys().unwrap();
    keys.forget_incarnation(run_id, Incarnation::STANDALONE)
        .await
        .unwrap();
}

/// The value `store` reads for `key` of the standalone run: a value or a
/// miss, never an error.
async fn read(store: &MemoStore, run_id: &RunId, key: &str, who: &str) -> Option<Bytes> {
    match store.new_memo(run_id, 0).get(key).await {
        Ok(value) => value,
        Err(error) => panic!("{who} reads {key:?}: {error}"),
    }
}

async fn put(store: &MemoStore, run_id: &RunId, key: &str, value: &str, who: &str) -> Bytes {
    match store.new_memo(run_id, 0).put(key, value).await {
        Ok(committed) => committed,
        Err(error) => panic!("{who} puts {key:?}: {error}"),
    }
}

/// The stored entry of `key` in `store`'s standalone run.
fn entry(run_id: &RunId, key: &str) -> Path {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Path::from(format!("memo/memos/{run_id}/0000000000000000/0/{digest}"))
}

#[tokio::test]
async fn a_process_that_cached_a_standalone_key_writes_after_a_forget_what_every_process_reads() {
    for data in Backend::all() {
        let name = data.name();
        let keys = Backend::in_memory();
        let run_id = run("standalone-quote");
        let (a, b, c) = (
            process(data.open(), &keys),
            process(data.open(), &keys),
            process(data.open(), &keys),
        );
        // A computes the value: it holds the run's key from then on.
        assert_eq!(&put(&a, &run_id, KEY, "a1", "A").await[..], b"a1", "{name}");
        assert_eq!(
            read(&b, &run_id, KEY, "B").await.as_deref(),
            Some(&b"a1"[..])
        );

        // B's sweep clears the run and forgets its key.
        clear_and_forget(&b, &run_id).await;

        // A uses the run again: a miss, and a new value.
        assert_eq!(read(&a, &run_id, KEY, "A").await, None, "{name}");
        assert_eq!(&put(&a, &run_id, KEY, "a2", "A").await[..], b"a2", "{name}");
        for (store, who) in [(&a, "A"), (&b, "B"), (&c, "C")] {
            assert_eq!(
                read(store, &run_id, KEY, who).await.as_deref(),
                Some(&b"a2"[..]),
                "{name}: {who}"
            );
        }
    }
}

#[tokio::test]
async fn a_process_that_cached_a_standalone_key_reads_and_writes_under_the_key_made_again() {
    for data in Backend::all() {
        let name = data.name();
        let keys = Backend::in_memory();
        let run_id = run("standalone-remade");
        let (a, b, c) = (
            process(data.open(), &keys),
            process(data.open(), &keys),
            process(data.open(), &keys),
        );
        put(&a, &run_id, KEY, "a1", "A").await;
        clear_and_forget(&b, &run_id).await;
        // C uses the run first after the forget: it makes the key again.
        put(&c, &run_id, "other", "c1", "C").await;

        // A, with the forgotten key in its cache, reads what C wrote and
        // writes what B and C read.
        assert_eq!(
            read(&a, &run_id, "other", "A").await.as_deref(),
            Some(&b"c1"[..]),
            "{name}"
        );
        assert_eq!(read(&a, &run_id, KEY, "A").await, None, "{name}");
        put(&a, &run_id, KEY, "a2", "A").await;
        for (store, who) in [(&a, "A"), (&b, "B"), (&c, "C")] {
            assert_eq!(
                read(store, &run_id, KEY, who).await.as_deref(),
                Some(&b"a2"[..]),
                "{name}: {who}"
            );
        }
    }
}

/// A put that fetched the run's key, then stalled before its entry landed
/// while another process cleared the run and forgot the key: its entry is
/// sealed with a forgotten generation. Every process reads it as a miss
/// (its run was cleared), and the next put replaces it; the key is never
/// poisoned. `made_again`: the key was made again (by a use of another
/// key) before the stale entry landed.
async fn a_stale_entry(made_again: bool) {
    for data in Backend::all() {
        let name = format!("{} (key made again: {made_again})", data.name());
        let keys = Backend::in_memory();
        let run_id = run("standalone-stale");
        let (paused, pause) = Pauses::new(data.open(), Held::Put, entry(&run_id, KEY));
        let a = process(Arc::new(paused), &keys);
        let (b, c) = (process(data.open(), &keys), process(data.open(), &keys));
        put(&b, &run_id, "other", "b0", "B").await;

        let a_put = {
            let (a, run_id) = (a.clone(), run_id.clone());
            tokio::spawn(async move { a.new_memo(&run_id, 0).put(KEY, "a1").await })
        };
        wait_reached(pause.reached, "pause").await;
        clear_and_forget(&b, &run_id).await;
        if made_again {
            put(&c, &run_id, "other", "c1", "C").await;
        }
        pause.release.send(()).unwrap();
        // A's own put committed, as far as A can tell.
        assert_eq!(&a_put.await.unwrap().unwrap()[..], b"a1", "{name}");

        // Every other process reads the entry as a miss, never an error.
        assert_eq!(read(&b, &run_id, KEY, "B").await, None, "{name}");
        assert_eq!(read(&c, &run_id, KEY, "C").await, None, "{name}");
        // The next put replaces it; every process reads the new value, and
        // the key is write-once again.
        assert_eq!(&put(&b, &run_id, KEY, "b1", "B").await[..], b"b1", "{name}");
        for (store, who) in [(&a, "A"), (&b, "B"), (&c, "C")] {
            assert_eq!(
                read(store, &run_id, KEY, who).await.as_deref(),
                Some(&b"b1"[..]),
                "{name}: {who}"
            );
        }
        assert_eq!(&put(&c, &run_id, KEY, "c2", "C").await[..], b"b1", "{name}");
        assert_eq!(&put(&a, &run_id, KEY, "a2", "A").await[..], b"b1", "{name}");
    }
}

#[tokio::test]
async fn an_entry_sealed_with_a_forgotten_key_reads_as_a_miss_and_a_put_replaces_it() {
    a_stale_entry(false).await;
}

#[tokio::test]
async fn an_entry_sealed_with_a_key_made_again_since_reads_as_a_miss_and_a_put_replaces_it() {
    a_stale_entry(true).await;
}

#[tokio::test]
async fn a_damaged_entry_of_the_current_key_is_still_corrupt_naming_its_path() {
    for data in Backend::all() {
        let name = data.name();
        let keys = Backend::in_memory();
        let run_id = run("standalone-damaged");
        let (a, b) = (process(data.open(), &keys), process(data.open(), &keys));
        put(&a, &run_id, KEY, "a1", "A").await;
        clear_and_forget(&b, &run_id).await;
        put(&a, &run_id, KEY, "a2", "A").await;

        // A bit of the ciphertext flipped, the checksum mended: the frame
        // names the key the store holds, and does not authenticate.
        let path = entry(&run_id, KEY);
        let mut framed = data
            .objects()
            .get(&path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec();
        let end = framed.len() - 4;
        framed[end - 20] ^= 1;
        let crc = crc32fast::hash(&framed[..end]);
        framed[end..].copy_from_slice(&crc.to_le_bytes());
        data.objects()
            .put(&path, PutPayload::from(framed))
            .await
            .unwrap();
        for (store, who) in [(&a, "A"), (&b, "B")] {
            match store.new_memo(&run_id, 0).get(KEY).await {
                Err(Error::Corrupt { path: at, reason }) => {
                    assert_eq!(at, path.to_string(), "{name}: {who}");
                    assert!(
                        reason.contains("does not authenticate"),
                        "{name}: {who}: {reason}"
                    );
                }
                other => panic!("{name}: {who} read {other:?}, not a corrupt entry"),
            }
            assert!(
                store.new_memo(&run_id, 0).put(KEY, "again").await.is_err(),
                "{name}: {who}: a put over a damaged entry must not replace it"
            );
        }
    }
}

/// A store that holds the first write (a put or a delete) under `folder`
/// made after a read of `entry` completed: a process that has just read the
/// entry there, stopped before it acts on what it read.
struct HoldsAfterRead {
    inner: Arc<dyn ObjectStore>,
    folder: Path,
    entry: Path,
    read: Arc<AtomicBool>,
    gate: Arc<Mutex<Option<Gate>>>,
}

type Gate = (oneshot::Sender<()>, oneshot::Receiver<()>);

/// Holds a write of `location` until the test lets it go, if `entry` was
/// read, the write is under `folder` and none was held before.
async fn hold(read: &AtomicBool, folder: &Path, gate: &Mutex<Option<Gate>>, location: &Path) {
    if !read.load(Ordering::SeqCst) || !location.prefix_matches(folder) {
        return;
    }
    let gate = gate.lock().unwrap().take();
    if let Some((reached, release)) = gate {
        let _ = reached.send(());
        let _ = release.await;
    }
}

impl HoldsAfterRead {
    /// The store, and the test's side: told when the write is held, and
    /// what lets it go.
    fn new(
        inner: Arc<dyn ObjectStore>,
        folder: Path,
        entry: Path,
    ) -> (HoldsAfterRead, oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        let store = HoldsAfterRead {
            inner,
            folder,
            entry,
            read: Arc::new(AtomicBool::new(false)),
            gate: Arc::new(Mutex::new(Some((reached_tx, release_rx)))),
        };
        (store, reached, release)
    }
}

impl std::fmt::Debug for HoldsAfterRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HoldsAfterRead({})", self.entry)
    }
}

impl std::fmt::Display for HoldsAfterRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

#[async_trait::async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for HoldsAfterRead {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> memo_runtime::object_store::Result<PutResult> {
        hold(&self.read, &self.folder, &self.gate, location).await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> memo_runtime::object_store::Result<GetResult> {
        let got = self.inner.get_opts(location, options).await;
        if *location == self.entry {
            self.read.store(true, Ordering::SeqCst);
        }
        got
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, memo_runtime::object_store::Result<Path>>,
    ) -> BoxStream<'static, memo_runtime::object_store::Result<Path>> {
        let (inner, gate) = (self.inner.clone(), self.gate.clone());
        let (read, folder) = (self.read.clone(), self.folder.clone());
        locations
            .then(move |location| {
                let (inner, gate) = (inner.clone(), gate.clone());
                let (read, folder) = (read.clone(), folder.clone());
                async move {
                    let location = location?;
                    hold(&read, &folder, &gate, &location).await;
                    let one = futures::stream::once(async { Ok(location) }).boxed();
                    inner.delete_stream(one).next().await.expect("one result")
                }
            })
            .boxed()
    }

    fn list(
        &self,
        prefix: Option<&Path>,
    ) -> BoxStream<'static, memo_runtime::object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    forward_object_store!(self.inner => put_multipart_opts, get_ranges,
        list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

/// Two processes put the same key of a standalone run at once, and both
/// find there an entry sealed with a generation of its key that was
/// forgotten since (a put that raced a clear and forget). B reads the
/// entry and stops before it writes; C puts all the way; then B goes on.
/// One value commits, and both puts and every process see it. A put used
/// to replace such an entry, which on a local folder (no conditional
/// update) is a delete then a create: B's delete removed C's committed
/// value and B's create committed its own, so B and C each saw their own
/// value (this test failed on the local folder so: "b1" against "c1").
#[tokio::test]
async fn two_puts_that_meet_a_cleared_runs_entry_at_once_commit_one_value() {
    for data in Backend::all() {
        let name = data.name();
        let keys = Backend::in_memory();
        let run_id = run("standalone-racing-puts");
        let at = entry(&run_id, KEY);

        // A's put fetches the key, stalls, and lands after a clear and forget.
        let (paused, pause) = Pauses::new(data.open(), Held::Put, at.clone());
        let a = process(Arc::new(paused), &keys);
        let c = process(data.open(), &keys);
        put(&c, &run_id, "other", "c0", "C").await;
        let a_put = {
            let (a, run_id) = (a.clone(), run_id.clone());
            tokio::spawn(async move { a.new_memo(&run_id, 0).put(KEY, "a1").await })
        };
        wait_reached(pause.reached, "pause").await;
        clear_and_forget(&c, &run_id).await;
        pause.release.send(()).unwrap();
        assert_eq!(&a_put.await.unwrap().unwrap()[..], b"a1", "{name}");
        assert_eq!(read(&c, &run_id, KEY, "C").await, None, "{name}");

        let folder = Path::from(format!("memo/memos/{run_id}/0000000000000000/0"));
        let (holding, reached, release) = HoldsAfterRead::new(data.open(), folder, at.clone());
        let b = process(Arc::new(holding), &keys);
        let b_put = {
            let (b, run_id) = (b.clone(), run_id.clone());
            tokio::spawn(async move { b.new_memo(&run_id, 0).put(KEY, "b1").await })
        };
        wait_reached(reached, "B's put, after its read").await;
        let c_saw = put(&c, &run_id, KEY, "c1", "C").await;
        release.send(()).unwrap();
        let b_saw = b_put.await.unwrap().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&b_saw),
            String::from_utf8_lossy(&c_saw),
            "{name}: two puts of one key committed different values"
        );
        for (store, who) in [(&a, "A"), (&b, "B"), (&c, "C")] {
            assert_eq!(
                read(store, &run_id, KEY, who).await.as_deref(),
                Some(&c_saw[..]),
                "{name}: {who}"
            );
        }
    }
}

/// What reading a standalone key's entry and writing one cost in requests
/// of the key store, against a workflow run's: a standalone put reads its
/// key once (the generation the store holds), a workflow run's costs
/// nothing once its key is cached.
#[tokio::test]
async fn a_standalone_put_reads_its_key_once_and_a_workflow_runs_put_reads_nothing() {
    let key_store = Arc::new(CountingStore::new(
        memo_runtime::object_store::memory::InMemory::new(),
    ));
    let kek = Keyring::new(1, [11; 32]).unwrap();
    let keys = DataKeys::new(kek, key_store.clone(), "keys");
    let store = MemoStore::new(
        Arc::new(memo_runtime::object_store::memory::InMemory::new()),
        "memo",
    )
    .with_seal(Seal::default().with_data_keys(keys));
    let run_id = run("costs");
    let workflow = store.memo_for(&run_id, Incarnation::from_u64(7), 0);
    let standalone = store.new_memo(&run_id, 0);
    workflow.put("first", "v").await.unwrap();
    standalone.put("first", "v").await.unwrap();

    key_store.reset();
    for i in 0..3 {
        workflow.put(&format!("k{i}"), "v").await.unwrap();
        workflow.get(&format!("k{i}")).await.unwrap().unwrap();
    }
    assert_eq!(
        key_store.counts(),
        RequestCounts::default(),
        "a workflow run's entries"
    );

    for i in 0..3 {
        standalone.put(&format!("k{i}"), "v").await.unwrap();
        standalone.get(&format!("k{i}")).await.unwrap().unwrap();
    }
    assert_eq!(
        key_store.counts(),
        RequestCounts {
            gets: 3,
            ..RequestCounts::default()
        },
        "a standalone run's: one GET of its key per put, none per get"
    );
}

/// A standalone run's key and entry as a store with data keys wrote them
/// before generations (a version-1 key record, a version-3 frame naming
/// generation 1), made independently (Python's `cryptography`, the
/// check of `tools/check_sealed_goldens.py`): the key-encryption key is
/// version 1, all bytes 11; the data key all bytes 5; the entry holds
/// "sealed before generations" under the key "old" of run `legacy`.
const LEGACY_KEY_RECORD: &str = "4d4b4559010100000048006465666768696a6b6c6d6e6f707172737475767778797a7b0d33d1faf788ba0a3c70f659a3f8f679654105fdb0bd164923ed49eee2d397ef93f45dffbba32781aeeb4d4a641a16ace006dadf";
const LEGACY_ENTRY: &str = "4d454d4f030000010100000000000000000000004100000000000000000102030405060708090a0b0c0d0e0f1011121314151617a7ea04db2fe67efe5bc984abccb63669d7c20429a89c771db0d81807e73059688ffd8d4cd601173d80e1e0a4df";

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test]
async fn a_standalone_run_sealed_before_generations_reads_and_writes_as_before() {
    let (data, keys) = (Backend::in_memory(), Backend::in_memory());
    let run_id = run("legacy");
    keys.objects()
        .put(
            &Path::from("keys/runs/legacy/0000000000000000"),
            PutPayload::from(unhex(LEGACY_KEY_RECORD)),
        )
        .await
        .unwrap();
    data.objects()
        .put(
            &entry(&run_id, "old"),
            PutPayload::from(unhex(LEGACY_ENTRY)),
        )
        .await
        .unwrap();
    let (a, b) = (process(data.open(), &keys), process(data.open(), &keys));
    assert_eq!(
        read(&a, &run_id, "old", "A").await.as_deref(),
        Some(&b"sealed before generations"[..])
    );
    // New entries are sealed with the key there is, generation 1.
    put(&a, &run_id, "new", "written since", "A").await;
    let framed = data
        .objects()
        .get(&entry(&run_id, "new"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!((framed[4], &framed[8..12]), (3, &1u32.to_le_bytes()[..]));
    assert_eq!(
        read(&b, &run_id, "new", "B").await.as_deref(),
        Some(&b"written since"[..])
    );

    // Forgotten (not cleared): the old entries read as misses, and are
    // replaced, sealed with a key of a generation of its own.
    let forget = b.seal().data_keys().unwrap();
    forget
        .forget_incarnation(&run_id, Incarnation::STANDALONE)
        .await
        .unwrap();
    let c = process(data.open(), &keys);
    assert_eq!(read(&b, &run_id, "new", "B").await, None);
    assert_eq!(read(&c, &run_id, "old", "C").await, None);
    put(&b, &run_id, "old", "again", "B").await;
    assert_eq!(
        read(&a, &run_id, "old", "A").await.as_deref(),
        Some(&b"again"[..])
    );
    let record = keys
        .objects()
        .get(&Path::from("keys/runs/legacy/0000000000000000"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        record[4], 2,
        "a standalone key made now records its generation"
    );
}
