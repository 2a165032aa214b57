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

use clap::Parser;
use memo_runtime::object_store::local::LocalFileSystem;
use memo_runtime::{Memo, MemoStore, RunId};
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

/// Stands in for an expensive, non-idempotent call.
async fn call_llm(ticket: &Ticket<'_>) -> Draft {
    Draft {
        ticket: ticket.id,
        reply: format!("Thanks for writing about {:?}; we are on it.", ticket.body),
    }
}

async fn draft_reply(memo: &Memo, ticket: &Ticket<'_>) -> anyhow::Result<Draft> {
    let input = ("draft_reply", ticket);
    if let Some(committed) = memo.content_get(&input).await? {
        println!("ticket {}: hit", ticket.id);
        return decode(&committed);
    }
    println!("ticket {}: miss, calling the LLM", ticket.id);
    let draft = call_llm(ticket).await;
    let committed = memo.content_put(&input, encode(&draft)?).await?;
    decode(&committed)
}

fn encode(draft: &Draft) -> anyhow::Result<Vec<u8>> {
    Ok(serde_json::to_vec(draft)?)
}

fn decode(bytes: &[u8]) -> anyhow::Result<Draft> {
    Ok(serde_json::from_slice(bytes)?)
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
        let draft = draft_reply(&memo, ticket).await?;
        println!("  -> {}", draft.reply);
    }
    Ok(())
}
