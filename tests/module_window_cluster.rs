//! Windows over module filters (SPEC.md §7) on a Redis Cluster of 3 masters, each loading
//! RedisBloom (started by the test): a windowed filter of one key and one of 4 shards, whose
//! generations live in their part's slot, each with its expiry, through adds, checks, info
//! and clear, the generations checked on the nodes themselves.

mod common;

use common::cluster::{cli, RedisCluster};
use redbloom::{Error, ModuleBloom};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windowed_shards_spread_over_the_masters() {
    let cluster = RedisCluster::start_with_module(&common::module::module_path())
        .expect("a cluster with the module");
    let conn = cluster.connection().await;
    let build = |key: &str, shards: u32| {
        ModuleBloom::builder(key)
            .expected_items(40_000)
            .false_positive_rate(0.001)
            .window(Duration::from_secs(60))
            .shards(shards)
            .build(conn.clone())
            .unwrap()
    };
    let items: Vec<String> = (0..4_000).map(|i| format!("w{i}")).collect();

    let sharded = build("module:window:sharded", 4);
    assert!(sharded.add_many(&items).await.unwrap().iter().all(|&n| n));
    assert!(sharded.add_many(&items).await.unwrap().iter().all(|&n| !n));
    assert!(sharded
        .exists_many(&items)
        .await
        .unwrap()
        .iter()
        .all(|&f| f));
    assert!(sharded.add("single").await.unwrap());
    assert!(!sharded.add("single").await.unwrap());
    assert_eq!(sharded.info().await.unwrap().items, 4_001);
    // Each shard's generation: one live, a module filter with its expiry, on its master.
    let mut masters = BTreeSet::new();
    let mut shards = BTreeSet::new();
    for master in cluster.master_ports() {
        let found = cli(
            master,
            &["KEYS", "*module:window:sharded:shard:*:redbloom:gen:*"],
        );
        for generation in found.lines().map(str::trim).filter(|k| !k.is_empty()) {
            masters.insert(master);
            let shard = generation.split(":shard:").nth(1).unwrap();
            shards.insert(shard.split(':').next().unwrap().to_owned());
            assert_eq!(cli(master, &["TYPE", generation]).trim(), "MBbloom--");
            let pttl: i64 = cli(master, &["PTTL", generation]).trim().parse().unwrap();
            assert!(pttl > 0 && pttl <= 80_000, "{generation}: {pttl}");
        }
    }
    assert_eq!(shards.len(), 4, "{shards:?}");
    assert!(masters.len() >= 3, "4 shards over 3 masters: {masters:?}");
    assert!(sharded.clear().await.unwrap());
    assert!(!sharded.exists("w1").await.unwrap());

    // A windowed filter of one key: its generations in the key's slot; one deleted is lost.
    let one = build("module:window:one", 1);
    assert_eq!(
        one.add_many(&["a", "b", "a"]).await.unwrap(),
        [true, true, false]
    );
    assert_eq!(
        one.exists_many(&["a", "b", "c"]).await.unwrap(),
        [true, true, false]
    );
    let master = cluster.master_of("module:window:one");
    let found = cli(master, &["KEYS", "{module:window:one}:redbloom:gen:*"]);
    let generation = found.trim();
    assert!(!generation.is_empty());
    cli(master, &["DEL", generation]);
    let err = one.exists("a").await.unwrap_err();
    assert!(matches!(err, Error::Lost { .. }), "{err}");
    one.clear().await.unwrap();
}
