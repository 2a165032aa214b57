//! memoctl's tests, run as a process against stores that real runs filled:
//! one test binary, a module for each part of the command line (each was a
//! test binary of its own, and each of those linked memo-runtime, its cloud
//! clients and the inspector's HTTP stack again: sixteen links of some
//! 2 s each in every cold build).
//!
//! `cargo test -p memo-cli --test cli <module>::` runs one part, e.g.
//! `cargo test -p memo-cli --test cli serve_browser::`.

mod inspector;
mod support;

mod defaults;
mod memoctl;
mod memoctl_cancel;
mod memoctl_cost;
mod memoctl_export;
mod memoctl_forget;
mod memoctl_s3;
mod memoctl_shared_folder;
mod memoctl_sqlite;
mod memoctl_timers;
mod serve_browser;
mod serve_http;
mod serve_s3;
mod sweep_prefixes;
mod sweep_shared;
