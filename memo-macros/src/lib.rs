//! The `#[memoized]` attribute of memo, re-exported as
//! [`memo_runtime::memoized`](https://docs.rs/memo-runtime/latest/memo_runtime/attr.memoized.html).
//!
//! Depend on `memo-runtime` and use the attribute from there: the code it
//! generates names only `memo_runtime::__private`, so this crate alone is not
//! usable.
//!
//! The pipeline reads in three stages, one file each: `attr` parses the
//! options, `valid` checks them against the signature and produces a
//! `valid::Plan`, `expand` generates the function.

mod attr;
mod expand;
mod valid;

use proc_macro::TokenStream;

/// Makes an `async fn` retry-safe: its `Ok` value is committed once per
/// (run, step, arguments), and every later call returns the committed value
/// without running the body.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// use std::sync::Arc;
/// use memo_runtime::{Memo, MemoStore, RunId, memoized, object_store::memory::InMemory};
///
/// #[memoized]
/// async fn draft_reply(memo: &Memo, ticket: &str) -> memo_runtime::Result<String> {
///     println!("calling the model"); // the expensive side effect: runs once
///     Ok(format!("Dear customer, about {ticket}..."))
/// }
///
/// let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
/// let memo = store.new_memo(&RunId::new("order-1")?, 3);
/// let first = draft_reply(&memo, "refund").await?;   // miss: the body runs
/// let retry = draft_reply(&memo, "refund").await?;   // hit: it does not
/// assert_eq!(first, retry);
/// # Ok(()) }
/// ```
///
/// # What it does
///
/// On each call the expansion derives a key from the function's stable
/// name, its `version` and its arguments, and asks the memo:
///
/// - **hit**: the committed value is decoded and returned; the body does not
///   run.
/// - **miss**: the body runs. An `Ok` value is encoded (MessagePack, with
///   field names) and committed write-once; the *committed* value is
///   returned, so when another attempt committed first (another process, a
///   retry racing a lost acknowledgement) every caller gets that one value.
///   An `Err` is returned as is and nothing is committed, so the next call
///   tries again.
/// - Identical concurrent calls in one process (same store, run, step and
///   key) run the body once: the others wait and return its committed value.
///   A memoized function that calls itself with the same key deadlocks.
/// - A committed value that does not decode as the `Ok` type (the type
///   changed incompatibly) is `memo_runtime::Error::Decode`, naming the
///   function, run, step and object path. The body is not run again: bump
///   `version` to start afresh.
///
/// Each call is one `tracing` span named `memoized` with the fields
/// `function`, `run`, `step` and `outcome`: `hit`, `miss` (the body ran and
/// its value is the committed one), `committed-by-other` (the body ran but
/// a different value was committed first, and is returned) or `error`
/// (the body or the memo failed; nothing was committed). The body runs
/// inside the span.
///
/// # The key
///
/// The key is [`content_key`] of the tuple `(name, version, (args...))`: the
/// name as a string, the version as a `u32`, then every argument except the
/// memo and the skipped ones, in declaration order (the receiver first). The
/// arguments are one MessagePack array, so with one or more arguments the key
/// is exactly `content_key(&(name, version, (arg1, arg2)))`, and with none
/// `content_key(&(name, version, [(); 0]))`. The entry is then the memo's
/// entry for that key: [`Memo::content_get`] with the same tuple finds it.
/// The derivation is pinned by golden tests; changing it would orphan every
/// stored entry.
///
/// `HashMap` arguments are fine (`content_key` sorts map entries), but a
/// top-level `HashSet` is rejected: its encoding order is random. Take a
/// `BTreeSet`. Every key argument must be `Serialize`; `self` too unless it is
/// skipped.
///
/// # Requirements
///
/// - An `async fn`: free, an inherent method, or a method of a trait impl;
///   generics, where-clauses, lifetimes, `impl Trait` arguments and `mut`
///   bindings are fine. The signature is kept token for token. Each key
///   argument needs a plain name (`ticket: Ticket`, not a pattern).
/// - The return type is a `Result<T, E>` under any alias
///   (`anyhow::Result<T>`, `std::io::Result<T>`, your own), with
///   `T: Serialize + DeserializeOwned` and `E: From<memo_runtime::Error>`:
///   the memo's own failures (storage, decoding) come back as `E`.
///
/// # `memo = <expr>`
///
/// Where the memo comes from. By default it is the one parameter whose type
/// is `&Memo`, `&mut Memo` or `Memo`; with several, or none, say which. The
/// expression may use the parameters, and may yield a `Memo`, `&Memo`,
/// `&mut Memo` or `Arc<Memo>`. Parameters of type `Memo` (and a parameter
/// named by `memo = param`) are never part of the key; others used by the
/// expression are, unless skipped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// # use std::sync::Arc;
/// # use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
/// use memo_runtime::{Memo, memoized};
///
/// struct StepContext {
///     memo: Memo,
///     tenant: String,
/// }
///
/// #[memoized(memo = &ctx.memo, skip(ctx))]
/// async fn welcome(ctx: &StepContext, user: u64) -> memo_runtime::Result<String> {
///     Ok(format!("welcome to {}, user {user}", ctx.tenant))
/// }
///
/// # let memo = MemoStore::new(Arc::new(InMemory::new()), "").new_memo(&RunId::new("r")?, 0);
/// let ctx = StepContext { memo, tenant: "acme".into() };
/// assert_eq!(welcome(&ctx, 7).await?, "welcome to acme, user 7");
/// # Ok(()) }
/// ```
///
/// # `name = "..."`
///
/// The stable name in the key (default: the function's identifier). Set it
/// to rename or move the function without losing its committed entries;
/// two functions with the same name and version share entries.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// # use std::sync::Arc;
/// # use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
/// use memo_runtime::{Memo, memoized};
///
/// #[memoized(name = "charge_card")]
/// async fn charge_card_via_new_provider(memo: &Memo, cents: u64) -> memo_runtime::Result<String> {
///     Ok(format!("charged {cents}"))
/// }
///
/// # let memo = MemoStore::new(Arc::new(InMemory::new()), "").new_memo(&RunId::new("r")?, 0);
/// charge_card_via_new_provider(&memo, 500).await?;
/// // The entry is where the old `charge_card` put it:
/// assert!(memo.content_get(&("charge_card", 0u32, (500u64,))).await?.is_some());
/// # Ok(()) }
/// ```
///
/// # `version = <integer>`
///
/// Part of the key (a `u32`, default 0). Bump it when the body's meaning or
/// its `Ok` type changes, so calls miss instead of returning values made by
/// the old code.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// # use std::sync::Arc;
/// # use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
/// use memo_runtime::{Memo, memoized};
///
/// #[memoized(name = "summary")]
/// async fn summary_v0(memo: &Memo, text: &str) -> memo_runtime::Result<String> {
///     Ok(text.chars().take(3).collect())
/// }
///
/// #[memoized(name = "summary", version = 1)]
/// async fn summary_v1(memo: &Memo, text: &str) -> memo_runtime::Result<String> {
///     Ok(text.chars().take(5).collect())
/// }
///
/// # let memo = MemoStore::new(Arc::new(InMemory::new()), "").new_memo(&RunId::new("r")?, 0);
/// assert_eq!(summary_v0(&memo, "memoized").await?, "mem");
/// assert_eq!(summary_v1(&memo, "memoized").await?, "memoi"); // a miss: new version
/// # Ok(()) }
/// ```
///
/// # `skip(a, b, self)`
///
/// Leaves parameters out of the key: clients, connections, loggers, anything
/// that does not change the result (or is not `Serialize`). `self` must be
/// skipped unless the receiver's type is `Serialize`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// # use std::sync::Arc;
/// # use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
/// use memo_runtime::{Memo, memoized};
///
/// struct Mailer {
///     sent: std::sync::atomic::AtomicU32,
/// }
///
/// impl Mailer {
///     #[memoized(skip(self))]
///     async fn send(&self, memo: &Memo, to: &str) -> memo_runtime::Result<u32> {
///         Ok(self.sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1)
///     }
/// }
///
/// # let memo = MemoStore::new(Arc::new(InMemory::new()), "").new_memo(&RunId::new("r")?, 0);
/// let mailer = Mailer { sent: 0.into() };
/// assert_eq!(mailer.send(&memo, "a@example.com").await?, 1);
/// assert_eq!(mailer.send(&memo, "a@example.com").await?, 1); // sent once
/// # Ok(()) }
/// ```
///
/// # `crate = "path"`
///
/// The path of the runtime crate, for when it is not reachable as
/// `::memo_runtime` (a renamed dependency, a re-export from your own SDK
/// crate). The expansion names nothing else.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memo_runtime::Result<()> {
/// # use std::sync::Arc;
/// # use memo_runtime::{MemoStore, RunId, object_store::memory::InMemory};
/// mod my_sdk {
///     pub use memo_runtime as memo;
/// }
///
/// use my_sdk::memo::{Memo, memoized};
///
/// #[memoized(crate = "my_sdk::memo")]
/// async fn lookup(memo: &Memo, id: u32) -> my_sdk::memo::Result<u32> {
///     Ok(id * 2)
/// }
///
/// # let memo = MemoStore::new(Arc::new(InMemory::new()), "").new_memo(&RunId::new("r")?, 0);
/// assert_eq!(lookup(&memo, 21).await?, 42);
/// # Ok(()) }
/// ```
///
/// # Misuses are compile errors
///
/// Each is reported at the offending token and says what to write instead.
///
/// Not an `async fn`:
///
/// ```compile_fail
/// use memo_runtime::{Memo, memoized};
///
/// #[memoized]
/// fn draft(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
///     Ok(body.to_owned())
/// }
/// ```
///
/// No memo to write to:
///
/// ```compile_fail
/// use memo_runtime::memoized;
///
/// #[memoized]
/// async fn draft(body: &str) -> memo_runtime::Result<String> {
///     Ok(body.to_owned())
/// }
/// ```
///
/// A return type that is not a `Result` (only `Ok` values are committed):
///
/// ```compile_fail
/// use memo_runtime::{Memo, memoized};
///
/// #[memoized]
/// async fn draft(memo: &Memo, body: &str) -> String {
///     body.to_owned()
/// }
/// ```
///
/// A key argument that is not `Serialize` (skip it, or derive `Serialize`):
///
/// ```compile_fail
/// use memo_runtime::{Memo, memoized};
///
/// struct HttpClient;
///
/// #[memoized]
/// async fn fetch(memo: &Memo, client: &HttpClient, url: &str) -> memo_runtime::Result<String> {
///     Ok(url.to_owned())
/// }
/// ```
///
/// A `HashSet` argument (its order is random; take a `BTreeSet`):
///
/// ```compile_fail
/// use std::collections::HashSet;
/// use memo_runtime::{Memo, memoized};
///
/// #[memoized]
/// async fn notify(memo: &Memo, to: HashSet<String>) -> memo_runtime::Result<usize> {
///     Ok(to.len())
/// }
/// ```
///
/// An unknown option (the error lists the valid ones):
///
/// ```compile_fail
/// use memo_runtime::{Memo, memoized};
///
/// #[memoized(retries = 3)]
/// async fn draft(memo: &Memo, body: &str) -> memo_runtime::Result<String> {
///     Ok(body.to_owned())
/// }
/// ```
///
/// [`content_key`]: https://docs.rs/memo-runtime/latest/memo_runtime/fn.content_key.html
/// [`Memo::content_get`]: https://docs.rs/memo-runtime/latest/memo_runtime/struct.Memo.html#method.content_get
#[proc_macro_attribute]
pub fn memoized(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::memoized(args.into(), item.into()).into()
}
