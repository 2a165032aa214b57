//! Shared-scope memo entries used across runs and processes (issue 25,
//! item 3): every worker and the operator call the same shared keys
//! ([`Memo::shared_in`](crate::memo::Memo::shared_in)), computing a new
//! value on a miss, while the sweepers of the world (a sweeper in every
//! worker, the operator's `memoctl sweep`, a sweep through another
//! runtime-store prefix) sweep expired entries at every pass, and the
//! processes sweep the shared scope alone now and then too. Two
//! namespaces: one whose entries expire at the next clock jump, so sweeps
//! race calls that write the key again, and one whose entries outlive the
//! history, so that nothing but their expiry (no run's sweep, clear or
//! deletion) may take them.
//!
//! Each call is checked against the value the store holds, as a
//! standalone call is; a call of a long-lived key must get the value every
//! earlier call of it got; at the end every long-lived key must still hold
//! that value, and, once the clock has passed every expiry, the last sweep
//! must leave nothing of the shared scope.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use object_store::ObjectStore;
use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::Clock;
use crate::run_id::{Incarnation, RunId};
use crate::shared::SharedScope;
use crate::testing::sim::checker::{Checker, TaskKind};
use crate::testing::sim::{Ledger, Simulation};
use crate::workflow::{Runtime, Workflow, WorkflowFn};

use super::standalone::check_sees_stored;
use super::{OPERATOR, Outcome, World, process_name};

/// How many keys each namespace has: one, so that each is called often.
const KEYS: usize = 1;

/// The time to live of [`SHORT`]'s entries, with processes' clocks that
/// agree: any clock jump of the history expires them. With
/// [`Simulation::clock_skew`], four times the skew more, as the shared
/// scope asks of clocks (they agree to well within half the time to live).
const SHORT_TTL: Duration = Duration::from_secs(1);

/// The namespace whose entries expire within the history.
const SHORT: &str = "sim-short";

/// The namespace whose entries outlive any history.
const LONG: &str = "sim-long";

/// The time to live of [`LONG`]'s entries: longer than any history's clock
/// jumps add up to.
pub(super) const LONG_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The share of random events that are a shared call or a sweep of the
/// shared scope, with them.
pub(super) const SHARED_SHARE: f64 = 0.2;

/// The invariant a call breaks when it returns another value than the one
/// the store held throughout the call.
const SEES_STORED: &str = "every caller of a shared key sees the value the store holds for it";

/// The invariant a long-lived key breaks when it holds, or a call of it
/// gets, another value than the first call got.
const KEPT: &str = "a shared entry lives until it expires";

/// What the history's shared calls got.
#[derive(Debug, Default)]
pub(super) struct Calls {
    /// The first value a call of each long-lived key got, by key.
    long: Mutex<BTreeMap<String, Bytes>>,
    /// The short-lived keys a call has got a value of.
    short_seen: Mutex<BTreeSet<String>>,
    /// Calls of a short-lived key that committed a value of their own
    /// after an earlier call had got one: the key expired, a sweep deleted
    /// it, and it was written again.
    rewrites: AtomicU64,
}

impl Calls {
    /// How many short-lived keys were written again after a sweep.
    pub(super) fn rewrites(&self) -> u64 {
        self.rewrites.load(Ordering::Relaxed)
    }

    /// A call of short-lived `key` got `got`, its own value if `own`.
    fn short(&self, key: &str, own: bool) {
        let first = self
            .short_seen
            .lock()
            .expect("not poisoned")
            .insert(key.to_string());
        if own && !first {
            self.rewrites.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// Shared-scope memo entries (`#[memoized(scope = shared)]`,
    /// [`Memo::shared_in`](crate::memo::Memo::shared_in)) used across
    /// processes: every worker and the operator call the same shared keys,
    /// computing a new value on a miss, while every sweep of the world
    /// sweeps the expired ones (and the processes sweep the shared scope
    /// alone now and then). One namespace's entries expire at the next
    /// clock jump (sweeps race calls that write them again), another's
    /// outlive the history. Each call is checked: *every caller of a
    /// shared key sees the value the store holds for it* (a call during
    /// which the store held one value throughout returns that value); a
    /// call of a long-lived key, and at the end the store, must hold the
    /// value its first call got (*a shared entry lives until it expires*:
    /// no run's sweep, clear or deletion takes it). With
    /// [`sweep_all_at_end`](Self::sweep_all_at_end), the clock then passes
    /// every expiry and the last sweep must leave nothing of the shared
    /// scope.
    #[must_use]
    pub fn shared_memos(mut self, on: bool) -> Self {
        self.config.shared_memos = on;
        self
    }
}

/// The scope of `namespace` as a process with `clock` opens it.
fn scope(namespace: &str, ttl: Duration, clock: Arc<dyn Clock>) -> SharedScope {
    SharedScope::new(namespace, ttl)
        .expect("a valid namespace")
        .with_clock(clock)
}

/// The value stored for `key` in `namespace`, as a new process reads it
/// through `objects`.
async fn read_stored(
    objects: &Arc<dyn ObjectStore>,
    namespace: &str,
    key: &str,
) -> crate::Result<Option<Bytes>> {
    let reader = RunId::new("shared-reader").expect("a valid run id");
    // The time to live matters only to writes.
    let scope = scope(namespace, LONG_TTL, Arc::new(crate::clock::SystemClock));
    crate::testing::sim::compat::open_stores(Arc::clone(objects))
        .0
        .with_entry_cache(0)
        .new_memo(&reader, 0)
        .shared_in(&scope)
        .get(key)
        .await
}

/// [`read_stored`] now; `None` if the read did not complete at once (a
/// local folder's) or failed.
fn stored(objects: &Arc<dyn ObjectStore>, namespace: &str, key: &str) -> Option<Option<Bytes>> {
    read_stored(objects, namespace, key).now_or_never()?.ok()
}

/// A call of long-lived `key` that got `got`: the first such call's value
/// is the key's for the whole history.
fn check_long(checker: &Checker, calls: &Calls, key: &str, who: &str, got: &Bytes) {
    let mut values = calls.long.lock().expect("not poisoned");
    let first = values.entry(key.to_string()).or_insert_with(|| got.clone());
    if first != got {
        checker.violation(
            KEPT,
            format!(
                "{who} got {:?} for long-lived shared key {key}, whose first call got {:?}",
                String::from_utf8_lossy(got),
                String::from_utf8_lossy(first)
            ),
        );
    }
}

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// A worker, or now and then the operator, calls a shared key, or
    /// sweeps the shared scope as its sweeper's pass ends
    /// ([`SharedEntries::sweep`](crate::shared::SharedEntries::sweep)).
    pub(super) fn shared_event(&mut self) {
        let sweep = self.rng.random_bool(0.3);
        let long = self.rng.random_bool(0.5);
        let key = format!("prompt-{}", self.rng.random_range(0..KEYS));
        let process = match self.operator {
            Some(_) if self.rng.random_bool(0.2) => Some(OPERATOR),
            _ => self.random_live_worker(),
        };
        let Some(process) = process else {
            return;
        };
        let runtime = self.runtime_of(process);
        if sweep {
            self.shared_sweep(process, runtime);
            return;
        }
        let (namespace, ttl) = if long {
            (LONG, LONG_TTL)
        } else {
            let skew = Duration::from_millis(self.config.clock_skew_ms.saturating_mul(4));
            (SHORT, SHORT_TTL.saturating_add(skew))
        };
        let scope = scope(namespace, ttl, Arc::clone(runtime.clock()));
        // Any run of the store makes the same call, from a step of its own
        // incarnation (as `#[memoized(scope = shared)]` in a workflow does).
        let caller = RunId::new(format!("shared-caller-{}", self.next_task)).expect("a valid id");
        let memo = (runtime.memo_store())
            .memo_for(&caller, Incarnation::from_u64(1), 0)
            .shared_in(&scope);
        let objects = self.backend();
        let checker = self.checker.clone();
        let calls = Arc::clone(&self.shared_calls);
        let who = format!("{} (task {})", process_name(process), self.next_task);
        let fresh = format!("a value computed by {who}");
        self.checker
            .event(format!("{who} calls shared key {namespace}/{key}"));
        let future = async move {
            let before = stored(&objects, namespace, &key);
            let got = match memo.get(&key).await {
                Ok(Some(value)) => Ok(value),
                Ok(None) => memo.put(&key, fresh.as_bytes()).await,
                Err(error) => Err(error),
            };
            let after = stored(&objects, namespace, &key);
            if let Ok(got) = &got {
                let what = format!("shared key {namespace}/{key}");
                check_sees_stored(&checker, SEES_STORED, &what, &who, got, (before, after));
                if long {
                    check_long(&checker, &calls, &key, &who, got);
                } else {
                    calls.short(&key, *got == fresh.as_bytes());
                }
            }
            Outcome::Done(got.map(drop).map_err(|e| e.to_string()))
        };
        self.spawn(process, TaskKind::Operator, None, Box::pin(future));
    }

    fn shared_sweep(&mut self, process: usize, runtime: Runtime) {
        self.checker.event(format!(
            "{} (task {}) sweeps the shared scope",
            process_name(process),
            self.next_task
        ));
        let future = async move {
            let now = runtime.clock().now_ms();
            let swept = runtime.memo_store().shared_entries().sweep(now).await;
            Outcome::Done(swept.map(drop).map_err(|e| e.to_string()))
        };
        self.spawn(process, TaskKind::Operator, None, Box::pin(future));
    }

    /// At the end of the history: every long-lived key a call got a value
    /// of still holds that value.
    pub(super) async fn check_long_values_kept(&self) {
        let objects = self.backend();
        let values = self.shared_calls.long.lock().expect("not poisoned").clone();
        for (key, first) in &values {
            match read_stored(&objects, LONG, key).await {
                Ok(Some(held)) if held == *first => {}
                held => self.checker.violation(
                    KEPT,
                    format!(
                        "long-lived shared key {key} holds {held:?} at the end, not the {:?} its calls got",
                        String::from_utf8_lossy(first)
                    ),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::{Calls, KEPT, check_long};
    use crate::testing::sim::checker::Checker;

    #[test]
    fn a_long_lived_key_whose_value_changes_breaks_it() {
        let checker = Checker::for_test();
        let calls = Calls::default();
        let (first, second) = (Bytes::from("first"), Bytes::from("second"));
        check_long(&checker, &calls, "k", "w", &first);
        check_long(&checker, &calls, "k", "w", &first);
        check_long(&checker, &calls, "other", "w", &second);
        assert!(checker.violations().is_empty());
        check_long(&checker, &calls, "k", "w", &second);
        let broken: Vec<_> = checker.violations().iter().map(|v| v.invariant).collect();
        assert_eq!(broken, [KEPT]);
    }

    #[test]
    fn a_short_lived_key_written_again_after_a_value_counts_as_a_rewrite() {
        let calls = Calls::default();
        calls.short("k", true);
        calls.short("k", false);
        calls.short("other", true);
        assert_eq!(calls.rewrites(), 0);
        calls.short("k", true);
        assert_eq!(calls.rewrites(), 1);
    }
}
