//! A filter of 2^33 bits (1 GiB, twice what one Redis string holds) over a Redis Cluster,
//! end to end: two shards of 2^32 bits on two masters.

mod common;

use common::cluster::RedisCluster;
use redbloom::{KeyTtl, RedisBloom};

#[tokio::test]
async fn a_one_gib_filter_works_end_to_end() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let conn = cluster.connection().await;
    let bloom = RedisBloom::builder("huge")
        .bits(1 << 33)
        .shards(2)
        .build(conn)
        .unwrap();
    assert_eq!((bloom.bits(), bloom.shards()), (1 << 33, 2));

    let items: Vec<String> = (0..20_000).map(|i| format!("huge:{i}")).collect();
    for batch in items.chunks(1_000) {
        let new = bloom.add_many(batch).await.unwrap();
        assert!(
            new.iter().all(|&n| n),
            "at 20,000 items in 2^33 bits nothing collides"
        );
    }
    assert!(bloom.add("one more").await.unwrap());
    assert!(
        bloom.exists_many(&items).await.unwrap().iter().all(|&p| p),
        "false negative"
    );
    assert!(bloom.exists("one more").await.unwrap());
    let absent: Vec<String> = (0..20_000).map(|i| format!("absent:{i}")).collect();
    assert!(bloom
        .exists_many(&absent)
        .await
        .unwrap()
        .iter()
        .all(|&p| !p));

    // Offsets reach the top of each 2^32-bit key: both strings are (nearly) 512 MiB.
    let info = bloom.info().await.unwrap();
    assert!(info.bytes > 2 * 500 * 1024 * 1024, "{info:?}");
    // 280,014 bits set at random among 2^33 coincide about n^2 / 2m = 4.6 times.
    assert!(
        (280_014 - 20..=280_014).contains(&info.bits_set),
        "{info:?}"
    );
    assert!((info.estimated_items - 20_001.0).abs() < 1.0, "{info:?}");
    assert_eq!(info.ttl, KeyTtl::Persistent);
    assert!(bloom.clear().await.unwrap());
    assert_eq!(bloom.info().await.unwrap().ttl, KeyTtl::Missing);
}
