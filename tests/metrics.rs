//! The `metrics` feature (docs/operations.md "Metrics"): a recorder installed by the application
//! sees, for every kind and every public call, `redbloom_calls_total` by kind, op and outcome
//! and `redbloom_call_duration_seconds`; retries and the near cache have their own counters.
//! Built and run with `--features metrics` (the README's test command has `--all-features`).
#![cfg(feature = "metrics")]

mod common;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use redbloom::{CountingBloom, GrowingBloom, NearCache, RedisBloom, Retry, WindowBloom};
use std::collections::BTreeMap;
use std::time::Duration;

/// A metric's name and sorted labels.
type Name = (String, Vec<(String, String)>);

/// What the recorder holds (one snapshot: it hands each histogram sample out once): every
/// counter's value and every histogram's number of samples.
fn snapshot(snapshotter: &Snapshotter) -> (BTreeMap<Name, u64>, BTreeMap<Name, usize>) {
    let (mut counters, mut histograms) = (BTreeMap::new(), BTreeMap::new());
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        labels.sort();
        let name = (key.name().to_owned(), labels);
        match (kind, value) {
            (MetricKind::Counter, DebugValue::Counter(n)) => {
                counters.insert(name, n);
            }
            (MetricKind::Histogram, DebugValue::Histogram(samples)) => {
                histograms.insert(name, samples.len());
            }
            _ => {}
        }
    }
    (counters, histograms)
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    labels
}

#[tokio::test]
async fn every_kind_counts_its_calls_by_op_and_outcome() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let base = common::unique_key("metrics");

    let plain = RedisBloom::builder(format!("{base}:plain"))
        .bits(1 << 16)
        .build(conn.clone())
        .unwrap();
    let window = WindowBloom::builder(format!("{base}:window"), Duration::from_secs(60))
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    let counting = CountingBloom::builder(format!("{base}:counting"))
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    let growing = GrowingBloom::builder(format!("{base}:growing"))
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();

    macro_rules! every_verb {
        ($bloom:expr) => {{
            assert!($bloom.add("a").await.unwrap());
            assert!($bloom.exists("a").await.unwrap());
            assert_eq!($bloom.add_many(&["b", "c"]).await.unwrap(), [true, true]);
            assert_eq!(
                $bloom.exists_many(&["a", "x"]).await.unwrap(),
                [true, false]
            );
            assert!($bloom.exists("a").await.unwrap());
            $bloom.info().await.unwrap();
            assert!($bloom.expire(Duration::from_secs(60)).await.unwrap());
            assert!($bloom.clear().await.unwrap());
        }};
    }
    every_verb!(plain);
    every_verb!(window);
    every_verb!(counting);
    every_verb!(growing);
    assert!(counting.add_if_absent("d").await.unwrap());
    assert!(counting.remove("d").await.unwrap());
    assert_eq!(counting.remove_many(&["d"]).await.unwrap(), [false]);

    // An error's outcome: a key of another type.
    let mut admin = redis.connection().await;
    let list = format!("{base}:list");
    let _: i64 = redis::cmd("RPUSH")
        .arg(&list)
        .arg("x")
        .query_async(&mut admin)
        .await
        .unwrap();
    let wrong = RedisBloom::builder(&list)
        .bits(64)
        .build(conn.clone())
        .unwrap();
    assert!(wrong.add("x").await.is_err());

    let (seen, latencies) = snapshot(&snapshotter);
    let calls = |kind: &str, op: &str, outcome: &str| {
        let key = (
            "redbloom_calls_total".to_owned(),
            labels(&[("kind", kind), ("op", op), ("outcome", outcome)]),
        );
        seen.get(&key).copied().unwrap_or(0)
    };
    for kind in ["plain", "window", "counting", "growing"] {
        for (op, times) in [
            ("add", 1),
            ("exists", 2),
            ("add_many", 1),
            ("exists_many", 1),
            ("info", 1),
            ("expire", 1),
            ("clear", 1),
        ] {
            assert_eq!(calls(kind, op, "ok"), times, "{kind} {op}: {seen:#?}");
            let key = (
                "redbloom_call_duration_seconds".to_owned(),
                labels(&[("kind", kind), ("op", op), ("outcome", "ok")]),
            );
            let samples = latencies.get(&key).copied().unwrap_or(0);
            assert_eq!(samples, times as usize, "{kind} {op}'s latencies");
        }
    }
    for op in ["add_if_absent", "remove", "remove_many"] {
        assert_eq!(calls("counting", op, "ok"), 1, "counting {op}: {seen:#?}");
    }
    assert_eq!(calls("plain", "add", "wrong_type"), 1, "{seen:#?}");

    // The near cache: the first check reads the copy and answers from it, as the second does.
    let near = RedisBloom::builder(format!("{base}:near"))
        .bits(1 << 16)
        .near_cache(NearCache::new(Duration::from_secs(60)))
        .build(conn.clone())
        .unwrap();
    assert!(near.add("a").await.unwrap());
    assert!(near.exists("a").await.unwrap());
    assert!(near.exists("a").await.unwrap());
    let (seen, _) = snapshot(&snapshotter);
    let near = |event: &str| {
        let key = (
            "redbloom_near_cache_total".to_owned(),
            labels(&[("event", event), ("kind", "plain")]),
        );
        seen.get(&key).copied().unwrap_or(0)
    };
    assert_eq!(
        (near("miss"), near("refresh"), near("hit")),
        (0, 1, 2),
        "{seen:#?}"
    );

    // Retries: a server that goes away while a call retries (a server of this test's own).
    let mut server = common::server::RedisServer::start().expect("a private redis-server");
    let manager = redis::Client::open(server.url())
        .unwrap()
        .get_connection_manager()
        .await
        .unwrap();
    let gone = RedisBloom::builder(format!("{base}:gone"))
        .bits(64)
        .retry(Retry::for_duration(Duration::from_millis(300)))
        .build(manager)
        .unwrap();
    assert!(gone.add("x").await.unwrap());
    server.kill();
    assert!(gone.add("y").await.is_err());
    let (seen, _) = snapshot(&snapshotter);
    let key = (
        "redbloom_retries_total".to_owned(),
        labels(&[("kind", "plain")]),
    );
    assert!(seen.get(&key).copied().unwrap_or(0) >= 1, "{seen:#?}");
}
