//! Snapshots of module filters on a Redis Cluster of 3 masters loading RedisBloom (SPEC.md §5,
//! §7): a filter of 4 shards over the masters and one of one key, exported from a single
//! server and imported into the cluster (staged beside each shard, in its slot, and swapped in
//! per slot group), then exported from the cluster and imported back: the same answers
//! everywhere, and `BF.EXISTS` on the masters themselves finds the items.

mod common;

use common::cluster::{cli, RedisCluster};
use common::module::redis_with_bloom;
use redbloom::{ImportMode, ModuleBloom};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_snapshots_move_between_a_server_and_a_cluster() {
    let cluster = RedisCluster::start_with_module(&common::module::module_path())
        .expect("a cluster with the module");
    let single = redis_with_bloom();
    let on_cluster = cluster.connection().await;
    let on_single = single.connection().await;
    let items: Vec<String> = (0..6_000).map(|i| format!("c{i}")).collect();
    let absent: Vec<String> = (0..6_000).map(|i| format!("never{i}")).collect();
    for shards in [4u32, 1] {
        let key = format!("module:snap:{shards}");
        let build = |shards: u32| {
            ModuleBloom::builder(key.as_str())
                .expected_items(2_000)
                .false_positive_rate(0.01)
                .shards(shards)
        };
        let source = build(shards).build(on_single.clone()).unwrap();
        source.add_many(&items).await.unwrap();
        let mut file = Vec::new();
        source.export(&mut file).await.unwrap();
        let expected = source.exists_many(&absent).await.unwrap();

        let target = build(shards).build(on_cluster.clone()).unwrap();
        target.add("before").await.unwrap();
        target.import(&file[..], ImportMode::Replace).await.unwrap();
        assert!(target.exists_many(&items).await.unwrap().iter().all(|&f| f));
        assert_eq!(target.exists_many(&absent).await.unwrap(), expected);
        if shards == 1 {
            let master = cluster.master_of(&key);
            assert_eq!(cli(master, &["TYPE", &key]).trim(), "MBbloom--");
            assert_eq!(cli(master, &["BF.EXISTS", &key, "c42"]).trim(), "1");
        }

        // And back, from the cluster into another key of the single server.
        let mut again = Vec::new();
        target.export(&mut again).await.unwrap();
        let back = ModuleBloom::builder(format!("{key}:back"))
            .expected_items(2_000)
            .false_positive_rate(0.01)
            .shards(shards)
            .build(on_single.clone())
            .unwrap();
        back.import(&again[..], ImportMode::Replace).await.unwrap();
        assert!(back.exists_many(&items).await.unwrap().iter().all(|&f| f));
        assert_eq!(back.exists_many(&absent).await.unwrap(), expected);
    }
}
