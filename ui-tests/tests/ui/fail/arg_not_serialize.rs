use memo_runtime::{Memo, memoized};

struct Ticket {
    body: String,
}

#[memoized]
async fn draft(memo: &Memo, ticket: &Ticket) -> Result<String, memo_runtime::Error> {
    Ok(ticket.body.clone())
}

fn main() {}
