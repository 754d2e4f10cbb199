//! Snapshots across a Redis Cluster and a single server (SPEC.md §5): a sharded filter of every
//! kind exported from a cluster imports into a single server with the same shard count and back
//! into the cluster (under another key: other slots, other nodes), with the same answers for
//! every item and, for a plain filter, the same bytes in every shard. On the cluster an import
//! swaps shard by shard (keys of several slots cannot share a step there).

mod common;

use common::cluster::RedisCluster;
use redbloom::{CountingBloom, GrowingBloom, ImportMode, RedisBloom, WindowBloom};
use redis::aio::ConnectionLike;

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

const SHARDS: u32 = 4;

fn plain<C>(conn: C, key: &str) -> RedisBloom<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    RedisBloom::builder(key)
        .expected_items(50_000)
        .false_positive_rate(0.01)
        .shards(SHARDS)
        .build(conn)
        .unwrap()
}

/// The shard keys of the filter `key`, as the crate names them (docs/cluster.md: the tag
/// `rbI.N` is the first whose slot falls in the I-th of the equal slot ranges).
fn shard_keys(cluster: &RedisCluster, key: &str) -> Vec<String> {
    (0..SHARDS)
        .map(|i| {
            let tag = (0u64..)
                .map(|n| format!("rb{i}.{n}"))
                .find(|tag| u32::from(cluster.slot_of(tag)) * SHARDS / 16384 == i)
                .unwrap();
            format!("{{{tag}}}:{key}:shard:{i}/{SHARDS}")
        })
        .collect()
}

/// Every shard's bytes of the plain filter at `key`, by shard.
async fn shard_bytes<C: ConnectionLike + Clone + Send + Sync>(
    cluster: &RedisCluster,
    conn: &C,
    key: &str,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for shard in shard_keys(cluster, key) {
        let bytes: Option<Vec<u8>> = redis::cmd("GET")
            .arg(&shard)
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        out.push(bytes.unwrap_or_default());
    }
    assert!(
        out.iter().all(|b| !b.is_empty()),
        "{key}: every shard holds bits"
    );
    out
}

#[tokio::test]
async fn a_sharded_filter_moves_from_a_cluster_to_a_server_and_back() {
    let cluster = RedisCluster::start_without_replicas().expect("a test cluster");
    let redis = common::redis().await;
    let single = redis.connection().await;
    let cconn = cluster.connection().await;
    let added = items("in", 30_000);
    let absent = items("out", 30_000);

    // Plain: the same bytes all the way.
    let source = plain(cconn.clone(), "snap:cluster:plain");
    source.add_many(&added).await.unwrap();
    let want_bytes = shard_bytes(&cluster, &cconn, "snap:cluster:plain").await;
    let want_absent = source.exists_many(&absent).await.unwrap();
    let mut file = Vec::new();
    source.export(&mut file).await.unwrap();

    let key = common::unique_key("snap-from-cluster");
    let on_server = plain(single.clone(), &key);
    on_server
        .import(&file[..], ImportMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        shard_bytes(&cluster, &single, &key).await,
        want_bytes,
        "cluster -> server"
    );
    assert_eq!(on_server.exists_many(&absent).await.unwrap(), want_absent);
    let mut back = Vec::new();
    on_server.export(&mut back).await.unwrap();

    let returned = plain(cconn.clone(), "snap:cluster:plain-back");
    returned
        .import(&back[..], ImportMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        shard_bytes(&cluster, &cconn, "snap:cluster:plain-back").await,
        want_bytes,
        "server -> cluster"
    );
    assert!(returned
        .exists_many(&added)
        .await
        .unwrap()
        .iter()
        .all(|&f| f));
    assert_eq!(returned.exists_many(&absent).await.unwrap(), want_absent);

    // Counting, growing and window: the same answers.
    let counting_builder = |key: &str| {
        CountingBloom::builder(key)
            .expected_items(50_000)
            .false_positive_rate(0.01)
            .shards(SHARDS)
    };
    let growing_builder = |key: &str| {
        GrowingBloom::builder(key)
            .expected_items(50_000)
            .false_positive_rate(0.01)
            .shards(SHARDS)
    };
    let window_builder = |key: &str| {
        WindowBloom::builder(key, std::time::Duration::from_secs(3_600))
            .expected_items(50_000)
            .false_positive_rate(0.01)
            .shards(SHARDS)
    };
    let counting = counting_builder("snap:cluster:counting")
        .build(cconn.clone())
        .unwrap();
    counting.add_many(&added).await.unwrap();
    let mut file = Vec::new();
    counting.export(&mut file).await.unwrap();
    let copy = counting_builder(&common::unique_key("snap-counting"))
        .build(single.clone())
        .unwrap();
    copy.import(&file[..], ImportMode::Replace).await.unwrap();
    let mut back = Vec::new();
    copy.export(&mut back).await.unwrap();
    let home = counting_builder("snap:cluster:counting-back")
        .build(cconn.clone())
        .unwrap();
    home.import(&back[..], ImportMode::Replace).await.unwrap();
    assert!(home.exists_many(&added).await.unwrap().iter().all(|&f| f));
    assert_eq!(
        home.exists_many(&absent).await.unwrap(),
        counting.exists_many(&absent).await.unwrap()
    );

    let growing = growing_builder("snap:cluster:growing")
        .expected_items(2_000)
        .growth(2)
        .build(cconn.clone())
        .unwrap();
    growing.add_many(&added).await.unwrap();
    let mut file = Vec::new();
    growing.export(&mut file).await.unwrap();
    let copy = growing_builder(&common::unique_key("snap-growing"))
        .expected_items(2_000)
        .growth(2)
        .build(single.clone())
        .unwrap();
    copy.import(&file[..], ImportMode::Replace).await.unwrap();
    assert_eq!(
        copy.info().await.unwrap().items,
        growing.info().await.unwrap().items
    );
    let mut back = Vec::new();
    copy.export(&mut back).await.unwrap();
    let home = growing_builder("snap:cluster:growing-back")
        .expected_items(2_000)
        .growth(2)
        .build(cconn.clone())
        .unwrap();
    home.import(&back[..], ImportMode::Replace).await.unwrap();
    assert!(home.exists_many(&added).await.unwrap().iter().all(|&f| f));
    assert_eq!(
        home.exists_many(&absent).await.unwrap(),
        growing.exists_many(&absent).await.unwrap()
    );

    let window = window_builder("snap:cluster:window")
        .build(cconn.clone())
        .unwrap();
    window.add_many(&added).await.unwrap();
    let mut file = Vec::new();
    window.export(&mut file).await.unwrap();
    let copy = window_builder(&common::unique_key("snap-window"))
        .build(single.clone())
        .unwrap();
    copy.import(&file[..], ImportMode::Replace).await.unwrap();
    let mut back = Vec::new();
    copy.export(&mut back).await.unwrap();
    let home = window_builder("snap:cluster:window-back")
        .build(cconn.clone())
        .unwrap();
    home.import(&back[..], ImportMode::Replace).await.unwrap();
    assert!(home.exists_many(&added).await.unwrap().iter().all(|&f| f));
    assert_eq!(
        home.exists_many(&absent).await.unwrap(),
        window.exists_many(&absent).await.unwrap()
    );
}
