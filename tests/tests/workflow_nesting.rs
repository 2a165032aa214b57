//! Deeply nested values (issue 21, item 8): a stored value nested 1,000
//! deep (within rmp-serde's own limit of 1,024) overflowed a Tokio worker
//! thread's 2 MiB stack in a debug build, aborting the process. memo reads
//! at most `MAX_NESTING_DEPTH` levels: a deeper value is a clear
//! `Error::Decode` naming what it is, a value at the limit decodes, and
//! memo refuses to store a value it could not read back. Every decode here
//! runs on a worker thread of a multi-thread runtime (2 MiB stacks), in the
//! build the tests run in (debug by default).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memo_runtime::runtime_store::{Commit, NewRun, StepReceipt};
use memo_runtime::workflow::{Context, Runtime, Workflow};
use memo_runtime::{
    Bytes, Error, Memo, MemoStore, RunId,
    limits::MAX_NESTING_DEPTH,
    memoized,
    runtime_store::{InMemoryRuntimeStore, RuntimeStore},
};
use serde_json::{Value, json};

/// `depth` arrays, each holding the next; the innermost holds `null`.
fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::Null, |inner, _| json!([inner]))
}

/// The stored encoding (MessagePack) of [`nested`]`(depth)`, built without
/// the encoder, which refuses to store it past the limit.
fn nested_bytes(depth: usize) -> Bytes {
    let mut bytes = vec![0x91; depth];
    bytes.push(0xc0);
    Bytes::from(bytes)
}

fn runtime(store: Arc<dyn RuntimeStore>) -> Runtime {
    Runtime::builder()
        .memo_store(MemoStore::new(
            Arc::new(memo_runtime::object_store::memory::InMemory::new()),
            "memo",
        ))
        .runtime_store(store)
        .build()
        .unwrap()
}

type BoxedRun = futures::future::BoxFuture<'static, Result<usize, Error>>;

/// Replays step `load` (a `Value`), then waits for a signal that never
/// comes: every run of it replays the step.
fn loads() -> Workflow<impl Fn(Context, u64) -> BoxedRun + Send + Sync + 'static> {
    Workflow::new("loads", |ctx: Context, depth: u64| {
        Box::pin(async move {
            let value: Value = ctx
                .step("load", |_memo| async move {
                    Ok::<_, Error>(nested(depth as usize))
                })
                .await?;
            let _: bool = ctx.wait_for_signal("never").await?;
            Ok(depth_of(&value))
        }) as BoxedRun
    })
}

fn depth_of(value: &Value) -> usize {
    let mut depth = 0;
    let mut at = value;
    while let Some(inner) = at.as_array().and_then(|a| a.first()) {
        depth += 1;
        at = inner;
    }
    depth
}

/// A run whose step `load` was recorded (by another writer, or an older
/// memo) with `output`.
async fn run_with_recorded_output(store: &Arc<dyn RuntimeStore>, id: &str, output: Bytes) -> RunId {
    let run = RunId::new(id).unwrap();
    store
        .create_run(NewRun {
            run_id: run.clone(),
            workflow: "loads".into(),
            input: Bytes::from_static(&[0x00]), // 0u64
            created_at_ms: 1,
            workflow_version: None,
        })
        .await
        .unwrap();
    let receipt = StepReceipt {
        run_id: run.clone(),
        sequence: 0,
        step: "load".into(),
        output,
        recorded_at_ms: 2,
        error: None,
        retries: 0,
        last_retried_error: None,
    };
    store
        .atomic_apply(&run, Commit::step(receipt, 2))
        .await
        .unwrap();
    run
}

/// A recorded step output nested deeper than the limit is `Error::Decode`
/// naming the step, at every depth up to far past rmp-serde's own limit;
/// one at the limit replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_output_nested_deeper_than_the_limit_is_a_decode_error_not_a_stack_overflow() {
    tokio::spawn(async {
        let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
        let worker = runtime(store.clone());
        for depth in [MAX_NESTING_DEPTH + 1, 1_000, 1_023, 100_000] {
            let run =
                run_with_recorded_output(&store, &format!("deep-{depth}"), nested_bytes(depth))
                    .await;
            match worker.run(&run, &0, &loads()).await {
                Err(Error::Decode { what, path, .. }) => {
                    assert_eq!(what, "the output of step \"load\"", "{depth}");
                    assert!(path.contains(run.as_str()), "{depth}: {path}");
                }
                other => panic!("{depth}: expected a decode error, got {other:?}"),
            }
        }
        let run =
            run_with_recorded_output(&store, "at-limit", nested_bytes(MAX_NESTING_DEPTH)).await;
        match worker.run(&run, &0, &loads()).await {
            Err(Error::Suspended { .. }) => {}
            other => panic!("a value at the limit did not replay: {other:?}"),
        }
    })
    .await
    .unwrap();
}

/// A run input nested deeper than the limit: `recover()` reports the run
/// with `Error::Decode` naming the input, and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_input_nested_deeper_than_the_limit_is_a_decode_error() {
    tokio::spawn(async {
        let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
        let worker = runtime(store.clone());
        store
            .create_run(NewRun {
                run_id: RunId::new("deep-input").unwrap(),
                workflow: "echo".into(),
                input: nested_bytes(1_000),
                created_at_ms: 1,
                workflow_version: None,
            })
            .await
            .unwrap();
        let echo = Workflow::new(
            "echo",
            |_: Context, v: Value| async move { Ok::<_, Error>(v) },
        );
        let recovery = worker.recover(&echo).await.unwrap();
        assert_eq!(recovery.resumed.len(), 1);
        match &recovery.resumed[0].1 {
            Err(Error::Decode { what, .. }) => assert_eq!(what, "the workflow input"),
            other => panic!("expected a decode error, got {other:?}"),
        }
    })
    .await
    .unwrap();
}

/// Calls of [`deep_value`]'s body.
static DEEP_CALLS: AtomicU64 = AtomicU64::new(0);

#[memoized]
async fn deep_value(memo: &Memo, depth: u64) -> Result<Value, Error> {
    DEEP_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(nested(depth as usize))
}

/// Values nested to the limit go through every stored path (a step's output
/// and a run's output, a `#[memoized]` value, a signal's payload) and read
/// back; one level more is refused when it would be stored, as
/// `Error::Serialization`, so nothing unreadable is ever committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_at_the_limit_round_trip_and_deeper_ones_are_never_stored() {
    tokio::spawn(async {
        let store: Arc<dyn RuntimeStore> = Arc::new(InMemoryRuntimeStore::new());
        let worker = runtime(store.clone());
        let limit = MAX_NESTING_DEPTH as u64;

        // A step output at the limit, replayed after a suspension.
        let run = RunId::new("at-limit").unwrap();
        for _ in 0..2 {
            let outcome = worker.run(&run, &limit, &loads()).await;
            assert!(
                matches!(outcome, Err(Error::Suspended { .. })),
                "{outcome:?}"
            );
        }
        worker.signal(&run, "never", &true).await.unwrap();
        assert_eq!(
            worker.run(&run, &limit, &loads()).await.unwrap(),
            MAX_NESTING_DEPTH
        );

        // A step output one level deeper fails the step: nothing unreadable
        // is recorded.
        let run = RunId::new("too-deep").unwrap();
        match worker.run(&run, &(limit + 1), &loads()).await {
            Err(Error::StepFailed { message, .. }) => {
                assert!(message.contains("nested deeper than"), "{message}")
            }
            other => panic!("expected the step to fail, got {other:?}"),
        }

        // A #[memoized] value at the limit is a hit the second time.
        let memo = worker
            .memo_store()
            .new_memo(&RunId::new("memo").unwrap(), 0);
        let first = deep_value(&memo, limit).await.unwrap();
        assert_eq!(deep_value(&memo, limit).await.unwrap(), first);
        assert_eq!(DEEP_CALLS.load(Ordering::SeqCst), 1);
        match deep_value(&memo, limit + 1).await {
            Err(Error::Serialization { what, .. }) => {
                assert!(what.contains("deep_value"), "{what}")
            }
            other => panic!("expected the value to be refused, got {other:?}"),
        }

        // A signal payload one level too deep is refused at the sender.
        match worker
            .signal(
                &RunId::new("at-limit").unwrap(),
                "x",
                &nested(MAX_NESTING_DEPTH + 1),
            )
            .await
        {
            Err(Error::Serialization { .. }) => {}
            other => panic!("expected the payload to be refused, got {other:?}"),
        }
    })
    .await
    .unwrap();
}
