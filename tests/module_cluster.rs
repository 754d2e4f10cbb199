//! Module filters (SPEC.md §7) over a Redis Cluster of 3 masters, each loading RedisBloom
//! (started by the test): a filter of one key, and one of 4 shards whose module keys spread
//! over the masters, through adds, checks, group commit, info, interop with raw `BF.*` and
//! clear, every key checked on the nodes themselves.

mod common;

use common::cluster::{cli, RedisCluster};
use redbloom::ModuleBloom;
use std::collections::BTreeSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_spread_over_the_masters() {
    let cluster = RedisCluster::start_with_module(&common::module::module_path())
        .expect("a cluster with the module");
    let conn = cluster.connection().await;
    let build = |key: &str, shards: u32| {
        ModuleBloom::builder(key)
            .expected_items(40_000)
            .false_positive_rate(0.001)
            .shards(shards)
            .build(conn.clone())
            .unwrap()
    };
    let items: Vec<String> = (0..8_000).map(|i| format!("c{i}")).collect();

    let sharded = build("module:sharded", 4);
    assert!(sharded.add_many(&items).await.unwrap().iter().all(|&n| n));
    assert!(sharded
        .exists_many(&items)
        .await
        .unwrap()
        .iter()
        .all(|&f| f));
    assert!(sharded.add("single").await.unwrap());
    assert!(!sharded.add("single").await.unwrap());
    let info = sharded.info().await.unwrap();
    assert_eq!(
        (info.capacity, info.items, info.filters),
        (40_000, 8_001, 4)
    );
    let mut masters = BTreeSet::new();
    let mut inserted = 0;
    for shard in 0..4 {
        let key = (0..100_000)
            .map(|n| format!("{{rb{shard}.{n}}}:module:sharded:shard:{shard}/4"))
            .find(|key| cli(cluster.master_of(key), &["EXISTS", key]).trim() == "1")
            .expect("every shard's key is on its master");
        let master = cluster.master_of(&key);
        masters.insert(master);
        assert_eq!(cli(master, &["TYPE", &key]).trim(), "MBbloom--");
        let report = cli(master, &["BF.INFO", &key, "ITEMS"]);
        inserted += report.trim().parse::<u64>().unwrap();
    }
    assert_eq!(inserted, 8_001);
    assert!(masters.len() >= 3, "4 shards over 3 masters: {masters:?}");
    assert!(sharded.clear().await.unwrap());
    assert!(!sharded.exists("c1").await.unwrap());

    // A filter of one key, which raw commands on its master read and write too.
    let one = build("module:one", 1);
    assert!(one
        .add_many(&items[..100])
        .await
        .unwrap()
        .iter()
        .all(|&n| n));
    let master = cluster.master_of("module:one");
    assert_eq!(cli(master, &["BF.EXISTS", "module:one", "c7"]).trim(), "1");
    assert_eq!(cli(master, &["BF.ADD", "module:one", "raw"]).trim(), "1");
    assert!(one.exists("raw").await.unwrap());
    assert_eq!(one.info().await.unwrap().items, 101);

    // Without records across retries, adds into keys known to exist go as bare BF.INSERT to
    // each shard's master, with the same answers; a full filter is refused item by item.
    let inserts = || common::cluster::calls(&cluster.master_ports(), "bf.insert");
    let bare = ModuleBloom::builder("module:bare")
        .expected_items(40_000)
        .false_positive_rate(0.001)
        .shards(4)
        .exact_retries(false)
        .build(conn.clone())
        .unwrap();
    assert!(bare.add_many(&items).await.unwrap().iter().all(|&n| n));
    let before = inserts();
    assert!(bare.add_many(&items).await.unwrap().iter().all(|&n| !n));
    assert!(inserts() >= before + 4, "every shard's batch went bare");
    cli(
        cluster.master_of("module:full"),
        &["BF.RESERVE", "module:full", "0.001", "5", "NONSCALING"],
    );
    let full = ModuleBloom::builder("module:full")
        .expected_items(5)
        .false_positive_rate(0.001)
        .exact_retries(false)
        .build(conn.clone())
        .unwrap();
    assert_eq!(full.add_many(&items[..3]).await.unwrap(), [true; 3]);
    let before = inserts();
    match full.add_many(&items[3..8]).await {
        Err(redbloom::Error::FilterFull { added, .. }) => assert_eq!(added, 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(inserts(), before + 1, "refused by BF.INSERT");
}
