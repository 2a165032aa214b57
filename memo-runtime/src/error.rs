//! The crate's one error type and its `Result` alias.

/// A `Result` whose error defaults to memo's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in memo.
///
/// Every variant names *what* failed and *where* (a path, a key, a run id), so
/// a log line alone is enough to find the object involved.
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
        /// The store's own error.
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
        /// `***` (see [`redact_store_url`](crate::redact_store_url)).
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
        /// `***` (see [`redact_store_url`](crate::redact_store_url)).
        url: String,
        /// The memo-runtime feature to enable: `aws`, `gcp` or `azure`.
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
        /// The decoder's error.
        #[source]
        source: rmp_serde::decode::Error,
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

    /// A write collided with different committed content.
    #[error("conflict at {what}: {reason}")]
    Conflict {
        /// What collided (a run, a step sequence, a path).
        what: String,
        /// Why the write was refused.
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

impl Error {
    /// Whether the error is *transient*: a runtime error that can go away without the
    /// caller changing what it asked for: retrying later, fixing the store
    /// or its configuration, or deploying a code fix can make the same call
    /// succeed.
    ///
    /// In a workflow this decides the fate of the run: an attempt that meets
    /// a transient error (even one a step converted into its own error type)
    /// stops and leaves the run open to be resumed, while a permanent error
    /// reaches the workflow like any error of its own and fails the run if
    /// the workflow does not handle it.
    ///
    /// | transient (the run stays open) | permanent (the workflow's to handle) |
    /// |---|---|
    /// | [`Store`](Error::Store): the store failed a request | [`Serialization`](Error::Serialization): a value cannot be encoded |
    /// | [`Decode`](Error::Decode): a committed value does not decode (a code fix can read it) | [`TooLarge`](Error::TooLarge): a value over the size limit |
    /// | [`Corrupt`](Error::Corrupt): a damaged object (an operator can repair it) | [`InvalidRunId`](Error::InvalidRunId), [`InvalidWrite`](Error::InvalidWrite), [`InvalidConfig`](Error::InvalidConfig) |
    /// | [`ConditionalPutUnsupported`](Error::ConditionalPutUnsupported): the backend cannot keep write-once | [`InvalidStoreUrl`](Error::InvalidStoreUrl), [`StoreFeatureDisabled`](Error::StoreFeatureDisabled) |
    /// | [`Conflict`](Error::Conflict), [`NonDeterminism`](Error::NonDeterminism), [`ClearIncomplete`](Error::ClearIncomplete) | [`RunFailed`](Error::RunFailed), [`RunCancelled`](Error::RunCancelled): the run has ended |
    /// | [`RunNotFound`](Error::RunNotFound), [`Suspended`](Error::Suspended), [`Aborted`](Error::Aborted) | [`StepFailed`](Error::StepFailed): a recorded step failure |
    /// | [`LeaseHeld`](Error::LeaseHeld), [`LeaseLost`](Error::LeaseLost): another attempt holds the run | |
    ///
    /// # Example
    ///
    /// ```
    /// use memo_runtime::Error;
    ///
    /// let too_large = Error::TooLarge { key: "k".into(), size: 20, limit: 10 };
    /// assert!(!too_large.is_transient());
    /// let damaged = Error::Corrupt { path: "memo/x".into(), reason: "bad checksum".into() };
    /// assert!(damaged.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Store { .. }
            | Error::Decode { .. }
            | Error::Corrupt { .. }
            | Error::ConditionalPutUnsupported { .. }
            | Error::Conflict { .. }
            | Error::NonDeterminism { .. }
            | Error::ClearIncomplete { .. }
            | Error::RunNotFound { .. }
            | Error::Suspended { .. }
            | Error::Aborted { .. }
            | Error::LeaseHeld { .. }
            | Error::LeaseLost { .. } => true,
            Error::InvalidRunId { .. }
            | Error::InvalidStoreUrl { .. }
            | Error::StoreFeatureDisabled { .. }
            | Error::Serialization { .. }
            | Error::TooLarge { .. }
            | Error::InvalidWrite { .. }
            | Error::InvalidConfig { .. }
            | Error::RunFailed { .. }
            | Error::RunCancelled { .. }
            | Error::StepFailed { .. } => false,
        }
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

    /// A value (named by `what`, stored at `path`) that the codec could not
    /// decode as the type asked for.
    pub(crate) fn decode(
        what: impl Into<String>,
        path: impl std::fmt::Display,
        source: crate::codec::DecodeError,
    ) -> Self {
        Error::Decode {
            what: what.into(),
            path: path.to_string(),
            source,
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
/// become I/O errors of the matching kind, with the memo error as source.
impl From<Error> for std::io::Error {
    fn from(error: Error) -> Self {
        let kind = match &error {
            Error::Decode { .. } | Error::Corrupt { .. } => std::io::ErrorKind::InvalidData,
            Error::InvalidRunId { .. } => std::io::ErrorKind::InvalidInput,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, error)
    }
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
