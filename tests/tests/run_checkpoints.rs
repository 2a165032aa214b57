//! Checkpointed run logs (issue 13, item 2): a fresh instance loads or
//! resumes a run of any length with a bounded number of requests, and
//! checkpoints lose or reorder nothing when they race commits, when their
//! writer crashes, when two processes take turns writing one run, or when a
//! run id is used again. Two processes are modelled as two store instances
//! over one bucket or folder. Also the run cache that spares those loads:
//! it keeps the runs in use, not the runs loaded last.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{FutureExt, TryStreamExt};
use memo_runtime::object_store::local::LocalFileSystem;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{ObjectStore, ObjectStoreExt};
use memo_runtime::runtime_store::{
    Commit, InputPhase, InputRecord, NewInput, NewRun, RunRecord, RunStatus, StatusChange,
    StepReceipt,
};
use memo_runtime::seal::Seal;
use memo_runtime::testing::{
    CountingStore, FaultInjectingStore, FaultRule, RequestCounts, RequestKind,
};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Bytes, Error, Incarnation, MemoStore, RunId,
    clock::ManualClock,
    runtime_store::{ObjectStoreRuntimeStore, RuntimeStore},
};
use memo_tests::fixtures::run;

const PREFIX: &str = "memo";

/// Every request made, of any kind.
fn total(c: RequestCounts) -> u64 {
    c.puts
        + c.creates
        + c.multipart_uploads
        + c.gets
        + c.get_ranges
        + c.heads
        + c.delete_streams
        + c.lists
        + c.lists_with_offset
        + c.lists_with_delimiter
        + c.copies
        + c.renames
}

/// One bucket (InMemory) and one folder (LocalFileSystem), each shared by
/// every instance a test makes over it.
fn shared_objects() -> Vec<(
    &'static str,
    Arc<dyn ObjectStore>,
    Option<tempfile::TempDir>,
)> {
    let dir = tempfile::tempdir().unwrap();
    let folder = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    vec![
        ("in memory", Arc::new(InMemory::new()), None),
        ("local folder", folder, Some(dir)),
    ]
}

async fn create(store: &dyn RuntimeStore, run_id: &RunId, input: &'static [u8]) -> RunRecord {
    let new = NewRun {
        run_id: run_id.clone(),
        workflow: "w".into(),
        input: Bytes::from_static(input),
        created_at_ms: 0,
        workflow_version: None,
    };
    store.create_run(new).await.unwrap()
}

async fn start(store: &dyn RuntimeStore, run_id: &RunId) {
    let start = Commit::status(StatusChange::start_attempt(1), 1);
    store.atomic_apply(run_id, start).await.unwrap();
}

fn step(run_id: &RunId, sequence: u64) -> Commit {
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
    Commit::step(receipt, 2 + sequence).with_snapshot(Bytes::from(format!("after {sequence}")))
}

fn done(at_ms: u64) -> Commit {
    let output = Bytes::from_static(b"the output");
    Commit::status(StatusChange::Completed { output }, at_ms)
}

fn signal(id: String) -> NewInput {
    NewInput {
        payload: Bytes::from(id.clone().into_bytes()),
        input_id: id,
        name: "signal".into(),
        accepted_at_ms: 5,
    }
}

/// A started run of `steps` committed steps, written through `store`.
async fn run_of(store: &dyn RuntimeStore, id: &str, steps: u64) -> RunId {
    let run_id = run(id);
    create(store, &run_id, b"input").await;
    start(store, &run_id).await;
    for sequence in 0..steps {
        store
            .atomic_apply(&run_id, step(&run_id, sequence))
            .await
            .unwrap();
    }
    run_id
}

/// Everything a reader can load of a run.
#[derive(Debug, PartialEq)]
struct Loaded {
    record: Option<RunRecord>,
    receipts: Vec<StepReceipt>,
    snapshot: Option<Bytes>,
    inputs: Vec<InputRecord>,
}

async fn load(store: &dyn RuntimeStore, run_id: &RunId) -> Loaded {
    Loaded {
        record: store.load_run(run_id).await.unwrap(),
        receipts: store.load_receipts(run_id, None).await.unwrap(),
        snapshot: store.load_snapshot(run_id).await.unwrap(),
        inputs: store.load_inputs(run_id).await.unwrap(),
    }
}

async fn paths_under(objects: &dyn ObjectStore, folder: &str) -> Vec<Path> {
    let folder = Path::from(folder);
    objects
        .list(Some(&folder))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .unwrap()
}

/// The run's objects in its incarnations' `folder`s (`checkpoint` for
/// bases, `deltas` for deltas, `delta` for deltas of the older forms).
async fn objects_in(objects: &dyn ObjectStore, run_id: &RunId, folder: &str) -> Vec<Path> {
    let all = paths_under(objects, &format!("{PREFIX}/runs/{run_id}")).await;
    let folder = format!("/{folder}/");
    all.into_iter()
        .filter(|path| path.as_ref().contains(&folder))
        .collect()
}

async fn bases(objects: &dyn ObjectStore, run_id: &RunId) -> Vec<Path> {
    objects_in(objects, run_id, "checkpoint").await
}

/// The run's deltas of every form, oldest first.
async fn deltas(objects: &dyn ObjectStore, run_id: &RunId) -> Vec<Path> {
    let mut all = objects_in(objects, run_id, "delta").await;
    all.extend(objects_in(objects, run_id, "deltas").await);
    all.sort_by_key(delta_position);
    all
}

/// The log position a delta holds the run before: its name, or, under
/// `deltas/` (named newest first), `u64::MAX` minus its name.
fn delta_position(path: &Path) -> u64 {
    let name: u64 = path.filename().unwrap().parse().unwrap();
    if path.as_ref().contains("/deltas/") {
        u64::MAX - name
    } else {
        name
    }
}

/// Every checkpoint of the run, bases and deltas.
async fn checkpoints(objects: &dyn ObjectStore, run_id: &RunId) -> Vec<Path> {
    let mut all = bases(objects, run_id).await;
    all.extend(deltas(objects, run_id).await);
    all
}

async fn delete_all(objects: &Arc<dyn ObjectStore>, paths: Vec<Path>) {
    for path in paths {
        objects.delete(&path).await.unwrap();
    }
}

/// What the log alone says: the run loaded by a fresh instance after every
/// checkpoint is removed (as a reader that predates checkpoints reads it).
async fn folded_from_the_log_alone(objects: &Arc<dyn ObjectStore>, run_id: &RunId) -> Loaded {
    delete_all(objects, checkpoints(objects.as_ref(), run_id).await).await;
    load(
        &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
        run_id,
    )
    .await
}

/// What a reader that knows bases only (the release before deltas) reads:
/// the run loaded by a fresh instance after every delta is removed, which
/// also leaves the data as that release wrote it (bases only).
async fn read_without_deltas(objects: &Arc<dyn ObjectStore>, run_id: &RunId) -> Loaded {
    delete_all(objects, deltas(objects.as_ref(), run_id).await).await;
    load(
        &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
        run_id,
    )
    .await
}

#[tokio::test]
async fn a_fresh_instance_reads_a_finished_run_of_any_length_in_three_requests() {
    for steps in [10, 1_000] {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let writer = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
        let run_id = run_of(&writer, "finished", steps).await;
        writer.atomic_apply(&run_id, done(9_999)).await.unwrap();

        let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
        counting.reset();
        let loaded = load(&fresh, &run_id).await;
        assert_eq!(loaded.receipts.len() as u64, steps);
        assert_eq!(loaded.record.unwrap().status, RunStatus::Completed);
        let c = counting.counts();
        // The run pointer, the delta listing (one request: every delta is
        // kept, the newest named first, and the listing reads one page's
        // worth of names, a thousand, which S3 returns whole either way),
        // the final delta (which holds the whole run); the later reads of the cached, finished run read
        // only its pointer again.
        assert_eq!(
            (c.gets, c.lists + c.lists_with_offset),
            (2 + 3, 1),
            "{steps}: {c:?}"
        );
        assert_eq!(total(c), 3 + 3, "{steps} steps: {c:?}");
        assert!(c.objects_listed <= 1_000, "{steps} steps: {c:?}");
    }
}

#[tokio::test]
async fn a_fresh_instance_resumes_an_open_run_of_any_length_in_at_most_ten_requests() {
    // Consecutive lengths give every length of tail after the newest
    // delta, so the worst case is among them: 0 to 4 entries while the run
    // has no base (its deltas name none, so a load reads one object fewer
    // and a delta waits one entry more), 0 to 3 at 1,000 steps, where the
    // delta names a base. Below 4 steps the run has no delta yet: the load
    // lists its incarnation's folder to see it has no checkpoint at all,
    // and folds its log, up to 4 entries.
    for steps in (0..15).chain(1_000..1_004) {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let writer = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
        let run_id = run_of(&writer, "open", steps).await;

        // Resuming: load the run and its history, then commit the next step.
        let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
        counting.reset();
        assert_eq!(fresh.load_run(&run_id).await.unwrap().unwrap().attempts, 1);
        let folding = total(counting.counts());
        let history = fresh.load_receipts(&run_id, None).await.unwrap();
        assert_eq!(history.len() as u64, steps);
        let loading = total(counting.counts());
        // The fold: the pointer, the delta listing, the delta, its base,
        // the log listing and up to 3 entries (up to 4 while the run has
        // no base, whose read they replace; with no delta yet, a listing
        // of the incarnation's folder replaces the delta's read); then the
        // history of the cached run: its next position and its pointer.
        assert!(
            folding <= 8,
            "{steps} steps: folding took {folding} requests"
        );
        assert!(
            loading <= 10,
            "{steps} steps: loading took {loading} requests"
        );
        counting.reset();
        fresh
            .atomic_apply(&run_id, step(&run_id, steps))
            .await
            .unwrap();
        let c = counting.counts();
        // The entry and the pointer check, and maybe a delta and a base
        // (two creates; deletes are not counted here).
        assert!(total(c) <= 4, "{steps} steps: committing took {c:?}");
    }
}

#[tokio::test]
async fn a_run_written_without_checkpoints_is_read_from_its_log() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    // An interval longer than the run: no checkpoint, as before they existed.
    let writer =
        ObjectStoreRuntimeStore::new(objects.clone(), PREFIX).with_checkpoint_interval(u64::MAX);
    let run_id = run_of(&writer, "no-checkpoints", 30).await;
    assert!(checkpoints(objects.as_ref(), &run_id).await.is_empty());
    let fresh = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    let loaded = load(&fresh, &run_id).await;
    assert_eq!(loaded.receipts.len(), 30);
    // A writer that knows checkpoints takes the run on and checkpoints it:
    // a delta that holds the whole run (31 receipts are too few for a base).
    fresh
        .atomic_apply(&run_id, step(&run_id, 30))
        .await
        .unwrap();
    assert_eq!(deltas(objects.as_ref(), &run_id).await.len(), 1);
    assert!(bases(objects.as_ref(), &run_id).await.is_empty());
    let again = load(
        &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
        &run_id,
    )
    .await;
    assert_eq!(again.receipts.len(), 31);
    assert_eq!(again, folded_from_the_log_alone(&objects, &run_id).await);
}

#[tokio::test]
async fn superseded_bases_are_deleted_and_deltas_kept_until_the_run_is_deleted() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    let run_id = run_of(&store, "bounded", 0).await;
    let mut rebased = 0;
    let mut base = Vec::new();
    // The deltas due: one 5 entries after the last while the run has no
    // base, 4 once one names a base.
    let (mut due, mut last) = (0, 0);
    for sequence in 0..400 {
        store
            .atomic_apply(&run_id, step(&run_id, sequence))
            .await
            .unwrap();
        let next = sequence + 2;
        if next - last >= if base.is_empty() { 5 } else { 4 } {
            (due, last) = (due + 1, next);
        }
        // After every commit: at most one base, and every delta written,
        // none deleted.
        let (d, b) = (
            deltas(objects.as_ref(), &run_id).await,
            bases(objects.as_ref(), &run_id).await,
        );
        assert!(b.len() <= 1, "after step {sequence}: {b:?}");
        assert_eq!(d.len() as u64, due, "after step {sequence}");
        if b != base {
            rebased += 1;
            base = b;
        }
    }
    // Bases come further apart as the run grows (every 2·√receipts).
    assert!((4..=12).contains(&rebased), "{rebased} bases");
    let finished = store.atomic_apply(&run_id, done(9_999)).await.unwrap();
    // The finished run: its whole-run delta, listed first, and the newest
    // base kept for readers that know bases only.
    let all = deltas(objects.as_ref(), &run_id).await;
    let listed = objects_in(objects.as_ref(), &run_id, "deltas").await;
    assert_eq!(listed.first(), all.last());
    assert_eq!(delta_position(&listed[0]), 402);
    assert_eq!(bases(objects.as_ref(), &run_id).await, base);
    // The run's deletion takes them all.
    assert!(
        store
            .delete_run(&run_id, finished.incarnation)
            .await
            .unwrap()
    );
    assert!(checkpoints(objects.as_ref(), &run_id).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checkpoints_racing_commits_of_another_instance_lose_and_reorder_nothing() {
    for (name, objects, _dir) in shared_objects() {
        let run_id = run("racing");
        let setup = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        create(&setup, &run_id, b"input").await;
        start(&setup, &run_id).await;
        // Two processes append inputs at once, each checkpointing every few
        // entries while the other commits.
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let store = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX)
                    .with_checkpoint_interval(3);
                let run_id = run_id.clone();
                tokio::spawn(async move {
                    for i in 0..25 {
                        let input = signal(format!("w{w}-{i}"));
                        store.append_input(&run_id, input).await.unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        let fresh = load(
            &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
            &run_id,
        )
        .await;
        assert_eq!(fresh.inputs.len(), 50, "{name}");
        for w in 0..2 {
            let own: Vec<_> = (fresh.inputs.iter())
                .filter(|i| i.input_id.starts_with(&format!("w{w}-")))
                .map(|i| i.input_id.clone())
                .collect();
            let in_order: Vec<_> = (0..25).map(|i| format!("w{w}-{i}")).collect();
            assert_eq!(own, in_order, "{name}: writer {w}'s inputs out of order");
        }
        assert_eq!(
            fresh,
            folded_from_the_log_alone(&objects, &run_id).await,
            "{name}: the checkpoints disagree with the log"
        );
    }
}

#[tokio::test]
async fn a_checkpoint_write_that_fails_or_loses_its_ack_loses_nothing_and_names_no_missing_base() {
    // Every base write (or every delta write) fails before it is applied, or
    // is applied and reported failed, from step 40 on: the run then has a
    // base (written at about 34 receipts) that later deltas may name.
    for folder in ["checkpoint", "deltas"] {
        for fault in [
            FaultRule::fail_before(RequestKind::Create),
            FaultRule::fail_after(RequestKind::Create),
        ] {
            let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
            let objects: Arc<dyn ObjectStore> = faults.clone();
            let counting = Arc::new(CountingStore::new(objects.clone()));
            let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
            let run_id = run_of(&writer, "crashing", 40).await;
            assert_eq!(bases(objects.as_ref(), &run_id).await.len(), 1);
            let name = format!("/{folder}/");
            faults.inject(fault.matching(move |path| path.as_ref().contains(&name)));
            for sequence in 40..140 {
                writer
                    .atomic_apply(&run_id, step(&run_id, sequence))
                    .await
                    .unwrap();
            }
            drop(writer);
            faults.clear_faults();

            // A fresh reader uses the newest delta: it names a base that
            // exists (else the reader would list the bases too).
            let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
            let loaded = load(&fresh, &run_id).await;
            assert_eq!(loaded.receipts.len(), 140, "{folder}");
            let c = counting.counts();
            assert_eq!(c.lists + c.lists_with_offset, 2, "{folder}: {c:?}");
            fresh
                .atomic_apply(&run_id, step(&run_id, 140))
                .await
                .unwrap();
            let after = load(
                &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
                &run_id,
            )
            .await;
            assert_eq!(after.receipts.len(), 141, "{folder}");
            assert_eq!(
                after,
                read_without_deltas(&objects, &run_id).await,
                "{folder}"
            );
            assert_eq!(
                after,
                folded_from_the_log_alone(&objects, &run_id).await,
                "{folder}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deltas_racing_another_instances_commits_and_bases_lose_and_reorder_nothing() {
    for (name, objects, _dir) in shared_objects() {
        let run_id = run("racing-bases");
        let setup = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        create(&setup, &run_id, b"input").await;
        start(&setup, &run_id).await;
        // One process commits steps (writing bases as the receipts grow)
        // while another appends inputs, each writing deltas at its own
        // interval over bases it read or wrote.
        let stepper = {
            let store = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
            let run_id = run_id.clone();
            tokio::spawn(async move {
                for sequence in 0..200 {
                    let commit = step(&run_id, sequence);
                    store.atomic_apply(&run_id, commit).await.unwrap();
                }
            })
        };
        let signaller = {
            let store =
                ObjectStoreRuntimeStore::new(objects.clone(), PREFIX).with_checkpoint_interval(3);
            let run_id = run_id.clone();
            tokio::spawn(async move {
                for i in 0..60 {
                    let input = signal(format!("s-{i}"));
                    store.append_input(&run_id, input).await.unwrap();
                }
            })
        };
        stepper.await.unwrap();
        signaller.await.unwrap();
        let fresh = load(
            &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
            &run_id,
        )
        .await;
        assert_eq!(fresh.receipts.len(), 200, "{name}");
        let sequences: Vec<u64> = fresh.receipts.iter().map(|r| r.sequence).collect();
        assert_eq!(sequences, (0..200).collect::<Vec<_>>(), "{name}");
        let inputs: Vec<_> = fresh.inputs.iter().map(|i| i.input_id.clone()).collect();
        assert_eq!(
            inputs,
            (0..60).map(|i| format!("s-{i}")).collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(fresh.snapshot.as_deref(), Some(&b"after 199"[..]), "{name}");
        assert_eq!(
            fresh,
            read_without_deltas(&objects, &run_id).await,
            "{name}: the deltas disagree with the bases"
        );
        assert_eq!(
            fresh,
            folded_from_the_log_alone(&objects, &run_id).await,
            "{name}: the checkpoints disagree with the log"
        );
    }
}

#[tokio::test]
async fn a_reader_that_knows_only_bases_and_data_with_bases_only_read_the_same_run() {
    for (name, objects, _dir) in shared_objects() {
        let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let run_id = run_of(&writer, "bases-only", 301).await;
        writer
            .append_input(&run_id, signal("late".into()))
            .await
            .unwrap();
        let open = load(
            &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
            &run_id,
        )
        .await;
        assert_eq!(open.receipts.len(), 301, "{name}");
        assert!(!bases(objects.as_ref(), &run_id).await.is_empty(), "{name}");
        // Without its deltas the run is what the release before deltas
        // wrote: read from the newest base and the longer tail after it.
        assert_eq!(open, read_without_deltas(&objects, &run_id).await, "{name}");
        // A writer that knows deltas takes that data on and writes them.
        let fresh = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        for sequence in 301..305 {
            let commit = step(&run_id, sequence);
            fresh.atomic_apply(&run_id, commit).await.unwrap();
        }
        fresh.atomic_apply(&run_id, done(9_999)).await.unwrap();
        let finished = load(
            &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
            &run_id,
        )
        .await;
        assert_eq!(finished.receipts.len(), 305, "{name}");
        let newest = deltas(objects.as_ref(), &run_id).await.pop().unwrap();
        assert_eq!(delta_position(&newest), 308, "{name}: {newest}");
        assert_eq!(
            finished,
            read_without_deltas(&objects, &run_id).await,
            "{name}"
        );
        assert_eq!(
            finished,
            folded_from_the_log_alone(&objects, &run_id).await,
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_writer_that_loses_a_delta_race_deletes_no_base_the_winner_names() {
    let faults = Arc::new(FaultInjectingStore::new(InMemory::new()));
    let objects: Arc<dyn ObjectStore> = faults.clone();
    // A delta after every entry, so both writers write one at each position.
    let instance =
        || ObjectStoreRuntimeStore::new(objects.clone(), PREFIX).with_checkpoint_interval(1);
    let (a, b) = (instance(), instance());
    let run_id = run_of(&a, "lost-race", 40).await;
    let first_base = bases(objects.as_ref(), &run_id).await;
    assert_eq!(first_base.len(), 1);
    // A's later bases fail to be written, so its deltas keep naming the first.
    faults.inject(
        FaultRule::fail_before(RequestKind::Create)
            .matching(|path| path.as_ref().contains("/checkpoint/")),
    );
    for sequence in 40..99 {
        let commit = step(&run_id, sequence);
        a.atomic_apply(&run_id, commit).await.unwrap();
    }
    b.load_run(&run_id).await.unwrap();
    a.atomic_apply(&run_id, step(&run_id, 99)).await.unwrap();
    faults.clear_faults();
    // B commits the same step (its log entry is A's) and writes a new base,
    // but A's delta at that position, naming the first base, stands.
    b.atomic_apply(&run_id, step(&run_id, 99)).await.unwrap();
    assert_eq!(bases(objects.as_ref(), &run_id).await.len(), 2);
    assert!(
        bases(objects.as_ref(), &run_id)
            .await
            .contains(&first_base[0])
    );

    let counting = Arc::new(CountingStore::new(objects.clone()));
    let fresh = load(
        &ObjectStoreRuntimeStore::new(counting.clone(), PREFIX),
        &run_id,
    )
    .await;
    assert_eq!(fresh.receipts.len(), 100);
    // The delta listing and the log's: the newest delta's base is there.
    let c = counting.counts();
    assert_eq!(c.lists + c.lists_with_offset, 2, "{c:?}");
    assert_eq!(fresh, folded_from_the_log_alone(&objects, &run_id).await);
}

#[tokio::test]
async fn a_delta_whose_base_is_gone_is_read_around_and_replaced_by_the_next_writer() {
    for (name, objects, _dir) in shared_objects() {
        let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let run_id = run_of(&writer, "base-gone", 100).await;
        let expected = load(&writer, &run_id).await;
        // The base the newest delta names is deleted, as by a writer that
        // moved on to a newer base while another was behind.
        delete_all(&objects, bases(objects.as_ref(), &run_id).await).await;
        let fresh = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        assert_eq!(load(&fresh, &run_id).await, expected, "{name}");
        // Its next commit writes a delta that reads again, newer than the
        // unusable one.
        fresh
            .atomic_apply(&run_id, step(&run_id, 100))
            .await
            .unwrap();
        let newest = deltas(objects.as_ref(), &run_id).await.pop().unwrap();
        assert_eq!(delta_position(&newest), 102, "{name}: {newest}");
        let counting = Arc::new(CountingStore::new(objects.clone()));
        let again = load(
            &ObjectStoreRuntimeStore::new(counting.clone(), PREFIX),
            &run_id,
        )
        .await;
        assert_eq!(again.receipts.len(), 101, "{name}");
        let c = counting.counts();
        assert_eq!(c.lists + c.lists_with_offset, 2, "{name}: {c:?}");
        assert_eq!(
            again,
            folded_from_the_log_alone(&objects, &run_id).await,
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_damaged_delta_or_base_is_an_error_naming_it_never_a_shorter_run() {
    for folder in ["deltas", "checkpoint"] {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let run_id = run_of(&writer, "damaged", 100).await;
        // The base, or the newest delta (listed first: each is kept).
        let damaged = objects_in(objects.as_ref(), &run_id, folder).await;
        assert!(!damaged.is_empty(), "{folder}");
        let path = &damaged[0];
        let mut bytes = objects
            .get(path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x10;
        objects.put(path, bytes.into()).await.unwrap();
        let fresh = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        match fresh.load_run(&run_id).await {
            Err(Error::Corrupt { path: at, .. }) => assert_eq!(at, path.to_string()),
            other => panic!("{folder}: expected Corrupt at {path}, got {other:?}"),
        }
    }
}

/// A step of 256 bytes of output, as the `runs` bench writes them.
fn large_step(run_id: &RunId, sequence: u64) -> Commit {
    let receipt = StepReceipt {
        run_id: run_id.clone(),
        sequence,
        step: "step".into(),
        output: Bytes::from(vec![7u8; 256]),
        recorded_at_ms: 2,
        error: None,
        retries: 0,
        last_retried_error: None,
    };
    Commit::step(receipt, 2)
}

#[tokio::test]
async fn a_finished_run_of_a_thousand_steps_uploads_a_few_copies_of_itself_not_dozens() {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let writer = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    let run_id = run_of(&writer, "uploads", 0).await;
    for sequence in 0..1_000 {
        let commit = large_step(&run_id, sequence);
        writer.atomic_apply(&run_id, commit).await.unwrap();
    }
    writer.atomic_apply(&run_id, done(9_999)).await.unwrap();
    let uploaded = counting.counts().bytes_put;
    println!("a finished 1,000-step run uploaded {uploaded} bytes");
    // The run itself (its log, and one copy in the final delta) is about
    // 0.8 MB; whole-run checkpoints every few entries uploaded 36.6 MB.
    assert!(uploaded < 8_000_000, "{uploaded} bytes uploaded");
}

#[tokio::test]
async fn two_processes_writing_one_run_in_turns_across_checkpoints_agree_with_the_log() {
    for (name, objects, _dir) in shared_objects() {
        let a = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX).with_checkpoint_interval(3);
        let b = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX).with_checkpoint_interval(4);
        let run_id = run("in-turns");
        create(&a, &run_id, b"input").await;
        start(&a, &run_id).await;
        for sequence in 0..40 {
            let writer = if sequence % 2 == 0 { &a } else { &b };
            writer
                .atomic_apply(&run_id, step(&run_id, sequence))
                .await
                .unwrap();
            if sequence % 5 == 0 {
                writer
                    .append_input(&run_id, signal(format!("s{sequence}")))
                    .await
                    .unwrap();
            }
            // A commit both processes make: one entry, the other a retry.
            if sequence % 7 == 0 {
                let commit = step(&run_id, sequence);
                let other = if sequence % 2 == 0 { &b } else { &a };
                other.atomic_apply(&run_id, commit).await.unwrap();
            }
        }
        a.atomic_apply(&run_id, done(100)).await.unwrap();
        let fresh = load(
            &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
            &run_id,
        )
        .await;
        assert_eq!(fresh.receipts.len(), 40, "{name}");
        assert_eq!(fresh.inputs.len(), 8, "{name}");
        assert_eq!(fresh.snapshot.as_deref(), Some(&b"after 39"[..]), "{name}");
        assert_eq!(load(&a, &run_id).await, fresh, "{name}: a");
        assert_eq!(load(&b, &run_id).await, fresh, "{name}: b");
        assert_eq!(
            fresh,
            folded_from_the_log_alone(&objects, &run_id).await,
            "{name}: the checkpoints disagree with the log"
        );
    }
}

#[tokio::test]
async fn a_run_created_again_after_deletion_never_reads_the_old_checkpoints() {
    for (name, objects, _dir) in shared_objects() {
        let old = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let run_id = run_of(&old, "reused", 40).await;
        let finished = old.atomic_apply(&run_id, done(50)).await.unwrap();
        assert!(!bases(objects.as_ref(), &run_id).await.is_empty(), "{name}");
        assert!(
            !deltas(objects.as_ref(), &run_id).await.is_empty(),
            "{name}"
        );
        assert!(old.delete_run(&run_id, finished.incarnation).await.unwrap());
        assert!(
            checkpoints(objects.as_ref(), &run_id).await.is_empty(),
            "{name}: deleting the run left checkpoints"
        );

        // Another process creates the id again; the first one, whose cache
        // held the old run, and a fresh one both see only the new run.
        let other = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let reborn = create(&other, &run_id, b"new input").await;
        assert_ne!(reborn.incarnation, finished.incarnation);
        for store in [
            &old,
            &other,
            &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
        ] {
            let loaded = load(store, &run_id).await;
            let record = loaded.record.unwrap();
            assert_eq!(record.incarnation, reborn.incarnation, "{name}");
            assert_eq!(record.input.as_ref(), b"new input", "{name}");
            assert_eq!(record.status, RunStatus::Pending, "{name}");
            assert!(loaded.receipts.is_empty(), "{name}");
            assert_eq!(loaded.snapshot, None, "{name}");
        }
    }
}

#[tokio::test]
async fn the_run_cache_keeps_a_run_in_use_while_many_others_are_loaded_once() {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    // No checkpoint falls due in this test: it counts the cache's requests.
    let store = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX)
        .with_cached_runs(8)
        .with_checkpoint_interval(1_000);
    let busy = run_of(&store, "busy", 3).await;
    for i in 0..100 {
        let other = run(&format!("other-{i}"));
        create(&store, &other, b"input").await;
        assert!(store.load_run(&other).await.unwrap().is_some());
        // The busy run is used between the others, as a worker uses the
        // runs it executes while recovery or a listing reads many more.
        store.load_run(&busy).await.unwrap();
    }
    counting.reset();
    store.atomic_apply(&busy, step(&busy, 3)).await.unwrap();
    let c = counting.counts();
    // Still cached: the entry and the pointer check, no fold from storage.
    assert_eq!((c.creates, c.gets, c.lists), (1, 1, 0), "{c:?}");
}

#[tokio::test]
async fn the_run_cache_is_bounded_by_bytes_so_large_runs_do_not_fill_memory() {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let store =
        ObjectStoreRuntimeStore::new(counting.clone(), PREFIX).with_run_cache_bytes(1 << 20);
    // Ten finished runs of 300 KB each, 3 MB in all, and a hundred small ones.
    let mut large = Vec::new();
    for i in 0..10 {
        let run_id = run_of(&store, &format!("large-{i}"), 0).await;
        let mut commit = large_step(&run_id, 0);
        commit.receipt.as_mut().unwrap().output = Bytes::from(vec![7u8; 300_000]);
        store.atomic_apply(&run_id, commit).await.unwrap();
        store.atomic_apply(&run_id, done(9_999)).await.unwrap();
        large.push(run_id);
    }
    let mut small = Vec::new();
    for i in 0..100 {
        let run_id = run(&format!("small-{i}"));
        create(&store, &run_id, b"input").await;
        assert!(store.load_run(&run_id).await.unwrap().is_some());
        small.push(run_id);
    }
    counting.reset();
    for run_id in &small {
        store.load_run(run_id).await.unwrap();
    }
    // A hundred small runs fit in the budget: no fold from storage.
    let listings = |c: RequestCounts| c.lists + c.lists_with_offset;
    assert_eq!(listings(counting.counts()), 0, "{:?}", counting.counts());
    for run_id in &large {
        assert_eq!(store.load_receipts(run_id, None).await.unwrap().len(), 1);
    }
    // A count of runs kept all ten; a budget of 1 MB keeps few of them.
    let folded = listings(counting.counts());
    assert!(folded >= 8, "{folded} of 10 large runs folded again");
}

/// A runtime over `objects`, with a fresh runtime-store instance: a process
/// that just started.
fn fresh_runtime(objects: Arc<dyn ObjectStore>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), PREFIX))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, PREFIX)))
        .clock(Arc::new(ManualClock::new(1_000)))
        .build()
        .unwrap()
}

async fn count_steps(ctx: Context, steps: u64) -> Result<u64, Error> {
    let mut sum = 0;
    for i in 0..steps {
        sum += ctx
            .step(
                format!("step-{i}"),
                |_memo| async move { Ok::<_, Error>(i) },
            )
            .await?;
    }
    Ok(sum)
}

#[tokio::test]
async fn a_fresh_runtime_answers_a_finished_workflow_of_any_length_in_a_bounded_number_of_requests()
{
    let workflow = Workflow::new("count", count_steps);
    for steps in [10u64, 1_000] {
        let counting = Arc::new(CountingStore::new(InMemory::new()));
        let run_id = run("counted");
        let first = fresh_runtime(counting.clone());
        let sum = first.run(&run_id, &steps, &workflow).await.unwrap();
        assert_eq!(sum, steps * (steps - 1) / 2);

        let restarted = fresh_runtime(counting.clone());
        counting.reset();
        let again = restarted.run(&run_id, &steps, &workflow).await.unwrap();
        assert_eq!(again, sum);
        let c = counting.counts();
        println!("a finished {steps}-step workflow, run again by a fresh runtime: {c:?}");
        assert!(
            total(c) <= 10,
            "{steps} steps: {} requests: {c:?}",
            total(c)
        );
    }
}

#[tokio::test]
async fn recover_reads_nothing_of_the_retained_terminal_runs() {
    let workflow = Workflow::new("count", count_steps);
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let first = fresh_runtime(counting.clone());
    for i in 0..20 {
        first
            .run(&run(&format!("done-{i}")), &3u64, &workflow)
            .await
            .unwrap();
    }
    let restarted = fresh_runtime(counting.clone());
    counting.reset();
    let recovery = restarted.recover(&workflow).await.unwrap();
    assert_eq!((recovery.resumed.len(), recovery.remarked), (0, 0));
    let c = counting.counts();
    // A listing of the due-run index and a page of each open status (none
    // of the markers or of the ended runs); the conditional-create probe's
    // few requests; no read of any of the 20 runs.
    assert!(c.gets <= 3, "{c:?}");
    assert_eq!(c.lists, 3, "{c:?}");
    assert_eq!(c.objects_listed, 0, "{c:?}");
}

#[tokio::test]
async fn listing_runs_gives_summaries_with_their_step_counts() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    let run_id = run_of(&writer, "listed", 12).await;
    let fresh = ObjectStoreRuntimeStore::new(objects, PREFIX);
    let listed = fresh.list_runs(RunStatus::Running).await.unwrap();
    assert_eq!(listed.len(), 1);
    let summary = &listed[0];
    assert_eq!(
        (&summary.run_id, summary.steps, summary.attempts),
        (&run_id, 12, 1)
    );
    assert_eq!(summary.workflow, "w");
}

/// A deletion removes the run pointer first and the log after it, so a
/// fresh instance folding the run while another process deletes it finds
/// log entries gone: the run is gone, not corrupt. (A simulation seed once
/// reported "log entry 0 missing" for a run a retention sweep deleted.)
#[tokio::test]
async fn a_run_deleted_while_a_fresh_instance_folds_it_is_read_as_gone_not_corrupt() {
    let objects = Arc::new(InMemory::new());
    let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    let run_id = run_of(&writer, "doomed", 2).await;
    let doomed = paths_under(objects.as_ref(), &format!("{PREFIX}/runs/{run_id}")).await;
    assert!(doomed.iter().any(|p| p.as_ref().contains("/log/")));
    let faults = Arc::new(FaultInjectingStore::new(objects.clone()));
    let deleted = std::sync::atomic::AtomicBool::new(false);
    // When the fresh instance reads its first log entry, another process
    // has just deleted the whole run (InMemory answers at once).
    faults.inject(
        FaultRule::fail_before(RequestKind::Get).matching(move |path| {
            if path.as_ref().contains("/log/") && !deleted.swap(true, Ordering::SeqCst) {
                for path in &doomed {
                    objects.delete(path).now_or_never().unwrap().unwrap();
                }
            }
            false
        }),
    );
    let fresh = ObjectStoreRuntimeStore::new(faults, PREFIX);
    assert_eq!(fresh.load_run(&run_id).await.unwrap(), None);
}

/// A process that cached a run (`cached`), and another (`other`) that
/// commits `behind` more steps to it meanwhile, on one counted bucket.
async fn a_cached_run_left_behind(
    behind: u64,
) -> (Arc<CountingStore<InMemory>>, ObjectStoreRuntimeStore, RunId) {
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let cached = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    let run_id = run_of(&cached, "left-behind", 3).await;
    assert_eq!(cached.load_receipts(&run_id, None).await.unwrap().len(), 3);
    let other = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    for sequence in 3..3 + behind {
        other
            .atomic_apply(&run_id, step(&run_id, sequence))
            .await
            .unwrap();
    }
    counting.reset();
    (counting, cached, run_id)
}

#[tokio::test]
async fn a_cached_run_that_fell_far_behind_is_read_from_its_checkpoints_not_entry_by_entry() {
    // Every tail length after the newest delta, as in the fresh-load test.
    for behind in 300..304 {
        let (counting, cached, run_id) = a_cached_run_left_behind(behind).await;
        assert_eq!(cached.load_run(&run_id).await.unwrap().unwrap().attempts, 1);
        // Within a fresh load's bound: one read to learn the run moved on,
        // then the fold a fresh instance makes (its pointer read comes last
        // here, and the base is not read where the cache holds it).
        let reading = total(counting.counts());
        assert!(reading <= 9, "{behind} behind: reading took {reading}");
        let receipts = cached.load_receipts(&run_id, None).await.unwrap();
        assert_eq!(receipts.len() as u64, 3 + behind);

        counting.reset();
        let next = 3 + behind;
        cached
            .atomic_apply(&run_id, step(&run_id, next))
            .await
            .unwrap();
        let c = counting.counts();
        // The entry and the pointer check, and maybe a delta and a base
        // (deleting what they supersede is tidying, not counted).
        assert!(
            total(c) - c.delete_streams <= 4,
            "{behind} behind: committing took {c:?}"
        );

        let objects: Arc<dyn ObjectStore> = counting.clone();
        let read = load(&cached, &run_id).await;
        assert_eq!(read, folded_from_the_log_alone(&objects, &run_id).await);
    }
}

#[tokio::test]
async fn a_commit_to_a_cached_run_that_fell_far_behind_costs_what_a_fresh_instances_does() {
    for behind in 300..304 {
        // A step commit, which the stale cache refuses as out of order, and
        // a signal, which it accepts and whose create finds the position
        // taken: both catch up from the checkpoints.
        let (counting, cached, run_id) = a_cached_run_left_behind(behind).await;
        let next = 3 + behind;
        cached
            .atomic_apply(&run_id, step(&run_id, next))
            .await
            .unwrap();
        let stepping = counting.counts();

        let (counting, cached, run_id) = a_cached_run_left_behind(behind).await;
        let input = cached
            .append_input(&run_id, signal("late".into()))
            .await
            .unwrap();
        assert_eq!(input.input_id, "late");
        let signalling = counting.counts();
        let (stepping, signalling) = (
            total(stepping) - stepping.delete_streams,
            total(signalling) - signalling.delete_streams,
        );

        // A fresh instance's commit: the fold (at most 8) and the commit
        // (the entry, the pointer check, maybe a delta and a base). The
        // signal also makes the create that found its position taken and
        // the read-back that tells another writer's entry from its own: the
        // pointer read before it catches up (so that it never folds the
        // leftovers of a deleted run) stands for the fresh fold's.
        assert!(
            stepping <= 12 && signalling <= 12 + 2,
            "{behind} behind: a step took {stepping} requests, a signal {signalling}"
        );
        let objects: Arc<dyn ObjectStore> = counting.clone();
        let read = load(&cached, &run_id).await;
        assert_eq!(read.receipts.len() as u64, 3 + behind);
        assert_eq!(read, folded_from_the_log_alone(&objects, &run_id).await);
    }
}

/// A run's state as checkpoints store it, restated here to forge them (the
/// format is `RunState` in `runtime_store/state/`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct StoredState {
    record: RunRecord,
    receipts: Vec<StepReceipt>,
    commit_digests: Bytes,
    snapshot: Option<Bytes>,
    inputs: Vec<InputRecord>,
    attempt_token: Option<u64>,
}

/// A stored base or delta (a base has no `base` nor `receipts_from`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct StoredCheckpoint {
    incarnation: Incarnation,
    next: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    receipts_from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inputs_from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    standings: Option<Vec<(u64, InputPhase, Option<u64>)>>,
    state: StoredState,
}

/// The frame every stored object has (see `envelope.rs`): magic, version,
/// flags, length, payload, CRC-32.
fn framed(payload: &[u8]) -> Bytes {
    let mut out = b"MEMO\x01\x00".to_vec();
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.into()
}

/// Rewrites the checkpoint at `path` as `forge` makes it, well framed and
/// well encoded, at `to` (a new position) or in place.
async fn forge(
    objects: &Arc<dyn ObjectStore>,
    path: &Path,
    to: Option<u64>,
    forge: impl FnOnce(&mut StoredCheckpoint),
) -> Path {
    let bytes = objects.get(path).await.unwrap().bytes().await.unwrap();
    let payload = memo_runtime::testing::open_frame(path, bytes, &Seal::default()).unwrap();
    let mut stored: StoredCheckpoint = rmp_serde::from_slice(&payload).unwrap();
    forge(&mut stored);
    let to = match to {
        Some(position) => {
            stored.next = position;
            let folder = path.as_ref().rsplit_once('/').unwrap().0;
            // Deltas under `deltas/` are named newest first.
            let name = if folder.ends_with("/deltas") {
                u64::MAX - position
            } else {
                position
            };
            Path::from(format!("{folder}/{name:020}"))
        }
        None => path.clone(),
    };
    let payload = rmp_serde::to_vec_named(&stored).unwrap();
    objects.put(&to, framed(&payload).into()).await.unwrap();
    to
}

/// A fresh instance's load of the run, expected to be `Corrupt` at `at`.
async fn assert_corrupt_at(objects: &Arc<dyn ObjectStore>, run_id: &RunId, at: &Path, case: &str) {
    let fresh = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    match fresh.load_run(run_id).await {
        Err(Error::Corrupt { path, reason }) => {
            assert_eq!(path, at.to_string(), "{case}: {reason}");
        }
        other => panic!("{case}: expected Corrupt at {at}, got {other:?}"),
    }
}

/// An open run of 100 steps (a base and a delta that names it) and a
/// finished one of 10 (a whole-run delta, no base), each with only the
/// checkpoint (the newest delta, or the base) a load reads first.
async fn forgeable(objects: &Arc<dyn ObjectStore>, finished: bool) -> (RunId, Path) {
    let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    if finished {
        let run_id = run_of(&writer, "forged-finished", 10).await;
        writer.atomic_apply(&run_id, done(9_999)).await.unwrap();
        let delta = deltas(objects.as_ref(), &run_id).await.pop().unwrap();
        return (run_id, delta);
    }
    let run_id = run_of(&writer, "forged-open", 100).await;
    // Read from the base alone.
    delete_all(objects, deltas(objects.as_ref(), &run_id).await).await;
    let base = bases(objects.as_ref(), &run_id).await.pop().unwrap();
    (run_id, base)
}

#[tokio::test]
async fn a_checkpoint_with_receipts_but_no_digests_is_corrupt_and_a_retried_commit_does_not_panic()
{
    for finished in [false, true] {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (run_id, path) = forgeable(&objects, finished).await;
        forge(&objects, &path, None, |c| {
            c.state.commit_digests = Bytes::new()
        })
        .await;
        assert_corrupt_at(&objects, &run_id, &path, "no digests").await;
        // A retry of a committed step is judged against the digests.
        let fresh = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let retried = fresh.atomic_apply(&run_id, step(&run_id, 0)).await;
        assert!(matches!(retried, Err(Error::Corrupt { .. })), "{retried:?}");
    }
}

#[tokio::test]
async fn a_checkpoint_at_the_last_log_position_is_corrupt_not_an_overflow() {
    for finished in [false, true] {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (run_id, path) = forgeable(&objects, finished).await;
        let last = forge(&objects, &path, Some(u64::MAX), |_| {}).await;
        assert_corrupt_at(&objects, &run_id, &last, "at u64::MAX").await;
    }
}

#[tokio::test]
async fn a_checkpoint_of_the_largest_attempt_number_is_corrupt_not_an_overflow() {
    for finished in [false, true] {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (run_id, path) = forgeable(&objects, finished).await;
        forge(&objects, &path, None, |c| {
            c.state.record.attempts = u32::MAX
        })
        .await;
        assert_corrupt_at(&objects, &run_id, &path, "u32::MAX attempts").await;
    }
}

#[tokio::test]
async fn a_checkpoint_whose_receipts_skip_a_sequence_is_corrupt() {
    for finished in [false, true] {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (run_id, path) = forgeable(&objects, finished).await;
        forge(&objects, &path, None, |c| {
            let receipts = &mut c.state.receipts;
            let last = receipts.len() - 1;
            receipts[last].sequence += 1;
        })
        .await;
        assert_corrupt_at(&objects, &run_id, &path, "a gap").await;
    }
}

#[tokio::test]
async fn a_checkpoint_that_holds_one_input_twice_is_corrupt() {
    for finished in [false, true] {
        let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (run_id, path) = forgeable(&objects, finished).await;
        forge(&objects, &path, None, |c| {
            let input: InputRecord = serde_json::from_value(serde_json::json!({
                "input_id": "twice", "name": "signal", "payload": [1],
                "phase": "Accepted", "consumed_by": null, "accepted_at_ms": 5,
            }))
            .unwrap();
            c.state.inputs = vec![input.clone(), input];
        })
        .await;
        assert_corrupt_at(&objects, &run_id, &path, "an input twice").await;
    }
}

#[tokio::test]
async fn a_flood_of_signals_to_one_run_writes_a_few_times_their_bytes_not_their_square() {
    const SIGNALS: usize = 256;
    const PAYLOAD: usize = 4 * 1024;
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let store = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    let run_id = run_of(&store, "flooded", 0).await;
    counting.reset();
    for i in 0..SIGNALS {
        let input = NewInput {
            input_id: format!("signal-{i}"),
            name: "signal".into(),
            payload: Bytes::from(vec![9u8; PAYLOAD]),
            accepted_at_ms: 5,
        };
        store.append_input(&run_id, input).await.unwrap();
    }
    let written = counting.counts().bytes_put;
    let ratio = written as f64 / (SIGNALS * PAYLOAD) as f64;
    println!("{SIGNALS} signals of {PAYLOAD} bytes wrote {written} bytes ({ratio:.1}x)");
    // The log holds each once; bases and deltas about as much again each
    // few dozen signals. Deltas that copied every input wrote 34 times.
    assert!(
        ratio < 12.0,
        "{written} bytes written: {ratio:.1} times the payloads"
    );
    let objects: Arc<dyn ObjectStore> = counting.clone();
    let read = load(
        &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
        &run_id,
    )
    .await;
    assert_eq!(read.inputs.len(), SIGNALS);
    assert_eq!(read, folded_from_the_log_alone(&objects, &run_id).await);
}

/// The run as a fresh instance reads it from its checkpoints, checked
/// against what its log alone says (without removing the checkpoints).
async fn assert_checkpoints_agree_with_the_log(
    objects: &Arc<dyn ObjectStore>,
    run_id: &RunId,
    case: &str,
) -> Loaded {
    let fresh = load(
        &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
        run_id,
    )
    .await;
    // A copy of the objects without checkpoints: the log alone.
    let copy: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    for path in paths_under(objects.as_ref(), PREFIX).await {
        let bytes = objects.get(&path).await.unwrap().bytes().await.unwrap();
        copy.put(&path, bytes.into()).await.unwrap();
    }
    assert_eq!(
        fresh,
        folded_from_the_log_alone(&copy, run_id).await,
        "{case}"
    );
    fresh
}

#[tokio::test]
async fn signals_consumed_and_abandoned_across_bases_and_deltas_read_as_the_log_says() {
    for (name, objects, _dir) in shared_objects() {
        let a = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX).with_checkpoint_interval(3);
        let b = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let run_id = run("signalled");
        create(&a, &run_id, b"input").await;
        start(&a, &run_id).await;
        // Two signals a step, each taken a few steps later (consumed or
        // abandoned), by two processes in turns: bases fall due with the
        // inputs, and later deltas move the inputs their base holds.
        for sequence in 0..60u64 {
            let writer = if sequence % 3 == 0 { &b } else { &a };
            for k in 0..2 {
                let id = format!("s{sequence}-{k}");
                writer.append_input(&run_id, signal(id)).await.unwrap();
            }
            let mut commit = step(&run_id, sequence);
            if let Some(earlier) = sequence.checked_sub(5) {
                commit = commit
                    .with_input_update(format!("s{earlier}-0"), InputPhase::Consumed)
                    .with_input_update(format!("s{earlier}-1"), InputPhase::Abandoned);
            }
            writer.atomic_apply(&run_id, commit).await.unwrap();
            if sequence % 10 == 9 {
                let case = format!("{name}: after step {sequence}");
                assert_checkpoints_agree_with_the_log(&objects, &run_id, &case).await;
            }
        }
        assert!(!bases(objects.as_ref(), &run_id).await.is_empty(), "{name}");
        let open = assert_checkpoints_agree_with_the_log(&objects, &run_id, name).await;
        assert_eq!(open.inputs.len(), 120, "{name}");
        let consumed = open
            .inputs
            .iter()
            .filter(|i| i.phase == InputPhase::Consumed);
        assert_eq!(consumed.count(), 55, "{name}");
        assert_eq!(load(&a, &run_id).await, open, "{name}: a");
        assert_eq!(load(&b, &run_id).await, open, "{name}: b");
        a.atomic_apply(&run_id, done(100)).await.unwrap();
        assert_checkpoints_agree_with_the_log(&objects, &run_id, name).await;
    }
}

#[tokio::test]
async fn a_delta_written_before_inputs_were_kept_in_bases_is_still_read() {
    let objects: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    let run_id = run_of(&writer, "old-delta", 0).await;
    for sequence in 0..80 {
        writer
            .append_input(&run_id, signal(format!("s{sequence}")))
            .await
            .unwrap();
        let commit =
            step(&run_id, sequence).with_input_update(format!("s{sequence}"), InputPhase::Queued);
        writer.atomic_apply(&run_id, commit).await.unwrap();
    }
    // Steps, which move no input, until the newest delta covers the whole
    // log: the one forged below holds every input as the run's end has it.
    let mut sequence = 80;
    while delta_position(deltas(objects.as_ref(), &run_id).await.last().unwrap())
        < objects_in(objects.as_ref(), &run_id, "log").await.len() as u64
    {
        (writer.atomic_apply(&run_id, step(&run_id, sequence)).await).unwrap();
        sequence += 1;
    }
    let expected = assert_checkpoints_agree_with_the_log(&objects, &run_id, "new form").await;
    // Rewrite the newest delta as the release before inputs were kept in
    // bases wrote it: directly under `delta/`, every input in its state, no
    // `inputs_from`, and no delta of a later form.
    let mut all = deltas(objects.as_ref(), &run_id).await;
    let newest = all.pop().unwrap();
    assert!(newest.as_ref().contains("/deltas/"), "{newest}");
    delete_all(&objects, all).await;
    let bytes = objects.get(&newest).await.unwrap().bytes().await.unwrap();
    let payload = memo_runtime::testing::open_frame(&newest, bytes, &Seal::default()).unwrap();
    let stored: StoredCheckpoint = rmp_serde::from_slice(&payload).unwrap();
    assert!(
        stored.inputs_from.unwrap() > 0,
        "the delta leaves inputs to its base"
    );
    let folder = newest.as_ref().replace("/deltas/", "/delta/");
    let folder = folder.rsplit_once('/').unwrap().0;
    let old_path = Path::from(format!("{folder}/{:020}", delta_position(&newest)));
    let forged = forge(&objects, &newest, None, |d| {
        d.inputs_from = None;
        d.standings = None;
        d.state.inputs = expected.inputs.clone();
    })
    .await;
    let old_bytes = objects.get(&forged).await.unwrap().bytes().await.unwrap();
    objects.put(&old_path, old_bytes.into()).await.unwrap();
    objects.delete(&forged).await.unwrap();

    let counting = Arc::new(CountingStore::new(objects.clone()));
    let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    fresh.load_run(&run_id).await.unwrap();
    // The old delta was read: the pointer, the delta, its base and the
    // short tail after it (the base alone leaves dozens of entries).
    let c = counting.counts();
    assert!(c.gets <= 6, "{c:?}");
    assert_eq!(load(&fresh, &run_id).await, expected);
    // A writer of this release takes the run on with a delta of its own.
    for sequence in sequence..sequence + 4 {
        fresh
            .atomic_apply(&run_id, step(&run_id, sequence))
            .await
            .unwrap();
    }
    let newest = deltas(objects.as_ref(), &run_id).await.pop().unwrap();
    assert!(newest.as_ref().contains("/deltas/"), "{newest}");
    assert_checkpoints_agree_with_the_log(&objects, &run_id, "taken on").await;
}

#[tokio::test]
async fn a_cached_run_behind_a_delta_whose_base_is_gone_catches_up_as_a_fresh_load_does() {
    let (counting, cached, run_id) = a_cached_run_left_behind(300).await;
    let objects: Arc<dyn ObjectStore> = counting.clone();
    // The newest delta names a base that is gone (its writer was behind).
    let newest = deltas(objects.as_ref(), &run_id).await.pop().unwrap();
    forge(&objects, &newest, None, |d| d.base = Some(Some(1))).await;

    let fresh = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
    counting.reset();
    fresh.load_run(&run_id).await.unwrap();
    let fresh_cost = total(counting.counts());
    counting.reset();
    cached.load_run(&run_id).await.unwrap();
    let catching_up = total(counting.counts());
    // The newest base and the log after it, as the fresh load reads them,
    // and the one read that tells the cache it is behind.
    assert!(
        catching_up <= fresh_cost + 1,
        "catching up took {catching_up} requests, a fresh load {fresh_cost}"
    );
    assert_eq!(load(&cached, &run_id).await, load(&fresh, &run_id).await);
}

/// The requests `store` makes to read the run as an operator or the
/// simulator's long-lived reader does (its record, then its receipts), and
/// the record read.
async fn read_counted(
    store: &ObjectStoreRuntimeStore,
    counting: &CountingStore<InMemory>,
    run_id: &RunId,
) -> (u64, Option<RunRecord>) {
    counting.reset();
    let record = store.load_run(run_id).await.unwrap();
    store.load_receipts(run_id, None).await.unwrap();
    (total(counting.counts()), record)
}

/// What a `delete_run` of the finished run that stopped part-way leaves:
/// its record and pointer gone (they go first), its checkpoints too, and its
/// whole log still there.
async fn delete_part_way(counting: &Arc<CountingStore<InMemory>>, run_id: &RunId) {
    let objects: Arc<dyn ObjectStore> = counting.clone();
    let folder = format!("{PREFIX}/runs/{run_id}");
    let gone: Vec<Path> = (paths_under(objects.as_ref(), &folder).await.into_iter())
        .filter(|path| !path.as_ref().contains("/log/"))
        .collect();
    assert!(gone.iter().any(|p| p.as_ref() == format!("{folder}/run")));
    delete_all(&objects, gone).await;
    assert!(!paths_under(objects.as_ref(), &folder).await.is_empty());
}

#[tokio::test]
async fn a_cached_read_of_a_run_deleted_part_way_and_created_again_costs_what_a_fresh_one_does() {
    // Simulation seeds 21, 23 and 58 of the deployment world: the long-lived
    // instance caught up on the deleted incarnation's leftover log (every
    // entry after its cached position) before it read the pointer.
    let (counting, cached, run_id) = a_cached_run_left_behind(300).await;
    let other = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    let finished = other.atomic_apply(&run_id, done(9_999)).await.unwrap();
    delete_part_way(&counting, &run_id).await;
    let reborn = create(&other, &run_id, b"new input").await;
    assert_ne!(reborn.incarnation, finished.incarnation);
    start(&other, &run_id).await;

    let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    let (fresh_cost, fresh_read) = read_counted(&fresh, &counting, &run_id).await;
    let (cached_cost, cached_read) = read_counted(&cached, &counting, &run_id).await;
    assert_eq!(cached_read, fresh_read);
    assert_eq!(cached_read.unwrap().incarnation, reborn.incarnation);
    // The pointer read first names the new run, which is then loaded as a
    // fresh instance loads it.
    assert!(
        cached_cost <= fresh_cost,
        "a cached read took {cached_cost} requests, a fresh one {fresh_cost}"
    );
}

#[tokio::test]
async fn a_cached_read_of_a_deleted_run_costs_what_a_fresh_one_does() {
    // Simulation seeds 114 and 235: a finished run, cached, then deleted:
    // with its pointer missing, reading it lists the id's folder (for a
    // pointer a stalled deletion removed), and the cached instance did that
    // twice (once to check its run, once to load it again).
    let counting = Arc::new(CountingStore::new(InMemory::new()));
    let cached = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    let run_id = run_of(&cached, "deleted", 3).await;
    let finished = cached.atomic_apply(&run_id, done(9_999)).await.unwrap();
    let other = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    assert!(
        other
            .delete_run(&run_id, finished.incarnation)
            .await
            .unwrap()
    );

    let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
    let (fresh_cost, fresh_read) = read_counted(&fresh, &counting, &run_id).await;
    let (cached_cost, cached_read) = read_counted(&cached, &counting, &run_id).await;
    assert_eq!((cached_read, fresh_read), (None, None));
    assert!(
        cached_cost <= fresh_cost,
        "a cached read took {cached_cost} requests, a fresh one {fresh_cost}"
    );
}

#[tokio::test]
async fn a_cached_read_of_a_run_that_moved_on_costs_one_request_more_than_a_fresh_one_at_most() {
    // The one request: the `GET` of the next log position, by which a cached
    // instance learns that the run moved on (the simulator's reader allows
    // exactly this one).
    for behind in [1, 2, 3, 4, 5, 40, 300, 301, 302, 303] {
        for finish in [false, true] {
            let (counting, cached, run_id) = a_cached_run_left_behind(behind).await;
            if finish {
                let other = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
                other.atomic_apply(&run_id, done(9_999)).await.unwrap();
            }
            let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
            let (fresh_cost, fresh_read) = read_counted(&fresh, &counting, &run_id).await;
            let (cached_cost, cached_read) = read_counted(&cached, &counting, &run_id).await;
            assert_eq!(cached_read, fresh_read);
            assert!(
                cached_cost <= fresh_cost + 1,
                "{behind} behind, finished {finish}: a cached read took {cached_cost} \
                 requests, a fresh one {fresh_cost}"
            );
        }
    }
}

#[tokio::test]
async fn an_older_delta_form_is_read_when_a_run_has_none_of_the_newest_first_form() {
    for (name, objects, _dir) in shared_objects() {
        let writer = ObjectStoreRuntimeStore::new(objects.clone(), PREFIX);
        let run_id = run_of(&writer, "v2-delta", 100).await;
        let expected = load(&writer, &run_id).await;
        // The run as the release before wrote it: its newest delta alone,
        // under `delta/v2/<position>` (the same record).
        let mut all = deltas(objects.as_ref(), &run_id).await;
        let newest = all.pop().unwrap();
        let position = delta_position(&newest);
        let folder = newest.as_ref().rsplit_once("/deltas/").unwrap().0;
        let old = Path::from(format!("{folder}/delta/v2/{position:020}"));
        let bytes = objects.get(&newest).await.unwrap().bytes().await.unwrap();
        objects.put(&old, bytes.into()).await.unwrap();
        all.push(newest);
        delete_all(&objects, all).await;

        let counting = Arc::new(CountingStore::new(objects.clone()));
        let fresh = ObjectStoreRuntimeStore::new(counting.clone(), PREFIX);
        fresh.load_run(&run_id).await.unwrap();
        // It was read: the pointer, the delta and its base, the short tail
        // (the base alone leaves dozens of entries); the listings of the
        // empty `deltas/`, of `delta/` and of the log.
        let c = counting.counts();
        assert_eq!(c.lists + c.lists_with_offset, 3, "{name}: {c:?}");
        assert!(c.gets <= 3 + 3, "{name}: {c:?}");
        assert_eq!(load(&fresh, &run_id).await, expected, "{name}");
        // A writer of this release takes the run on: its delta under
        // `deltas/`, and the older one deleted once it settled.
        for sequence in 100..104 {
            let commit = step(&run_id, sequence);
            fresh.atomic_apply(&run_id, commit).await.unwrap();
        }
        let now = deltas(objects.as_ref(), &run_id).await;
        assert!(
            now.iter().all(|d| d.as_ref().contains("/deltas/")),
            "{name}: {now:?}"
        );
        assert_eq!(
            load(
                &ObjectStoreRuntimeStore::new(objects.clone(), PREFIX),
                &run_id
            )
            .await,
            folded_from_the_log_alone(&objects, &run_id).await,
            "{name}"
        );
    }
}
