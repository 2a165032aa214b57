//! The tests' own staging: a test waiting for a held request fails once
//! [`REACH_LIMIT`](memo_tests::pause::REACH_LIMIT) passes, rather than
//! waiting for ever, also on tokio's paused clock.

use std::time::Duration;

use memo_tests::pause::wait_reached_within;
use tokio::sync::oneshot;

#[tokio::test]
async fn a_request_that_is_made_is_waited_for() {
    let (reached_tx, reached) = oneshot::channel();
    reached_tx.send(()).unwrap();
    wait_reached_within(reached, "the request", Duration::from_secs(5)).await;
}

/// On tokio's paused clock too, where a tokio timer would fire at once.
#[tokio::test(start_paused = true)]
#[should_panic(expected = "the request: not made within 50ms")]
async fn a_request_never_made_fails_the_test_once_the_limit_passes() {
    let (_reached_tx, reached) = oneshot::channel::<()>();
    wait_reached_within(reached, "the request", Duration::from_millis(50)).await;
}
