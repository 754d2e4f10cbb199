//! The `metrics` feature for module filters (SPEC.md §7): every public call of a module filter
//! counted by kind `module`, op and outcome, with its latency, like every kind's; a server
//! without the module counted as `missing_commands`. Built and run with `--features metrics`.
#![cfg(feature = "metrics")]

mod common;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use redbloom::ModuleBloom;
use std::time::Duration;

#[tokio::test]
async fn module_calls_are_counted_by_op_and_outcome() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let redis = common::module::redis_with_bloom();
    let key = common::unique_key("module-metrics");
    let bloom = ModuleBloom::builder(&key)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(redis.connection().await)
        .unwrap();
    assert!(bloom.add("a").await.unwrap());
    assert!(bloom.exists("a").await.unwrap());
    assert_eq!(bloom.add_many(&["b", "c"]).await.unwrap(), [true, true]);
    assert_eq!(bloom.exists_many(&["a", "x"]).await.unwrap(), [true, false]);
    bloom.info().await.unwrap();
    assert!(bloom.expire(Duration::from_secs(60)).await.unwrap());
    assert!(bloom.clear().await.unwrap());
    let plain = common::module::redis_without_bloom();
    let refused = ModuleBloom::builder(&key)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(plain.connection().await)
        .unwrap();
    assert!(refused.add("a").await.is_err());

    let mut counted = Vec::new();
    let mut timed = 0;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_owned())
        };
        if label("kind").as_deref() != Some("module") {
            continue;
        }
        match (kind, key.name(), value) {
            (MetricKind::Counter, "redbloom_calls_total", DebugValue::Counter(n)) => {
                counted.push((label("op").unwrap(), label("outcome").unwrap(), n));
            }
            (MetricKind::Histogram, "redbloom_call_duration_seconds", DebugValue::Histogram(s)) => {
                timed += s.len();
            }
            _ => {}
        }
    }
    counted.sort();
    let want: Vec<(String, String, u64)> = [
        ("add", "missing_commands", 1),
        ("add", "ok", 1),
        ("add_many", "ok", 1),
        ("clear", "ok", 1),
        ("exists", "ok", 1),
        ("exists_many", "ok", 1),
        ("expire", "ok", 1),
        ("info", "ok", 1),
    ]
    .iter()
    .map(|(op, outcome, n)| ((*op).to_owned(), (*outcome).to_owned(), *n))
    .collect();
    assert_eq!(counted, want);
    assert_eq!(timed, 8, "every call's latency");
}
