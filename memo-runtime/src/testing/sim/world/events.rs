//! The random events of a history: deliveries, worker-loop polls and
//! cancellations, signals, clock jumps, sweeps and run-id reuse.

use std::sync::Arc;

use rand::RngExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::runtime_store::RunRecord;
use crate::testing::sim::checker::TaskKind;
use crate::testing::sim::compat::{self, ErrorKind, classify, fresh_run, held_signals};
use crate::testing::sim::loops;
use crate::testing::sim::{Event, Ledger};
use crate::workflow::{Workflow, WorkflowFn};

use super::{LOOP_EVENT_SHARE, OPERATOR, Outcome, World, millis, process_name};

/// The invariant a quiet world's sweeps keep (see `World::quiet_sweeps`).
const RECHECKS_SUCCEED: &str =
    "a sweeper at the workers' prefix reports no failed recheck where none can be cut short";

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    pub(super) fn random_event(&mut self) {
        if self.loops.is_some() && self.rng.random_bool(LOOP_EVENT_SHARE) {
            return self.loop_event();
        }
        let roll = self.rng.random_range(0..100u32);
        let has = |event| self.config.has(event);
        match roll {
            0..50 => self.deliver_random(),
            50..62 if has(Event::Signal) => self.signal_random(),
            62..72 if has(Event::ClockJump) => self.jump_clock(false),
            72..75 if has(Event::ClockJump) => self.jump_clock(true),
            75..83 if has(Event::Sweep) => self.sweep_random(),
            83..90 if has(Event::RunIdReuse) => self.reuse_random(),
            90..100 => self.restart_random(),
            _ => {}
        }
    }

    pub(super) fn random_live_worker(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..self.workers.len())
            .filter(|&w| self.workers[w].is_some())
            .collect();
        (!live.is_empty()).then(|| live[self.rng.random_range(0..live.len())])
    }

    pub(super) fn busy(&self, run: usize) -> bool {
        self.tasks
            .iter()
            .any(|t| t.run == Some(run) || t.kind == TaskKind::Recover)
    }

    pub(super) fn deliver_random(&mut self) {
        if self.runs.is_empty() || self.tasks.len() >= 4 * self.workers.len() {
            return;
        }
        let run = self.rng.random_range(0..self.runs.len());
        if !self.config.has(Event::ConcurrentDelivery) && self.busy(run) {
            return;
        }
        if let Some(worker) = self.random_live_worker() {
            self.deliver(worker, run);
        }
    }

    pub(super) fn deliver(&mut self, worker: usize, run: usize) {
        if self.loops.is_some() {
            return self.submit(worker, run);
        }
        let runtime = self.workers[worker]
            .as_ref()
            .expect("a live worker")
            .runtime
            .clone();
        let slot = &mut self.runs[run];
        slot.delivered = true;
        let input = match &self.sim.redeliver {
            Some(redeliver) => redeliver(&slot.input, self.rng.random()),
            None => slot.input.clone(),
        };
        let run_id = slot.run_id.clone();
        self.checker
            .event(format!("deliver {run_id} to worker {worker}"));
        let workflow = self.workflow_of(worker);
        let older = self.older_version_of(worker);
        let delivered = crate::content_key(&input).ok();
        let checker = self.checker.clone();
        let future = async move {
            // A consumer on the new code of a versioned deploy delivers a
            // run to the version it started on (none yet: the new one), as
            // the guide's does.
            let (workflow, read) = match older {
                Some(older) => match runtime.status(&run_id).await {
                    Ok(Some(record)) => {
                        let started_on_older =
                            record.workflow_version.as_deref() == older.version();
                        let chosen = if started_on_older { older } else { workflow };
                        (chosen, Some(record.incarnation))
                    }
                    Ok(None) => (workflow, None),
                    Err(error) => return Outcome::Run(run, Err(error.to_string()), delivered),
                },
                None => (workflow, None),
            };
            let result = runtime.run(&run_id, &input, workflow).await;
            let result = result.map(drop).map_err(|e| e.to_string());
            // Refused for its version although the incarnation it read is
            // still the run's: the delivery chose the wrong version.
            if let (Some(read), Err(error)) = (read, &result)
                && classify(error) == ErrorKind::OtherVersion
                && matches!(fresh_run(checker.objects(), &run_id), Some(Ok(Some(now))) if now.incarnation == read)
            {
                checker.violation(
                    "a delivery on the new code goes to the version its run started on",
                    format!("run {run_id}: {error}"),
                );
            }
            Outcome::Run(run, result, delivered)
        };
        self.spawn(worker, TaskKind::Run, Some(run), Box::pin(future));
    }

    /// With worker loops: a worker polls, or a run is cancelled.
    pub(super) fn loop_event(&mut self) {
        if self.config.has(Event::Cancel) && self.rng.random_bool(0.2) {
            if !self.runs.is_empty() {
                let run = self.rng.random_range(0..self.runs.len());
                if let Some(worker) = self.random_live_worker() {
                    self.cancel(worker, run);
                }
            }
        } else if let Some(worker) = self.random_live_worker() {
            self.poll(worker);
        }
    }

    /// Submits `run`, with its input now, to `worker`'s loop.
    pub(super) fn submit(&mut self, worker: usize, run: usize) {
        let input = self.runs[run].input.clone();
        self.submit_input(worker, run, input);
    }

    /// Submits `run` with `input` to `worker`'s loop, as a caller does (and
    /// does again while it has no answer).
    fn submit_input(&mut self, worker: usize, run: usize, input: I) {
        let loops = if self.on_new_code(worker) {
            &self.new_loops
        } else {
            &self.loops
        };
        let Some(loops) = loops else {
            return;
        };
        let looped = self.workers[worker]
            .as_ref()
            .and_then(|w| w.looped.clone())
            .expect("a live worker with a loop");
        let slot = &mut self.runs[run];
        slot.delivered = true;
        // The input this submission delivers, which a reuse of the id may
        // change in the slot before the submission ends.
        let delivered = crate::content_key(&input).ok();
        if let Some(key) = &delivered {
            slot.unanswered.push((self.next_task, key.clone()));
        }
        let submitted = (loops.submit)(looped, slot.run_id.clone(), input);
        self.checker
            .event(format!("submit {} to worker {worker}", slot.run_id));
        let future = async move {
            let result = submitted.await.map_err(|e| e.to_string());
            Outcome::Submitted(run, result, delivered)
        };
        self.spawn(worker, TaskKind::Run, Some(run), Box::pin(future));
    }

    /// `worker`'s loop polls the due-run index once, unless it is polling:
    /// a loop that counts as spawned may poll twice at once, as the spawned
    /// loop lists the index while it wakes the runs it took (its polls then
    /// claim runs, and skip those the other is waking).
    pub(super) fn poll(&mut self, worker: usize) {
        let polling = self
            .tasks
            .iter()
            .filter(|t| t.kind == TaskKind::Poll && t.worker == worker)
            .count();
        let Some(process) = self.workers[worker].as_ref() else {
            return;
        };
        let Some(looped) = process.looped.clone() else {
            return;
        };
        let at_once = if process.spawned.is_some() { 2 } else { 1 };
        if polling >= at_once {
            return;
        }
        self.checker.event(format!("worker {worker} polls"));
        let skips = Arc::clone(&self.other_version_skips);
        let future = async move {
            let (errors, unknown) = loops::poll(looped).await;
            skips.fetch_add(unknown as u64, std::sync::atomic::Ordering::Relaxed);
            Outcome::Done(if errors.is_empty() {
                Ok(())
            } else {
                Err(errors.join("; "))
            })
        };
        self.spawn(worker, TaskKind::Poll, None, Box::pin(future));
    }

    /// Cancels `run` through `worker`'s runtime.
    pub(super) fn cancel(&mut self, worker: usize, run: usize) {
        let runtime = self.runtime_of(worker);
        let run_id = self.runs[run].run_id.clone();
        self.checker
            .event(format!("cancel {run_id} via worker {worker}"));
        let future = async move { Outcome::Done(loops::cancel(runtime, run_id).await) };
        self.spawn(worker, TaskKind::Cancel, Some(run), Box::pin(future));
    }

    /// With worker loops, the end of a history: faults stop, crashed
    /// workers restart, and then, while the clock moves on a day at a
    /// time, only the workers' polls drive runs; each caller whose
    /// submission got no answer submits its input again, and every open
    /// run that started gets every signal it does not hold yet (recorded
    /// and not yet consumed or dropped), as callers would. A run
    /// submitted and never started gets none: its own wake-up must start
    /// it; nor does a run that holds a signal: that signal's wake-up must
    /// wake it.
    pub(super) async fn settle_with_loops(&mut self) {
        // As the end of a history without loops: the foreign objects go
        // and no worker stays paused, or a run whose pointer another
        // writer still shadows could never end.
        for (path, _) in std::mem::take(&mut self.plants) {
            self.unplant(&path);
        }
        self.checker.event("faults stop".into());
        self.paused_until.fill(0);
        for worker in 0..self.workers.len() {
            match &self.workers[worker] {
                Some(live) => live.faults.set_enabled(false),
                None => {
                    let restarted = self.start_worker(worker, false);
                    self.workers[worker] = Some(restarted);
                    self.checker.event(format!("worker {worker} restarts"));
                }
            }
        }
        self.drain().await;
        if self.config.signal_latency {
            self.check_signalled_runs_woken().await;
        }
        for _ in 0..self.config.liveness_rounds {
            self.clock
                .advance_ms(millis(self.config.lease) + loops::SETTLE_JUMP_MS);
            let open: Vec<usize> = (0..self.runs.len())
                .filter(|&run| self.runs[run].delivered && !self.is_terminal(run))
                .collect();
            if open.is_empty() {
                break;
            }
            for run in open {
                let worker = self.rng.random_range(0..self.workers.len());
                let (created, started) =
                    match fresh_run(self.checker.objects(), &self.runs[run].run_id) {
                        Some(Ok(Some(record))) => (true, record.attempts > 0),
                        _ => (false, false),
                    };
                // Each caller without an answer submits its own input
                // again (not the slot's: the id may have been reused with
                // another input since), one submission per input replacing
                // theirs; and a run never created is submitted.
                let mut keys: Vec<String> = std::mem::take(&mut self.runs[run].unanswered)
                    .into_iter()
                    .map(|(_, key)| key)
                    .collect();
                keys.sort();
                keys.dedup();
                let unanswered: Vec<I> = keys.iter().filter_map(|key| self.input_of(key)).collect();
                if unanswered.is_empty() && !created {
                    self.submit(worker, run);
                }
                for input in unanswered {
                    self.submit_input(worker, run, input);
                }
                // Only a run that started gets the signals: a signal
                // writes a wake-up due at once, which would start a run
                // whose own wake-up was lost, and hide the loss. And only
                // the signals it does not hold yet, as a caller sends
                // again only what was not acknowledged: a signal it holds
                // must wake it by itself (a wait with no deadline would
                // otherwise wait for good).
                if started {
                    let held = held_signals(self.checker.objects(), &self.runs[run].run_id);
                    for signal in 0..self.sim.signals.len() {
                        if !held.contains(&self.sim.signals[signal].0) {
                            self.send_signal(worker, run, signal);
                        }
                    }
                }
            }
            self.drain().await;
            for _ in 0..loops::SETTLE_POLLS {
                for worker in 0..self.workers.len() {
                    self.poll(worker);
                }
                self.drain().await;
            }
        }
    }

    /// Before the clock moves (each jump, and at the end of a history):
    /// every task ends, the workers poll, and no run may then be
    /// suspended, its lease not live, in a wait for a signal it holds (see
    /// [`Simulation::check_signal_latency`]).
    ///
    /// [`Simulation::check_signal_latency`]: crate::testing::sim::Simulation::check_signal_latency
    pub(super) async fn check_signalled_runs_woken(&mut self) {
        assert!(
            !self.config.has(Event::Crash) && !self.config.has(Event::StoreFault),
            "check_signal_latency needs a world without crashes and store faults"
        );
        self.drain().await;
        for _ in 0..loops::SETTLE_POLLS {
            for worker in 0..self.workers.len() {
                self.poll(worker);
            }
            self.drain().await;
        }
        let now = crate::clock::Clock::now_ms(self.clock.as_ref());
        for slot in &self.runs {
            let Some(Ok(Some(record))) = fresh_run(self.checker.objects(), &slot.run_id) else {
                continue;
            };
            let leased = record.lease.as_ref().is_some_and(|l| l.is_live_at(now));
            if record.status.is_terminal() || leased {
                continue;
            }
            if let Some(signal) =
                compat::waits_for_held_signal(self.checker.objects(), &slot.run_id)
            {
                self.checker.violation(
                    loops::SIGNAL_LATENCY,
                    format!(
                        "run {} (attempt {}) waits for {signal}, which it holds, after every worker polled",
                        slot.run_id, record.attempts
                    ),
                );
            }
        }
    }

    /// The input among the simulation's whose content key is `key`.
    fn input_of(&self, key: &str) -> Option<I> {
        self.sim
            .inputs
            .iter()
            .find(|input| crate::content_key(input).is_ok_and(|k| k == key))
            .cloned()
    }

    pub(super) fn signal_random(&mut self) {
        if self.sim.signals.is_empty() || self.runs.is_empty() {
            return;
        }
        let run = self.rng.random_range(0..self.runs.len());
        let signal = self.rng.random_range(0..self.sim.signals.len());
        if let Some(worker) = self.random_live_worker() {
            self.send_signal(worker, run, signal);
        }
    }

    pub(super) fn send_signal(&mut self, worker: usize, run: usize, signal: usize) {
        let runtime = self.runtime_of(worker);
        let run_id = self.runs[run].run_id.clone();
        let (name, send) = &self.sim.signals[signal];
        let send = Arc::clone(send);
        self.sends += 1;
        let id = format!("sim-signal-{}", self.sends);
        self.checker.event(format!(
            "signal {name} ({id}) to {run_id} via {}",
            process_name(worker)
        ));
        let future = async move {
            let sent = send(runtime, run_id, id).await;
            Outcome::Done(sent.map_err(|e| e.to_string()))
        };
        self.spawn(worker, TaskKind::Signal, None, Box::pin(future));
    }

    pub(super) fn jump_clock(&mut self, past_retention: bool) {
        let ms = if past_retention {
            millis(self.config.retention) + self.rng.random_range(1..3 * 24 * 3_600_000)
        } else {
            self.rng.random_range(1_000..20 * 60_000)
        };
        if self.config.signal_latency {
            // Made once the signalled runs were checked (`World::run`).
            self.jump = Some(ms);
            return;
        }
        self.make_jump(ms);
    }

    pub(super) fn make_jump(&mut self, ms: u64) {
        self.clock.advance_ms(ms);
        self.checker.event(format!("clock jumps {ms} ms"));
    }

    pub(super) fn sweep_random(&mut self) {
        if self.config.sweeper_per_worker {
            // Every worker's sweeper wakes on its own timer; after the same
            // clock jump, they all find the same expired runs at once.
            for worker in 0..self.workers.len() {
                if self.workers[worker].is_some() {
                    self.sweep_on(worker);
                }
            }
            return;
        }
        if self.tasks.iter().any(|t| t.kind == TaskKind::Sweep) {
            return;
        }
        let Some(worker) = self.random_live_worker() else {
            return;
        };
        self.sweep_on(worker);
    }

    /// Whether this world's sweeps can be held to reporting no failed
    /// recheck (see [`RECHECKS_SUCCEED`]).
    fn quiet_sweeps(&self) -> bool {
        let config = self.config;
        !config.has(Event::Crash)
            && !config.has(Event::StoreFault)
            && config.power_loss == 0.0
            && !config.pauses
            && config.slow_deletes == 0.0
            && config.foreign_objects == 0.0
    }

    /// A sweep on `worker` (or the operator), unless one runs there: with a
    /// sweeper in every worker, sweeps of the same runs overlap.
    pub(super) fn sweep_on(&mut self, worker: usize) {
        let busy = self
            .tasks
            .iter()
            .any(|t| t.kind == TaskKind::Sweep && t.worker == worker);
        if busy {
            return;
        }
        // Rechecks of swept runs come due two leases after the sweep (an
        // hour by default), so that they run while stale attempts still
        // write: a recheck may only ever find garbage.
        let recheck_after = self.config.lease.saturating_mul(2);
        let process = if worker == OPERATOR {
            self.operator.as_mut()
        } else {
            self.workers[worker].as_mut()
        };
        let process = process.expect("a live worker");
        let sweeper = (process.sweeper)
            .get_or_insert_with(|| {
                (process.runtime.retention_sweeper_builder())
                    .recheck_after(recheck_after)
                    .build()
            })
            .clone();
        self.checker
            .event(format!("sweep on {}", process_name(worker)));
        // Where no recheck can die between its two deletes or stall in one
        // (no crash, store fault, power loss, pause or slow delete) and
        // nothing foreign stands at a marker's path, a sweeper at the
        // workers' prefix has no reason to report a failed recheck: one is
        // the warning a sweep at another prefix gives (the flake session
        // 49 fixed, two sweepers at one recheck, reported one).
        let checker = self.quiet_sweeps().then(|| self.checker.clone());
        let process = process_name(worker);
        let future = async move {
            let swept = sweeper.sweep_now().await;
            if let (Some(checker), Ok(report)) = (&checker, &swept)
                && report.recheck_failures > 0
            {
                checker.violation(
                    RECHECKS_SUCCEED,
                    format!("a sweep on {process} reports {report:?}"),
                );
            }
            Outcome::Done(swept.map(drop).map_err(|e| e.to_string()))
        };
        self.spawn(worker, TaskKind::Sweep, None, Box::pin(future));
    }

    /// Deletes a terminal run, so that its id can be used again.
    pub(super) fn reuse_random(&mut self) {
        if self.runs.is_empty() {
            return;
        }
        let run = self.rng.random_range(0..self.runs.len());
        let terminal = matches!(
            fresh_run(self.checker.objects(), &self.runs[run].run_id),
            Some(Ok(Some(RunRecord { status, .. }))) if status.is_terminal()
        );
        if !terminal || self.busy(run) && !self.config.has(Event::ConcurrentDelivery) {
            return;
        }
        let Some(worker) = self.random_live_worker() else {
            return;
        };
        let run_id = self.runs[run].run_id.clone();
        // Half the deletions delete the whole run; the others delete only its
        // runtime records, as a user calling `RuntimeStore::delete_run`
        // would, and leave its memo entries for the next run of the id to
        // (never) inherit. No sweep may clear those (it cannot tell them
        // from a run that its runtime store, the wrong one, does not hold),
        // so the last sweep leaves them, and only them.
        let whole = self.rng.random_bool(0.5);
        let how = if whole {
            "RetentionSweeper::delete_run"
        } else {
            "RuntimeStore::delete_run"
        };
        self.checker.event(format!(
            "delete {run_id} on worker {worker} with {how}, to reuse its id"
        ));
        self.spawn_deletion(worker, run, whole);
        // With slow deletes, half the deletions race a second one of the
        // same run, as two sweepers' or an operator's and a sweeper's do:
        // the slower may land its deletes after the id was used again
        // (see `reuse`, which uses it again at once in this world).
        if self.config.slow_deletes > 0.0
            && self.rng.random_bool(0.5)
            && let Some(second) = self.random_live_worker()
        {
            self.checker.event(format!(
                "delete {} on worker {second} too, racing the first",
                self.runs[run].run_id
            ));
            self.spawn_deletion(second, run, whole);
        }
    }

    /// Spawns a deletion of `run` on `worker`: the whole run, or only its
    /// runtime records.
    fn spawn_deletion(&mut self, worker: usize, run: usize, whole: bool) {
        let runtime = self.workers[worker]
            .as_ref()
            .expect("a live worker")
            .runtime
            .clone();
        let run_id = self.runs[run].run_id.clone();
        let deleted_alone = Arc::clone(&self.deleted_alone);
        let unfinished = Arc::clone(&self.unfinished_deletes);
        let checker = self.checker.clone();
        let lease = self.config.lease;
        let future = async move {
            let deleted = if whole {
                runtime
                    .retention_sweeper_builder()
                    .recheck_after(lease.saturating_mul(2))
                    .build()
                    .delete_run(&run_id)
                    .await
            } else {
                let store = runtime.runtime_store().as_ref();
                compat::delete_records(store, &run_id, &deleted_alone, &unfinished, &checker).await
            };
            Outcome::Deleted(run, deleted.map_err(|e| e.to_string()))
        };
        self.spawn(worker, TaskKind::Delete, Some(run), Box::pin(future));
    }
}
