//! What a [`FaultInjectingStore`] injects: the kinds of request, the faults,
//! the rules that choose them, and the error a fault reports.

use std::fmt;
use std::sync::Arc;

use object_store::path::Path;
use rand::RngExt;
use rand::rngs::StdRng;

use super::STORE;

#[cfg(doc)]
use super::FaultInjectingStore;

/// The kind of request a [`FaultRule`] targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestKind {
    /// `put_opts` in `PutMode::Overwrite` or `PutMode::Update` (`ObjectStoreExt::put`).
    Put,
    /// `put_opts` in `PutMode::Create`: a write-once create.
    Create,
    /// `put_multipart_opts`: starting a multipart upload.
    Multipart,
    /// `get_opts` without `head`, and `get_ranges`.
    Get,
    /// `get_opts` with `head` (`ObjectStoreExt::head`).
    Head,
    /// One path of a `delete_stream` (`ObjectStoreExt::delete` is a stream of one).
    Delete,
    /// `list`, `list_with_offset` and `list_with_delimiter`; the path is the prefix.
    List,
    /// `copy_opts` in either mode; the path is the destination.
    Copy,
    /// `rename_opts` in either mode; the path is the destination.
    Rename,
}

impl RequestKind {
    /// Every kind, for rules that should cover all requests.
    pub const ALL: [RequestKind; 9] = [
        RequestKind::Put,
        RequestKind::Create,
        RequestKind::Multipart,
        RequestKind::Get,
        RequestKind::Head,
        RequestKind::Delete,
        RequestKind::List,
        RequestKind::Copy,
        RequestKind::Rename,
    ];
}

/// When an injected failure happens, relative to the request's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The request fails without reaching the wrapped store: nothing changes.
    FailBefore,
    /// The wrapped store applies the request, then the caller gets an error:
    /// a lost acknowledgement. A read's result is discarded; a listing yields
    /// what the wrapped store lists and then the error.
    FailAfter,
}

/// The error an injected fault reports, as the `source` of an
/// [`object_store::Error::Generic`] whose `store` is `"FaultInjectingStore"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedFault {
    /// The kind of the failed request.
    pub kind: RequestKind,
    /// Whether the request was applied before it failed.
    pub fault: Fault,
    /// The path the request was about (see [`RequestKind`] for which one).
    pub path: Path,
}

impl InjectedFault {
    /// Finds an injected fault in `error`'s chain of sources, so a test can
    /// tell an injected failure from a real one, however deeply it is wrapped
    /// (in an [`object_store::Error`] or in memo's [`Error`](crate::Error)).
    ///
    /// # Example
    ///
    /// ```
    /// use memo_runtime::object_store::{memory::InMemory, path::Path, ObjectStoreExt};
    /// use memo_runtime::testing::{Fault, FaultInjectingStore, FaultRule, InjectedFault, RequestKind};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let store = FaultInjectingStore::new(InMemory::new());
    /// store.inject(FaultRule::fail_after(RequestKind::Put));
    /// let error = store.put(&Path::from("a"), "1".into()).await.unwrap_err();
    /// let fault = InjectedFault::find(&error).expect("an injected fault");
    /// assert_eq!(fault.fault, Fault::FailAfter);
    /// assert_eq!(fault.path, Path::from("a"));
    /// # }
    /// ```
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a InjectedFault> {
        std::iter::successors(Some(error), |e| e.source()).find_map(|e| e.downcast_ref())
    }

    pub(super) fn into_error(self) -> object_store::Error {
        object_store::Error::Generic {
            store: STORE,
            source: Box::new(self),
        }
    }
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let when = match self.fault {
            Fault::FailBefore => "failed before it was applied",
            Fault::FailAfter => "was applied, then reported as failed",
        };
        write!(
            f,
            "injected fault: {:?} at {:?} {when}",
            self.kind,
            self.path.as_ref()
        )
    }
}

impl std::error::Error for InjectedFault {}

/// Accepts the paths a [`FaultRule`] fires on.
type PathFilter = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// Which requests fail, and how: built with [`FaultRule::fail_before`] or
/// [`FaultRule::fail_after`] and narrowed with the builder methods, then
/// given to [`FaultInjectingStore::inject`].
///
/// A rule fires on every request of its kind whose path it accepts, except
/// the first [`skip`](Self::skip)ped ones, at most [`times`](Self::times)
/// times, each with its [`probability`](Self::with_probability).
#[derive(Clone)]
pub struct FaultRule {
    kind: RequestKind,
    fault: Fault,
    paths: Option<PathFilter>,
    skip: u64,
    times: Option<u64>,
    probability: Option<f64>,
}

impl FaultRule {
    /// A rule that makes every request of `kind` fail as `fault` says.
    pub fn new(kind: RequestKind, fault: Fault) -> Self {
        FaultRule {
            kind,
            fault,
            paths: None,
            skip: 0,
            times: None,
            probability: None,
        }
    }

    /// A rule that makes every request of `kind` fail before it is applied.
    pub fn fail_before(kind: RequestKind) -> Self {
        Self::new(kind, Fault::FailBefore)
    }

    /// A rule that lets every request of `kind` be applied and then reports
    /// it as failed.
    pub fn fail_after(kind: RequestKind) -> Self {
        Self::new(kind, Fault::FailAfter)
    }

    /// Fires only on paths at or below `prefix` (segment-wise: `a/b` is below
    /// `a`, `ab` is not). Replaces an earlier path filter.
    #[must_use]
    pub fn at_prefix(self, prefix: impl Into<Path>) -> Self {
        let prefix = prefix.into();
        self.matching(move |path| path.prefix_matches(&prefix))
    }

    /// Fires only on paths for which `accepts` returns true. Replaces an
    /// earlier path filter.
    #[must_use]
    pub fn matching(mut self, accepts: impl Fn(&Path) -> bool + Send + Sync + 'static) -> Self {
        self.paths = Some(Arc::new(accepts));
        self
    }

    /// Lets the first `n` requests the rule would fire on through.
    #[must_use]
    pub fn skip(mut self, n: u64) -> Self {
        self.skip = n;
        self
    }

    /// Fires at most `n` times, then is removed.
    #[must_use]
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    /// Fires on each request with probability `p`, drawn from the store's
    /// seeded generator (see [`FaultInjectingStore::with_seed`]).
    ///
    /// # Panics
    ///
    /// If `p` is not within `0.0..=1.0`.
    #[must_use]
    pub fn with_probability(mut self, p: f64) -> Self {
        assert!(
            (0.0..=1.0).contains(&p),
            "fault probability {p} is not within 0.0..=1.0"
        );
        self.probability = Some(p);
        self
    }

    fn accepts(&self, kind: RequestKind, path: &Path) -> bool {
        self.kind == kind && self.paths.as_ref().is_none_or(|accepts| accepts(path))
    }
}

impl fmt::Debug for FaultRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultRule")
            .field("kind", &self.kind)
            .field("fault", &self.fault)
            .field("filtered", &self.paths.is_some())
            .field("skip", &self.skip)
            .field("times", &self.times)
            .field("probability", &self.probability)
            .finish()
    }
}

/// The mutable part of a [`FaultInjectingStore`], shared with the streams it
/// returns (a `delete_stream` decides per path, as the paths flow).
#[derive(Debug)]
pub(super) struct Faults {
    pub(super) enabled: bool,
    pub(super) rules: Vec<FaultRule>,
    pub(super) rng: StdRng,
    pub(super) injected: u64,
}

impl Faults {
    /// The fault to inject into this request, if any. Rules are tried in the
    /// order they were injected; the first that fires wins.
    pub(super) fn decide(&mut self, kind: RequestKind, path: &Path) -> Option<Fault> {
        if !self.enabled {
            return None;
        }
        let mut fired = None;
        for (index, rule) in self.rules.iter_mut().enumerate() {
            if !rule.accepts(kind, path) || rule.times == Some(0) {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            if let Some(p) = rule.probability
                && !self.rng.random_bool(p)
            {
                continue;
            }
            if let Some(times) = &mut rule.times {
                *times -= 1;
            }
            fired = Some((index, rule.fault));
            break;
        }
        let (index, fault) = fired?;
        if self.rules[index].times == Some(0) {
            self.rules.remove(index);
        }
        self.injected += 1;
        Some(fault)
    }
}
