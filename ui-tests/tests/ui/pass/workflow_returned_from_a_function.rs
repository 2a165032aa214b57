//! A workflow can be returned from a function: `WorkflowFn` names what
//! `impl Fn(Context, I) -> impl Future<..>` cannot, and the runtime takes
//! the returned workflow as it takes a closure.
use memo_runtime::workflow::{Context, Runtime, Workflow, WorkflowFn};
use memo_runtime::{Error, RunId};

fn greeter(
    greeting: &'static str,
) -> Workflow<impl WorkflowFn<String, Output = String, Error = Error>> {
    Workflow::new("greeter", move |ctx: Context, name: String| async move {
        ctx.step_with("greet", &name, |_memo, name| async move {
            Ok::<_, Error>(format!("{greeting}, {name}"))
        })
        .await
    })
}

fn summarize() -> Workflow<impl WorkflowFn<u64, Output = u64, Error = anyhow::Error>> {
    Workflow::new(
        "summarize",
        |_ctx: Context, n: u64| async move { anyhow::Ok(n) },
    )
}

async fn start(runtime: &Runtime, run: &RunId) -> Result<String, Error> {
    runtime
        .run(run, &"Ada".to_string(), &greeter("Hello"))
        .await
}

async fn start_other(runtime: &Runtime, run: &RunId) -> anyhow::Result<u64> {
    runtime.run(run, &1, &summarize()).await
}

fn main() {
    let _ = (start, start_other);
}
