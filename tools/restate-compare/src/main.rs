//! memo and Restate 1.7.12 side by side on this machine (issue 25, item 6).
//!
//! The same 3-step durable workflow on each side: three journaled
//! `ctx.run` steps of a Restate workflow (the server from npm, this crate's
//! SDK endpoint in this process) against three `ctx.step`s of a memo
//! `Workflow` on a local folder (memo's default `fsync`, and
//! `fsync=false`). Each workload (sequential invocations, then invocations
//! with a fixed number in flight) runs every side in turn, round after
//! round, the order rotating; figures are medians over rounds and ratios of
//! sides measured in the same run. It also counts the requests memo makes
//! for one 3-step run. See README.md for the command.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use clap::Parser;
use futures::StreamExt;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::runtime_store::ObjectStoreRuntimeStore;
use memo_runtime::store::{LocalFolder, SqliteStore};
use memo_runtime::testing::{CountingStore, RequestCounts};
use memo_runtime::workflow::{Context as MemoContext, Runtime, Workflow};
use memo_runtime::{MemoStore, RunId};
use restate_sdk::prelude::*;

/// The environment variable that marks the copy of this program running
/// inside the loopback-only network namespace (`--netns`).
const IN_NETNS: &str = "MEMO_RESTATE_COMPARE_IN_NETNS";

#[derive(Parser, Debug, Clone)]
#[command(about = "memo and Restate side by side: a 3-step durable workflow on each")]
struct Args {
    /// The restate-server binary. Default: the one `npm ci` installs in
    /// this crate's `server/` folder.
    #[arg(long)]
    server: Option<PathBuf>,
    /// Recorded rounds per workload (each side once per round).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Invocations of the sequential workload (one at a time; 0: skip it).
    #[arg(long, default_value_t = 500)]
    sequential: usize,
    /// Invocations of the concurrent workload (0: skip it).
    #[arg(long, default_value_t = 2000)]
    concurrent: usize,
    /// Invocations in flight in the concurrent workload.
    #[arg(long, default_value_t = 16)]
    in_flight: usize,
    /// Invocations of each side's unrecorded warm-up, before the rounds.
    #[arg(long, default_value_t = 50)]
    warm_up: usize,
    /// The sides to run, comma-separated: memo-fsync, memo-no-fsync,
    /// memo-sqlite, memo-sqlite-no-fsync, restate-workflow, restate-service.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "memo-fsync,memo-no-fsync,memo-sqlite,memo-sqlite-no-fsync,restate-workflow,restate-service"
    )]
    sides: Vec<Side>,
    /// The folder under which both sides keep their data (memo's folders,
    /// Restate's base dir), so both write to the same disk. Default: the
    /// system's temporary folder.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run everything (this program, the server and its SDK endpoint) in a
    /// new network namespace with loopback only (`unshare -n`, as root or
    /// with user namespaces): the server can reach nothing outside.
    #[arg(long)]
    netns: bool,
    /// Only count memo's requests for a 3-step run; start no server.
    #[arg(long)]
    requests_only: bool,
    /// Keep the Restate server's log and data (printed path) after the run.
    #[arg(long)]
    keep: bool,
    /// Runs of memo (fsync) under `strace -f -c` to count its sync calls
    /// per 3-step run, one at a time and `--in-flight` at a time (0: skip;
    /// skipped too when strace is not installed).
    #[arg(long, default_value_t = 100)]
    syncs: usize,
    /// Internal: the copy of this program that strace runs for `--syncs`:
    /// one unrecorded memo run, then this many, then exit.
    #[arg(long, hide = true)]
    syncs_child: Option<usize>,
    /// The memo side whose sync calls `--syncs` counts.
    #[arg(long, value_enum, default_value = "memo-fsync")]
    syncs_side: Side,
}

/// One side of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
enum Side {
    /// A memo `Workflow` on a `LocalFolder` that fsyncs (memo's default).
    MemoFsync,
    /// The same on a `LocalFolder` with `fsync=false`.
    MemoNoFsync,
    /// The same on a `SqliteStore` (one SQLite file, each commit synced
    /// through its write-ahead log, concurrent commits in one group).
    MemoSqlite,
    /// The same on a `SqliteStore` with `fsync` off.
    MemoSqliteNoFsync,
    /// A Restate workflow (`run` handler, keyed by the invocation's id).
    RestateWorkflow,
    /// A Restate service handler (no key; the cheapest durable invocation).
    RestateService,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::MemoFsync => "memo, fsync (default)",
            Side::MemoNoFsync => "memo, fsync=false",
            Side::MemoSqlite => "memo on SQLite, fsync",
            Side::MemoSqliteNoFsync => "memo on SQLite, fsync=false",
            Side::RestateWorkflow => "Restate workflow",
            Side::RestateService => "Restate service",
        }
    }

    /// The side's name on the command line.
    fn cli_name(self) -> &'static str {
        match self {
            Side::MemoFsync => "memo-fsync",
            Side::MemoNoFsync => "memo-no-fsync",
            Side::MemoSqlite => "memo-sqlite",
            Side::MemoSqliteNoFsync => "memo-sqlite-no-fsync",
            Side::RestateWorkflow => "restate-workflow",
            Side::RestateService => "restate-service",
        }
    }

    fn is_restate(self) -> bool {
        matches!(self, Side::RestateWorkflow | Side::RestateService)
    }

    /// A memo runtime for this side, its data in a new folder under
    /// `data_dir` (returned, to keep or delete).
    fn memo_runtime(self, data_dir: &Path) -> Result<(Runtime, tempfile::TempDir)> {
        let folder = tempfile::Builder::new()
            .prefix(&format!("memo-compare-{self:?}-"))
            .tempdir_in(data_dir)?;
        let objects: Arc<dyn ObjectStore> = match self {
            Side::MemoFsync | Side::MemoNoFsync => {
                Arc::new(LocalFolder::new(folder.path())?.with_fsync(self == Side::MemoFsync))
            }
            Side::MemoSqlite | Side::MemoSqliteNoFsync => Arc::new(SqliteStore::open_with_fsync(
                folder.path().join("memo.db"),
                self == Side::MemoSqlite,
            )?),
            Side::RestateWorkflow | Side::RestateService => anyhow::bail!("not a memo side"),
        };
        Ok((memo_runtime(objects)?, folder))
    }
}

// ---------------------------------------------------------------------------
// The Restate side: a workflow and a service, three `ctx.run` steps each.

/// The 3-step workflow as a Restate workflow.
struct Steps;

#[restate_sdk::workflow]
impl Steps {
    #[handler]
    async fn run(&self, ctx: WorkflowContext<'_>, order: u64) -> Result<u64, HandlerError> {
        let a: u64 = ctx.run(|| async move { Ok(order) }).name("reserve").await?;
        let b: u64 = ctx.run(|| async move { Ok(a + 1) }).name("charge").await?;
        let c: u64 = ctx.run(|| async move { Ok(b + 1) }).name("ship").await?;
        Ok(c)
    }
}

/// The same three steps as a Restate service handler.
struct StepsService;

#[restate_sdk::service]
impl StepsService {
    #[handler]
    async fn run(&self, ctx: Context<'_>, order: u64) -> Result<u64, HandlerError> {
        let a: u64 = ctx.run(|| async move { Ok(order) }).name("reserve").await?;
        let b: u64 = ctx.run(|| async move { Ok(a + 1) }).name("charge").await?;
        let c: u64 = ctx.run(|| async move { Ok(b + 1) }).name("ship").await?;
        Ok(c)
    }
}

// ---------------------------------------------------------------------------
// The memo side: the same three steps.

type StepsRun = futures::future::BoxFuture<'static, memo_runtime::Result<u64>>;
type MemoWorkflow = Workflow<fn(MemoContext, u64) -> StepsRun>;

fn memo_steps(ctx: MemoContext, order: u64) -> StepsRun {
    Box::pin(async move {
        let a: u64 = ctx
            .step("reserve", |_| async move {
                Ok::<u64, memo_runtime::Error>(order)
            })
            .await?;
        let b: u64 = ctx
            .step("charge", |_| async move {
                Ok::<u64, memo_runtime::Error>(a + 1)
            })
            .await?;
        ctx.step(
            "ship",
            |_| async move { Ok::<u64, memo_runtime::Error>(b + 1) },
        )
        .await
    })
}

fn memo_workflow() -> MemoWorkflow {
    Workflow::new("steps", memo_steps as fn(MemoContext, u64) -> StepsRun)
}

/// A memo runtime as a process builds it on one local folder: memo entries
/// and run records in one `LocalFolder`.
fn memo_runtime(objects: Arc<dyn ObjectStore>) -> Result<Runtime> {
    Ok(Runtime::builder()
        .memo_store(MemoStore::new(Arc::clone(&objects), "memo"))
        .runtime_store(Arc::new(ObjectStoreRuntimeStore::new(objects, "runs")))
        .build()?)
}

// ---------------------------------------------------------------------------
// The Restate server.

/// A running restate-server, ended (by its pid) when dropped.
struct Server {
    child: Child,
    ingress: SocketAddr,
    admin: SocketAddr,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM lets it close RocksDB; SIGKILL after a grace period. The
        // server runs in a process group of its own (whose id is its pid),
        // so a wrapper (`--server` naming a script that runs it under
        // strace) ends with it.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<SocketAddr> {
    let listener = StdListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

fn default_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("server/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server")
}

/// Starts restate-server with its data in `dir`, every listener on
/// loopback, telemetry off, and waits until its admin API and ingress
/// answer.
async fn start_server(binary: &Path, dir: &Path, http: &reqwest::Client) -> Result<Server> {
    ensure!(
        binary.exists(),
        "no restate-server at {} (run `npm ci --ignore-scripts` in tools/restate-compare/server, or pass --server)",
        binary.display()
    );
    let (node, ingress, admin) = (free_port()?, free_port()?, free_port()?);
    let config = dir.join("restate.toml");
    std::fs::write(
        &config,
        format!(
            r#"# Written by memo-restate-compare.
disable-telemetry = true
bind-address = "{node}"
advertised-address = "http://{node}/"
log-disable-ansi-codes = true

[ingress]
bind-address = "{ingress}"

[admin]
bind-address = "{admin}"
disable-web-ui = true
"#
        ),
    )?;
    let log = dir.join("restate-server.log");
    let out = std::fs::File::create(&log)?;
    let child = Command::new(binary)
        .arg("--config-file")
        .arg(&config)
        .arg("--base-dir")
        .arg(dir.join("data"))
        .args(["--no-logo", "--listen-mode", "tcp", "--node-name", "bench"])
        .stdin(Stdio::null())
        .process_group(0)
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let mut server = Server {
        child,
        ingress,
        admin,
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = server.child.try_wait()? {
            bail!(
                "restate-server exited ({status}) before it was ready: see {}",
                server.log.display()
            );
        }
        let admin_ok = http
            .get(format!("http://{admin}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        let ingress_ok = http
            .get(format!("http://{ingress}/restate/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if admin_ok && ingress_ok {
            return Ok(server);
        }
        if Instant::now() > deadline {
            bail!(
                "restate-server not ready after 120 s: see {}",
                server.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Serves this crate's Restate services on a loopback port, in this
/// process's runtime, and registers them with the server.
async fn serve_and_register(
    server: &Server,
    http: &reqwest::Client,
) -> Result<tokio::sync::oneshot::Sender<()>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint_addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        HttpServer::new(Endpoint::builder().bind(Steps).bind(StepsService).build())
            .serve_with_cancel(listener, stopped)
            .await;
    });
    let response = http
        .post(format!("http://{}/deployments", server.admin))
        .header("content-type", "application/json")
        .body(serde_json::json!({ "uri": format!("http://{endpoint_addr}/") }).to_string())
        .send()
        .await?;
    let status = response.status();
    let body = response.text().await?;
    ensure!(
        status.is_success(),
        "registering the deployment: {status}: {body}"
    );
    Ok(stop)
}

/// One invocation through Restate's ingress, waiting for its result.
async fn invoke_restate(
    http: &reqwest::Client,
    ingress: SocketAddr,
    side: Side,
    key: &str,
    order: u64,
) -> Result<()> {
    let url = match side {
        Side::RestateWorkflow => format!("http://{ingress}/Steps/{key}/run"),
        Side::RestateService => format!("http://{ingress}/StepsService/run"),
        _ => unreachable!("not a Restate side"),
    };
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .body(order.to_string())
        .send()
        .await?;
    let status = response.status();
    let body = response.text().await?;
    ensure!(status.is_success(), "invocation {key}: {status}: {body}");
    let out: u64 = serde_json::from_str(&body).with_context(|| format!("reply {body:?}"))?;
    ensure!(out == order + 2, "invocation {key} returned {out}");
    Ok(())
}

// ---------------------------------------------------------------------------
// The sides, as one interface for the rounds.

struct Bench {
    http: reqwest::Client,
    ingress: Option<SocketAddr>,
    /// The memo sides' runtimes.
    memo: HashMap<Side, Runtime>,
    workflow: Arc<MemoWorkflow>,
}

impl Bench {
    /// One invocation of `side` with a fresh id: a new run, to its end.
    async fn invoke(&self, side: Side, key: String, order: u64) -> Result<()> {
        match side {
            Side::MemoFsync | Side::MemoNoFsync | Side::MemoSqlite | Side::MemoSqliteNoFsync => {
                let runtime = self.memo.get(&side).expect("side configured");
                let out: u64 = runtime
                    .run(&RunId::new(key)?, &order, &self.workflow)
                    .await?;
                ensure!(out == order + 2, "memo run returned {out}");
                Ok(())
            }
            Side::RestateWorkflow | Side::RestateService => {
                let ingress = self.ingress.expect("server started");
                invoke_restate(&self.http, ingress, side, &key, order).await
            }
        }
    }
}

/// One round of one side: `count` invocations, `in_flight` at a time (1:
/// sequential), each a task of its own. Returns the invocations per second
/// and each invocation's latency.
async fn round(
    bench: &Arc<Bench>,
    side: Side,
    tag: &str,
    count: usize,
    in_flight: usize,
) -> Result<(f64, Vec<Duration>)> {
    let start = Instant::now();
    let results: Vec<Result<Duration>> = futures::stream::iter(0..count)
        .map(|i| {
            let bench = Arc::clone(bench);
            let key = format!("{tag}-{i}");
            tokio::spawn(async move {
                let t = Instant::now();
                bench.invoke(side, key, i as u64).await?;
                Ok::<_, anyhow::Error>(t.elapsed())
            })
        })
        .buffer_unordered(in_flight)
        .map(|joined| joined.map_err(anyhow::Error::from).and_then(|r| r))
        .collect()
        .await;
    let elapsed = start.elapsed();
    let latencies = results.into_iter().collect::<Result<Vec<_>>>()?;
    Ok((count as f64 / elapsed.as_secs_f64(), latencies))
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

fn percentile(latencies: &mut [Duration], p: f64) -> Duration {
    latencies.sort();
    let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
    latencies[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// A workload's figures per side: the rate of each round, the median of
/// each round's p50 and p99 latency.
struct Figures {
    rates: Vec<Vec<f64>>,
    p50: Vec<Vec<Duration>>,
    p99: Vec<Vec<Duration>>,
}

/// Runs one workload: an unrecorded warm-up of each side, then `rounds`
/// rounds in which every side runs once, the order rotating each round so
/// that no side always follows the same one.
async fn workload(
    bench: &Arc<Bench>,
    args: &Args,
    name: &str,
    count: usize,
    in_flight: usize,
) -> Result<Figures> {
    let sides = &args.sides;
    for &side in sides {
        eprintln!("[{name}] warm-up: {}", side.name());
        round(
            bench,
            side,
            &format!("{name}-warm-{side:?}"),
            args.warm_up,
            in_flight,
        )
        .await?;
    }
    let mut figures = Figures {
        rates: vec![Vec::new(); sides.len()],
        p50: vec![Vec::new(); sides.len()],
        p99: vec![Vec::new(); sides.len()],
    };
    for r in 0..args.rounds {
        let mut order: Vec<usize> = (0..sides.len()).collect();
        order.rotate_left(r % sides.len());
        if r % 2 == 1 {
            order.reverse();
        }
        for s in order {
            let side = sides[s];
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            let (rate, mut latencies) = round(
                bench,
                side,
                &format!("{name}-r{r}-{side:?}"),
                count,
                in_flight,
            )
            .await?;
            eprintln!(
                "[{name}] round {}/{}: {:<22} {:>8.1}/s  p50 {}  (load {})",
                r + 1,
                args.rounds,
                side.name(),
                rate,
                ms(percentile(&mut latencies, 0.5)),
                load.split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            figures.rates[s].push(rate);
            figures.p50[s].push(percentile(&mut latencies, 0.5));
            figures.p99[s].push(percentile(&mut latencies, 0.99));
        }
    }
    Ok(figures)
}

fn print_table(args: &Args, name: &str, figures: &Figures) {
    let sides = &args.sides;
    let restate: Vec<Option<usize>> = [Side::RestateWorkflow, Side::RestateService]
        .iter()
        .map(|r| sides.iter().position(|s| s == r))
        .collect();
    println!("\n### {name}\n");
    print!("| side | invocations/s (median) | rounds | p50 | p99 |");
    for r in restate.iter().flatten() {
        print!(" ÷ {} |", sides[*r].name());
    }
    println!();
    print!("|---|---|---|---|---|");
    for _ in restate.iter().flatten() {
        print!("---|");
    }
    println!();
    let medians: Vec<f64> = figures
        .rates
        .iter()
        .map(|rates| median(&mut rates.clone()))
        .collect();
    for (s, side) in sides.iter().enumerate() {
        let rounds: Vec<String> = figures.rates[s].iter().map(|r| format!("{r:.0}")).collect();
        let mut p50: Vec<f64> = figures.p50[s].iter().map(Duration::as_secs_f64).collect();
        let mut p99: Vec<f64> = figures.p99[s].iter().map(Duration::as_secs_f64).collect();
        print!(
            "| {} | {:.1} | {} | {} | {} |",
            side.name(),
            medians[s],
            rounds.join(", "),
            ms(Duration::from_secs_f64(median(&mut p50))),
            ms(Duration::from_secs_f64(median(&mut p99))),
        );
        for r in restate.iter().flatten() {
            // The ratio of medians, and in brackets the median of the
            // per-round ratios (each of two sides measured in one round).
            let mut per_round: Vec<f64> = figures.rates[s]
                .iter()
                .zip(&figures.rates[*r])
                .map(|(a, b)| a / b)
                .collect();
            print!(
                " {:.2}× ({:.2}×) |",
                medians[s] / medians[*r],
                median(&mut per_round)
            );
        }
        println!();
    }
}

// ---------------------------------------------------------------------------
// memo's requests for one 3-step run.

fn print_counts(what: &str, c: RequestCounts) {
    let creates = c.creates;
    let overwrites = c.puts + c.multipart_uploads + c.copies + c.renames;
    let gets = c.gets + c.get_ranges;
    let lists = c.lists + c.lists_with_offset + c.lists_with_delimiter;
    let total = creates + overwrites + gets + c.heads + lists + c.delete_paths;
    println!(
        "| {what} | {total} | {creates} | {overwrites} | {gets} | {} | {lists} | {} |",
        c.heads, c.delete_paths
    );
}

/// Counts the requests of one new 3-step run on a local folder (the store
/// wrapped in a `CountingStore`): the runtime is built and its one-off
/// conditional-create probe made first, then counted separately.
async fn count_requests(dir: &Path) -> Result<()> {
    let folder = tempfile::tempdir_in(dir)?;
    let counting = Arc::new(CountingStore::new(LocalFolder::new(folder.path())?));
    let runtime = memo_runtime(counting.clone())?;
    let workflow = memo_workflow();
    println!("\n### Requests memo makes (a local folder, counted)\n");
    println!("| what | requests | creates | overwrites | GETs | HEADs | LISTs | deletes |");
    println!("|---|---|---|---|---|---|---|---|");
    // The first run pays the process's one-off conditional-create probe.
    let _: u64 = runtime.run(&RunId::new("first")?, &1u64, &workflow).await?;
    print_counts(
        "first 3-step run of a process (with the probe)",
        counting.counts(),
    );
    for n in 0..3u64 {
        counting.reset();
        let _: u64 = runtime
            .run(&RunId::new(format!("counted-{n}"))?, &n, &workflow)
            .await?;
        print_counts(&format!("3-step run #{}", n + 2), counting.counts());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// memo's sync calls for one 3-step run, counted by strace.

/// The copy of this program under strace: one unrecorded memo run (the
/// process's one-off probe and the store's top folders), then `runs` runs
/// of memo with fsync, `--in-flight` at a time.
async fn syncs_child(args: &Args, runs: usize) -> Result<()> {
    let data_dir = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    let side = args.syncs_side;
    let (runtime, _folder) = side.memo_runtime(&data_dir)?;
    let bench = Arc::new(Bench {
        http: reqwest::Client::new(),
        ingress: None,
        memo: HashMap::from([(side, runtime)]),
        workflow: Arc::new(memo_workflow()),
    });
    round(&bench, side, "first", 1, 1).await?;
    round(&bench, side, "counted", runs, args.in_flight.max(1)).await?;
    Ok(())
}

/// The `fsync` and `fdatasync` calls strace counted (`-c` summary).
fn strace_sync_calls(summary: &str) -> Result<u64> {
    let mut calls = 0;
    for line in summary.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some(&("fsync" | "fdatasync")), Some(n)) = (fields.last(), fields.get(3)) {
            calls += n
                .parse::<u64>()
                .with_context(|| format!("strace line {line:?}"))?;
        }
    }
    Ok(calls)
}

/// Runs the `--syncs-child` copy of this program under `strace -f -c` and
/// returns the sync calls of the whole process.
fn strace_child(data_dir: &Path, side: Side, runs: usize, in_flight: usize) -> Result<u64> {
    let summary = tempfile::NamedTempFile::new_in(data_dir)?;
    let status = Command::new("strace")
        .args(["-f", "-c", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(summary.path())
        .arg(std::env::current_exe()?)
        .args(["--syncs-child", &runs.to_string()])
        .args(["--in-flight", &in_flight.to_string()])
        .args(["--syncs-side", side.cli_name()])
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::null())
        .status()
        .context("running strace")?;
    ensure!(status.success(), "the strace'd copy failed: {status}");
    strace_sync_calls(&std::fs::read_to_string(summary.path())?)
}

/// Prints memo's sync calls per 3-step run (fsync on), one at a time and
/// `--in-flight` at a time: the calls of `--syncs` runs less those of a
/// process that makes none, over `--syncs`.
fn count_syncs(args: &Args, data_dir: &Path) -> Result<()> {
    if args.syncs == 0 {
        return Ok(());
    }
    let side = args.syncs_side;
    if Command::new("strace").arg("-V").output().is_err() {
        println!("\n(strace is not installed: sync calls not counted)");
        return Ok(());
    }
    let base = strace_child(data_dir, side, 0, 1)?;
    println!(
        "\n### Sync calls memo makes ({}, strace -f -c)\n",
        side.name()
    );
    println!("| {} runs of 3 steps | sync calls | per run |", args.syncs);
    println!("|---|---|---|");
    for in_flight in [1, args.in_flight.max(1)] {
        let calls = strace_child(data_dir, side, args.syncs, in_flight)?;
        let net = calls.saturating_sub(base);
        println!(
            "| {in_flight} in flight | {net} | {:.1} |",
            net as f64 / args.syncs as f64
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------

/// Runs this program again inside a new network namespace with loopback
/// only, and exits with its status.
fn reexec_in_netns() -> Result<()> {
    let me = std::env::current_exe()?;
    let status = Command::new("unshare")
        .args([
            "-n",
            "--",
            "sh",
            "-c",
            "ip link set lo up && exec \"$@\"",
            "sh",
        ])
        .arg(me)
        .args(std::env::args_os().skip(1))
        .env(IN_NETNS, "1")
        .status()
        .context("running unshare (util-linux) for --netns")?;
    std::process::exit(status.code().unwrap_or(1));
}

/// Installs the pinned server (`npm ci --ignore-scripts` in `server/`)
/// when no `--server` is given and it is not installed yet. Runs before
/// `--netns` enters the namespace: npm needs the registry.
fn install_server(args: &Args) -> Result<()> {
    if args.server.is_some()
        || args.requests_only
        || args.syncs_child.is_some()
        || !args.sides.iter().any(|s| s.is_restate())
        || default_server().exists()
    {
        return Ok(());
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("server");
    eprintln!(
        "installing restate-server: npm ci --ignore-scripts in {}",
        dir.display()
    );
    let status = Command::new("npm")
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .status()
        .context("running npm (Node.js) to install restate-server")?;
    ensure!(
        status.success(),
        "npm ci in {} failed: {status}",
        dir.display()
    );
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    install_server(&args)?;
    if args.netns && std::env::var_os(IN_NETNS).is_none() {
        return reexec_in_netns();
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            match args.syncs_child {
                Some(runs) => syncs_child(&args, runs).await,
                None => run(args).await,
            }
        })
}

async fn run(args: Args) -> Result<()> {
    let data_dir = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&data_dir)?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "memo-restate-compare: {} rounds; sequential {}; concurrent {} with {} in flight; data under {}; {}; load average at start {}",
        args.rounds,
        args.sequential,
        args.concurrent,
        args.in_flight,
        data_dir.display(),
        if std::env::var_os(IN_NETNS).is_some() {
            "in a loopback-only network namespace"
        } else {
            "in the host's network namespace"
        },
        load.trim()
    );

    count_requests(&data_dir).await?;
    if args.requests_only {
        return Ok(());
    }
    count_syncs(&args, &data_dir)?;

    // A plain HTTP/1 client; no proxy (everything is on loopback).
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(args.in_flight.max(1) * 2)
        .timeout(Duration::from_secs(120))
        .build()?;

    let restate_dir = tempfile::Builder::new()
        .prefix("restate-compare-")
        .tempdir_in(&data_dir)?;
    let mut memo = HashMap::new();
    let mut memo_dirs = Vec::new();
    for &side in args.sides.iter().filter(|s| !s.is_restate()) {
        let (runtime, folder) = side.memo_runtime(&data_dir)?;
        memo.insert(side, runtime);
        memo_dirs.push(folder);
    }

    let (server, stop_endpoint) = if args.sides.iter().any(|s| s.is_restate()) {
        let binary = args.server.clone().unwrap_or_else(default_server);
        eprintln!("starting {}", binary.display());
        let server = start_server(&binary, restate_dir.path(), &http).await?;
        let stop = serve_and_register(&server, &http).await?;
        (Some(server), Some(stop))
    } else {
        (None, None)
    };

    let bench = Arc::new(Bench {
        ingress: server.as_ref().map(|s| s.ingress),
        http: http.clone(),
        memo,
        workflow: Arc::new(memo_workflow()),
    });

    // The deployment's services reach the ingress shortly after
    // registration: retry the first invocation of each Restate side.
    for &side in args.sides.iter().filter(|s| s.is_restate()) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match bench.invoke(side, format!("ready-{side:?}"), 1).await {
                Ok(()) => break,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("waiting for {}: {e:#}", side.name());
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    if args.sequential > 0 {
        let sequential = workload(&bench, &args, "sequential", args.sequential, 1).await?;
        print_table(
            &args,
            &format!("{} invocations, one at a time", args.sequential),
            &sequential,
        );
    }
    if args.concurrent > 0 {
        let concurrent = workload(
            &bench,
            &args,
            "concurrent",
            args.concurrent,
            args.in_flight.max(1),
        )
        .await?;
        print_table(
            &args,
            &format!(
                "{} invocations, {} in flight",
                args.concurrent, args.in_flight
            ),
            &concurrent,
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nload average at the end: {}", load.trim());

    if let Some(stop) = stop_endpoint {
        let _ = stop.send(());
    }
    if let Some(server) = server {
        if args.keep {
            let kept = restate_dir.keep();
            eprintln!("kept the server's log and data in {}", kept.display());
        }
        drop(server);
    }
    if args.keep {
        for folder in memo_dirs {
            let _ = folder.keep();
        }
    }
    Ok(())
}
