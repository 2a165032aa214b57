//! Integration tests for memo live in `tests/tests/`.

/// The root README's code blocks, compiled (and, unless marked `no_run`,
/// run) as doctests, so that every example in the README keeps compiling.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
