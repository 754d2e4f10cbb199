//! Exactly-once processing within a window, across replicas: drop redelivered events with one
//! shared [`WindowBloom`].
//!
//! ```text
//! cargo run --example dedup_replicas
//! ```
//!
//! A queue with at-least-once delivery hands each event to any of several replicas, sometimes
//! more than once. Each replica runs `if seen.add(id).await? { process(event) }`. `add()`
//! tests the live generations and sets the current one in one atomic script, so of all
//! concurrent adds of one id exactly one returns `true`, even from replicas on different
//! connections (here: different clients, as separate processes would have).
//!
//! The guarantee: a redelivery that arrives within the window W of the event's first delivery
//! is dropped. An id is forgotten by W·G/(G-1) (G generations, 4 by default; the Redis
//! server's clock), and a redelivery after that is processed again. That is the point: old
//! generations expire in Redis by themselves, so the filter never fills up however long the
//! stream runs. The one risk the other way round: a false positive makes an event never seen
//! within the window look seen, and it is skipped; the rate bounds how often.
//!
//! Sizing: the window must cover the longest redelivery delay (e.g. the queue's visibility
//! timeout times its retries); the capacity (`expected_items` here, `--capacity` with the CLI's
//! `--window`) is the most events in any one window, e.g. the peak rate times W. Memory is G
//! generations, each sized for that many events at about half the false-positive rate.
//!
//! This run uses W = 2 s and G = 4: 1,000 events delivered 3 times each to 4 replicas, the
//! copies of an event close together (each event processed once), then, after W·G/(G-1) ≈ 2.7 s, 100 of them redelivered 3 times each (each
//! processed once more). It asserts both outcomes.

mod support;

use redbloom::redis::aio::MultiplexedConnection;
use redbloom::WindowBloom;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEY: &str = "redbloom:example:dedup_replicas";
const WINDOW: Duration = Duration::from_secs(2);
const GENERATIONS: u32 = 4;
const EVENTS: u32 = 1_000;
const LATE_EVENTS: u32 = 100;
const DELIVERIES_PER_EVENT: u32 = 3;
/// An event's redeliveries arrive among the deliveries of the next 100 or so events.
const BLOCK: u32 = 100;
const REPLICAS: usize = 4;
/// Low enough that no event of this run is skipped as a false positive.
const FALSE_POSITIVE_RATE: f64 = 1e-9;

type Filter = WindowBloom<MultiplexedConnection>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::no_arguments(
        "usage: dedup_replicas (no arguments): replicas drop redelivered events with one window filter",
    )?;
    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;

    // Every replica configures the same key, window and size, as separate processes would.
    let config = WindowBloom::builder(KEY, WINDOW)
        .generations(GENERATIONS)
        .expected_items(u64::from(EVENTS)) // the most events in any one window
        .false_positive_rate(FALSE_POSITIVE_RATE);
    let setup = config.clone().build(support::connect(&url).await?)?;
    setup.clear().await?; // start empty, even if an earlier run was interrupted
    let forgotten_by = WINDOW * GENERATIONS / (GENERATIONS - 1);
    println!(
        "window {WINDOW:?} over {GENERATIONS} generations of {} bits: an event is found for \
         at least {WINDOW:?}, forgotten by {forgotten_by:.2?}",
        setup.bits()
    );

    let mut replicas = Vec::new();
    for _ in 0..REPLICAS {
        // Its own client and connection, like a separate process.
        replicas.push(config.clone().build(support::connect(&url).await?)?);
    }

    // 1. Every event delivered 3 times, its copies close together: all within the window.
    let started = Instant::now();
    let (times, per_replica) = consume(&replicas, deliveries(EVENTS, DELIVERIES_PER_EVENT)).await?;
    let took = started.elapsed();
    let processed: u32 = times.iter().sum();
    println!(
        "{} deliveries of {EVENTS} events in {took:.0?}: processed {processed} \
         (per replica {per_replica:?}), dropped {} redeliveries",
        EVENTS * DELIVERIES_PER_EVENT,
        EVENTS * DELIVERIES_PER_EVENT - processed
    );
    let max = times.iter().max().copied();
    assert_eq!(max, Some(1), "an event was processed twice");
    assert_eq!(
        processed, EVENTS,
        "an event was skipped as a false positive"
    );

    // 2. Wait until the window has passed: every generation holding those events has expired.
    let wait = forgotten_by + Duration::from_millis(300);
    println!("waiting {wait:.2?}, past the window's W·G/(G-1)...");
    tokio::time::sleep(wait).await;
    let live = setup.info().await?.parts.len();
    assert_eq!(live, 0, "the old generations are still live");

    // 3. Late redeliveries of the first 100 events: processed once more, each exactly once.
    let (late, _) = consume(&replicas, deliveries(LATE_EVENTS, DELIVERIES_PER_EVENT)).await?;
    let processed_again: u32 = late.iter().sum();
    println!(
        "{} late deliveries of {LATE_EVENTS} events: processed {processed_again} again, \
         dropped {} redeliveries",
        LATE_EVENTS * DELIVERIES_PER_EVENT,
        LATE_EVENTS * DELIVERIES_PER_EVENT - processed_again
    );
    assert_eq!(
        late.iter().max().copied(),
        Some(1),
        "a late event was processed twice"
    );
    assert_eq!(
        processed_again, LATE_EVENTS,
        "a late event was not processed again"
    );

    setup.clear().await?; // clean up, so a rerun starts empty
    println!("ok: each event processed once within the window, and again after it");
    Ok(())
}

/// Hands each delivery of `stream` to one of the replicas, which process it when `add` says
/// the event is new within the window. Returns how often each event id was processed, and
/// how many events each replica processed.
async fn consume(replicas: &[Filter], stream: Vec<u32>) -> redbloom::Result<(Vec<u32>, Vec<u32>)> {
    let events = stream.iter().max().map_or(0, |&id| id as usize + 1);
    let stream = Arc::new(stream);
    // The queue's read position: each delivery goes to exactly one replica.
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = replicas
        .iter()
        .map(|seen| {
            let (seen, stream, next) = (seen.clone(), Arc::clone(&stream), Arc::clone(&next));
            tokio::spawn(async move {
                let mut processed = Vec::new();
                while let Some(&id) = stream.get(next.fetch_add(1, Ordering::Relaxed)) {
                    // true = not seen within the window: ours to process.
                    if seen.add(format!("event:{id}")).await? {
                        processed.push(id); // process(event) would go here
                    }
                }
                Ok::<_, redbloom::Error>(processed)
            })
        })
        .collect();
    let mut times = vec![0; events];
    let mut per_replica = Vec::new();
    for task in tasks {
        let processed = task.await.expect("a replica panicked")?;
        per_replica.push(processed.len() as u32);
        for id in processed {
            times[id as usize] += 1;
        }
    }
    Ok((times, per_replica))
}

/// Each id in `0..events` delivered `copies` times: ids in blocks of `BLOCK`, each block's
/// copies shuffled with a fixed seed (Fisher–Yates driven by a small linear congruential
/// generator: the same order on every run, no `rand`). So an event's redeliveries arrive
/// soon after its first delivery, well within the window, however long the whole stream takes.
fn deliveries(events: u32, copies: u32) -> Vec<u32> {
    let mut state: u64 = 0x5eed;
    let mut deliveries = Vec::new();
    for start in (0..events).step_by(BLOCK as usize) {
        let mut block: Vec<u32> = (0..copies)
            .flat_map(|_| start..events.min(start + BLOCK))
            .collect();
        for i in (1..block.len()).rev() {
            // Knuth's MMIX constants; the high bits are the random ones.
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let j = ((state >> 33) % (i as u64 + 1)) as usize;
            block.swap(i, j);
        }
        deliveries.extend(block);
    }
    deliveries
}
