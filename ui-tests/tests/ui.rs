//! Compile-time tests of `#[memoized]`: every misuse fails with the error in
//! its `.stderr` (`tests/ui/fail/`). Every supported shape compiles
//! (`tests/ui/pass/`): each of those is a test target of this crate (see
//! Cargo.toml), built and run by `cargo test` itself.
//!
//! The suite has a crate of its own: trybuild builds the cases in a target
//! dir of its own, with the dependencies and dev-dependencies of the crate
//! that holds the test, so that crate's are kept to what the cases need (see
//! Cargo.toml).
//!
//! The `.stderr` files are rustc's exact output, which changes between
//! compiler releases, so the test runs only on the release they were made
//! with (1.95) and is ignored elsewhere. After an intended change to a
//! message, or on moving to a new rustc, regenerate them and review the diff:
//!
//! ```text
//! TRYBUILD=overwrite cargo test -p memo-ui-tests --test ui
//! ```

#[rustversion::attr(
    not(stable(1.95)),
    ignore = "the .stderr files were made with rustc 1.95; see this file's docs"
)]
#[test]
fn memoized_rejects_every_misuse() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
}
