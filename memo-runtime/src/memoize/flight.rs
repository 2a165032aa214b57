//! Single flight: identical concurrent memoized calls in one process run
//! the body once. The first caller for an entry holds its flight and runs
//! the body; the others wait for it, then find the committed value.

use std::collections::HashMap;
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

/// Holding a `Flight` means being the one caller in this process that may
/// run the body for its entry.
pub(super) struct Flight {
    // Dropped in this order: the lock is released, then the seat is given up.
    _guard: OwnedMutexGuard<()>,
    _seat: Seat,
}

impl Flight {
    /// Waits until this caller holds the flight for `key`.
    ///
    /// Cancel-safe: a caller dropped while waiting gives up its seat, so the
    /// table never keeps an entry nobody holds or waits for.
    pub(super) async fn enter(key: String) -> Flight {
        let (seat, lock) = Seat::take(key);
        Flight {
            _guard: lock.lock_owned().await,
            _seat: seat,
        }
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
        let holder = Flight::enter(key.clone()).await;
        let mut waiter = Box::pin(Flight::enter(key.clone()));
        assert!(futures::poll!(&mut waiter).is_pending(), "the waiter waits");
        drop(holder);
        drop(waiter); // cancelled before it was polled again
        assert!(!in_table(&key));
    }

    #[tokio::test]
    async fn a_waiter_cancelled_while_the_holder_runs_leaves_no_entry_once_it_finishes() {
        let key = "test:cancelled-during-holder".to_owned();
        let holder = Flight::enter(key.clone()).await;
        {
            let mut waiter = pin!(Flight::enter(key.clone()));
            assert!(futures::poll!(&mut waiter).is_pending());
        }
        assert!(in_table(&key), "the holder is still in flight");
        drop(holder);
        assert!(!in_table(&key));
    }

    #[tokio::test]
    async fn a_waiter_enters_once_the_holder_finishes_and_then_the_entry_goes() {
        let key = "test:handover".to_owned();
        let holder = Flight::enter(key.clone()).await;
        let mut waiter = Box::pin(Flight::enter(key.clone()));
        assert!(futures::poll!(&mut waiter).is_pending());
        drop(holder);
        let second = waiter.await;
        assert!(in_table(&key), "the second caller holds the flight");
        drop(second);
        assert!(!in_table(&key));
    }
}
