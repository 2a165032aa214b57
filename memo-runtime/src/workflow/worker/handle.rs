//! A spawned [`Worker`]: its polling loop and the [`WorkerHandle`] that
//! stops it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;

use super::{WakeReport, Worker};
use crate::retention::SweeperHandle;

impl Worker {
    /// Polls in a Tokio task until [`WorkerHandle::shutdown`], and runs the
    /// retention sweeper every
    /// [`sweep_interval`](super::WorkerBuilder::sweep_interval). It keeps up
    /// to [`concurrency`](super::WorkerBuilder::concurrency) runs going: a
    /// run [submitted](Worker::submit) to it starts as soon as one of those
    /// places is free, without listing the due-run index; while one is free
    /// it lists the index every
    /// [`poll_interval`](super::WorkerBuilder::poll_interval) (with
    /// jitter; less often while idle, with an
    /// [`idle_poll_interval`](super::WorkerBuilder::idle_poll_interval)),
    /// at once again after a full
    /// [`poll_batch`](super::WorkerBuilder::poll_batch), and at once after
    /// its runtime made a run due now (a [signal](crate::workflow::Runtime::signal)
    /// sent from this process). A run it took waits
    /// for a place in the order taken, and a slow run holds only its own
    /// place. A run it is waking is not taken again by its later polls.
    ///
    /// Dropping the handle detaches the task: it polls until the Tokio
    /// runtime shuts down.
    pub fn spawn(&self) -> WorkerHandle {
        let (stop, stop_rx) = watch::channel(false);
        let sweeper = self
            .inner
            .sweep_interval
            .map(|interval| self.inner.runtime.retention_sweeper().spawn(interval));
        let detached = stop.clone();
        let worker = self.clone();
        // Counted from here, so that a run submitted as soon as this
        // returns is the loop's to start; uncounted once it stops polling,
        // after which a submit is due at once for every worker (one queued
        // and not taken by then is due for them a lease after its submit).
        let polling = Polling::start(self);
        let task = tokio::spawn(async move {
            let report = worker.poll_until_stopped(stop_rx).await;
            drop(polling);
            drop(detached);
            report
        });
        WorkerHandle {
            worker: self.clone(),
            stop,
            task,
            sweeper,
        }
    }
}

/// One spawned loop of a worker, counted while it polls (also when its
/// task is aborted or panics: the count goes down as the task is dropped).
/// The simulator's worker processes that stand for a spawned loop hold one
/// for their life, and poll in its place.
pub(crate) struct Polling(Worker);

impl Polling {
    pub(crate) fn start(worker: &Worker) -> Polling {
        worker.inner.loops.fetch_add(1, Ordering::AcqRel);
        Polling(worker.clone())
    }
}

impl Drop for Polling {
    fn drop(&mut self) {
        self.0.inner.loops.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A spawned [`Worker`]; stop it with [`shutdown`](WorkerHandle::shutdown).
#[derive(Debug)]
pub struct WorkerHandle {
    worker: Worker,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<WakeReport>,
    sweeper: Option<SweeperHandle>,
}

impl WorkerHandle {
    /// The worker, to [`submit`](Worker::submit) runs to.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// Stops the worker gracefully: it takes no more work, and the
    /// attempts it is running stop at their next step boundary or wait
    /// (their runs stay open, their leases released, their due entries in
    /// the index), within `deadline`. An attempt still running then is
    /// dropped where it is, as if its process had died: its lease expires
    /// and another worker takes its run over. Returns what the worker's
    /// polls did.
    ///
    /// While it stops, every attempt of the worker's
    /// [`Runtime`](crate::workflow::Runtime) (and of its clones) stops at its next step boundary:
    /// give a worker a runtime of its own.
    pub async fn shutdown(mut self, deadline: Duration) -> WakeReport {
        let _ = self.stop.send(true);
        let shared = &self.worker.inner.runtime.shared;
        shared.draining.store(true, Ordering::Release);
        let report = match tokio::time::timeout(deadline, &mut self.task).await {
            Ok(Ok(report)) => report,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "the worker's task failed");
                WakeReport::default()
            }
            Err(_) => {
                self.task.abort();
                tracing::warn!(
                    "the worker did not stop within its deadline; its attempts were dropped"
                );
                WakeReport::default()
            }
        };
        if let Some(sweeper) = self.sweeper.take() {
            sweeper.shutdown().await;
        }
        shared.draining.store(false, Ordering::Release);
        report
    }
}
