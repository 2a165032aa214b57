//! The `#[memoized]` attribute of memo, re-exported as
//! [`memo_runtime::memoized`](https://docs.rs/memo-runtime/latest/memo_runtime/attr.memoized.html).
//!
//! Depend on `memo-runtime` and use the attribute from there: the code it
//! generates names only `memo_runtime::__private`, so this crate alone is not
//! usable.
//!
//! The pipeline reads in stages, one file each: `item` parses the function
//! (the signature strictly, the body as tokens), `attr` parses the options,
//! `valid` checks them against the signature and produces a `valid::Plan`,
//! `expand` generates the function.

mod attr;
mod expand;
mod item;
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
/// A call hits only an entry made by a call that would have computed the
/// same value. What is in the key:
///
/// | part | what enters | default |
/// |---|---|---|
/// | name | a string | the function's identifier (`r#` dropped); `name = "..."` overrides |
/// | version | a `u32` | 0; `version = N` overrides |
/// | each argument | its value, through [`content_key`]'s canonical encoding | all, in declaration order |
/// | the receiver | `self`'s value, like an argument, first | in, unless `skip(self)` |
/// | the implementing type | `Self`'s type name, for a method (a function that takes `self` or names `Self`) | in, unless `skip(Self)` |
/// | type parameters | each one's type name; a const parameter's value | in, unless `skip(T)` |
/// | `impl Trait` arguments | the argument's type name (its value is an argument) | in, unless the argument is skipped |
/// | left out | the memo; `skip(...)`ed parameters; lifetimes; the body; the `Ok` type (a type parameter used only there is in, as a type parameter) | |
///
/// Without a type part (a free function without type or const parameters)
/// the key is exactly [`content_key`] of `(name, version, (args...))`, the
/// arguments one MessagePack array: with one or more arguments
/// `content_key(&(name, version, (arg1, arg2)))`, with none
/// `content_key(&(name, version, [(); 0]))`. With type parts it is
/// `content_key(&(name, version, (args...), (types...)))`, the types in the
/// table's order: `Self`, then the type and const parameters as declared,
/// then the `impl Trait` arguments. The entry is the memo's entry for that
/// key: [`Memo::content_get`] with the same tuple finds it. The derivation is
/// pinned by golden tests; changing it would orphan every stored entry.
///
/// A type's name is [`std::any::type_name`]: the path the compiler prints
/// (`billing::Invoice<u64>`). It is the only name of an arbitrary type a
/// generic function can reach without new bounds, and it is the same for
/// every build of the same code by one compiler release; but the standard
/// library does not promise it across releases. So a compiler upgrade *may*
/// change the keys of generic functions and methods (a miss: the body runs
/// once more), never those of other functions. Where a type cannot change
/// the result (a client, a transport), `skip` it.
///
/// An associated function that neither takes `self` nor names `Self` cannot
/// be told from a free function: two such functions of one name in
/// different `impl` blocks share entries unless each gets its own `name`.
/// Parameters of a generic *trait* implemented twice for one type
/// (`impl Handler<A> for X`, `impl Handler<B> for X`) are not in the key
/// either: name each method.
///
/// `HashMap` arguments are fine (`content_key` sorts map entries), but a
/// top-level `HashSet` is rejected: its encoding order is random. Take a
/// `BTreeSet`. Every key argument must be `Serialize`; `self` too unless it is
/// skipped. How floats and options are keyed (`-0.0`, NaN, `Some(())`) is
/// documented on [`content_key`].
///
/// # Requirements
///
/// - An `async fn`: free, an inherent method, or a method of a trait impl;
///   generics, where-clauses, lifetimes, `impl Trait` arguments and `mut`
///   bindings are fine. The signature is kept token for token, and so is the
///   body (its inner attributes, `#![allow(...)]`, move onto the function).
///   Each key argument needs a plain name (`ticket: Ticket`, not a pattern).
/// - No `&mut` key argument (`&mut self` included): on a hit the body does
///   not run, so its changes would silently not happen. Take the value or
///   `&`, or `skip` it if a hit needs none of its changes (a connection).
/// - The return type is a `Result<T, E>` under any alias
///   (`anyhow::Result<T>`, `std::io::Result<T>`, your own), with
///   `T: Serialize + DeserializeOwned` and `E: From<memo_runtime::Error>`:
///   the memo's own failures (storage, decoding) come back as `E`.
///
/// # `memo = <expr>`
///
/// Where the memo comes from. By default it is the one parameter whose type
/// is written `&Memo`, `&mut Memo` or `Memo` (under any path); the expansion
/// checks that it is this crate's `Memo`, so a domain type that happens to
/// be called `Memo` is a compile error, never silently left out of the key.
/// With several, or none, say which with `memo = ...`. The expression may
/// use the parameters, and may yield a `Memo`, `&Memo`, `&mut Memo` or
/// `Arc<Memo>`. Then no parameter is taken for the memo by its type: the
/// parameter named by `memo = param` (or `&param`) is left out of the key,
/// every other one is in it unless skipped (skip a second `&Memo`).
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
/// two functions with the same name, version and type parts (see *The
/// key*) share entries. It does not replace the type parts: a method's
/// entries still follow its implementing type unless `skip(Self)`.
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
/// What else changes a key, so that calls miss (the body runs once more):
///
/// - renaming the function, unless `name` is set;
/// - adding, removing, reordering or retyping a key argument (an integer's
///   width does not count; a float's does), or skipping one;
/// - for generic functions and methods: renaming a type that enters the key
///   or moving it to another module or crate, or a compiler release that
///   prints its name differently (see *The key*).
///
/// Moving a non-generic free function between modules, renaming its
/// parameters, the memo or the skipped parameters, and changing the body do
/// not: that is what `version` is for.
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
/// skipped unless the receiver's type is `Serialize`. Type parameters and
/// `Self` may be skipped too (`skip(C, Self)`), when the type cannot change
/// the result. Raw identifiers are named without `r#`: `skip(type)`.
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
/// A `&mut` key argument (a hit would skip its changes):
///
/// ```compile_fail
/// use memo_runtime::{Memo, memoized};
///
/// #[memoized]
/// async fn dedupe(memo: &Memo, items: &mut Vec<u32>) -> memo_runtime::Result<usize> {
///     items.dedup();
///     Ok(items.len())
/// }
/// ```
///
/// A parameter whose type is called `Memo` but is not memo's:
///
/// ```compile_fail
/// use memo_runtime::memoized;
///
/// mod office {
///     #[derive(serde::Serialize)]
///     pub struct Memo { pub text: String }
/// }
///
/// #[memoized]
/// async fn file(note: &office::Memo) -> memo_runtime::Result<String> {
///     Ok(note.text.clone())
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
