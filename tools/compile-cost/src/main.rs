//! What `#[memoized]` adds to its users' build times, beside
//! `#[tracing::instrument]` (issue 28).
//!
//! Writes a scratch workspace (outside the repository, with a target dir of
//! its own) holding one crate per variant: a library of `--functions`
//! `async fn`s of three arguments and a binary that calls each once. After
//! one build of everything (the dependencies, prebuilt from then on), every
//! repetition rebuilds each variant's crate from scratch (`CARGO_INCREMENTAL=0`,
//! debug; its `lib.rs` touched, so only that crate and its binary) and
//! times it. The variants alternate within a repetition, in reverse order
//! every other repetition, so load from other processes hits all alike.
//!
//! ```sh
//! cargo run --release -p memo-compile-cost -- --functions 200 --runs 5
//! ```
//!
//! `--repo` builds the crates against another checkout of memo (say, an
//! export of an earlier commit), to compare two versions of the macro.
//!
//! Prints the medians of wall and CPU time (user + system of cargo and the
//! compilers it ran), and the ratios of `#[memoized]` to
//! `#[tracing::instrument]`, both of the whole build and of what each adds
//! to the plain functions' build, each the median of the repetitions'
//! ratios. See BENCHMARKS.md ("Compile cost of `#[memoized]`").

mod generate;
mod measure;

use std::path::PathBuf;
use std::process::ExitCode;

use generate::Variant;

/// The command line.
struct Args {
    functions: usize,
    runs: usize,
    dir: PathBuf,
    repo: PathBuf,
    variants: Vec<Variant>,
}

const USAGE: &str = "usage: memo-compile-cost [--functions N (200)] [--runs R (5)] \
[--dir SCRATCH (<temp>/memo-compile-cost)] [--repo MEMO_CHECKOUT (this one)] [--variants plain,instrument,memoized,memoized_options]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        functions: 200,
        runs: 5,
        dir: std::env::temp_dir().join("memo-compile-cost"),
        // This repository: the tool is built from it.
        repo: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")),
        variants: Variant::ALL.to_vec(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--functions" => args.functions = number(&value()?)?,
            "--runs" => args.runs = number(&value()?)?,
            "--dir" => args.dir = PathBuf::from(value()?),
            "--repo" => args.repo = PathBuf::from(value()?),
            "--variants" => {
                args.variants = value()?
                    .split(',')
                    .map(|v| {
                        Variant::parse(v).ok_or_else(|| format!("unknown variant {v:?}\n{USAGE}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if args.runs == 0 || args.functions == 0 {
        return Err(format!(
            "--runs and --functions must be at least 1\n{USAGE}"
        ));
    }
    Ok(args)
}

fn number(text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a number\n{USAGE}"))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    match measure::run(
        &args.dir,
        &args.repo,
        args.functions,
        args.runs,
        &args.variants,
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("memo-compile-cost: {message}");
            ExitCode::FAILURE
        }
    }
}
