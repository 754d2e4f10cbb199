//! A response timeout means the server, not our own queue (issue 23 point 8): a filter keeps a
//! bounded number of bytes of commands in flight on its connection, so that a command's
//! response timeout does not run while it waits behind everything the filter's concurrent
//! batches have queued. Many concurrent large batches on one connection, with a response
//! timeout a few times one command's time and no retries, all succeed.

mod common;

use common::server::RedisServer;
use redbloom::{CountingBloom, Retry, MAX_OFFSETS_PER_COMMAND};
use std::time::{Duration, Instant};

/// Concurrent batches, and the commands each one makes.
const BATCHES: usize = 32;
const COMMANDS: usize = 4;

fn items(batch: usize, per_batch: usize) -> Vec<String> {
    (0..per_batch).map(|i| format!("q:{batch}:{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_batches_are_not_timed_out_by_their_own_queue() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    // Counters too many for the dense swap to pay: each batch goes as per-item commands of
    // MAX_OFFSETS_PER_COMMAND counters (about 700 KB each).
    let builder = |timeout| {
        let url = url.clone();
        async move {
            CountingBloom::builder("queue")
                .expected_items(4_000_000)
                .false_positive_rate(0.001)
                .retry(Retry::none())
                .build(common::impatient(&url, timeout).await)
                .unwrap()
        }
    };
    let patient = builder(Duration::from_secs(30)).await;
    let k = patient.hashes() as usize;
    let per_command = MAX_OFFSETS_PER_COMMAND / k;
    // One command's time, alone on the connection (the median of 5).
    let mut alone = Vec::new();
    for round in 0..5 {
        let batch = items(1_000 + round, per_command);
        let start = Instant::now();
        patient.add_many(&batch).await.unwrap();
        alone.push(start.elapsed());
    }
    alone.sort();
    let one = alone[2];
    // All at once: BATCHES x COMMANDS commands of that size. Each may wait for the few in
    // flight before it; had they all gone to the connection at once, the last would wait for
    // all of them (128 commands' time) within its response timeout.
    let timeout = (one * 48).max(Duration::from_millis(300));
    let bloom = builder(timeout).await;
    let start = Instant::now();
    let tasks: Vec<_> = (0..BATCHES)
        .map(|batch| {
            let bloom = bloom.clone();
            tokio::spawn(async move { bloom.add_many(&items(batch, per_command * COMMANDS)).await })
        })
        .collect();
    let mut failed = Vec::new();
    for task in tasks {
        if let Err(err) = task.await.unwrap() {
            failed.push(err.to_string());
        }
    }
    let all = start.elapsed();
    assert!(
        failed.is_empty(),
        "{} of {BATCHES} batches failed with a response timeout of {timeout:?} (one command \
         alone: {one:?}; all {} commands: {all:?}): {:?}",
        failed.len(),
        BATCHES * COMMANDS,
        failed.first()
    );
    assert!(
        all > timeout,
        "the commands took {all:?} in all, within one response timeout ({timeout:?}): the test \
         shows nothing"
    );
}
