//! Lost data is an error on a Redis Cluster too (SPEC.md §3): a sharded filter (native,
//! counting, growing) over 3 masters whose shard (or level segment) was deleted on its master
//! fails its checks with `Error::Lost` naming that key, while its parameters live on another
//! slot.

mod common;

use common::cluster::{cli, RedisCluster};
use redbloom::{CountingBloom, Error, GrowingBloom, Layout, RedisBloom};

fn items(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("item:{i}")).collect()
}

/// (port, key) of the first key on the masters whose name contains `part` and ends with
/// `suffix`.
fn key_on_masters(cluster: &RedisCluster, part: &str, suffix: &str) -> (u16, String) {
    let mut found: Vec<(u16, String)> = cluster
        .master_ports()
        .into_iter()
        .flat_map(|port| {
            cli(port, &["keys", "*"])
                .lines()
                .map(str::trim)
                .filter(|k| k.contains(part) && k.ends_with(suffix))
                .map(|k| (port, k.to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no key of {part} ending {suffix}"))
}

#[track_caller]
fn assert_lost<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, key: &str) {
    match result {
        Err(Error::Lost { key: got, .. }) => assert_eq!(got, key, "{what}"),
        other => panic!("{what}: expected Error::Lost for {key}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_sharded_filter_whose_shard_is_gone_fails_its_checks_on_a_cluster() {
    let cluster =
        RedisCluster::start_without_replicas().expect("redis-server and redis-cli on PATH");
    let conn = cluster.connection().await;
    let all = items(1_000);
    let delete = |(port, key): (u16, String)| {
        assert_eq!(cli(port, &["del", &key]).trim(), "1", "{key} deleted");
        key
    };

    let native = RedisBloom::builder("lost-native")
        .layout(Layout::Native)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(3)
        .build(conn.clone())
        .unwrap();
    native.add_many(&all).await.unwrap();
    let gone = delete(key_on_masters(&cluster, "lost-native:shard:0/3", "/3"));
    assert_lost("native", native.exists_many(&all).await, &gone);

    let counting = CountingBloom::builder("lost-counting")
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(3)
        .build(conn.clone())
        .unwrap();
    counting.add_many(&all).await.unwrap();
    let gone = delete(key_on_masters(&cluster, "lost-counting:shard:0/3", "/3"));
    assert_lost("counting", counting.exists_many(&all).await, &gone);
    assert_lost("counting remove", counting.remove_many(&all).await, &gone);

    let growing = GrowingBloom::builder("lost-growing")
        .expected_items(100)
        .false_positive_rate(0.01)
        .shards(3)
        .build(conn.clone())
        .unwrap();
    growing.add_many(&all).await.unwrap();
    // A level segment of a shard: `{rb…}:redbloom:LEN:{rb…}:lost-growing:shard:0/3:grow:HASH:0`.
    let gone = delete(key_on_masters(&cluster, "lost-growing:shard:0/3", ":0"));
    assert!(
        gone.contains(":redbloom:") && gone.contains(":lost-growing:shard:0/3:grow:"),
        "{gone}"
    );
    assert_lost("growing", growing.exists_many(&all).await, &gone);
}
