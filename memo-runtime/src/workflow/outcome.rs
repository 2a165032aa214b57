//! [`RunOutcome`]: what a call of [`Runtime::run`](super::Runtime::run)
//! (or `resume`, or a run of `recover`) says about the run, whatever the
//! workflow's error type.

use std::error::Error as StdError;

use crate::error::Error;

/// Why a run is not done yet, when it waits: see [`RunOutcome::suspension`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Suspension<'a> {
    /// The signal the run waits for, if it waits for one.
    pub signal: Option<&'a str>,
    /// When its timer or signal deadline is due (ms since the Unix epoch),
    /// if it has one: running it earlier suspends it again.
    pub until_ms: Option<u64>,
}

/// Tells a suspended run apart in the result of [`Runtime::run`],
/// [`Runtime::resume`] or [`Recovery::resumed`], without looking inside the
/// workflow's error type.
///
/// A suspended run is not a failed one: it waits for a signal or a timer,
/// stays open, and continues when it is run again once that has come. This
/// is implemented for the results of workflows whose error is
/// [`memo_runtime::Error`](crate::Error), `anyhow::Error` or
/// `Box<dyn std::error::Error + Send + Sync>` (any error type that is
/// `AsRef<dyn std::error::Error + Send + Sync>`); an error that wraps the
/// runtime's in a context of its own is not looked into.
///
/// [`Runtime::run`]: super::Runtime::run
/// [`Runtime::resume`]: super::Runtime::resume
/// [`Recovery::resumed`]: super::Recovery::resumed
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use std::sync::Arc;
/// use memo_runtime::{MemoStore, RunId, runtime_store::InMemoryRuntimeStore};
/// use memo_runtime::object_store::memory::InMemory;
/// use memo_runtime::workflow::{Context, RunOutcome, Runtime, Workflow};
///
/// let runtime = Runtime::builder()
///     .memo_store(MemoStore::new(Arc::new(InMemory::new()), "memo"))
///     .runtime_store(Arc::new(InMemoryRuntimeStore::new()))
///     .build()?;
/// let approval = Workflow::new("approval", |ctx: Context, _: ()| async move {
///     let approved: bool = ctx.wait_for_signal("approve").await?;
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(approved)
/// });
/// let run = RunId::new("approval-1")?;
/// let outcome = runtime.run(&run, &(), &approval).await;
/// assert_eq!(outcome.suspension().and_then(|s| s.signal), Some("approve"));
/// runtime.signal(&run, "approve", &true).await?;
/// let outcome = runtime.run(&run, &(), &approval).await;
/// assert!(!outcome.is_suspended());
/// assert!(outcome?);
/// # Ok(()) }
/// ```
pub trait RunOutcome: sealed::Sealed {
    /// What the run waits for, if this attempt suspended it (or found it
    /// still waiting); `None` for a run that completed, failed or stopped
    /// for another reason.
    fn suspension(&self) -> Option<Suspension<'_>>;

    /// Whether the run is suspended: it waits for a signal or a timer.
    fn is_suspended(&self) -> bool {
        self.suspension().is_some()
    }
}

impl<O, E: sealed::RuntimeErrorIn> RunOutcome for Result<O, E> {
    fn suspension(&self) -> Option<Suspension<'_>> {
        match self.as_ref().err()?.runtime_error()? {
            Error::Suspended {
                signal, until_ms, ..
            } => Some(Suspension {
                signal: (!signal.is_empty()).then_some(signal.as_str()),
                until_ms: *until_ms,
            }),
            _ => None,
        }
    }
}

mod sealed {
    use super::{Error, StdError};

    pub trait Sealed {}

    impl<O, E: RuntimeErrorIn> Sealed for Result<O, E> {}

    /// An error type that can hold the runtime's [`Error`] as it is.
    pub trait RuntimeErrorIn {
        /// The runtime's error this error is, if it is one.
        fn runtime_error(&self) -> Option<&Error>;
    }

    impl RuntimeErrorIn for Error {
        fn runtime_error(&self) -> Option<&Error> {
            Some(self)
        }
    }

    impl<E: AsRef<dyn StdError + Send + Sync + 'static>> RuntimeErrorIn for E {
        fn runtime_error(&self) -> Option<&Error> {
            self.as_ref().downcast_ref::<Error>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suspended(signal: &str, until_ms: Option<u64>) -> Error {
        Error::Suspended {
            run_id: "r".into(),
            signal: signal.into(),
            until_ms,
        }
    }

    #[test]
    fn a_suspension_is_told_apart_in_the_runtimes_error_and_in_a_boxed_one() {
        let waits: Result<(), Error> = Err(suspended("approve", None));
        assert_eq!(
            waits.suspension(),
            Some(Suspension {
                signal: Some("approve"),
                until_ms: None
            })
        );
        let sleeps: Result<(), Box<dyn StdError + Send + Sync>> =
            Err(Box::new(suspended("", Some(9))));
        assert_eq!(
            sleeps.suspension(),
            Some(Suspension {
                signal: None,
                until_ms: Some(9)
            })
        );
    }

    #[test]
    fn other_outcomes_are_not_suspensions() {
        let done: Result<u8, Error> = Ok(1);
        assert!(!done.is_suspended());
        let lost: Result<u8, Error> = Err(Error::RunNotFound { run_id: "r".into() });
        assert!(!lost.is_suspended());
        let other: Result<u8, Box<dyn StdError + Send + Sync>> = Err("declined".into());
        assert!(!other.is_suspended());
    }
}
