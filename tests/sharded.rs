//! One logical filter over several keys (`shards`): every operation, the stored shard count,
//! sizes beyond 2^32 bits, and on a real cluster, shards on every master.

mod common;

use common::cluster::RedisCluster;
use redbloom::{Error, KeyTtl, RedisBloom};
use std::time::Duration;

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

#[tokio::test]
async fn a_sharded_filter_behaves_as_one() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("sharded");
    let bloom = RedisBloom::builder(&key)
        .expected_items(20_000)
        .false_positive_rate(0.001)
        .shards(4)
        .build(conn.clone())
        .unwrap();
    assert_eq!(bloom.shards(), 4);
    let added = items("in", 20_000);
    for batch in added.chunks(2_500) {
        let new = bloom.add_many(batch).await.unwrap();
        assert!(new.iter().filter(|&&n| n).count() > 2_490);
    }
    assert!(bloom.add("single").await.unwrap() && bloom.exists("single").await.unwrap());
    assert!(
        bloom.exists_many(&added).await.unwrap().iter().all(|&p| p),
        "false negative"
    );
    let absent = items("out", 20_000);
    let false_positives = bloom
        .exists_many(&absent)
        .await
        .unwrap()
        .iter()
        .filter(|&&p| p)
        .count();
    assert!(
        false_positives < 60,
        "{false_positives} false positives at a 0.1% target"
    );
    // Per item, the same answer alone as in a batch.
    for item in added
        .iter()
        .step_by(1_000)
        .chain(absent.iter().step_by(1_000))
    {
        let alone = bloom.exists(item).await.unwrap();
        assert_eq!(
            alone,
            bloom.exists_many(&[item]).await.unwrap()[0],
            "{item}"
        );
    }

    // Four keys hold the bits, none under the key itself; the shard count is stored.
    let shard_keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*:{key}:shard:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(shard_keys.len(), 4, "{shard_keys:?}");
    assert!(!common::key_exists(&mut conn, &key).await);
    let stored: String = redis::cmd("GET")
        .arg(common::companion(&key, "params"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(stored.ends_with(" shards=4"), "{stored}");

    let info = bloom.info().await.unwrap();
    assert_eq!((info.bits, info.hashes), (bloom.bits(), 14));
    assert!((info.estimated_items - 20_001.0).abs() < 400.0, "{info:?}");
    assert!(
        info.estimated_fpr < 0.002 && info.ttl == KeyTtl::Persistent,
        "{info:?}"
    );

    // Another shard count, or one key, is refused.
    for shards in [1, 2, 8] {
        let other = RedisBloom::builder(&key)
            .bits(bloom.bits())
            .shards(shards)
            .build(conn.clone())
            .unwrap();
        let err = other.exists("in:1").await.unwrap_err();
        assert!(
            matches!(err, Error::ParamsMismatch { .. }),
            "{shards} shards: {err:?}"
        );
    }

    assert!(bloom.expire(Duration::from_secs(100)).await.unwrap());
    for shard_key in &shard_keys {
        let ttl = common::pttl(&mut conn, shard_key).await;
        assert!((99_000..=100_000).contains(&ttl), "{shard_key}: {ttl}");
    }
    assert!(bloom.clear().await.unwrap());
    for shard_key in &shard_keys {
        assert!(
            !common::key_exists(&mut conn, shard_key).await,
            "{shard_key}"
        );
    }
    assert!(!bloom.exists("in:1").await.unwrap());
}

#[tokio::test]
async fn shards_go_beyond_one_keys_2_pow_32_bits() {
    let too_big = RedisBloom::builder("k")
        .bits(1 << 33)
        .validate()
        .unwrap_err();
    assert!(matches!(too_big, Error::InvalidConfig(_)), "{too_big}");
    let two = RedisBloom::builder("k")
        .bits(1 << 33)
        .shards(2)
        .build_offline()
        .unwrap();
    assert_eq!(two.bits(), 1 << 33);
    let sized = RedisBloom::builder("k")
        .expected_items(1_000_000_000)
        .false_positive_rate(1e-6)
        .shards(8)
        .build_offline()
        .unwrap();
    // 30,015,541,496 bits (3.75 GB): eight keys of at most 2^32 bits each.
    assert!(
        sized.bits() > 1 << 34 && sized.bits() / 8 <= 1 << 32,
        "{}",
        sized.bits()
    );
    assert!(RedisBloom::builder("k")
        .bits(64)
        .shards(0)
        .validate()
        .is_err());
    assert!(RedisBloom::builder("k")
        .bits(64)
        .shards(1025)
        .validate()
        .is_err());
}

#[tokio::test]
async fn shards_spread_over_every_master_of_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let conn = cluster.connection().await;
    let bloom = RedisBloom::builder("crawler:seen")
        .expected_items(50_000)
        .false_positive_rate(0.01)
        .shards(8)
        .build(conn)
        .unwrap();
    let added = items("url", 50_000);
    for batch in added.chunks(5_000) {
        bloom.add_many(batch).await.unwrap();
    }
    assert!(
        bloom.exists_many(&added).await.unwrap().iter().all(|&p| p),
        "false negative"
    );
    assert!(bloom.exists("url:7").await.unwrap());

    // Every master holds shards, in the slots this crate computed.
    let masters = cluster.master_ports();
    assert_eq!(masters.len(), 3);
    let mut total = 0;
    for port in &masters {
        let keys = common::cluster::cli(*port, &["keys", "*crawler:seen:shard:*"]);
        let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
        assert!(keys.len() >= 2, "master {port} holds {keys:?}");
        for key in &keys {
            let slot = common::cluster::cli(*port, &["cluster", "keyslot", key]);
            let slot: u32 = slot.trim().parse().unwrap();
            let index: u32 = key
                .rsplit(":shard:")
                .next()
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(slot * 8 / 16384, index, "{key} is in slot {slot}");
        }
        total += keys.len();
    }
    assert_eq!(total, 8);
}

/// As for one key, a sharded native filter stores its parameters again with its next write
/// after an expiry, and a client sees another configuration stored since.
#[tokio::test]
async fn a_sharded_native_filter_stores_its_parameters_again_after_expiry() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("sharded-native");
    let params = common::companion(&key, "params");
    let native = |items: u64| {
        RedisBloom::builder(&key)
            .layout(redbloom::Layout::Native)
            .expected_items(items)
            .false_positive_rate(0.01)
            .shards(4)
    };
    let bloom = native(10_000).build(conn.clone()).unwrap();
    bloom.add("a").await.unwrap();
    assert!(common::key_exists(&mut conn, &params).await);
    assert!(bloom.expire(Duration::from_millis(50)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!common::key_exists(&mut conn, &params).await);

    // A single add and a batch each bring the parameters back.
    assert!(bloom.add("b").await.unwrap());
    assert!(common::key_exists(&mut conn, &params).await);
    assert!(bloom.clear().await.unwrap());
    bloom.add_many(&items("again", 100)).await.unwrap();
    let same = native(10_000).build(conn.clone()).unwrap();
    assert!(same.exists("again:7").await.unwrap());

    // Another configuration that re-created the filter meanwhile is reported on the next write.
    assert!(bloom.clear().await.unwrap());
    native(20_000)
        .build(conn.clone())
        .unwrap()
        .add("c")
        .await
        .unwrap();
    for (what, result) in [
        ("add", bloom.add("d").await.map(|_| ())),
        ("add_many", bloom.add_many(&["e", "f"]).await.map(|_| ())),
    ] {
        assert!(
            matches!(result, Err(Error::ParamsMismatch { .. })),
            "{what}: {result:?}"
        );
    }
}
