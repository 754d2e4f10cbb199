//! Exactly-once-ish processing across replicas: drop redelivered events with one shared filter.
//!
//! ```text
//! cargo run --example dedup_replicas
//! ```
//!
//! A queue with at-least-once delivery hands each event to any of several replicas, sometimes
//! more than once. Each replica runs `if seen.add(id).await? { process(event) }`. `add()` sets
//! the item's bits with one `BITFIELD` command (with `Engine::Scripts`: one run of go-zero's Lua
//! set script), and Redis runs each command or script alone, so of all concurrent adds of one id
//! exactly one sees a bit flip from 0 to 1 and returns `true`: no event is processed twice,
//! even by replicas on different connections (here: different clients, as separate processes
//! would have). The one risk is the other way round: a false positive makes a never-seen event
//! look seen, and it is skipped; size the filter so that this is rare enough.

mod support;

use redbloom::RedisBloom;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const EVENTS: u32 = 20_000;
const DELIVERIES_PER_EVENT: u32 = 3;
const REPLICAS: usize = 4;
const KEY: &str = "redbloom:example:dedup_replicas";
const FALSE_POSITIVE_RATE: f64 = 1e-6;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;

    // The stream: every event id delivered 3 times, the copies interleaved in a fixed order.
    let stream = Arc::new(shuffled_deliveries(EVENTS, DELIVERIES_PER_EVENT));
    // The queue's read position: each delivery goes to exactly one replica.
    let next = Arc::new(AtomicUsize::new(0));

    // Every replica configures the same key and size, as separate processes would.
    let config = RedisBloom::builder(KEY)
        .expected_items(u64::from(EVENTS))
        .false_positive_rate(FALSE_POSITIVE_RATE);
    let setup = config.clone().build(support::connect(&url).await?)?;
    setup.clear().await?; // start empty, even if an earlier run was interrupted
    println!(
        "{} deliveries of {EVENTS} events to {REPLICAS} replicas; filter of {} bits \
         for a false-positive rate of {FALSE_POSITIVE_RATE:e}",
        stream.len(),
        setup.bits()
    );

    let mut replicas = Vec::new();
    for _ in 0..REPLICAS {
        // Its own client and connection, like a separate process.
        let seen = config.clone().build(support::connect(&url).await?)?;
        let (stream, next) = (Arc::clone(&stream), Arc::clone(&next));
        replicas.push(tokio::spawn(async move {
            let mut processed = Vec::new();
            while let Some(&id) = stream.get(next.fetch_add(1, Ordering::Relaxed)) {
                // true = this id certainly was never added before: ours to process.
                if seen.add(format!("event:{id}")).await? {
                    processed.push(id); // process(event) would go here
                }
            }
            Ok::<_, redbloom::Error>(processed)
        }));
    }

    // Tally how often each event was processed, over all replicas.
    let mut times_processed = vec![0u32; EVENTS as usize];
    let mut per_replica = Vec::new();
    for replica in replicas {
        let processed = replica.await??;
        per_replica.push(processed.len());
        for id in processed {
            times_processed[id as usize] += 1;
        }
    }
    let total: u32 = times_processed.iter().sum();
    let distinct = stream.iter().collect::<HashSet<_>>().len();
    let never = times_processed.iter().filter(|&&n| n == 0).count();
    let most = times_processed.iter().copied().max().unwrap_or(0);

    println!("processed per replica: {per_replica:?} (the split varies from run to run)");
    println!("events processed:      {total}");
    println!("distinct events:       {distinct}");
    println!(
        "duplicates suppressed: {}",
        stream.len() as u64 - u64::from(total)
    );
    println!("skipped as false positives (never processed): {never}");
    println!(
        "each event processed at most once: {}",
        if most <= 1 { "yes" } else { "NO" }
    );
    setup.clear().await?; // clean up, so a rerun prints the same
    if most > 1 {
        return Err(support::Fatal(format!("an event was processed {most} times")).into());
    }
    Ok(())
}

/// Each id in `0..events` repeated `copies` times, shuffled with a fixed seed (Fisher–Yates
/// driven by a small linear congruential generator: the same order on every run, no `rand`).
fn shuffled_deliveries(events: u32, copies: u32) -> Vec<u32> {
    let mut deliveries: Vec<u32> = (0..copies).flat_map(|_| 0..events).collect();
    let mut state: u64 = 0x5eed;
    for i in (1..deliveries.len()).rev() {
        // Knuth's MMIX constants; the high bits are the random ones.
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = ((state >> 33) % (i as u64 + 1)) as usize;
        deliveries.swap(i, j);
    }
    deliveries
}
