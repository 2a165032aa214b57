//! The conformance suites: one set of promises per kind of store, each
//! checked on every backend through one entry point (`run_suite`).

pub mod memo_store;
pub mod runtime_store;
