//! `redbloom bench`: C tasks sharing one client, each call timed.

use crate::args::{BenchArgs, BenchOp};
use crate::filter::Filter;
use crate::output;
use anyhow::Result;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinSet;

/// Runs the load and reports throughput and per-call latency percentiles.
pub(crate) async fn run<C>(bloom: Filter<C>, args: &BenchArgs) -> Result<output::Bench>
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
    while let Some(joined) = tasks.join_next().await {
        latencies.extend(joined??);
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
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
        max_us: latencies.last().copied().unwrap_or(0),
    })
}

/// Takes the next `batch` item numbers until all `total` are done; returns each call's latency
/// in microseconds.
async fn worker<C>(
    bloom: Filter<C>,
    op: BenchOp,
    next: &AtomicU64,
    total: u64,
    batch: u64,
) -> redbloom::Result<Vec<u64>>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    let mut latencies = Vec::new();
    loop {
        let first = next.fetch_add(batch, Ordering::Relaxed);
        if first >= total {
            return Ok(latencies);
        }
        let items: Vec<String> = (first..total.min(first + batch))
            .map(|i| format!("bench:{i}"))
            .collect();
        let call = Instant::now();
        match (op, &items[..]) {
            (BenchOp::Add, [item]) => drop(bloom.add(item.as_bytes()).await?),
            (BenchOp::Exists, [item]) => drop(bloom.exists(item.as_bytes()).await?),
            (BenchOp::Remove, [item]) => drop(bloom.remove(item.as_bytes()).await?),
            (BenchOp::Add, _) => drop(bloom.add_many(&items).await?),
            (BenchOp::Exists, _) => drop(bloom.exists_many(&items).await?),
            (BenchOp::Remove, _) => drop(bloom.remove_many(&items).await?),
        }
        latencies.push(call.elapsed().as_micros() as u64);
    }
}

/// The nearest-rank percentile of sorted values; 0 when there are none.
fn percentile(sorted: &[u64], pct: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (pct / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), 50);
        assert_eq!(percentile(&values, 99.0), 99);
        assert_eq!(percentile(&values, 99.9), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }
}
