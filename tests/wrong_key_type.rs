//! A key that holds a non-string gives `Error::WrongType` for every operation and is left as is.

mod common;

use redbloom::{Error, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;

async fn hgetall(conn: &mut MultiplexedConnection, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

fn assert_wrong_type(op: &str, key: &str, err: Error) {
    let display = err.to_string();
    let source = std::error::Error::source(&err).map(ToString::to_string);
    match &err {
        Error::WrongType { key: got, .. } => assert_eq!(got, key, "{op}: the error's key"),
        other => panic!("{op}: expected Error::WrongType, got {other:?}"),
    }
    assert!(display.contains(key), "{op}: {display:?} names the key");
    let source = source.unwrap_or_else(|| panic!("{op}: WrongType has a source"));
    assert!(
        source.contains("WRONGTYPE"),
        "{op}: the source is the server's reply, got {source:?}"
    );
    assert!(!err.is_transient(), "{op}: a wrong type is not transient");
}

/// A hash at a fresh key, and its contents.
async fn hash_key(conn: &mut MultiplexedConnection) -> (String, HashMap<String, String>) {
    let key = common::unique_key("a-hash");
    let added: i64 = redis::cmd("HSET")
        .arg(&key)
        .arg("field")
        .arg("value")
        .arg("other")
        .arg("\u{1f600}")
        .query_async(conn)
        .await
        .unwrap();
    assert_eq!(added, 2);
    let contents = hgetall(conn, &key).await;
    assert_eq!(contents.len(), 2);
    (key, contents)
}

/// The hash is exactly as before: same type, same fields, no TTL.
async fn assert_untouched(
    conn: &mut MultiplexedConnection,
    key: &str,
    want: &HashMap<String, String>,
) {
    assert_eq!(&hgetall(conn, key).await, want);
    let kind: String = redis::cmd("TYPE").arg(key).query_async(conn).await.unwrap();
    assert_eq!(kind, "hash");
    let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap();
    assert_eq!(ttl, -1);
}

#[tokio::test]
async fn a_hash_key_is_wrong_type_for_reads_and_writes() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let (key, want) = hash_key(&mut conn).await;
    let bloom = RedisBloom::new(conn.clone(), &key, 1_000).unwrap();

    assert_wrong_type("add", &key, bloom.add("hello").await.unwrap_err());
    assert_wrong_type("exists", &key, bloom.exists("hello").await.unwrap_err());
    assert_wrong_type(
        "add_many",
        &key,
        bloom.add_many(&["hello", "world"]).await.unwrap_err(),
    );
    assert_wrong_type(
        "exists_many",
        &key,
        bloom.exists_many(&["hello", "world"]).await.unwrap_err(),
    );
    assert_untouched(&mut conn, &key, &want).await;

    // The same filter on a string key works: the errors were about the key, not the filter.
    let ok = RedisBloom::new(conn, common::unique_key("a-string"), 1_000).unwrap();
    assert!(ok.add("hello").await.unwrap());
    assert!(ok.exists("hello").await.unwrap());
    assert_eq!(
        ok.info().await.unwrap().bits_set,
        14 - duplicates(b"hello", 1_000)
    );
}

#[tokio::test]
async fn a_hash_key_is_wrong_type_for_info() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let (key, want) = hash_key(&mut conn).await;
    let bloom = RedisBloom::new(conn.clone(), &key, 1_000).unwrap();

    assert_wrong_type("info", &key, bloom.info().await.unwrap_err());
    assert_untouched(&mut conn, &key, &want).await;
}

/// How many of an item's 14 locations repeat an earlier one.
fn duplicates(item: &[u8], bits: u64) -> u64 {
    let mut offsets = redbloom::gozero_locations(item, bits).to_vec();
    offsets.sort_unstable();
    offsets.dedup();
    14 - offsets.len() as u64
}
