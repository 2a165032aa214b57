//! [`Ledger`]: how a simulated workflow tells the simulator about its side
//! effects, so the invariants can be checked against them.

use serde::Serialize;

use super::checker::Checker;
use super::stores::await_point;
use crate::error::Result;
use crate::memo::Memo;

/// The simulator's record of every side effect a workflow runs and every
/// value its callers see; handed to the workflow factory of a
/// [`Simulation`](super::Simulation).
///
/// Call [`side_effect`](Ledger::side_effect) where the real side effect
/// would be (inside the `#[memoized]` body, which runs only on a miss), and
/// [`observed`](Ledger::observed) with the value the memoized call returned.
/// `key` is the memo key the call is committed under; for a `#[memoized]`
/// function it is [`memoized_key`] of its name, version and key arguments.
///
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct Ledger {
    pub(super) checker: Checker,
}

impl Ledger {
    /// Runs a simulated side effect for the entry `key` of `memo`, taking a
    /// seeded number of await points (during which the simulator may run
    /// other workers or crash this one), and returns its execution number,
    /// unique in the history: make it part of the returned value so that
    /// two executions are told apart.
    ///
    /// Checks, when it starts, that the entry has not committed (a committed
    /// side effect never runs again) and that no other live attempt is
    /// executing a side effect of the same step of the same run.
    pub async fn side_effect(&self, memo: &Memo, key: &str) -> u64 {
        let number = self.checker.effect_started(memo, key);
        let running = Running {
            checker: &self.checker,
            number,
        };
        for _ in 0..self.checker.below(4) {
            await_point().await;
        }
        drop(running);
        number
    }

    /// Records that the body of the step `memo` belongs to starts, and
    /// returns a guard that records its end when dropped (when the body
    /// returns, or when its worker crashes in the middle of it). Call it
    /// first thing in every step body: a body's own code is a side effect
    /// no memo protects.
    ///
    /// Checks, when it starts, that the attempt holds the run's lease as
    /// the store records it (a step body starts only under a live lease),
    /// and that no other live attempt runs anything of the same step.
    pub fn step_body(&self, memo: &Memo) -> StepBody {
        StepBody {
            checker: self.checker.clone(),
            number: self.checker.body_started(memo),
        }
    }

    /// Records that a caller of the entry `key` of `memo` got `value`.
    /// Checks that every caller of one entry sees one value, produced by an
    /// execution of this run (not of an earlier run with the same id).
    pub fn observed<T: Serialize + ?Sized>(&self, memo: &Memo, key: &str, value: &T) {
        let encoded = crate::codec::encode(value).unwrap_or_default();
        self.checker.observed(memo, key, encoded);
    }

    /// A seeded coin flip that comes up `true` with probability `p`: for a
    /// workflow's own simulated randomness (a flaky API), so that the
    /// history stays a function of the seed.
    pub fn chance(&self, p: f64) -> bool {
        self.checker.chance(p)
    }
}

/// A step body in progress, as [`Ledger::step_body`] recorded its start;
/// dropping it records its end.
#[must_use = "the body ends when this guard is dropped: bind it for the body's whole run"]
#[derive(Debug)]
pub struct StepBody {
    checker: Checker,
    number: u64,
}

impl Drop for StepBody {
    fn drop(&mut self) {
        self.checker.effect_ended(self.number);
    }
}

/// Ends the execution when dropped: when the side effect returns, or when
/// its worker crashes in the middle of it.
struct Running<'a> {
    checker: &'a Checker,
    number: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.checker.effect_ended(self.number);
    }
}

/// The memo key a `#[memoized]` call commits under: `name` (the function's
/// name or its `name = "..."`), `version` (default 0), and its key
/// arguments in order, as a tuple (`(order_id, cents)`; `(order_id,)` for
/// one).
///
/// # Errors
///
/// [`Error::Serialization`](crate::Error::Serialization) if an argument
/// cannot be encoded.
///
/// # Example
///
/// ```
/// use memo_runtime::testing::sim::memoized_key;
///
/// let key = memoized_key("charge", 0, &("order-7", 1250_u64))?;
/// assert_eq!(key, memoized_key("charge", 0, &("order-7", 1250_u64))?);
/// assert_ne!(key, memoized_key("charge", 1, &("order-7", 1250_u64))?);
/// # Ok::<(), memo_runtime::Error>(())
/// ```
pub fn memoized_key<A: Serialize + ?Sized>(name: &str, version: u32, args: &A) -> Result<String> {
    crate::content_key(&(name, version, args))
}
