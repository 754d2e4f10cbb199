//! After `SCRIPT FLUSH` (as after a server restart) every operation still works: the Lua engine
//! reloads its scripts on `NOSCRIPT`, the BITFIELD engine uses none.

mod common;

use redbloom::{Engine, RedisBloom};
use redis::aio::MultiplexedConnection;

/// Runs `SCRIPT FLUSH`; on a private server, checks that no script is cached afterwards.
async fn script_flush(conn: &mut MultiplexedConnection, private: bool) {
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(conn)
        .await
        .unwrap();
    if private {
        assert_eq!(
            cached_scripts(conn).await,
            0,
            "SCRIPT FLUSH emptied the cache"
        );
    }
}

/// `number_of_cached_scripts` from `INFO memory`.
async fn cached_scripts(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("number_of_cached_scripts:"))
        .expect("INFO memory reports number_of_cached_scripts")
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn the_lua_engine_reloads_every_script_after_a_flush() {
    survives_script_flushes(Engine::Scripts, 6, 1).await;
}

#[tokio::test]
async fn the_bitfield_engine_needs_no_scripts() {
    survives_script_flushes(Engine::Fast, 1, 0).await;
}

/// Runs every operation right after a `SCRIPT FLUSH`; `scripts` is how many scripts the filter
/// caches (the engine's, plus the parameters check on first use, plus for the Lua engine the
/// `return 0` that routes the eviction check's `INFO` to the key's master), `after_last` how many are
/// cached after the final `exists_many` (the check runs once per client).
async fn survives_script_flushes(engine: Engine, scripts: u64, after_last: u64) {
    let mut redis = common::redis().await;
    // Script counts are only checked on a server of our own: on a shared REDIS_URL other
    // clients load scripts too.
    let private = redis.private_server().is_some();
    let mut conn = redis.connection().await;
    let key = common::unique_key("flush");
    let bloom = RedisBloom::new(conn.clone(), &key, 1_000_000)
        .unwrap()
        .with_engine(engine);

    let before: Vec<String> = (0..100).map(|i| format!("before:{i}")).collect();
    assert!(bloom.add_many(&before).await.unwrap().iter().all(|n| *n));
    assert!(bloom.add("single-before").await.unwrap());
    assert!(bloom.exists("single-before").await.unwrap());
    assert!(bloom.exists_many(&before).await.unwrap().iter().all(|p| *p));
    if private {
        assert_eq!(
            cached_scripts(&mut conn).await,
            scripts,
            "the engine's scripts"
        );
    }
    let bytes_before = common::key_hex(&mut conn, &key).await;

    // Each operation runs right after its own flush, so each one has to reload its script.
    script_flush(&mut conn, private).await;
    assert!(bloom.add("after").await.unwrap(), "add after flush");
    script_flush(&mut conn, private).await;
    assert!(bloom.exists("after").await.unwrap(), "exists after flush");
    script_flush(&mut conn, private).await;
    assert!(
        bloom.exists("single-before").await.unwrap(),
        "an item added before the flush is still found"
    );
    script_flush(&mut conn, private).await;
    assert!(
        !bloom.exists("never-added").await.unwrap(),
        "an absent item still reads as absent"
    );

    script_flush(&mut conn, private).await;
    let later: Vec<String> = (0..50).map(|i| format!("later:{i}")).collect();
    let flags = bloom.add_many(&later).await.unwrap();
    assert_eq!(flags, vec![true; later.len()], "add_many after flush");

    script_flush(&mut conn, private).await;
    let mut all = before.clone();
    all.extend(later.iter().cloned());
    all.push("after".into());
    all.push("single-before".into());
    all.push("never-added".into());
    let found = bloom.exists_many(&all).await.unwrap();
    let mut want = vec![true; all.len()];
    *want.last_mut().unwrap() = false;
    assert_eq!(found, want, "exists_many after flush");
    if private {
        assert_eq!(
            cached_scripts(&mut conn).await,
            after_last,
            "exists_many loaded its script again (if it has one)"
        );
    }

    // The flush touched no data: every bit set before is still set.
    let old = hex_bytes(&bytes_before);
    let new = hex_bytes(&common::key_hex(&mut conn, &key).await);
    assert!(!old.is_empty() && new.len() >= old.len());
    for (i, (o, n)) in old.iter().zip(&new).enumerate() {
        assert_eq!(o & n, *o, "byte {i}: bits lost");
    }
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}
