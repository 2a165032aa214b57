//! Builds the scratch crates, times them, and prints the table.

use std::fs::{File, FileTimes};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use crate::generate::{self, Variant};

/// One timed build: wall time and CPU time (user + system) of cargo and
/// the compilers it ran.
#[derive(Debug, Clone, Copy)]
struct Build {
    wall: Duration,
    cpu: Duration,
}

/// Writes the scratch workspace, builds it once, then times `runs`
/// repetitions of each variant's rebuild and prints the table.
pub(crate) fn run(
    dir: &Path,
    repo: &Path,
    functions: usize,
    runs: usize,
    variants: &[Variant],
) -> Result<(), String> {
    let repo = repo
        .canonicalize()
        .map_err(|e| format!("{}: {e}", repo.display()))?;
    generate::workspace(dir, &repo, functions)
        .map_err(|e| format!("writing {}: {e}", dir.display()))?;
    eprintln!(
        "scratch workspace: {} ({functions} functions per variant)",
        dir.display()
    );
    eprintln!("building the dependencies and every variant once (untimed)...");
    let packages: Vec<&str> = variants.iter().map(|v| v.crate_name()).collect();
    cargo(dir, &packages)?;

    let mut builds: Vec<Vec<Build>> = vec![Vec::new(); variants.len()];
    for run in 0..runs {
        let order: Vec<usize> = if run % 2 == 0 {
            (0..variants.len()).collect()
        } else {
            (0..variants.len()).rev().collect()
        };
        for i in order {
            let variant = variants[i];
            touch(&dir.join(variant.crate_name()).join("src/lib.rs"))?;
            let build = cargo(dir, &[variant.crate_name()])?;
            eprintln!(
                "run {}/{runs}: {:<20} wall {:6.2} s, cpu {:6.2} s",
                run + 1,
                variant.crate_name(),
                build.wall.as_secs_f64(),
                build.cpu.as_secs_f64()
            );
            builds[i].push(build);
        }
    }
    print_report(functions, runs, variants, &builds);
    Ok(())
}

/// Makes cargo see `path` as changed, so its crate is rebuilt.
fn touch(path: &Path) -> Result<(), String> {
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_times(FileTimes::new().set_modified(SystemTime::now())))
        .map_err(|e| format!("touching {}: {e}", path.display()))
}

/// `cargo build` of `packages` (lib and bin) in the scratch workspace,
/// with its own target dir, timed.
fn cargo(dir: &Path, packages: &[&str]) -> Result<Build, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(dir)
        .args(["build", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("CARGO_INCREMENTAL", "0");
    for package in packages {
        command.args(["-p", package]);
    }
    let cpu_before = children_cpu()?;
    let started = Instant::now();
    let status = command
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    let wall = started.elapsed();
    let cpu = children_cpu()? - cpu_before;
    if !status.success() {
        return Err(format!(
            "cargo build of {packages:?} in {} failed: {status}",
            dir.display()
        ));
    }
    Ok(Build { wall, cpu })
}

/// CPU time (user + system) of this process's waited-for children and
/// their descendants, from `/proc/self/stat` (Linux; `cutime` and `cstime`,
/// in clock ticks of 1/100 s, the `USER_HZ` of every Linux architecture
/// cargo builds for).
fn children_cpu() -> Result<Duration, String> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| format!("reading /proc/self/stat (Linux only): {e}"))?;
    // Fields after the command name, which may hold spaces: state is
    // field 3, cutime 16, cstime 17.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("unexpected /proc/self/stat: {stat}"))
    };
    Ok(Duration::from_millis((ticks(13)? + ticks(14)?) * 10))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn print_report(functions: usize, runs: usize, variants: &[Variant], builds: &[Vec<Build>]) {
    let seconds = |i: usize, cpu: bool| -> Vec<f64> {
        builds[i]
            .iter()
            .map(|b| if cpu { b.cpu } else { b.wall }.as_secs_f64())
            .collect()
    };
    let find = |v: Variant| variants.iter().position(|&x| x == v);
    let (plain, instrument) = (find(Variant::Plain), find(Variant::Instrument));
    println!(
        "\n{functions} functions per crate, {runs} builds of each (medians; ratios are medians of each repetition's ratio)\n"
    );
    println!(
        "| variant | wall | CPU | CPU added per function | CPU / instrument's | added CPU / instrument's added |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, variant) in variants.iter().enumerate() {
        let wall = median(&mut seconds(i, false));
        let cpu = median(&mut seconds(i, true));
        let added = plain.map(|p| {
            let mut per_run: Vec<f64> = (0..runs)
                .map(|r| {
                    (builds[i][r].cpu.as_secs_f64() - builds[p][r].cpu.as_secs_f64())
                        / functions as f64
                })
                .collect();
            format!("{:.1} ms", median(&mut per_run) * 1000.0)
        });
        let ratio = |subtract: bool| {
            instrument.map(|t| {
                let mut per_run: Vec<f64> = (0..runs)
                    .map(|r| {
                        let base = match (subtract, plain) {
                            (true, Some(p)) => builds[p][r].cpu.as_secs_f64(),
                            _ => 0.0,
                        };
                        (builds[i][r].cpu.as_secs_f64() - base)
                            / (builds[t][r].cpu.as_secs_f64() - base)
                    })
                    .collect();
                format!("{:.2}", median(&mut per_run))
            })
        };
        let dash = || "–".to_owned();
        println!(
            "| {} | {wall:.2} s | {cpu:.2} s | {} | {} | {} |",
            variant.label(),
            added.unwrap_or_else(dash),
            ratio(false).unwrap_or_else(dash),
            if plain.is_some() {
                ratio(true).unwrap_or_else(dash)
            } else {
                dash()
            },
        );
    }
}
