//! Sealed histories ([`Simulation::sealed_share`](super::Simulation::sealed_share)):
//! every process of the history opens its stores with one seal, drawn from
//! the seed, so that every invariant is checked on compressed, encrypted
//! payloads, and the sweepers forget the data keys of the runs they clear.
//!
//! Two in three sealed histories encrypt with per-run data keys, wrapped by
//! a key-encryption key and kept in a key store apart from the shared
//! objects (an `InMemory` of its own, as another bucket: no faults, and an
//! await point before each of a worker's or operator's requests, a
//! [`Yielding`] store, so that a read of a run's key interleaves with a
//! sweep deleting the run, as a bucket's round trip does; the checker's
//! fresh reads use it without them); the rest with a store keyring. Both
//! compress every payload zstd shrinks. The
//! keys are drawn from the seed: the key-encryption key (or the keyring's
//! key) here, each run's data key and every nonce from the history's token
//! source (`seal::fill_random`), so a sealed seed replays exactly.
//!
//! With [`Simulation::key_rotation`](super::Simulation::key_rotation) the
//! key file changes during the history as the encryption guide rotates a
//! key across a fleet ([`KeyFile`]): each process seals with the key file
//! as it read it at its start, and the world restarts the processes one by
//! one onto each new key file (`world/rotation.rs`); the operator's rewrap
//! interleaves with the forgets of the sweepers and the keys new runs make.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use futures::{FutureExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::memory::InMemory;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::Simulation;
use super::stores::Yielding;
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

    /// Rotates the key of every [sealed](Self::sealed_share) history as
    /// the encryption guide rotates one across a fleet: the key file every
    /// process reads at its start goes from version 1 to version 2
    /// *staged*, then *promoted*, then version 1 *retired*, each rollout
    /// finished on every process (the world restarts them one by one:
    /// workers, the operator's processes, the long-lived reader) before
    /// the key file changes again. Before it retires version 1 the
    /// operator checks as the guide says: with data keys, a rewrap of the
    /// key store (`memoctl rewrap`) that reports no key written meanwhile;
    /// with a store keyring, a scan of the store (`memoctl keys`) that
    /// finds no object sealed with version 1, which a history whose runs
    /// stay retained seldom reaches. A read that cannot open what another
    /// process wrote is a corrupt read; at the end of a history that
    /// retired version 1, no data key (or object) may still need it.
    ///
    /// One rotating history in three turns encryption on instead, as the
    /// guide's "Migrating a store that holds plaintext" (or, with data
    /// keys, "Old data") says: from no encryption, to version 1 staged
    /// (written plaintext, read encrypted), to version 1 promoted with
    /// `accept_plaintext`, to `accept_plaintext` off once a scan of the
    /// store (`memoctl keys`) counts no plaintext value; from then on no
    /// value may be stored unencrypted. Default off.
    #[must_use]
    pub fn key_rotation(mut self, on: bool) -> Self {
        self.config.key_rotation = on;
        self
    }
}

/// A step of a key rotation: what the key file says that every process
/// reads at its start ([`Simulation::key_rotation`]). Ordered as the steps
/// come; a rollout is finished when every process runs the same step, and
/// processes one step apart read what each other writes. (Turning
/// encryption on, the steps are: no key; `1 <key> staged`; `1 <key>` with
/// `accept_plaintext`; `1 <key>` alone.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum KeyFile {
    /// `1 <key>`: version 1 alone.
    Old,
    /// `1 <key>` and `2 <key> staged`: version 2 read, never written with.
    Staged,
    /// `1 <key>` and `2 <key>`: version 2 written with, both read.
    Promoted,
    /// `2 <key>`: version 1 retired.
    Retired,
}

impl KeyFile {
    /// The step after this one, if any.
    pub(super) fn next(self) -> Option<KeyFile> {
        match self {
            KeyFile::Old => Some(KeyFile::Staged),
            KeyFile::Staged => Some(KeyFile::Promoted),
            KeyFile::Promoted => Some(KeyFile::Retired),
            KeyFile::Retired => None,
        }
    }
}

/// The share of sealed histories that encrypt with per-run data keys.
const DATA_KEYS_SHARE: f64 = 2.0 / 3.0;

/// The share of rotating histories that turn encryption on instead.
const TURNS_ON_SHARE: f64 = 1.0 / 3.0;

/// How the processes of a sealed history seal what they store.
#[derive(Debug, Clone)]
pub(super) struct Sealing {
    /// The key of version 1: of the store keyring, or the key-encryption
    /// key of the data keys.
    key: [u8; 32],
    /// The key of version 2, with [`Simulation::key_rotation`].
    next_key: Option<[u8; 32]>,
    /// Whether the rotation turns encryption on (version 1 is the new
    /// key, and the store starts in plaintext) rather than rotating.
    turns_on: bool,
    /// What the key file says now (shared by every clone).
    key_file: Rc<Cell<KeyFile>>,
    /// The key store of the data keys, if the history uses them.
    key_store: Option<Arc<InMemory>>,
}

impl Sealing {
    /// How the history of `seed` seals, if it is one of the `share` of
    /// histories that do.
    pub(super) fn for_seed(share: f64, seed: u64, rotates: bool) -> Option<Sealing> {
        if share <= 0.0 {
            return None;
        }
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5ea1_ed5e_a1ed);
        if !rng.random_bool(share) {
            return None;
        }
        let key: [u8; 32] = rng.random();
        let key_store = rng
            .random_bool(DATA_KEYS_SHARE)
            .then(|| Arc::new(InMemory::new()));
        // Drawn last, and only with rotation, so that the other sealed
        // histories stay what they were.
        let next_key = rotates.then(|| rng.random());
        let turns_on = rotates && rng.random_bool(TURNS_ON_SHARE);
        Some(Sealing {
            key,
            next_key,
            turns_on,
            key_file: Rc::new(Cell::new(KeyFile::Old)),
            key_store,
        })
    }

    /// The keyring a key file of step `file` makes: the store keyring, or
    /// the key-encryption key of the data keys.
    fn ring(&self, file: KeyFile) -> Keyring {
        let next = self.next_key.unwrap_or(self.key);
        if self.turns_on {
            // Read from the step after no key on (the first step writes
            // without it), written with from the promotion on.
            let ring = match file {
                KeyFile::Old | KeyFile::Staged => Keyring::staged(1, self.key),
                KeyFile::Promoted | KeyFile::Retired => Keyring::new(1, self.key),
            };
            return ring.expect("version 1 makes a valid keyring");
        }
        let ring = match file {
            KeyFile::Old => Keyring::new(1, self.key),
            KeyFile::Staged => Keyring::new(1, self.key).and_then(|r| r.with_staged_key(2, next)),
            KeyFile::Promoted => Keyring::new(1, self.key).and_then(|r| r.with_key(2, next)),
            KeyFile::Retired => Keyring::new(2, next),
        };
        ring.expect("versions 1 and 2 make a valid keyring")
    }

    /// The seal a new process opens its stores with, from the key file as
    /// it reads it now: its own cache of unwrapped data keys, over the
    /// history's key store (with await points if `yielding`).
    fn seal(&self, yielding: bool) -> Seal {
        let seal =
            Seal::default().with_compression(Compression::zstd(Compression::DEFAULT_LEVEL, 0));
        let file = self.key_file.get();
        if self.turns_on && file == KeyFile::Old {
            // Encryption not on yet: no key, no data keys.
            return seal;
        }
        let seal = match self.data_keys(yielding) {
            Some(keys) => seal.with_data_keys(keys),
            None => seal.with_encryption(self.ring(file)),
        };
        // Promoted while plaintext may be left: the guide's second step.
        if self.turns_on && file == KeyFile::Promoted {
            seal.accepting_plaintext()
        } else {
            seal
        }
    }

    /// The data keys of a new process (`None` without data keys), from the
    /// key file as it reads it now, over the history's key store (with
    /// await points if `yielding`).
    pub(super) fn data_keys(&self, yielding: bool) -> Option<DataKeys> {
        let key_store = self.key_store.as_ref()?;
        let key_store: Arc<dyn ObjectStore> = if yielding {
            Arc::new(Yielding(Arc::clone(key_store)))
        } else {
            Arc::clone(key_store) as _
        };
        Some(DataKeys::new(
            self.ring(self.key_file.get()),
            key_store,
            "keys",
        ))
    }

    /// Whether the history's key rotates ([`Simulation::key_rotation`]).
    pub(super) fn rotates(&self) -> bool {
        self.next_key.is_some()
    }

    /// Whether the rotation turns encryption on rather than rotating a key.
    pub(super) fn turns_on(&self) -> bool {
        self.turns_on
    }

    /// What the key file says now.
    pub(super) fn key_file(&self) -> KeyFile {
        self.key_file.get()
    }

    /// The operator changes the key file to `file`.
    pub(super) fn set_key_file(&self, file: KeyFile) {
        self.key_file.set(file);
    }

    /// What the history's stores do, for its trace.
    pub(super) fn describe(&self) -> &'static str {
        match (&self.key_store, self.rotates(), self.turns_on) {
            (Some(_), false, _) => "compressed and encrypted with per-run data keys",
            (None, false, _) => "compressed and encrypted with a store keyring",
            (Some(_), true, false) => {
                "compressed and encrypted with per-run data keys, whose key-encryption key rotates"
            }
            (None, true, false) => {
                "compressed and encrypted with a store keyring, whose key rotates"
            }
            (Some(_), true, true) => {
                "compressed, in plaintext until per-run data keys are turned on"
            }
            (None, true, true) => "compressed, in plaintext until a store keyring is turned on",
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

/// The seal a fresh instance of the checker (or the long-lived reader)
/// opens its stores with, from the key file as it is now: its key store
/// answers at once, as the checker's reads need. `None` in a history that
/// is not sealed (the stores' default seal).
pub(super) fn process_seal() -> Option<Seal> {
    CURRENT.with(|current| current.borrow().as_ref().map(|s| s.seal(false)))
}

/// The seal a new worker or operator process opens its stores with: as
/// [`process_seal`], over a key store with await points (so that its
/// requests interleave with other processes' sweeps, and with a rewrap).
pub(super) fn worker_seal() -> Option<Seal> {
    CURRENT.with(|current| current.borrow().as_ref().map(|s| s.seal(true)))
}

/// The key file a process starting now reads: `None` in a history that is
/// not sealed.
pub(super) fn key_file() -> Option<KeyFile> {
    CURRENT.with(|current| current.borrow().as_ref().map(Sealing::key_file))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rotation's key files: each step reads what the steps beside it
    /// write, so a rollout finished before the next begins leaves no
    /// process unable to read another's; two steps apart, it cannot.
    #[test]
    fn processes_one_key_file_apart_read_what_each_other_writes() {
        let sealing = Sealing {
            turns_on: false,
            ..Sealing::for_seed(1.0, 0, true).unwrap()
        };
        let steps = [
            KeyFile::Old,
            KeyFile::Staged,
            KeyFile::Promoted,
            KeyFile::Retired,
        ];
        let writes = steps.map(|step| sealing.ring(step).current_version());
        assert_eq!(writes, [1, 1, 2, 2]);
        let reads = |reader: usize, writer: usize| {
            sealing.ring(steps[reader]).get(writes[writer]).is_some()
        };
        for reader in 0..steps.len() {
            for writer in 0..steps.len() {
                if reader.abs_diff(writer) <= 1 {
                    assert!(
                        reads(reader, writer),
                        "{:?} reading {:?}'s writes",
                        steps[reader],
                        steps[writer]
                    );
                }
            }
        }
        // Two steps apart: the key written with is not yet, or no longer, read.
        assert!(!reads(0, 2) && !reads(3, 1));
        assert_eq!(KeyFile::Old.next(), Some(KeyFile::Staged));
        assert_eq!(KeyFile::Retired.next(), None);
    }

    /// Turning encryption on: no key, then the key staged (plaintext
    /// written, both read), then promoted with `accept_plaintext` (both
    /// read), then alone (only encrypted values read).
    #[test]
    fn turning_encryption_on_reads_plaintext_until_the_last_step() {
        let sealing = Sealing {
            turns_on: true,
            key_store: None,
            ..Sealing::for_seed(1.0, 0, true).unwrap()
        };
        let at = |file: KeyFile| {
            sealing.set_key_file(file);
            let seal = sealing.seal(false);
            let reads_key = seal.keys().is_some_and(|ring| ring.get(1).is_some());
            (seal.is_encrypted(), seal.reads_plaintext(), reads_key)
        };
        assert_eq!(at(KeyFile::Old), (false, true, false));
        assert_eq!(at(KeyFile::Staged), (false, true, true));
        assert_eq!(at(KeyFile::Promoted), (true, true, true));
        assert_eq!(at(KeyFile::Retired), (true, false, true));
    }

    #[test]
    fn a_share_of_seeds_is_sealed_two_in_three_of_them_with_data_keys() {
        assert!(Sealing::for_seed(0.0, 1, false).is_none());
        let sealed: Vec<_> = (0..1000)
            .filter_map(|seed| Sealing::for_seed(0.2, seed, false))
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
            .map(|seed| {
                Sealing::for_seed(1.0, seed, false)
                    .unwrap()
                    .key_store
                    .is_some()
            })
            .collect();
        assert_eq!(first, [true, false]);
    }
}
