//! A side effect whose memo entry committed never runs again, across a
//! takeover (issue 20; seeds 7986 and 9397 of the deployment world). Two
//! processes are two runtimes over separate store instances on one folder
//! or bucket; time is a `ManualClock`; each interleaving is staged with a
//! store that holds one request until the test lets it go.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use memo_runtime::clock::ManualClock;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{self, GetOptions, GetResult, ObjectStore};
use memo_runtime::testing::forward_object_store;
use memo_runtime::workflow::{Context, RetryPolicy, Runtime, Workflow};
use memo_runtime::{Bytes, Error, Memo, memoized};
use memo_tests::fixtures::{Backend, process_builder, run};
use memo_tests::pause::{Held, Pause, Pauses, wait_reached};
use tokio::sync::oneshot;

const LEASE: Duration = Duration::from_secs(30);

/// A charge: counts its runs, returns its run's number.
#[memoized(skip(charges))]
async fn charge_card(memo: &Memo, charges: &AtomicU64, cents: u64) -> Result<u64, Error> {
    let _ = cents;
    Ok(charges.fetch_add(1, Ordering::SeqCst) + 1)
}

type Paid = futures::future::BoxFuture<'static, Result<u64, Error>>;

/// One step that makes one memoized charge.
fn pay(charges: Arc<AtomicU64>) -> Workflow<impl Fn(Context, u64) -> Paid + Send + Sync + 'static> {
    Workflow::new("pay", move |ctx: Context, cents: u64| {
        let charges = charges.clone();
        Box::pin(async move {
            ctx.step("charge", |memo| {
                let charges = charges.clone();
                async move { charge_card(&memo, &charges, cents).await }
            })
            .await
        }) as Paid
    })
}

/// A process whose memo store reads and writes through `memo_objects`.
fn process(
    backend: &Backend,
    memo_objects: Arc<dyn ObjectStore>,
    clock: &Arc<ManualClock>,
    name: &str,
) -> Runtime {
    process_builder(memo_objects, backend.open(), clock, name, LEASE)
        .marker_retry(RetryPolicy::attempts(2).with_min_delay(Duration::from_millis(1)))
        .build()
        .unwrap()
}

/// A store that makes the `nth` read (from 1) of an object under `prefix`,
/// then holds its answer until the test lets it go: the read saw the store
/// as it was when it was made, and its reader goes on only later.
struct HoldsAnAnswer {
    inner: Arc<dyn ObjectStore>,
    prefix: Path,
    reads: AtomicU64,
    nth: u64,
    gate: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
}

impl HoldsAnAnswer {
    fn new(inner: Arc<dyn ObjectStore>, prefix: &str, nth: u64) -> (HoldsAnAnswer, Pause) {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        let store = HoldsAnAnswer {
            inner,
            prefix: Path::from(prefix),
            reads: AtomicU64::new(0),
            nth,
            gate: Mutex::new(Some((reached_tx, release_rx))),
        };
        (store, Pause { reached, release })
    }
}

impl fmt::Debug for HoldsAnAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HoldsAnAnswer(read {} under {})", self.nth, self.prefix)
    }
}

impl fmt::Display for HoldsAnAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for HoldsAnAnswer {
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let answer = self.inner.get_opts(location, options).await;
        let counted = location.prefix_matches(&self.prefix)
            && self.reads.fetch_add(1, Ordering::SeqCst) + 1 == self.nth;
        let gate = counted.then(|| self.gate.lock().unwrap().take()).flatten();
        if let Some((reached, release)) = gate {
            let _ = reached.send(());
            let _ = release.await;
        }
        answer
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    forward_object_store!(self.inner => put_opts, put_multipart_opts, delete_stream, list,
        list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}

/// Seeds 7986 and 9397: attempt A charges under a live lease and stalls
/// before its entry lands; its lease expires and attempt B takes the run
/// over. B's memoized call reads the entry (none yet), and B stalls with
/// that answer while its own lease lapses; A's entry lands meanwhile (A's
/// own attempt then finds its lease lost and stops). B renews its lease,
/// which succeeds (it still holds the run), and must not charge again: by
/// the time its body would start, the charge's entry is committed. B
/// reads the entry again after the renewal and returns A's charge.
#[tokio::test]
async fn a_charge_committed_while_its_taker_over_renewed_its_lease_is_not_made_again() {
    for backend in Backend::all() {
        let name = backend.name();
        let order = run("pay-7986");
        let clock = Arc::new(ManualClock::new(1_000_000));
        let charges = Arc::new(AtomicU64::new(0));

        // A's charge runs; its entry's put is held.
        let (held_put, a_put) = Pauses::new(backend.open(), Held::Put, Path::from("memo/memos"));
        let a = process(&backend, Arc::new(held_put), &clock, "worker-a");
        let attempt_a = tokio::spawn({
            let (order, workflow) = (order.clone(), pay(charges.clone()));
            async move { a.run(&order, &7, &workflow).await }
        });
        wait_reached(a_put.reached, "a put").await;
        assert_eq!(charges.load(Ordering::SeqCst), 1, "{name}");

        // A's lease expires; B takes the run over. Its memoized call reads
        // the entry once, before its flight (no flight ended since, so it
        // does not read again under it): that answer (no entry) is held.
        clock.advance_ms(LEASE.as_millis() as u64 + 1);
        let (held_read, b_read) = HoldsAnAnswer::new(backend.open(), "memo/memos", 1);
        let b = process(&backend, Arc::new(held_read), &clock, "worker-b");
        let attempt_b = tokio::spawn({
            let (order, workflow) = (order.clone(), pay(charges.clone()));
            async move { b.run(&order, &7, &workflow).await }
        });
        wait_reached(b_read.reached, "b read").await;

        // B's lease lapses while it waits; A's entry lands, and A stops.
        clock.advance_ms(LEASE.as_millis() as u64 + 1);
        a_put.release.send(()).unwrap();
        let stopped = attempt_a.await.unwrap();
        assert!(
            matches!(stopped, Err(Error::LeaseLost { attempt: 1, .. })),
            "{name}: {stopped:?}"
        );

        // B goes on with its answer of no entry.
        b_read.release.send(()).unwrap();
        assert_eq!(attempt_b.await.unwrap().unwrap(), 1, "{name}");
        assert_eq!(
            charges.load(Ordering::SeqCst),
            1,
            "{name}: the charge ran again after its entry committed"
        );
    }
}

/// A store so slow that the lease lapses during every read of the charge's
/// entry: the call renews the lease after each read and reads again, and
/// after three reads gives the attempt up rather than start the charge on
/// a read that a renewal followed. The run stays open; the next attempt,
/// on a store that answers in time, charges once. (The attempt's start is
/// slow too, so that the call begins with under half the lease left and
/// reads the entry at all: with more, a run's first attempt knows no entry
/// can be there.)
#[tokio::test]
async fn a_call_whose_lease_lapses_during_every_read_of_its_entry_gives_the_attempt_up() {
    use memo_runtime::testing::{FaultInjectingStore, FaultRule, RequestKind};
    use std::sync::atomic::AtomicBool;

    for backend in Backend::all() {
        let name = backend.name();
        let order = run("pay-slow-reads");
        let clock = Arc::new(ManualClock::new(2_000_000));
        let charges = Arc::new(AtomicU64::new(0));
        let slow = Arc::new(AtomicBool::new(true));
        let runs = FaultInjectingStore::new(backend.open());
        let started = Arc::new(AtomicBool::new(false));
        runs.inject(FaultRule::fail_before(RequestKind::Create).matching({
            let (clock, started) = (clock.clone(), started.clone());
            move |path| {
                if path.as_ref().contains("/log/") && !started.swap(true, Ordering::SeqCst) {
                    clock.advance_ms(LEASE.as_millis() as u64 / 2 + 1);
                }
                false
            }
        }));
        let objects = FaultInjectingStore::new(backend.open());
        objects.inject(FaultRule::fail_before(RequestKind::Get).matching({
            let (clock, slow) = (clock.clone(), slow.clone());
            move |path| {
                if slow.load(Ordering::SeqCst) && path.as_ref().starts_with("memo/memos/") {
                    clock.advance_ms(LEASE.as_millis() as u64 + 1);
                }
                false
            }
        }));
        let a = process_builder(Arc::new(objects), Arc::new(runs), &clock, "worker-a", LEASE)
            .marker_retry(RetryPolicy::attempts(2).with_min_delay(Duration::from_millis(1)))
            .build()
            .unwrap();
        let workflow = pay(charges.clone());
        match a.run(&order, &7, &workflow).await {
            Err(Error::LeaseLost {
                attempt, reason, ..
            }) => {
                assert_eq!(attempt, 1, "{name}");
                assert!(
                    reason.contains("reads of the memoized call's entry"),
                    "{name}: {reason}"
                );
            }
            other => {
                panic!("{name}: the charge started after a renewal with no read since: {other:?}")
            }
        }
        assert_eq!(charges.load(Ordering::SeqCst), 0, "{name}");

        slow.store(false, Ordering::SeqCst);
        assert_eq!(a.run(&order, &7, &workflow).await.unwrap(), 1, "{name}");
        assert_eq!(charges.load(Ordering::SeqCst), 1, "{name}");
    }
}
