//! The bad-input table: invalid run ids; flipped, truncated, empty and
//! foreign objects wherever memo entries, step outputs, markers and runtime
//! records live; a value of another type under a key; values over the size
//! limit; an unknown envelope version; malformed store URLs; credentials
//! in errors. (Disabled backends are pinned by `store_url`'s own tests: this
//! crate turns every backend on.) Each case asserts the exact error (or,
//! for foreign markers, the exact listing) and that the store holds exactly
//! what it held before.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::TryStreamExt;
use futures::future::BoxFuture;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::{
    Commit, NewRun, ObjectStoreRuntimeStore, RuntimeStore, StatusChange,
};
use memo_runtime::testing::write_legacy_step_output;
use memo_runtime::{
    Bytes, Error, Incarnation, Memo, MemoStore, RunId, memoized, retention::TerminalMarker,
    store::store_from_url,
};
use memo_tests::fixtures::run;
use sha2::{Digest, Sha256};

/// A fresh store with the run `r` in it: a memo entry `k` at step 0, a step
/// output for payload `p`, a terminal marker, and a runtime record with one
/// log entry.
struct Fixture {
    objects: Arc<InMemory>,
    memo: MemoStore,
    run: RunId,
}

const MARKER_AT_MS: u64 = 1_700_000_000_000;

impl Fixture {
    async fn new() -> Fixture {
        let objects = Arc::new(InMemory::new());
        // Seeded by one instance and read by another, as by another
        // process: the writer's entry cache holds what it committed and
        // checked, and the damage is done afterwards.
        let writer = MemoStore::new(objects.clone(), "memo");
        let memo = MemoStore::new(objects.clone(), "memo");
        let runtime = ObjectStoreRuntimeStore::new(objects.clone(), "rt");
        let run = run("r");
        writer.new_memo(&run, 0).put("k", b"value").await.unwrap();
        write_legacy_step_output(&writer, &run, Incarnation::STANDALONE, 0, b"p", b"output")
            .await
            .unwrap();
        writer
            .markers()
            .write_standalone(&run, MARKER_AT_MS)
            .await
            .unwrap();
        runtime
            .create_run(NewRun {
                run_id: run.clone(),
                workflow: "w".into(),
                input: Bytes::from_static(b"in"),
                created_at_ms: 1,
                workflow_version: None,
            })
            .await
            .unwrap();
        runtime
            .atomic_apply(&run, Commit::status(StatusChange::start_attempt(1), 2))
            .await
            .unwrap();
        Fixture { objects, memo, run }
    }

    fn memo0(&self) -> Memo {
        self.memo.new_memo(&self.run, 0)
    }

    /// A fresh instance over the same objects, as another process opens it.
    fn fresh_runtime(&self) -> ObjectStoreRuntimeStore {
        ObjectStoreRuntimeStore::new(self.objects.clone(), "rt")
    }

    async fn read(&self, path: &str) -> Bytes {
        self.read_at(&Path::from(path)).await
    }

    async fn read_at(&self, path: &Path) -> Bytes {
        self.objects.get(path).await.unwrap().bytes().await.unwrap()
    }

    async fn write(&self, path: &str, bytes: Vec<u8>) {
        self.objects
            .put(&Path::from(path), bytes.into())
            .await
            .unwrap();
    }

    /// `path`, with [`LOG0_PATH`] resolved to the run's first log entry.
    async fn resolve(&self, path: &str) -> String {
        if path != LOG0_PATH {
            return path.to_string();
        }
        let all = self.everything().await;
        all.into_keys()
            .find(|p| p.starts_with("rt/runs/r/") && p.ends_with("/log/00000000000000000000"))
            .expect("the run's first log entry")
    }

    async fn everything(&self) -> BTreeMap<String, Bytes> {
        let metas: Vec<_> = self.objects.list(None).try_collect().await.unwrap();
        let mut all = BTreeMap::new();
        for meta in metas {
            all.insert(
                meta.location.to_string(),
                self.read_at(&meta.location).await,
            );
        }
        all
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Memos made outside a workflow live in the standalone incarnation.
const STANDALONE: &str = "0000000000000000";

fn memo_path() -> String {
    format!("memo/memos/r/{STANDALONE}/0/{}", sha256_hex(b"k"))
}

const CREATION_PATH: &str = "rt/runs/r/run";
/// Stands for the run's first log entry, whose path names its (random)
/// incarnation.
const LOG0_PATH: &str = "<log entry 0>";

/// How a stored object is damaged.
#[derive(Debug, Clone, Copy)]
enum Damage {
    FlipPayload,
    FlipChecksum,
    TruncateOne,
    TruncateToHeader,
    Empty,
    Foreign,
    UnknownVersion,
    UnknownFlags,
}

impl Damage {
    fn apply(self, framed: &[u8]) -> Vec<u8> {
        let mut bytes = framed.to_vec();
        let last = bytes.len() - 1;
        match self {
            Damage::FlipPayload => bytes[14] ^= 0x01,
            Damage::FlipChecksum => bytes[last] ^= 0x80,
            Damage::TruncateOne => bytes.truncate(last),
            Damage::TruncateToHeader => bytes.truncate(3),
            Damage::Empty => bytes.clear(),
            Damage::Foreign => bytes = b"{\"not\": \"a memo frame\"}".to_vec(),
            Damage::UnknownVersion => bytes[4] = 2,
            Damage::UnknownFlags => bytes[5] = 0x10,
        }
        bytes
    }
}

/// The action a case runs, on the fixture, after the damage.
type Action = for<'a> fn(&'a Fixture) -> BoxFuture<'a, Result<String, Error>>;

/// One row of the table.
struct Case {
    name: String,
    /// The object to damage, and how.
    damage: Option<(String, Damage)>,
    action: Action,
    /// The path the `Error::Corrupt` must name.
    corrupt_at: String,
}

fn memo_get(fx: &Fixture) -> BoxFuture<'_, Result<String, Error>> {
    Box::pin(async move { fx.memo0().get("k").await.map(|v| format!("{v:?}")) })
}

fn memo_put(fx: &Fixture) -> BoxFuture<'_, Result<String, Error>> {
    Box::pin(async move {
        fx.memo0()
            .put("k", b"other")
            .await
            .map(|v| format!("{v:?}"))
    })
}

fn load_run(fx: &Fixture) -> BoxFuture<'_, Result<String, Error>> {
    Box::pin(async move {
        let loaded = fx.fresh_runtime().load_run(&fx.run).await;
        loaded.map(|v| format!("{v:?}"))
    })
}

fn load_receipts(fx: &Fixture) -> BoxFuture<'_, Result<String, Error>> {
    Box::pin(async move {
        let loaded = fx.fresh_runtime().load_receipts(&fx.run, None).await;
        loaded.map(|v| format!("{v:?}"))
    })
}

fn table() -> Vec<Case> {
    let mut cases = Vec::new();
    let damages = [
        Damage::FlipPayload,
        Damage::FlipChecksum,
        Damage::TruncateOne,
        Damage::TruncateToHeader,
        Damage::Empty,
        Damage::Foreign,
        Damage::UnknownVersion,
        Damage::UnknownFlags,
    ];
    for damage in damages {
        cases.push(Case {
            name: format!("memo entry, {damage:?}: get"),
            damage: Some((memo_path(), damage)),
            action: memo_get,
            corrupt_at: memo_path(),
        });
    }
    for damage in [Damage::FlipPayload, Damage::Empty, Damage::Foreign] {
        cases.push(Case {
            name: format!("memo entry, {damage:?}: put never overwrites it"),
            damage: Some((memo_path(), damage)),
            action: memo_put,
            corrupt_at: memo_path(),
        });
    }
    for damage in [Damage::FlipPayload, Damage::Empty, Damage::UnknownVersion] {
        cases.push(Case {
            name: format!("runtime creation record, {damage:?}: load_run"),
            damage: Some((CREATION_PATH.into(), damage)),
            action: load_run,
            corrupt_at: CREATION_PATH.into(),
        });
    }
    for damage in [Damage::FlipChecksum, Damage::TruncateOne, Damage::Foreign] {
        cases.push(Case {
            name: format!("runtime log entry, {damage:?}: load_receipts"),
            damage: Some((LOG0_PATH.into(), damage)),
            action: load_receipts,
            corrupt_at: LOG0_PATH.into(),
        });
    }
    cases
}

#[tokio::test]
async fn damaged_objects_are_corrupt_errors_naming_the_path_and_change_nothing() {
    let cases = table();
    assert!(cases.len() >= 16);
    for case in cases {
        let fx = Fixture::new().await;
        if let Some((path, damage)) = &case.damage {
            let path = fx.resolve(path).await;
            let framed = fx.read(&path).await;
            fx.write(&path, damage.apply(&framed)).await;
        }
        let corrupt_at = fx.resolve(&case.corrupt_at).await;
        let before = fx.everything().await;
        let result = (case.action)(&fx).await;
        assert!(
            matches!(&result, Err(Error::Corrupt { path, .. }) if *path == corrupt_at),
            "{}: got {result:?}",
            case.name
        );
        assert_eq!(
            fx.everything().await,
            before,
            "{}: the store changed",
            case.name
        );
    }
}

#[test]
fn invalid_run_ids_are_refused_naming_the_input() {
    let too_long = "a".repeat(129);
    for input in [
        "",
        "a/b",
        "a.b",
        "..",
        "a b",
        "é",
        "a%2Fb",
        "line\nbreak",
        too_long.as_str(),
    ] {
        let err = RunId::new(input).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidRunId { input: i, .. } if i == input),
            "{input:?}: {err}"
        );
        assert!(input.parse::<RunId>().is_err() && RunId::try_from(input).is_err());
    }
}

#[memoized]
async fn count_items(memo: &Memo, order: u32) -> Result<u64, Error> {
    panic!("the body must not run for a committed entry (order {order}, {memo:?})")
}

#[tokio::test]
async fn a_value_of_another_type_is_a_decode_error_and_the_body_never_runs() {
    let fx = Fixture::new().await;
    let key = memo_runtime::content_key(&("count_items", 0_u32, (7_u32,))).unwrap();
    let stored = rmp_serde::to_vec_named("seven").unwrap();
    fx.memo0().put(&key, &stored).await.unwrap();
    let before = fx.everything().await;
    let err = count_items(&fx.memo0(), 7).await.unwrap_err();
    let path = format!("memo/memos/r/{STANDALONE}/0/{}", sha256_hex(key.as_bytes()));
    assert!(
        matches!(&err, Error::Decode { path: p, .. } if *p == path),
        "{err}"
    );
    assert_eq!(fx.everything().await, before);
}

#[tokio::test]
async fn values_over_the_size_limit_are_refused_before_anything_is_written() {
    let fx = Fixture::new().await;
    let small = fx.memo.clone().with_max_value_size(4);
    let before = fx.everything().await;
    let err = small
        .new_memo(&fx.run, 1)
        .put("big", b"12345")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::TooLarge { key, size: 5, limit: 4 } if key.contains("\"big\"")),
        "{err}"
    );

    assert_eq!(fx.everything().await, before);
}

#[tokio::test]
async fn foreign_objects_among_markers_are_skipped_and_left_alone() {
    for foreign in [
        "memo/terminals/not-a-bucket",
        "memo/terminals/00000000001700000000/garbage",
        "memo/terminals/00000000001699999200000/18446742373709551615_not.a.run",
    ] {
        let fx = Fixture::new().await;
        fx.write(foreign, b"x".to_vec()).await;
        let before = fx.everything().await;
        let listed = fx.memo.markers().list().await.unwrap();
        let expected = TerminalMarker {
            run_id: fx.run.clone(),
            incarnation: Incarnation::STANDALONE,
            terminal_at_ms: MARKER_AT_MS,
        };
        assert_eq!(listed, [expected], "{foreign}");
        assert_eq!(fx.everything().await, before, "{foreign}");
    }
}

#[test]
fn malformed_store_urls_are_refused_naming_the_url() {
    let none: [(&str, &str); 0] = [];
    for url in [
        "not a url",
        "ftp://host/x",
        "https://example.com/memo",
        "file://relative/x",
    ] {
        let err = store_from_url(url, none).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidStoreUrl { url: u, .. } if u == url),
            "{url}: {err}"
        );
    }
    let err = store_from_url("s3://bucket", [("endpiont", "http://127.0.0.1:1")]).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidStoreUrl { reason, .. } if reason.contains("endpiont")),
        "{err}"
    );
}

#[test]
fn credentials_never_appear_in_errors_or_debug_output() {
    const SECRET: &str = "wJalrXUtnFEMI-SUPERSECRET-KEY";
    let credentials = [
        ("access_key_id", "AKIDEXAMPLE"),
        ("secret_access_key", SECRET),
        ("region", "us-east-1"),
        ("endpoint", "http://127.0.0.1:1"),
    ];
    let mut misspelt = credentials.to_vec();
    misspelt.push(("endpiont", "http://127.0.0.1:1"));
    let err = store_from_url("s3://bucket/memo", misspelt).unwrap_err();
    for shown in [err.to_string(), format!("{err:?}"), format!("{err:#}")] {
        assert!(!shown.contains(SECRET), "the secret leaked: {shown}");
    }
    let opened = store_from_url("s3://bucket/memo", credentials).unwrap();
    for shown in [format!("{opened:?}"), opened.store.to_string()] {
        assert!(!shown.contains(SECRET), "the secret leaked: {shown}");
    }
    // Credentials in the URL itself: refused, and never echoed.
    for url in [
        format!("s3://AKIDEXAMPLE:{SECRET}@bucket/memo"),
        format!("gs://user:{SECRET}@bucket/memo"),
        format!("az://container/memo?sv=2024-01-01&sig={SECRET}"),
        format!("abfss://fs:{SECRET}@account.dfs.core.windows.net/memo"),
        format!("https://account.blob.core.windows.net/container?sig={SECRET}"),
    ] {
        let err = store_from_url(&url, credentials).unwrap_err();
        for shown in [err.to_string(), format!("{err:?}"), format!("{err:#}")] {
            assert!(!shown.contains(SECRET), "the secret leaked: {shown}");
        }
        assert!(matches!(err, Error::InvalidStoreUrl { .. }), "{url}: {err}");
    }
}
