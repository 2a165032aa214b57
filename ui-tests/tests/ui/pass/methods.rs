//! Inherent methods (receiver skipped, receiver in the key, by value), and
//! a method of a trait impl. (`&mut self` in the key is refused: see
//! `fail/mut_ref_arg.rs`.)
use std::sync::Arc;

use memo_runtime::{Memo, memoized};
use serde::Serialize;

struct Mailer {
    from: String,
}

#[derive(Serialize, Clone)]
struct Template {
    subject: String,
}

impl Mailer {
    #[memoized(skip(self))]
    pub async fn send(&self, memo: &Memo, to: &str) -> memo_runtime::Result<String> {
        Ok(format!("{} -> {to}", self.from))
    }

    #[memoized(skip(self))]
    async fn send_shared(self: Arc<Self>, memo: &Memo) -> memo_runtime::Result<usize> {
        Ok(self.from.len())
    }
}

impl Template {
    #[memoized]
    async fn render(&self, memo: &Memo) -> memo_runtime::Result<String> {
        Ok(self.subject.clone())
    }

    #[memoized]
    async fn into_subject(self, memo: &Memo) -> memo_runtime::Result<String> {
        Ok(self.subject)
    }
}

trait Notifier {
    async fn notify(&self, memo: &Memo, user: u64) -> memo_runtime::Result<bool>;
}

impl Notifier for Mailer {
    #[memoized(skip(self))]
    async fn notify(&self, memo: &Memo, user: u64) -> memo_runtime::Result<bool> {
        Ok(user.is_multiple_of(2))
    }
}

fn main() {
    let _ = (Mailer::send, Mailer::send_shared, Template::render);
    let _ = Template::into_subject;
    let _ = <Mailer as Notifier>::notify;
}
