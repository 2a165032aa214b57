//! Patching (issue 24, item 1): `ctx.patched(name)` lets a workflow's code
//! change while runs of the old code are open. A run whose recorded history
//! passed the patch point under the old code keeps the old branch; a run that
//! reaches it under the new code records the marker `memo.patch:<name>` and
//! takes the new branch in every replay; `ctx.deprecate_patch(name)` accepts
//! both histories and records nothing.
//!
//! Each scenario is a deploy: runs start under one version of the code,
//! suspend in a signal wait, and resume under the next version.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memo_runtime::object_store::memory::InMemory;
use memo_runtime::runtime_store::{InMemoryRuntimeStore, RunStatus, RuntimeStore};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{Error, MemoStore, RunId};

type BoxedRun = futures::future::BoxFuture<'static, Result<String, Error>>;
type Code = Workflow<Box<dyn Fn(Context, String) -> BoxedRun + Send + Sync>>;

/// One store shared by every version of the code, as a deploy keeps it.
struct Deploy {
    runtime: Runtime,
    store: Arc<dyn RuntimeStore>,
    sms_sent: Arc<AtomicU64>,
}

impl Deploy {
    fn new() -> Deploy {
        let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
        let runtime = Runtime::builder()
            .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
            .runtime_store(Arc::clone(&store))
            .signal_wait(Duration::ZERO)
            .build()
            .unwrap();
        Deploy {
            runtime,
            store,
            sms_sent: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Starts `run` under `code`: it suspends waiting for the signal "go".
    async fn start(&self, run: &str, code: &Code) {
        let started = self
            .runtime
            .run(&RunId::new(run).unwrap(), &run.to_string(), code)
            .await;
        assert!(
            matches!(started, Err(Error::Suspended { ref signal, .. }) if signal == "go"),
            "{started:?}"
        );
    }

    /// Sends "go" to `run` and resumes it under `code` to its end.
    async fn finish(&self, run: &str, code: &Code) -> String {
        let run_id = RunId::new(run).unwrap();
        self.runtime.signal(&run_id, "go", &()).await.unwrap();
        self.runtime
            .run(&run_id, &run.to_string(), code)
            .await
            .unwrap()
    }

    async fn steps(&self, run: &str) -> Vec<String> {
        let receipts = self
            .store
            .load_receipts(&RunId::new(run).unwrap(), None)
            .await
            .unwrap();
        receipts.into_iter().map(|r| r.step).collect()
    }
}

/// Which version of the notification workflow.
#[derive(Clone, Copy)]
enum Version {
    /// email, wait for "go", done.
    Old,
    /// email, `patched("sms")` → sms, wait for "go", done.
    Patched,
    /// email, `deprecate_patch("sms")`, sms, wait for "go", done.
    Deprecated,
    /// The old code with steps after its last: done, then survey and a
    /// wait for "bye".
    Extended,
}

fn notify(version: Version, sms_sent: Arc<AtomicU64>) -> Code {
    let run: Box<dyn Fn(Context, String) -> BoxedRun + Send + Sync> =
        Box::new(move |ctx: Context, user: String| {
            let sms_sent = Arc::clone(&sms_sent);
            Box::pin(async move {
                let mut sent = ctx
                    .step_with("email", &user, |_memo, user| async move {
                        Ok::<_, Error>(format!("email to {user}"))
                    })
                    .await?;
                let sms = match version {
                    Version::Old | Version::Extended => false,
                    Version::Patched => ctx.patched("sms").await?,
                    Version::Deprecated => {
                        ctx.deprecate_patch("sms").await?;
                        true
                    }
                };
                if sms {
                    let sms_sent = &sms_sent;
                    sent += &ctx
                        .step("sms", |_memo| async move {
                            sms_sent.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, Error>(", sms".to_string())
                        })
                        .await?;
                }
                ctx.wait_for_signal::<()>("go").await?;
                ctx.step("done", |_memo| async move { Ok::<_, Error>(()) })
                    .await?;
                if matches!(version, Version::Extended) {
                    let surveys_sent = &sms_sent;
                    sent += &ctx
                        .step("survey", |_memo| async move {
                            surveys_sent.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, Error>(", survey".to_string())
                        })
                        .await?;
                    ctx.wait_for_signal::<()>("bye").await?;
                }
                Ok(sent)
            })
        });
    Workflow::new("notify", run)
}

#[tokio::test]
async fn a_run_past_the_patch_point_keeps_the_old_branch() {
    let deploy = Deploy::new();
    deploy
        .start("old-run", &notify(Version::Old, deploy.sms_sent.clone()))
        .await;

    let patched = notify(Version::Patched, deploy.sms_sent.clone());
    let out = deploy.finish("old-run", &patched).await;

    assert_eq!(out, "email to old-run");
    assert_eq!(deploy.sms_sent.load(Ordering::SeqCst), 0);
    assert_eq!(
        deploy.steps("old-run").await,
        ["email", "memo.wait:go", "signal:go", "done"],
        "a false patch records nothing"
    );
}

#[tokio::test]
async fn a_run_that_reaches_the_patch_records_it_and_keeps_the_new_branch() {
    let deploy = Deploy::new();
    let patched = notify(Version::Patched, deploy.sms_sent.clone());
    deploy.start("new-run", &patched).await;
    assert_eq!(
        deploy.steps("new-run").await,
        ["email", "memo.patch:sms", "sms", "memo.wait:go"]
    );

    // Resumed (a replay of the whole history): the same branch, and the
    // SMS is not sent again.
    let out = deploy.finish("new-run", &patched).await;

    assert_eq!(out, "email to new-run, sms");
    assert_eq!(deploy.sms_sent.load(Ordering::SeqCst), 1);
    let status = deploy
        .store
        .load_run(&RunId::new("new-run").unwrap())
        .await
        .unwrap()
        .unwrap()
        .status;
    assert_eq!(status, RunStatus::Completed);
}

#[tokio::test]
async fn a_deprecated_patch_replays_marked_runs_and_records_no_marker() {
    let deploy = Deploy::new();
    let patched = notify(Version::Patched, deploy.sms_sent.clone());
    deploy.start("marked", &patched).await;

    let deprecated = notify(Version::Deprecated, deploy.sms_sent.clone());
    deploy.start("unmarked", &deprecated).await;
    let marked = deploy.finish("marked", &deprecated).await;
    let unmarked = deploy.finish("unmarked", &deprecated).await;

    assert_eq!(marked, "email to marked, sms");
    assert_eq!(unmarked, "email to unmarked, sms");
    assert_eq!(deploy.sms_sent.load(Ordering::SeqCst), 2);
    assert_eq!(
        deploy.steps("unmarked").await,
        ["email", "sms", "memo.wait:go", "signal:go", "done"]
    );
    assert_eq!(deploy.steps("marked").await[1], "memo.patch:sms");
}

#[tokio::test]
async fn removing_a_patch_that_open_runs_took_is_non_determinism() {
    let deploy = Deploy::new();
    let patched = notify(Version::Patched, deploy.sms_sent.clone());
    deploy.start("marked", &patched).await;

    let run_id = RunId::new("marked").unwrap();
    deploy.runtime.signal(&run_id, "go", &()).await.unwrap();
    let resumed = deploy
        .runtime
        .run(
            &run_id,
            &"marked".to_string(),
            &notify(Version::Old, deploy.sms_sent.clone()),
        )
        .await;

    assert!(
        matches!(
            resumed,
            Err(Error::NonDeterminism { sequence: 1, ref recorded, .. }) if recorded == "memo.patch:sms"
        ),
        "{resumed:?}"
    );
}

#[tokio::test]
async fn in_a_rolling_deploy_the_old_code_leaves_a_run_the_new_code_patched_to_the_new_code() {
    // Old and new workers side by side on one store: the new code took
    // the run down the patched branch; a worker still on the old code
    // that resumes it stops at the marker, records nothing and leaves the
    // run open; a worker on the new code then ends it, the SMS sent once.
    let deploy = Deploy::new();
    let old = notify(Version::Old, deploy.sms_sent.clone());
    let patched = notify(Version::Patched, deploy.sms_sent.clone());
    deploy.start("rolling", &patched).await;
    let run_id = RunId::new("rolling").unwrap();
    deploy.runtime.signal(&run_id, "go", &()).await.unwrap();
    let recorded = deploy.steps("rolling").await;

    for _ in 0..2 {
        let on_old = deploy
            .runtime
            .run(&run_id, &"rolling".to_string(), &old)
            .await;
        assert!(
            matches!(&on_old, Err(e @ Error::NonDeterminism { .. }) if !e.fails_run()),
            "{on_old:?}"
        );
        let run = deploy.store.load_run(&run_id).await.unwrap().unwrap();
        assert!(!run.status.is_terminal(), "{:?}", run.status);
        assert_eq!(deploy.steps("rolling").await, recorded);
    }

    let out = deploy
        .runtime
        .run(&run_id, &"rolling".to_string(), &patched)
        .await
        .unwrap();
    assert_eq!(out, "email to rolling, sms");
    assert_eq!(deploy.sms_sent.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn in_a_rolling_deploy_the_old_code_may_end_a_run_the_new_code_took_past_its_end() {
    // Steps added after the last need no patch (every open run reaches
    // them at its end), but while old workers still run beside new ones,
    // a worker on the old code that resumes a run the new code took into
    // them replays up to its own end and ends the run there: the new
    // steps ran once, stay recorded, and the output is the old code's.
    let deploy = Deploy::new();
    let old = notify(Version::Old, deploy.sms_sent.clone());
    let extended = notify(Version::Extended, deploy.sms_sent.clone());
    deploy.start("extended", &extended).await;
    let run_id = RunId::new("extended").unwrap();
    deploy.runtime.signal(&run_id, "go", &()).await.unwrap();
    let waits = deploy
        .runtime
        .run(&run_id, &"extended".to_string(), &extended)
        .await;
    assert!(
        matches!(waits, Err(Error::Suspended { ref signal, .. }) if signal == "bye"),
        "{waits:?}"
    );
    // Its "bye" comes, and a worker still on the old code takes the run.
    deploy.runtime.signal(&run_id, "bye", &()).await.unwrap();

    let out = deploy
        .runtime
        .run(&run_id, &"extended".to_string(), &old)
        .await
        .unwrap();

    assert_eq!(out, "email to extended");
    assert_eq!(
        deploy.sms_sent.load(Ordering::SeqCst),
        1,
        "the survey ran once"
    );
    assert_eq!(
        deploy.steps("extended").await,
        [
            "email",
            "memo.wait:go",
            "signal:go",
            "done",
            "survey",
            "memo.wait:bye"
        ]
    );
    let run = deploy.store.load_run(&run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Completed);
}
