//! The parameters guard for the go-zero layout: a filter created by redbloom stores its size,
//! and a client with another size gets `Error::ParamsMismatch`; a filter written by go-zero
//! (nothing stored) still opens with whatever bits the client gives.

mod common;

use redbloom::{Error, RedisBloom};

fn params_key(key: &str) -> String {
    common::companion(key, "params")
}

#[tokio::test]
async fn another_size_is_refused() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("guard");
    let first = RedisBloom::new(conn.clone(), &key, 1 << 16).unwrap();
    // A read of a new filter stores nothing.
    assert!(!first.exists("x").await.unwrap());
    assert!(!common::key_exists(&mut conn, &params_key(&key)).await);
    assert!(first.add("x").await.unwrap());
    let stored: String = redis::cmd("GET")
        .arg(params_key(&key))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        stored,
        "layout=gozero bits=65536 hashes=14 hash=murmur3_x64_128"
    );

    let before = common::key_hex(&mut conn, &key).await;
    let other = RedisBloom::new(conn.clone(), &key, 1 << 17).unwrap();
    for (op, result) in [
        ("add", other.add("y").await.map(|_| ())),
        ("exists", other.exists("x").await.map(|_| ())),
        ("add_many", other.add_many(&["y", "z"]).await.map(|_| ())),
        ("info", other.info().await.map(|_| ())),
    ] {
        match result {
            Err(Error::ParamsMismatch {
                key: k,
                stored,
                requested,
            }) => {
                assert_eq!(k, key, "{op}");
                assert!(
                    stored.contains("bits=65536") && requested.contains("bits=131072"),
                    "{op}"
                );
            }
            other => panic!("{op}: {other:?}"),
        }
    }
    assert_eq!(
        common::key_hex(&mut conn, &key).await,
        before,
        "the refused client wrote nothing"
    );

    // After clear, the filter may be created anew with another size.
    assert!(first.clear().await.unwrap());
    assert!(!common::key_exists(&mut conn, &params_key(&key)).await);
    let fresh = RedisBloom::new(conn.clone(), &key, 1 << 17).unwrap();
    assert!(fresh.add("y").await.unwrap());
    assert!(matches!(
        first.add("x").await,
        Err(Error::ParamsMismatch { .. })
    ));
}

#[tokio::test]
async fn a_filter_written_by_gozero_opens_with_explicit_bits() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("legacy");
    common::set_bytes(&mut conn, &key, &common::gozero::HELLO_WORLD_64_BITS).await;

    // go-zero made it: the filter says it is shared with Go, to write into it.
    let right = RedisBloom::builder(key.as_str())
        .bits(64)
        .shared_with_go(true)
        .build(conn.clone())
        .unwrap();
    assert!(right.exists("hello").await.unwrap() && right.exists("world").await.unwrap());
    assert!(!right.add("hello").await.unwrap());
    // Nothing is stored for a filter go-zero made, so no client claims it with its size...
    assert!(!common::key_exists(&mut conn, &params_key(&key)).await);
    // ...and one with other bits opens it too, as in go-zero (it reads other offsets).
    let other = RedisBloom::new(conn.clone(), &key, 128).unwrap();
    assert!(other.exists("hello").await.is_ok());
}

/// Keys whose braces form no hash tag by Redis's rule (`{}x`, `a}b`: Redis hashes them whole)
/// keep the guard like any other name: their parameters live in a key of the same slot, so
/// another size is refused, for every kind; none of them is refused for its name.
#[tokio::test]
async fn names_without_a_hash_tag_keep_the_guard() {
    use redbloom::{CountingBloom, GrowingBloom, Layout, WindowBloom};
    use std::time::Duration;
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let mismatch = |what: &str, result: redbloom::Result<bool>| match result {
        Err(Error::ParamsMismatch { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    for odd in ["{}x", "a}b", "x{}y{z}", "}"] {
        let key = format!("{}:{odd}", common::unique_key("odd"));
        let key = key.as_str();
        for layout in [Layout::GoZero, Layout::Native] {
            let key = format!("{key}:{layout:?}");
            let sized = |n: u64| {
                RedisBloom::builder(key.as_str())
                    .layout(layout)
                    .expected_items(n)
                    .false_positive_rate(0.01)
                    .build(conn.clone())
                    .unwrap()
            };
            assert!(sized(1_000).add("x").await.unwrap(), "{key}");
            mismatch(&key, sized(100_000).exists("x").await);
            mismatch(&key, sized(100_000).add("y").await);
            assert!(sized(1_000).exists("x").await.unwrap(), "{key}");
        }
        let window = |w: u64| {
            WindowBloom::builder(format!("{key}:w"), Duration::from_secs(w))
                .expected_items(1_000)
                .false_positive_rate(0.01)
                .build(conn.clone())
                .unwrap()
        };
        assert!(window(3600).add("x").await.unwrap(), "{key}");
        mismatch(key, window(60).add("y").await);
        let counting = |n: u64| {
            CountingBloom::builder(format!("{key}:c"))
                .expected_items(n)
                .false_positive_rate(0.01)
                .build(conn.clone())
                .unwrap()
        };
        assert!(counting(1_000).add("x").await.unwrap(), "{key}");
        mismatch(key, counting(100_000).add("y").await);
        let growing = |n: u64| {
            GrowingBloom::builder(format!("{key}:g"))
                .expected_items(n)
                .false_positive_rate(0.01)
                .build(conn.clone())
                .unwrap()
        };
        assert!(growing(1_000).add("x").await.unwrap(), "{key}");
        mismatch(key, growing(100_000).add("y").await);
        assert!(growing(1_000).exists("x").await.unwrap(), "{key}");
    }
}
