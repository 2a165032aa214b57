//! A request made again at once after a failure, for the few requests
//! nothing else would make again if they stopped at one failure: a
//! commit's check of the run pointer, a give-up's deletes and reads, a
//! cost record's take-back. Each caller says why its request is safe to
//! repeat and how many tries it gets.

use std::future::Future;

use crate::error::Result;

/// `request`, made again after a failure, up to `attempts` times in all;
/// the last answer is returned.
pub(super) async fn tried<T, F: Future<Output = Result<T>>>(
    attempts: u32,
    mut request: impl FnMut() -> F,
) -> Result<T> {
    let mut tried = 1;
    loop {
        match request().await {
            Err(_) if tried < attempts => tried += 1,
            done => return done,
        }
    }
}
