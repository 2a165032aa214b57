//! The sweep's progress, one tick per run cleared: an `indicatif` bar on a
//! terminal, a plain line per run otherwise.
//!
//! `RetentionSweeper` reports progress only through `tracing`: each run it
//! clears (or, in a dry run, counts) is one `memo.sweep.run` span, with the
//! run's id in its `run_id` field. A layer that listens to that span alone
//! ticks when the span closes, that is when the run is done, whatever its
//! outcome (failures are in the sweep's report).

use std::fmt;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Subscriber, subscriber};
use tracing_subscriber::filter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::output::errln;

/// The span `RetentionSweeper` opens around each run it sweeps.
const SWEEP_RUN_SPAN: &str = "memo.sweep.run";

/// Where progress goes.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    done: AtomicUsize,
}

impl Progress {
    /// Progress over `total` runs, drawn as a bar if stderr is a terminal.
    pub(crate) fn new(total: usize, verb: &'static str) -> Arc<Progress> {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total as u64);
            let style = ProgressStyle::with_template(&format!(
                "{verb} {{bar:40}} {{pos}}/{{len}} runs {{msg}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        Arc::new(Progress {
            bar,
            total,
            done: AtomicUsize::new(0),
        })
    }

    fn run_done(&self, run_id: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bar {
            Some(bar) => {
                bar.inc(1);
                bar.set_message(run_id.to_string());
            }
            None => errln!("[{done}/{}] {run_id}", self.total),
        }
    }

    /// Removes the bar, if any.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// Routes this process's sweep spans to `self` from now on.
    pub(crate) fn listen(self: &Arc<Progress>) -> anyhow::Result<()> {
        let layer = SweptRuns {
            progress: Arc::clone(self),
        }
        .with_filter(filter::filter_fn(|meta| meta.name() == SWEEP_RUN_SPAN));
        subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;
        Ok(())
    }
}

/// The layer that ticks `progress` when a sweep span closes.
struct SweptRuns {
    progress: Arc<Progress>,
}

/// The `run_id` of a sweep span, kept with the span until it closes.
struct SweptRun(String);

impl<S> Layer<S> for SweptRuns
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut run = RunIdField(None);
        attrs.record(&mut run);
        if let (Some(span), Some(run_id)) = (ctx.span(id), run.0) {
            span.extensions_mut().insert(SweptRun(run_id));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        if let Some(SweptRun(run_id)) = span.extensions().get::<SweptRun>() {
            self.progress.run_done(run_id);
        }
    }
}

struct RunIdField(Option<String>);

impl Visit for RunIdField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "run_id" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "run_id" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}
