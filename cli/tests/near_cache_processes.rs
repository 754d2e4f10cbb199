//! The near cache across processes (SPEC.md §6): another process (the `redbloom` CLI) adds,
//! removes (counting) and clears; this process's cached answers follow within the refresh
//! interval, with tracking and without. The worst delay over every trial is printed and
//! bounded by the interval plus one read of the copy.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::redbloom;
use redbloom::{Builder, CountingBloom, NearCache};
use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_millis(300);
/// The interval, one read of the copy and the polling's step.
const SLACK: Duration = Duration::from_millis(150);

/// Runs the CLI to completion (the change is acknowledged when it exits 0).
fn cli(url: &str, key: &str, args: &[&str]) {
    let out = redbloom(url, key, args).output().unwrap();
    assert!(
        out.status.success(),
        "redbloom {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How long `check` takes to return `want`, polling every millisecond.
async fn until<F, Fut>(want: bool, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = redbloom::Result<bool>>,
{
    let start = Instant::now();
    while check().await.unwrap() != want {
        assert!(start.elapsed() < Duration::from_secs(5), "never {want}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    start.elapsed()
}

fn cache(url: &str, tracked: bool) -> NearCache {
    let cache = NearCache::new(INTERVAL);
    match tracked {
        true => cache.tracking(redbloom::redis::Client::open(url).unwrap()),
        false => cache,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_and_clears_of_another_process_reach_the_copy_within_the_interval() {
    let redis = common::redis().await;
    let url = redis.url();
    for tracked in [true, false] {
        let key = common::unique_key("near:procs");
        let flags = ["--capacity", "10000", "--fpr", "0.001"];
        let reader = Builder::new(&key)
            .expected_items(10_000)
            .false_positive_rate(0.001)
            .near_cache(cache(url, tracked))
            .build(redis.connection().await)
            .unwrap();
        let mut worst = Duration::ZERO;
        for trial in 0..8u64 {
            let item = format!("p-{trial}");
            assert!(!reader.exists(&item).await.unwrap());
            tokio::time::sleep(Duration::from_millis(29 * trial)).await;
            cli(url, &key, &[&flags[..], &["add", &item]].concat());
            worst = worst.max(until(true, || reader.exists(&item)).await);
        }
        cli(url, &key, &[&flags[..], &["clear"]].concat());
        worst = worst.max(until(false, || reader.exists("p-0")).await);
        let stats = reader.near_cache_stats().unwrap();
        println!("plain, tracking {tracked}: worst {worst:?} over 9 changes; {stats:?}");
        assert!(worst <= INTERVAL + SLACK, "{worst:?}");
        assert_eq!(stats.tracking, tracked);
        assert!(stats.hits > stats.misses, "{stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removes_of_another_process_reach_the_copy_within_the_interval() {
    let redis = common::redis().await;
    let url = redis.url();
    for tracked in [true, false] {
        let key = common::unique_key("near:procs:counting");
        let flags = ["--counting", "--capacity", "10000", "--fpr", "0.001"];
        let reader = CountingBloom::builder(&key)
            .expected_items(10_000)
            .false_positive_rate(0.001)
            .near_cache(cache(url, tracked))
            .build(redis.connection().await)
            .unwrap();
        let mut worst = Duration::ZERO;
        for trial in 0..8u64 {
            let item = format!("c-{trial}");
            cli(url, &key, &[&flags[..], &["add", &item]].concat());
            worst = worst.max(until(true, || reader.exists(&item)).await);
            tokio::time::sleep(Duration::from_millis(31 * trial)).await;
            cli(url, &key, &[&flags[..], &["remove", &item]].concat());
            worst = worst.max(until(false, || reader.exists(&item)).await);
        }
        println!(
            "counting, tracking {tracked}: worst {worst:?} over 16 changes; {:?}",
            reader.near_cache_stats()
        );
        assert!(worst <= INTERVAL + SLACK, "{worst:?}");
    }
}
