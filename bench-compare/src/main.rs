//! memo and taquba-workflow 0.15 side by side: the same memo operations on
//! the same kinds of store, 256-byte values, in one release binary.
//!
//! Rounds alternate (a memo round, a taquba round, a memo round, ...; the
//! side that goes first alternates too), every round on fresh stores, and
//! each figure is the median over the rounds of the mean time per operation
//! in that round. See README.md for the command and how to read the table.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use serde::{Deserialize, Serialize};

/// Rounds per side; the figures are medians over them.
const ROUNDS: usize = 7;
/// Every stored value is this long.
const VALUE: [u8; 256] = [7; 256];
/// The object-store prefix both sides write under.
const PREFIX: &str = "bench";
/// The run every memo belongs to.
const RUN: &str = "bench-run";
/// How many distinct committed entries the hit loops cycle through.
const HIT_KEYS: u64 = 64;

/// Operations per round: enough for each loop to take some tens of
/// milliseconds, so timer resolution and scheduling noise stay small.
mod iterations {
    pub(crate) const KEY_SMALL: u64 = 50_000;
    pub(crate) const KEY_1MIB: u64 = 16;
    pub(crate) const PUT_MEMORY: u64 = 10_000;
    pub(crate) const HIT_MEMORY: u64 = 20_000;
    pub(crate) const PUT_LOCAL: u64 = 300;
    pub(crate) const HIT_LOCAL: u64 = 2_000;
    pub(crate) const MISS_LOCAL: u64 = 2_000;
    pub(crate) const CLEAR_ENTRIES: u64 = 300;
    pub(crate) const MEMOIZED_HIT: u64 = 20_000;
}

/// A small memoized call's input: what a key is usually derived from.
#[derive(Serialize)]
struct Call<'a> {
    function: &'a str,
    version: u32,
    ticket_id: u64,
    subject: &'a str,
}

fn call(ticket_id: u64) -> Call<'static> {
    Call {
        function: "draft_reply",
        version: 1,
        ticket_id,
        subject: "refund for order 1234",
    }
}

/// The figures of the side-by-side table, in print order.
#[derive(Clone, Copy)]
enum Figure {
    KeySmall,
    Key1Mib,
    PutMemory,
    HitMemory,
    PutLocal,
    HitWarmLocal,
    HitColdLocal,
    MissLocal,
    ClearPerEntryLocal,
}

const FIGURES: [(Figure, &str); 9] = [
    (Figure::KeySmall, "content_key, small input"),
    (Figure::Key1Mib, "content_key, 1 MiB input"),
    (Figure::PutMemory, "put, fresh keys, InMemory"),
    (Figure::HitMemory, "hit, InMemory"),
    (Figure::PutLocal, "put, fresh keys, LocalFileSystem"),
    (
        Figure::HitWarmLocal,
        "hit, warm (same instance reads again), LocalFileSystem",
    ),
    (
        Figure::HitColdLocal,
        "hit, cold (new instance), LocalFileSystem",
    ),
    (Figure::MissLocal, "miss, LocalFileSystem"),
    (
        Figure::ClearPerEntryLocal,
        "clear, per entry, LocalFileSystem",
    ),
];

/// One SDK's memo API, reduced to what the table measures. Each method is
/// the SDK's own call, nothing added: the comparison is of the SDKs.
trait Sdk {
    type Store;
    type Memo;
    fn content_key<T: Serialize>(input: &T) -> Result<String>;
    fn store(objects: Arc<dyn ObjectStore>) -> Self::Store;
    fn memo(store: &Self::Store) -> Result<Self::Memo>;
    async fn content_put<T: Serialize>(memo: &Self::Memo, input: &T, value: &[u8]) -> Result<()>;
    /// The length of the committed value, if any.
    async fn content_get<T: Serialize>(memo: &Self::Memo, input: &T) -> Result<Option<usize>>;
    async fn clear_run(store: &Self::Store) -> Result<usize>;
}

struct Memo;

impl Sdk for Memo {
    type Store = memo_runtime::MemoStore;
    type Memo = memo_runtime::Memo;

    fn content_key<T: Serialize>(input: &T) -> Result<String> {
        Ok(memo_runtime::content_key(input)?)
    }
    fn store(objects: Arc<dyn ObjectStore>) -> Self::Store {
        memo_runtime::MemoStore::new(objects, PREFIX)
    }
    fn memo(store: &Self::Store) -> Result<Self::Memo> {
        Ok(store.new_memo(&memo_runtime::RunId::new(RUN)?, 0))
    }
    async fn content_put<T: Serialize>(memo: &Self::Memo, input: &T, value: &[u8]) -> Result<()> {
        memo.content_put(input, value).await?;
        Ok(())
    }
    async fn content_get<T: Serialize>(memo: &Self::Memo, input: &T) -> Result<Option<usize>> {
        Ok(memo.content_get(input).await?.map(|value| value.len()))
    }
    async fn clear_run(store: &Self::Store) -> Result<usize> {
        Ok(store
            .clear_memos_for_run(&memo_runtime::RunId::new(RUN)?)
            .await?)
    }
}

struct Taquba;

impl Sdk for Taquba {
    type Store = taquba_workflow::MemoStore;
    type Memo = taquba_workflow::Memo;

    fn content_key<T: Serialize>(input: &T) -> Result<String> {
        Ok(taquba_workflow::Memo::content_key(input)?)
    }
    fn store(objects: Arc<dyn ObjectStore>) -> Self::Store {
        taquba_workflow::MemoStore::new(objects, PREFIX)
    }
    fn memo(store: &Self::Store) -> Result<Self::Memo> {
        Ok(store.new_memo(&taquba_workflow::RunId::new(RUN)?, 0))
    }
    async fn content_put<T: Serialize>(memo: &Self::Memo, input: &T, value: &[u8]) -> Result<()> {
        memo.content_put(input, value).await?;
        Ok(())
    }
    async fn content_get<T: Serialize>(memo: &Self::Memo, input: &T) -> Result<Option<usize>> {
        Ok(memo.content_get(input).await?.map(|value| value.len()))
    }
    async fn clear_run(store: &Self::Store) -> Result<usize> {
        Ok(store
            .clear_memos_for_run(&taquba_workflow::RunId::new(RUN)?)
            .await?)
    }
}

/// Nanoseconds per operation.
fn per_op(elapsed: Duration, operations: u64) -> f64 {
    elapsed.as_nanos() as f64 / operations as f64
}

/// A fresh folder-backed store, and the folder (deleted on drop).
fn local_store() -> Result<(Arc<dyn ObjectStore>, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let store = LocalFileSystem::new_with_prefix(dir.path())?;
    Ok((Arc::new(store), dir))
}

/// One round of every figure for one SDK, on fresh stores: nanoseconds per
/// operation, indexed like [`FIGURES`].
async fn round<S: Sdk>() -> Result<[f64; FIGURES.len()]> {
    let mut figures = [0.0; FIGURES.len()];
    let mut record = |figure: Figure, ns: f64| figures[figure as usize] = ns;

    let small = call(42);
    let start = Instant::now();
    for _ in 0..iterations::KEY_SMALL {
        black_box(S::content_key(black_box(&small))?);
    }
    record(
        Figure::KeySmall,
        per_op(start.elapsed(), iterations::KEY_SMALL),
    );

    let large = "x".repeat(1 << 20);
    let start = Instant::now();
    for _ in 0..iterations::KEY_1MIB {
        black_box(S::content_key(black_box(&large))?);
    }
    record(
        Figure::Key1Mib,
        per_op(start.elapsed(), iterations::KEY_1MIB),
    );

    let memory = S::store(Arc::new(InMemory::new()));
    let memo = S::memo(&memory)?;
    record(
        Figure::PutMemory,
        put_fresh::<S>(&memo, iterations::PUT_MEMORY).await?,
    );
    record(
        Figure::HitMemory,
        hit::<S>(&memo, iterations::HIT_MEMORY).await?,
    );

    let (objects, _dir) = local_store()?;
    let local = S::store(objects.clone());
    let memo = S::memo(&local)?;
    record(
        Figure::PutLocal,
        put_fresh::<S>(&memo, iterations::PUT_LOCAL).await?,
    );
    record(
        Figure::HitWarmLocal,
        hit::<S>(&memo, iterations::HIT_LOCAL).await?,
    );
    record(
        Figure::HitColdLocal,
        hit_cold::<S>(&objects, iterations::HIT_LOCAL).await?,
    );
    record(
        Figure::MissLocal,
        miss::<S>(&memo, iterations::MISS_LOCAL).await?,
    );
    // The fresh-key puts left entries behind: clear a run of known size.
    drop(local);
    let (objects, _dir) = local_store()?;
    record(
        Figure::ClearPerEntryLocal,
        clear_per_entry::<S>(objects, iterations::CLEAR_ENTRIES).await?,
    );
    Ok(figures)
}

/// Commits `n` new keys; leaves keys `0..HIT_KEYS` among them for the hits.
async fn put_fresh<S: Sdk>(memo: &S::Memo, n: u64) -> Result<f64> {
    let start = Instant::now();
    for i in 0..n {
        S::content_put(memo, &call(i), &VALUE).await?;
    }
    Ok(per_op(start.elapsed(), n))
}

/// Reads committed entries again through the same instance.
async fn hit<S: Sdk>(memo: &S::Memo, n: u64) -> Result<f64> {
    let start = Instant::now();
    for i in 0..n {
        let found = S::content_get(memo, &call(i % HIT_KEYS)).await?;
        ensure!(found == Some(VALUE.len()), "hit {i} missed");
    }
    Ok(per_op(start.elapsed(), n))
}

/// Reads committed entries through a new store instance each time, as a
/// fresh process (or another machine) does.
async fn hit_cold<S: Sdk>(objects: &Arc<dyn ObjectStore>, n: u64) -> Result<f64> {
    let start = Instant::now();
    for i in 0..n {
        let memo = S::memo(&S::store(objects.clone()))?;
        let found = S::content_get(&memo, &call(i % HIT_KEYS)).await?;
        ensure!(found == Some(VALUE.len()), "cold hit {i} missed");
    }
    Ok(per_op(start.elapsed(), n))
}

async fn miss<S: Sdk>(memo: &S::Memo, n: u64) -> Result<f64> {
    let start = Instant::now();
    for i in 0..n {
        let found = S::content_get(memo, &call(u64::MAX - i)).await?;
        ensure!(found.is_none(), "miss {i} hit");
    }
    Ok(per_op(start.elapsed(), n))
}

/// Clears a run of `entries` entries; the time per entry.
async fn clear_per_entry<S: Sdk>(objects: Arc<dyn ObjectStore>, entries: u64) -> Result<f64> {
    let store = S::store(objects);
    let memo = S::memo(&store)?;
    for i in 0..entries {
        S::content_put(&memo, &call(i), &VALUE).await?;
    }
    let start = Instant::now();
    let cleared = S::clear_run(&store).await?;
    let elapsed = start.elapsed();
    ensure!(cleared as u64 == entries, "cleared {cleared} of {entries}");
    Ok(per_op(elapsed, entries))
}

/// memo only: a `#[memoized]` hit against the hand-written hit it replaces.
mod memoized {
    use super::*;
    use memo_runtime::memoized;

    /// A ticket, the input of the memoized call.
    #[derive(Serialize)]
    pub(crate) struct Ticket {
        id: u64,
        subject: String,
    }

    /// About 256 bytes encoded, like the other figures' values.
    #[derive(Serialize, Deserialize)]
    pub(crate) struct Reply {
        text: String,
    }

    #[memoized]
    async fn draft_reply(
        memo: &memo_runtime::Memo,
        ticket: &Ticket,
    ) -> memo_runtime::Result<Reply> {
        Ok(Reply {
            text: format!("re: {}; ", ticket.subject).repeat(8),
        })
    }

    /// The hit `#[memoized]` replaces, by hand: `content_get` under the
    /// documented key (name, version, arguments), then decode.
    async fn by_hand(memo: &memo_runtime::Memo, ticket: &Ticket) -> Result<Reply> {
        let bytes = memo
            .content_get(&("draft_reply", 0u32, (ticket,)))
            .await?
            .context("the hand-written key missed the macro's entry")?;
        Ok(rmp_serde::from_slice(&bytes)?)
    }

    /// Nanoseconds per hit: (`#[memoized]`, hand-written), on InMemory.
    ///
    /// The two loops take turns in blocks of [`BLOCK`] calls, the first turn
    /// alternating from block to block, and each side's figure is its
    /// fastest block: the gap between the two is a few percent, and on a
    /// shared machine a burst of load, or the caches the other figures'
    /// rounds left cold, would otherwise land on one side more than that.
    pub(crate) async fn round() -> Result<(f64, f64)> {
        let store = Memo::store(Arc::new(InMemory::new()));
        let memo = Memo::memo(&store)?;
        let ticket = Ticket {
            id: 42,
            subject: "refund for order 1234".into(),
        };
        draft_reply(&memo, &ticket).await?;
        let (mut by_macro, mut by_hand) = (Duration::MAX, Duration::MAX);
        for block in 0..iterations::MEMOIZED_HIT / BLOCK {
            for macro_turn in [block % 2 == 0, block % 2 == 1] {
                if macro_turn {
                    by_macro = by_macro.min(hits_by_macro(&memo, &ticket).await?);
                } else {
                    by_hand = by_hand.min(hits_by_hand(&memo, &ticket).await?);
                }
            }
        }
        Ok((per_op(by_macro, BLOCK), per_op(by_hand, BLOCK)))
    }

    /// Calls per turn of one loop.
    const BLOCK: u64 = 1_000;

    async fn hits_by_macro(memo: &memo_runtime::Memo, ticket: &Ticket) -> Result<Duration> {
        let start = Instant::now();
        for _ in 0..BLOCK {
            black_box(draft_reply(memo, black_box(ticket)).await?);
        }
        Ok(start.elapsed())
    }

    async fn hits_by_hand(memo: &memo_runtime::Memo, ticket: &Ticket) -> Result<Duration> {
        let start = Instant::now();
        for _ in 0..BLOCK {
            black_box(by_hand(memo, black_box(ticket)).await?);
        }
        Ok(start.elapsed())
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// A duration in the unit that suits it.
fn show(ns: f64) -> String {
    match ns {
        ns if ns < 1e3 => format!("{ns:.0} ns"),
        ns if ns < 1e6 => format!("{:.2} µs", ns / 1e3),
        ns => format!("{:.2} ms", ns / 1e6),
    }
}

/// `cargo run --release` prints both tables; `cargo run --release --
/// memoized` runs only the `#[memoized]` rounds (seconds, no LocalFileSystem
/// or taquba rounds in between).
fn main() -> Result<()> {
    let only_memoized = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("memoized") => true,
        Some(other) => anyhow::bail!("unknown argument {other:?}: pass nothing, or `memoized`"),
    };
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let mut memo = Vec::new();
    let mut taquba = Vec::new();
    let mut memoized = Vec::new();
    // One unrecorded round of each warms caches, the allocator and the disk.
    if !only_memoized {
        rt.block_on(round::<Memo>())?;
        rt.block_on(round::<Taquba>())?;
    }
    rt.block_on(memoized::round())?;
    for r in 0..ROUNDS {
        eprintln!("round {} of {ROUNDS}", r + 1);
        if !only_memoized {
            if r % 2 == 0 {
                memo.push(rt.block_on(round::<Memo>())?);
                taquba.push(rt.block_on(round::<Taquba>())?);
            } else {
                taquba.push(rt.block_on(round::<Taquba>())?);
                memo.push(rt.block_on(round::<Memo>())?);
            }
        }
        memoized.push(rt.block_on(memoized::round())?);
    }

    if !only_memoized {
        print_side_by_side(&memo, &taquba);
    }
    let by_macro = median(&memoized.iter().map(|r| r.0).collect::<Vec<_>>());
    let by_hand = median(&memoized.iter().map(|r| r.1).collect::<Vec<_>>());
    println!(
        "\n| memo only, InMemory | `#[memoized]` hit | hand-written `content_get` + decode | macro / hand-written |"
    );
    println!("|---|---|---|---|");
    println!(
        "| hit | {} | {} | {:.2}× ({:+.1}%) |",
        show(by_macro),
        show(by_hand),
        by_macro / by_hand,
        (by_macro / by_hand - 1.0) * 100.0
    );
    Ok(())
}

fn print_side_by_side(memo: &[[f64; FIGURES.len()]], taquba: &[[f64; FIGURES.len()]]) {
    println!(
        "memo {} vs taquba-workflow 0.15.0: medians of {ROUNDS} alternating rounds, 256-byte values\n",
        env!("CARGO_PKG_VERSION")
    );
    println!("| figure | memo | taquba 0.15 | memo speed-up |");
    println!("|---|---|---|---|");
    for (i, (_, name)) in FIGURES.iter().enumerate() {
        let memo = median(&memo.iter().map(|r| r[i]).collect::<Vec<_>>());
        let taquba = median(&taquba.iter().map(|r| r[i]).collect::<Vec<_>>());
        println!(
            "| {name} | {} | {} | {:.2}× |",
            show(memo),
            show(taquba),
            taquba / memo
        );
    }
}
