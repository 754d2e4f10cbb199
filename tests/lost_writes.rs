//! Losses are loud on writes too (SPEC.md §3, "Names, losses and records"): a write to a filter
//! whose stored parameters say its key exists, but whose key is gone, is refused with
//! `Error::Lost`, writes nothing and makes no key again, by every write path of a filter of one
//! key (a single add, a batch by `BITFIELD`, a dense batch; recorded across retries or not),
//! until `clear` starts it again. A go-zero layout filter keeps SPEC §1: a missing key is an
//! empty filter, written again.

mod common;

use redbloom::{CountingBloom, Error, Layout, RedisBloom, Retry};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

async fn exists(conn: &mut MultiplexedConnection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

async fn del(conn: &mut MultiplexedConnection, key: &str) {
    let deleted: i64 = redis::cmd("DEL").arg(key).query_async(conn).await.unwrap();
    assert_eq!(deleted, 1, "{key} existed");
}

#[track_caller]
fn assert_lost<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, key: &str) {
    match result {
        Err(Error::Lost { key: got, .. }) => assert_eq!(got, key, "{what}"),
        Err(other) => panic!("{what}: expected Error::Lost for {key}, got {other:?}"),
        Ok(answers) => {
            let shown = format!("{answers:?}");
            let shown: String = shown.chars().take(120).collect();
            panic!("{what}: expected Error::Lost for {key}, got Ok({shown}…)")
        }
    }
}

/// A filter's `add_many`, whatever its kind.
type Writer = Box<
    dyn Fn(
        Vec<String>,
    )
        -> std::pin::Pin<Box<dyn std::future::Future<Output = redbloom::Result<Vec<bool>>>>>,
>;

/// The shards of the filter `key` (`{rbI.N}:KEY:shard:I/S`), not their companions.
async fn shard_keys(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    let mut found = common::keys_like(conn, &format!("{{rb*}}:{key}:shard:*")).await;
    found.retain(|k| k.rsplit(':').next().is_some_and(|t| t.contains('/')));
    found
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

/// The ways a write reaches a filter of one key: with and without records (a retry budget),
/// one item, a batch by `BITFIELD`, a batch large enough for the dense path.
const BATCHES: [usize; 3] = [1, 50, 20_000];

fn native(
    conn: &MultiplexedConnection,
    key: &str,
    recorded: bool,
) -> RedisBloom<MultiplexedConnection> {
    let builder = RedisBloom::builder(key)
        .layout(Layout::Native)
        .expected_items(10_000)
        .false_positive_rate(0.01);
    let builder = match recorded {
        true => builder.retry(Retry::for_duration(Duration::from_secs(5))),
        false => builder,
    };
    builder.build(conn.clone()).unwrap()
}

#[tokio::test]
async fn a_write_to_a_native_filter_whose_bits_are_gone_is_refused() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for recorded in [false, true] {
        let key = common::unique_key("lost-write-native");
        let bloom = native(&conn, &key, recorded);
        let old = items("old", 300);
        bloom.add_many(&old).await.unwrap();
        del(&mut conn, &key).await;
        for batch in BATCHES {
            let what = format!("recorded {recorded}, a batch of {batch}");
            let new = items(&format!("new{batch}"), batch);
            match batch {
                1 => assert_lost(&what, bloom.add(&new[0]).await, &key),
                _ => assert_lost(&what, bloom.add_many(&new).await, &key),
            }
            assert!(
                !exists(&mut conn, &key).await,
                "{what}: the key was made again"
            );
            // A fresh handle, that has learned nothing, is refused the same way.
            let fresh = native(&conn, &key, recorded);
            assert_lost(&what, fresh.add(&new[0]).await, &key);
            assert!(
                !exists(&mut conn, &key).await,
                "{what}: made again by a new handle"
            );
        }
        // Checks stay loud, and `clear` starts the filter again.
        assert_lost(
            "a check after the refused writes",
            bloom.exists_many(&old).await,
            &key,
        );
        bloom.clear().await.unwrap();
        assert!(
            bloom.add("again").await.unwrap(),
            "a cleared filter takes writes"
        );
        assert!(bloom.exists("again").await.unwrap());
        assert!(!bloom.exists(&old[0]).await.unwrap(), "cleared");
    }
}

#[tokio::test]
async fn a_write_to_a_counting_filter_whose_counters_are_gone_is_refused() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for recorded in [false, true] {
        let key = common::unique_key("lost-write-counting");
        let builder = CountingBloom::builder(&key)
            .expected_items(10_000)
            .false_positive_rate(0.01);
        let builder = match recorded {
            true => builder.retry(Retry::for_duration(Duration::from_secs(5))),
            false => builder,
        };
        let bloom = builder.build(conn.clone()).unwrap();
        bloom.add_many(&items("old", 300)).await.unwrap();
        del(&mut conn, &key).await;
        for batch in BATCHES {
            let what = format!("recorded {recorded}, a batch of {batch}");
            let new = items(&format!("new{batch}"), batch);
            assert_lost(&what, bloom.add_many(&new).await, &key);
            assert!(
                !exists(&mut conn, &key).await,
                "{what}: the key was made again"
            );
        }
        // An add-if-absent (its own script) is refused too.
        let what = format!("recorded {recorded}, add_if_absent");
        assert_lost(&what, bloom.add_if_absent("absent").await, &key);
        assert!(
            !exists(&mut conn, &key).await,
            "{what}: the key was made again"
        );
        bloom.clear().await.unwrap();
        assert!(bloom.add("again").await.unwrap());
    }
}

/// SPEC.md §1: a go-zero layout filter's missing key is an empty filter, and a write makes it.
#[tokio::test]
async fn a_go_zero_filter_whose_key_is_gone_is_written_again() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("lost-write-gozero");
    let bloom = RedisBloom::builder(&key)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    bloom.add_many(&items("old", 300)).await.unwrap();
    del(&mut conn, &key).await;
    assert!(bloom.add("new").await.unwrap());
    assert!(exists(&mut conn, &key).await);
    assert!(bloom.exists("new").await.unwrap());
}

/// A window filter: a live generation its ledger lists, deleted, refuses adds (one item, a
/// batch, a dense batch; recorded or not) and is not made again; generations that left the
/// window are not losses (tests/window.rs), and `clear` starts again.
#[tokio::test]
async fn a_write_to_a_window_whose_live_generation_is_gone_is_refused() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for recorded in [false, true] {
        let key = common::unique_key("lost-write-window");
        let builder = redbloom::WindowBloom::builder(&key, Duration::from_secs(3600))
            .expected_items(10_000)
            .false_positive_rate(0.01);
        let builder = match recorded {
            true => builder.retry(Retry::for_duration(Duration::from_secs(5))),
            false => builder,
        };
        let bloom = builder.build(conn.clone()).unwrap();
        bloom.add_many(&items("old", 300)).await.unwrap();
        let pattern = format!("{{{key}}}:redbloom:{}:{key}:gen:*", key.len());
        let generations = common::keys_like(&mut conn, &pattern).await;
        assert_eq!(generations.len(), 1, "{generations:?}");
        del(&mut conn, &generations[0]).await;
        for batch in BATCHES {
            let what = format!("recorded {recorded}, a batch of {batch}");
            let new = items(&format!("new{batch}"), batch);
            assert_lost(&what, bloom.add_many(&new).await, &generations[0]);
            assert!(
                common::keys_like(&mut conn, &pattern).await.is_empty(),
                "{what}: a generation was made again"
            );
        }
        bloom.clear().await.unwrap();
        assert!(bloom.add("again").await.unwrap());
        assert!(bloom.exists("again").await.unwrap());
    }
}

/// A growing filter of one key: a level's segment gone, or its counts gone under its stored
/// parameters, refuses adds (one item, a batch, a dense batch; recorded or not), and nothing is
/// made again.
#[tokio::test]
async fn a_write_to_a_growing_filter_whose_levels_are_gone_is_refused() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for recorded in [false, true] {
        for gone in ["segment", "counts"] {
            let key = common::unique_key("lost-write-growing");
            let builder = redbloom::GrowingBloom::builder(&key)
                .expected_items(100)
                .false_positive_rate(0.01);
            let builder = match recorded {
                true => builder.retry(Retry::for_duration(Duration::from_secs(5))),
                false => builder,
            };
            let bloom = builder.build(conn.clone()).unwrap();
            bloom.add_many(&items("old", 300)).await.unwrap();
            let pattern = format!("{{{key}}}:redbloom:{}:{key}:grow:*", key.len());
            let made = common::keys_like(&mut conn, &pattern).await;
            let (counts, segments): (Vec<String>, Vec<String>) = made
                .into_iter()
                .partition(|k| !k[k.rfind(":grow:").unwrap() + 6..].contains(':'));
            assert_eq!(counts.len(), 1, "{counts:?}");
            assert!(!segments.is_empty());
            let deleted = match gone {
                "segment" => segments[0].clone(),
                _ => counts[0].clone(),
            };
            let what = format!("recorded {recorded}, {gone} gone");
            if gone == "counts" {
                for key in &segments {
                    del(&mut conn, key).await;
                }
            }
            del(&mut conn, &deleted).await;
            // (5,000 items: the dense add, which merges by a compare-and-set script.)
            for batch in [1, 50, 5_000] {
                let new = items(&format!("new{batch}"), batch);
                assert_lost(&what, bloom.add_many(&new).await, &deleted);
                assert!(!exists(&mut conn, &deleted).await, "{what}: made again");
            }
            bloom.clear().await.unwrap();
            assert!(bloom.add("again").await.unwrap(), "{what}");
        }
    }
}

/// A module filter of one key (RedisBloom's BF.*), deleted under its stored parameters: adds
/// are refused (recorded or not) and `BF.RESERVE` makes no filter again.
#[tokio::test]
async fn a_write_to_a_module_filter_that_is_gone_is_refused() {
    let redis = common::module::redis_with_bloom();
    let mut conn = redis.connection().await;
    for recorded in [false, true] {
        let key = common::unique_key("lost-write-module");
        let builder = redbloom::ModuleBloom::builder(&key)
            .expected_items(10_000)
            .false_positive_rate(0.01);
        let builder = match recorded {
            true => builder.retry(Retry::for_duration(Duration::from_secs(5))),
            false => builder,
        };
        let bloom = builder.build(conn.clone()).unwrap();
        bloom.add_many(&items("old", 300)).await.unwrap();
        del(&mut conn, &key).await;
        for batch in [1, 50] {
            let what = format!("recorded {recorded}, a batch of {batch}");
            let new = items(&format!("new{batch}"), batch);
            assert_lost(&what, bloom.add_many(&new).await, &key);
            assert!(!exists(&mut conn, &key).await, "{what}: made again");
        }
        bloom.clear().await.unwrap();
        assert!(bloom.add("again").await.unwrap());
    }
}

/// A sharded native or counting filter: a shard gone under the stored parameters refuses the
/// writes that reach it (one item, a batch by `BITFIELD`, a dense batch; recorded or not) and
/// is not made again; a shard gone because another client cleared the filter is not a loss:
/// the write starts the filter again.
#[tokio::test]
async fn a_write_to_a_shard_that_is_gone_is_refused_unless_the_filter_was_cleared() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for (kind, recorded) in [
        ("native", false),
        ("native", true),
        ("counting", false),
        ("counting", true),
    ] {
        let key = common::unique_key(&format!("lost-write-shard-{kind}"));
        let what = format!("{kind}, recorded {recorded}");
        let retry = |b: bool| match b {
            true => Some(Retry::for_duration(Duration::from_secs(5))),
            false => None,
        };
        let writer = |conn: &MultiplexedConnection| -> Writer {
            match kind {
                "native" => {
                    let mut b = RedisBloom::builder(&key)
                        .layout(Layout::Native)
                        .expected_items(10_000)
                        .false_positive_rate(0.01)
                        .shards(3);
                    if let Some(r) = retry(recorded) {
                        b = b.retry(r);
                    }
                    let bloom = b.build(conn.clone()).unwrap();
                    Box::new(move |items| {
                        let bloom = bloom.clone();
                        Box::pin(async move { bloom.add_many(&items).await })
                    })
                }
                _ => {
                    let mut b = CountingBloom::builder(&key)
                        .expected_items(10_000)
                        .false_positive_rate(0.01)
                        .shards(3);
                    if let Some(r) = retry(recorded) {
                        b = b.retry(r);
                    }
                    let bloom = b.build(conn.clone()).unwrap();
                    Box::new(move |items| {
                        let bloom = bloom.clone();
                        Box::pin(async move { bloom.add_many(&items).await })
                    })
                }
            }
        };
        let add = writer(&conn);
        add(items("old", 300)).await.unwrap();
        let shards = shard_keys(&mut conn, &key).await;
        assert_eq!(shards.len(), 3, "{what}: {shards:?}");
        del(&mut conn, &shards[0]).await;
        let batches: &[usize] = match kind {
            "native" => &[50, 20_000],
            _ => &[50],
        };
        for &batch in batches {
            let new = items(&format!("new{batch}"), batch);
            assert_lost(&what, add(new).await, &shards[0]);
            assert!(!exists(&mut conn, &shards[0]).await, "{what}: made again");
        }
        let mut refused = 0;
        for item in items("single", 30) {
            match add(vec![item]).await {
                Ok(_) => {}
                Err(err) => {
                    assert_lost(&what, Err::<(), _>(err), &shards[0]);
                    refused += 1;
                }
            }
        }
        assert!(refused > 0, "{what}: some items go to the lost shard");
        assert!(!exists(&mut conn, &shards[0]).await, "{what}: made again");

        // Cleared by another client: not a loss, the filter starts again.
        let _: i64 = redis::cmd("DEL")
            .arg(&shards[1])
            .arg(&shards[2])
            .arg(format!("{{{key}}}:redbloom:{}:{key}:params", key.len()))
            .query_async(&mut conn)
            .await
            .unwrap();
        add(items("after-clear", 50)).await.unwrap();
        assert_eq!(
            shard_keys(&mut conn, &key).await.len(),
            3,
            "{what}: every shard made again"
        );
    }
}

/// A sharded counting filter's add-if-absent (its own script) is refused too when a shard is
/// gone under the stored parameters, recorded or not, and makes no shard again.
#[tokio::test]
async fn an_add_if_absent_into_a_shard_that_is_gone_is_refused() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for recorded in [false, true] {
        let key = common::unique_key("lost-absent-shard");
        let what = format!("recorded {recorded}");
        let mut builder = CountingBloom::builder(&key)
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .shards(3);
        if recorded {
            builder = builder.retry(Retry::for_duration(Duration::from_secs(5)));
        }
        let bloom = builder.build(conn.clone()).unwrap();
        bloom.add_many(&items("old", 300)).await.unwrap();
        let shards = shard_keys(&mut conn, &key).await;
        assert_eq!(shards.len(), 3, "{what}: {shards:?}");
        del(&mut conn, &shards[0]).await;
        let new = items("absent", 50);
        assert_lost(&what, bloom.add_many_if_absent(&new).await, &shards[0]);
        assert!(!exists(&mut conn, &shards[0]).await, "{what}: made again");
    }
}

/// Garbage in a record slot's epoch (`e`) is no Lua error: a first attempt starts the slot
/// again (issue 51 point 5: `user_script:185: attempt to compare number with nil`).
#[tokio::test]
async fn a_record_slot_holding_garbage_is_started_again() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("garbage-record");
    let bloom = native(&conn, &key, true);
    assert!(bloom.add("a").await.unwrap());
    let rings = common::keys_like(
        &mut conn,
        &format!("{{{key}}}:redbloom:{}:{key}:once:*", key.len()),
    )
    .await;
    assert!(!rings.is_empty(), "a recorded add makes a ring slot");
    for ring in &rings {
        let _: () = redis::cmd("HSET")
            .arg(ring)
            .arg("e")
            .arg("garbage")
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    assert!(bloom.add("b").await.unwrap());
    assert!(!bloom.add("a").await.unwrap());
    assert!(bloom.exists("b").await.unwrap());
}
