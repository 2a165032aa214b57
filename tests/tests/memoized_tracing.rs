//! Each `#[memoized]` call is one `memoized` span that records the function,
//! run, step and outcome.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use memo_runtime::object_store::ObjectStore;
use memo_runtime::{Memo, MemoStore, memoized};
use memo_tests::fixtures::{Backend, run};
use tokio::sync::Notify;
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The fields of every `memoized` span, in creation order.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

impl Spans {
    fn outcomes(&self) -> Vec<String> {
        let spans = self.0.lock().unwrap();
        spans.iter().map(|s| s["outcome"].clone()).collect()
    }
}

/// Remembers which recorded fields belong to which span.
struct Index(usize);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S> Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "memoized" {
            return;
        }
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut spans = self.0.lock().unwrap();
        spans.push(fields);
        let span = ctx.span(id).expect("a new span is registered");
        span.extensions_mut().insert(Index(spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let Some(Index(i)) = span.extensions().get::<Index>().map(|i| Index(i.0)) else {
            return;
        };
        values.record(&mut Fields(&mut self.0.lock().unwrap()[i]));
    }
}

fn capture() -> (Spans, tracing::subscriber::DefaultGuard) {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    (spans, tracing::subscriber::set_default(subscriber))
}

fn memo_on(objects: Arc<dyn ObjectStore>) -> Memo {
    MemoStore::new(objects, "memo").new_memo(&run("traced-run"), 4)
}

#[memoized(skip(fail))]
async fn lookup(memo: &Memo, fail: bool, id: u32) -> anyhow::Result<u32> {
    anyhow::ensure!(!fail, "lookup failed");
    Ok(id + 1)
}

#[tokio::test(flavor = "current_thread")]
async fn each_call_is_one_span_with_function_run_step_and_outcome() {
    let (spans, _guard) = capture();
    let memo = memo_on(Backend::in_memory().objects());
    lookup(&memo, true, 1).await.unwrap_err();
    lookup(&memo, false, 1).await.unwrap();
    lookup(&memo, false, 1).await.unwrap();
    assert_eq!(spans.outcomes(), ["error", "miss", "hit"]);
    let first = spans.0.lock().unwrap()[0].clone();
    assert_eq!(first["function"], "lookup");
    assert_eq!(first["run"], "traced-run");
    assert_eq!(first["step"], "4");
}

/// `who` is left out of the key but not out of the value, so two racing
/// calls commit different values.
#[memoized(skip(who, entered, gate))]
async fn gated(
    memo: &Memo,
    who: &str,
    entered: &Notify,
    gate: &Notify,
    id: u32,
) -> anyhow::Result<String> {
    entered.notify_one();
    gate.notified().await;
    Ok(format!("{id} by {who}"))
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_that_loses_the_race_records_committed_by_other() {
    let (spans, _guard) = capture();
    let folder = Backend::local_folder();
    // Two store instances: two processes, as far as single-flight knows.
    let (slow, fast) = (memo_on(folder.open()), memo_on(folder.open()));
    let (slow_entered, slow_gate) = (Notify::new(), Notify::new());
    let (fast_entered, open_gate) = (Notify::new(), Notify::new());
    let slow_call = gated(&slow, "slow", &slow_entered, &slow_gate, 1);
    let fast_then_release = async {
        slow_entered.notified().await;
        open_gate.notify_one();
        let value = gated(&fast, "fast", &fast_entered, &open_gate, 1)
            .await
            .unwrap();
        slow_gate.notify_one();
        value
    };
    let (slow_value, fast_value) = tokio::join!(slow_call, fast_then_release);
    assert_eq!(fast_value, "1 by fast");
    assert_eq!(slow_value.unwrap(), fast_value);
    assert_eq!(spans.outcomes(), ["committed-by-other", "miss"]);
}

/// Each event as "message in span < parent span < ...", innermost first.
#[derive(Clone, Default)]
struct EventScopes(Arc<Mutex<Vec<String>>>);

impl<S> Layer<S> for EventScopes
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let scope: Vec<_> = ctx
            .event_scope(event)
            .map(|scope| scope.map(|span| span.name()).collect())
            .unwrap_or_default();
        let message = &fields["message"];
        let line = format!("{message} in {}", scope.join(" < "));
        self.0.lock().unwrap().push(line);
    }
}

#[memoized]
async fn logged(memo: &Memo, id: u32) -> anyhow::Result<u32> {
    tracing::info!("in the body");
    Ok(id)
}

#[tokio::test(flavor = "current_thread")]
async fn events_of_the_body_are_inside_the_memoized_span() {
    let events = EventScopes::default();
    let subscriber = tracing_subscriber::registry().with(events.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let memo = memo_on(Backend::in_memory().objects());
    async {
        logged(&memo, 1).await.unwrap();
    }
    .instrument(tracing::info_span!("caller"))
    .await;
    assert_eq!(
        *events.0.lock().unwrap(),
        ["in the body in memoized < caller"]
    );
}

/// The fields of every event, in order, its level as `level`.
#[derive(Clone, Default)]
struct EventFields(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

impl<S: tracing::Subscriber> Layer<S> for EventFields {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let level = event.metadata().level().to_string();
        fields.insert("level".into(), level);
        self.0.lock().unwrap().push(fields);
    }
}

impl EventFields {
    /// The events whose message is `message`.
    fn with_message(&self, message: &str) -> Vec<BTreeMap<String, String>> {
        let events = self.0.lock().unwrap();
        let matching = events.iter().filter(|fields| fields["message"] == message);
        matching.cloned().collect()
    }
}

/// An attempt the runtime stops logs a warning with the kind of the error
/// that stopped it as a field of its own, so that an alert on a deploy's
/// non-determinism (`CodeChanged`) need not read messages: here a run
/// suspended by one code and resumed by another that calls another step
/// first. The suspension is no stop: logged at `INFO` (it was a warning).
#[tokio::test(flavor = "current_thread")]
async fn a_stopped_attempt_logs_the_kind_of_what_stopped_it() {
    use memo_runtime::runtime_store::InMemoryRuntimeStore;
    use memo_runtime::workflow::{Context as Ctx, Runtime, Workflow};
    use memo_runtime::{Error, ErrorKind};

    let events = EventFields::default();
    let subscriber = tracing_subscriber::registry().with(events.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let runtime = Runtime::builder()
        .memo_store(MemoStore::new(Backend::in_memory().objects(), "memo"))
        .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
        .build()
        .unwrap();
    let first = Workflow::new("w", |ctx: Ctx, (): ()| async move {
        ctx.step("a", |_memo| async { Ok::<_, Error>(()) }).await?;
        ctx.wait_for_signal::<String>("go").await
    });
    let changed = Workflow::new("w", |ctx: Ctx, (): ()| async move {
        ctx.step("b", |_memo| async { Ok::<_, Error>(()) }).await?;
        ctx.wait_for_signal::<String>("go").await
    });
    let id = run("changed-code");
    let suspended = runtime.run(&id, &(), &first).await;
    assert!(
        matches!(suspended, Err(Error::Suspended { .. })),
        "{suspended:?}"
    );
    runtime.signal(&id, "go", "now").await.unwrap();

    let stopped = runtime.run(&id, &(), &changed).await;
    assert_eq!(stopped.unwrap_err().kind(), ErrorKind::CodeChanged);
    let waits = events.with_message("attempt suspended; the run waits");
    assert!(
        matches!(&waits[..], [wait] if wait["level"] == "INFO"),
        "{waits:?}"
    );
    let stops = events.with_message("attempt stopped; the run stays open");
    let [stop] = &stops[..] else {
        panic!("one stop, the non-determinism: {stops:?}")
    };
    assert!(
        stop["interruption"].starts_with("non-determinism"),
        "{stop:?}"
    );
    assert_eq!(
        (stop["level"].as_str(), stop["cause"].as_str()),
        ("WARN", "Some(CodeChanged)"),
        "{stop:?}"
    );
}
