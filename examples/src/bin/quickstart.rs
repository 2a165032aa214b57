//! Quickstart: three support tickets, each answered by an expensive (here:
//! simulated) LLM call that is memoized in a local folder. Run it twice: the
//! first run calls the "LLM" three times; the second finds every committed
//! draft in the memo and calls nothing.
//!
//! ```text
//! cargo run -p memo-examples --bin quickstart
//! cargo run -p memo-examples --bin quickstart   # 0 expensive calls
//! ```

use clap::Parser;
use memo_examples::{CallLog, DEFAULT_STORE, Price, Report, open_store};
use memo_runtime::{Memo, RunId, memoized};
use serde::{Deserialize, Serialize};

/// Memoizes a few simulated LLM calls.
#[derive(Parser)]
struct Args {
    /// Where memo keeps its entries: a folder, or a store URL
    /// (`file:///var/lib/memo`; `s3://bucket/prefix` with `--features aws`).
    #[arg(long, default_value = DEFAULT_STORE)]
    store: String,
    /// The run to work on; a new run id starts from scratch.
    #[arg(long, default_value = "quickstart")]
    run: String,
}

#[derive(Serialize)]
struct Ticket {
    id: u32,
    body: &'static str,
}

#[derive(Serialize, Deserialize)]
struct Draft {
    reply: String,
}

/// One LLM call: 3 cents and 1.2 seconds (simulated, nothing is waited for).
const LLM: Price = Price::new(30, 1200);

/// The calls that really ran in this process.
static CALLS: CallLog = CallLog::new();

/// Drafts a reply once per (run, step, ticket): on a retry, or a second run
/// of this example, the committed draft comes back and the body never runs.
#[memoized]
async fn draft_reply(memo: &Memo, ticket: &Ticket) -> anyhow::Result<Draft> {
    CALLS.call_ran(format!("draft_reply(ticket {})", ticket.id)); // the "LLM" call
    Ok(Draft {
        reply: format!("Thanks for writing about {:?}; we are on it.", ticket.body),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stores = open_store(&args.store)?;
    let memo = stores.memo.new_memo(&RunId::new(&args.run)?, 0);
    println!("run {} on {}\n", args.run, stores.url);

    let tickets = [
        (1, "my invoice is wrong"),
        (2, "the app crashes on login"),
        (3, "please cancel my order"),
    ];
    let mut report = Report::new();
    for (id, body) in tickets {
        let draft = draft_reply(&memo, &Ticket { id, body }).await?;
        println!("ticket {id}: {}", draft.reply);
        let call = format!("draft_reply(ticket {id})");
        report.call("", &call, CALLS.ran_or_hit(&call), LLM);
    }
    println!();
    report.print();
    Ok(())
}
