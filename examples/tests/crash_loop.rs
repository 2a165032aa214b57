//! The crash loop with real processes: the `crash_loop_worker` example runs
//! a long workflow run on a local folder and is killed with SIGKILL at
//! seeded moments (after a seeded number of new lines in its effects log),
//! then started again, until its run completes; at least 50 kills in all.
//! No side effect may run once its memo entry has committed, and the final
//! output must be the committed value of every step.
//!
//! `MEMO_CRASH_SEED=S` picks the kill moments (default 0).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const STEPS: u32 = 40;
const MIN_KILLS: u32 = 50;
/// The test gives up (and fails) after this long.
const DEADLINE: Duration = Duration::from_secs(240);

#[test]
fn a_worker_killed_at_random_moments_never_repeats_a_committed_side_effect() {
    let seed = std::env::var("MEMO_CRASH_SEED").map_or(0, |s| s.parse().expect("a number"));
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("store").display());
    let started = Instant::now();
    let (mut kills, mut runs) = (0, 0);
    while kills < MIN_KILLS {
        let run = format!("crash-loop-{runs}");
        let log = dir.path().join(format!("{run}.log"));
        let (output, killed) = run_until_complete(&url, &run, &log, &mut rng, started);
        kills += killed;
        runs += 1;
        check_effects(&std::fs::read_to_string(&log).unwrap(), &output);
    }
    println!("crash loop: seed {seed}, {kills} kills over {runs} run(s) of {STEPS} steps");
}

/// Starts the worker on `run` and kills it at seeded moments until the run
/// completes; returns the worker's output and how many kills it took.
fn run_until_complete(
    url: &str,
    run: &str,
    log: &Path,
    rng: &mut StdRng,
    started: Instant,
) -> (Vec<String>, u32) {
    let mut kills = 0;
    loop {
        let grown = lines(log) + rng.random_range(0..=3);
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash_loop_worker"))
            .args(["--store", url, "--run", run, "--steps", &STEPS.to_string()])
            // The loop kills the process, never the machine, so the folder's
            // fsyncs would add nothing it checks; on a busy shared disk one
            // flush can outlast the worker's 100 ms lease.
            .args(["--option", "fsync=false"])
            .arg("--effects")
            .arg(log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start crash_loop_worker");
        loop {
            assert!(
                started.elapsed() < DEADLINE,
                "the crash loop did not finish within {DEADLINE:?}"
            );
            if let Some(status) = child.try_wait().unwrap() {
                let mut stdout = String::new();
                let mut stderr = String::new();
                child
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut stdout)
                    .unwrap();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut stderr)
                    .unwrap();
                assert!(status.success(), "the worker failed ({status}): {stderr}");
                let output = stdout
                    .lines()
                    .find_map(|line| line.strip_prefix("output "))
                    .unwrap_or_else(|| panic!("no output line in {stdout:?}"));
                return (output.split(',').map(String::from).collect(), kills);
            }
            if lines(log) >= grown {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                break;
            }
            // Polls the log's growth; the test's timing never decides its outcome.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn lines(log: &Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |text| text.lines().count())
}

/// No `exec` of a step after a `check` that came after the step's
/// `committed` line; every output is the step's committed value.
fn check_effects(log: &str, output: &[String]) {
    assert_eq!(output.len(), STEPS as usize, "output {output:?}");
    let mut committed: BTreeMap<u32, String> = BTreeMap::new();
    let mut late_checks: Vec<String> = Vec::new();
    let mut executed: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for line in log.lines() {
        // A killed worker can leave a half-written last line.
        let Some((kind, step, token)) = parse(line) else {
            continue;
        };
        match kind {
            "check" if committed.contains_key(&step) => late_checks.push(token.to_string()),
            "exec" => {
                assert!(
                    !late_checks.iter().any(|t| t == token),
                    "step {step} ran again (token {token}) after its memo entry committed ({})",
                    committed[&step]
                );
                executed.entry(step).or_default().push(token.to_string());
            }
            "committed" => {
                let first = committed.entry(step).or_insert_with(|| token.to_string());
                assert_eq!(first, token, "step {step} committed two values");
            }
            _ => {}
        }
    }
    for (step, value) in output.iter().enumerate() {
        let step = u32::try_from(step).unwrap();
        let ran = executed.get(&step).map_or(&[][..], Vec::as_slice);
        assert!(
            ran.contains(value),
            "step {step}: {value} was never executed ({ran:?})"
        );
        if let Some(committed) = committed.get(&step) {
            assert_eq!(
                value, committed,
                "step {step}: output is not the committed value"
            );
        }
    }
}

fn parse(line: &str) -> Option<(&str, u32, &str)> {
    let mut parts = line.split(' ');
    let (kind, step, token) = (parts.next()?, parts.next()?, parts.next()?);
    Some((kind, step.parse().ok()?, token))
}
