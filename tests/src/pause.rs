//! A store that holds one request until the test lets it go: how the tests
//! stage an interleaving of two processes deterministically (a deletion
//! that stalls while a run is created again, a create that stalls while
//! another creator wins).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt};
use memo_runtime::Bytes;
use memo_runtime::object_store::path::Path;
use memo_runtime::object_store::{
    self, GetOptions, GetResult, ObjectMeta, ObjectStore, PutOptions, PutPayload, PutResult,
};
use memo_runtime::testing::forward_object_store;
use tokio::sync::oneshot;

/// Which request a [`Pauses`] store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The first put of an object under the prefix.
    Put,
    /// The first delete of an object under the prefix.
    Delete,
    /// The first listing of a folder under the prefix (from its start or
    /// from an offset): it lists what is there once released, not when it
    /// was asked for.
    List,
    /// The first read of an object under the prefix: it reads what is
    /// there once released.
    Get,
    /// The first conditional update under the prefix that vacates a run
    /// pointer (its payload begins `vacant `): a deletion's, or a creator's
    /// giving its run up. It lands, or is refused, once released.
    Vacate,
}

/// The held request's side of a [`Pause`]: it says it got there, then
/// waits to be released.
type Gate = (oneshot::Sender<()>, oneshot::Receiver<()>);

/// A store that stops the first request of one kind ([`Held`]) under a
/// prefix, tells the test it got there, and goes on once released; every
/// other request goes straight through.
pub struct Pauses {
    inner: Arc<dyn ObjectStore>,
    held: Held,
    prefix: Path,
    gate: Arc<Mutex<Option<Gate>>>,
}

/// The test's side of a [`Pauses`] store.
pub struct Pause {
    /// Fires when the request is held.
    pub reached: oneshot::Receiver<()>,
    /// Sending on it (or dropping it) lets the request through.
    pub release: oneshot::Sender<()>,
}

/// How long [`wait_reached`] waits, in real time, for the held
/// request: far longer than any request of a test takes, so only a request
/// that never comes (a change of what the code sends) reaches it.
pub const REACH_LIMIT: Duration = Duration::from_secs(30);

/// Waits until the held request is made (`reached`, a [`Pause`]'s), and
/// panics, naming `what` (the request the test holds), if it is not within
/// [`REACH_LIMIT`]: a test then fails where it would have waited for ever
/// (the store, and so the sender, stays alive in the code under test). The
/// limit is kept by a thread's sleep, not a tokio timer, so that a test on
/// tokio's paused clock (whose timers fire as soon as every task waits) is
/// not failed by it early.
pub async fn wait_reached(reached: oneshot::Receiver<()>, what: &str) {
    wait_reached_within(reached, what, REACH_LIMIT).await;
}

/// [`wait_reached`] with another limit.
pub async fn wait_reached_within(reached: oneshot::Receiver<()>, what: &str, limit: Duration) {
    let (expired_tx, expired) = oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = expired_tx.send(());
    });
    tokio::select! {
        reached = reached => {
            reached.unwrap_or_else(|_| panic!("{what}: the store holding it was dropped first"));
        }
        _ = expired => panic!("{what}: not made within {limit:?}"),
    }
}

impl Pauses {
    /// A store over `inner` that holds the first `held` request of an
    /// object under `prefix` (the object's own path holds it too).
    pub fn new(inner: Arc<dyn ObjectStore>, held: Held, prefix: Path) -> (Pauses, Pause) {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        let store = Pauses {
            inner,
            held,
            prefix,
            gate: Arc::new(Mutex::new(Some((reached_tx, release_rx)))),
        };
        (store, Pause { reached, release })
    }

    /// The gate if `location` is what this store holds and it has not been
    /// held yet.
    fn take_gate(gate: &Mutex<Option<Gate>>, prefix: &Path, location: &Path) -> Option<Gate> {
        location
            .prefix_matches(prefix)
            .then(|| gate.lock().unwrap().take())
            .flatten()
    }
}

/// Holds the request until the test releases it.
async fn wait_at((reached, release): Gate) {
    let _ = reached.send(());
    let _ = release.await;
}

impl fmt::Debug for Pauses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pauses({:?} under {})", self.held, self.prefix)
    }
}

impl fmt::Display for Pauses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for Pauses {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let vacates = || {
            matches!(opts.mode, object_store::PutMode::Update(_))
                && Bytes::from(payload.clone()).starts_with(b"vacant ")
        };
        if (self.held == Held::Put || (self.held == Held::Vacate && vacates()))
            && let Some(gate) = Pauses::take_gate(&self.gate, &self.prefix, location)
        {
            wait_at(gate).await;
        }
        self.inner.put_opts(location, payload, opts).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        if self.held != Held::Delete {
            return self.inner.delete_stream(locations);
        }
        let (inner, gate, prefix) = (self.inner.clone(), self.gate.clone(), self.prefix.clone());
        locations
            .then(move |location| {
                let (inner, gate, prefix) = (inner.clone(), gate.clone(), prefix.clone());
                async move {
                    let location = location?;
                    if let Some(gate) = Pauses::take_gate(&gate, &prefix, &location) {
                        wait_at(gate).await;
                    }
                    let one = futures::stream::once(async { Ok(location) }).boxed();
                    inner.delete_stream(one).next().await.expect("one result")
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let gate = prefix
            .filter(|_| self.held == Held::List)
            .and_then(|folder| Pauses::take_gate(&self.gate, &self.prefix, folder));
        let Some(gate) = gate else {
            return self.inner.list(prefix);
        };
        let (inner, folder) = (self.inner.clone(), prefix.cloned());
        futures::stream::once(async move {
            wait_at(gate).await;
            inner.list(folder.as_ref())
        })
        .flatten()
        .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let gate = prefix
            .filter(|_| self.held == Held::List)
            .and_then(|folder| Pauses::take_gate(&self.gate, &self.prefix, folder));
        let Some(gate) = gate else {
            return self.inner.list_with_offset(prefix, offset);
        };
        let (inner, folder, offset) = (self.inner.clone(), prefix.cloned(), offset.clone());
        futures::stream::once(async move {
            wait_at(gate).await;
            inner.list_with_offset(folder.as_ref(), &offset)
        })
        .flatten()
        .boxed()
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if self.held == Held::Get
            && let Some(gate) = Pauses::take_gate(&self.gate, &self.prefix, location)
        {
            wait_at(gate).await;
        }
        self.inner.get_opts(location, options).await
    }

    forward_object_store!(self.inner => put_multipart_opts, get_ranges,
        list_with_delimiter, copy_opts, rename_opts);
}
