//! A retention sweep keeps the due-run index to the runs that still wait:
//! entries whose run ended (a signal's entry once a redelivery ran the run
//! to its end, an interrupted attempt's entry once another attempt ended
//! it) are deleted, a waiting run's entry is kept. Without it every seed of
//! the simulator's deployment world left such entries behind once every
//! run was swept (*no object is left unreachable*).

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::InMemoryRuntimeStore;
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

#[tokio::test]
async fn a_sweep_deletes_the_due_entries_of_ended_runs_and_keeps_a_waiting_runs() {
    let clock = Arc::new(ManualClock::new(1_000));
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
        .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
        .clock(clock.clone())
        .build()
        .unwrap();
    let approval = Workflow::new("approval", |ctx: Context, _: ()| async move {
        let yes: bool = ctx.wait_for_signal("go").await?;
        Ok::<_, Error>(yes)
    });
    let nap = Workflow::new("nap", |ctx: Context, _: ()| async move {
        ctx.sleep(Duration::from_secs(3600)).await?;
        Ok::<_, Error>(true)
    });

    // A run that waits, gets its signal (an entry due now) and is run to its
    // end by a redelivery, not by a worker: its entry is stale.
    let ended = RunId::new("ended").unwrap();
    assert!(runtime.run(&ended, &(), &approval).await.is_err());
    runtime.signal(&ended, "go", &true).await.unwrap();
    assert!(runtime.run(&ended, &(), &approval).await.unwrap());
    // A run asleep for an hour: its timer's entry is due later and kept.
    let asleep = RunId::new("asleep").unwrap();
    assert!(runtime.run(&asleep, &(), &nap).await.is_err());

    let before: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(before.iter().any(|d| d.run_id == ended), "{before:?}");
    clock.advance_ms(2 * 3_600_000);

    let report = runtime.retention_sweeper().sweep_now().await.unwrap();
    assert_eq!(report.due_entries_deleted, 1, "{report:?}");
    let after: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    assert_eq!(
        after.iter().map(|d| d.run_id.as_str()).collect::<Vec<_>>(),
        ["asleep"],
        "the waiting run's entry stays, the ended run's is gone"
    );

    // A dry run counts a stale entry and deletes nothing.
    let again = RunId::new("ended-again").unwrap();
    assert!(runtime.run(&again, &(), &approval).await.is_err());
    runtime.signal(&again, "go", &false).await.unwrap();
    assert!(!runtime.run(&again, &(), &approval).await.unwrap());
    let dry = runtime
        .retention_sweeper_builder()
        .dry_run(true)
        .build()
        .sweep_now()
        .await
        .unwrap();
    assert_eq!(dry.due_entries_deleted, 1, "{dry:?}");
    let kept: Vec<_> = runtime.due_runs(u64::MAX).try_collect().await.unwrap();
    assert!(kept.iter().any(|d| d.run_id == again), "{kept:?}");
}
