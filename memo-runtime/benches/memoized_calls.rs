//! `#[memoized]` hits and misses in a loop, for counting instructions under
//! callgrind (which does not depend on the machine's load, unlike times):
//!
//! ```text
//! cargo bench -p memo-runtime --bench memoized_calls --no-run
//! valgrind --tool=callgrind target/release/deps/memoized_calls-<hash> hit 5000
//! valgrind --tool=callgrind target/release/deps/memoized_calls-<hash> hit 15000
//! ```
//!
//! The difference between the two runs' totals, divided by 10,000, is the
//! cost of one call without the set-up. `miss` makes each call under a
//! fresh key, so the body runs and its value is committed. Run as a bench
//! (`cargo bench`), it makes 1,000 of each and prints nothing.

use std::sync::Arc;

use memo_runtime::object_store::memory::InMemory;
use memo_runtime::{Incarnation, Memo, MemoStore, RunId, memoized};
use serde::{Deserialize, Serialize};

/// A small ticket, the key's input.
#[derive(Serialize)]
struct Ticket {
    id: u64,
    subject: String,
}

/// What the call returns.
#[derive(Serialize, Deserialize)]
struct Reply {
    text: String,
    tokens: u32,
}

#[memoized(version = 1)]
async fn draft_reply(memo: &Memo, ticket: &Ticket, attempt: u64) -> memo_runtime::Result<Reply> {
    Ok(Reply {
        text: format!("re: {} ({attempt})", ticket.subject),
        tokens: 7,
    })
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mode = args.next().unwrap_or_else(|| "both".to_owned());
    let calls: u64 = args
        .next()
        .map_or(1_000, |n| n.parse().expect("a number of calls"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // A workflow run's memo, so the committed-entry cache serves the hits.
    let store = MemoStore::new(Arc::new(InMemory::new()), "memo");
    let memo = store.memo_for(&RunId::new("bench").unwrap(), Incarnation::from_u64(1), 0);
    let ticket = Ticket {
        id: 42,
        subject: "refund for order 1234".to_owned(),
    };
    rt.block_on(async {
        if mode == "hit" || mode == "both" {
            draft_reply(&memo, &ticket, 0).await.unwrap();
            for _ in 0..calls {
                let reply = draft_reply(&memo, std::hint::black_box(&ticket), 0).await;
                assert_eq!(reply.unwrap().tokens, 7);
            }
        }
        if mode == "miss" || mode == "both" {
            for attempt in 1..=calls {
                let reply = draft_reply(&memo, &ticket, std::hint::black_box(attempt)).await;
                assert_eq!(reply.unwrap().tokens, 7);
            }
        }
    });
}
