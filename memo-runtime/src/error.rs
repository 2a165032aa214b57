//! The crate's one error type, its [`ErrorKind`] (what a caller does about
//! an error) and its `Result` alias.

/// A `Result` whose error defaults to memo's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in memo.
///
/// Every variant names *what* failed and *where* (a path, a key, a run id), so
/// a log line alone is enough to find the object involved. What to do about
/// it is [`Error::kind`]: match on the [`ErrorKind`] rather than on the
/// variants, whose number grows.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A string that is not a valid [`RunId`](crate::RunId).
    #[error("invalid run id {input:?}: {reason}")]
    InvalidRunId {
        /// The rejected input, as given.
        input: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// The object store failed a request.
    #[error("object store error at {path}: {source}")]
    Store {
        /// The object path (or prefix) the request was about.
        path: String,
        /// The store's own error, to match on its kind (`NotFound`,
        /// `PermissionDenied`, ...). memo re-exports the `object_store`
        /// it is built with, whose stores its API takes, so this type is
        /// memo's API at that version.
        #[source]
        source: object_store::Error,
    },

    /// The backend cannot create an object only if it is absent, so memo's
    /// write-once guarantee cannot hold on it.
    #[error(
        "the object store does not support conditional puts (PutMode::Create) at {path}; \
         memo never overwrites a committed entry, so it needs a backend that does: \
         use LocalFileSystem, InMemory, GCS, Azure, or S3 with conditional puts enabled \
         (object_store's `S3ConditionalPut::ETagMatch`, the default)"
    )]
    ConditionalPutUnsupported {
        /// The path whose create was refused.
        path: String,
    },

    /// A store URL (or one of its options) names no store memo can open.
    #[error("cannot open a store from {url:?}: {reason}")]
    InvalidStoreUrl {
        /// The URL as given, with any user info and query string replaced by
        /// `***` (see [`redact_store_url`](crate::store::redact_store_url)).
        url: String,
        /// What is wrong with it, or with its options.
        reason: String,
    },

    /// A store URL needs a cloud backend whose cargo feature is off.
    #[error(
        "{url:?} needs memo-runtime's `{feature}` cargo feature; enable it with \
         memo-runtime = {{ version = \"...\", features = [\"{feature}\"] }}"
    )]
    StoreFeatureDisabled {
        /// The URL as given, with any user info and query string replaced by
        /// `***` (see [`redact_store_url`](crate::store::redact_store_url)).
        url: String,
        /// The memo-runtime feature to enable: `aws`, `gcp`, `azure` or
        /// `sqlite`.
        feature: &'static str,
    },

    /// A value could not be serialized (for a content key or for storage).
    #[error("cannot serialize {what}: {source}")]
    Serialization {
        /// What was being serialized.
        what: String,
        /// The serializer's error: an `rmp_serde::encode::Error` for a
        /// stored value, the content-key encoder's own error for a key
        /// input (or the message of the value's `Serialize` impl).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A committed value does not decode as the type the caller asked for.
    #[error("cannot decode {what} stored at {path}: {source}")]
    Decode {
        /// What was being decoded (a function name, a record kind).
        what: String,
        /// The object path of the committed value.
        path: String,
        /// The decoder's error (today an `rmp_serde::decode::Error`, which
        /// can be had with `downcast_ref`; its type is not part of the API).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A stored object failed its envelope check (wrong magic, unknown
    /// version, bad checksum, truncated). It is never treated as a miss.
    #[error("corrupt object at {path}: {reason}")]
    Corrupt {
        /// The object path.
        path: String,
        /// What check failed.
        reason: String,
    },

    /// A value is larger than the configured maximum; nothing was written.
    #[error("value for {key} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The key (or path) the value was for.
        key: String,
        /// The value's size in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },

    /// A workflow replay found a recorded step that differs from the step the
    /// code asks for at that position.
    #[error(
        "non-determinism in run {run_id} at step {sequence}: the history records \
         step {recorded:?} but the workflow now calls step {called:?}"
    )]
    NonDeterminism {
        /// The run being replayed.
        run_id: String,
        /// The step's position in call order (from 0).
        sequence: u64,
        /// The step name in the committed history.
        recorded: String,
        /// The step name the workflow called.
        called: String,
    },

    /// A run started on a version of its workflow
    /// ([`Workflow::with_version`](crate::workflow::Workflow::with_version))
    /// that the code at hand does not register. Nothing was run or written:
    /// the run stays open for code that registers its version, as in a
    /// rolling deploy of a new version.
    #[error(
        "run {run_id} started on {} of workflow {workflow:?}, which this code does not \
         register (it registers {}); a worker that registers that version continues it",
        describe_version(version.as_deref()),
        describe_versions(registered)
    )]
    VersionNotRegistered {
        /// The run.
        run_id: String,
        /// Its workflow's name.
        workflow: String,
        /// The version it started on (`None`: the unversioned workflow).
        version: Option<String>,
        /// The versions of that workflow the code registers, in order.
        registered: Vec<Option<String>>,
    },

    /// A write collided with different committed content.
    #[error("conflict at {what}: {reason}")]
    Conflict {
        /// What collided (a run, a step sequence, a path).
        what: String,
        /// Why the write was refused.
        reason: String,
    },

    /// A step of a retention pass's recheck that waits for another's: the
    /// deleted run's vacated pointer is marked for its delete by another
    /// recheck, which deletes it (two sweepers at once). Not a failure: the
    /// recheck marker is kept, and a later pass of the same sweeper deletes
    /// the pointer if that mark still stands then (its recheck stopped
    /// between its mark and its delete).
    #[error("{what}: {reason}")]
    Deferred {
        /// What waits (a run's pointer).
        what: String,
        /// For what.
        reason: String,
    },

    /// Clearing a run's entries left some behind; the run's terminal marker
    /// must be kept so a later sweep tries again.
    #[error(
        "clearing run {run_id} deleted {deleted} entries but {failed} deletes failed; first: {source}"
    )]
    ClearIncomplete {
        /// The run being cleared.
        run_id: String,
        /// Entries deleted by this call.
        deleted: usize,
        /// Deletes (or listings) that failed.
        failed: usize,
        /// The first failure.
        #[source]
        source: Box<Error>,
    },

    /// A write to a run that does not exist.
    #[error("run {run_id} does not exist")]
    RunNotFound {
        /// The run written to.
        run_id: String,
    },

    /// A write to a run that can never be valid, whatever is committed (a
    /// gap in the receipt sequence, a receipt of another run, an unknown
    /// input); nothing was written.
    #[error("invalid write to run {run_id}: {reason}")]
    InvalidWrite {
        /// The run written to.
        run_id: String,
        /// What is wrong with the write.
        reason: String,
    },

    /// A builder was given an invalid or incomplete configuration.
    #[error("invalid {what} configuration: {reason}")]
    InvalidConfig {
        /// What was being configured.
        what: String,
        /// What is wrong.
        reason: String,
    },

    /// A run is waiting for a signal that has not arrived, or for a timer
    /// that is not due ([`Context::sleep`](crate::workflow::Context::sleep));
    /// it stays open, and its attempt released its lease.
    #[error("{}", suspended_message(run_id, signal, *until_ms))]
    Suspended {
        /// The waiting run.
        run_id: String,
        /// The signal it waits for; empty for a run that waits only for a
        /// timer.
        signal: String,
        /// When its timer or signal deadline is due (ms since the Unix
        /// epoch), if it has one: resuming it earlier suspends it again.
        until_ms: Option<u64>,
    },

    /// An attempt was stopped by a runtime error the workflow did not pass
    /// on; the run stays open.
    #[error("attempt of run {run_id} stopped: {reason}")]
    Aborted {
        /// The run.
        run_id: String,
        /// The runtime error that stopped the attempt.
        reason: String,
        /// The [kind](Error::kind) of the runtime error that stopped the
        /// attempt: [`ErrorKind::CodeChanged`] for a non-determinism (what
        /// a worker still on the old code meets in a rolling deploy),
        /// [`ErrorKind::Lease`] for a lost lease,
        /// [`ErrorKind::Unavailable`] for a store fault in a step; `None`
        /// where no runtime error did (a panic in the workflow, a worker
        /// shutting down). A report of stopped attempts
        /// ([`WakeReport::stopped`](crate::workflow::WakeReport::stopped))
        /// is told apart by it without reading messages.
        cause: Option<ErrorKind>,
    },

    /// The run ended as `Failed` in an earlier attempt.
    #[error("run {run_id} failed: {message}")]
    RunFailed {
        /// The run.
        run_id: String,
        /// The stored error message.
        message: String,
    },

    /// The run was cancelled.
    #[error("run {run_id} was cancelled{}", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    RunCancelled {
        /// The run.
        run_id: String,
        /// Why, if known.
        reason: Option<String>,
    },

    /// Another attempt holds the run's lease: it is running the run now (or
    /// crashed, and its lease has not expired yet). Nothing was started;
    /// try again after `until_ms`.
    #[error(
        "run {run_id} is held by attempt {attempt} of {owner:?} until {until_ms} ms; \
         nothing was started (try again once that lease has expired)"
    )]
    LeaseHeld {
        /// The run.
        run_id: String,
        /// The attempt holding the lease.
        attempt: u32,
        /// Who holds it.
        owner: String,
        /// When the lease expires (ms since the Unix epoch).
        until_ms: u64,
    },

    /// The attempt no longer holds the run: another attempt took it over
    /// after its lease expired, or the run ended. The attempt's change was
    /// refused; the attempt must stop.
    #[error("attempt {attempt} of run {run_id} lost its lease: {reason}")]
    LeaseLost {
        /// The run.
        run_id: String,
        /// The attempt that lost the lease.
        attempt: u32,
        /// What happened to the run.
        reason: String,
    },

    /// A step failed in an earlier attempt (its body returned an error after
    /// its retries) and its failure is recorded at its position: a replay
    /// returns this instead of running the step again.
    #[error("step {step:?} (position {sequence}) of run {run_id} failed: {message}")]
    StepFailed {
        /// The run.
        run_id: String,
        /// The step's position in call order (from 0).
        sequence: u64,
        /// The step's name.
        step: String,
        /// The body's error message, as recorded.
        message: String,
    },
}

/// What a caller should do about an [`Error`]: its [`kind`](Error::kind).
///
/// Each variant of [`Error`] has one kind; the kinds are few and stable, so a
/// caller matches on them (with a `_` arm: more may come) and leaves the
/// variants to messages and logs. The last column is
/// [`fails_run`](ErrorKind::fails_run): whether the error, met by a workflow
/// attempt, fails the run (it is the workflow's to handle, like its own
/// errors) or interrupts the attempt and leaves the run open to be resumed.
///
/// | kind | variants | what to do | fails the run |
/// |---|---|---|---|
/// | [`Unavailable`](ErrorKind::Unavailable) | [`Store`](Error::Store) | retry later; if it persists, check the store and its credentials | no |
/// | [`Invalid`](ErrorKind::Invalid) | [`InvalidRunId`](Error::InvalidRunId), [`InvalidWrite`](Error::InvalidWrite), [`Serialization`](Error::Serialization), [`InvalidStoreUrl`](Error::InvalidStoreUrl), [`StoreFeatureDisabled`](Error::StoreFeatureDisabled), [`InvalidConfig`](Error::InvalidConfig) | fix the input or the configuration; the same request fails again | yes |
/// | [`TooLarge`](ErrorKind::TooLarge) | [`TooLarge`](Error::TooLarge) | make the value smaller or raise the limit; nothing was written | yes |
/// | [`Unsupported`](ErrorKind::Unsupported) | [`ConditionalPutUnsupported`](Error::ConditionalPutUnsupported) | use a backend that keeps write-once (or turn its conditional puts on) | no |
/// | [`Corrupt`](ErrorKind::Corrupt) | [`Corrupt`](Error::Corrupt) | a stored object is damaged or foreign: an operator repairs or removes it | no |
/// | [`CodeChanged`](ErrorKind::CodeChanged) | [`NonDeterminism`](Error::NonDeterminism), [`Decode`](Error::Decode), [`VersionNotRegistered`](Error::VersionNotRegistered) | the code disagrees with what it stored (steps reordered, a type changed, a run started on a workflow version the code does not register): deploy code that matches, or bump a memoized function's version | no |
/// | [`Conflict`](ErrorKind::Conflict) | [`Conflict`](Error::Conflict), [`Deferred`](Error::Deferred) | the request contradicts what is committed (another writer got there first, an id taken with other content, a run already ended), or waits for another writer's change (a retention pass's recheck that another recheck is finishing): read the current state before deciding | no |
/// | [`Lease`](ErrorKind::Lease) | [`LeaseHeld`](Error::LeaseHeld), [`LeaseLost`](Error::LeaseLost) | another attempt holds the run: stop, and run it again once that lease has expired | no |
/// | [`NotFound`](ErrorKind::NotFound) | [`RunNotFound`](Error::RunNotFound) | the run does not exist (never created, or deleted): create it, or drop the request | no |
/// | [`Suspended`](ErrorKind::Suspended) | [`Suspended`](Error::Suspended) | the run waits for a signal: send it, then run the run again | no |
/// | [`Interrupted`](ErrorKind::Interrupted) | [`Aborted`](Error::Aborted) | the attempt stopped and the run stays open: run it again later (its message says why it stopped) | no |
/// | [`Failed`](ErrorKind::Failed) | [`StepFailed`](Error::StepFailed), [`RunFailed`](Error::RunFailed), [`RunCancelled`](Error::RunCancelled) | a failure recorded for good: retrying returns it again; handle it (report, compensate) | yes |
/// | its first failure's | [`ClearIncomplete`](Error::ClearIncomplete) | what that kind says (a store error: retry; a planted symlink: [`Corrupt`](ErrorKind::Corrupt)); the run's terminal marker is kept, so a later sweep tries again | as that kind |
///
/// # Example
///
/// A queue consumer decides what to do with a delivery:
///
/// ```
/// use memo_runtime::{Error, ErrorKind};
///
/// enum Ack { Done, Later, DeadLetter }
///
/// fn ack(outcome: Result<(), Error>) -> Ack {
///     match outcome.map_err(|e| e.kind()) {
///         Ok(()) | Err(ErrorKind::Failed | ErrorKind::Suspended) => Ack::Done,
///         Err(ErrorKind::Invalid | ErrorKind::TooLarge) => Ack::DeadLetter,
///         Err(_) => Ack::Later,
///     }
/// }
///
/// let lost = Error::LeaseLost { run_id: "r".into(), attempt: 2, reason: "taken over".into() };
/// assert!(matches!(ack(Err(lost)), Ack::Later));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The store failed a request: retry later.
    Unavailable,
    /// What the caller gave is invalid (a run id, a value that cannot be
    /// encoded, a write, a store URL, a builder's settings): fix it.
    Invalid,
    /// A value is over its size limit; nothing was written.
    TooLarge,
    /// The store cannot keep memo's write-once guarantee.
    Unsupported,
    /// A stored object failed its checks; it is never read as a miss.
    Corrupt,
    /// The running code disagrees with what was stored by earlier code: the
    /// workflow's steps changed (non-determinism), a stored value no
    /// longer decodes as its type, or a run started on a version of its
    /// workflow the code does not register.
    CodeChanged,
    /// The request contradicts what is committed.
    Conflict,
    /// Another attempt holds the run's lease, or took it over.
    Lease,
    /// The run does not exist.
    NotFound,
    /// The run waits for a signal.
    Suspended,
    /// The attempt was stopped by an earlier runtime error or a panic; the
    /// run stays open.
    Interrupted,
    /// A failure recorded for good: a step that failed after its retries, a
    /// run that ended failed or cancelled.
    Failed,
}

impl ErrorKind {
    /// Whether an error of this kind, met by a workflow attempt, fails the
    /// run (the table above): `true` for [`Invalid`](ErrorKind::Invalid),
    /// [`TooLarge`](ErrorKind::TooLarge) and [`Failed`](ErrorKind::Failed),
    /// which retrying cannot change; `false` for every kind that retrying,
    /// an operator or a deploy can clear, which interrupt the attempt and
    /// leave the run open.
    pub fn fails_run(self) -> bool {
        match self {
            ErrorKind::Invalid | ErrorKind::TooLarge | ErrorKind::Failed => true,
            ErrorKind::Unavailable
            | ErrorKind::Unsupported
            | ErrorKind::Corrupt
            | ErrorKind::CodeChanged
            | ErrorKind::Conflict
            | ErrorKind::Lease
            | ErrorKind::NotFound
            | ErrorKind::Suspended
            | ErrorKind::Interrupted => false,
        }
    }
}

impl Error {
    /// What kind of error this is: what the caller should do about it (see
    /// the table on [`ErrorKind`]).
    ///
    /// # Example
    ///
    /// ```
    /// use memo_runtime::{Error, ErrorKind};
    ///
    /// let held = Error::LeaseHeld {
    ///     run_id: "order-1".into(),
    ///     attempt: 3,
    ///     owner: "worker-b".into(),
    ///     until_ms: 1_700_000_000_000,
    /// };
    /// assert_eq!(held.kind(), ErrorKind::Lease);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store { .. } => ErrorKind::Unavailable,
            Error::ClearIncomplete { source, .. } => source.kind(),
            Error::InvalidRunId { .. }
            | Error::InvalidWrite { .. }
            | Error::Serialization { .. }
            | Error::InvalidStoreUrl { .. }
            | Error::StoreFeatureDisabled { .. }
            | Error::InvalidConfig { .. } => ErrorKind::Invalid,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::ConditionalPutUnsupported { .. } => ErrorKind::Unsupported,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::NonDeterminism { .. }
            | Error::Decode { .. }
            | Error::VersionNotRegistered { .. } => ErrorKind::CodeChanged,
            Error::Conflict { .. } | Error::Deferred { .. } => ErrorKind::Conflict,
            Error::LeaseHeld { .. } | Error::LeaseLost { .. } => ErrorKind::Lease,
            Error::RunNotFound { .. } => ErrorKind::NotFound,
            Error::Suspended { .. } => ErrorKind::Suspended,
            Error::Aborted { .. } => ErrorKind::Interrupted,
            Error::StepFailed { .. } | Error::RunFailed { .. } | Error::RunCancelled { .. } => {
                ErrorKind::Failed
            }
        }
    }

    /// Whether this error, met by a workflow attempt, fails the run:
    /// `false` means it interrupts the attempt and the run stays open to be
    /// resumed; `true` means it is the workflow's to handle like an error of
    /// its own. Decided by [`kind`](Error::kind), see
    /// [`ErrorKind::fails_run`].
    ///
    /// When memo itself meets an error that does not fail the run during an
    /// attempt (in a step's commit, or in a [`Memo`](crate::Memo) of the
    /// step, even if the step converts or swallows the error), the attempt
    /// stops and records nothing more; the run stays open for its next
    /// delivery.
    ///
    /// # Example
    ///
    /// ```
    /// use memo_runtime::Error;
    ///
    /// let too_large = Error::TooLarge { key: "k".into(), size: 20, limit: 10 };
    /// assert!(too_large.fails_run());
    /// let damaged = Error::Corrupt { path: "memo/x".into(), reason: "bad checksum".into() };
    /// assert!(!damaged.fails_run());
    /// ```
    pub fn fails_run(&self) -> bool {
        self.kind().fails_run()
    }

    /// Whether the error does not fail the run: `!self.fails_run()`.
    #[deprecated(
        note = "it never meant only \"retry may succeed\": it answers whether the error leaves \
                the run open; use `!error.fails_run()`, or `error.kind()` to decide what to do"
    )]
    pub fn is_transient(&self) -> bool {
        !self.fails_run()
    }

    /// Wraps an object-store error with the path it concerns.
    ///
    /// A local folder's refusal to act through a symlink or on a non-regular
    /// file is [`Error::Corrupt`], naming the object it refused: another
    /// writer of the folder put something there that memo never writes.
    pub(crate) fn store(path: impl std::fmt::Display, source: object_store::Error) -> Self {
        #[cfg(unix)]
        if let Some(refused) = crate::local::refusal(&source) {
            return Error::corrupt(&refused.location, refused.to_string());
        }
        Error::Store {
            path: path.to_string(),
            source,
        }
    }

    /// A value (named by `what`) that could not be encoded.
    pub(crate) fn serialization(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Serialization {
            what: what.into(),
            source: source.into(),
        }
    }

    /// A value (named by `what`, stored at `path`) that the decoder could not
    /// decode as the type asked for.
    pub(crate) fn decode(
        what: impl Into<String>,
        path: impl std::fmt::Display,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Decode {
            what: what.into(),
            path: path.to_string(),
            source: source.into(),
        }
    }

    /// A corrupt-object error for `path`.
    pub(crate) fn corrupt(path: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.to_string(),
            reason: reason.into(),
        }
    }
}

/// Lets `#[memoized]` functions return `std::io::Result<T>`: memo's failures
/// become I/O errors of the kind matching their [`ErrorKind`], with the memo
/// error inside (`get_ref`, `into_inner`): stored data that cannot be read
/// ([`Corrupt`](ErrorKind::Corrupt), [`CodeChanged`](ErrorKind::CodeChanged))
/// is `InvalidData`; what the caller gave ([`Invalid`](ErrorKind::Invalid),
/// [`TooLarge`](ErrorKind::TooLarge)) is `InvalidInput`; a missing run is
/// `NotFound`; the rest is `Other`.
impl From<Error> for std::io::Error {
    fn from(error: Error) -> Self {
        let kind = match error.kind() {
            ErrorKind::Corrupt | ErrorKind::CodeChanged => std::io::ErrorKind::InvalidData,
            ErrorKind::Invalid | ErrorKind::TooLarge => std::io::ErrorKind::InvalidInput,
            ErrorKind::NotFound => std::io::ErrorKind::NotFound,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, error)
    }
}

/// `version "2"`, or `no version`.
pub(crate) fn describe_version(version: Option<&str>) -> String {
    match version {
        Some(version) => format!("version {version:?}"),
        None => "no version".to_string(),
    }
}

/// `version "1", version "2"`: each of `versions` described, in order.
pub(crate) fn describe_versions(versions: &[Option<String>]) -> String {
    let described: Vec<_> = versions
        .iter()
        .map(|version| describe_version(version.as_deref()))
        .collect();
    described.join(", ")
}

/// What [`Error::Suspended`] says: what the run waits for, and until when.
fn suspended_message(run_id: &str, signal: &str, until_ms: Option<u64>) -> String {
    match (signal.is_empty(), until_ms) {
        (true, Some(at)) => {
            format!(
                "run {run_id} is sleeping until {at} ms; run it again once that time has passed"
            )
        }
        (false, Some(at)) => format!(
            "run {run_id} is waiting for signal {signal:?} until {at} ms; send it with \
             Runtime::signal, or let the deadline pass, and run the run again"
        ),
        _ => format!(
            "run {run_id} is waiting for signal {signal:?}; send it with Runtime::signal and run the run again"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of every variant, with its variant's name; the exhaustive
    /// match makes a new variant a compile error here until it is listed.
    fn one_of_each() -> Vec<(&'static str, Error)> {
        let s = String::new;
        let errors = vec![
            Error::InvalidRunId {
                input: s(),
                reason: "",
            },
            Error::Store {
                path: s(),
                source: object_store::Error::NotFound {
                    path: s(),
                    source: "gone".into(),
                },
            },
            Error::ConditionalPutUnsupported { path: s() },
            Error::InvalidStoreUrl {
                url: s(),
                reason: s(),
            },
            Error::StoreFeatureDisabled {
                url: s(),
                feature: "aws",
            },
            Error::serialization("a value", "no encoding"),
            Error::decode("a value", "p", "no decoding"),
            Error::corrupt("p", "bad checksum"),
            Error::TooLarge {
                key: s(),
                size: 2,
                limit: 1,
            },
            Error::NonDeterminism {
                run_id: s(),
                sequence: 0,
                recorded: s(),
                called: s(),
            },
            Error::VersionNotRegistered {
                run_id: s(),
                workflow: s(),
                version: Some("1".into()),
                registered: vec![None, Some("2".into())],
            },
            Error::Conflict {
                what: s(),
                reason: s(),
            },
            Error::Deferred {
                what: s(),
                reason: s(),
            },
            Error::ClearIncomplete {
                run_id: s(),
                deleted: 0,
                failed: 1,
                source: Box::new(Error::corrupt("p", "bad checksum")),
            },
            Error::RunNotFound { run_id: s() },
            Error::InvalidWrite {
                run_id: s(),
                reason: s(),
            },
            Error::InvalidConfig {
                what: s(),
                reason: s(),
            },
            Error::Suspended {
                run_id: s(),
                signal: s(),
                until_ms: None,
            },
            Error::Aborted {
                run_id: s(),
                reason: s(),
                cause: None,
            },
            Error::RunFailed {
                run_id: s(),
                message: s(),
            },
            Error::RunCancelled {
                run_id: s(),
                reason: None,
            },
            Error::LeaseHeld {
                run_id: s(),
                attempt: 1,
                owner: s(),
                until_ms: 0,
            },
            Error::LeaseLost {
                run_id: s(),
                attempt: 1,
                reason: s(),
            },
            Error::StepFailed {
                run_id: s(),
                sequence: 0,
                step: s(),
                message: s(),
            },
        ];
        errors
            .into_iter()
            .map(|error| {
                let name = match &error {
                    Error::InvalidRunId { .. } => "InvalidRunId",
                    Error::Store { .. } => "Store",
                    Error::ConditionalPutUnsupported { .. } => "ConditionalPutUnsupported",
                    Error::InvalidStoreUrl { .. } => "InvalidStoreUrl",
                    Error::StoreFeatureDisabled { .. } => "StoreFeatureDisabled",
                    Error::Serialization { .. } => "Serialization",
                    Error::Decode { .. } => "Decode",
                    Error::Corrupt { .. } => "Corrupt",
                    Error::TooLarge { .. } => "TooLarge",
                    Error::NonDeterminism { .. } => "NonDeterminism",
                    Error::VersionNotRegistered { .. } => "VersionNotRegistered",
                    Error::Conflict { .. } => "Conflict",
                    Error::Deferred { .. } => "Deferred",
                    Error::ClearIncomplete { .. } => "ClearIncomplete",
                    Error::RunNotFound { .. } => "RunNotFound",
                    Error::InvalidWrite { .. } => "InvalidWrite",
                    Error::InvalidConfig { .. } => "InvalidConfig",
                    Error::Suspended { .. } => "Suspended",
                    Error::Aborted { .. } => "Aborted",
                    Error::RunFailed { .. } => "RunFailed",
                    Error::RunCancelled { .. } => "RunCancelled",
                    Error::LeaseHeld { .. } => "LeaseHeld",
                    Error::LeaseLost { .. } => "LeaseLost",
                    Error::StepFailed { .. } => "StepFailed",
                };
                (name, error)
            })
            .collect()
    }

    /// The rows of the decision table in [`ErrorKind`]'s rustdoc: kind,
    /// the variants it lists, and its "fails the run" cell; `None` for the
    /// kind and the cell of a row whose variants take their source's kind.
    fn documented_table() -> Vec<(Option<String>, Vec<String>, Option<bool>)> {
        let rows = include_str!("error.rs")
            .lines()
            .map(str::trim)
            .filter(|line| line.starts_with("/// | ") && line.contains("](Error::"));
        let linked = |cell: &str, module: &str| -> Vec<String> {
            cell.split(&format!("]({module}::"))
                .skip(1)
                .map(|rest| rest[..rest.find(')').unwrap()].to_string())
                .collect()
        };
        rows.map(|row| {
            let cells: Vec<&str> = row.trim_start_matches("/// | ").split(" | ").collect();
            let kind = linked(cells[0], "ErrorKind");
            let fails = match cells[3].trim_end_matches(" |") {
                "yes" => Some(true),
                "no" => Some(false),
                "as that kind" => None,
                other => panic!("the table's last column says {other:?}: {row}"),
            };
            let kind = kind.first().cloned();
            assert_eq!(kind.is_none(), fails.is_none(), "{row}");
            (kind, linked(cells[1], "Error"), fails)
        })
        .collect()
    }

    #[test]
    fn every_variant_has_the_kind_and_run_outcome_its_docs_say() {
        let table = documented_table();
        let errors = one_of_each();
        let documented: Vec<&String> = table.iter().flat_map(|(_, v, _)| v).collect();
        assert_eq!(documented.len(), errors.len(), "each variant is in one row");
        for (name, error) in &errors {
            let (kind, _, fails) = table
                .iter()
                .find(|(_, variants, _)| variants.iter().any(|v| v == name))
                .unwrap_or_else(|| panic!("Error::{name} is missing from ErrorKind's table"));
            let (kind, fails) = match (kind, fails) {
                (Some(kind), Some(fails)) => (kind.clone(), *fails),
                _ => {
                    let Error::ClearIncomplete { source, .. } = error else {
                        panic!("Error::{name} has no source to take its kind from");
                    };
                    (format!("{:?}", source.kind()), source.fails_run())
                }
            };
            assert_eq!(format!("{:?}", error.kind()), kind, "Error::{name}");
            assert_eq!(error.fails_run(), fails, "Error::{name}");
        }
    }

    #[test]
    #[allow(deprecated)]
    fn is_transient_still_answers_what_it_answered() {
        // The variants `is_transient` called transient before `fails_run`,
        // and those added since: `Deferred`, which waits as a `Conflict`
        // does, and `VersionNotRegistered`, a `Conflict` before it had a
        // variant of its own.
        const TRANSIENT: [&str; 14] = [
            "Deferred",
            "VersionNotRegistered",
            "Store",
            "Decode",
            "Corrupt",
            "ConditionalPutUnsupported",
            "Conflict",
            "NonDeterminism",
            "ClearIncomplete",
            "RunNotFound",
            "Suspended",
            "Aborted",
            "LeaseHeld",
            "LeaseLost",
        ];
        for (name, error) in one_of_each() {
            assert_eq!(
                error.is_transient(),
                TRANSIENT.contains(&name),
                "Error::{name}"
            );
        }
    }

    #[test]
    fn io_errors_take_their_kind_from_the_error_kind() {
        use std::io::ErrorKind as Io;
        for (name, error) in one_of_each() {
            let expected = match error.kind() {
                ErrorKind::Corrupt | ErrorKind::CodeChanged => Io::InvalidData,
                ErrorKind::Invalid | ErrorKind::TooLarge => Io::InvalidInput,
                ErrorKind::NotFound => Io::NotFound,
                _ => Io::Other,
            };
            let shown = error.to_string();
            let io = std::io::Error::from(error);
            assert_eq!(io.kind(), expected, "Error::{name}");
            let inner = io.get_ref().and_then(|e| e.downcast_ref::<Error>());
            assert_eq!(inner.map(Error::to_string), Some(shown), "Error::{name}");
        }
        let too_large = Error::TooLarge {
            key: "k".into(),
            size: 2,
            limit: 1,
        };
        assert_eq!(std::io::Error::from(too_large).kind(), Io::InvalidInput);
    }

    #[test]
    fn a_decode_error_keeps_the_decoder_error_as_its_source() {
        use std::error::Error as _;
        let decoder = rmp_serde::from_slice::<u32>(b"\xc1").unwrap_err();
        let shown = decoder.to_string();
        let error = Error::decode("the input", "run r1", decoder);
        let source = error.source().expect("a decode error has a source");
        assert!(
            source.downcast_ref::<rmp_serde::decode::Error>().is_some(),
            "{source:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("cannot decode the input stored at run r1: {shown}")
        );
    }
}
