//! Slow deletes: a delete request held in flight for a while before it is
//! applied, as a slow or retried `DELETE` is, so that a deletion that
//! checked something and then deleted lands long after its check.
//!
//! A stalled delete of a run pointer lands, half the time, at the moment
//! another process's conditional create of that pointer finds it taken:
//! between the create and the read of what took it, the one round trip in
//! which seed 9071 of session 42's survey (a second creator's create tried
//! again over a run restorable from its record) broke, 1 seed in 10,000
//! with stalls drawn alone.
//!
//! With [`Simulation::early_pointer_deletes`], such a delete may land just
//! before a creator's create of the pointer instead, while another run's
//! pointer stands there: the create then finds the path free, one round
//! trip earlier than seed 9071's window (session 43).
//!
//! Since a deletion vacates the pointer (a conditional update) rather than
//! deleting it, updates of run pointers are held in flight as deletes are
//! (session 44); the one unconditional delete of a pointer left is a
//! recheck's, of a pointer it marked swept.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    ObjectStore, PutMode, PutOptions, PutPayload, PutResult, Result as StoreResult,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::forward::forward_object_store;
use crate::testing::sim::Simulation;
use crate::testing::sim::compat;
use crate::testing::sim::stores::await_point;

/// How many of its task's polls a slow delete stays in flight, at most.
const MAX_STALL_POLLS: u32 = 60;

impl<I, O, Mk> Simulation<I, O, Mk> {
    /// The share of delete requests (0 to 1) that stay in flight for 5 to
    /// 60 of their task's polls before they are applied, while every other
    /// task goes on: a deletion that read a run's pointer and then deletes
    /// it lands long after its read, as issue 20's item 1 describes ("A's
    /// slower `delete_run`"). In such a world, half the deletions made to
    /// use an id again race a second deletion of the same run, and the id
    /// is used again as soon as the run is gone. Default 0.
    #[must_use]
    pub fn slow_deletes(mut self, share: f64) -> Self {
        self.config.slow_deletes = share.clamp(0.0, 1.0);
        self
    }

    /// With [`slow_deletes`](Self::slow_deletes): a stalled delete of a
    /// run pointer also lands, half the time, just before another
    /// process's conditional create of that pointer (drawn apart, so that
    /// histories in which it does not land stay what they were), the
    /// create held in flight as long as a slow delete first. A creator
    /// whose listing found the id new then creates its run beside one whose
    /// creation was acknowledged after that listing, unless its check after
    /// its record sees the other's record (session 43). Default off.
    #[must_use]
    pub fn early_pointer_deletes(mut self, on: bool) -> Self {
        self.config.early_pointer_deletes = on;
        self
    }
}

/// Holds a share of delete requests in flight before passing them on.
pub(super) struct SlowDeletes<T> {
    pub(super) inner: T,
    pub(super) share: f64,
    pub(super) rng: Arc<Mutex<StdRng>>,
    /// Every process's stalled deletes of run pointers (the world's).
    pub(super) stalled: Stalled,
    /// With [`Simulation::early_pointer_deletes`]: the draws of a landing
    /// before a create.
    pub(super) before: Option<Arc<Mutex<StdRng>>>,
}

/// The run-pointer deletes in flight, every process's: each path, and
/// whether a creator's store landed it already.
pub(super) type Stalled = Arc<Mutex<Vec<(Path, Arc<AtomicBool>)>>>;

impl<T> SlowDeletes<T> {
    pub(super) fn new(inner: T, share: f64, seed: u64, stalled: Stalled) -> SlowDeletes<T> {
        SlowDeletes {
            inner,
            share,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
            stalled,
            before: None,
        }
    }

    /// Lands, with [`Simulation::early_pointer_deletes`], stalled deletes
    /// of run pointers before creates too, drawing from `seed`.
    pub(super) fn landing_before_creates(mut self, seed: u64) -> SlowDeletes<T> {
        self.before = Some(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))));
        self
    }

    /// Takes a stalled delete of `path` out of the world's, if one is in
    /// flight, and (half the time, drawn from `rng`) answers it to land
    /// now.
    fn land_now(&self, path: &Path, rng: &Mutex<StdRng>) -> Option<Arc<AtomicBool>> {
        let mut stalled = self.stalled.lock().unwrap_or_else(PoisonError::into_inner);
        let at = stalled.iter().position(|(p, _)| p == path)?;
        // Drawn only when a delete of the path is in flight, so that
        // other histories stay what they were.
        let now = rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .random_bool(0.5);
        now.then(|| stalled.remove(at).1)
    }
}

impl<T: ObjectStore> SlowDeletes<T> {
    /// Sends the stalled delete of `path` that [`land_now`](Self::land_now)
    /// took (`landed`), after `polls` of this task's polls.
    async fn land(&self, path: &Path, landed: Arc<AtomicBool>, polls: u32) {
        // Claimed before it is sent, so that the stalled request never
        // sends it too.
        landed.store(true, Ordering::Release);
        for _ in 0..polls {
            await_point().await;
        }
        let one = stream::once(std::future::ready(Ok(path.clone()))).boxed();
        let mut deleted = self.inner.delete_stream(one);
        if deleted.next().await.is_none_or(|result| result.is_err()) {
            // Not landed (a fault): put back, to land when its stall ends
            // or at another create; if its request saw the claim while we
            // waited and returned, it never lands, as a delete a fault
            // took.
            landed.store(false, Ordering::Release);
            self.stalled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((path.clone(), landed));
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for SlowDeletes<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlowDeletes")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<T: fmt::Display> fmt::Display for SlowDeletes<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlowDeletes({})", self.inner)
    }
}

/// How many of its task's polls the next delete stays in flight: 0, or,
/// for a `share` of them, 5 to [`MAX_STALL_POLLS`].
fn stall(rng: &Mutex<StdRng>, share: f64) -> u32 {
    let mut rng = rng.lock().unwrap_or_else(PoisonError::into_inner);
    if rng.random_bool(share) {
        rng.random_range(5..=MAX_STALL_POLLS)
    } else {
        0
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore + Clone> ObjectStore for SlowDeletes<T> {
    /// Each path is a delete of its own, stalled or not on its own draw, as
    /// on a store that deletes an object per request (GCS, a local folder):
    /// any path of a batch may land long after the others. (S3 deletes a
    /// batch in one request, all its paths late or none: among the orders
    /// drawn here.)
    fn delete_stream(
        &self,
        locations: BoxStream<'static, StoreResult<Path>>,
    ) -> BoxStream<'static, StoreResult<Path>> {
        if self.share <= 0.0 {
            // No draw: the other worlds' histories stay what they were.
            return self.inner.delete_stream(locations);
        }
        let (inner, rng, share) = (self.inner.clone(), Arc::clone(&self.rng), self.share);
        let stalled = Arc::clone(&self.stalled);
        locations
            .map(move |location| {
                // Drawn in the paths' order, whatever order they land in.
                let (inner, polls) = (inner.clone(), stall(&rng, share));
                let stalled = Arc::clone(&stalled);
                async move {
                    let location = location?;
                    // A run pointer's stalled delete may be landed early by
                    // a creator's store (`put_opts`): it is then done.
                    let landed = (polls > 0 && compat::is_run_pointer(&location)).then(|| {
                        let landed = Arc::new(AtomicBool::new(false));
                        let entry = (location.clone(), Arc::clone(&landed));
                        stalled
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(entry);
                        landed
                    });
                    for _ in 0..polls {
                        if landed.as_ref().is_some_and(|l| l.load(Ordering::Acquire)) {
                            return Ok(location);
                        }
                        await_point().await;
                    }
                    if let Some(landed) = &landed {
                        let mut stalled = stalled.lock().unwrap_or_else(PoisonError::into_inner);
                        if landed.load(Ordering::Acquire) {
                            return Ok(location);
                        }
                        stalled.retain(|(_, l)| !Arc::ptr_eq(l, landed));
                    }
                    let one = stream::once(async { Ok(location) }).boxed();
                    let mut deleted = inner.delete_stream(one);
                    deleted.next().await.expect("one path in, one result out")
                }
            })
            // Ten at once, their results in the paths' order, as
            // object_store's `LocalFileSystem` and GCS delete.
            .buffered(10)
            .boxed()
    }

    /// A conditional create of a run pointer that finds it taken lands, half
    /// the time, a stalled delete of that pointer before it answers: the
    /// creator's read of what took it finds nothing (see the module). With
    /// [`Simulation::early_pointer_deletes`], half the time it lands one
    /// just before the create.
    ///
    /// A conditional update of a run pointer (a deletion vacating it, a
    /// recheck marking it swept, a creator replacing a vacated one) is as
    /// slow as a delete, on the same draws: a deletion's change of the
    /// pointer is an update since pointers are vacated, and lands long
    /// after its read as its delete did. The store judges its condition
    /// when it lands.
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> StoreResult<PutResult> {
        if self.share > 0.0
            && matches!(opts.mode, PutMode::Update(_))
            && compat::is_run_pointer(location)
        {
            for _ in 0..stall(&self.rng, self.share) {
                await_point().await;
            }
        }
        let create = matches!(opts.mode, PutMode::Create);
        if create
            && let Some(before) = &self.before
            && let Some(landed) = self.land_now(location, before)
        {
            // The create is slow too: held as long as a slow delete, while
            // other tasks go on (another creator of the id may create its
            // run meanwhile), and sent just after the delete lands.
            let polls = stall(before, 1.0);
            self.land(location, landed, polls).await;
        }
        let put = self.inner.put_opts(location, payload, opts).await;
        if create
            && self.share > 0.0
            && matches!(put, Err(object_store::Error::AlreadyExists { .. }))
            && let Some(landed) = self.land_now(location, &self.rng)
        {
            self.land(location, landed, 0).await;
        }
        put
    }

    forward_object_store!(self.inner => put_multipart_opts, get_opts, get_ranges,
        list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}
