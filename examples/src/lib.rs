//! What the example binaries share: opening `--store`, and the table each
//! prints of which expensive calls ran, which the memo answered, which were
//! replayed from a step's receipt, and what that cost or saved.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use memo_runtime::object_store::ObjectStore;
use memo_runtime::object_store::path::Path;
use memo_runtime::{MemoStore, runtime_store::ObjectStoreRuntimeStore, store::store_from_url};

/// Where the examples keep their data unless `--store` says otherwise: a
/// folder under the current directory, so nothing needs setting up.
pub const DEFAULT_STORE: &str = "target/memo-examples";

/// The stores an example works on, laid out as `memoctl` expects them: the
/// memo store under `<url prefix>/memo`, the runtime store under
/// `<url prefix>/runtime`.
#[derive(Debug)]
pub struct Stores {
    /// The store's URL, to print and to hand to `memoctl --store`.
    pub url: String,
    /// The memo store: memo entries, step outputs, terminal markers.
    pub memo: MemoStore,
    /// The runtime store: runs, their receipts and signals.
    pub runs: Arc<ObjectStoreRuntimeStore>,
}

/// Opens `store`: a URL (`file:///var/lib/memo`; `s3://bucket/prefix` with
/// this crate's `aws` feature, `gs://` with `gcp`, `az://` with `azure`; see
/// `memo_runtime::store::store_from_url`, settings from the usual `AWS_*`
/// variables) or a folder path, created if missing.
///
/// # Errors
///
/// A folder that cannot be created, or a URL that does not open.
pub fn open_store(store: &str) -> anyhow::Result<Stores> {
    open_store_with(store, &[])
}

/// [`open_store`] with store options (`key=value` pairs such as
/// `("fsync", "false")` for a folder or `("endpoint", ...)` for a bucket).
///
/// # Errors
///
/// As [`open_store`], and an option the store does not take.
pub fn open_store_with(store: &str, options: &[(String, String)]) -> anyhow::Result<Stores> {
    let url = if store.contains("://") {
        store.to_string()
    } else {
        std::fs::create_dir_all(store).with_context(|| format!("cannot create {store:?}"))?;
        let folder = std::fs::canonicalize(store)?;
        url::Url::from_directory_path(&folder)
            .map_err(|()| anyhow::anyhow!("{} is not an absolute folder", folder.display()))?
            .to_string()
    };
    let opened = store_from_url(&url, options.iter().cloned())
        .with_context(|| format!("cannot open {url:?}"))?;
    let objects: Arc<dyn ObjectStore> = opened.store;
    let under = |part: &str| Path::from_iter(opened.prefix.parts().chain(Path::from(part).parts()));
    Ok(Stores {
        memo: MemoStore::new(Arc::clone(&objects), under("memo")).with_seal(opened.seal.clone()),
        runs: Arc::new(
            ObjectStoreRuntimeStore::new(objects, under("runtime")).with_seal(opened.seal.clone()),
        ),
        url,
    })
}

/// What a simulated expensive call would cost and how long it would take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    /// Its price, in tenths of a cent.
    pub mills: u64,
    /// How long it takes.
    pub time: Duration,
}

impl Price {
    /// A call costing `mills` tenths of a cent and taking `millis` ms.
    pub const fn new(mills: u64, millis: u64) -> Price {
        Price {
            mills,
            time: Duration::from_millis(millis),
        }
    }
}

/// Records, in this process, which expensive calls really ran and which
/// step bodies started: what the memo and the step receipts did not answer.
#[derive(Debug, Default)]
pub struct CallLog {
    calls: Mutex<Vec<String>>,
    steps: Mutex<Vec<String>>,
}

impl CallLog {
    /// An empty log, for a `static`.
    pub const fn new() -> CallLog {
        CallLog {
            calls: Mutex::new(Vec::new()),
            steps: Mutex::new(Vec::new()),
        }
    }

    /// Call `call` ran: its side effect happened (a memo miss).
    pub fn call_ran(&self, call: impl Into<String>) {
        lock(&self.calls).push(call.into());
    }

    /// The body of step `step` started (the step had not committed).
    pub fn step_ran(&self, step: impl Into<String>) {
        lock(&self.steps).push(step.into());
    }

    /// How many times `call` ran in this process.
    pub fn runs_of(&self, call: &str) -> usize {
        lock(&self.calls).iter().filter(|c| *c == call).count()
    }

    /// What happened to `call`, made outside any workflow step: it ran, or
    /// the memo answered it.
    pub fn ran_or_hit(&self, call: &str) -> Outcome {
        if self.runs_of(call) > 0 {
            Outcome::Ran
        } else {
            Outcome::MemoHit
        }
    }

    /// What happened to `call`, made in step `step`: it ran; or its step
    /// ran and the memo answered it; or the step's receipt was replayed and
    /// nothing inside it ran.
    pub fn outcome(&self, step: &str, call: &str) -> Outcome {
        if self.runs_of(call) > 0 {
            Outcome::Ran
        } else if lock(&self.steps).iter().any(|s| s == step) {
            Outcome::MemoHit
        } else {
            Outcome::Replayed
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What happened to one expensive call in this run of an example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It ran: paid for and waited for.
    Ran,
    /// Its step ran again, but the memo had the call's committed result.
    MemoHit,
    /// Its step had committed: its receipt was replayed, nothing ran.
    Replayed,
    /// It did not happen, for the reason given (waiting, rejected, ...).
    Not(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ran => f.write_str("ran"),
            Outcome::MemoHit => f.write_str("memo hit"),
            Outcome::Replayed => f.write_str("replayed"),
            Outcome::Not(why) => f.write_str(why),
        }
    }
}

/// The table an example prints: one row per expensive call, then a line
/// with what ran, what it cost and what the memo saved.
#[derive(Debug, Default)]
pub struct Report {
    rows: Vec<(String, String, Outcome, Option<Price>)>,
}

impl Report {
    /// An empty report.
    pub fn new() -> Report {
        Report::default()
    }

    /// Call `call` of step `step` (`""` outside a workflow), priced
    /// `price`, and what happened to it.
    pub fn call(&mut self, step: &str, call: &str, outcome: Outcome, price: Price) {
        self.rows
            .push((step.into(), call.into(), outcome, Some(price)));
    }

    /// A row that is not an expensive call (a signal, a decision).
    pub fn note(&mut self, step: &str, what: &str, outcome: impl Into<String>) {
        self.rows
            .push((step.into(), what.into(), Outcome::Not(outcome.into()), None));
    }

    /// The table and its summary line.
    pub fn render(&self) -> String {
        // Calls made outside any workflow step (the quickstart) need no
        // step column.
        let with_steps = self.rows.iter().any(|(step, ..)| !step.is_empty());
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|(step, call, outcome, price)| {
                let (cost, time) = match (outcome, price) {
                    (Outcome::Ran, Some(p)) => (dollars(p.mills), seconds(p.time)),
                    (Outcome::MemoHit | Outcome::Replayed, Some(p)) => (
                        format!("0 (saved {})", dollars(p.mills)),
                        format!("0 (saved {})", seconds(p.time)),
                    ),
                    _ => ("-".into(), "-".into()),
                };
                let row = [step.clone(), call.clone(), outcome.to_string(), cost, time];
                row[usize::from(!with_steps)..].to_vec()
            })
            .collect();
        let header = ["step", "call", "outcome", "cost", "time"];
        let mut out = table(&header[usize::from(!with_steps)..], &rows);
        out += &self.summary();
        out
    }

    /// Prints the table and its summary line.
    pub fn print(&self) {
        print!("{}", self.render());
    }

    fn summary(&self) -> String {
        let (mut priced, mut ran, mut answered) = (0, Tally::default(), Tally::default());
        for (_, _, outcome, price) in &self.rows {
            let Some(price) = price else { continue };
            priced += 1;
            match outcome {
                Outcome::Ran => ran.add(price),
                Outcome::MemoHit | Outcome::Replayed => answered.add(price),
                Outcome::Not(_) => {}
            }
        }
        let mut summary = format!(
            "expensive calls that ran: {} of {priced}; answered without running: {}\n\
             cost: {} (saved {}); time: {} (saved {}) [simulated]\n",
            ran.calls,
            answered.calls,
            dollars(ran.mills),
            dollars(answered.mills),
            seconds(ran.time),
            seconds(answered.time),
        );
        if ran.calls == 0 && answered.calls > 0 {
            summary +=
                "nothing expensive ran again: memo entries and step receipts answered every call\n";
        }
        summary
    }
}

/// Calls counted with their prices added up.
#[derive(Default)]
struct Tally {
    calls: usize,
    mills: u64,
    time: Duration,
}

impl Tally {
    fn add(&mut self, price: &Price) {
        self.calls += 1;
        self.mills += price.mills;
        self.time += price.time;
    }
}

fn dollars(mills: u64) -> String {
    format!("${}.{:03}", mills / 1000, mills % 1000)
}

fn seconds(time: Duration) -> String {
    format!("{:.1} s", time.as_secs_f64())
}

/// Lines of `rows` under `header`, each column padded to its widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |row: &[&str]| {
        let padded: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for row in rows {
        out += &line(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_what_ran_and_what_the_memo_saved() {
        let mut report = Report::new();
        report.call("a", "llm(1)", Outcome::Ran, Price::new(30, 1200));
        report.call("a", "llm(2)", Outcome::MemoHit, Price::new(30, 1200));
        report.call("b", "send", Outcome::Replayed, Price::new(5, 300));
        report.note("c", "approval", "waiting");
        let text = report.render();
        assert!(text.contains("expensive calls that ran: 1 of 3"), "{text}");
        assert!(text.contains("cost: $0.030 (saved $0.035)"), "{text}");
        assert!(text.contains("time: 1.2 s (saved 1.5 s)"), "{text}");
    }
}
