//! Retry policies for workflow steps: exponential backoff with jitter, built
//! on `backon`.

use std::time::Duration;

use backon::ExponentialBuilder;

/// How often a step body is tried, and how long to wait between tries.
///
/// Waits grow exponentially from `min_delay` by `factor`, capped at
/// `max_delay`, each with random jitter so that many workers retrying one
/// dependency do not retry in lockstep. Which errors are worth a retry is said
/// per step, with [`Step::when`](crate::workflow::Step::when).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use memo_runtime::workflow::RetryPolicy;
///
/// let policy = RetryPolicy::attempts(5)
///     .with_min_delay(Duration::from_millis(100))
///     .with_max_delay(Duration::from_secs(10));
/// assert_eq!(policy.max_attempts(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    max_attempts: u32,
    min_delay: Duration,
    max_delay: Duration,
    factor: f32,
    jitter: bool,
}

impl RetryPolicy {
    /// Tries a step body at most `max_attempts` times in all (at least once),
    /// waiting 200 ms, 400 ms, ... up to 30 s between tries, with jitter.
    pub fn attempts(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(30),
            factor: 2.0,
            jitter: true,
        }
    }

    /// One try, no retries.
    pub fn never() -> RetryPolicy {
        RetryPolicy::attempts(1)
    }

    /// The first wait. Zero retries at once; `Duration::MAX` (or any wait
    /// the timer cannot reach) waits as long as the timer can, about 30
    /// years.
    pub fn with_min_delay(mut self, delay: Duration) -> RetryPolicy {
        self.min_delay = delay;
        self
    }

    /// The longest wait; waits grow (saturating, never wrapping) until
    /// they reach it. Zero makes every wait after the first zero.
    pub fn with_max_delay(mut self, delay: Duration) -> RetryPolicy {
        self.max_delay = delay;
        self
    }

    /// The growth factor between waits (default 2).
    pub fn with_factor(mut self, factor: f32) -> RetryPolicy {
        self.factor = factor;
        self
    }

    /// Turns jitter off (for tests that check exact waits).
    pub fn without_jitter(mut self) -> RetryPolicy {
        self.jitter = false;
        self
    }

    /// The most tries of a step body, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    pub(crate) fn backoff(&self) -> ExponentialBuilder {
        let builder = ExponentialBuilder::new()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(self.factor)
            .with_max_times((self.max_attempts - 1) as usize);
        if self.jitter {
            builder.with_jitter()
        } else {
            builder
        }
    }
}

impl Default for RetryPolicy {
    /// Three tries.
    fn default() -> RetryPolicy {
        RetryPolicy::attempts(3)
    }
}
