//! `#[memoized]` hits only for a call that would have computed the same
//! value: regressions for calls that once shared another call's entry
//! (issue 10), each named after what it reproduces.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};

use memo_runtime::{Memo, memoized};
use memo_tests::fixtures::{Backend, run};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// How many times a body ran.
#[derive(Default)]
struct Runs(AtomicUsize);

impl Runs {
    fn ran(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn memo() -> Memo {
    Backend::in_memory()
        .memo_store("memo")
        .new_memo(&run("r1"), 0)
}

/// Two types whose values serialize identically: only the type tells them
/// apart.
#[derive(Debug, Serialize)]
struct Celsius(i32);

#[derive(Debug, Serialize)]
struct Fahrenheit(i32);

#[memoized(skip(runs))]
async fn describe<T: Serialize + Debug + Sync>(
    memo: &Memo,
    runs: &Runs,
    reading: T,
) -> memo_runtime::Result<String> {
    runs.ran();
    Ok(format!("{reading:?}"))
}

#[tokio::test]
async fn generic_instantiations_with_equal_arguments_do_not_share_an_entry() {
    let (memo, runs) = (memo(), Runs::default());
    assert_eq!(
        describe(&memo, &runs, Celsius(7)).await.unwrap(),
        "Celsius(7)"
    );
    assert_eq!(
        describe(&memo, &runs, Fahrenheit(7)).await.unwrap(),
        "Fahrenheit(7)"
    );
    assert_eq!(
        describe(&memo, &runs, Celsius(7)).await.unwrap(),
        "Celsius(7)"
    );
    assert_eq!(runs.count(), 2, "the repeated instantiation hits");
}

#[memoized(skip(runs))]
async fn fetch<T: Serialize + DeserializeOwned + Default>(
    memo: &Memo,
    runs: &Runs,
    id: u64,
) -> memo_runtime::Result<T> {
    runs.ran();
    let _ = id;
    Ok(T::default())
}

#[tokio::test]
async fn a_type_parameter_only_in_the_return_type_is_part_of_the_key() {
    let (memo, runs) = (memo(), Runs::default());
    let ids: Vec<u8> = fetch(&memo, &runs, 1).await.unwrap();
    let name: String = fetch(&memo, &runs, 1).await.unwrap();
    assert_eq!((ids, name), (vec![], String::new()));
    assert_eq!(runs.count(), 2);
}

#[memoized(skip(runs))]
async fn shout(
    memo: &Memo,
    runs: &Runs,
    reading: impl Serialize + Debug + Sync,
) -> memo_runtime::Result<String> {
    runs.ran();
    Ok(format!("{reading:?}!"))
}

#[tokio::test]
async fn impl_trait_arguments_of_different_types_do_not_share_an_entry() {
    let (memo, runs) = (memo(), Runs::default());
    assert_eq!(
        shout(&memo, &runs, Celsius(1)).await.unwrap(),
        "Celsius(1)!"
    );
    assert_eq!(
        shout(&memo, &runs, Fahrenheit(1)).await.unwrap(),
        "Fahrenheit(1)!"
    );
    assert_eq!(runs.count(), 2);
}

#[memoized(skip(runs))]
async fn first_n<const N: usize>(
    memo: &Memo,
    runs: &Runs,
    items: Vec<u8>,
) -> memo_runtime::Result<Vec<u8>> {
    runs.ran();
    Ok(items.into_iter().take(N).collect())
}

#[tokio::test]
async fn const_parameters_are_part_of_the_key() {
    let (memo, runs) = (memo(), Runs::default());
    assert_eq!(first_n::<1>(&memo, &runs, vec![1, 2]).await.unwrap(), [1]);
    assert_eq!(
        first_n::<2>(&memo, &runs, vec![1, 2]).await.unwrap(),
        [1, 2]
    );
    assert_eq!(runs.count(), 2);
}

struct Email;
struct Sms;

impl Email {
    #[memoized(skip(self, runs))]
    async fn send(&self, memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("email to {to}"))
    }
}

impl Sms {
    #[memoized(skip(self, runs))]
    async fn send(&self, memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("sms to {to}"))
    }
}

#[tokio::test]
async fn methods_of_the_same_name_on_different_types_do_not_share_an_entry() {
    let (memo, runs) = (memo(), Runs::default());
    assert_eq!(
        Email.send(&memo, &runs, "ann").await.unwrap(),
        "email to ann"
    );
    assert_eq!(Sms.send(&memo, &runs, "ann").await.unwrap(), "sms to ann");
    assert_eq!(
        Email.send(&memo, &runs, "ann").await.unwrap(),
        "email to ann"
    );
    assert_eq!(runs.count(), 2);
}

trait Notify {
    async fn notify(&self, memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String>;
}

impl Notify for Email {
    #[memoized(skip(self, runs))]
    async fn notify(&self, memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("emailed {to}"))
    }
}

impl Notify for Sms {
    #[memoized(skip(self, runs))]
    async fn notify(&self, memo: &Memo, runs: &Runs, to: &str) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("texted {to}"))
    }
}

#[tokio::test]
async fn trait_impls_for_different_types_do_not_share_an_entry() {
    let (memo, runs) = (memo(), Runs::default());
    assert_eq!(
        Email.notify(&memo, &runs, "bo").await.unwrap(),
        "emailed bo"
    );
    assert_eq!(Sms.notify(&memo, &runs, "bo").await.unwrap(), "texted bo");
    assert_eq!(runs.count(), 2);
}

struct Repository<T>(std::marker::PhantomData<T>);

impl<T> Repository<T> {
    #[memoized(skip(self, runs))]
    async fn table(&self, memo: &Memo, runs: &Runs, id: u64) -> memo_runtime::Result<String> {
        runs.ran();
        Ok(format!("{}#{id}", std::any::type_name::<T>()))
    }
}

#[tokio::test]
async fn methods_of_a_generic_impl_are_keyed_per_instantiation() {
    let (memo, runs) = (memo(), Runs::default());
    let users = Repository::<Celsius>(std::marker::PhantomData);
    let orders = Repository::<Fahrenheit>(std::marker::PhantomData);
    let a = users.table(&memo, &runs, 1).await.unwrap();
    let b = orders.table(&memo, &runs, 1).await.unwrap();
    assert_ne!(a, b);
    assert_eq!(runs.count(), 2);
}

/// A domain type that happens to be called `Memo`.
mod office {
    #[derive(serde::Serialize)]
    pub(crate) struct Memo {
        pub(crate) text: String,
    }
}

struct StepContext {
    memo: Memo,
}

#[memoized(memo = &ctx.memo, skip(ctx, runs))]
async fn file_note(
    ctx: &StepContext,
    runs: &Runs,
    note: &office::Memo,
) -> memo_runtime::Result<String> {
    runs.ran();
    Ok(note.text.clone())
}

#[tokio::test]
async fn a_key_argument_whose_type_is_named_memo_is_part_of_the_key() {
    let (ctx, runs) = (StepContext { memo: memo() }, Runs::default());
    let lunch = office::Memo {
        text: "lunch at noon".into(),
    };
    let party = office::Memo {
        text: "party at five".into(),
    };
    assert_eq!(
        file_note(&ctx, &runs, &lunch).await.unwrap(),
        "lunch at noon"
    );
    assert_eq!(
        file_note(&ctx, &runs, &party).await.unwrap(),
        "party at five"
    );
    assert_eq!(runs.count(), 2);
}

/// Parameters named like the expansion's own locals.
#[memoized(skip(runs))]
async fn look_alike(
    memo: &Memo,
    runs: &Runs,
    __memo_handle: &str,
    __memo_key: u8,
) -> memo_runtime::Result<String> {
    runs.ran();
    Ok(format!("{__memo_handle:?} {__memo_key:?}"))
}

#[tokio::test]
async fn parameters_named_like_generated_locals_keep_their_values() {
    let (memo, runs) = (memo(), Runs::default());
    assert_eq!(
        look_alike(&memo, &runs, "mine", 3).await.unwrap(),
        "\"mine\" 3"
    );
}

#[derive(Serialize, Deserialize)]
enum Kind {
    Letter,
    Parcel,
}

#[memoized(skip(runs, type))]
async fn postage(memo: &Memo, runs: &Runs, r#type: Kind, grams: u32) -> memo_runtime::Result<u32> {
    runs.ran();
    let _ = r#type;
    Ok(grams * 2)
}

#[tokio::test]
async fn skipping_a_raw_identifier_parameter_leaves_it_out_of_the_key() {
    let (memo, runs) = (memo(), Runs::default());
    assert_eq!(postage(&memo, &runs, Kind::Letter, 20).await.unwrap(), 40);
    assert_eq!(postage(&memo, &runs, Kind::Parcel, 20).await.unwrap(), 40);
    assert_eq!(
        runs.count(),
        1,
        "`type` is skipped, so the second call hits"
    );
}

#[memoized(skip(runs))]
async fn acknowledge(memo: &Memo, runs: &Runs, receipt: Option<()>) -> memo_runtime::Result<bool> {
    runs.ran();
    Ok(receipt.is_some())
}

#[tokio::test]
async fn some_unit_and_none_do_not_share_an_entry() {
    let (memo, runs) = (memo(), Runs::default());
    assert!(!acknowledge(&memo, &runs, None).await.unwrap());
    assert!(acknowledge(&memo, &runs, Some(())).await.unwrap());
    assert_eq!(runs.count(), 2);
}

/// The key of a call with type parts is a stored-data format too.
mod key_derivation {
    use std::any::type_name;

    use memo_runtime::content_key;

    use super::*;

    // Computed independently: Python's `hashlib` over the domain tag and the
    // MessagePack array `["describe", 0, [7], ["u8"]]`, packed by hand.
    const GOLDEN_GENERIC: &str = "c873843644f6ccc3f51d448f7bb03d7a849062411a770c40a60428c5b3c5c8dd";

    #[test]
    fn golden_key_of_name_version_arguments_and_types() {
        assert_eq!(
            content_key(&("describe", 0u32, (7u8,), ("u8",))).unwrap(),
            GOLDEN_GENERIC
        );
    }

    #[tokio::test]
    async fn a_generic_call_is_found_under_name_version_arguments_and_type_names() {
        let (memo, runs) = (memo(), Runs::default());
        describe(&memo, &runs, 7u8).await.unwrap();
        assert!(memo.get(GOLDEN_GENERIC).await.unwrap().is_some());
        describe(&memo, &runs, Celsius(7)).await.unwrap();
        let documented = ("describe", 0u32, (7,), (type_name::<Celsius>(),));
        assert!(memo.content_get(&documented).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_method_call_is_found_under_the_implementing_type_name() {
        let (memo, runs) = (memo(), Runs::default());
        Email.send(&memo, &runs, "ann").await.unwrap();
        let documented = ("send", 0u32, ("ann",), (type_name::<Email>(),));
        assert!(memo.content_get(&documented).await.unwrap().is_some());
        // Without the type it is where a free `send` would be: not there.
        assert!(
            memo.content_get(&("send", 0u32, ("ann",)))
                .await
                .unwrap()
                .is_none()
        );
    }
}
