//! Sizes outside 1..=2^32 bits are `Error::InvalidConfig`, found before any I/O; 2^32 is accepted.

mod common;

use common::server::RedisServer;
use redbloom::{Error, RedisBloom, MAX_BITS};
use std::time::Duration;

const TOO_BIG: u64 = (1 << 32) + 1;

fn assert_invalid<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>) {
    match result {
        Err(Error::InvalidConfig(msg)) => assert!(!msg.is_empty(), "{what}: empty message"),
        other => panic!("{what}: expected Error::InvalidConfig, got {other:?}"),
    }
}

fn assert_connection_error<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>) {
    match result {
        Err(err @ (Error::Connection(_) | Error::Timeout(_))) => {
            assert!(err.is_transient(), "{what}: {err}");
            assert!(
                std::error::Error::source(&err).is_some(),
                "{what}: keeps the redis error"
            );
        }
        other => panic!("{what}: expected Error::Connection or Error::Timeout, got {other:?}"),
    }
}

#[test]
fn bad_sizes_are_rejected_without_any_connection() {
    // No connection at all: checking cannot do I/O, and it is not async.
    assert_eq!(MAX_BITS, 1 << 32);
    for bits in [0, TOO_BIG, u64::MAX] {
        assert_invalid(
            &format!("new, {bits} bits"),
            RedisBloom::builder("k").bits(bits).validate(),
        );
        assert_invalid(
            &format!("builder, {bits} bits"),
            RedisBloom::builder("k").bits(bits).validate(),
        );
    }
    // Items and a rate needing more than 2^32 bits.
    assert_invalid(
        "builder, 10^9 items at 1e-9",
        RedisBloom::builder("k")
            .expected_items(1_000_000_000)
            .false_positive_rate(1e-9)
            .validate(),
    );
    // The edges just inside are fine.
    assert_eq!(
        RedisBloom::builder("k")
            .bits(1)
            .build_offline()
            .unwrap()
            .bits(),
        1
    );
    assert_eq!(
        RedisBloom::builder("k")
            .bits(MAX_BITS)
            .build_offline()
            .unwrap()
            .bits(),
        MAX_BITS
    );
    assert_eq!(
        RedisBloom::builder("k")
            .bits(MAX_BITS)
            .build_offline()
            .unwrap()
            .bits(),
        MAX_BITS
    );
}

#[tokio::test]
async fn bad_sizes_are_rejected_before_io_on_a_dead_server() {
    let mut server = RedisServer::start().expect("redis-server on PATH");
    let client = redis::Client::open(server.url()).unwrap();
    let multiplexed = client.get_multiplexed_async_connection().await.unwrap();
    let manager = redis::aio::ConnectionManager::new(client.clone())
        .await
        .unwrap();
    server.kill();

    // Had construction talked to Redis, these would be connection errors.
    for bits in [0, TOO_BIG] {
        assert_invalid(
            &format!("new on a dead multiplexed connection, {bits} bits"),
            RedisBloom::new(multiplexed.clone(), "dead", bits),
        );
        assert_invalid(
            &format!("builder on a dead multiplexed connection, {bits} bits"),
            RedisBloom::builder("dead")
                .bits(bits)
                .build(multiplexed.clone()),
        );
        assert_invalid(
            &format!("new on a dead connection manager, {bits} bits"),
            RedisBloom::new(manager.clone(), "dead", bits),
        );
        assert_invalid(
            &format!("builder on a dead connection manager, {bits} bits"),
            RedisBloom::builder("dead")
                .bits(bits)
                .build(manager.clone()),
        );
    }

    // With valid bits construction succeeds (it sends nothing), and the first operation reports
    // the dead server as a typed connection error, not a panic or an `Error::Redis`.
    let limit = Duration::from_secs(20);
    let bloom = RedisBloom::new(multiplexed, "dead", 1_000).unwrap();
    let add = tokio::time::timeout(limit, bloom.add("hello"))
        .await
        .expect("add on a dead connection returns");
    assert_connection_error("add on a dead multiplexed connection", add);
    let exists = tokio::time::timeout(limit, bloom.exists("hello"))
        .await
        .expect("exists on a dead connection returns");
    assert_connection_error("exists on a dead multiplexed connection", exists);

    let bloom = RedisBloom::builder("dead")
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(manager)
        .unwrap();
    let add_many = tokio::time::timeout(limit, bloom.add_many(&["a", "b"]))
        .await
        .expect("add_many on a dead connection manager returns");
    assert_connection_error("add_many on a dead connection manager", add_many);
}

#[tokio::test]
async fn one_bit_works_end_to_end() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("one-bit");
    let bloom = RedisBloom::new(conn.clone(), &key, 1).unwrap();
    assert_eq!(redbloom::gozero_locations(b"hello", 1), [0; 14]);
    assert!(!bloom.exists("hello").await.unwrap());
    assert!(bloom.add("hello").await.unwrap());
    assert_eq!(common::key_hex(&mut conn, &key).await, "80");
    // Every item maps to bit 0 now set: everything is "present", nothing is new.
    assert!(bloom.exists("anything").await.unwrap());
    assert!(!bloom.add("world").await.unwrap());
    let info = bloom.info().await.unwrap();
    assert_eq!((info.bits_set, info.bytes), (1, 1));
}

/// 2^32 bits is the largest size and is accepted. Its offsets reach 2^32 - 1, so adding an item
/// makes Redis grow the string to the byte of its highest offset: for "hello" that is
/// 3436979159 / 8 ≈ 410 MiB. The test does not add at this size (it would take that much memory
/// from a shared server and seconds to allocate and free); it checks the offsets against the SPEC
/// vector and runs the read paths, which never grow the key (`GETBIT` past the end reads 0).
#[tokio::test]
async fn two_to_the_32_bits_is_accepted() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("max-bits");
    // Shared with Go: the key is written by hand below, as go-zero would, then cleared.
    let bloom = RedisBloom::builder(&key)
        .bits(MAX_BITS)
        .shared_with_go(true)
        .build(conn.clone())
        .unwrap();
    assert_eq!(bloom.bits(), 4_294_967_296);
    let via_builder = RedisBloom::builder(&key)
        .bits(1 << 32)
        .build(conn.clone())
        .unwrap();
    assert_eq!(via_builder.bits(), MAX_BITS);

    // SPEC §1 vector for "hello" at 4294967296 bits.
    let want = [
        1803989299u64,
        298237730,
        1194578786,
        3214149523,
        3436979159,
        1310448386,
        2396881034,
        3392237120,
        1495682644,
        2181517536,
        39667469,
        2162722969,
        3122709299,
        2645466485,
    ];
    let hello = redbloom::gozero_locations(b"hello", MAX_BITS);
    assert_eq!(hello, want);
    assert!(hello.iter().all(|&o| o < MAX_BITS));
    // Offsets above 2^31 are used: the modulus is really 2^32, not something smaller.
    assert!(hello.iter().any(|&o| o >= 1 << 31));

    // Reads on a missing key: absent, and the key is not created.
    assert!(!bloom.exists("hello").await.unwrap());
    assert_eq!(
        bloom.exists_many(&["hello", "world", ""]).await.unwrap(),
        [false, false, false]
    );
    let info = bloom.info().await.unwrap();
    assert_eq!((info.bits, info.bits_set, info.bytes), (MAX_BITS, 0, 0));
    assert_eq!(info.ttl, redbloom::KeyTtl::Missing);

    // Reads on a short existing key (all ones): offsets past its end read 0, nothing grows.
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(&[0xffu8; 16][..])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!bloom.exists("hello").await.unwrap());
    assert_eq!(
        bloom.exists_many(&["hello", "world"]).await.unwrap(),
        [false, false]
    );
    let info = bloom.info().await.unwrap();
    assert_eq!((info.bits_set, info.bytes), (128, 16));
    assert_eq!(common::key_hex(&mut conn, &key).await, "ff".repeat(16));
    assert!(bloom.clear().await.unwrap());
}
