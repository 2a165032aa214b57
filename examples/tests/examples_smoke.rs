//! Each example binary, run as a user runs it, on a fresh folder: what it
//! prints is what the README promises.

use std::path::Path;
use std::process::{Command, Output};

/// Runs example `bin` with `args` on the store folder `store`.
fn example(bin: &str, store: &Path, args: &[&str]) -> Output {
    let exe = match bin {
        "quickstart" => env!("CARGO_BIN_EXE_quickstart"),
        "crash_resume" => env!("CARGO_BIN_EXE_crash_resume"),
        "agent_approval" => env!("CARGO_BIN_EXE_agent_approval"),
        "retention" => env!("CARGO_BIN_EXE_retention"),
        "replay_check" => env!("CARGO_BIN_EXE_replay_check"),
        "reminder" => env!("CARGO_BIN_EXE_reminder"),
        other => panic!("no example {other}"),
    };
    Command::new(exe)
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("the example starts")
}

/// The example's standard output, after checking that it succeeded.
fn succeeded(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The outcome column of the table row whose call is `call`.
fn outcome_of<'a>(stdout: &'a str, call: &str) -> &'a str {
    let row = stdout
        .lines()
        .find(|line| line.split("  ").any(|cell| cell.trim() == call))
        .unwrap_or_else(|| panic!("no row for {call} in:\n{stdout}"));
    let cells: Vec<&str> = row
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let at = cells.iter().position(|c| *c == call).unwrap();
    cells[at + 1]
}

#[test]
fn quickstart_second_run_makes_no_expensive_call() {
    let dir = tempfile::tempdir().unwrap();

    let first = succeeded(example("quickstart", dir.path(), &[]));
    assert!(
        first.contains("expensive calls that ran: 3 of 3"),
        "{first}"
    );
    assert_eq!(outcome_of(&first, "draft_reply(ticket 1)"), "ran");

    let second = succeeded(example("quickstart", dir.path(), &[]));
    assert!(
        second.contains("expensive calls that ran: 0 of 3"),
        "{second}"
    );
    assert!(second.contains("cost: $0.000 (saved $0.090)"), "{second}");
    assert!(second.contains("time: 0.0 s (saved 3.6 s)"), "{second}");
    assert!(second.contains("nothing expensive ran again"), "{second}");
    assert!(!first.contains("nothing expensive ran again"), "{first}");
    for ticket in 1..=3 {
        let call = format!("draft_reply(ticket {ticket})");
        assert_eq!(outcome_of(&second, &call), "memo hit", "{second}");
    }
    // The same drafts both times: the committed ones.
    let drafts = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("ticket "))
            .map(String::from)
            .collect()
    };
    assert_eq!(drafts(&first), drafts(&second));
}

#[test]
fn crash_resume_replays_finished_steps_and_never_repeats_the_committed_call() {
    let dir = tempfile::tempdir().unwrap();
    let lease = ["--lease-ms", "1000"];

    let crashed = example(
        "crash_resume",
        dir.path(),
        &[&["--crash-at", "write"][..], &lease].concat(),
    );
    let stdout = String::from_utf8_lossy(&crashed.stdout);
    assert!(
        !crashed.status.success(),
        "it should have crashed:\n{stdout}"
    );
    assert!(
        stdout.contains("aborting inside step \"write\", after llm_write(section 1) committed"),
        "{stdout}"
    );

    let resumed = succeeded(example("crash_resume", dir.path(), &lease));
    assert!(resumed.contains("attempt 2 of run report-1"), "{resumed}");
    assert_eq!(outcome_of(&resumed, "search_web"), "replayed");
    assert_eq!(outcome_of(&resumed, "llm_outline"), "replayed");
    assert_eq!(outcome_of(&resumed, "llm_write(section 1)"), "memo hit");
    assert_eq!(outcome_of(&resumed, "llm_write(section 2)"), "ran");
    assert_eq!(outcome_of(&resumed, "send_newsletter"), "ran");
    assert!(
        resumed.contains("expensive calls that ran: 2 of 5"),
        "{resumed}"
    );

    // The run has completed: a third run replays everything.
    let again = succeeded(example("crash_resume", dir.path(), &lease));
    assert!(
        again.contains("expensive calls that ran: 0 of 5"),
        "{again}"
    );
}

#[test]
fn agent_approval_executes_once_when_approved_and_never_again() {
    let dir = tempfile::tempdir().unwrap();

    let waiting = succeeded(example("agent_approval", dir.path(), &[]));
    assert_eq!(outcome_of(&waiting, "plan_action"), "ran");
    assert_eq!(outcome_of(&waiting, "signal \"approval\""), "waiting");
    assert_eq!(outcome_of(&waiting, "issue_refund"), "not reached: waiting");
    assert!(waiting.contains("--approve refund-1042"), "{waiting}");

    let approved = succeeded(example(
        "agent_approval",
        dir.path(),
        &["--approve", "refund-1042"],
    ));
    assert_eq!(outcome_of(&approved, "plan_action"), "replayed");
    assert_eq!(outcome_of(&approved, "signal \"approval\""), "approved");
    assert_eq!(outcome_of(&approved, "issue_refund"), "ran");
    assert!(
        approved.contains("executed: refund $42.00 on order A-1042"),
        "{approved}"
    );

    let twice = succeeded(example(
        "agent_approval",
        dir.path(),
        &["--approve", "refund-1042"],
    ));
    assert!(
        twice.contains("has already ended (completed); nothing sent"),
        "{twice}"
    );
    assert_eq!(outcome_of(&twice, "issue_refund"), "replayed");
    assert!(
        twice.contains("expensive calls that ran: 0 of 2"),
        "{twice}"
    );
}

#[test]
fn agent_approval_rejected_ends_the_run_without_executing() {
    let dir = tempfile::tempdir().unwrap();
    let run = ["--run", "refund-7"];
    succeeded(example("agent_approval", dir.path(), &run));

    let rejected = succeeded(example(
        "agent_approval",
        dir.path(),
        &["--reject", "refund-7"],
    ));
    assert_eq!(outcome_of(&rejected, "signal \"approval\""), "rejected");
    assert_eq!(outcome_of(&rejected, "issue_refund"), "skipped: rejected");
    assert!(rejected.contains("the run has ended"), "{rejected}");

    // An approval after the rejection changes nothing.
    let late = succeeded(example(
        "agent_approval",
        dir.path(),
        &["--approve", "refund-7"],
    ));
    assert!(late.contains("nothing sent"), "{late}");
    assert_eq!(outcome_of(&late, "issue_refund"), "skipped: rejected");
}

#[test]
fn retention_removes_runs_that_ended_before_the_cutoff_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();

    for pass in 0..2 {
        let out = succeeded(example("retention", dir.path(), &[]));
        let removed = "removed: memo entries, run record, marker";
        // A second pass makes the same runs again (the removed ones anew),
        // and the sweep removes the same ones.
        let verdict = |run: &str| {
            let row = out
                .lines()
                .find(|l| l.starts_with(run))
                .unwrap()
                .to_string();
            row.contains(removed)
        };
        assert!(verdict("nightly-2025-01-02"), "pass {pass}:\n{out}");
        assert!(verdict("nightly-2025-01-03"), "pass {pass}:\n{out}");
        assert!(verdict("nightly-2025-01-04"), "pass {pass}:\n{out}");
        assert!(!verdict("nightly-2025-01-05"), "pass {pass}:\n{out}");
        assert!(out.contains("kept: within the retention"), "{out}");
        assert!(out.contains("kept: not ended (running)"), "{out}");
        assert!(out.contains("removed 3 runs"), "{out}");
        assert!(out.contains("would remove 3 runs"), "{out}");
    }
}

#[test]
fn replay_check_passes_a_patched_change_and_fails_a_renamed_step() {
    let dir = tempfile::tempdir().unwrap();
    succeeded(example(
        "replay_check",
        dir.path(),
        &["seed", "--runs", "2"],
    ));

    let patched = succeeded(example("replay_check", dir.path(), &["check"]));
    let broken = example("replay_check", dir.path(), &["check", "--broken"]);

    assert!(
        patched.contains("2 runs checked, 2 replay, 0 do not"),
        "{patched}"
    );
    assert!(
        patched.contains("old branch of patch \"sms\": 2"),
        "{patched}"
    );
    assert_eq!(broken.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&broken.stdout);
    assert!(
        stdout
            .contains("non-determinism at step 0: recorded \"welcome\", the code calls \"greet\""),
        "{stdout}"
    );
}

#[test]
fn agent_approval_reminds_then_rejects_by_itself_when_nobody_answers() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--run",
        "refund-late",
        "--remind-after",
        "1ms",
        "--reject-after",
        "2ms",
    ];
    let expired = succeeded(example("agent_approval", dir.path(), &args));
    assert!(expired.contains("reminder: a refund waits"), "{expired}");
    assert_eq!(
        outcome_of(&expired, "signal \"approval\""),
        "no answer in time"
    );
    assert_eq!(
        outcome_of(&expired, "issue_refund"),
        "skipped: rejected by the deadline"
    );
    assert!(expired.contains("rejected automatically"), "{expired}");

    // An approval after the deadline changes nothing.
    let late = succeeded(example(
        "agent_approval",
        dir.path(),
        &["--approve", "refund-late"],
    ));
    assert!(late.contains("nothing sent"), "{late}");
}

#[test]
fn reminder_sleeps_across_a_restart_and_goes_out_once() {
    let dir = tempfile::tempdir().unwrap();
    let started = succeeded(example("reminder", dir.path(), &["--in", "300ms"]));
    assert!(started.contains("still sleeping"), "{started}");
    // A new process, later: the run goes on past its sleep, once.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let woke = succeeded(example("reminder", dir.path(), &[]));
    assert!(woke.contains("the reminder went out now"), "{woke}");
    let again = succeeded(example("reminder", dir.path(), &[]));
    assert!(again.contains("went out before; nothing to do"), "{again}");
}
