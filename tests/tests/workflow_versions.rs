//! Workflow versions (issue 24, item 2): a run records the version it
//! started on and continues on it, whatever versions a deploy's workers
//! register; a run whose version no worker registers stays open and is
//! reported, never failed; the replay check replays each run against its
//! own version.

use std::sync::Arc;
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunStatus, RuntimeStore};
use memo_runtime::workflow::{Context, ReplayCheck, ReplayOutcome, Runtime, Worker, Workflow};
use memo_runtime::{Error, ErrorKind, MemoStore, RunId};

/// A runtime over its own store instances on `objects`, as a process has.
fn process(objects: &Arc<dyn ObjectStore>, clock: &Arc<ManualClock>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects.clone(),
            "runs",
        )))
        .clock(clock.clone())
        .timer_wait(Duration::ZERO)
        .build()
        .unwrap()
}

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

/// Version 1: waits for `go`, then ships.
async fn order_v1(ctx: Context, item: String) -> Result<String, Error> {
    let go: String = ctx.wait_for_signal("go").await?;
    let shipped = format!("v1 shipped {item} ({go})");
    ctx.step_with("ship", &shipped, |_memo, shipped| async move {
        Ok::<_, Error>(shipped.to_string())
    })
    .await
}

/// Version 2: waits for `go`, then packs and ships (a step inserted: it
/// cannot replay version 1's histories).
async fn order_v2(ctx: Context, item: String) -> Result<String, Error> {
    let go: String = ctx.wait_for_signal("go").await?;
    let packed = ctx
        .step_with("pack", &item, |_memo, item| async move {
            Ok::<_, Error>(format!("packed {item}"))
        })
        .await?;
    let shipped = format!("v2 shipped {packed} ({go})");
    ctx.step_with("ship", &shipped, |_memo, shipped| async move {
        Ok::<_, Error>(shipped.to_string())
    })
    .await
}

fn fixture() -> (Arc<dyn ObjectStore>, Arc<ManualClock>) {
    (Arc::new(InMemory::new()), Arc::new(ManualClock::new(1_000)))
}

#[tokio::test]
async fn each_run_continues_on_the_version_it_started_on() {
    let (objects, clock) = fixture();
    let v1 = Workflow::new("order", order_v1).with_version("1");
    let v2 = Workflow::new("order", order_v2).with_version("2");

    // Before the deploy: version 1 only.
    let before = Worker::builder(process(&objects, &clock))
        .workflow(&v1)
        .build();
    before
        .submit(&v1, &run("a"), &"tea".to_string())
        .await
        .unwrap();
    before.wake_due().await.unwrap();

    // The deploy: workers register both versions; new runs start on 2.
    let after = Worker::builder(process(&objects, &clock))
        .workflow(&v1)
        .workflow(&v2)
        .build();
    after
        .submit(&v2, &run("b"), &"jam".to_string())
        .await
        .unwrap();
    after.wake_due().await.unwrap();
    let runtime = after.runtime();
    for id in ["a", "b"] {
        let record = runtime.status(&run(id)).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::Running, "{id} waits for go");
        runtime.signal(&run(id), "go", "now").await.unwrap();
    }
    let woken = after.wake_due().await.unwrap();
    assert_eq!(woken.resumed, 2, "{woken:?}");
    assert_eq!(woken.unknown, 0);

    let a = runtime.status(&run("a")).await.unwrap().unwrap();
    let b = runtime.status(&run("b")).await.unwrap().unwrap();
    assert_eq!(a.workflow_version.as_deref(), Some("1"));
    assert_eq!(b.workflow_version.as_deref(), Some("2"));
    assert_eq!(
        runtime.resume(&run("a"), &v1).await.unwrap(),
        "v1 shipped tea (now)"
    );
    assert_eq!(
        runtime.resume(&run("b"), &v2).await.unwrap(),
        "v2 shipped packed jam (now)"
    );
}

#[tokio::test]
async fn a_run_whose_version_no_worker_registers_stays_open_and_is_reported() {
    let (objects, clock) = fixture();
    let v1 = Workflow::new("order", order_v1).with_version("1");
    let v2 = Workflow::new("order", order_v2).with_version("2");
    let old = Worker::builder(process(&objects, &clock))
        .workflow(&v1)
        .build();
    old.submit(&v1, &run("a"), &"tea".to_string())
        .await
        .unwrap();
    old.wake_due().await.unwrap();
    old.runtime().signal(&run("a"), "go", "now").await.unwrap();

    // A deploy that dropped version 1 too early.
    let new = Worker::builder(process(&objects, &clock))
        .workflow(&v2)
        .build();
    let woken = new.wake_due().await.unwrap();
    assert_eq!((woken.unknown, woken.resumed), (1, 0), "{woken:?}");
    let recovery = new.recover().await.unwrap();
    assert!(recovery.resumed.is_empty(), "{recovery:?}");
    let [(skipped, why)] = &recovery.skipped[..] else {
        panic!("one run skipped: {recovery:?}");
    };
    assert_eq!(skipped, &run("a"));
    assert!(
        matches!(why, Error::VersionNotRegistered { version: Some(v), .. } if v == "1"),
        "{why:?}"
    );
    assert_eq!(
        why.to_string(),
        r#"run a started on version "1" of workflow "order", which this code does not register (it registers version "2"); a worker that registers that version continues it"#
    );
    let recovery = new.runtime().recover(&v2).await.unwrap();
    assert_eq!(recovery.skipped.len(), 1, "{recovery:?}");
    assert!(recovery.resumed.is_empty());
    let refused = new.runtime().resume(&run("a"), &v2).await;
    let Err(Error::VersionNotRegistered {
        run_id,
        workflow,
        version,
        registered,
    }) = &refused
    else {
        panic!("{refused:?}");
    };
    assert_eq!(
        (run_id.as_str(), workflow.as_str(), version.as_deref()),
        ("a", "order", Some("1"))
    );
    assert_eq!(registered, &[Some("2".to_string())]);
    assert_eq!(refused.unwrap_err().kind(), ErrorKind::CodeChanged);
    // A delivery of it to the new version (`Runtime::run`, as a queue
    // consumer runs each delivery) is the same error.
    let delivered = new.runtime().run(&run("a"), &"tea".to_string(), &v2).await;
    assert!(
        matches!(&delivered, Err(Error::VersionNotRegistered { version: Some(v), .. }) if v == "1"),
        "{delivered:?}"
    );
    let a = new.runtime().status(&run("a")).await.unwrap().unwrap();
    assert_eq!(a.status, RunStatus::Running, "never failed");
    assert_eq!(a.attempts, 1, "no attempt was started on the wrong version");

    // A worker that registers version 1 again finishes it: its due entry
    // stayed in the index.
    let back = Worker::builder(process(&objects, &clock))
        .workflow(&v1)
        .workflow(&v2)
        .build();
    assert_eq!(back.wake_due().await.unwrap().resumed, 1);
    let a = back.runtime().status(&run("a")).await.unwrap().unwrap();
    assert_eq!(a.status, RunStatus::Completed);
}

#[tokio::test]
async fn recovery_resumes_each_open_run_on_its_version() {
    let (objects, clock) = fixture();
    let v1 = Workflow::new("order", order_v1).with_version("1");
    let v2 = Workflow::new("order", order_v2).with_version("2");
    let runtime = process(&objects, &clock);
    for (id, workflow_is_v1) in [("a", true), ("b", false)] {
        let started = if workflow_is_v1 {
            runtime.run(&run(id), &id.to_string(), &v1).await
        } else {
            runtime.run(&run(id), &id.to_string(), &v2).await
        };
        assert!(
            matches!(started, Err(Error::Suspended { .. })),
            "{started:?}"
        );
        runtime.signal(&run(id), "go", "now").await.unwrap();
    }
    let worker = Worker::builder(process(&objects, &clock))
        .workflow(&v1)
        .workflow(&v2)
        .build();
    let recovery = worker.recover().await.unwrap();
    assert!(recovery.skipped.is_empty(), "{recovery:?}");
    assert_eq!(recovery.resumed.len(), 2, "{recovery:?}");
    assert_eq!(
        runtime.resume(&run("a"), &v1).await.unwrap(),
        "v1 shipped a (now)"
    );
    assert_eq!(
        runtime.resume(&run("b"), &v2).await.unwrap(),
        "v2 shipped packed b (now)"
    );
}

#[tokio::test]
async fn the_replay_check_replays_each_run_against_the_version_it_started_on() {
    let (objects, clock) = fixture();
    let v1 = Workflow::new("order", order_v1).with_version("1");
    let v2 = Workflow::new("order", order_v2).with_version("2");
    let runtime = process(&objects, &clock);
    for (id, version) in [("a", &v1), ("c", &v1)] {
        let _ = runtime.run(&run(id), &id.to_string(), version).await;
        runtime.signal(&run(id), "go", "now").await.unwrap();
    }
    // Run a finishes on version 1; run c stays open at its wait.
    runtime.resume(&run("a"), &v1).await.unwrap();
    let _ = runtime.run(&run("b"), &"b".to_string(), &v2).await;

    let store: Arc<dyn RuntimeStore> = Arc::new(ObjectStoreRuntimeStore::new(objects, "runs"));
    let check = ReplayCheck::new(store);
    let both = check
        .deploy()
        .workflow(&v1)
        .workflow(&v2)
        .run()
        .await
        .unwrap();
    assert!(both.is_clean(), "{both}");
    assert_eq!(both.runs().len(), 3);

    // Version 2's code alone: the version-1 runs would be stranded, and are
    // reported as such (not as version 2's non-determinism).
    let alone = check.run(&v2).await.unwrap();
    let mut stranded: Vec<_> = alone.problems().map(|r| r.run_id.as_str()).collect();
    stranded.sort();
    assert_eq!(stranded, ["a", "c"], "{alone}");
    for problem in alone.problems() {
        assert_eq!(
            problem.outcome,
            ReplayOutcome::VersionNotRegistered {
                version: Some("1".into()),
                registered: vec![Some("2".into())],
            }
        );
    }
    assert!(alone.to_string().contains(
        r#"the run started on version "1", which the code does not register (it registers version "2")"#
    ), "{alone}");
}
