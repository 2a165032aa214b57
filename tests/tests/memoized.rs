//! `#[memoized]` end to end: the expanded code against real stores
//! (InMemory and LocalFileSystem), counting how often each body runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memo_runtime::object_store::ObjectStore;
use memo_runtime::{Error, Memo, MemoStore, content_key, memoized};
use memo_tests::fixtures;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// How many times a body ran.
#[derive(Default)]
struct Runs(AtomicUsize);

impl Runs {
    fn ran(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn memo_on(objects: Arc<dyn ObjectStore>, run: &str, step: u32) -> Memo {
    MemoStore::new(objects, "memo").new_memo(&fixtures::run(run), step)
}

/// Runs `check` against every fixture backend, one test each.
macro_rules! on_every_backend {
    ($name:ident, $check:ident) => {
        mod $name {
            use memo_tests::fixtures::Backend;

            #[tokio::test]
            async fn in_memory() {
                super::$check(Backend::in_memory().objects()).await;
            }

            #[tokio::test]
            async fn local_file_system() {
                let folder = Backend::local_folder();
                super::$check(folder.objects()).await;
            }
        }
    };
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Draft {
    text: String,
    tokens: u32,
}

#[memoized(skip(runs))]
async fn draft_reply(memo: &Memo, runs: &Runs, ticket: &str) -> memo_runtime::Result<Draft> {
    let n = runs.ran();
    Ok(Draft {
        text: format!("re: {ticket} (attempt {n})"),
        tokens: 7,
    })
}

async fn a_miss_runs_the_body_and_a_hit_returns_the_committed_value(objects: Arc<dyn ObjectStore>) {
    let memo = memo_on(objects, "r1", 3);
    let runs = Runs::default();
    let first = draft_reply(&memo, &runs, "refund").await.unwrap();
    let second = draft_reply(&memo, &runs, "refund").await.unwrap();
    assert_eq!(runs.count(), 1, "the hit must not run the body");
    assert_eq!(first, second);
    assert_eq!(first.text, "re: refund (attempt 1)");
}
on_every_backend!(
    hit_after_miss,
    a_miss_runs_the_body_and_a_hit_returns_the_committed_value
);

async fn each_argument_value_and_step_is_its_own_entry(objects: Arc<dyn ObjectStore>) {
    let runs = Runs::default();
    let step3 = memo_on(objects.clone(), "r1", 3);
    let step4 = memo_on(objects.clone(), "r1", 4);
    let other_run = memo_on(objects, "r2", 3);
    draft_reply(&step3, &runs, "refund").await.unwrap();
    draft_reply(&step3, &runs, "upgrade").await.unwrap();
    draft_reply(&step4, &runs, "refund").await.unwrap();
    draft_reply(&other_run, &runs, "refund").await.unwrap();
    assert_eq!(runs.count(), 4);
    // Skipped arguments are not part of the key: another `Runs` still hits.
    let fresh = Runs::default();
    draft_reply(&step3, &fresh, "refund").await.unwrap();
    assert_eq!(fresh.count(), 0);
}
on_every_backend!(
    separate_entries,
    each_argument_value_and_step_is_its_own_entry
);

#[memoized(skip(runs, fail))]
async fn flaky(memo: &Memo, runs: &Runs, fail: bool, id: u32) -> anyhow::Result<u32> {
    runs.ran();
    anyhow::ensure!(!fail, "upstream timed out");
    Ok(id * 10)
}

async fn errors_are_not_committed(objects: Arc<dyn ObjectStore>) {
    let memo = memo_on(objects, "r1", 0);
    let runs = Runs::default();
    let err = flaky(&memo, &runs, true, 4).await.unwrap_err();
    assert_eq!(err.to_string(), "upstream timed out");
    assert_eq!(flaky(&memo, &runs, false, 4).await.unwrap(), 40);
    assert_eq!(flaky(&memo, &runs, true, 4).await.unwrap(), 40, "now a hit");
    assert_eq!(runs.count(), 2);
}
on_every_backend!(errors, errors_are_not_committed);

#[memoized(name = "send_email", skip(runs))]
async fn send_email_v0(memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String> {
    Ok(format!("v0 #{} to {to}", runs.ran()))
}

#[memoized(name = "send_email", version = 1, skip(runs))]
async fn send_email_v1(memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String> {
    Ok(format!("v1 #{} to {to}", runs.ran()))
}

/// Same name and version as `send_email_v0`: a rename of the Rust function
/// that keeps its stable name.
#[memoized(name = "send_email", version = 0, skip(runs))]
async fn send_email_renamed(memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String> {
    Ok(format!("renamed #{} to {to}", runs.ran()))
}

async fn a_version_bump_misses_and_the_same_name_and_version_share_entries(
    objects: Arc<dyn ObjectStore>,
) {
    let memo = memo_on(objects, "r1", 0);
    let runs = Runs::default();
    let v0 = send_email_v0(&memo, &runs, "a@example.com").await.unwrap();
    let v1 = send_email_v1(&memo, &runs, "a@example.com").await.unwrap();
    assert_eq!(runs.count(), 2, "version 1 must not hit version 0's entry");
    assert_ne!(v0, v1);
    let renamed = send_email_renamed(&memo, &runs, "a@example.com")
        .await
        .unwrap();
    assert_eq!(runs.count(), 2, "same name and version must hit");
    assert_eq!(renamed, v0);
}
on_every_backend!(
    versions_and_names,
    a_version_bump_misses_and_the_same_name_and_version_share_entries
);

#[derive(Serialize)]
struct Pricing {
    currency: &'static str,
}

impl Pricing {
    #[memoized(skip(runs))]
    async fn quote(&self, memo: &Memo, runs: &Runs, cents: u64) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("{cents} {}", self.currency))
    }

    #[memoized(skip(self, runs))]
    async fn quote_any_currency(
        &self,
        memo: &Memo,
        runs: &Runs,
        cents: u64,
    ) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("{cents} {}", self.currency))
    }
}

trait Quoter {
    async fn quote_in_trait(
        &self,
        memo: &Memo,
        runs: &Runs,
        cents: u64,
    ) -> memo_runtime::Result<String>;
}

impl Quoter for Pricing {
    #[memoized(skip(runs))]
    async fn quote_in_trait(
        &self,
        memo: &Memo,
        runs: &Runs,
        cents: u64,
    ) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("{cents} {} (trait)", self.currency))
    }
}

async fn methods_key_on_self_unless_it_is_skipped(objects: Arc<dyn ObjectStore>) {
    let memo = memo_on(objects, "r1", 0);
    let (eur, usd) = (Pricing { currency: "EUR" }, Pricing { currency: "USD" });
    let runs = Runs::default();
    assert_eq!(eur.quote(&memo, &runs, 5).await.unwrap(), "5 EUR");
    assert_eq!(usd.quote(&memo, &runs, 5).await.unwrap(), "5 USD");
    assert_eq!(eur.quote(&memo, &runs, 5).await.unwrap(), "5 EUR");
    assert_eq!(runs.count(), 2, "self is part of the key");

    let runs = Runs::default();
    assert_eq!(
        eur.quote_any_currency(&memo, &runs, 5).await.unwrap(),
        "5 EUR"
    );
    assert_eq!(
        usd.quote_any_currency(&memo, &runs, 5).await.unwrap(),
        "5 EUR"
    );
    assert_eq!(runs.count(), 1, "a skipped self is not");

    let runs = Runs::default();
    eur.quote_in_trait(&memo, &runs, 5).await.unwrap();
    eur.quote_in_trait(&memo, &runs, 5).await.unwrap();
    assert_eq!(runs.count(), 1, "trait-impl methods are memoized too");
}
on_every_backend!(methods, methods_key_on_self_unless_it_is_skipped);

#[memoized(skip(runs))]
async fn largest<T>(memo: &Memo, runs: &Runs, items: Vec<T>) -> memo_runtime::Result<Option<T>>
where
    T: Serialize + for<'de> Deserialize<'de> + Ord + Clone + Send + Sync,
{
    runs.ran();
    Ok(items.iter().max().cloned())
}

async fn generic_functions_are_memoized_per_argument_value(objects: Arc<dyn ObjectStore>) {
    let memo = memo_on(objects, "r1", 0);
    let runs = Runs::default();
    assert_eq!(largest(&memo, &runs, vec![3, 9, 2]).await.unwrap(), Some(9));
    assert_eq!(largest(&memo, &runs, vec![3, 9, 2]).await.unwrap(), Some(9));
    let words = vec!["b".to_owned(), "a".to_owned()];
    assert_eq!(
        largest(&memo, &runs, words).await.unwrap().as_deref(),
        Some("b")
    );
    assert_eq!(runs.count(), 2);
}
on_every_backend!(generics, generic_functions_are_memoized_per_argument_value);

type AppResult<T> = Result<T, AppError>;

#[derive(Debug)]
enum AppError {
    Memo(#[expect(dead_code, reason = "only the conversion matters here")] Error),
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Memo(e)
    }
}

#[memoized(skip(runs))]
async fn with_alias(memo: &Memo, runs: &Runs, n: u8) -> AppResult<u8> {
    runs.ran();
    Ok(n + 1)
}

#[memoized(skip(runs))]
async fn with_io(memo: &Memo, runs: &Runs, n: u8) -> std::io::Result<u8> {
    runs.ran();
    Ok(n + 2)
}

#[memoized(skip(runs))]
async fn with_unit(memo: &Memo, runs: &Runs) -> anyhow::Result<()> {
    runs.ran();
    Ok(())
}

async fn result_aliases_and_ok_unit_are_memoized(objects: Arc<dyn ObjectStore>) {
    let memo = memo_on(objects, "r1", 0);
    let runs = Runs::default();
    for _ in 0..2 {
        assert_eq!(with_alias(&memo, &runs, 1).await.unwrap(), 2);
        assert_eq!(with_io(&memo, &runs, 1).await.unwrap(), 3);
        with_unit(&memo, &runs).await.unwrap();
    }
    assert_eq!(runs.count(), 3);
}
on_every_backend!(aliases, result_aliases_and_ok_unit_are_memoized);

#[memoized(skip(runs))]
async fn total(
    memo: &Memo,
    runs: &Runs,
    prices: &HashMap<String, u64>,
) -> memo_runtime::Result<u64> {
    runs.ran();
    Ok(prices.values().sum())
}

async fn hash_map_arguments_hit_whatever_their_insertion_order(objects: Arc<dyn ObjectStore>) {
    let memo = memo_on(objects, "r1", 0);
    let runs = Runs::default();
    let names: Vec<String> = (0..32).map(|i| format!("item-{i}")).collect();
    // Two maps iterate in different orders: each has its own random hasher
    // seed, and they are filled in opposite orders.
    let forward: HashMap<String, u64> = names.iter().cloned().zip(0..32).collect();
    let backward: HashMap<String, u64> = names
        .iter()
        .cloned()
        .zip(0..32)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert_eq!(total(&memo, &runs, &forward).await.unwrap(), 496);
    assert_eq!(total(&memo, &runs, &backward).await.unwrap(), 496);
    assert_eq!(runs.count(), 1);
}
on_every_backend!(
    hash_maps,
    hash_map_arguments_hit_whatever_their_insertion_order
);

struct Context {
    memo: Memo,
    tenant: &'static str,
}

impl Context {
    fn memo(&self) -> &Memo {
        &self.memo
    }
}

#[memoized(memo = ctx.memo(), skip(ctx, runs))]
async fn welcome(ctx: &Context, runs: &Runs, user: u64) -> memo_runtime::Result<String> {
    runs.ran();
    Ok(format!("welcome to {}, user {user}", ctx.tenant))
}

async fn the_memo_may_come_from_an_expression(objects: Arc<dyn ObjectStore>) {
    let ctx = Context {
        memo: memo_on(objects, "r1", 0),
        tenant: "acme",
    };
    let runs = Runs::default();
    welcome(&ctx, &runs, 7).await.unwrap();
    assert_eq!(
        welcome(&ctx, &runs, 7).await.unwrap(),
        "welcome to acme, user 7"
    );
    assert_eq!(runs.count(), 1);
}
on_every_backend!(memo_expression, the_memo_may_come_from_an_expression);

async fn an_entry_that_does_not_decode_is_an_error_and_the_body_does_not_run(
    objects: Arc<dyn ObjectStore>,
) {
    let memo = memo_on(objects, "r9", 2);
    // Not a MessagePack `Draft`: what an incompatible change of the output
    // type would find.
    memo.content_put(&("draft_reply", 0u32, ("refund",)), b"\xc1 not msgpack")
        .await
        .unwrap();
    let runs = Runs::default();
    let err = draft_reply(&memo, &runs, "refund").await.unwrap_err();
    assert_eq!(
        runs.count(),
        0,
        "the side effect must not silently run again"
    );
    match err {
        Error::Decode { what, path, .. } => {
            assert_eq!(what, "memoized fn `draft_reply` (run r9, step 2)");
            assert!(path.contains("r9"), "the path names the entry: {path}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}
on_every_backend!(
    decode_errors,
    an_entry_that_does_not_decode_is_an_error_and_the_body_does_not_run
);

/// The key derivation is a stored-data format: these pin it.
mod key_derivation {
    use super::*;

    #[test]
    fn golden_keys_of_name_version_and_arguments() {
        assert_eq!(
            content_key(&("draft_reply", 0u32, ("refund",))).unwrap(),
            GOLDEN_ONE_ARGUMENT
        );
        assert_eq!(
            content_key(&("send_email", 1u32, ("a@example.com", 3u8))).unwrap(),
            GOLDEN_TWO_ARGUMENTS
        );
        assert_eq!(
            content_key(&("with_unit", 0u32, [(); 0])).unwrap(),
            GOLDEN_NO_ARGUMENTS
        );
    }

    // Computed independently: Python's `msgpack.packb` of the list
    // `[name, version, [args...]]` after the domain tag, through SHA-256.
    const GOLDEN_ONE_ARGUMENT: &str =
        "8fb84e2d78665becc813f16d23366202a7d7f8bf853209865d64a88b07818b31";
    const GOLDEN_TWO_ARGUMENTS: &str =
        "be5150157ad0aa6afe7ce3160e79116a6adaa3e1f87773642bd45c1d98d4e739";
    const GOLDEN_NO_ARGUMENTS: &str =
        "3310765c0e74958cd26ac44946ea5ac006307d0ce98bf50096a8a53e2ee5eab5";

    #[memoized(name = "send_email", version = 1, skip(runs))]
    async fn send(memo: &Memo, runs: &Runs, to: &str, attempt: u8) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("sent to {to}"))
    }

    #[tokio::test]
    async fn the_entry_is_found_under_content_key_of_name_version_and_arguments() {
        let memo = memo_on(fixtures::Backend::in_memory().objects(), "r1", 0);
        let runs = Runs::default();
        send(&memo, &runs, "a@example.com", 3).await.unwrap();
        let stored = memo
            .content_get(&("send_email", 1u32, ("a@example.com", 3u8)))
            .await
            .unwrap()
            .expect("the entry under the documented key");
        assert_eq!(
            stored,
            rmp_serde::to_vec_named("sent to a@example.com").unwrap()
        );
        assert_eq!(
            memo.get(GOLDEN_TWO_ARGUMENTS).await.unwrap(),
            Some(stored),
            "and under the golden key"
        );

        let runs = Runs::default();
        with_unit(&memo, &runs).await.unwrap();
        assert!(memo.get(GOLDEN_NO_ARGUMENTS).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_value_committed_by_hand_under_the_documented_key_is_a_hit() {
        let memo = memo_on(fixtures::Backend::in_memory().objects(), "r1", 0);
        let by_hand = Draft {
            text: "precomputed".into(),
            tokens: 1,
        };
        memo.put(
            GOLDEN_ONE_ARGUMENT,
            rmp_serde::to_vec_named(&by_hand).unwrap(),
        )
        .await
        .unwrap();
        let runs = Runs::default();
        assert_eq!(draft_reply(&memo, &runs, "refund").await.unwrap(), by_hand);
        assert_eq!(runs.count(), 0);
    }
}

/// Signals `entered` once the body runs, then waits for `gate`.
#[memoized(skip(runs, entered, gate))]
async fn gated(
    memo: &Memo,
    runs: &Runs,
    entered: &Notify,
    gate: &Notify,
    id: u32,
) -> memo_runtime::Result<String> {
    let n = runs.ran();
    entered.notify_one();
    gate.notified().await;
    Ok(format!("{id} from body run {n}"))
}

#[tokio::test]
async fn concurrent_identical_calls_run_the_body_once_and_agree() {
    let memo = memo_on(fixtures::Backend::in_memory().objects(), "r1", 0);
    let runs = Runs::default();
    let (entered, gate) = (Notify::new(), Notify::new());
    let calls: Vec<_> = (0..16)
        .map(|_| gated(&memo, &runs, &entered, &gate, 5))
        .collect();
    let all = futures::future::join_all(calls);
    let release = async {
        // Every call is polled before the gate opens: InMemory answers at
        // once, so by now each has missed and waits for the flight.
        tokio::task::yield_now().await;
        assert_eq!(runs.count(), 1, "only the flight's holder entered the body");
        gate.notify_one();
    };
    let (results, ()) = tokio::join!(all, release);
    assert_eq!(runs.count(), 1);
    for result in results {
        assert_eq!(result.unwrap(), "5 from body run 1");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spawned_identical_calls_on_threads_agree_and_run_the_body_once() {
    let memo = Arc::new(memo_on(fixtures::Backend::in_memory().objects(), "r1", 0));
    let runs = Arc::new(Runs::default());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (memo, runs) = (memo.clone(), runs.clone());
        tasks.spawn(async move { flaky(&memo, &runs, false, 8).await.unwrap() });
    }
    while let Some(value) = tasks.join_next().await {
        assert_eq!(value.unwrap(), 80);
    }
    assert_eq!(runs.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_instances_agree_on_the_first_committed_value() {
    let folder = fixtures::Backend::local_folder();
    // Two store instances over one folder: what two processes see. They do
    // not share a flight, so both bodies run.
    let slow = memo_on(folder.open(), "r1", 0);
    let fast = memo_on(folder.open(), "r1", 0);
    let (slow_runs, fast_runs) = (Runs::default(), Runs::default());
    let (slow_entered, slow_gate) = (Notify::new(), Notify::new());
    let (fast_entered, open_gate) = (Notify::new(), Notify::new());
    let slow_call = gated(&slow, &slow_runs, &slow_entered, &slow_gate, 1);
    let fast_then_release = async {
        slow_entered.notified().await; // the slow body has missed and runs
        open_gate.notify_one(); // a permit: the fast body does not wait
        let fast_value = gated(&fast, &fast_runs, &fast_entered, &open_gate, 1)
            .await
            .unwrap();
        slow_gate.notify_one(); // the slow body finishes, after the commit
        fast_value
    };
    let (slow_value, fast_value) = tokio::join!(slow_call, fast_then_release);
    assert_eq!((slow_runs.count(), fast_runs.count()), (1, 1));
    assert_eq!(
        slow_value.unwrap(),
        fast_value,
        "the loser returns the committed value"
    );
}

mod shadowed {
    //! The expansion reaches the runtime through `crate = "..."` even when a
    //! local name `memo_runtime` is something else.
    #[allow(unused_imports)]
    use std as memo_runtime;

    use super::{Runs, memo_on};
    use crate::sdk::{Memo, memoized};

    #[memoized(crate = "crate::sdk", skip(runs))]
    async fn through_sdk(memo: &Memo, runs: &Runs, n: u8) -> crate::sdk::Result<u8> {
        runs.ran();
        Ok(n)
    }

    #[tokio::test]
    async fn a_shadowed_crate_name_with_a_crate_path_is_memoized() {
        let memo = memo_on(
            memo_tests::fixtures::Backend::in_memory().objects(),
            "r1",
            0,
        );
        let runs = Runs::default();
        assert_eq!(through_sdk(&memo, &runs, 4).await.unwrap(), 4);
        assert_eq!(through_sdk(&memo, &runs, 4).await.unwrap(), 4);
        assert_eq!(runs.count(), 1);
    }
}

/// The runtime under another path, as a crate that re-exports it would.
mod sdk {
    pub(crate) use memo_runtime::*;
}

/// An argument whose `Serialize` fails, as a map with unsupported keys might.
struct Unencodable;

impl Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("this value has no encoding"))
    }
}

#[memoized(skip(runs))]
async fn with_unencodable(memo: &Memo, runs: &Runs, arg: Unencodable) -> memo_runtime::Result<u8> {
    let Unencodable = arg;
    runs.ran();
    Ok(1)
}

#[tokio::test]
async fn an_argument_that_fails_to_serialize_is_an_error_naming_the_call_and_the_body_does_not_run()
{
    let memo = memo_on(fixtures::Backend::in_memory().objects(), "r5", 1);
    let runs = Runs::default();
    let err = with_unencodable(&memo, &runs, Unencodable)
        .await
        .unwrap_err();
    assert_eq!(runs.count(), 0);
    match err {
        Error::Serialization { what, source } => {
            assert_eq!(
                what,
                "the arguments of memoized fn `with_unencodable` (run r5, step 1)"
            );
            assert!(source.to_string().contains("no encoding"), "{source}");
        }
        other => panic!("expected Error::Serialization, got {other:?}"),
    }
}
