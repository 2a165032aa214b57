//! The worker loop on a store shared by several processes (issue 23): a
//! poll reads the due part of the due-run index in the order the store
//! lists it, and several workers, each over its own client of the store,
//! share the runs. Checks every backend passes, given a way to open the
//! store as a new process would; the cloud test files run them against the
//! emulators, `tests/tests/workflow_worker.rs` in memory and on a folder.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::{ObjectStoreRuntimeStore, RunStatus};
use memo_runtime::store::StoreAndPrefix;
use memo_runtime::testing::CountingStore;
use memo_runtime::workflow::{Context, Runtime, Worker, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

/// The clock starts at the beginning of an hour, so the runs below wait in
/// the hour that holds the polls.
const START_MS: u64 = 24 * 3600 * 1000;
const MINUTE_MS: u64 = 60_000;

/// A runtime over `objects` (a client of the store opened at `prefix`), as
/// a process has.
fn process(objects: Arc<dyn ObjectStore>, prefix: &str, clock: &Arc<ManualClock>) -> Runtime {
    let prefix = memo_runtime::object_store::path::Path::from(prefix);
    Runtime::builder()
        .memo_store(MemoStore::new(objects.clone(), prefix.clone().join("memo")))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            objects,
            prefix.join("runtime"),
        )))
        .clock(clock.clone())
        .lease(Duration::from_secs(60))
        .timer_wait(Duration::ZERO)
        .build()
        .unwrap()
}

fn run(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// What the step bodies of the runs did: how often each started, by run
/// and step, how many ran at once per run (at most), and how many run now.
#[derive(Debug, Default)]
pub struct Bodies {
    started: Mutex<HashMap<(String, &'static str), u64>>,
    running: Mutex<HashMap<String, u64>>,
    most_at_once: Mutex<u64>,
}

impl Bodies {
    async fn body(&self, run: &str, step: &'static str) {
        *self
            .started
            .lock()
            .unwrap()
            .entry((run.into(), step))
            .or_default() += 1;
        let now = {
            let mut running = self.running.lock().unwrap();
            let now = running.entry(run.into()).or_default();
            *now += 1;
            *now
        };
        {
            let mut most = self.most_at_once.lock().unwrap();
            *most = (*most).max(now);
        }
        // A body takes a while: another attempt of the run that started
        // meanwhile would be seen running beside it.
        tokio::time::sleep(Duration::from_millis(5)).await;
        *self.running.lock().unwrap().get_mut(run).unwrap() -= 1;
    }

    fn count(&self, run: &str, step: &'static str) -> u64 {
        let started = self.started.lock().unwrap();
        started.get(&(run.into(), step)).copied().unwrap_or(0)
    }
}

/// Runs the step `before`, sleeps the input's milliseconds, then runs the
/// step `after`.
fn napper(
    bodies: Arc<Bodies>,
) -> Workflow<impl Fn(Context, u64) -> BoxedRun + Clone + Send + Sync> {
    Workflow::new("napper", move |ctx: Context, ms: u64| {
        let bodies = bodies.clone();
        Box::pin(async move {
            let run = ctx.run_id().to_string();
            for step in ["before", "after"] {
                if step == "after" {
                    ctx.sleep(Duration::from_millis(ms)).await?;
                }
                let (bodies, run) = (bodies.clone(), run.clone());
                ctx.step(step, move |_memo| {
                    let (bodies, run) = (bodies.clone(), run.clone());
                    async move {
                        bodies.body(&run, step).await;
                        Ok::<_, Error>(())
                    }
                })
                .await?;
            }
            Ok::<_, Error>(ms)
        }) as BoxedRun
    })
}

async fn status(runtime: &Runtime, id: &str) -> (RunStatus, u32) {
    let record = runtime.status(&run(id)).await.unwrap().expect("the run");
    (record.status, record.attempts)
}

/// Twenty runs wait half an hour and three a minute, in the hour that
/// holds the poll; two minutes later a worker with the default settings
/// polls. Its poll wakes the three (so the store listed the index in key
/// order: an ordered poll stops at the first entry not yet due, and would
/// miss due ones listed after it) with one listing read up to the first
/// entry not due: the due runs' cost, not the hour's.
pub async fn a_poll_reads_the_due_entries_not_the_hours_later_ones(
    open: impl Fn() -> StoreAndPrefix,
) {
    let opened = open();
    let counting = Arc::new(CountingStore::new(opened.store));
    let clock = Arc::new(ManualClock::new(START_MS));
    let runtime = process(counting.clone(), opened.prefix.as_ref(), &clock);
    let bodies = Arc::new(Bodies::default());
    let napper = napper(bodies.clone());
    let mut ids = Vec::new();
    for (i, wait) in (0..20)
        .map(|i| (i, 30 * MINUTE_MS))
        .chain((20..23).map(|i| (i, MINUTE_MS)))
    {
        // Ids in no order of their due times.
        let id = format!("nap-{:02}", (i * 7) % 23);
        let outcome = runtime.run(&run(&id), &wait, &napper).await;
        assert!(
            matches!(outcome, Err(Error::Suspended { .. })),
            "{id}: {outcome:?}"
        );
        ids.push((id, wait));
    }
    clock.advance_ms(2 * MINUTE_MS);
    let worker = Worker::builder(runtime.clone()).workflow(&napper).build();
    counting.reset();
    let report = worker.wake_due().await.unwrap();
    let counts = counting.counts();
    assert_eq!((report.entries, report.resumed), (3, 3), "{report:?}");
    assert!(report.failed.is_empty(), "{report:?}");
    for (id, wait) in &ids {
        let expected = if *wait == MINUTE_MS {
            RunStatus::Completed
        } else {
            RunStatus::Running
        };
        assert_eq!(status(&runtime, id).await.0, expected, "{id}");
    }
    assert_eq!(
        counts.lists + counts.lists_with_offset + counts.lists_with_delimiter,
        1,
        "{counts:?}"
    );
    assert_eq!(counts.objects_listed, 3 + 1, "{counts:?}");
}

/// Three workers, each over its own client of the store (three processes),
/// poll together: the runs submitted to any of them start once, their
/// timers are woken by one of them, every run ends, and no run is ever
/// driven by two live attempts (each step body starts once, no two bodies
/// of a run run at once, and each run took exactly its two attempts: the
/// one that slept and the one that woke).
pub async fn workers_on_separate_clients_share_the_runs(open: impl Fn() -> StoreAndPrefix) {
    let clock = Arc::new(ManualClock::new(START_MS));
    let bodies = Arc::new(Bodies::default());
    let napper = napper(bodies.clone());
    let workers: Vec<Worker> = (0..3)
        .map(|_| {
            let opened = open();
            let runtime = process(opened.store, opened.prefix.as_ref(), &clock);
            Worker::builder(runtime)
                .workflow(&napper)
                .concurrency(4)
                .build()
        })
        .collect();
    let ids: Vec<String> = (0..9).map(|i| format!("shared-{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        workers[i % 3]
            .submit(&napper, &run(id), &(60 * MINUTE_MS))
            .await
            .unwrap();
    }
    let poll_together = || async {
        let reports = futures::future::join_all(workers.iter().map(Worker::wake_due)).await;
        for report in reports {
            let report = report.unwrap();
            assert!(report.failed.is_empty(), "{report:?}");
        }
    };
    poll_together().await;
    let runtime = workers[0].runtime();
    for id in &ids {
        assert_eq!(status(runtime, id).await, (RunStatus::Running, 1), "{id}");
        assert_eq!(bodies.count(id, "before"), 1, "{id}");
    }
    // Past the timers (and the first attempts' leases): every run is due.
    clock.advance_ms(60 * MINUTE_MS);
    poll_together().await;
    // A run whose entry another worker held when it was due is woken by
    // the next poll.
    poll_together().await;
    for id in &ids {
        assert_eq!(status(runtime, id).await, (RunStatus::Completed, 2), "{id}");
        assert_eq!(
            (bodies.count(id, "before"), bodies.count(id, "after")),
            (1, 1),
            "{id}"
        );
    }
    assert_eq!(*bodies.most_at_once.lock().unwrap(), 1);
}
