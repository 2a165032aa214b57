//! Most of memo-tests' integration tests, as one test binary: each file in
//! `tests/tests/` is a module here, so the test build compiles and links
//! one crate rather than one per file (each of which linked memo-runtime
//! with its cloud clients again). A test is named by its file, as
//! `<file>::<test>`: `cargo test -p memo-tests --test integration
//! bad_input::` runs `tests/tests/bad_input.rs`.
//!
//! A new test file is listed below (or, if it needs a process of its own,
//! as its own `[[test]]` in `tests/Cargo.toml`);
//! `every_test_file_is_in_a_test_target` fails for a file that is in
//! neither, which would otherwise never run (`autotests = false`).

#[path = "../attempt_history.rs"]
mod attempt_history;
#[path = "../attempt_leases.rs"]
mod attempt_leases;
#[path = "../azure.rs"]
mod azure;
#[path = "../bad_input.rs"]
mod bad_input;
#[path = "../clear_requests.rs"]
mod clear_requests;
#[path = "../committed_effects.rs"]
mod committed_effects;
#[path = "../completion_races.rs"]
mod completion_races;
#[path = "../cost_ledger.rs"]
mod cost_ledger;
#[path = "../creation_races.rs"]
mod creation_races;
#[path = "../data_keys.rs"]
mod data_keys;
#[path = "../debug_secrets.rs"]
mod debug_secrets;
#[path = "../docs.rs"]
mod docs;
#[path = "../due_index_retention.rs"]
mod due_index_retention;
#[path = "../entry_cache.rs"]
mod entry_cache;
#[path = "../first_attempt_reads.rs"]
mod first_attempt_reads;
#[path = "../gcs.rs"]
mod gcs;
#[path = "../idle_polls.rs"]
mod idle_polls;
#[path = "../key_rotation.rs"]
mod key_rotation;
#[path = "../large_values.rs"]
mod large_values;
#[path = "../lease_vouched_commits.rs"]
mod lease_vouched_commits;
#[path = "../local_store_safety.rs"]
mod local_store_safety;
#[path = "../long_run_ids.rs"]
mod long_run_ids;
#[path = "../memo_faults.rs"]
mod memo_faults;
#[path = "../memo_store.rs"]
mod memo_store;
#[path = "../memoized_lint_clean.rs"]
mod memoized_lint_clean;
#[path = "../memoized_soundness.rs"]
mod memoized_soundness;
#[path = "../oversize_objects.rs"]
mod oversize_objects;
#[path = "../pending_listing.rs"]
mod pending_listing;
#[path = "../racing_deletions.rs"]
mod racing_deletions;
#[path = "../read_only_listing.rs"]
mod read_only_listing;
#[path = "../recover_memory.rs"]
mod recover_memory;
#[path = "../replay_check.rs"]
mod replay_check;
#[path = "../requests_per_step.rs"]
mod requests_per_step;
#[path = "../run_checkpoints.rs"]
mod run_checkpoints;
#[path = "../run_incarnations.rs"]
mod run_incarnations;
#[path = "../run_limits.rs"]
mod run_limits;
#[path = "../run_listing_pages.rs"]
mod run_listing_pages;
#[path = "../runtime_store.rs"]
mod runtime_store;
#[path = "../runtime_store_regressions.rs"]
mod runtime_store_regressions;
#[path = "../s3.rs"]
mod s3;
#[path = "../shared_scope.rs"]
mod shared_scope;
#[path = "../signal_wakeups.rs"]
mod signal_wakeups;
#[path = "../simulation_deploy.rs"]
mod simulation_deploy;
#[path = "../staged_waits.rs"]
mod staged_waits;
#[path = "../standalone_keys.rs"]
mod standalone_keys;
#[path = "../sweep_batches.rs"]
mod sweep_batches;
#[path = "../sweeper.rs"]
mod sweeper;
#[path = "../undone_deletes.rs"]
mod undone_deletes;
#[path = "../unreachable_objects.rs"]
mod unreachable_objects;
#[path = "../worker_polls.rs"]
mod worker_polls;
#[path = "../workflow.rs"]
mod workflow;
#[path = "../workflow_api.rs"]
mod workflow_api;
#[path = "../workflow_cancel.rs"]
mod workflow_cancel;
#[path = "../workflow_crash_points.rs"]
mod workflow_crash_points;
#[path = "../workflow_durability.rs"]
mod workflow_durability;
#[path = "../workflow_durations.rs"]
mod workflow_durations;
#[path = "../workflow_idle.rs"]
mod workflow_idle;
#[path = "../workflow_nesting.rs"]
mod workflow_nesting;
#[path = "../workflow_patching.rs"]
mod workflow_patching;
#[path = "../workflow_select.rs"]
mod workflow_select;
#[path = "../workflow_signal_deadlines.rs"]
mod workflow_signal_deadlines;
#[path = "../workflow_signals.rs"]
mod workflow_signals;
#[path = "../workflow_timers.rs"]
mod workflow_timers;
#[path = "../workflow_versions.rs"]
mod workflow_versions;
#[path = "../workflow_worker.rs"]
mod workflow_worker;
#[path = "../wrong_prefix_sweeps.rs"]
mod wrong_prefix_sweeps;

/// Every file in `tests/tests/` runs: it is a `[[test]]` target's root in
/// `tests/Cargo.toml`, or a module of exactly one target root. With
/// `autotests = false` cargo builds only the listed targets, so a new test
/// file listed nowhere would otherwise be skipped without a word.
#[test]
fn every_test_file_is_in_a_test_target() {
    use std::collections::BTreeMap;
    use std::fs;
    use std::path::Path;

    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    // The targets' roots: each `path = "tests/..."` line of a `[[test]]`.
    let roots: Vec<&str> = manifest
        .lines()
        .filter_map(|line| line.trim().strip_prefix("path = \"tests/"))
        .map(|rest| rest.trim_end_matches('"'))
        .collect();
    assert!(roots.contains(&"integration/main.rs"), "{roots:?}");
    // Where each file runs: a target of its own, or the targets including it.
    let mut runs_in: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for root in &roots {
        let text = fs::read_to_string(crate_dir.join("tests").join(root))
            .unwrap_or_else(|e| panic!("tests/{root}, a target in tests/Cargo.toml: {e}"));
        runs_in
            .entry((*root).to_owned())
            .or_default()
            .push(format!("its own target ({root})"));
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("#[path = \"") {
                // Relative to the root's folder, as `#[path]` in a `main.rs`.
                let mut included: Vec<&str> = root.split('/').collect();
                included.pop();
                for part in rest.trim_end_matches("\"]").split('/') {
                    match part {
                        ".." => assert!(included.pop().is_some(), "{root}: {line}"),
                        part => included.push(part),
                    }
                }
                let included = included.join("/");
                runs_in
                    .entry(included)
                    .or_default()
                    .push(format!("a module of {root}"));
            }
        }
    }
    let mut problems = Vec::new();
    for entry in fs::read_dir(crate_dir.join("tests")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let file = if entry.file_type().unwrap().is_dir() {
            format!("{name}/main.rs")
        } else if name.ends_with(".rs") {
            name
        } else {
            continue;
        };
        match runs_in.get(&file).map(Vec::as_slice) {
            None | Some([]) => problems.push(format!(
                "tests/tests/{file} is in no test target: add a `#[path = \"../{file}\"] mod ...;` \
                 line to tests/tests/integration/main.rs (or a `[[test]]` of its own to \
                 tests/Cargo.toml if it needs a process of its own)"
            )),
            Some([_]) => {}
            Some(more) => {
                problems.push(format!("tests/tests/{file} runs more than once: {more:?}"))
            }
        }
    }
    for file in runs_in.keys() {
        if !crate_dir.join("tests").join(file).is_file() {
            problems.push(format!("tests/tests/{file} is listed but does not exist"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
