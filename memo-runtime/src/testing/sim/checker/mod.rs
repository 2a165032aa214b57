//! The invariants' bookkeeping for one simulated history: who is running,
//! which side effects ran for which memo entry, what every caller saw, and
//! the violations found so far.

mod listing;
mod store;

pub(super) use listing::Truth;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use object_store::path::Path;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::Violation;
use super::compat::{self, fresh_run};
use super::stores::Shared;
use crate::clock::{Clock, ManualClock};
use crate::memo::Memo;
use crate::run_id::RunId;
use crate::runtime_store::{InputRecord, RunRecord, StepReceipt};

thread_local! {
    /// The task the simulator is polling right now.
    static CURRENT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Runs `poll` as task `id`: whatever the task does meanwhile is its doing.
pub(super) fn as_task<R>(id: u64, poll: impl FnOnce() -> R) -> R {
    CURRENT.with(|current| {
        let before = current.replace(Some(id));
        let result = poll();
        current.set(before);
        result
    })
}

/// Runs `history` with `checker` told of every memoized call that returns
/// on this thread, and the simulation's own unique tokens (incarnations,
/// attempt tokens, worker ids) drawn from the seed, so that a seed replays
/// exactly (the runtime's own tokens mix in the time and the process id).
pub(super) fn while_active<R>(checker: &Checker, history: impl FnOnce() -> R) -> R {
    let tokens = Arc::clone(&checker.tokens);
    let observer = checker.clone();
    crate::run_id::with_token_source(
        move || {
            tokens
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .random()
        },
        || {
            crate::memoize::engine::observing_calls(
                move |memo, key, committed| observer.observed(memo, key, committed.to_vec(), false),
                history,
            )
        },
    )
}

fn current_task() -> Option<u64> {
    CURRENT.with(Cell::get)
}

/// What a simulated task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskKind {
    Run,
    Recover,
    Signal,
    Sweep,
    Delete,
    Operator,
    Poll,
    Cancel,
}

/// A live task.
#[derive(Debug)]
struct Task {
    kind: TaskKind,
}

/// One memo entry of one run incarnation: what a side effect belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Entry {
    run_id: RunId,
    incarnation: u64,
    step: u32,
    key: String,
}

/// The key a step body's own execution is recorded under (no memo key is
/// empty: they are hex digests).
const BODY: &str = "";

/// The key a side effect reported outside any memoized call is recorded
/// under.
const OUTSIDE: &str = "<outside a #[memoized] body>";

/// A step body or a side effect being executed (between its start and its
/// end).
#[derive(Debug)]
struct Running {
    task: u64,
    entry: Entry,
    started_ms: u64,
}

#[derive(Debug)]
struct State {
    violations: Vec<Violation>,
    tasks: HashMap<u64, Task>,
    executions: BTreeMap<Entry, u64>,
    running: HashMap<u64, Running>,
    /// The first value a caller of each entry got, and the task that got it.
    observed: HashMap<Entry, (Vec<u8>, u64)>,
    /// The (step, key) of every side effect recorded, in any run.
    effect_keys: HashSet<(u32, String)>,
    /// Whether some caller got the value of an entry a side effect ran for.
    matched: bool,
    /// Every (run, incarnation, step) in which some memoized call returned.
    returned_in: HashSet<(RunId, u64, u32)>,
    /// Every incarnation any worker wrote a record of, with the number of
    /// record writes before its first one.
    incarnations: HashMap<(RunId, u64), u64>,
    /// Record writes so far.
    record_writes: u64,
    /// Every incarnation a `create_run` answered for, with the number of
    /// creations answered before the first such answer.
    created: HashMap<(RunId, u64), u64>,
    /// Creations answered so far.
    creations: u64,
    /// The last state of every incarnation a deletion removed, as a fresh
    /// instance read it just before the deletion took its record (the
    /// first thing a deletion removes): what a commit acknowledged to that
    /// incarnation is checked against once the run is gone.
    deleted: HashMap<(RunId, u64), Deleted>,
    next_execution: u64,
    rng: StdRng,
    trace: VecDeque<String>,
    first_violation: Option<usize>,
    events: u64,
    /// Paths at which a foreign object stands now (with
    /// `Simulation::foreign_objects`).
    planted: Vec<String>,
    /// Tombstones written for an incarnation already deleted (see
    /// `Checker::burying`).
    late_tombstones: HashSet<String>,
    /// Incarnations nothing clears again: their recheck ran (a tombstone
    /// or recheck marker was deleted), or they were deleted with no
    /// recheck to come (see `Checker::landed`).
    rechecked: HashSet<(RunId, u64)>,
    /// The incarnations whose recheck marker a sweep wrote and no one has
    /// deleted yet.
    recheck_markers: HashSet<(RunId, u64)>,
    /// Objects each task wrote into an incarnation after its recheck ran.
    after_recheck: HashMap<u64, Vec<String>>,
    /// Those of tasks that then died in a crash (see `Checker::task_died`).
    left_after_recheck: HashSet<String>,
    /// Whether the backend folds names to lower case (with wide run ids):
    /// a planted path, taken from a listing, is then folded, while a
    /// reader names the object as memo spells it.
    folds_case: bool,
    /// How far a process's clock may be off the shared one, in ms
    /// ([`Simulation::clock_skew`](super::Simulation::clock_skew)).
    skew_ms: u64,
    /// With [`Simulation::power_loss`](super::Simulation::power_loss): the
    /// status hints and due-run entries deleted since the last power loss,
    /// with their bytes and the time of their delete, which a local folder
    /// makes without a sync.
    unsynced: Option<Vec<(Path, Bytes, u64)>>,
}

/// An incarnation as it was when a deletion began: its run, its receipts
/// and its inputs.
#[derive(Debug, Clone)]
struct Deleted {
    run: RunRecord,
    receipts: Vec<StepReceipt>,
    inputs: Vec<InputRecord>,
}

/// Shared by the world, the workers' store wrappers and the [`Ledger`](super::Ledger).
#[derive(Clone, Debug)]
pub(super) struct Checker {
    state: Arc<Mutex<State>>,
    /// Draws the runtime's unique tokens while the history runs; a lock of its own, as the
    /// runtime draws them wherever it is, the state's lock held or not.
    tokens: Arc<Mutex<StdRng>>,
    objects: Shared,
    clock: Arc<ManualClock>,
    retention_ms: u64,
    lease_ms: u64,
    check_bodies: bool,
}

/// The invariant a read of a corrupt object breaks, unless a foreign
/// object was planted there.
pub(super) const CORRUPT_READ: &str = "no read returns a corrupt value";

/// Whether an error message names the object at `path` (and not one whose
/// path merely begins with it), comparing names folded to lower case if
/// `folds_case` (the backend's objects are named so, whatever case memo
/// spells a path in: a status hint's folder `Running` is `running` there).
fn names(message: &str, path: &str, folds_case: bool) -> bool {
    let (message, path) = if folds_case {
        (message.to_ascii_lowercase(), path.to_ascii_lowercase())
    } else {
        (message.to_string(), path.to_string())
    };
    let (message, path) = (message.as_str(), path.as_str());
    message.match_indices(path).any(|(at, _)| {
        !message[at + path.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '/')
    })
}

/// How many events a failure report shows, up to the first violation
/// (`MEMO_SIM_TRACE=N` shows `N`).
const TRACE_LEN: usize = 40;

impl Checker {
    /// A checker over an empty store at time 0, for the unit tests of a
    /// check.
    #[cfg(test)]
    pub(super) fn for_test() -> Checker {
        let objects: Shared = Arc::new(object_store::memory::InMemory::new());
        Checker::new(objects, Arc::new(ManualClock::new(0)), 0, 1, 1, false)
    }

    pub(super) fn new(
        objects: Shared,
        clock: Arc<ManualClock>,
        seed: u64,
        retention_ms: u64,
        lease_ms: u64,
        check_bodies: bool,
    ) -> Checker {
        Checker {
            state: Arc::new(Mutex::new(State {
                violations: Vec::new(),
                tasks: HashMap::new(),
                executions: BTreeMap::new(),
                running: HashMap::new(),
                observed: HashMap::new(),
                effect_keys: HashSet::new(),
                matched: false,
                returned_in: HashSet::new(),
                incarnations: HashMap::new(),
                record_writes: 0,
                created: HashMap::new(),
                creations: 0,
                deleted: HashMap::new(),
                next_execution: 0,
                rng: StdRng::seed_from_u64(seed ^ 0x5eed_1ed6),
                trace: VecDeque::new(),
                first_violation: None,
                events: 0,
                planted: Vec::new(),
                late_tombstones: HashSet::new(),
                rechecked: HashSet::new(),
                recheck_markers: HashSet::new(),
                after_recheck: HashMap::new(),
                left_after_recheck: HashSet::new(),
                folds_case: false,
                skew_ms: 0,
                unsynced: None,
            })),
            tokens: Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ 0x70ce_75ee_d000))),
            objects,
            clock,
            retention_ms,
            lease_ms,
            check_bodies,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn objects(&self) -> &Shared {
        &self.objects
    }

    /// The simulated clock's time now.
    pub(super) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Each process's clock may be off the shared one by up to `ms`.
    pub(super) fn set_clock_skew(&self, ms: u64) {
        self.lock().skew_ms = ms;
    }

    /// How far a process's clock may be off the shared one, in ms.
    pub(super) fn clock_skew_ms(&self) -> u64 {
        self.lock().skew_ms
    }

    /// The backend folds every name to lower case, as a case-insensitive
    /// folder does: a planted path and a path an error names are compared
    /// folded.
    pub(super) fn set_folds_case(&self) {
        self.lock().folds_case = true;
    }

    /// A foreign object stands at `path` (`true`) or no longer does: while
    /// it stands, a corrupt read naming it is what the reader must report,
    /// not a violation.
    pub(super) fn set_planted(&self, path: &str, planted: bool) {
        let mut state = self.lock();
        state.planted.retain(|p| p != path);
        if planted {
            state.planted.push(path.to_string());
        }
    }

    /// Records `invariant` broken, with what happened.
    pub(super) fn violation(&self, invariant: &'static str, detail: String) {
        let mut state = self.lock();
        let folds_case = state.folds_case;
        if invariant == CORRUPT_READ && state.planted.iter().any(|p| names(&detail, p, folds_case))
        {
            drop(state);
            self.event(format!("a read meets a planted object: {detail}"));
            return;
        }
        let at = state.events;
        if state.violations.is_empty() {
            state.first_violation = Some(state.trace.len());
        }
        state
            .trace
            .push_back(format!("VIOLATION {invariant}: {detail}"));
        state.violations.push(Violation {
            invariant,
            detail,
            event: at,
        });
    }

    /// Adds a line to the history's trace (the last few are shown on failure).
    pub(super) fn event(&self, line: String) {
        let mut state = self.lock();
        state.events += 1;
        let numbered = format!("#{} t={}ms {line}", state.events, self.clock.now_ms());
        state.trace.push_back(numbered);
    }

    pub(super) fn events(&self) -> u64 {
        self.lock().events
    }

    pub(super) fn violations(&self) -> Vec<Violation> {
        self.lock().violations.clone()
    }

    /// The events up to the first violation (the last [`TRACE_LEN`] of them),
    /// or the last events if none.
    pub(super) fn trace(&self) -> Vec<String> {
        let state = self.lock();
        let end = state
            .first_violation
            .map_or(state.trace.len(), |first| first + 1);
        let shown = std::env::var("MEMO_SIM_TRACE")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(TRACE_LEN);
        let start = end.saturating_sub(shown);
        state.trace.range(start..end).cloned().collect()
    }

    pub(super) fn task_started(&self, id: u64, kind: TaskKind) {
        self.lock().tasks.insert(id, Task { kind });
    }

    /// The task ended or was dropped (its worker crashed): every side effect
    /// it was executing stopped with it.
    pub(super) fn task_ended(&self, id: u64) {
        let mut state = self.lock();
        state.tasks.remove(&id);
        state.after_recheck.remove(&id);
        state.running.retain(|_, running| running.task != id);
    }

    /// The entry `key` of `memo`, in the run incarnation the memo belongs to.
    fn entry(&self, memo: &Memo, key: &str) -> Entry {
        Entry {
            run_id: memo.run_id().clone(),
            incarnation: compat::incarnation_of(memo),
            step: memo.step_number(),
            key: key.to_string(),
        }
    }

    /// The body of the step `memo` belongs to starts (the step's own code,
    /// memoized or not); returns its execution number, for
    /// [`effect_ended`](Self::effect_ended).
    pub(super) fn body_started(&self, memo: &Memo) -> u64 {
        let mut found = Vec::new();
        self.check_lease(memo, "step body", &mut found);
        self.started(memo, None, found)
    }

    /// A side effect for `key` of `memo` starts; returns its execution number.
    fn effect_started(&self, memo: &Memo, key: &str) -> u64 {
        let mut found = Vec::new();
        if let Some(Ok(Some(_))) = compat::committed_entry(&self.objects, memo, key) {
            found.push((
                "a side effect whose memo entry committed never runs again",
                format!(
                    "{:?} by task {}: the entry was already committed",
                    self.entry(memo, key),
                    current_task().unwrap_or(u64::MAX)
                ),
            ));
        }
        self.check_lease(memo, "memoized side effect", &mut found);
        self.started(memo, Some(key), found)
    }

    /// A side effect of the `#[memoized]` call whose body is running starts
    /// for `memo`; returns its execution number. The key is the call's own,
    /// as the memoize engine knows it: a side effect reported outside a
    /// memoized body, or for another memo than the call's, would check
    /// nothing, so it is a violation.
    pub(super) fn call_effect_started(&self, memo: &Memo) -> u64 {
        let call = crate::memoize::engine::current_call();
        let key = match &call {
            Some(call) => {
                let same = call.memo.run_id() == memo.run_id()
                    && call.memo.incarnation() == memo.incarnation()
                    && call.memo.step_number() == memo.step_number();
                if !same {
                    self.violation(
                        "a side effect is reported with its memoized call's memo",
                        format!(
                            "Ledger::side_effect got the memo of {} step {}; the call's memo is {} step {}",
                            memo.run_id(),
                            memo.step_number(),
                            call.memo.run_id(),
                            call.memo.step_number()
                        ),
                    );
                }
                call.key.as_str()
            }
            None => {
                self.violation(
                    "a side effect is reported inside a #[memoized] body",
                    format!(
                        "Ledger::side_effect for {} step {} ran outside any memoized call, so no memo entry can match it",
                        memo.run_id(),
                        memo.step_number()
                    ),
                );
                OUTSIDE
            }
        };
        self.lock()
            .effect_keys
            .insert((memo.step_number(), key.to_string()));
        self.effect_started(memo, key)
    }

    /// After the history: if side effects ran and a memoized call returned
    /// in a step one of them ran in, some caller got a value one of them
    /// committed; else the ledger's keys match no memo entry and the
    /// history checked nothing. (A side effect whose call never returned,
    /// its task dropped in a crash and its run cancelled before the step
    /// ran again, leaves nothing to match: no caller got a value there.)
    pub(super) fn check_effects_matched(&self) {
        let state = self.lock();
        let returned = state.executions.keys().any(|e| {
            state
                .returned_in
                .contains(&(e.run_id.clone(), e.incarnation, e.step))
        });
        let unmatched = returned && !state.matched;
        let effects = state.executions.len();
        drop(state);
        if unmatched {
            self.violation(
                "the ledger's side effects match committed memo entries",
                format!(
                    "{effects} side effect entries ran, and no memoized call ever returned the value of one of them: the side effects are not the memoized calls' own"
                ),
            );
        }
    }

    /// Something of a step starts only while the attempt it belongs to
    /// holds the run's lease, as the store records it: the run is this
    /// incarnation, running, leased to this attempt until later than now
    /// (less the clock skew a process may have: one behind reads its lease
    /// live that long after it expired). The attempt checks its lease with
    /// no await before a body starts, so this holds at the very start
    /// whatever the attempt went through.
    fn check_lease(&self, memo: &Memo, what: &str, found: &mut Vec<(&'static str, String)>) {
        let Some(attempt) = compat::attempt_of(memo).filter(|_| self.check_bodies) else {
            return;
        };
        let Some(Ok(fresh)) = fresh_run(&self.objects, memo.run_id()) else {
            return;
        };
        let now_ms = self.clock.now_ms();
        let earliest_ms = now_ms.saturating_sub(self.clock_skew_ms());
        let held = fresh.as_ref().is_some_and(|run| {
            run.incarnation == memo.incarnation()
                && run.status == crate::runtime_store::RunStatus::Running
                && run
                    .lease
                    .as_ref()
                    .is_some_and(|lease| lease.attempt == attempt && lease.is_live_at(earliest_ms))
        });
        if !held {
            found.push((
                "a step body starts only under a live lease",
                format!(
                    "task {} started a {what} of {} step {} as attempt {attempt} at {now_ms} ms; the store has {:?}",
                    current_task().unwrap_or(u64::MAX),
                    memo.run_id(),
                    memo.step_number(),
                    fresh.map(|run| (run.incarnation == memo.incarnation(), run.status, run.lease)),
                ),
            ));
        }
    }

    /// Records a start of a body (`key` `None`) or a side effect, checking
    /// that no other live attempt runs anything of the same step.
    fn started(
        &self,
        memo: &Memo,
        key: Option<&str>,
        mut found: Vec<(&'static str, String)>,
    ) -> u64 {
        let now_ms = self.clock.now_ms();
        let mut state = self.lock();
        let entry = self.entry(memo, key.unwrap_or(BODY));
        let number = state.next_execution;
        state.next_execution += 1;
        let task = current_task().unwrap_or(u64::MAX);
        // Without body checks, only side effects are checked against each
        // other (bodies are still recorded, as the frame of their effects).
        let checked = |entry: &Entry| entry.key != BODY || self.check_bodies;
        let against = state
            .running
            .values()
            .filter(|running| checked(&entry) && checked(&running.entry));
        for running in against {
            let same_step = running.entry.run_id == entry.run_id
                && running.entry.incarnation == entry.incarnation
                && running.entry.step == entry.step;
            // With skewed clocks another process may take the lease over
            // as early as twice the skew before it expires by the holder's
            // clock (it runs ahead, the holder behind): counted live that
            // much shorter, as the durability guide sizes a lease.
            let live_ms = self.lease_ms.saturating_sub(2 * state.skew_ms);
            let lease_live = now_ms.saturating_sub(running.started_ms) < live_ms;
            if same_step && running.task != task && lease_live {
                found.push((
                    "no two live attempts of one run both run a step body",
                    format!(
                        "task {task} started execution #{number} of {entry:?} while task {} is still executing {:?}",
                        running.task, running.entry
                    ),
                ));
            }
        }
        if key.is_some() {
            *state.executions.entry(entry.clone()).or_default() += 1;
        }
        state.running.insert(
            number,
            Running {
                task,
                entry,
                started_ms: now_ms,
            },
        );
        drop(state);
        for (invariant, detail) in found {
            self.violation(invariant, detail);
        }
        number
    }

    pub(super) fn effect_ended(&self, number: u64) {
        self.lock().running.remove(&number);
    }

    /// A caller of `key` in `memo` got `value` (encoded): `explicit` if the
    /// workflow reported it ([`Ledger::observed`](super::Ledger::observed)),
    /// else a `#[memoized]` call returned it. Only the values of keys the
    /// ledger saw a side effect for must come from an execution.
    pub(super) fn observed(&self, memo: &Memo, key: &str, value: Vec<u8>, explicit: bool) {
        let mut state = self.lock();
        let entry = self.entry(memo, key);
        let mut found = Vec::new();
        let executed = state.executions.contains_key(&entry);
        state.matched |= executed;
        state
            .returned_in
            .insert((entry.run_id.clone(), entry.incarnation, entry.step));
        let effect_key = state.effect_keys.contains(&(entry.step, entry.key.clone()));
        if !executed && (explicit || effect_key) {
            found.push((
                "a reused run id shares nothing with the earlier run",
                format!(
                    "a caller of {entry:?} got a value no execution of this run incarnation produced"
                ),
            ));
        }
        let task = current_task().unwrap_or(u64::MAX);
        match state.observed.get(&entry) {
            Some((first, by)) if *first != value => found.push((
                "every caller of a key sees one value",
                format!(
                    "callers of {entry:?} saw different values: task {by} got {}, task {task} got {}",
                    String::from_utf8_lossy(first),
                    String::from_utf8_lossy(&value)
                ),
            )),
            Some(_) => {}
            None => {
                state.observed.insert(entry, (value, task));
            }
        }
        drop(state);
        for (invariant, detail) in found {
            self.violation(invariant, detail);
        }
    }

    /// A seeded coin flip for the workflow's own randomness.
    pub(super) fn chance(&self, p: f64) -> bool {
        self.lock().rng.random_bool(p.clamp(0.0, 1.0))
    }

    /// A seeded number in `0..n` for the workflow's own randomness.
    pub(super) fn below(&self, n: u32) -> u32 {
        if n == 0 {
            return 0;
        }
        self.lock().rng.random_range(0..n)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use futures::FutureExt;

    use super::Checker;
    use crate::clock::ManualClock;
    use crate::layout::Layout;
    use crate::run_id::RunId;
    use crate::runtime_store::{
        Commit, NewRun, ObjectStoreRuntimeStore, RunRecord, RuntimeStore, StatusChange,
    };
    use crate::testing::sim::compat::PREFIX;
    use crate::testing::sim::stores::Shared;

    /// Runs `future`, which completes at once over `InMemory`.
    pub(super) fn now<T>(future: impl Future<Output = T>) -> T {
        future.now_or_never().expect("completes at once")
    }

    /// A checker over a new `InMemory` store.
    pub(super) fn checker() -> (Shared, Checker) {
        let objects: Shared = Arc::new(object_store::memory::InMemory::new());
        let clock = Arc::new(ManualClock::new(0));
        let checker = Checker::new(Arc::clone(&objects), clock, 0, 1, 1, false);
        (objects, checker)
    }

    /// A [`checker`], a run store over its objects, and run `id` created in
    /// it (workflow `w`, an empty input).
    pub(super) fn created_run(
        id: &str,
    ) -> (Shared, Checker, ObjectStoreRuntimeStore, RunId, RunRecord) {
        let (objects, checker) = self::checker();
        let store = ObjectStoreRuntimeStore::new(Arc::clone(&objects), PREFIX);
        let run_id = RunId::new(id).unwrap();
        let created = now(store.create_run(NewRun {
            run_id: run_id.clone(),
            workflow: "w".into(),
            input: Bytes::new(),
            created_at_ms: 0,
            workflow_version: None,
        }))
        .unwrap();
        (objects, checker, store, run_id, created)
    }

    /// Seed 620 of the deployment world: a worker's commit of a start lands,
    /// the worker stops before it is told, and meanwhile the run is taken
    /// over, ends and is deleted. The commit was durable (the run moved on
    /// from it); only its report comes after the deletion, and is checked
    /// against the run as the deletion found it, not as missing.
    #[test]
    fn a_commit_reported_after_its_run_ended_and_was_deleted_is_checked_against_the_deleted_run() {
        let (_, checker, store, run_id, created) = created_run("order-620");
        let start = |attempt| Commit::status(StatusChange::start_attempt(attempt), 1);
        let told: RunRecord = now(store.atomic_apply(&run_id, start(1))).unwrap();
        now(store.atomic_apply(&run_id, start(2))).unwrap();
        let completed = StatusChange::Completed {
            output: Bytes::from_static(b"done"),
        };
        now(store.atomic_apply(&run_id, Commit::status(completed, 2))).unwrap();
        // The deletion takes the record first: the checker sees it go.
        let record = Layout::new(PREFIX).incarnation_record(&run_id, created.incarnation);
        checker.deleting(&record);
        assert!(now(store.delete_run(&run_id, created.incarnation)).unwrap());

        checker.acknowledged_commit(&run_id, &start(1), &told);
        assert!(
            checker.violations().is_empty(),
            "{:?}",
            checker.violations()
        );

        // A commit its incarnation never held is still a violation, deleted
        // or not: here an attempt the deleted run never started.
        let mut never = told.clone();
        never.attempts = 3;
        checker.acknowledged_commit(&run_id, &start(3), &never);
        assert_eq!(checker.violations().len(), 1, "{:?}", checker.violations());
    }

    /// Seed 7614 of the worker-loops world (at `d492294`): a side effect
    /// ran in a memoized call whose task a crash dropped, and the run was
    /// cancelled before that step ran again, so no caller got a value in
    /// that step: nothing to match, and no violation. A caller that then
    /// gets a value in that step under another key is the ledger wired to
    /// the wrong keys, which the check is for.
    #[test]
    fn a_side_effect_whose_call_never_returned_leaves_nothing_to_match() {
        use crate::MemoStore;
        use crate::run_id::Incarnation;
        let (objects, checker) = self::checker();
        let run_id = RunId::new("sim-3").unwrap();
        let memo = MemoStore::new(objects, PREFIX).memo_for(&run_id, Incarnation::from_u64(7), 1);
        let effect = checker.effect_started(&memo, "aa");
        checker.effect_ended(effect);
        checker.check_effects_matched();
        assert!(
            checker.violations().is_empty(),
            "{:?}",
            checker.violations()
        );

        checker.observed(&memo, "bb", b"sent".to_vec(), false);
        checker.check_effects_matched();
        let violations = checker.violations();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(
            violations[0].invariant,
            "the ledger's side effects match committed memo entries"
        );

        // Its own key matched: the wiring is right.
        checker.observed(&memo, "aa", b"sent".to_vec(), false);
        let before = checker.violations().len();
        checker.check_effects_matched();
        assert_eq!(checker.violations().len(), before);
    }

    /// Seeds 6061 and 9749 of the deployment world: on a backend that folds
    /// case, a huge object is planted at a status hint's path taken from a
    /// listing (`running`, folded), and memo refuses the hint naming it as
    /// memo spells it (`Running`): the read met the plant, and is no
    /// violation. On a backend that keeps case, the two paths are two
    /// objects, and the read is still one.
    #[test]
    fn a_read_naming_a_plant_in_other_case_meets_it_only_where_the_backend_folds_case() {
        use super::CORRUPT_READ;
        let planted = "sim/runs-by-status/running/sim-3.00000000000000ab";
        let read = "load_run: corrupt object at sim/runs-by-status/Running/sim-3.00000000000000ab: \
                    larger than the limit";
        let checker = |folds_case: bool| {
            let checker = Checker::for_test();
            if folds_case {
                checker.set_folds_case();
            }
            checker.set_planted(planted, true);
            checker.violation(CORRUPT_READ, read.to_string());
            checker
        };
        let folding = checker(true);
        assert!(
            folding.violations().is_empty(),
            "{:?}",
            folding.violations()
        );
        // Folded, a path that merely begins with the planted one is still
        // another object.
        folding.violation(
            CORRUPT_READ,
            read.replace(".00000000000000ab", ".00000000000000abc"),
        );
        assert_eq!(folding.violations().len(), 1, "{:?}", folding.violations());
        assert_eq!(checker(false).violations().len(), 1);
    }
}
