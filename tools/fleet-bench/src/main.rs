//! A fleet of worker processes on one store, measured (issue 25, item 1).
//!
//! For each number of workers N (`--workers 1,2,4,8`) the driver starts N
//! copies of this binary as worker processes (`memo-fleet-bench worker`)
//! on one store, a local folder, a SQLite file or an S3 bucket, and they
//! run `--runs` runs of a five-step workflow between them (two
//! `#[memoized]` calls per step; one run in `--signal-every` waits for a
//! signal before its third step) through memo's own `workflow::Worker`
//! loop, each worker submitting its share and keeping `--inflight` of them
//! submitted and not yet completed.
//! Before the first N of each `--retained` level, that many finished runs
//! are written into the store directly, so the table shows how the costs
//! grow with the runs a store holds.
//!
//! ```sh
//! cargo run --release -p memo-fleet-bench -- run --store folder --workers 1,2,4,8 --runs 200
//! cargo run --release -p memo-fleet-bench -- run --store sqlite --workers 1,2,4,8 --runs 200
//! cargo run --release -p memo-fleet-bench -- run --store s3 --latency-ms 10   # MEMO_S3_ENDPOINT, MEMO_S3_BUCKET
//! cargo run --release -p memo-fleet-bench -- idle --workers 4 --idle-max-ms 0,8000,32000
//! ```
//!
//! Prints one Markdown row per configuration: runs and steps per second in
//! total and per worker, the p50 and p99 of a durable step (its two calls
//! and its commit, timed where its body ran) and of a run end to end (from
//! its submit to the return of its completion's commit), and the requests
//! and bytes per step by kind, counted by `CountingStore` in each worker and
//! summed: everything the fleet sent, submits, signals, polls and the runs'
//! ends included. See BENCHMARKS.md ("A fleet of workers on one store").
//!
//! `idle` measures a fleet with nothing to do (`idle.rs`): the requests its
//! polls make, and how soon it finds a run another process made due.

mod driver;
mod idle;
mod stores;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use futures::{StreamExt, TryStreamExt};
use memo_runtime::object_store::path::Path;
use memo_runtime::store::{LocalFolder, SqliteStore, StoreAndPrefix, store_from_url};
use memo_runtime::testing::RequestCounts;
use serde::{Deserialize, Serialize};

#[derive(Debug, Parser)]
#[command(about = "A fleet of memo workers on one store, measured")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the benchmark: every configuration, one table.
    Run(driver::RunArgs),
    /// What idle workers cost, and how soon they find a run made due.
    Idle(idle::IdleArgs),
    /// One worker process (started by `run`).
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run(args) => driver::main(args),
        Command::Idle(args) => idle::main(args),
        Command::Worker(args) => worker::main(args),
    }
}

/// Which store the fleet shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    /// A local folder (`LocalFolder`).
    Folder,
    /// One SQLite file in a local folder (`SqliteStore`), shared by every
    /// worker process.
    Sqlite,
    /// An S3 bucket (moto's `moto_server` in BENCHMARKS.md).
    S3,
}

/// The store, as the driver and every worker open it.
#[derive(Debug, Clone, clap::Args)]
struct StoreArgs {
    #[arg(long, value_enum, default_value_t = StoreKind::Folder)]
    store: StoreKind,
    /// The folder's root (a fresh folder under it per configuration, which
    /// holds the SQLite file with `--store sqlite`); default: a folder in
    /// the system's temporary folder.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Writes to the folder or the SQLite file do not wait for the disk
    /// (`with_fsync(false)`, `open_with_fsync(file, false)`).
    #[arg(long)]
    no_fsync: bool,
    /// The S3 endpoint; default: `MEMO_S3_ENDPOINT`.
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// The bucket; default: `MEMO_S3_BUCKET`.
    #[arg(long)]
    s3_bucket: Option<String>,
    /// A fixed wait before each request, in ms, as a bucket's round trip;
    /// default 10 on S3, 0 on a folder.
    #[arg(long)]
    latency_ms: Option<u64>,
    /// Keeps what each configuration stored (its folder, or its prefix in
    /// the bucket); by default it is removed once the configuration is
    /// measured (10,000 retained runs take about 200 MB on a folder).
    #[arg(long)]
    keep: bool,
}

impl StoreArgs {
    fn latency(&self) -> Duration {
        let default = match self.store {
            StoreKind::Folder | StoreKind::Sqlite => 0,
            StoreKind::S3 => 10,
        };
        Duration::from_millis(self.latency_ms.unwrap_or(default))
    }

    fn root(&self) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("memo-fleet-bench"))
    }

    /// The store with `prefix` (a folder below the root, or a prefix in the
    /// bucket), without the added latency.
    fn open(&self, prefix: &str) -> anyhow::Result<StoreAndPrefix> {
        match self.store {
            StoreKind::Folder => {
                let folder = self.root().join(prefix);
                std::fs::create_dir_all(&folder)?;
                let store = LocalFolder::new(&folder)?.with_fsync(!self.no_fsync);
                Ok(StoreAndPrefix {
                    store: Arc::new(store),
                    prefix: Path::default(),
                    seal: Default::default(),
                })
            }
            StoreKind::Sqlite => {
                let file = self.root().join(prefix).join("memo.db");
                let store = SqliteStore::open_with_fsync(file, !self.no_fsync)?;
                Ok(StoreAndPrefix {
                    store: Arc::new(store),
                    prefix: Path::default(),
                    seal: Default::default(),
                })
            }
            StoreKind::S3 => {
                let endpoint = setting(&self.s3_endpoint, "MEMO_S3_ENDPOINT")?;
                let bucket = setting(&self.s3_bucket, "MEMO_S3_BUCKET")?;
                let region = std::env::var("AWS_REGION").unwrap_or("us-east-1".into());
                let key = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or("memo-bench".into());
                let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or("memo-bench".into());
                let options = [
                    ("endpoint", endpoint),
                    ("region", region),
                    ("access_key_id", key),
                    ("secret_access_key", secret),
                ];
                Ok(store_from_url(&format!("s3://{bucket}/{prefix}"), options)?)
            }
        }
    }

    /// Removes what was stored at `prefix` (see `--keep`): the folder, or
    /// every object under the prefix in the bucket.
    fn remove(&self, prefix: &str) -> anyhow::Result<()> {
        if self.keep {
            return Ok(());
        }
        match self.store {
            StoreKind::Folder | StoreKind::Sqlite => {
                match std::fs::remove_dir_all(self.root().join(prefix)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                    _ => Ok(()),
                }
            }
            StoreKind::S3 => {
                let opened = self.open(prefix)?;
                let tokio = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                tokio.block_on(async {
                    let listed = opened.store.list(Some(&opened.prefix));
                    let paths = listed.map_ok(|meta| meta.location).boxed();
                    let deleted = opened.store.delete_stream(paths);
                    deleted.try_for_each(|_| futures::future::ok(())).await
                })?;
                Ok(())
            }
        }
    }

    /// The arguments that give a worker process this store.
    fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--store".to_string(),
            format!("{:?}", self.store).to_lowercase(),
        ];
        let mut add = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                args.extend([name.to_string(), value]);
            }
        };
        add("--dir", self.dir.as_ref().map(|d| d.display().to_string()));
        add("--s3-endpoint", self.s3_endpoint.clone());
        add("--s3-bucket", self.s3_bucket.clone());
        add("--latency-ms", self.latency_ms.map(|ms| ms.to_string()));
        if self.no_fsync {
            args.push("--no-fsync".into());
        }
        args
    }
}

fn setting(given: &Option<String>, var: &str) -> anyhow::Result<String> {
    match given {
        Some(value) => Ok(value.clone()),
        None => std::env::var(var).map_err(|_| anyhow::anyhow!("{var} is not set")),
    }
}

/// `name` below `prefix` (which may be empty).
fn under(prefix: &Path, name: &str) -> String {
    match prefix.as_ref() {
        "" => name.to_string(),
        prefix => format!("{prefix}/{name}"),
    }
}

/// The requests a worker made, by kind, and the bytes they moved.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Counts {
    gets: u64,
    heads: u64,
    creates: u64,
    overwrites: u64,
    lists: u64,
    objects_listed: u64,
    /// Objects deleted (a delete stream counts each of its paths).
    deletes: u64,
    bytes_put: u64,
    bytes_read: u64,
}

impl Counts {
    fn from_store(c: RequestCounts, bytes_read: u64) -> Counts {
        Counts {
            gets: c.gets + c.get_ranges,
            heads: c.heads,
            creates: c.creates,
            overwrites: c.puts + c.multipart_uploads + c.copies + c.renames,
            lists: c.lists + c.lists_with_offset + c.lists_with_delimiter,
            objects_listed: c.objects_listed,
            deletes: c.delete_paths,
            bytes_put: c.bytes_put,
            bytes_read,
        }
    }

    fn add(&mut self, o: &Counts) {
        self.gets += o.gets;
        self.heads += o.heads;
        self.creates += o.creates;
        self.overwrites += o.overwrites;
        self.lists += o.lists;
        self.objects_listed += o.objects_listed;
        self.deletes += o.deletes;
        self.bytes_put += o.bytes_put;
        self.bytes_read += o.bytes_read;
    }

    fn requests(&self) -> u64 {
        self.gets + self.heads + self.creates + self.overwrites + self.lists + self.deletes
    }
}

/// What a worker process reports when it stops.
#[derive(Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    counts: Counts,
    /// Durations of the durable steps whose body ran in this worker, µs.
    step_us: Vec<u64>,
    /// Submit-to-completion times of this worker's own runs, µs.
    run_us: Vec<u64>,
    /// Requests by request kind and object kind, as `(request, object,
    /// count)`.
    breakdown: Vec<(String, String, u64)>,
}
