//! Single flight: identical concurrent memoized calls in one process run
//! the body once. The first caller for an entry holds its flight and runs
//! the body; the others wait for it, then find the committed value.
//!
//! Flights belong to a memo store ([`Flights`], made once by
//! `MemoStore::new` and kept by every store derived from it), so calls
//! through two stores never wait for each other, and nothing one store's
//! calls do changes what another requests.
//!
//! A caller reads the entry before it enters the flight (a hit takes no
//! part in the table), so a holder may commit between that read and the
//! caller's entry. The caller then reads again, but only if a flight that
//! could be that holder's ended meanwhile ([`Ended`]): an uncontended miss
//! reads its entry once, not twice (on S3, a round trip per call).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use object_store::path::Path;
use tokio::sync::OwnedMutexGuard;

/// How many stripes [`Flights`] counts ended flights in: entries share a
/// stripe by their key's first digits, and a flight ending in a caller's
/// stripe costs it a second read, so more stripes mean fewer needless reads
/// when many calls run at once.
const STRIPES: usize = 256;

/// The flights of one memo store: the entries in flight, by entry path, and
/// how many flights have ended, by stripe of their entry's key.
pub(crate) struct Flights {
    table: Mutex<HashMap<Path, Entry>>,
    ended: [AtomicU64; STRIPES],
}

impl Default for Flights {
    fn default() -> Flights {
        Flights {
            table: Mutex::default(),
            ended: [const { AtomicU64::new(0) }; STRIPES],
        }
    }
}

/// An entry in flight, with how many callers hold or wait for it. It lives
/// exactly as long as someone holds or waits for it.
struct Entry {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// Callers holding or waiting for `lock`; changed only under the
    /// table's lock.
    callers: usize,
}

impl Flights {
    /// Looks, before a caller's first read of the entry `key` (a content
    /// key's hex digest; any string works, the stripe only has to be the
    /// same for one key), at the flights ended in its stripe.
    pub(crate) fn before_read(&self, key: &str) -> Ended {
        let stripe = stripe(key);
        Ended {
            stripe,
            seen: self.ended[stripe].load(Ordering::SeqCst),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<Path, Entry>> {
        // The table is consistent after every statement, so a panic
        // elsewhere while it was locked leaves nothing to repair.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The stripe of an entry's key.
fn stripe(key: &str) -> usize {
    key.bytes().take(8).fold(0usize, |h, b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    }) % STRIPES
}

/// The flights ended in a key's stripe when a caller was about to read the
/// entry: if none ended by the time it holds the flight, nothing its store
/// committed to the entry through a flight can have been missed by that
/// read.
///
/// Why that holds: a holder commits before its flight ends, and counts the
/// end before it releases the flight. A commit whose flight ended before
/// the caller looked here completed before its read began, so the read saw
/// it; any other holder of the entry released the flight before this caller
/// got it, so its count is seen here.
pub(crate) struct Ended {
    stripe: usize,
    seen: u64,
}

impl Ended {
    /// Whether a flight in the stripe ended since
    /// [`Flights::before_read`]: if so, the entry must be read again under
    /// the flight.
    pub(crate) fn since(&self, flights: &Flights) -> bool {
        flights.ended[self.stripe].load(Ordering::SeqCst) != self.seen
    }
}

/// Holding a `Flight` means being the one caller of its store that may run
/// the body for its entry.
pub(crate) struct Flight {
    // Dropped in this order, after `drop` counted the end: the lock is
    // released, then the seat is given up.
    _guard: OwnedMutexGuard<()>,
    seat: Seat,
    stripe: usize,
}

impl Flight {
    /// Waits until this caller holds the flight of the entry at `path`,
    /// whose key is `key` (the stripe [`Ended`] watches).
    ///
    /// Cancel-safe: a caller dropped while waiting gives up its seat, so the
    /// table never keeps an entry nobody holds or waits for.
    pub(crate) async fn enter(flights: &Arc<Flights>, path: Path, key: &str) -> Flight {
        let stripe = stripe(key);
        let (seat, lock) = Seat::take(flights, path);
        Flight {
            _guard: lock.lock_owned().await,
            seat,
            stripe,
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        // Before the lock is released (the fields drop after this).
        self.seat.flights.ended[self.stripe].fetch_add(1, Ordering::SeqCst);
    }
}

/// One caller's place in an entry's flight, holding or waiting: counted in
/// the table from creation to drop, whichever way the caller ends.
struct Seat {
    flights: Arc<Flights>,
    path: Path,
}

impl Seat {
    fn take(flights: &Arc<Flights>, path: Path) -> (Seat, Arc<tokio::sync::Mutex<()>>) {
        let mut table = flights.table();
        let entry = table.entry(path.clone()).or_insert_with(|| Entry {
            lock: Arc::default(),
            callers: 0,
        });
        entry.callers += 1;
        let lock = Arc::clone(&entry.lock);
        drop(table);
        let seat = Seat {
            flights: Arc::clone(flights),
            path,
        };
        (seat, lock)
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut table = self.flights.table();
        if let Some(entry) = table.get_mut(&self.path) {
            entry.callers -= 1;
            if entry.callers == 0 {
                table.remove(&self.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;

    fn in_table(flights: &Flights, path: &Path) -> bool {
        flights.table().contains_key(path)
    }

    fn entry(name: &str) -> (Arc<Flights>, Path) {
        (Arc::default(), Path::from(name))
    }

    #[tokio::test]
    async fn a_waiter_cancelled_after_the_holder_finished_leaves_no_entry() {
        let (flights, path) = entry("cancelled-after-holder");
        let holder = Flight::enter(&flights, path.clone(), "k").await;
        let mut waiter = Box::pin(Flight::enter(&flights, path.clone(), "k"));
        assert!(futures::poll!(&mut waiter).is_pending(), "the waiter waits");
        drop(holder);
        drop(waiter); // cancelled before it was polled again
        assert!(!in_table(&flights, &path));
    }

    #[tokio::test]
    async fn a_waiter_cancelled_while_the_holder_runs_leaves_no_entry_once_it_finishes() {
        let (flights, path) = entry("cancelled-during-holder");
        let holder = Flight::enter(&flights, path.clone(), "k").await;
        {
            let mut waiter = pin!(Flight::enter(&flights, path.clone(), "k"));
            assert!(futures::poll!(&mut waiter).is_pending());
        }
        assert!(in_table(&flights, &path), "the holder is still in flight");
        drop(holder);
        assert!(!in_table(&flights, &path));
    }

    #[tokio::test]
    async fn a_waiter_enters_once_the_holder_finishes_and_then_the_entry_goes() {
        let (flights, path) = entry("handover");
        let holder = Flight::enter(&flights, path.clone(), "k").await;
        let mut waiter = Box::pin(Flight::enter(&flights, path.clone(), "k"));
        assert!(futures::poll!(&mut waiter).is_pending());
        drop(holder);
        let second = waiter.await;
        assert!(
            in_table(&flights, &path),
            "the second caller holds the flight"
        );
        drop(second);
        assert!(!in_table(&flights, &path));
    }

    #[tokio::test]
    async fn a_flight_that_ends_after_a_caller_looked_is_seen_and_none_else() {
        let (flights, path) = entry("ended");
        let looked = flights.before_read("abcdef01");
        assert!(!looked.since(&flights), "no flight of the stripe ended yet");
        let holder = Flight::enter(&flights, path.clone(), "abcdef01").await;
        assert!(!looked.since(&flights), "a flight still held has not ended");
        drop(holder);
        assert!(looked.since(&flights), "the flight ended after the look");
        let later = flights.before_read("abcdef01");
        assert!(!later.since(&flights), "an end before the look is not seen");
    }

    #[tokio::test]
    async fn a_flight_of_another_store_is_not_seen() {
        let (ours, _) = entry("ours");
        let (theirs, path) = entry("theirs");
        let looked = ours.before_read("abcdef01");
        drop(Flight::enter(&theirs, path, "abcdef01").await);
        assert!(
            !looked.since(&ours),
            "another store's flight of the same key changes nothing here"
        );
    }
}
