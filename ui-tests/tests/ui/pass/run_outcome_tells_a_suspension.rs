//! Whatever the workflow's error type (memo's, anyhow's, a boxed error), the
//! outcome of a run tells a suspended run apart without a downcast.
use memo_runtime::workflow::{Context, RunOutcome, Runtime, Workflow};
use memo_runtime::{Error, RunId};

async fn waits(runtime: &Runtime, run: &RunId) -> bool {
    let approval = Workflow::new("approval", |ctx: Context, _: ()| async move {
        let approved: bool = ctx.wait_for_signal("approve").await?;
        anyhow::Ok(approved)
    });
    let outcome = runtime.run(run, &(), &approval).await;
    outcome.is_suspended() && outcome.suspension().and_then(|s| s.signal) == Some("approve")
}

async fn sleeps(runtime: &Runtime, run: &RunId) -> Option<u64> {
    let nap = Workflow::new("nap", |ctx: Context, _: ()| async move {
        ctx.sleep(std::time::Duration::from_secs(3600)).await?;
        Ok::<_, Error>(())
    });
    runtime.run(run, &(), &nap).await.suspension()?.until_ms
}

fn main() {
    let _ = (waits, sleeps);
}
