//! Windows over module filters (SPEC.md §7) on a Redis Cluster of 3 masters, each loading
//! RedisBloom (started by the test): a windowed filter of one key and one of 4 shards, whose
//! generations live in their part's slot, each with its expiry, through adds, checks, info
//! and clear, the generations checked on the nodes themselves; the sharded one exported and
//! imported over another that held other items (staged beside each shard and swapped in per
//! slot group, the generations it lacks deleted).

mod common;

use common::cluster::{cli, RedisCluster};
use redbloom::{Error, ImportMode, ModuleBloom};
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
            &["KEYS", "*:redbloom:*:module:window:sharded:shard:*:gen:*"],
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
    // Its snapshot, imported over a sharded window that held other items.
    let mut file = Vec::new();
    sharded.export(&mut file).await.unwrap();
    let copy = build("module:window:copy", 4);
    let others: Vec<String> = (0..400).map(|i| format!("other{i}")).collect();
    copy.add_many(&others).await.unwrap();
    copy.import(&file[..], ImportMode::Replace).await.unwrap();
    assert!(copy.exists_many(&items).await.unwrap().iter().all(|&f| f));
    assert_eq!(
        copy.exists_many(&others).await.unwrap(),
        sharded.exists_many(&others).await.unwrap()
    );
    assert_eq!(copy.info().await.unwrap().items, 4_001);
    for master in cluster.master_ports() {
        let found = cli(master, &["KEYS", "*module:window:copy*"]);
        let found = found.lines().map(str::trim);
        let params = common::companion("module:window:copy", "params");
        for key in found.filter(|k| !k.is_empty() && *k != params) {
            assert!(
                common::companion_of(key).is_some_and(|(_, name)| name.starts_with("gen:")),
                "no ledger, no staging: {key}"
            );
            let pttl: i64 = cli(master, &["PTTL", key]).trim().parse().unwrap();
            assert!(pttl > 0 && pttl <= 80_000, "{key}: {pttl}");
        }
    }
    assert!(copy.clear().await.unwrap());

    // A live generation the file lacks (a later epoch's) is deleted by a replace: a window of
    // 2 s over 2 generations, the file of one epoch imported in the next (the servers run on
    // this machine's clock).
    let short = |key: &str| {
        ModuleBloom::builder(key)
            .expected_items(40_000)
            .false_positive_rate(0.001)
            .window(Duration::from_secs(2))
            .generations(2)
            .shards(4)
            .build(conn.clone())
            .unwrap()
    };
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    tokio::time::sleep(Duration::from_millis(2_050 - ms % 2_000)).await;
    let (early, late) = (short("module:window:early"), short("module:window:late"));
    early.add_many(&items[..400]).await.unwrap();
    let mut file = Vec::new();
    early.export(&mut file).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    late.add_many(&others).await.unwrap();
    late.import(&file[..], ImportMode::Replace).await.unwrap();
    assert!(late
        .exists_many(&items[..400])
        .await
        .unwrap()
        .iter()
        .all(|&f| f));
    assert_eq!(
        late.info().await.unwrap().items,
        400,
        "the later generations deleted"
    );
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
    let generations = format!("{}*", common::companion("module:window:one", "gen:"));
    let found = cli(master, &["KEYS", &generations]);
    let generation = found.trim();
    assert!(!generation.is_empty());
    cli(master, &["DEL", generation]);
    let err = one.exists("a").await.unwrap_err();
    assert!(matches!(err, Error::Lost { .. }), "{err}");
    one.clear().await.unwrap();
}
