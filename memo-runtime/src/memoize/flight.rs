//! Single flight: identical concurrent memoized calls in one process run
//! the body once. The first caller for an entry holds its flight and runs
//! the body; the others wait for it, then find the committed value.
//!
//! A caller reads the entry before it enters the flight (a hit takes no
//! part in the table), so a holder may commit between that read and the
//! caller's entry. The caller then reads again, but only if a flight that
//! could be that holder's ended meanwhile ([`Ended`]): an uncontended miss
//! reads its entry once, not twice (on S3, a round trip per call).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

/// The process-wide table of entries in flight, keyed by
/// `Memo::flight_key` (store instance and entry path), with how many
/// callers hold or wait for each. An entry lives exactly as long as someone
/// holds or waits for it.
static FLIGHTS: LazyLock<Mutex<HashMap<String, Entry>>> = LazyLock::new(Mutex::default);

struct Entry {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// Callers holding or waiting for `lock`; changed only under the
    /// table's lock.
    callers: usize,
}

/// How many stripes [`ENDED`] has: entries share a stripe by their key's
/// first digits, and a flight ending in a caller's stripe costs it a second
/// read, so more stripes mean fewer needless reads under load.
const STRIPES: usize = 256;

/// How many flights have ended, by stripe of their entry's key.
static ENDED: [AtomicU64; STRIPES] = [const { AtomicU64::new(0) }; STRIPES];

/// The stripe of an entry's key (a content key's hex digest; any string
/// works, the stripe only has to be the same for one key).
fn stripe(key: &str) -> usize {
    key.bytes()
        .take(8)
        .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
        % STRIPES
}

/// The flights ended in a key's stripe when a caller was about to read the
/// entry: if none ended by the time it holds the flight, nothing this
/// process committed to the entry can have been missed by that read.
///
/// Why that holds: a holder commits before its flight ends, and counts
/// the end before it releases the flight. A commit whose flight ended
/// before the caller looked here completed before its read began, so the
/// read saw it; any other holder of the entry released the flight before
/// this caller got it, so its count is seen here.
pub(super) struct Ended {
    stripe: usize,
    seen: u64,
}

impl Ended {
    /// Looks before the first read of the entry `key`.
    pub(super) fn before_read(key: &str) -> Ended {
        let stripe = stripe(key);
        Ended {
            stripe,
            seen: ENDED[stripe].load(Ordering::SeqCst),
        }
    }

    /// Whether a flight in the stripe ended since [`Ended::before_read`]:
    /// if so, the entry must be read again under the flight.
    pub(super) fn since(&self) -> bool {
        ENDED[self.stripe].load(Ordering::SeqCst) != self.seen
    }
}

/// Holding a `Flight` means being the one caller in this process that may
/// run the body for its entry.
pub(super) struct Flight {
    // Dropped in this order, after `drop` counted the end: the lock is
    // released, then the seat is given up.
    _guard: OwnedMutexGuard<()>,
    _seat: Seat,
    stripe: usize,
}

impl Flight {
    /// Waits until this caller holds the flight for `key` (the flight
    /// key), of the entry `entry_key` (whose stripe [`Ended`] watches).
    ///
    /// Cancel-safe: a caller dropped while waiting gives up its seat, so the
    /// table never keeps an entry nobody holds or waits for.
    pub(super) async fn enter(key: String, entry_key: &str) -> Flight {
        let stripe = stripe(entry_key);
        let (seat, lock) = Seat::take(key);
        Flight {
            _guard: lock.lock_owned().await,
            _seat: seat,
            stripe,
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        // Before the lock is released (the fields drop after this).
        ENDED[self.stripe].fetch_add(1, Ordering::SeqCst);
    }
}

/// One caller's place in an entry's flight, holding or waiting: counted in
/// the table from creation to drop, whichever way the caller ends.
struct Seat {
    key: String,
}

impl Seat {
    fn take(key: String) -> (Seat, Arc<tokio::sync::Mutex<()>>) {
        let mut flights = table();
        let entry = flights.entry(key.clone()).or_insert_with(|| Entry {
            lock: Arc::default(),
            callers: 0,
        });
        entry.callers += 1;
        let lock = Arc::clone(&entry.lock);
        (Seat { key }, lock)
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut flights = table();
        if let Some(entry) = flights.get_mut(&self.key) {
            entry.callers -= 1;
            if entry.callers == 0 {
                flights.remove(&self.key);
            }
        }
    }
}

fn table() -> std::sync::MutexGuard<'static, HashMap<String, Entry>> {
    // The table is consistent after every statement, so a panic elsewhere
    // while it was locked leaves nothing to repair.
    FLIGHTS.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;

    fn in_table(key: &str) -> bool {
        table().contains_key(key)
    }

    #[tokio::test]
    async fn a_waiter_cancelled_after_the_holder_finished_leaves_no_entry() {
        let key = "test:cancelled-after-holder".to_owned();
        let holder = Flight::enter(key.clone(), &key).await;
        let mut waiter = Box::pin(Flight::enter(key.clone(), &key));
        assert!(futures::poll!(&mut waiter).is_pending(), "the waiter waits");
        drop(holder);
        drop(waiter); // cancelled before it was polled again
        assert!(!in_table(&key));
    }

    #[tokio::test]
    async fn a_waiter_cancelled_while_the_holder_runs_leaves_no_entry_once_it_finishes() {
        let key = "test:cancelled-during-holder".to_owned();
        let holder = Flight::enter(key.clone(), &key).await;
        {
            let mut waiter = pin!(Flight::enter(key.clone(), &key));
            assert!(futures::poll!(&mut waiter).is_pending());
        }
        assert!(in_table(&key), "the holder is still in flight");
        drop(holder);
        assert!(!in_table(&key));
    }

    #[tokio::test]
    async fn a_waiter_enters_once_the_holder_finishes_and_then_the_entry_goes() {
        let key = "test:handover".to_owned();
        let holder = Flight::enter(key.clone(), &key).await;
        let mut waiter = Box::pin(Flight::enter(key.clone(), &key));
        assert!(futures::poll!(&mut waiter).is_pending());
        drop(holder);
        let second = waiter.await;
        assert!(in_table(&key), "the second caller holds the flight");
        drop(second);
        assert!(!in_table(&key));
    }

    #[tokio::test]
    async fn a_flight_that_ends_after_a_caller_looked_is_seen_and_none_else() {
        let key = "test:ended".to_owned();
        let looked = Ended::before_read(&key);
        assert!(!looked.since(), "no flight of the stripe ended yet");
        let holder = Flight::enter(key.clone(), &key).await;
        assert!(!looked.since(), "a flight still held has not ended");
        drop(holder);
        assert!(looked.since(), "the holder's end is seen");
    }
}
