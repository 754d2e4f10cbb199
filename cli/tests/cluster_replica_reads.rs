//! Reads served by replicas: over a cluster connection whose client routes read-only commands
//! to replicas (redis-rs's `read_routing_strategy`), `exists` and `exists_many` use only
//! `BITFIELD_RO` and `GETRANGE`, so the replicas answer them and the masters only take writes.
//! Each node's command statistics show who served what.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, redbloom_cluster, run};
use common::cluster::{cli, RedisCluster};
use redbloom::{RedisBloom, Retry};
use redis::cluster_async::ClusterConnection;
use redis::cluster_read_routing::RandomReplicaStrategy;
use std::time::Duration;

/// A cluster connection whose reads go to a random replica of their slot.
async fn replica_reading(cluster: &RedisCluster) -> ClusterConnection {
    cluster
        .client_builder()
        .read_routing_strategy(RandomReplicaStrategy)
        .build()
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

/// Calls of the filter's read commands (`BITFIELD_RO`, `GETRANGE`) the node on `port` served
/// since its statistics were last reset.
fn read_calls(port: u16) -> u64 {
    let stats = cli(port, &["info", "commandstats"]);
    stats
        .lines()
        .filter(|line| {
            line.starts_with("cmdstat_bitfield_ro:") || line.starts_with("cmdstat_getrange:")
        })
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

fn reset_stats(cluster: &RedisCluster) {
    for node in cluster.nodes.iter().filter(|n| n.is_running()) {
        assert_eq!(cli(node.port(), &["config", "resetstat"]).trim(), "OK");
    }
}

/// (port, read calls) of some nodes.
type Reads = Vec<(u16, u64)>;

/// The read calls of the masters and of the replicas.
fn reads_by_role(cluster: &RedisCluster) -> (Reads, Reads) {
    let masters = cluster.master_ports();
    cluster
        .nodes
        .iter()
        .filter(|n| n.is_running())
        .map(|n| (n.port(), read_calls(n.port())))
        .partition(|(port, _)| masters.contains(port))
}

/// Adds `added` to the single-key filter `bloom` at `key`, then waits until the replica of the
/// key's master has them; returns the ports of that master and replica.
async fn load_and_replicate(
    cluster: &RedisCluster,
    bloom: &RedisBloom<ClusterConnection>,
    added: &[String],
) -> (u16, u16) {
    bloom.add_many(added).await.unwrap();
    let master = cluster.master_of(bloom.key());
    let replica = cluster
        .replica_of(master)
        .expect("every master has a replica");
    cluster.wait_replicated(master);
    (master, replica)
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

#[tokio::test]
async fn replicas_serve_the_reads_and_masters_only_the_writes() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let conn = replica_reading(&cluster).await;

    // One key: the replica of its master answers every read.
    let key = "blocklist";
    let bloom = RedisBloom::builder(key)
        .bits(1 << 20)
        .build(conn.clone())
        .unwrap();
    let added = items("bad", 5_000);
    // The adds are on the replica before the reads begin.
    let (_, replica) = load_and_replicate(&cluster, &bloom, &added).await;
    reset_stats(&cluster);
    for item in &added[..200] {
        assert!(bloom.exists(item).await.unwrap(), "{item}");
    }
    assert!(bloom.exists_many(&added).await.unwrap().iter().all(|&p| p));
    let absent = bloom.exists_many(&items("good", 1_000)).await.unwrap();
    assert!(absent.iter().filter(|&&p| p).count() < 10, "{absent:?}");
    let (masters, replicas) = reads_by_role(&cluster);
    assert!(
        masters.iter().all(|&(_, calls)| calls == 0),
        "masters served reads: {masters:?}"
    );
    let served = replicas
        .iter()
        .find(|&&(port, _)| port == replica)
        .unwrap()
        .1;
    assert!(
        served >= 202,
        "the key's replica served {served}: {replicas:?}"
    );

    // Eight shards over three masters: every replica serves its masters' shards.
    let sharded = RedisBloom::builder("crawler:seen")
        .shards(8)
        .expected_items(50_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    let urls = items("https://example.com/page", 20_000);
    sharded.add_many(&urls).await.unwrap();
    for port in cluster.master_ports() {
        cluster.wait_replicated(port);
    }
    reset_stats(&cluster);
    assert!(sharded.exists_many(&urls).await.unwrap().iter().all(|&p| p));
    for url in urls.iter().step_by(100) {
        assert!(sharded.exists(url).await.unwrap(), "{url}");
    }
    let (masters, replicas) = reads_by_role(&cluster);
    assert!(
        masters.iter().all(|&(_, calls)| calls == 0),
        "masters served reads: {masters:?}"
    );
    assert!(
        replicas.len() == 3 && replicas.iter().all(|&(_, calls)| calls > 0),
        "every replica serves reads: {replicas:?}"
    );

    // A writer that waits for one replica makes its adds visible to replica reads at once.
    // (On loopback the lag is so short that the reads would see the adds without WAIT too:
    // this shows that reads served by replicas see what WAIT confirmed, not that WAIT is
    // needed; tests/wait_replicas.rs shows that WAIT waits.)
    let confirmed = RedisBloom::builder("fresh")
        .bits(1 << 16)
        .wait_for_replicas(1, Duration::from_secs(2))
        .build(conn)
        .unwrap();
    reset_stats(&cluster);
    for item in items("new", 300) {
        assert!(confirmed.add(&item).await.unwrap(), "{item}");
        assert!(confirmed.exists(&item).await.unwrap(), "{item} read absent");
    }
    let (masters, replicas) = reads_by_role(&cluster);
    assert!(masters.iter().all(|&(_, calls)| calls == 0), "{masters:?}");
    assert_eq!(replicas.iter().map(|&(_, calls)| calls).sum::<u64>(), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_carry_on_when_the_replica_dies() {
    let mut cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let conn = replica_reading(&cluster).await;
    let key = "replica:dies";
    let bloom = RedisBloom::builder(key)
        .bits(1 << 20)
        .retry(Retry::for_duration(Duration::from_secs(20)))
        .build(conn)
        .unwrap();
    let added = items("item", 1_000);
    let (master, replica) = load_and_replicate(&cluster, &bloom, &added).await;
    assert!(bloom.exists(&added[0]).await.unwrap());
    assert!(read_calls(replica) > 0, "the replica served the first read");

    cluster.kill(replica);
    reset_stats(&cluster);
    // Every read still answers, and rightly: the master takes them over.
    for item in &added[..100] {
        assert!(bloom.exists(item).await.unwrap(), "{item}");
    }
    assert!(bloom.exists_many(&added).await.unwrap().iter().all(|&p| p));
    assert!(read_calls(master) >= 100, "the master served the reads");
}

#[tokio::test]
async fn the_cli_checks_on_replicas_with_read_from_replicas() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let seeds = cluster.urls().join(",");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, items("line", 10_000).join("\n")).unwrap();
    let file = file.to_str().unwrap();
    let command = |args: &[&str]| {
        let size = [
            "--shards",
            "4",
            "--capacity",
            "10000",
            "--fpr",
            "0.01",
            "--json",
        ];
        redbloom_cluster(&seeds, "cli:replicas", &[&size[..], args].concat())
    };

    let (code, json, _) = run(command(&["--read-from-replicas", "load", file]));
    assert_eq!((code, json["items"].as_u64()), (0, Some(10_000)), "{json}");
    // An item is "new" unless all its bits were set by earlier ones: a false positive.
    assert!(json["new"].as_u64().unwrap() > 9_900, "{json}");
    for port in cluster.master_ports() {
        cluster.wait_replicated(port);
    }
    reset_stats(&cluster);
    let (code, json, stderr) = run(command(&["--read-from-replicas", "check", file]));
    assert_eq!(
        (code, json["present"].as_u64()),
        (0, Some(10_000)),
        "{json}"
    );
    assert!(
        stderr.is_empty(),
        "no warning when replicas are listed: {stderr}"
    );
    let (masters, replicas) = reads_by_role(&cluster);
    assert!(masters.iter().all(|&(_, calls)| calls == 0), "{masters:?}");
    assert!(replicas.iter().any(|&(_, calls)| calls > 0), "{replicas:?}");

    // Without the flag, the masters answer.
    reset_stats(&cluster);
    let (code, json, _) = run(command(&["check", file]));
    assert_eq!(
        (code, json["present"].as_u64()),
        (0, Some(10_000)),
        "{json}"
    );
    let (masters, replicas) = reads_by_role(&cluster);
    assert!(masters.iter().any(|&(_, calls)| calls > 0), "{masters:?}");
    assert!(
        replicas.iter().all(|&(_, calls)| calls == 0),
        "{replicas:?}"
    );
}

#[tokio::test]
async fn the_cli_warns_when_the_cluster_lists_no_replica() {
    let cluster =
        RedisCluster::start_without_replicas().expect("redis-server and redis-cli on PATH");
    let seeds = cluster.urls().join(",");
    let args = [
        "--bits",
        "1024",
        "--read-from-replicas",
        "--json",
        "exists",
        "a",
    ];
    let cmd = redbloom_cluster(&seeds, "no:replicas", &args);
    let (code, json, stderr) = run(cmd);
    // The check still runs, on the masters: "a" was never added.
    assert_eq!((code, json["absent"].as_u64()), (1, Some(1)), "{json}");
    assert!(
        stderr.starts_with("warning: --read-from-replicas")
            && stderr.contains("lists no replica")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    let (masters, _) = reads_by_role(&cluster);
    assert_eq!(masters.iter().map(|&(_, calls)| calls).sum::<u64>(), 1);
}

#[test]
fn read_from_replicas_without_a_cluster_is_refused() {
    let args = ["--bits", "64", "--read-from-replicas", "exists", "a"];
    let cmd = redbloom("redis://127.0.0.1:1", "k", &args);
    assert_fails(cmd, &["--read-from-replicas", "--cluster", "--url"], None);
}
