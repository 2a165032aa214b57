//! [`RuntimeBuilder`]: a [`Runtime`]'s settings, checked once by
//! [`RuntimeBuilder::build`].

use std::sync::Arc;
use std::time::Duration;

use super::{
    DEFAULT_LEASE, DEFAULT_RECOVERY_CONCURRENCY, DEFAULT_RETENTION, DEFAULT_SIGNAL_POLL_INTERVAL,
    DEFAULT_TIMER_WAIT, MIN_SIGNAL_POLL_INTERVAL, RetryPolicy, Runtime, Shared,
};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::memo::MemoStore;
use crate::runtime_store::RuntimeStore;

#[cfg(doc)]
use super::Context;

/// Builds a [`Runtime`]; see [`Runtime::builder`].
#[derive(Debug, Default)]
#[must_use]
pub struct RuntimeBuilder {
    memo: Option<MemoStore>,
    store: Option<Arc<dyn RuntimeStore>>,
    clock: Option<Arc<dyn Clock>>,
    signal_wait: Duration,
    signal_poll_interval: Option<Duration>,
    timer_wait: Option<Duration>,
    marker_retry: Option<RetryPolicy>,
    retention: Option<Duration>,
    recovery_concurrency: Option<usize>,
    skip_conditional_create_check: bool,
    skip_cost_ledger: bool,
    lease: Option<Duration>,
    max_clock_skew: Option<Duration>,
    worker_id: Option<String>,
}

impl RuntimeBuilder {
    /// Where the steps' memos (and terminal markers) live. Required.
    pub fn memo_store(mut self, memo: MemoStore) -> Self {
        self.memo = Some(memo);
        self
    }

    /// Where runs and their receipts live. Required.
    pub fn runtime_store(mut self, store: Arc<dyn RuntimeStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Whether each attempt records what it cost in its run's cost ledger
    /// ([`AttemptCost`](crate::runtime_store::AttemptCost); default: on).
    /// The record is one small write per attempt (one `PUT` on object
    /// storage), when the attempt ends or suspends; turn it off where that
    /// request matters more than knowing what runs cost.
    pub fn cost_ledger(mut self, on: bool) -> Self {
        self.skip_cost_ledger = !on;
        self
    }

    /// The clock for timestamps (default: [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// How long [`Context::wait_for_signal`] waits in-process for a signal
    /// before the run suspends (default: zero, suspend at once).
    /// `Duration::MAX` waits as long as it takes: the attempt keeps its
    /// lease and polls until the signal comes.
    pub fn signal_wait(mut self, wait: Duration) -> Self {
        self.signal_wait = wait;
        self
    }

    /// How often a waiting run checks for its signal (default 200 ms; at
    /// least [`MIN_SIGNAL_POLL_INTERVAL`], so that a wait never polls the
    /// store without pause). A wait's last check comes when its
    /// [`signal_wait`](Self::signal_wait) is up, however long the interval.
    pub fn signal_poll_interval(mut self, interval: Duration) -> Self {
        self.signal_poll_interval = Some(interval);
        self
    }

    /// The longest wait [`Context::sleep`] (and a signal deadline) spends in
    /// process (default [`DEFAULT_TIMER_WAIT`], 60 s). A timer due within
    /// this wait is awaited by the attempt, which keeps renewing its lease;
    /// a later one suspends the attempt with [`Error::Suspended`] (its lease
    /// released), and running the run again once the timer is due, from any
    /// process, continues it. Zero suspends every timer that is not yet due;
    /// `Duration::MAX` waits in process for any timer.
    pub fn timer_wait(mut self, wait: Duration) -> Self {
        self.timer_wait = Some(wait);
        self
    }

    /// How the terminal-marker write is retried (default: 5 tries from
    /// 50 ms).
    pub fn marker_retry(mut self, policy: RetryPolicy) -> Self {
        self.marker_retry = Some(policy);
        self
    }

    /// How long a terminal run's memo entries and records are kept before
    /// [`Runtime::retention_sweeper`] clears them (default: 7 days).
    /// `Duration::MAX` keeps them for ever; zero lets the first sweep after
    /// a run ended clear it.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// How many runs [`Runtime::recover`] drives at once (default
    /// [`DEFAULT_RECOVERY_CONCURRENCY`]; at least 1).
    pub fn recovery_concurrency(mut self, runs: usize) -> Self {
        self.recovery_concurrency = Some(runs.max(1));
        self
    }

    /// How long an attempt holds its run's lease without renewing it
    /// (default [`DEFAULT_LEASE`]; at least 3 ms, shorter counts as 3 ms;
    /// a lease that would end past the last millisecond a `u64` holds ends
    /// there, so `Duration::MAX` never expires). A running attempt renews
    /// its lease every third of this; no other worker starts an attempt of
    /// the run until the lease has expired, and an attempt taken over after
    /// its lease expired can commit nothing more.
    ///
    /// Size it well above the longest time an attempt may go without being
    /// polled (a step that blocks its thread, a stop-the-world pause, a slow
    /// store request) plus the clock skew between workers: a lease that
    /// expires while its holder is alive lets a second worker run the same
    /// step, and only the step's memoized calls (and the idempotency keys it
    /// passes on, [`Memo::idempotency_key`](crate::Memo::idempotency_key))
    /// keep its side effects single. A longer lease only delays the take-over
    /// of a run whose worker crashed.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease.max(Duration::from_millis(3)));
        self
    }

    /// The most the clocks of two processes sharing the store may disagree
    /// (default: half the [`lease`](Self::lease)).
    ///
    /// A run's first attempt relies on it to skip a read. Only an attempt
    /// of the run writes its memo entries, and another attempt starts only
    /// once the lease expired by its starter's clock; so while more than
    /// this is left of the lease by the first attempt's clock, no other
    /// attempt can have started, and a `#[memoized]` call of a key the
    /// attempt has not written yet would find no entry: it runs its body
    /// without reading one (one request a call fewer, one round trip on
    /// S3). With less left, and in every later attempt, the call reads
    /// first. Clocks further apart than this could let such a call run its
    /// body again after another attempt committed the same entry.
    ///
    /// Set it to the lease or more to keep every read: for clocks you
    /// cannot bound, or where entries are written into a run's folders from
    /// outside the run ([`MemoStore::memo_for`]), which only the call's
    /// commit then finds. It changes nothing else: when a lease expires is
    /// the lease's matter, so size the lease by the skew too.
    pub fn max_clock_skew(mut self, skew: Duration) -> Self {
        self.max_clock_skew = Some(skew);
        self
    }

    /// The name this runtime's attempts hold leases under, shown to other
    /// workers in [`Error::LeaseHeld`] (default: `pid<process id>-<random>`).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = Some(id.into());
        self
    }

    /// Whether the runtime checks, once, before its first write, that the
    /// memo store's backend refuses to create an object that exists
    /// (default: `true`). The check is [`probe_conditional_create`] under the
    /// memo store's prefix: three requests, once per runtime. A backend that
    /// fails it would let racing attempts overwrite each other's committed
    /// entries, so every call that would write fails with
    /// [`Error::ConditionalPutUnsupported`] instead.
    ///
    /// Turn it off only for a store known to keep conditional creates (or
    /// one that counts its requests in a test).
    ///
    /// [`probe_conditional_create`]: crate::store::probe_conditional_create
    pub fn check_conditional_create(mut self, check: bool) -> Self {
        self.skip_conditional_create_check = !check;
        self
    }

    /// The runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the memo store or the runtime store is
    /// missing, or the signal poll interval is shorter than
    /// [`MIN_SIGNAL_POLL_INTERVAL`].
    pub fn build(self) -> Result<Runtime> {
        let missing = |what: &str| Error::InvalidConfig {
            what: "Runtime".into(),
            reason: format!("{what} is required"),
        };
        let signal_poll_interval = self
            .signal_poll_interval
            .unwrap_or(DEFAULT_SIGNAL_POLL_INTERVAL);
        if signal_poll_interval < MIN_SIGNAL_POLL_INTERVAL {
            return Err(Error::InvalidConfig {
                what: "Runtime".into(),
                reason: format!(
                    "signal_poll_interval is {signal_poll_interval:?}; it must be at least \
                     {MIN_SIGNAL_POLL_INTERVAL:?}, or a waiting run would poll the store without pause"
                ),
            });
        }
        let store = self.store.ok_or_else(|| missing("a runtime store"))?;
        let clock: Arc<dyn Clock> = self.clock.unwrap_or_else(|| Arc::new(SystemClock));
        // The store reads leases by the runtime's clock, as the attempts do.
        store.use_clock(Arc::clone(&clock));
        let lease = self.lease.unwrap_or(DEFAULT_LEASE);
        Ok(Runtime {
            shared: Arc::new(Shared {
                memo: self.memo.ok_or_else(|| missing("a memo store"))?,
                store,
                clock,
                signal_wait: self.signal_wait,
                signal_poll_interval,
                timer_wait: self.timer_wait.unwrap_or(DEFAULT_TIMER_WAIT),
                marker_retry: self.marker_retry.unwrap_or_else(|| {
                    RetryPolicy::attempts(5).with_min_delay(Duration::from_millis(50))
                }),
                retention: self.retention.unwrap_or(DEFAULT_RETENTION),
                recovery_concurrency: self
                    .recovery_concurrency
                    .unwrap_or(DEFAULT_RECOVERY_CONCURRENCY),
                conditional_create_checked: (!self.skip_conditional_create_check)
                    .then(tokio::sync::OnceCell::new),
                draining: std::sync::atomic::AtomicBool::new(false),
                due_now: tokio::sync::Notify::new(),
                cost_ledger: !self.skip_cost_ledger,
                lease,
                max_clock_skew: self.max_clock_skew.unwrap_or(lease / 2),
                worker_id: self.worker_id.unwrap_or_else(|| {
                    format!(
                        "pid{}-{:08x}",
                        std::process::id(),
                        crate::run_id::unique_token() as u32
                    )
                }),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use crate::runtime_store::InMemoryRuntimeStore;

    fn memo() -> MemoStore {
        MemoStore::new(Arc::new(InMemory::new()), "memo")
    }

    fn complete() -> RuntimeBuilder {
        Runtime::builder()
            .memo_store(memo())
            .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
    }

    fn refusal(builder: RuntimeBuilder) -> String {
        match builder.build() {
            Err(Error::InvalidConfig { what, reason }) => {
                assert_eq!(what, "Runtime");
                reason
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn a_runtime_needs_both_stores() {
        let no_memo = Runtime::builder().runtime_store(Arc::new(InMemoryRuntimeStore::new()));
        assert_eq!(refusal(no_memo), "a memo store is required");
        let no_runs = Runtime::builder().memo_store(memo());
        assert_eq!(refusal(no_runs), "a runtime store is required");
    }

    #[test]
    fn a_signal_poll_interval_under_the_minimum_is_refused() {
        let busy_loop = complete().signal_poll_interval(MIN_SIGNAL_POLL_INTERVAL / 2);
        assert!(refusal(busy_loop).contains("at least 1ms"));
        assert!(
            complete()
                .signal_poll_interval(MIN_SIGNAL_POLL_INTERVAL)
                .build()
                .is_ok()
        );
    }

    #[test]
    fn a_clock_skew_told_is_kept_whatever_the_lease() {
        let told = |skew| {
            complete()
                .lease(Duration::from_secs(30))
                .max_clock_skew(skew)
        };
        let shared = told(Duration::from_secs(2)).build().unwrap().shared;
        assert_eq!(shared.max_clock_skew_ms(), 2_000);
        // Longer than the lease (every read kept), or without bound.
        let shared = told(Duration::MAX).build().unwrap().shared;
        assert_eq!(shared.max_clock_skew_ms(), u64::MAX);
    }

    #[test]
    fn unset_settings_take_their_defaults_and_out_of_range_ones_their_bounds() {
        let runtime = complete().build().unwrap();
        let shared = &runtime.shared;
        assert_eq!(runtime.retention(), DEFAULT_RETENTION);
        assert_eq!(shared.lease, DEFAULT_LEASE);
        assert_eq!(shared.max_clock_skew, DEFAULT_LEASE / 2);
        assert_eq!(shared.timer_wait, DEFAULT_TIMER_WAIT);
        assert_eq!(shared.signal_poll_interval, DEFAULT_SIGNAL_POLL_INTERVAL);
        assert_eq!(shared.signal_wait, Duration::ZERO);
        assert_eq!(shared.recovery_concurrency, DEFAULT_RECOVERY_CONCURRENCY);
        assert!(shared.conditional_create_checked.is_some());
        assert!(
            shared
                .worker_id
                .starts_with(&format!("pid{}-", std::process::id()))
        );

        let bounded = complete()
            .lease(Duration::ZERO)
            .recovery_concurrency(0)
            .check_conditional_create(false)
            .worker_id("w-1")
            .build()
            .unwrap();
        let shared = &bounded.shared;
        assert_eq!(shared.lease, Duration::from_millis(3));
        assert_eq!(shared.max_clock_skew, Duration::from_micros(1_500));
        assert_eq!(shared.recovery_concurrency, 1);
        assert!(shared.conditional_create_checked.is_none());
        assert_eq!(shared.worker_id, "w-1");
    }
}
