//! Slow deletes: a delete request held in flight for a while before it is
//! applied, as a slow or retried `DELETE` is, so that a deletion that
//! checked something and then deleted lands long after its check.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, Result as StoreResult};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::forward::forward_object_store;
use crate::testing::sim::Simulation;
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
}

/// Holds a share of delete requests in flight before passing them on.
pub(super) struct SlowDeletes<T> {
    pub(super) inner: T,
    pub(super) share: f64,
    pub(super) rng: Arc<Mutex<StdRng>>,
}

impl<T> SlowDeletes<T> {
    pub(super) fn new(inner: T, share: f64, seed: u64) -> SlowDeletes<T> {
        SlowDeletes {
            inner,
            share,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
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
        locations
            .map(move |location| {
                // Drawn in the paths' order, whatever order they land in.
                let (inner, polls) = (inner.clone(), stall(&rng, share));
                async move {
                    let location = location?;
                    for _ in 0..polls {
                        await_point().await;
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

    forward_object_store!(self.inner => put_opts, put_multipart_opts, get_opts, get_ranges,
        list, list_with_offset, list_with_delimiter, copy_opts, rename_opts);
}
