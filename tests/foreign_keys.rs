//! A filter never changes a key that is not its own: `clear` and `expire` check the key's type
//! and the filter's parameters in the same atomic step as the delete or the TTL; a TTL that
//! rounds to zero is refused; a companion or shard key cannot be opened as a filter; bits
//! longer than the size holds are reported. Each case checks the other key's bytes afterwards.

mod common;

use redbloom::{Error, Layout, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

const BITS: u64 = 1_000;

async fn cmd<T: redis::FromRedisValue>(conn: &mut MultiplexedConnection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(conn)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn assert_wrong_type(what: &str, result: redbloom::Result<bool>, key: &str, found: &str) {
    match result {
        Err(Error::WrongType {
            key: got, found: f, ..
        }) => {
            assert_eq!(got, key, "{what}");
            assert_eq!(f, found, "{what}");
        }
        other => panic!("{what}: expected WrongType, got {other:?}"),
    }
}

fn assert_mismatch<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>) -> String {
    match result {
        Err(err @ Error::ParamsMismatch { .. }) => err.to_string(),
        other => panic!("{what}: expected ParamsMismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn clear_and_expire_leave_keys_of_other_types_untouched() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let hash = common::unique_key("userdb");
    let list = common::unique_key("queue");
    let _: i64 = cmd(&mut conn, &["HSET", &hash, "name", "ada", "plan", "pro"]).await;
    let _: i64 = cmd(&mut conn, &["RPUSH", &list, "a", "b", "c"]).await;

    for layout in [Layout::GoZero, Layout::Native] {
        for (key, found) in [(&hash, "hash"), (&list, "list")] {
            let bloom = RedisBloom::builder(key.as_str())
                .layout(layout)
                .bits(64)
                .hashes(if layout == Layout::Native { 3 } else { 14 })
                .build(conn.clone())
                .unwrap();
            assert_wrong_type("clear", bloom.clear().await, key, found);
            let expiry = bloom.expire(Duration::from_secs(1)).await;
            assert_wrong_type("expire", expiry, key, found);
            let message = bloom.clear().await.unwrap_err().to_string();
            assert!(
                message.contains(&format!("holds a {found}")) && !message.contains("Index"),
                "one clean sentence naming the type: {message}"
            );
        }
    }
    let fields: Vec<String> = cmd(&mut conn, &["HGETALL", &hash]).await;
    assert_eq!(fields, ["name", "ada", "plan", "pro"]);
    let items: Vec<String> = cmd(&mut conn, &["LRANGE", &list, "0", "-1"]).await;
    assert_eq!(items, ["a", "b", "c"]);
    for key in [&hash, &list] {
        assert_eq!(common::pttl(&mut conn, key).await, -1, "no TTL on {key}");
    }
    // No companion key was created beside them.
    for key in [&hash, &list] {
        let params = common::companion(key, "params");
        assert!(!common::key_exists(&mut conn, &params).await);
    }
}

#[tokio::test]
async fn clear_and_expire_refuse_a_filter_of_other_parameters() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for layout in [Layout::GoZero, Layout::Native] {
        let key = common::unique_key("sized");
        let hashes = if layout == Layout::Native { 5 } else { 14 };
        let shared = conn.clone();
        let filter = |bits: u64| {
            RedisBloom::builder(key.as_str())
                .layout(layout)
                .bits(bits)
                .hashes(hashes)
                .build(shared.clone())
                .unwrap()
        };
        let real = filter(BITS);
        real.add_many(&["a", "b", "c"]).await.unwrap();
        let before = common::key_hex(&mut conn, &key).await;
        let wrong = filter(5);
        let message = assert_mismatch("clear", wrong.clear().await);
        assert!(message.contains("bits=1000"), "{message}");
        assert_mismatch("expire", wrong.expire(Duration::from_secs(1)).await);
        assert_eq!(common::key_hex(&mut conn, &key).await, before, "{layout:?}");
        assert_eq!(common::pttl(&mut conn, &key).await, -1);
        assert!(real.exists("a").await.unwrap());
        // The right parameters clear it, parameters and all.
        assert!(real.clear().await.unwrap());
        assert!(!common::key_exists(&mut conn, &key).await);
        let params = common::companion(&key, "params");
        assert!(!common::key_exists(&mut conn, &params).await);
    }
}

#[tokio::test]
async fn bits_longer_than_the_size_are_reported_and_kept() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    // A go-zero filter of 1000 bits written by go-zero itself: 125 bytes, no stored parameters.
    let key = common::unique_key("gozero-written");
    common::gozero::set(&mut conn, &key, &redbloom::gozero_locations(b"hello", BITS)).await;
    let before = common::key_hex(&mut conn, &key).await;
    // A plain string of someone else's, as long as a session token.
    let token = common::unique_key("token");
    common::set_bytes(&mut conn, &token, &[b'x'; 40]).await;
    // A key with '}' but no hash tag (Redis hashes it whole): its length is checked as any's.
    let untagged = format!("{}}}untagged", common::unique_key("odd"));
    common::set_bytes(&mut conn, &untagged, &[0xff; 40]).await;

    for (key, bits) in [(&key, 64), (&token, 64), (&untagged, 64)] {
        let small = RedisBloom::new(conn.clone(), key.as_str(), bits).unwrap();
        let message = assert_mismatch("add", small.add("x").await);
        assert!(message.contains("bytes"), "{message}");
        assert_mismatch("exists", small.exists("x").await);
        assert_mismatch("clear", small.clear().await);
        assert_mismatch("expire", small.expire(Duration::from_secs(1)).await);
    }
    assert_eq!(common::key_hex(&mut conn, &key).await, before);
    assert_eq!(common::key_hex(&mut conn, &token).await, "78".repeat(40));
    assert_eq!(common::key_hex(&mut conn, &untagged).await, "ff".repeat(40));
    // The right size opens go-zero's filter as before.
    let right = RedisBloom::new(conn.clone(), key.as_str(), BITS).unwrap();
    assert!(right.exists("hello").await.unwrap());
    assert!(!right.exists("absent").await.unwrap());
    // A shorter string is a go-zero filter whose high bits are all still 0.
    let short = RedisBloom::new(conn.clone(), untagged.as_str(), 320).unwrap();
    assert!(short.exists("anything").await.unwrap());
}

#[tokio::test]
async fn ttls_that_round_to_zero_are_refused() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("ttl-zero");
    let bloom = RedisBloom::new(conn.clone(), key.as_str(), BITS).unwrap();
    bloom.add("x").await.unwrap();
    for ttl in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
    ] {
        match bloom.expire(ttl).await {
            Err(Error::InvalidConfig(message)) => assert!(message.contains("0 ms"), "{message}"),
            other => panic!("{ttl:?}: expected InvalidConfig, got {other:?}"),
        }
    }
    assert!(bloom.exists("x").await.unwrap());
    assert_eq!(common::pttl(&mut conn, &key).await, -1);
    assert!(bloom.expire(Duration::from_millis(1500)).await.unwrap());
    let ttl = common::pttl(&mut conn, &key).await;
    assert!((1..=1500).contains(&ttl), "{ttl}");
}

#[tokio::test]
async fn companion_and_shard_keys_cannot_be_opened_as_filters() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("owner");
    let native = RedisBloom::builder(key.as_str())
        .layout(Layout::Native)
        .expected_items(100)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    native.add("x").await.unwrap();
    let sharded = RedisBloom::builder(format!("{key}:sharded"))
        .bits(4_096)
        .shards(2)
        .build(conn.clone())
        .unwrap();
    sharded.add_many(&["a", "b", "c", "d"]).await.unwrap();

    let mut theirs: Vec<String> = vec![
        common::companion(&key, "params"),
        common::companion(&key, "scratch"),
        common::companion(&format!("{key}:sharded"), "params"),
    ];
    let shard_keys: Vec<String> =
        cmd(&mut conn, &["KEYS", &format!("*:{key}:sharded:shard:*")]).await;
    assert_eq!(shard_keys.len(), 2, "{shard_keys:?}");
    theirs.extend(shard_keys);
    let before: Vec<String> = {
        let mut all = Vec::new();
        for k in &theirs {
            all.push(common::key_hex(&mut conn, k).await);
        }
        all
    };
    for other in &theirs {
        let err = RedisBloom::new(conn.clone(), other.as_str(), 64).unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)), "{other}: {err}");
        assert!(err.to_string().contains(other.as_str()), "{err}");
        let built = RedisBloom::builder(other.as_str())
            .bits(64)
            .build(conn.clone());
        assert!(matches!(built, Err(Error::InvalidConfig(_))), "{other}");
    }
    for (k, hex) in theirs.iter().zip(&before) {
        assert_eq!(&common::key_hex(&mut conn, k).await, hex, "{k}");
    }
    assert!(native.exists("x").await.unwrap());
    assert!(sharded
        .exists_many(&["a", "b", "c", "d"])
        .await
        .unwrap()
        .iter()
        .all(|&p| p));
}

#[tokio::test]
async fn a_sharded_clear_or_expire_never_touches_the_bare_key() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("bare");
    // A go-zero filter written by a Go service at the bare logical key.
    common::gozero::set(&mut conn, &key, &redbloom::gozero_locations(b"hello", 64)).await;
    let theirs = RedisBloom::new(conn.clone(), key.as_str(), 64).unwrap();
    let before = common::key_hex(&mut conn, &key).await;
    let sharded = RedisBloom::builder(key.as_str())
        .bits(8_192)
        .shards(4)
        .build(conn.clone())
        .unwrap();
    sharded.add_many(&["a", "b", "c"]).await.unwrap();
    assert!(sharded.expire(Duration::from_secs(60)).await.unwrap());
    assert_eq!(
        common::pttl(&mut conn, &key).await,
        -1,
        "no TTL on the bare key"
    );
    assert!(sharded.clear().await.unwrap());
    assert_eq!(common::key_hex(&mut conn, &key).await, before);
    assert!(!sharded.exists("a").await.unwrap());
    assert!(theirs.exists("hello").await.unwrap());
}

/// A string with no stored parameters may be another program's value (`SET user:name "hello
/// world"`): read as a go-zero filter, but never written, cleared, expired or imported over
/// (`Error::ForeignString`, the key as it was) unless the filter says it is shared with Go.
#[tokio::test]
async fn a_string_that_is_not_a_filter_is_only_read() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("user:name");
    common::set_bytes(&mut conn, &key, b"hello world").await;
    let foreign = |result: redbloom::Result<bool>, what: &str| match result {
        Err(Error::ForeignString { key: k, bytes: 11 }) => assert_eq!(k, key, "{what}"),
        other => panic!("{what}: {other:?}"),
    };
    let bloom = RedisBloom::builder(key.as_str())
        .expected_items(100_000)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    // A read first (it may go on), then every write, each refused.
    assert!(!bloom.exists("x").await.unwrap());
    foreign(bloom.add("x").await, "add");
    foreign(bloom.add_many(&["x", "y"]).await.map(|a| a[0]), "add_many");
    foreign(bloom.clear().await, "clear");
    foreign(bloom.expire(Duration::from_secs(60)).await, "expire");
    let mut file = Vec::new();
    let donor = RedisBloom::builder(common::unique_key("donor"))
        .expected_items(100_000)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    donor.add("z").await.unwrap();
    donor.export(&mut file).await.unwrap();
    let imported = bloom
        .import(file.as_slice(), redbloom::ImportMode::Replace)
        .await
        .map(|_| true);
    foreign(imported, "import");
    // A fresh handle whose first call is a write is refused as well.
    let fresh = RedisBloom::builder(key.as_str())
        .expected_items(100_000)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    foreign(fresh.add("x").await, "add first");
    assert_eq!(common::key_hex(&mut conn, &key).await, hex(b"hello world"));
    assert_eq!(common::pttl(&mut conn, &key).await, -1);
    let params = common::companion(&key, "params");
    assert!(!common::key_exists(&mut conn, &params).await);

    // Said to be a go-zero filter shared with Go: written as one, and nothing stored beside it.
    let shared = RedisBloom::builder(key.as_str())
        .expected_items(100_000)
        .false_positive_rate(0.001)
        .shared_with_go(true)
        .build(conn.clone())
        .unwrap();
    assert!(shared.add("x").await.unwrap());
    assert!(shared.exists("x").await.unwrap() && bloom.exists("x").await.unwrap());
    assert!(!common::key_exists(&mut conn, &params).await);
    assert!(shared.clear().await.unwrap());
    assert!(!common::key_exists(&mut conn, &key).await);
    // Once the key is gone, the first handle creates the filter as its own.
    assert!(bloom.add("x").await.unwrap());
    assert!(common::key_exists(&mut conn, &params).await);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
