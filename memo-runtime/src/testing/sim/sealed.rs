//! Sealed histories ([`Simulation::sealed_share`](super::Simulation::sealed_share)):
//! every process of the history opens its stores with one seal, drawn from
//! the seed, so that every invariant is checked on compressed, encrypted
//! payloads, and the sweepers forget the data keys of the runs they clear.
//!
//! Two in three sealed histories encrypt with per-run data keys, wrapped by
//! a key-encryption key and kept in a key store apart from the shared
//! objects (an `InMemory` of its own, as another bucket: no faults, no
//! await points); the rest with a store keyring. Both compress every
//! payload zstd shrinks. The keys are drawn from the seed: the
//! key-encryption key (or the keyring's key) here, each run's data key and
//! every nonce from the history's token source (`seal::fill_random`), so a
//! sealed seed replays exactly.

use std::cell::RefCell;
use std::sync::Arc;

use futures::{FutureExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::memory::InMemory;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::Simulation;
use crate::seal::{Compression, DataKeys, Keyring, Seal};

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// The share of seeds (0 to 1, drawn from each seed) whose every
    /// process seals what it stores: every payload compressed (where zstd
    /// shrinks it) and encrypted, in two seeds of three with per-run data
    /// keys kept in a key store of their own (which the sweepers forget as
    /// they clear runs), in the rest with a store keyring. Every invariant
    /// is then checked on sealed data: a payload that does not open is a
    /// corrupt read. The keys are drawn from the seed, so a sealed seed
    /// replays exactly. Default 0.
    #[must_use]
    pub fn sealed_share(mut self, share: f64) -> Self {
        self.config.sealed_share = share.clamp(0.0, 1.0);
        self
    }
}

/// The share of sealed histories that encrypt with per-run data keys.
const DATA_KEYS_SHARE: f64 = 2.0 / 3.0;

/// How the processes of a sealed history seal what they store.
#[derive(Debug, Clone)]
pub(super) struct Sealing {
    /// The store keyring, or the key-encryption key of the data keys.
    ring: Keyring,
    /// The key store of the data keys, if the history uses them.
    key_store: Option<Arc<InMemory>>,
}

impl Sealing {
    /// How the history of `seed` seals, if it is one of the `share` of
    /// histories that do.
    pub(super) fn for_seed(share: f64, seed: u64) -> Option<Sealing> {
        if share <= 0.0 {
            return None;
        }
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5ea1_ed5e_a1ed);
        if !rng.random_bool(share) {
            return None;
        }
        let key: [u8; 32] = rng.random();
        let ring = Keyring::new(1, key).expect("version 1 is a valid key version");
        let key_store = rng
            .random_bool(DATA_KEYS_SHARE)
            .then(|| Arc::new(InMemory::new()));
        Some(Sealing { ring, key_store })
    }

    /// The seal a new process opens its stores with: its own cache of
    /// unwrapped data keys, over the history's key store.
    pub(super) fn seal(&self) -> Seal {
        let seal =
            Seal::default().with_compression(Compression::zstd(Compression::DEFAULT_LEVEL, 0));
        match &self.key_store {
            Some(key_store) => seal.with_data_keys(DataKeys::new(
                self.ring.clone(),
                Arc::clone(key_store) as Arc<dyn ObjectStore>,
                "keys",
            )),
            None => seal.with_encryption(self.ring.clone()),
        }
    }

    /// What the history's stores do, for its trace.
    pub(super) fn describe(&self) -> &'static str {
        match self.key_store {
            Some(_) => "compressed and encrypted with per-run data keys",
            None => "compressed and encrypted with a store keyring",
        }
    }

    /// The data keys left in the key store (`None` without data keys).
    pub(super) fn keys_left(&self) -> Option<usize> {
        let key_store = self.key_store.as_ref()?;
        let listed = key_store
            .list(None)
            .try_collect::<Vec<_>>()
            .now_or_never()?;
        listed.ok().map(|keys| keys.len())
    }
}

thread_local! {
    /// The sealing of the history running on this thread.
    static CURRENT: RefCell<Option<Sealing>> = const { RefCell::new(None) };
}

/// Puts back the sealing installed before, when dropped.
pub(super) struct Installed(Option<Sealing>);

impl Drop for Installed {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// Makes `sealing` the sealing of every process of the history about to
/// run on this thread, until the guard returned is dropped.
pub(super) fn install(sealing: Option<Sealing>) -> Installed {
    Installed(CURRENT.with(|current| current.replace(sealing)))
}

/// The seal a new process of the running history opens its stores with;
/// `None` in a history that is not sealed (the stores' default seal).
pub(super) fn process_seal() -> Option<Seal> {
    CURRENT.with(|current| current.borrow().as_ref().map(Sealing::seal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_of_seeds_is_sealed_two_in_three_of_them_with_data_keys() {
        assert!(Sealing::for_seed(0.0, 1).is_none());
        let sealed: Vec<_> = (0..1000)
            .filter_map(|seed| Sealing::for_seed(0.2, seed))
            .collect();
        assert!((150..250).contains(&sealed.len()), "{}", sealed.len());
        let with_data_keys = sealed.iter().filter(|s| s.key_store.is_some()).count();
        assert!(
            (100..170).contains(&with_data_keys),
            "{with_data_keys} of {}",
            sealed.len()
        );
        // As `a_sealed_seed_replays_exactly` (tests/tests/simulation.rs) says.
        let first: Vec<_> = (0..2)
            .map(|seed| Sealing::for_seed(1.0, seed).unwrap().key_store.is_some())
            .collect();
        assert_eq!(first, [true, false]);
    }
}
