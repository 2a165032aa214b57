//! Many worker processes on the same runs in one store: several OS processes
//! of the `order_worker` example work through the same orders at once (one
//! of them crash halfway), on a local folder and, when `MEMO_S3_ENDPOINT`
//! is set, on S3. Every worker must report the same committed outputs, and
//! no side effect may run once its result has committed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ORDERS: u32 = 6;
const STEPS: [&str; 3] = ["reserve", "charge", "email"];
/// A worker that has not finished by then is stuck.
const WORKER_DEADLINE: Duration = Duration::from_secs(180);

/// One worker process to start: its name and extra arguments.
struct Worker {
    name: &'static str,
    args: Vec<String>,
}

fn workers() -> Vec<Worker> {
    let arg = |s: &str| s.to_string();
    vec![
        Worker {
            name: "a",
            args: vec![],
        },
        Worker {
            name: "b",
            args: vec![],
        },
        Worker {
            name: "c",
            args: vec![arg("--start"), (ORDERS / 2).to_string()],
        },
        // Crash in their second side effect: one before its result is
        // memoized, one after it is memoized but before its step commits.
        // Each starts at an order the others reach last, so it gets there
        // first and the crash happens.
        Worker {
            name: "crash-before-memo",
            args: vec![
                arg("--start"),
                (ORDERS / 2 - 1).to_string(),
                arg("--crash-after-effects"),
                arg("2"),
            ],
        },
        Worker {
            name: "crash-after-memo",
            args: vec![
                arg("--start"),
                (ORDERS - 1).to_string(),
                arg("--crash-after-commits"),
                arg("2"),
            ],
        },
    ]
}

#[test]
fn worker_processes_on_a_local_folder_agree_and_never_repeat_a_committed_effect() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("store").display());
    run_workers(&url, &[], dir.path());
}

#[test]
fn worker_processes_on_s3_agree_and_never_repeat_a_committed_effect() {
    let Ok(endpoint) = std::env::var("MEMO_S3_ENDPOINT") else {
        // Straight to stderr: libtest captures eprintln! of passing tests.
        writeln!(
            std::io::stderr(),
            "skipped: MEMO_S3_ENDPOINT not set (worker_processes_on_s3_agree_and_never_repeat_a_committed_effect)"
        )
        .ok();
        return;
    };
    let bucket = std::env::var("MEMO_S3_BUCKET")
        .expect("MEMO_S3_BUCKET must name a bucket when MEMO_S3_ENDPOINT is set");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let url = format!(
        "s3://{bucket}/memo-tests/order-workers-{}-{nanos}",
        std::process::id()
    );
    writeln!(std::io::stderr(), "running against {endpoint}, {url}").ok();
    let env_or = |name: &str, default: &str| std::env::var(name).unwrap_or(default.into());
    let options = [
        format!("endpoint={endpoint}"),
        format!("region={}", env_or("AWS_REGION", "us-east-1")),
        format!(
            "access_key_id={}",
            env_or("AWS_ACCESS_KEY_ID", "memo-tests")
        ),
        format!(
            "secret_access_key={}",
            env_or("AWS_SECRET_ACCESS_KEY", "memo-tests")
        ),
        "max_retries=5".to_string(),
        "retry_timeout=30s".to_string(),
    ];
    let dir = tempfile::tempdir().unwrap();
    run_workers(&url, &options, dir.path());
}

/// Starts every worker on `url`, lets them go at once, waits for them and
/// checks what they report and what their side-effect log shows.
fn run_workers(url: &str, options: &[String], scratch: &Path) {
    let effects = scratch.join("effects.log");
    let go = scratch.join("go");
    let mut children: Vec<(&str, Child)> = Vec::new();
    for worker in workers() {
        let mut command = Command::new(env!("CARGO_BIN_EXE_order_worker"));
        command
            .args(["--store", url, "--worker", worker.name])
            .arg("--effects")
            .arg(&effects)
            .arg("--go")
            .arg(&go)
            .args(["--orders", &ORDERS.to_string(), "--effect-ms", "20"])
            // A crashed worker's orders are taken over once its lease expires.
            .args(["--lease-ms", "1000"])
            .args(&worker.args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for option in options {
            command.args(["--option", option]);
        }
        children.push((worker.name, command.spawn().unwrap()));
    }
    std::fs::write(&go, b"").unwrap();

    let mut reports: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
    for (name, child) in children {
        let (status, stdout, stderr) = wait_bounded(child);
        if name.starts_with("crash") {
            assert_eq!(status, Some(3), "worker {name} did not crash: {stderr}");
            continue;
        }
        assert_eq!(status, Some(0), "worker {name} failed: {stderr}");
        reports.insert(name, parse_report(&stdout));
    }

    // Every worker completed every order, with the same outputs.
    let (first, expected) = reports.iter().next().unwrap();
    assert_eq!(
        expected.len(),
        ORDERS as usize,
        "worker {first}: {expected:?}"
    );
    for (name, report) in &reports {
        assert_eq!(report, expected, "workers {first} and {name} disagree");
    }

    let log = std::fs::read_to_string(&effects).unwrap();
    check_effects_log(&log, expected);
}

/// Waits for `child` up to [`WORKER_DEADLINE`], killing it if it overruns.
fn wait_bounded(mut child: Child) -> (Option<i32>, String, String) {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > WORKER_DEADLINE {
            child.kill().ok();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `completed <run> <outputs>` lines, by run.
fn parse_report(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split(' ');
            match (words.next(), words.next(), words.next()) {
                (Some("completed"), Some(run), Some(outputs)) => {
                    Some((run.to_string(), outputs.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

/// The log's promises: each step of each order committed one execution,
/// whose token is the output every worker reported; and no side effect ran
/// for a memo read that began after the step's commit was logged.
fn check_effects_log(log: &str, outputs: &BTreeMap<String, String>) {
    // (run, step) -> the line number of its commit and the committed token.
    let mut commits: BTreeMap<(&str, &str), (usize, &str)> = BTreeMap::new();
    // token -> the line number of its memo read.
    let mut checks: BTreeMap<&str, usize> = BTreeMap::new();
    let mut execs: Vec<(usize, &str, &str, &str)> = Vec::new();
    let mut workers_per_run: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (n, line) in log.lines().enumerate() {
        let words: Vec<&str> = line.split(' ').collect();
        let [what, run, step, token] = words[..] else {
            panic!("malformed log line {n}: {line:?}");
        };
        let worker = token.split('.').next().unwrap();
        workers_per_run.entry(run).or_default().insert(worker);
        match what {
            "check" => {
                checks.insert(token, n);
            }
            "exec" => execs.push((n, run, step, token)),
            "committed" => {
                let earlier = commits.insert((run, step), (n, token));
                assert!(earlier.is_none(), "{run} {step} committed twice");
            }
            _ => panic!("unknown log line {n}: {line:?}"),
        }
    }

    for (run, reported) in outputs {
        let committed: Vec<&str> = STEPS
            .iter()
            .map(|step| match commits.get(&(run.as_str(), *step)) {
                Some((_, token)) => *token,
                None => panic!("{run} {step} has no committed execution in the log"),
            })
            .collect();
        assert_eq!(*reported, committed.join(","), "{run}");
    }

    for (n, run, step, token) in &execs {
        let read_at = checks[token];
        let (committed_at, committed) = commits[&(*run, *step)];
        assert!(
            read_at < committed_at,
            "{run} {step} ran again (line {n}, token {token}) for a read begun \
             after {committed} committed (line {committed_at})"
        );
    }

    // The race this test is about happened: some order was worked on by
    // more than one worker.
    assert!(
        workers_per_run.values().any(|workers| workers.len() > 1),
        "no two workers ever touched one order: {workers_per_run:?}"
    );
    let uncommitted = execs.len() - commits.len();
    writeln!(
        std::io::stderr(),
        "{} side effects ran, {} committed, {uncommitted} lost a race or a crash",
        execs.len(),
        commits.len()
    )
    .ok();
}
