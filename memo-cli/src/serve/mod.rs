//! `memoctl serve`: a web inspector of the store, for people.
//!
//! Server-rendered HTML (maud templates, which escape every value they
//! splice), one embedded style sheet, no script. It reads the same store the
//! workers share and acts on it through the library calls the other
//! commands use: `Runtime::signal`, `Runtime::cancel`, `RetentionSweeper`.
//!
//! The safety rules (who may connect, which requests may change the store)
//! are in [`access`]; each page has its module.

mod access;
mod actions;
mod page;
mod retention;
mod run;
mod runs;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use clap::Args;

use crate::output::{errln, outln};
use crate::store::Store;
use access::Access;

/// Where the inspector listens by default: this machine only.
const DEFAULT_LISTEN: &str = "127.0.0.1:7070";

/// The options of `memoctl serve`.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Where to listen. Any address other than a loopback one (127.0.0.1,
    /// ::1) needs `--token` or `--read-only`. Port 0 takes a free port.
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// A secret every request must carry: open the inspector once at
    /// `http://ADDR/?token=TOKEN` (it is then kept in a cookie). Read from
    /// the environment variable rather than the command line, which other
    /// users of the machine can see.
    #[arg(long, env = "MEMOCTL_SERVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Show runs, offer no action (no signal, cancel or sweep).
    #[arg(long)]
    read_only: bool,
    /// How long terminal runs are kept: what the retention page and the
    /// sweep action count as expired (`7d`, `12h`, `30m`).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "7d")]
    retention: Duration,
}

/// The token's manual `Debug`: never the secret.
impl std::fmt::Debug for ServeArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeArgs")
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("read_only", &self.read_only)
            .field("retention", &self.retention)
            .finish()
    }
}

/// What every handler shares: the store, the access rules and the options.
pub(crate) struct Inspector {
    store: Store,
    access: Access,
    retention: Duration,
}

type Shared = Arc<Inspector>;

/// Serves the inspector until interrupted (Ctrl-C or SIGTERM). Prints the
/// address it listens on first, as `listening on http://ADDR/`.
pub(crate) async fn serve(store: Store, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let ServeArgs {
        listen,
        token,
        read_only,
        retention,
    } = args;
    if !listen.ip().is_loopback() && token.is_none() && !read_only {
        anyhow::bail!(
            "listening on {listen} lets other machines act on the store: pass --token \
             (or set MEMOCTL_SERVE_TOKEN), or --read-only, or listen on 127.0.0.1"
        );
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| {
            format!("cannot listen on {listen} (pass --listen 127.0.0.1:0 for any free port)")
        })?;
    let bound = listener
        .local_addr()
        .context("cannot read the listening address")?;
    let access = Access::new(token, read_only, bound)?;
    if !bound.ip().is_loopback() && !access.has_token() {
        errln!(
            "memoctl: warning: {bound} serves the store's runs, inputs and outputs read-only \
             to anyone who can reach it"
        );
    }
    let with_token = if access.has_token() {
        " (open it once with ?token=TOKEN)"
    } else {
        ""
    };
    let mode = if read_only { ", read-only" } else { "" };
    outln!(
        "listening on http://{bound}/ : inspecting {}{mode}{with_token}",
        store.url
    );
    let inspector = Arc::new(Inspector {
        store,
        access,
        retention,
    });
    axum::serve(listener, router(inspector))
        .with_graceful_shutdown(stopped())
        .await
        .context("the server stopped")?;
    Ok(ExitCode::SUCCESS)
}

fn router(inspector: Shared) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/runs") }))
        .route("/assets/inspector.css", get(style_sheet))
        .route("/runs", get(runs::list))
        .route("/runs/{run}", get(run::show))
        .route(
            "/runs/{run}/signal",
            get(actions::confirm_signal).post(actions::signal),
        )
        .route(
            "/runs/{run}/cancel",
            get(actions::confirm_cancel).post(actions::cancel),
        )
        .route("/retention", get(retention::show))
        .route(
            "/retention/sweep",
            get(retention::confirm_sweep).post(retention::sweep),
        )
        .fallback(|| async { page::Failure::not_found("no such page") })
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&inspector),
            access::guard,
        ))
        .with_state(inspector)
}

/// The one style sheet, embedded in the binary.
async fn style_sheet() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("inspector.css"),
    )
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stopped() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
