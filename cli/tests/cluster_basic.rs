//! Every operation over a Redis Cluster connection (3 masters, 3 replicas, started by the
//! test): scripts, transactions and batches stay in one slot, so they route to one node.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cluster::RedisCluster;
use redbloom::{Engine, KeyTtl, Layout, RedisBloom};
use std::time::Duration;

#[tokio::test]
async fn every_operation_works_over_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let conn = cluster.connection().await;
    // Keys in different slots, so on different masters.
    for (i, key) in ["cluster:a", "cluster:b", "{user:7}:seen", "cluster:c"]
        .iter()
        .enumerate()
    {
        for (layout, engine) in [
            (Layout::GoZero, Engine::Fast),
            (Layout::GoZero, Engine::Scripts),
            (Layout::Native, Engine::Fast),
        ] {
            let key = format!("{key}:{i}:{layout:?}:{engine:?}");
            let builder = RedisBloom::builder(&key).layout(layout).engine(engine);
            let bloom = match layout {
                Layout::GoZero => builder.bits(200_000),
                _ => builder.expected_items(20_000).false_positive_rate(0.01),
            }
            .build(conn.clone())
            .unwrap();
            let what = key.clone();
            assert!(bloom.add("one").await.unwrap(), "{what}");
            assert!(bloom.exists("one").await.unwrap(), "{what}");
            let small: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
            assert_eq!(bloom.add_many(&small).await.unwrap(), [true; 10], "{what}");
            // Large enough for the dense path (a MULTI on one node) on the Fast engine.
            let big: Vec<String> = (0..5_000).map(|i| format!("b{i}")).collect();
            let new = bloom.add_many(&big).await.unwrap();
            assert!(new.iter().filter(|&&n| n).count() > 4_900, "{what}");
            assert!(
                bloom.exists_many(&big).await.unwrap().iter().all(|&p| p),
                "{what}"
            );
            assert!(
                bloom.exists_many(&small).await.unwrap().iter().all(|&p| p),
                "{what}"
            );
            let info = bloom.info().await.unwrap();
            assert!(
                info.bits_set > 0 && info.ttl == KeyTtl::Persistent,
                "{what}: {info:?}"
            );
            assert!(
                bloom.expire(Duration::from_secs(100)).await.unwrap(),
                "{what}"
            );
            assert!(
                matches!(bloom.info().await.unwrap().ttl, KeyTtl::Expires(_)),
                "{what}"
            );
            assert!(bloom.clear().await.unwrap(), "{what}");
            assert!(!bloom.exists("one").await.unwrap(), "{what}");
            // Leave one item, to see below where the filters lived.
            assert!(bloom.add("kept").await.unwrap(), "{what}");
        }
    }
    let masters_used = cluster
        .master_ports()
        .iter()
        .filter(|port| common::cluster::cli(**port, &["dbsize"]).trim() != "0")
        .count();
    assert!(
        masters_used >= 2,
        "the filters all landed on {masters_used} master(s)"
    );
}

#[tokio::test]
async fn the_cli_loads_and_checks_through_cluster_seeds() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let seeds = cluster.urls()[..2].join(",");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..20_000 {
        std::io::Write::write_all(&mut file, format!("cluster-line:{i}\n").as_bytes()).unwrap();
    }
    let path = file.path().to_str().unwrap().to_owned();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
            .env_remove("REDIS_URL")
            .args([
                "--cluster",
                &seeds,
                "--key",
                "cli:filter",
                "--capacity",
                "20000",
                "--fpr",
                "0.01",
                "--json",
            ])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {stderr}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let loaded = run(&["load", &path]);
    assert_eq!(loaded["items"], 20_000);
    let checked = run(&["check", &path]);
    assert_eq!(
        (&checked["present"], &checked["absent"]),
        (&serde_json::json!(20_000), &serde_json::json!(0))
    );
    let small = run(&["load", &path, "--batch", "100"]);
    assert_eq!(small["new"], 0, "everything was there already");
    let info = run(&["info"]);
    let estimate = info["estimated_items"].as_u64().unwrap();
    assert!((19_000..=21_000).contains(&estimate), "{info}");
    let bench = run(&[
        "bench",
        "--op",
        "exists",
        "--items",
        "2000",
        "--concurrency",
        "16",
    ]);
    assert_eq!(bench["items"], 2_000);
    assert_eq!(run(&["clear"])["deleted"], true);

    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args([
            "--cluster",
            "redis://127.0.0.1:1",
            "--key",
            "k",
            "--bits",
            "64",
            "info",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.lines().count() == 1 && stderr.contains("Redis Cluster"),
        "{stderr}"
    );
}
