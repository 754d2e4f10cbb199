//! The builder is typed by kind (docs/guide.md "One type for every kind"): an option of another
//! kind does not compile (the `compile_fail` examples on `Builder`), and every kind's own
//! options are checked by `validate()` with no connection, as `build` checks them: a typed
//! `Error::InvalidConfig`, never a panic.

mod common;

use redbloom::{
    Builder, CountingBloom, Error, GrowingBloom, NearCache, RedisBloom, StoredParams, WindowBloom,
};
use std::time::Duration;

/// Asserts that `builder` is refused by `validate()` and by `build` alike, as a typed error.
macro_rules! refused {
    ($what:expr, $builder:expr, $conn:expr) => {{
        let builder = $builder;
        let what = $what;
        match builder.validate() {
            Err(Error::InvalidConfig(msg)) => assert!(!msg.is_empty(), "{what}"),
            other => panic!("{what}: validate gave {other:?}"),
        }
        match builder.build($conn.clone()) {
            Err(Error::InvalidConfig(_)) => {}
            other => panic!("{what}: build gave {:?}", other.map(|_| ())),
        }
    }};
}

#[tokio::test]
async fn every_kinds_options_are_checked_by_validate_as_by_build() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let hour = Duration::from_secs(3600);
    let window = || {
        WindowBloom::builder("w", hour)
            .expected_items(1000)
            .false_positive_rate(0.01)
    };
    let growing = || {
        GrowingBloom::builder("g")
            .expected_items(1000)
            .false_positive_rate(0.01)
    };
    let counting = || {
        CountingBloom::builder("c")
            .expected_items(1000)
            .false_positive_rate(0.01)
    };
    // Growing filters: the growth, the tightening ratio, the levels, the size (never in bits).
    refused!("growth 0", growing().growth(0), conn);
    refused!("tightening 1", growing().tightening(1.0), conn);
    refused!("tightening 0", growing().tightening(0.0), conn);
    refused!("no levels", growing().max_levels(0), conn);
    refused!("65 levels", growing().max_levels(65), conn);
    refused!(
        "no rate",
        GrowingBloom::builder("g").expected_items(10),
        conn
    );
    refused!(
        "no items",
        GrowingBloom::builder("g")
            .expected_items(0)
            .false_positive_rate(0.1),
        conn
    );
    // Window filters: the generations and the window.
    refused!("one generation", window().generations(1), conn);
    refused!("65 generations", window().generations(65), conn);
    refused!(
        "a window of 0",
        WindowBloom::builder("w", Duration::ZERO)
            .expected_items(1000)
            .false_positive_rate(0.01),
        conn
    );
    refused!(
        "a window shorter than 1 ms per generation",
        WindowBloom::builder("w", Duration::from_millis(3))
            .generations(8)
            .expected_items(1000)
            .false_positive_rate(0.01),
        conn
    );
    refused!(
        "eleven years",
        WindowBloom::builder("w", Duration::from_secs(11 * 365 * 86_400))
            .expected_items(1000)
            .false_positive_rate(0.01),
        conn
    );
    refused!(
        "a window in bits without hashes",
        WindowBloom::builder("w", hour).bits(1000),
        conn
    );
    // Counting filters: at most 2^30 counters a key.
    refused!(
        "2^31 counters in one key",
        CountingBloom::builder("c").bits(1 << 31),
        conn
    );
    // Every kind: the shards, the timeout, the near cache's budget, the key.
    refused!("0 shards", counting().shards(0), conn);
    refused!("1025 shards", window().shards(1025), conn);
    refused!("a zero timeout", growing().timeout(Duration::ZERO), conn);
    let tiny = NearCache::new(Duration::from_secs(1)).budget(10);
    match counting().near_cache(tiny.clone()).validate() {
        Err(Error::NearCacheBudget { .. }) => {}
        other => panic!("a near cache over its budget: {other:?}"),
    }
    match window().near_cache(tiny).validate() {
        Err(Error::NearCacheBudget { .. }) => {}
        other => panic!("a near cache over its budget: {other:?}"),
    }
    refused!("an empty key", Builder::new("").bits(64), conn);
    refused!(
        "a reserved key",
        GrowingBloom::builder("x:redbloom:params")
            .expected_items(10)
            .false_positive_rate(0.1),
        conn
    );
    // And what validates builds.
    for ok in [window().validate(), window().generations(64).validate()] {
        ok.unwrap();
    }
    growing().growth(1).max_levels(64).validate().unwrap();
    growing().build(conn.clone()).unwrap();
    counting().build(conn.clone()).unwrap();
    RedisBloom::builder("p").bits(64).build(conn).unwrap();
}

#[tokio::test]
async fn a_stored_filter_reopens_as_its_kind_only() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("reopen");
    let made = WindowBloom::builder(&key, Duration::from_secs(60))
        .generations(6)
        .expected_items(1000)
        .false_positive_rate(0.01)
        .shards(3)
        .build(conn.clone())
        .unwrap();
    assert!(made.add("a").await.unwrap());
    let stored = StoredParams::read(&mut conn, &key).await.unwrap().unwrap();
    assert_eq!(stored.kind().unwrap(), redbloom::kind::KindName::Window);
    assert_eq!(stored.field("generations"), Some("6"));
    let reopened = stored
        .builder::<redbloom::kind::Window>()
        .unwrap()
        .build(conn.clone())
        .unwrap();
    assert_eq!(
        (reopened.window(), reopened.generations(), reopened.shards()),
        (Duration::from_secs(60), 6, 3)
    );
    assert!(reopened.exists("a").await.unwrap());
    // Another kind is a mismatch, not a filter of the wrong kind.
    assert!(matches!(
        stored.builder::<redbloom::kind::Counting>(),
        Err(Error::ParamsMismatch { .. })
    ));
    assert!(StoredParams::read(&mut conn, "no-such-filter")
        .await
        .unwrap()
        .is_none());
}
