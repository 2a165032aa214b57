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
/// would be, inside the `#[memoized]` body (which runs only on a miss): the
/// ledger learns the entry from the call itself. Every value a memoized
/// call returns is recorded as its caller's observation, with no call of
/// yours. Call [`step_body`](Ledger::step_body) first thing in every step
/// body.
///
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct Ledger {
    pub(super) checker: Checker,
    /// Set by the simulated deploy ([`Simulation::deploy_at`](super::Simulation::deploy_at)).
    pub(super) deployed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Whether the old code and the new one are two versions of the
    /// workflow ([`Simulation::versioned_deploy`](super::Simulation::versioned_deploy)).
    pub(super) versioned: bool,
    /// Which code ran the step bodies of each run, in a versioned deploy.
    pub(super) codes: super::world::CodesRun,
    /// The attempts that observed their run's cancellation.
    pub(super) cancels: super::loops::ObservedCancels,
}

impl Ledger {
    /// Runs a simulated side effect of the `#[memoized]` call whose body
    /// calls it, taking a seeded number of await points (during which the
    /// simulator may run other workers or crash this one), and returns its
    /// execution number, unique in the history: make it part of the
    /// returned value so that two executions are told apart. `memo` is the
    /// call's memo.
    ///
    /// Checks, when it starts, that the call's entry has not committed (a
    /// committed side effect never runs again) and that no other live
    /// attempt is executing a side effect of the same step of the same run.
    /// Called outside a memoized body (where no entry can match it), it is
    /// a violation.
    pub async fn side_effect(&self, memo: &Memo) -> u64 {
        let number = self.checker.call_effect_started(memo);
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
    /// and that no other live attempt runs anything of the same step; in a
    /// [versioned deploy](super::Simulation::versioned_deploy), the end of
    /// the history checks that only the code of the run's version ran its
    /// bodies.
    pub fn step_body(&self, memo: &Memo) -> StepBody {
        self.cancels.body_started(&self.checker, memo);
        if self.versioned {
            self.codes.ran(memo, self.deployed());
        }
        StepBody {
            checker: self.checker.clone(),
            number: self.checker.body_started(memo),
        }
    }

    /// Records that a caller of the entry `key` of `memo` got `value`.
    /// Checks that every caller of one entry sees one value, produced by an
    /// execution of this run (not of an earlier run with the same id).
    #[deprecated(
        note = "every value a `#[memoized]` call returns is recorded by itself; a restated key silently misses for generic, method or renamed functions"
    )]
    pub fn observed<T: Serialize + ?Sized>(&self, memo: &Memo, key: &str, value: &T) {
        let encoded = crate::codec::encode(value).unwrap_or_default();
        self.checker.observed(memo, key, encoded, true);
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
/// A restated key silently misses for a generic function, a method or a
/// renamed one: [`Ledger::side_effect`] learns the key from the call.
///
/// # Example
///
/// ```
/// # #![allow(deprecated)]
/// use memo_runtime::testing::sim::memoized_key;
///
/// let key = memoized_key("charge", 0, &("order-7", 1250_u64))?;
/// assert_eq!(key, memoized_key("charge", 0, &("order-7", 1250_u64))?);
/// assert_ne!(key, memoized_key("charge", 1, &("order-7", 1250_u64))?);
/// # Ok::<(), memo_runtime::Error>(())
/// ```
#[deprecated(note = "Ledger::side_effect learns the key from the memoized call itself")]
pub fn memoized_key<A: Serialize + ?Sized>(name: &str, version: u32, args: &A) -> Result<String> {
    crate::content_key(&(name, version, args))
}
