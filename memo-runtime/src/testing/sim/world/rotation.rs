//! A key rotated across the fleet in the middle of a history
//! ([`Simulation::key_rotation`](crate::testing::sim::Simulation::key_rotation)),
//! as the encryption guide says to: the operator changes the key file
//! (version 2 staged, then promoted, then version 1 retired), and the
//! processes restart onto it one by one, a deploy's restart each (its
//! attempts dropped, as a crash drops them). The key file changes again
//! only once every process runs it. Before retiring version 1 the operator
//! checks what still needs it: with data keys, a rewrap (`memoctl rewrap`)
//! that must report no key written meanwhile; with a store keyring, a scan
//! of the store (`memoctl keys`) that must find no object sealed with it.
//! A history that turns encryption on goes through the same steps (no key,
//! the key staged, promoted with `accept_plaintext`, `accept_plaintext`
//! off), and turns `accept_plaintext` off once a scan counts no plaintext
//! value.
//!
//! What breaks: a read that cannot open what another process wrote (a
//! corrupt read: a key written with before every process could read it, a
//! version retired while something still needed it), and, at the end of a
//! history that retired version 1, a data key still wrapped with it or an
//! object still sealed with it (or, turning encryption on, a value still
//! in plaintext).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{OPERATOR, Outcome, World};
use crate::seal::KeyUsage;
use crate::testing::sim::checker::TaskKind;
use crate::testing::sim::compat::PREFIX;
use crate::testing::sim::sealed::{KeyFile, Sealing};
use crate::testing::sim::stores::Preemptible;
use crate::testing::sim::{Event, Ledger};
use crate::workflow::{Workflow, WorkflowFn};

/// The chance, per scheduler step, of the rotation's next step (a process
/// restarting onto the key file, the key file changing, the operator's
/// check), with key rotation: some 40 steps in CI's histories of 1,000
/// polls, where a whole rotation takes about 20.
pub(super) const ROLLOUT_RATE: f64 = 0.04;

/// Where the operator's check before retiring version 1 stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Check {
    /// Not run since every process was promoted (or its last run was not
    /// clear).
    #[default]
    NotRun,
    /// Running, on the operator's process.
    Running,
    /// Nothing needs version 1 any more: it may be retired.
    Clear,
}

/// A key rotation's state beside the key file itself (which the history's
/// [`Sealing`] holds).
#[derive(Debug, Default)]
pub(super) struct Rotation {
    /// The operator's check before retiring version 1, shared with the
    /// task that runs it.
    check: Rc<Cell<Check>>,
}

/// A process a rollout restarts.
enum Process {
    Worker(usize),
    /// The operator's processes: the operator and the one with the wrong
    /// runtime-store prefix (their tasks share [`OPERATOR`]).
    Operator,
    /// The long-lived reader.
    Reader,
}

impl<'w, I, O, Mk, F> World<'w, I, O, Mk, F>
where
    I: Serialize + DeserializeOwned + Clone + 'w,
    O: Serialize + DeserializeOwned + 'w,
    Mk: Fn(Ledger) -> Workflow<F>,
    F: WorkflowFn<I, Output = O> + 'w,
{
    /// The rotation's next step: the next process not on the key file
    /// restarts onto it; once every process runs it, the operator changes
    /// it (retiring version 1 only once its check came back clear).
    pub(super) fn key_rollout_step(&mut self) {
        let Some(sealing) = self.sealing.clone().filter(Sealing::rotates) else {
            return;
        };
        let file = sealing.key_file();
        if let Some(process) = self.behind(file) {
            self.restart_on_key_file(process, file);
            return;
        }
        match (file, self.rotation.check.get()) {
            (KeyFile::Promoted, Check::NotRun) => self.check_old_version(&sealing),
            (KeyFile::Promoted, Check::Running) => {}
            (KeyFile::Promoted, Check::Clear) => self.change_key_file(&sealing, KeyFile::Retired),
            (file, _) => {
                if let Some(next) = file.next() {
                    self.change_key_file(&sealing, next);
                }
            }
        }
    }

    /// A process that runs a key file older than `file`, if any.
    fn behind(&self, file: KeyFile) -> Option<Process> {
        let behind = |started: Option<KeyFile>| started.is_some_and(|s| s < file);
        if let Some(worker) =
            (self.workers.iter()).position(|w| w.as_ref().is_some_and(|w| behind(w.key_file)))
        {
            return Some(Process::Worker(worker));
        }
        if [&self.operator, &self.misconfigured]
            .into_iter()
            .flatten()
            .any(|process| behind(process.key_file))
        {
            return Some(Process::Operator);
        }
        (self.reader.as_ref())
            .and_then(|reader| behind(reader.key_file()).then_some(Process::Reader))
    }

    fn restart_on_key_file(&mut self, process: Process, file: KeyFile) {
        let faulty = self.config.has(Event::StoreFault);
        match process {
            Process::Worker(worker) => self.restart_for(
                worker,
                format!("key rollout: worker {worker} restarts on the key file {file:?}"),
            ),
            Process::Operator => {
                self.stop_operator();
                self.checker.event(format!(
                    "key rollout: the operator restarts on the key file {file:?}"
                ));
                if self.operator.is_some() {
                    self.operator = Some(self.start_operator(faulty));
                }
                if self.misconfigured.is_some() {
                    self.misconfigured = Some(self.start_misconfigured());
                }
            }
            Process::Reader => {
                if let Some(reader) = &mut self.reader {
                    reader.restart();
                }
                self.checker.event(format!(
                    "key rollout: the long-lived reader restarts on the key file {file:?}"
                ));
            }
        }
    }

    /// The operator's processes stop where they are: their tasks are
    /// dropped (a check under way with them: it runs again).
    fn stop_operator(&mut self) {
        // Counted as `live_faults` counts them (the operator's, not the
        // misconfigured one's).
        if let Some(operator) = &self.operator {
            self.faults += operator.faults.faults_injected();
        }
        self.drop_tasks_of(OPERATOR);
        if self.rotation.check.get() == Check::Running {
            self.rotation.check.set(Check::NotRun);
        }
    }

    fn change_key_file(&mut self, sealing: &Sealing, file: KeyFile) {
        sealing.set_key_file(file);
        self.checker
            .event(format!("key rollout: the key file is now {file:?}"));
    }

    /// The operator checks, as the guide says, whether anything still
    /// needs version 1, every process being promoted: a rewrap of the data
    /// keys that reports none written meanwhile, or a scan of the store
    /// that finds no object sealed with version 1. Turning encryption on,
    /// whether any value is still stored in plaintext: a scan that counts
    /// none.
    fn check_old_version(&mut self, sealing: &Sealing) {
        let check = Rc::clone(&self.rotation.check);
        check.set(Check::Running);
        let checker = self.checker.clone();
        let rewrap = sealing.data_keys(true).filter(|_| !sealing.turns_on());
        let turns_on = sealing.turns_on();
        let future: std::pin::Pin<Box<dyn Future<Output = Outcome> + 'w>> = match rewrap {
            Some(keys) => {
                self.checker
                    .event("the operator rewraps the data keys".into());
                Box::pin(async move {
                    let rewrapped = keys.rewrap().await;
                    let clear = matches!(&rewrapped, Ok(report) if report.written_meanwhile == 0);
                    checker.event(format!("the rewrap ends: {rewrapped:?}"));
                    check.set(if clear { Check::Clear } else { Check::NotRun });
                    Outcome::Done(rewrapped.map(drop).map_err(|e| e.to_string()))
                })
            }
            None => {
                self.checker
                    .event("the operator counts the objects by key version".into());
                // Under the foreign objects planted, as the checker reads:
                // a plant's removal puts back the object it hid (sealed
                // with version 1, maybe), which no real store does behind
                // a scan's back.
                let objects: Arc<dyn ObjectStore> = Arc::new(Preemptible {
                    inner: Arc::clone(self.checker.objects()),
                    checker: self.checker.clone(),
                    late_write: None,
                });
                Box::pin(async move {
                    let usage = KeyUsage::scan(objects.as_ref(), &Path::from(PREFIX)).await;
                    let clear = match &usage {
                        Ok(usage) if turns_on => usage.plaintext == 0,
                        Ok(usage) => !usage.by_key_version.contains_key(&1),
                        Err(_) => false,
                    };
                    checker.event(format!("the scan ends: {usage:?}"));
                    check.set(if clear { Check::Clear } else { Check::NotRun });
                    Outcome::Done(usage.map(drop).map_err(|e| e.to_string()))
                })
            }
        };
        self.spawn(OPERATOR, TaskKind::Operator, None, future);
    }

    /// At the end of a sealed history: no value is stored unencrypted
    /// (`KeyUsage::plaintext`; what memo never encrypts is counted apart),
    /// unless the history is turning encryption on and has not turned
    /// `accept_plaintext` off; and if the history retired version 1,
    /// nothing still needs it (no data key wrapped with it, no object
    /// sealed with it).
    pub(super) async fn check_sealed_store(&self) {
        let Some(sealing) = self.sealing.as_ref() else {
            return;
        };
        let retired = sealing.rotates() && sealing.key_file() == KeyFile::Retired;
        let plaintext_left = sealing.turns_on() && !retired;
        let usage = KeyUsage::scan(self.checker.objects().as_ref(), &Path::from(PREFIX)).await;
        match &usage {
            Ok(usage) if usage.plaintext > 0 && !plaintext_left => self.checker.violation(
                "a sealed store holds no value unencrypted",
                format!("{} value(s) stored unencrypted: {usage:?}", usage.plaintext),
            ),
            Ok(_) => {}
            Err(error) => self.checker.violation(
                "a sealed store holds no value unencrypted",
                format!("the store could not be scanned: {error}"),
            ),
        }
        if !retired || sealing.turns_on() {
            return;
        }
        let needing = match sealing.data_keys(false) {
            Some(keys) => keys.kek_versions().await.map(|versions| {
                let old = versions.get(&1).copied().unwrap_or(0);
                (old, "data key(s) wrapped")
            }),
            None => usage.map(|usage| {
                let old = usage.by_key_version.get(&1).copied().unwrap_or(0);
                (old, "object(s) sealed")
            }),
        };
        match needing {
            Ok((0, _)) => {}
            Ok((old, what)) => self.checker.violation(
                "a key version is retired only once nothing needs it",
                format!("{old} {what} with version 1 after it was retired"),
            ),
            Err(error) => self.checker.violation(
                "a key version is retired only once nothing needs it",
                format!("what needs version 1 could not be counted: {error}"),
            ),
        }
    }
}
