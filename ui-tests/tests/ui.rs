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

use std::ffi::OsStr;
use std::process::{Command, Stdio};

/// The flags trybuild gives rustc, as `CARGO_ENCODED_RUSTFLAGS` (arguments
/// separated by `0x1f`).
///
/// trybuild (1.0.122, `src/rustflags.rs` and `src/cargo.rs`) builds the
/// cases' dependencies with `--cfg trybuild --verbose -A dead_code` and then
/// the cases with `--diagnostic-width=140` added. cargo keeps a build of each
/// dependency per set of flags, so every dependency of memo-runtime was
/// checked twice: two builds of each in `target/tests/trybuild`, and half
/// the suite's time. `CARGO_ENCODED_RUSTFLAGS` takes precedence over the
/// `--config` rustflags trybuild passes, so with this one set for both of
/// its cargo runs they agree, and each dependency is checked once; the cases
/// still build with trybuild's flags, the width that shaped the `.stderr`
/// files included.
const TRYBUILD_RUSTFLAGS: &str =
    "--cfg\x1ftrybuild\x1f--verbose\x1f-A\x1fdead_code\x1f--diagnostic-width=140";

#[rustversion::attr(
    not(stable(1.95)),
    ignore = "the .stderr files were made with rustc 1.95; see this file's docs"
)]
#[test]
fn memoized_rejects_every_misuse() {
    let flags = std::env::var_os("CARGO_ENCODED_RUSTFLAGS");
    if flags.as_deref() != Some(OsStr::new(TRYBUILD_RUSTFLAGS)) {
        // trybuild's cargo runs inherit this process's environment, which a
        // test may not change (`set_var` is unsafe, and this workspace has no
        // unsafe code): run this test again in a process of its own, with the
        // flags set. Its trybuild report goes to the inherited stderr, as it
        // would without the second process.
        let exe = std::env::current_exe().expect("the test binary's path");
        let output = Command::new(exe)
            .args(["memoized_rejects_every_misuse", "--exact", "--nocapture"])
            .env("CARGO_ENCODED_RUSTFLAGS", TRYBUILD_RUSTFLAGS)
            .stderr(Stdio::inherit())
            .output()
            .expect("run the test binary again");
        assert!(
            output.status.success(),
            "the compile-fail suite failed (its report is above); its test harness said:\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        return;
    }
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
}
