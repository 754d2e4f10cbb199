//! `info()` reports fill, size, estimates and TTL truthfully; `expire()` and `clear()` work.

mod common;

use redbloom::{KeyTtl, RedisBloom};
use std::time::Duration;

const BITS: u64 = 20_000;

#[tokio::test]
async fn info_on_a_missing_key() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let key = common::unique_key("info-missing");
    let bloom = RedisBloom::new(conn, &key, BITS).unwrap();
    let info = bloom.info().await.unwrap();
    assert_eq!(info.key, key);
    assert_eq!(info.bits, BITS);
    assert_eq!(info.hashes, 14);
    assert_eq!(info.bits_set, 0);
    assert_eq!(info.bytes, 0);
    assert_eq!(info.estimated_items, 0.0);
    assert_eq!(info.estimated_fpr, 0.0);
    assert_eq!(info.ttl, KeyTtl::Missing);
    assert_eq!(info.ttl.as_secs(), None);
}

#[tokio::test]
async fn info_expire_and_clear_on_a_filled_filter() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("info-filled");
    let bloom = RedisBloom::new(conn.clone(), &key, BITS).unwrap();
    let items: Vec<String> = (0..1_000).map(|i| format!("info:{i}")).collect();
    bloom.add_many(&items).await.unwrap();

    let bitcount: u64 = redis::cmd("BITCOUNT")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let info = bloom.info().await.unwrap();
    assert_eq!(info.key, key);
    assert_eq!(info.bits, BITS);
    assert_eq!(info.hashes, 14);
    assert_eq!(info.bits_set, bitcount);
    // Expected fill after 1,000 items: 20000·(1 - e^(-0.7)) ≈ 10,068 bits.
    assert!((9_500..=10_600).contains(&bitcount), "{bitcount} bits set");
    assert_eq!(
        info.bytes,
        BITS / 8,
        "the highest offset falls in the last byte"
    );
    let estimate = info.estimated_items;
    assert!(
        (estimate - 1_000.0).abs() <= 50.0,
        "estimated {estimate} items, want 1000 ± 5%"
    );
    assert_eq!(
        info.estimated_items,
        redbloom::estimate_items(BITS, 14, bitcount)
    );
    assert_eq!(
        info.estimated_fpr,
        redbloom::current_fpr(BITS, 14, bitcount)
    );
    let by_hand = (bitcount as f64 / BITS as f64).powi(14);
    assert!(
        (info.estimated_fpr - by_hand).abs() <= by_hand * 1e-12,
        "{} vs (X/m)^k = {by_hand}",
        info.estimated_fpr
    );
    assert_eq!(info.ttl, KeyTtl::Persistent);
    assert_eq!(info.ttl.as_secs(), Some(-1));

    // A TTL.
    assert!(bloom.expire(Duration::from_secs(100)).await.unwrap());
    let ttl = bloom.info().await.unwrap().ttl;
    match ttl {
        KeyTtl::Expires(d) => assert!(
            d >= Duration::from_secs(99) && d <= Duration::from_secs(100),
            "{d:?}"
        ),
        other => panic!("expected Expires, got {other:?}"),
    }
    assert!(
        matches!(ttl.as_secs(), Some(99 | 100)),
        "{:?}",
        ttl.as_secs()
    );
    let server_ttl: i64 = redis::cmd("TTL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((99..=100).contains(&server_ttl), "{server_ttl}");
    // The expiry changed nothing else.
    let again = bloom.info().await.unwrap();
    assert_eq!((again.bits_set, again.bytes), (bitcount, BITS / 8));
    assert!(bloom.exists(&items[0]).await.unwrap());

    // expire on a key that does not exist.
    let missing = RedisBloom::new(conn.clone(), common::unique_key("no-such"), BITS).unwrap();
    assert!(!missing.expire(Duration::from_secs(100)).await.unwrap());
    assert_eq!(missing.info().await.unwrap().ttl, KeyTtl::Missing);

    // clear: true once, then false; the key is gone.
    assert!(bloom.clear().await.unwrap());
    assert!(!bloom.clear().await.unwrap());
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);
    let info = bloom.info().await.unwrap();
    assert_eq!(
        (info.bits_set, info.bytes, info.ttl),
        (0, 0, KeyTtl::Missing)
    );
    assert!(!bloom.exists(&items[0]).await.unwrap());
    assert!(
        !bloom.expire(Duration::from_secs(100)).await.unwrap(),
        "expire after clear"
    );
}

#[tokio::test]
async fn expire_zero_is_refused_and_too_long_is_invalid() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let bloom = RedisBloom::new(conn, common::unique_key("expire-zero"), BITS).unwrap();
    bloom.add("x").await.unwrap();
    assert!(matches!(
        bloom.expire(Duration::MAX).await,
        Err(redbloom::Error::InvalidConfig(_))
    ));
    assert_eq!(bloom.info().await.unwrap().ttl, KeyTtl::Persistent);
    // A TTL of zero would delete the filter at once: refused (tests/foreign_keys.rs).
    assert!(matches!(
        bloom.expire(Duration::ZERO).await,
        Err(redbloom::Error::InvalidConfig(_))
    ));
    assert_eq!(bloom.info().await.unwrap().ttl, KeyTtl::Persistent);
    assert!(bloom.exists("x").await.unwrap());
}
