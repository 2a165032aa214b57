//! Quickstart: a support-ticket step whose expensive calls are memoized in a
//! local folder. Run it twice: the first run misses and calls the "LLM", the
//! second run hits every entry and calls nothing.
//!
//! ```text
//! cargo run -p memo-examples --bin quickstart
//! cargo run -p memo-examples --bin quickstart   # all hits
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use clap::Parser;
use memo_runtime::object_store::local::LocalFileSystem;
use memo_runtime::{Memo, MemoStore, RunId, memoized};
use serde::{Deserialize, Serialize};

/// Memoizes a few fake LLM calls in a local folder.
#[derive(Parser)]
struct Args {
    /// Folder that holds the memo entries.
    #[arg(long, default_value = "target/memo-quickstart")]
    dir: PathBuf,
    /// The run to work on; a new run id starts from scratch.
    #[arg(long, default_value = "quickstart-run")]
    run: String,
}

#[derive(Serialize)]
struct Ticket<'a> {
    id: u32,
    body: &'a str,
}

#[derive(Serialize, Deserialize, Debug)]
struct Draft {
    ticket: u32,
    reply: String,
}

/// How many times this process called the "LLM".
static LLM_CALLS: AtomicU32 = AtomicU32::new(0);

/// Stands in for an expensive, non-idempotent call.
async fn call_llm(ticket: &Ticket<'_>) -> Draft {
    LLM_CALLS.fetch_add(1, Ordering::SeqCst);
    Draft {
        ticket: ticket.id,
        reply: format!("Thanks for writing about {:?}; we are on it.", ticket.body),
    }
}

/// Drafts a reply once per (run, step, ticket): on a retry, or a second run
/// of this example, the committed draft comes back and the body never runs.
#[memoized]
async fn draft_reply(memo: &Memo, ticket: &Ticket<'_>) -> anyhow::Result<Draft> {
    Ok(call_llm(ticket).await)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.dir)?;
    let folder = Arc::new(LocalFileSystem::new_with_prefix(&args.dir)?);
    let store = MemoStore::new(folder, "quickstart");
    let memo = store.new_memo(&RunId::new(args.run)?, 0);

    let tickets = [
        Ticket {
            id: 1,
            body: "my invoice is wrong",
        },
        Ticket {
            id: 2,
            body: "the app crashes on login",
        },
        Ticket {
            id: 3,
            body: "please cancel my order",
        },
    ];
    for ticket in &tickets {
        let calls_before = LLM_CALLS.load(Ordering::SeqCst);
        let draft = draft_reply(&memo, ticket).await?;
        if LLM_CALLS.load(Ordering::SeqCst) == calls_before {
            println!("ticket {}: hit", ticket.id);
        } else {
            println!("ticket {}: miss, called the LLM", ticket.id);
        }
        println!("  -> {}", draft.reply);
    }
    Ok(())
}
