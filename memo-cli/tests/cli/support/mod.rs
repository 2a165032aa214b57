//! What the `memoctl` tests share: a store filled with real runs (made by
//! memo's own `Runtime`, laid out as the example workers lay it out) and a
//! way to run the binary on it.

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memo_runtime::object_store::ObjectStore;
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow};
use memo_runtime::{
    MemoStore, RunId,
    clock::{Clock, ManualClock, SystemClock},
    runtime_store::ObjectStoreRuntimeStore,
};

/// Why the first try of an `approval` run's `draft` step fails.
pub(crate) const BUSY: &str = "the drafting service is busy";

/// How long ago the run `old-1` ended: past the 7-day retention.
pub(crate) const OLD_RUN_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// An order: two steps, each with one memo entry; fails for orders named
/// `bad-*` after both steps.
pub(crate) async fn orders(ctx: Context, order: String) -> anyhow::Result<String> {
    let reserved: String = ctx
        .step("reserve", |memo| {
            let order = order.clone();
            async move {
                let line = format!("reserved {order}");
                memo.put("stock", line.as_bytes()).await?;
                Ok::<_, memo_runtime::Error>(line)
            }
        })
        .await?;
    ctx.step("charge", |memo| async move {
        memo.content_put(&("charge", 1_999), b"ch_1").await?;
        Ok::<_, memo_runtime::Error>(1_999_u64)
    })
    .await?;
    if order.starts_with("bad") {
        anyhow::bail!("card declined for {order}");
    }
    Ok(reserved)
}

/// A draft that waits for a human's `approval` signal (a bool). The
/// drafting service is busy the first time (the step's first try fails and
/// is retried), so the step's receipt records two tries.
pub(crate) async fn approval(ctx: Context, ticket: String) -> anyhow::Result<String> {
    let draft: String = ctx
        .step("draft", |memo| {
            let ticket = ticket.clone();
            async move {
                let draft = format!("Re: {ticket}");
                if memo.get("draft").await?.is_none() {
                    memo.put("draft", draft.as_bytes()).await?;
                    anyhow::bail!("{BUSY}");
                }
                Ok::<_, anyhow::Error>(draft)
            }
        })
        .retry(RetryPolicy::attempts(3).with_min_delay(Duration::from_millis(1)))
        .await?;
    let approved: bool = ctx.wait_for_signal("approval").await?;
    Ok(if approved {
        format!("sent {draft}")
    } else {
        "rejected".into()
    })
}

/// The memo store and runtime store under `prefix`, where `memoctl`'s
/// default `--memo-prefix memo` and `--runs-prefix runtime` find them.
pub(crate) fn runtime(
    objects: &Arc<dyn ObjectStore>,
    prefix: &str,
    clock: Arc<dyn Clock>,
) -> Runtime {
    let under = |part: &str| {
        if prefix.is_empty() {
            part.to_string()
        } else {
            format!("{prefix}/{part}")
        }
    };
    Runtime::builder()
        .memo_store(MemoStore::new(Arc::clone(objects), under("memo")))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(
            Arc::clone(objects),
            under("runtime"),
        )))
        .clock(clock)
        .build()
        .expect("a runtime")
}

/// Fills the store with four runs:
///
/// | run | workflow | status | steps | marker |
/// |---|---|---|---|---|
/// | `order-1` | orders | Completed | 2 | now |
/// | `bad-2` | orders | Failed | 2 | now |
/// | `Ticket-42` | approval | Running, waiting for `approval` | 1 | none |
/// | `old-1` | orders | Completed | 2 | [`OLD_RUN_AGE`] ago |
pub(crate) async fn fill(objects: &Arc<dyn ObjectStore>, prefix: &str) {
    let now = runtime(objects, prefix, Arc::new(SystemClock));
    let orders = Workflow::new("orders", orders);
    now.run(&run("order-1"), &"order-1".to_string(), &orders)
        .await
        .expect("order-1 completes");
    now.run(&run("bad-2"), &"bad-2".to_string(), &orders)
        .await
        .expect_err("bad-2 fails");
    let approval = Workflow::new("approval", approval);
    now.run(&run("Ticket-42"), &"refund".to_string(), &approval)
        .await
        .expect_err("Ticket-42 waits for its approval");
    let ended_ms = now_ms() - OLD_RUN_AGE.as_millis() as u64;
    let then = runtime(objects, prefix, Arc::new(ManualClock::new(ended_ms)));
    then.run(&run("old-1"), &"old-1".to_string(), &orders)
        .await
        .expect("old-1 completes");
}

pub(crate) fn run(id: &str) -> RunId {
    RunId::new(id).expect("a valid run id")
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `memoctl --store URL [--option K=V]... ARGS...`, as a process.
pub(crate) fn memoctl(url: &str, options: &[(&str, String)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memoctl"));
    command.args(["--store", url]);
    for (key, value) in options {
        command.arg("--option").arg(format!("{key}={value}"));
    }
    command.args(args).output().expect("memoctl runs")
}

/// Its stdout, after checking that it exited with status 0.
pub(crate) fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "memoctl failed with {}:\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

/// Its stdout as JSON, after checking that it exited with status 0.
pub(crate) fn ok_json(output: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(output)).expect("memoctl --json prints JSON")
}

/// Its stderr, after checking that it exited with status 1 and printed
/// nothing on stdout.
pub(crate) fn failed(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "",
        "stderr: {stderr}"
    );
    stderr
}

/// The table row whose first cell is `first`, split into cells (cells here
/// hold no spaces).
pub(crate) fn row<'a>(table: &'a str, first: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row {first:?} in:\n{table}"))
}

/// The run ids of `memoctl runs --json`, in order.
pub(crate) fn run_ids(runs: &serde_json::Value) -> Vec<&str> {
    runs.as_array()
        .expect("an array of runs")
        .iter()
        .map(|r| r["run_id"].as_str().expect("a run id"))
        .collect()
}
