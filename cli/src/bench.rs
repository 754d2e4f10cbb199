//! `redbloom bench`: C tasks sharing one client, each call timed (with `--near-cache`, the
//! filter answers `exists` from its copy in the process).

use crate::args::{BenchArgs, BenchOp};
use crate::kinds::CliKind;
use crate::output;
use anyhow::Result;
use redbloom::Bloom;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Runs the load and reports throughput and per-call latency percentiles (and, for `exists`,
/// how many items were found; with a near cache, what it did). `near_cache`: the refresh
/// interval the filter's near cache was given.
pub(crate) async fn run<C, K: CliKind>(
    bloom: Bloom<C, K>,
    args: &BenchArgs,
    near_cache: Option<Duration>,
) -> Result<output::Bench>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    if args.op == BenchOp::Remove {
        // Something to remove: every item added once first, untimed.
        let mut first = 0;
        while first < args.items {
            let last = (first + 10_000).min(args.items);
            let items: Vec<String> = (first..last).map(|i| format!("bench:{i}")).collect();
            bloom.add_many(&items).await?;
            first = last;
        }
    }
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..args.concurrency {
        let (bloom, next) = (bloom.clone(), next.clone());
        let (op, total, batch) = (args.op, args.items, args.batch);
        tasks.spawn(async move { worker(bloom, op, &next, total, batch).await });
    }
    let mut latencies = Vec::new();
    let mut present = 0;
    while let Some(joined) = tasks.join_next().await {
        let done = joined??;
        latencies.extend(done.latencies);
        present += done.present;
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let near_cache = near_cache.zip(bloom.near_cache_stats());
    Ok(output::Bench {
        op: args.op,
        items: args.items,
        concurrency: args.concurrency,
        batch: args.batch,
        seconds,
        items_per_sec: args.items as f64 / seconds,
        p50_us: percentile(&latencies, 50.0),
        p99_us: percentile(&latencies, 99.0),
        p999_us: percentile(&latencies, 99.9),
        max_us: micros(latencies.last().copied().unwrap_or(0)),
        present: (args.op == BenchOp::Exists).then_some(present),
        near_cache: near_cache.map(|(refresh, stats)| output::NearCache::new(refresh, stats)),
    })
}

/// What one task did: each call's latency in nanoseconds, and the items found present.
struct Done {
    latencies: Vec<u64>,
    present: u64,
}

/// Takes the next `batch` item numbers until all `total` are done.
async fn worker<C, K: CliKind>(
    bloom: Bloom<C, K>,
    op: BenchOp,
    next: &AtomicU64,
    total: u64,
    batch: u64,
) -> redbloom::Result<Done>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    let mut done = Done {
        latencies: Vec::new(),
        present: 0,
    };
    let mut items: Vec<String> = Vec::new();
    loop {
        let first = next.fetch_add(batch, Ordering::Relaxed);
        if first >= total {
            return Ok(done);
        }
        // The names are written into the strings of the last call: no allocation per call
        // (which would weigh on a call answered in the process).
        let count = (total.min(first + batch) - first) as usize;
        items.resize_with(count, String::new);
        for (item, i) in items.iter_mut().zip(first..) {
            item.clear();
            let _ = write!(item, "bench:{i}");
        }
        let call = Instant::now();
        match (op, &items[..]) {
            (BenchOp::Add, [item]) => drop(bloom.add(item.as_bytes()).await?),
            (BenchOp::Exists, [item]) => {
                done.present += u64::from(bloom.exists(item.as_bytes()).await?)
            }
            (BenchOp::Remove, [_]) => drop(K::remove_many(&bloom, &items).await?),
            (BenchOp::Add, _) => drop(bloom.add_many(&items).await?),
            (BenchOp::Exists, _) => {
                done.present += bloom
                    .exists_many(&items)
                    .await?
                    .into_iter()
                    .filter(|&found| found)
                    .count() as u64
            }
            (BenchOp::Remove, _) => drop(K::remove_many(&bloom, &items).await?),
        }
        done.latencies.push(call.elapsed().as_nanos() as u64);
        // A call answered in the process (a near cache) never waits: without this, one task
        // would run every item while the other tasks (and the connections' own tasks, which
        // read invalidations) waited.
        tokio::task::coop::consume_budget().await;
    }
}

/// Nanoseconds as whole microseconds, rounded up: a call reported as N us took at most N.
fn micros(nanos: u64) -> u64 {
    nanos.div_ceil(1_000)
}

/// The nearest-rank percentile of sorted nanoseconds, in microseconds (rounded up); 0 when
/// there are none.
fn percentile(sorted: &[u64], pct: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (pct / 100.0 * sorted.len() as f64).ceil() as usize;
    micros(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles_in_whole_microseconds() {
        let values: Vec<u64> = (1..=100).map(|us| us * 1_000).collect();
        assert_eq!(percentile(&values, 50.0), 50);
        assert_eq!(percentile(&values, 99.0), 99);
        assert_eq!(percentile(&values, 99.9), 100);
        assert_eq!(percentile(&[7_000], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
        // Rounded up: 1 ns is 1 us, 1,001 ns 2 us.
        assert_eq!(percentile(&[1], 50.0), 1);
        assert_eq!(percentile(&[1_001], 50.0), 2);
    }
}
