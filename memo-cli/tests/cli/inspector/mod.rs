//! What the `memoctl serve` tests share: the inspector started as a process
//! on a free port of 127.0.0.1, a folder filled with runs, and a worker that
//! resumes a run waiting for its approval.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use memo_runtime::store::store_from_url;
use memo_runtime::workflow::{Runtime, Workflow};
use tempfile::TempDir;

use crate::support;

/// A run input that would run a script and add an element if it were not
/// escaped.
pub(crate) const SCRIPT_INPUT: &str =
    "<script>document.title='pwned'</script><b id=\"injected\">bold</b>";

/// The run whose input is [`SCRIPT_INPUT`].
pub(crate) const SCRIPT_RUN: &str = "xss-1";

/// A folder filled by [`support::fill`] (and [`SCRIPT_RUN`]), and its URL.
pub(crate) struct Folder {
    _dir: Option<TempDir>,
    pub(crate) url: String,
}

impl Folder {
    pub(crate) async fn filled() -> Folder {
        let folder = Folder::empty();
        let opened = store_from_url(&folder.url, Vec::<(String, String)>::new()).unwrap();
        support::fill(&opened.store, "").await;
        let orders = Workflow::new("orders", support::orders);
        folder
            .runtime()
            .run(
                &support::run(SCRIPT_RUN),
                &SCRIPT_INPUT.to_string(),
                &orders,
            )
            .await
            .expect("the run completes");
        folder
    }

    pub(crate) fn empty() -> Folder {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        Folder {
            _dir: Some(dir),
            url,
        }
    }

    /// The folder at `url`, which another [`Folder`] keeps.
    pub(crate) fn at(url: String) -> Folder {
        Folder { _dir: None, url }
    }

    /// A runtime on the folder, as a worker would have.
    pub(crate) fn runtime(&self) -> Runtime {
        let opened = store_from_url(&self.url, Vec::<(String, String)>::new()).unwrap();
        support::runtime(
            &opened.store,
            "",
            Arc::new(memo_runtime::clock::SystemClock),
        )
    }

    /// Resumes `Ticket-42` (waiting for its `approval`) as a worker would,
    /// until it ends or `tries` resumptions found it still waiting.
    pub(crate) async fn resume_ticket(&self, tries: usize) -> Option<String> {
        let runtime = self.runtime();
        let approval = Workflow::new("approval", support::approval);
        for _ in 0..tries {
            match runtime
                .resume::<String, _>(&support::run("Ticket-42"), &approval)
                .await
            {
                Ok(output) => return Some(output),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        None
    }
}

/// `memoctl --store URL serve --listen 127.0.0.1:0 ARGS...`, running; killed
/// when dropped.
pub(crate) struct Inspector {
    child: Child,
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub(crate) base: String,
}

impl Inspector {
    pub(crate) fn start(url: &str, args: &[&str]) -> Inspector {
        Inspector::start_with(url, &[], args)
    }

    /// [`start`](Inspector::start) with store options (`--option K=V`).
    pub(crate) fn start_with(url: &str, options: &[(&str, String)], args: &[&str]) -> Inspector {
        let mut command = Command::new(env!("CARGO_BIN_EXE_memoctl"));
        command.args(["--store", url]);
        for (key, value) in options {
            command.arg("--option").arg(format!("{key}={value}"));
        }
        let mut child = command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("MEMOCTL_SERVE_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("memoctl starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("memoctl prints its address");
        let Some(base) = line
            .strip_prefix("listening on ")
            .and_then(|rest| rest.split_once('/').map(|_| rest))
            .and_then(|rest| rest.split_whitespace().next())
        else {
            let mut stderr = String::new();
            let _ = child.kill();
            let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
            panic!("memoctl serve did not start: {line:?}\nstderr: {stderr}");
        };
        let base = base.trim_end_matches('/').to_string();
        Inspector { child, base }
    }

    pub(crate) fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
