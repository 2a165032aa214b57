//! Rotating an encryption key across a fleet: processes (runtimes over
//! separate store instances on one local folder) that each read their own
//! key file, rolled out one process at a time. Every process must read
//! what any other writes at every point of the rollout: a key is first
//! *staged* everywhere (read, never written with), then promoted, and only
//! then are the data keys rewrapped and the old version retired. A process
//! that still wraps with the old version while the rewrap runs is reported,
//! so that the old version is not destroyed under its keys.

use std::collections::BTreeMap;
use std::sync::Arc;

use memo_runtime::object_store::path::Path;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RuntimeStore};
use memo_runtime::seal::{DataKeys, KeyUsage, Keyring, Seal};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, ErrorKind, Incarnation, MemoStore, RunId};
use memo_tests::fixtures::{Backend, run};
use memo_tests::pause::{Held, Pauses, wait_reached};

const V1: [u8; 32] = [11; 32];
const V2: [u8; 32] = [22; 32];

/// A process's key file at each point of the rotation.
fn old_ring() -> Keyring {
    Keyring::new(1, V1).unwrap()
}

fn staged_ring() -> Keyring {
    old_ring().with_staged_key(2, V2).unwrap()
}

fn promoted_ring() -> Keyring {
    old_ring().with_key(2, V2).unwrap()
}

fn retired_ring() -> Keyring {
    Keyring::new(2, V2).unwrap()
}

/// How the fleet encrypts: a store keyring, or per-run data keys wrapped by
/// the ring (the key-encryption key).
#[derive(Debug, Clone, Copy)]
enum Sealing {
    Keyring,
    DataKeys,
}

/// The fleet's shared storage: the data folder, and the key store of the
/// data keys (another folder).
struct Fleet {
    data: Backend,
    keys: Backend,
    sealing: Sealing,
}

impl Fleet {
    fn new(sealing: Sealing) -> Fleet {
        Fleet::with_key_store(sealing, Backend::local_folder())
    }

    fn with_key_store(sealing: Sealing, keys: Backend) -> Fleet {
        Fleet {
            data: Backend::local_folder(),
            keys,
            sealing,
        }
    }

    /// The memo store of a process whose key file holds `ring`.
    fn memo_store(&self, ring: Keyring) -> MemoStore {
        MemoStore::new(self.data.open(), "memo").with_seal(self.seal(ring))
    }

    /// The seal of a process whose key file holds `ring` (its data keys,
    /// if any, over its own instance of the key store).
    fn seal(&self, ring: Keyring) -> Seal {
        match self.sealing {
            Sealing::Keyring => Seal::default().with_encryption(ring),
            Sealing::DataKeys => {
                Seal::default().with_data_keys(DataKeys::new(ring, self.keys.open(), "keys"))
            }
        }
    }

    /// A process of the fleet whose key file holds `ring`.
    fn process(&self, ring: Keyring) -> Runtime {
        self.process_sealed(self.seal(ring))
    }

    /// A process of the fleet whose stores are sealed with `seal`.
    fn process_sealed(&self, seal: Seal) -> Runtime {
        let objects = self.data.open();
        Runtime::builder()
            .memo_store(MemoStore::new(objects.clone(), "memo").with_seal(seal.clone()))
            .runtime_store(Arc::new(
                ObjectStoreRuntimeStore::new(objects, "runs").with_seal(seal),
            ))
            .build()
            .unwrap()
    }
}

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;

/// Charges in a step (its quote kept in a memo entry), waits for `approval`,
/// then ships in a step: a run one process starts and another finishes.
fn order() -> Workflow<impl Fn(Context, String) -> BoxedRun + Send + Sync + 'static> {
    Workflow::new("order", |ctx: Context, item: String| {
        Box::pin(async move {
            let charged = ctx
                .step_with("charge", &item, |memo, item| async move {
                    let quote = match memo.get("quote").await? {
                        Some(quote) => String::from_utf8(quote.to_vec()).unwrap(),
                        None => {
                            let quote = format!("{item} at 12.50");
                            memo.put("quote", quote.as_bytes()).await?;
                            quote
                        }
                    };
                    Ok::<_, Error>(format!("charged {quote}"))
                })
                .await?;
            let approved: bool = ctx.wait_for_signal("approval").await?;
            let shipped = ctx
                .step("ship", |_memo| async move {
                    Ok::<_, Error>(if approved { "shipped" } else { "kept" }.to_owned())
                })
                .await?;
            Ok(format!("{charged}, {shipped}"))
        }) as BoxedRun
    })
}

/// What every run of [`order`] returns.
const EXPECTED: &str = "charged book at 12.50, shipped";

/// `starter` starts `run_id` (its charge step, then it waits for the
/// approval); `finisher` approves and finishes it: each reads what the
/// other wrote.
async fn start_and_finish(starter: &Runtime, finisher: &Runtime, run_id: &RunId) {
    start(starter, run_id).await;
    finish(finisher, run_id).await;
}

async fn start(starter: &Runtime, run_id: &RunId) {
    match starter.run(run_id, &"book".to_owned(), &order()).await {
        Err(Error::Suspended { signal, .. }) => assert_eq!(signal, "approval"),
        other => panic!("{run_id}: expected the run to wait for its approval, got {other:?}"),
    }
}

async fn finish(finisher: &Runtime, run_id: &RunId) {
    finisher.signal(run_id, "approval", &true).await.unwrap();
    let output = finisher.resume(run_id, &order()).await.unwrap();
    assert_eq!(output, EXPECTED, "{run_id}");
}

/// A key added to one process's key file as a plain key is written with at
/// once: another process that does not have it yet cannot read that run.
/// Nothing is lost (the error is transient and names what to do, the run
/// stays open), and the run finishes once that process reads the key,
/// staged or not.
#[tokio::test]
async fn a_key_one_process_writes_with_before_the_others_have_it_stalls_their_reads() {
    for sealing in [Sealing::Keyring, Sealing::DataKeys] {
        let fleet = Fleet::new(sealing);
        let (ahead, behind) = (fleet.process(promoted_ring()), fleet.process(old_ring()));
        let run_id = run("order-1");
        start(&ahead, &run_id).await;

        let err = behind.resume(&run_id, &order()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{sealing:?}: {err}");
        assert!(!err.fails_run(), "{sealing:?}: {err}");
        let message = err.to_string();
        assert!(
            message.contains("key version 2, which this keyring lacks")
                && message.contains("give every process the new key as staged"),
            "{sealing:?}: {message}"
        );
        let left = ahead
            .runtime_store()
            .load_run(&run_id)
            .await
            .unwrap()
            .unwrap();
        assert!(!left.status.is_terminal(), "{sealing:?}: {:?}", left.status);

        finish(&fleet.process(staged_ring()), &run_id).await;
    }
}

/// The rotation the docs prescribe, one process at a time: stage the key
/// everywhere, promote it everywhere, rewrap the data keys, retire the old
/// version once nothing needs it (`KeyUsage`, `DataKeys::kek_versions`).
/// At each step a run started by one process is finished by the other;
/// after the rewrap, a process holding the new version alone reads every
/// run (data keys), or every run sealed since the promotion (a store
/// keyring, whose older objects need the old version until they expire).
#[tokio::test]
async fn a_staged_key_lets_every_process_read_what_any_writes_throughout_a_rotation() {
    for sealing in [Sealing::Keyring, Sealing::DataKeys] {
        let fleet = Fleet::new(sealing);
        // Staged in one process, not yet in the other: neither writes with it.
        let (a, b) = (fleet.process(staged_ring()), fleet.process(old_ring()));
        start_and_finish(&a, &b, &run("staged-1")).await;
        start_and_finish(&b, &a, &run("staged-2")).await;
        // Staged in both; promoted in one, not yet in the other.
        let (a, b) = (fleet.process(promoted_ring()), fleet.process(staged_ring()));
        start_and_finish(&a, &b, &run("promoted-1")).await;
        start_and_finish(&b, &a, &run("promoted-2")).await;
        // Promoted everywhere: what is written from here on is version 2.
        let (a, b) = (
            fleet.process(promoted_ring()),
            fleet.process(promoted_ring()),
        );
        start_and_finish(&a, &b, &run("new-1")).await;

        // What still needs version 1, before anything is retired.
        let usage = KeyUsage::scan(fleet.data.open().as_ref(), &Path::from(""))
            .await
            .unwrap();
        let keys = DataKeys::new(promoted_ring(), fleet.keys.open(), "keys");
        match sealing {
            Sealing::Keyring => {
                // Objects sealed before and after the promotion.
                assert_eq!(usage.by_key_version.keys().collect::<Vec<_>>(), [&1, &2]);
                assert_eq!(usage.data_key_sealed, 0);
            }
            Sealing::DataKeys => {
                assert!(usage.by_key_version.is_empty(), "{usage:?}");
                assert!(usage.data_key_sealed > 0, "{usage:?}");
                let wrapped = keys.kek_versions().await.unwrap();
                assert_eq!(wrapped, BTreeMap::from([(1, 3), (2, 2)]));
            }
        }
        assert_eq!(usage.unknown, 0, "{usage:?}");

        let retired = fleet.process(retired_ring());
        let readable: &[&str] = match sealing {
            Sealing::DataKeys => {
                let report = keys.rewrap().await.unwrap();
                assert_eq!(report.written_meanwhile, 0, "{report:?}");
                // The runs a process of the old or the staged ring started.
                assert_eq!((report.rewrapped, report.current), (3, 2), "{report:?}");
                // Version 1 wraps no key any more: it may be destroyed.
                let wrapped = keys.kek_versions().await.unwrap();
                assert_eq!(wrapped, BTreeMap::from([(2, 5)]));
                &["staged-1", "staged-2", "promoted-1", "promoted-2", "new-1"]
            }
            Sealing::Keyring => &["new-1"],
        };
        for id in readable {
            let output = retired
                .run(&run(id), &"book".to_owned(), &order())
                .await
                .unwrap_or_else(|e| panic!("{sealing:?}: {id} with version 2 alone: {e}"));
            assert_eq!(output, EXPECTED, "{sealing:?}: {id}");
        }
        start_and_finish(&retired, &retired, &run("retired-1")).await;
    }
}

/// A rewrap run while a process still wraps with the old version (its key
/// file not yet promoted): a run that process starts while the rewrap is
/// under way gets a key of the old version the rewrap's first listing did
/// not see. The rewrap's second listing finds it, rewraps it and reports
/// it, so the operator knows not to destroy the old version yet; a rewrap
/// once every process is promoted reports nothing.
#[tokio::test]
async fn a_rewrap_reports_a_key_a_process_made_with_the_older_version_while_it_ran() {
    let fleet = Fleet::new(Sealing::DataKeys);
    let (promoted, lagging) = (fleet.process(promoted_ring()), fleet.process(old_ring()));
    start_and_finish(&lagging, &promoted, &run("before")).await;

    let (held, pause) = Pauses::new(fleet.keys.open(), Held::Get, Path::from("keys"));
    let rewrapper = DataKeys::new(promoted_ring(), Arc::new(held), "keys");
    let rewrap = tokio::spawn(async move { rewrapper.rewrap().await });
    wait_reached(pause.reached, "the rewrap's read of the first key").await;
    start(&lagging, &run("during")).await;
    pause.release.send(()).unwrap();
    let report = rewrap.await.unwrap().unwrap();
    assert_eq!(
        (report.rewrapped, report.written_meanwhile),
        (2, 1),
        "{report:?}"
    );

    // Both keys are rewrapped: version 2 alone reads both runs.
    let retired = fleet.process(retired_ring());
    finish(&retired, &run("during")).await;
    let before = retired
        .run(&run("before"), &"book".to_owned(), &order())
        .await
        .unwrap();
    assert_eq!(before, EXPECTED);

    // Nothing lags any more: a second rewrap finds every key current.
    let again = DataKeys::new(promoted_ring(), fleet.keys.open(), "keys")
        .rewrap()
        .await
        .unwrap();
    assert_eq!(
        (again.rewrapped, again.written_meanwhile, again.current),
        (0, 0, 2),
        "{again:?}"
    );
}

/// A standalone run's key that the rewrap's first pass rewrapped, then
/// forgotten (a sweep clears the standalone run) and made again by a
/// process that still wraps with the old version, before the second
/// listing: the same name, another key. The second listing tells it by
/// its entity tag, rewraps it and reports it. (The key store is in memory,
/// whose listing is in name order: the standalone key `a-…` is rewrapped
/// before the run's key `b-…`, whose read the test holds.)
#[tokio::test]
async fn a_rewrap_reports_a_key_forgotten_and_made_again_with_the_older_version_after_its_pass() {
    let fleet = Fleet::with_key_store(Sealing::DataKeys, Backend::in_memory());
    let lagging = fleet.memo_store(old_ring());
    let standalone = run("a-standalone");
    lagging
        .new_memo(&standalone, 0)
        .put("reply", b"first")
        .await
        .unwrap();
    start(&fleet.process(old_ring()), &run("b-run")).await;

    let (held, pause) = Pauses::new(fleet.keys.open(), Held::Get, Path::from("keys/runs/b-run"));
    let rewrapper = DataKeys::new(promoted_ring(), Arc::new(held), "keys");
    let rewrap = tokio::spawn(async move { rewrapper.rewrap().await });
    wait_reached(pause.reached, "the rewrap's read of the run's key").await;
    let keys = lagging.seal().data_keys().unwrap();
    assert!(
        keys.forget_incarnation(&standalone, Incarnation::STANDALONE)
            .await
            .unwrap()
    );
    lagging
        .new_memo(&standalone, 0)
        .put("reply", b"second")
        .await
        .unwrap();
    pause.release.send(()).unwrap();
    let report = rewrap.await.unwrap().unwrap();
    assert_eq!(
        (report.rewrapped, report.written_meanwhile, report.current),
        (3, 1, 0),
        "{report:?}"
    );

    let retired = fleet.memo_store(retired_ring());
    let reply = retired.new_memo(&standalone, 0).get("reply").await.unwrap();
    assert_eq!(reply.as_deref(), Some(&b"second"[..]));
}

/// Turning encryption on across a fleet, with a store keyring or with data
/// keys: a key staged alone reads what it encrypted (and the data keys it
/// wraps) and writes plaintext, so while one process has it staged and
/// another has no key, and then while one has promoted it (accepting the
/// plaintext the others still write) and another has it staged, each
/// finishes the runs the other started. Once every process encrypts and
/// the plaintext has expired, `accept_plaintext` goes. Promoted at once in
/// one process, the key stalls the other's reads, which says what to do.
#[tokio::test]
async fn turning_encryption_on_with_a_staged_key_lets_every_process_read_what_any_writes() {
    for sealing in [Sealing::Keyring, Sealing::DataKeys] {
        let fleet = Fleet::new(sealing);
        let plain = Seal::default();
        let staged = fleet.seal(staged_only());
        let promoted = || fleet.seal(old_ring());
        let migrating = || promoted().accepting_plaintext();
        assert!(
            !staged.is_encrypted() && promoted().is_encrypted(),
            "{sealing:?}"
        );

        let (a, b) = (
            fleet.process_sealed(staged.clone()),
            fleet.process_sealed(plain.clone()),
        );
        start_and_finish(&a, &b, &run("staged-1")).await;
        start_and_finish(&b, &a, &run("staged-2")).await;
        let (a, b) = (
            fleet.process_sealed(migrating()),
            fleet.process_sealed(staged),
        );
        start_and_finish(&a, &b, &run("promoted-1")).await;
        start_and_finish(&b, &a, &run("promoted-2")).await;
        let (a, b) = (
            fleet.process_sealed(migrating()),
            fleet.process_sealed(migrating()),
        );
        start_and_finish(&a, &b, &run("encrypted-1")).await;

        let usage = KeyUsage::scan(fleet.data.open().as_ref(), &Path::from(""))
            .await
            .unwrap();
        match sealing {
            Sealing::Keyring => {
                assert_eq!(usage.by_key_version.keys().collect::<Vec<_>>(), [&1]);
            }
            Sealing::DataKeys => assert!(usage.data_key_sealed > 0, "{usage:?}"),
        }
        // The runs of the first steps hold plaintext values: a process that
        // no longer accepts plaintext reads only the run written once every
        // process encrypted.
        let encrypted_only = fleet.process_sealed(promoted());
        let output = encrypted_only
            .run(&run("encrypted-1"), &"book".to_owned(), &order())
            .await
            .unwrap();
        assert_eq!(output, EXPECTED, "{sealing:?}");
        let refused = encrypted_only
            .run(&run("staged-1"), &"book".to_owned(), &order())
            .await
            .unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Corrupt, "{sealing:?}: {refused}");

        // Promoted at once beside a process with no key.
        let (ahead, behind) = (
            fleet.process_sealed(migrating()),
            fleet.process_sealed(plain),
        );
        start(&ahead, &run("hasty-1")).await;
        let err = behind.resume(&run("hasty-1"), &order()).await.unwrap_err();
        assert!(!err.fails_run(), "{sealing:?}: {err}");
        assert!(
            err.to_string()
                .contains("as staged before any process writes with it"),
            "{sealing:?}: {err}"
        );
    }
}

/// A keyring of one staged key, version 1: turning encryption on.
fn staged_only() -> Keyring {
    Keyring::staged(1, V1).unwrap()
}

/// With a store keyring, what a run wrote keeps the key version it was
/// sealed with until the run is swept: a run started before the promotion
/// and still open long past the retention period still needs version 1
/// (the scan counts it, and a sweep leaves an open run alone), so version 1
/// may be retired only once the scan counts none of it, not once the
/// retention period has passed. Once the run has ended and been swept,
/// nothing needs it.
#[tokio::test]
async fn an_open_run_needs_the_key_it_started_with_past_the_retention_period() {
    let fleet = Fleet::new(Sealing::Keyring);
    let long_open = run("long-open");
    start(&fleet.process(old_ring()), &long_open).await;
    let promoted = fleet.process(promoted_ring());
    let version_1_objects = || async {
        let usage = KeyUsage::scan(fleet.data.open().as_ref(), &Path::from(""))
            .await
            .unwrap();
        usage.by_key_version.get(&1).copied().unwrap_or(0)
    };
    let sweeper = |runtime: &Runtime| {
        memo_runtime::retention::RetentionSweeper::builder(
            runtime.memo_store().clone(),
            std::time::Duration::from_secs(1),
        )
        .runtime_store(Arc::clone(runtime.runtime_store()))
        .build()
    };
    // A year on: the run is still open, and its objects still need version 1.
    let a_year_on = 400 * 24 * 3_600_000 + now_ms();
    let report = sweeper(&promoted).sweep_once(a_year_on).await.unwrap();
    assert_eq!(report.runs_cleared, 0, "{report:?}");
    assert!(version_1_objects().await > 0);

    finish(&promoted, &long_open).await;
    let report = sweeper(&promoted).sweep_once(a_year_on).await.unwrap();
    assert_eq!(report.runs_cleared, 1, "{report:?}");
    assert_eq!(version_1_objects().await, 0);
}

/// The wall clock's time, in ms since the epoch (the runtime's clock).
fn now_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    u64::try_from(since_epoch.as_millis()).unwrap()
}

/// A run forgotten while the rewrap replaces its key (a sweeper in every
/// worker forgets runs meanwhile): the replacement is refused, the key
/// stays forgotten, and the report does not count it as rewrapped (it
/// did before session 55).
#[tokio::test]
async fn a_key_forgotten_while_it_is_rewrapped_stays_forgotten_and_is_not_counted() {
    let fleet = Fleet::with_key_store(Sealing::DataKeys, Backend::in_memory());
    let gone = run("gone");
    start_and_finish(
        &fleet.process(old_ring()),
        &fleet.process(old_ring()),
        &gone,
    )
    .await;

    let (held, pause) = Pauses::new(fleet.keys.open(), Held::Put, Path::from("keys"));
    let rewrapper = DataKeys::new(promoted_ring(), Arc::new(held), "keys");
    let rewrap = tokio::spawn(async move { rewrapper.rewrap().await });
    wait_reached(pause.reached, "the rewrap's replacement of the key").await;
    let keys = DataKeys::new(promoted_ring(), fleet.keys.open(), "keys");
    assert_eq!(keys.forget_run(&gone).await.unwrap(), 1);
    pause.release.send(()).unwrap();

    let report = rewrap.await.unwrap().unwrap();
    assert_eq!(
        (report.rewrapped, report.current, report.written_meanwhile),
        (0, 0, 0),
        "{report:?}"
    );
    assert_eq!(keys.kek_versions().await.unwrap(), BTreeMap::new());
}
