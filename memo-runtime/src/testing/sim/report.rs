//! What a simulation reports: the histories that kept every invariant, and
//! the failure of one that did not, with the command that replays it.

use std::fmt;

#[cfg(doc)]
use super::Simulation;

/// One history that kept every invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct History {
    /// The seed it ran from.
    pub seed: u64,
    /// Events simulated: deliveries, crashes, restarts, signals, sweeps,
    /// clock jumps, deletions, and tasks ended.
    pub events: u64,
    /// Scheduler steps (task polls).
    pub polls: u64,
    /// Store faults injected.
    pub faults: u64,
    /// Worker crashes.
    pub crashes: u64,
    /// Status hints and due-run entries that a power loss brought back
    /// after their delete ([`Simulation::power_loss`]).
    pub undone_deletes: u64,
    /// Attempts of a worker still on the old code, during a rolling deploy
    /// ([`Simulation::rolling_deploy_at`]), that met a history the new code
    /// wrote ([`Error::NonDeterminism`](crate::Error::NonDeterminism)),
    /// leaving the run open for a worker on the new code.
    pub old_code_conflicts: u64,
    /// Runs that a worker on the old code of a
    /// [versioned deploy](Simulation::versioned_deploy) left open for one
    /// on the new code: due runs of the new version a worker loop's poll
    /// skipped ([`WakeReport::unknown`]), and deliveries of them refused
    /// for their version.
    ///
    /// [`WakeReport::unknown`]: crate::workflow::WakeReport::unknown
    pub other_version_skips: u64,
    /// Calls of a short-lived [shared](Simulation::shared_memos) key that
    /// committed a value of their own after an earlier call had got one:
    /// the key had expired, a sweep deleted it, and it was written again.
    pub shared_rewrites: u64,
    /// Whether the history's key rotation
    /// ([`Simulation::key_rotation`]) promoted version 2 (1) or not (0).
    pub keys_promoted: u64,
    /// Whether the history's key rotation retired version 1 (1) or not
    /// (0): the rewrap, or the scan, said nothing needed it any more. (A
    /// history that turns encryption on "retires" when it turns
    /// `accept_plaintext` off.)
    pub keys_retired: u64,
}

/// What [`Simulation::run_seeds`] ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Summary {
    /// Histories run.
    pub seeds: u64,
    /// Events simulated, over all histories.
    pub events: u64,
    /// Scheduler steps, over all histories.
    pub polls: u64,
    /// Store faults injected, over all histories.
    pub faults: u64,
    /// Worker crashes, over all histories.
    pub crashes: u64,
    /// Deletes that power losses undid, over all histories.
    pub undone_deletes: u64,
    /// Attempts of a worker on the old code that met a history the new
    /// code wrote, over all histories ([`History::old_code_conflicts`]).
    pub old_code_conflicts: u64,
    /// Runs left for a worker that registers their version, over all
    /// histories ([`History::other_version_skips`]).
    pub other_version_skips: u64,
    /// Shared keys written again after a sweep deleted them, over all
    /// histories ([`History::shared_rewrites`]).
    pub shared_rewrites: u64,
    /// Histories whose key rotation promoted version 2
    /// ([`History::keys_promoted`]).
    pub keys_promoted: u64,
    /// Histories whose key rotation retired version 1
    /// ([`History::keys_retired`]).
    pub keys_retired: u64,
}

impl Summary {
    pub(super) fn add(&mut self, history: &History) {
        self.seeds += 1;
        self.events += history.events;
        self.polls += history.polls;
        self.faults += history.faults;
        self.crashes += history.crashes;
        self.undone_deletes += history.undone_deletes;
        self.old_code_conflicts += history.old_code_conflicts;
        self.other_version_skips += history.other_version_skips;
        self.shared_rewrites += history.shared_rewrites;
        self.keys_promoted += history.keys_promoted;
        self.keys_retired += history.keys_retired;
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} seeds, {} events, {} polls, {} faults injected, {} crashes",
            self.seeds, self.events, self.polls, self.faults, self.crashes
        )?;
        if self.undone_deletes > 0 {
            write!(
                f,
                ", {} deletes undone by power losses",
                self.undone_deletes
            )?;
        }
        if self.old_code_conflicts > 0 {
            write!(
                f,
                ", {} attempts on the old code met a history the new code wrote",
                self.old_code_conflicts
            )?;
        }
        if self.other_version_skips > 0 {
            write!(
                f,
                ", {} runs left for a worker that registers their version",
                self.other_version_skips
            )?;
        }
        if self.shared_rewrites > 0 {
            write!(
                f,
                ", {} shared keys written again after a sweep",
                self.shared_rewrites
            )?;
        }
        if self.keys_promoted > 0 {
            write!(
                f,
                ", {} key rotations promoted a key and {} retired the old one",
                self.keys_promoted, self.keys_retired
            )?;
        }
        Ok(())
    }
}

/// An invariant a history broke.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Violation {
    /// The invariant, in words.
    pub invariant: &'static str,
    /// What happened.
    pub detail: String,
    /// How many events had been simulated when it was found.
    pub event: u64,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[event {}] {}: {}",
            self.event, self.invariant, self.detail
        )
    }
}

/// A history that broke an invariant: its seed, what broke, the events
/// leading to it, and how to replay it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Failure {
    /// The seed that fails.
    pub seed: u64,
    /// Every violation found, in order.
    pub violations: Vec<Violation>,
    /// The last events of the history (with the violations among them).
    pub trace: Vec<String>,
    /// A shell command that replays this seed.
    pub replay: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation seed {} broke {} invariant check(s); the first of each:",
            self.seed,
            self.violations.len()
        )?;
        // The first violation of each invariant, in order.
        let mut seen = Vec::new();
        for violation in &self.violations {
            if !seen.contains(&violation.invariant) {
                seen.push(violation.invariant);
                writeln!(f, "  {violation}")?;
            }
        }
        writeln!(f, "events up to the first violation:")?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        write!(f, "replay: {}", self.replay)
    }
}

impl std::error::Error for Failure {}

/// `MEMO_SIM_SEED=<seed> cargo test ...` naming the running test target and
/// test, as well as they can be told from the process.
pub(super) fn replay_command(seed: u64) -> String {
    let target = std::env::args()
        .next()
        .and_then(|exe| {
            let name = std::path::Path::new(&exe)
                .file_stem()?
                .to_str()?
                .to_string();
            // Cargo names test binaries `<target>-<16 hex digits>`.
            let target = match name.rsplit_once('-') {
                Some((target, hash)) if hash.len() == 16 => target.to_string(),
                _ => name,
            };
            Some(format!(" --test {target}"))
        })
        .unwrap_or_default();
    let test = std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .map(|name| format!(" -- {name} --exact --nocapture"))
        .unwrap_or_default();
    format!("MEMO_SIM_SEED={seed} cargo test{target}{test}")
}
