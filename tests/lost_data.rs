//! Lost data is an error, not "absent" (SPEC.md §3): a filter whose stored parameters say its
//! keys exist, but whose key (or shard) is gone — evicted, deleted by hand — fails its checks
//! with `Error::Lost` naming the key, for the native layout and the counting, growing and
//! window kinds, one key or sharded. A filter that merely has nothing yet (new, after `check_params`, cleared, sharded
//! with items in one shard only) still answers "absent"; a go-zero layout filter keeps SPEC §1
//! (a missing key is an empty filter).

mod common;

use redbloom::kind::Kind;
use redbloom::{
    Bloom, CountingBloom, Error, GrowingBloom, Layout, NearCache, RedisBloom, WindowBloom,
};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

async fn del(conn: &mut MultiplexedConnection, key: &str) {
    let deleted: i64 = redis::cmd("DEL").arg(key).query_async(conn).await.unwrap();
    assert_eq!(deleted, 1, "{key} existed");
}

/// The filter's bit (or counter) keys: the bare name for one key, each shard's otherwise.
async fn part_keys<K: Kind>(
    conn: &mut MultiplexedConnection,
    bloom: &Bloom<MultiplexedConnection, K>,
) -> Vec<String> {
    match bloom.shards() {
        1 => vec![bloom.key().to_owned()],
        shards => {
            let keys = common::keys_like(conn, &format!("*}}:{}:shard:*", bloom.key())).await;
            assert_eq!(keys.len(), shards as usize, "every shard made: {keys:?}");
            keys
        }
    }
}

#[track_caller]
fn assert_lost<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, key: &str) {
    match result {
        Err(err @ Error::Lost { .. }) => {
            let Error::Lost { key: got, .. } = &err else {
                unreachable!()
            };
            assert_eq!(got, key, "{what}: {err}");
            assert!(err.to_string().contains("gone"), "{what}: {err}");
        }
        other => panic!("{what}: expected Error::Lost for {key}, got {other:?}"),
    }
}

fn native(
    conn: &MultiplexedConnection,
    name: &str,
    shards: u32,
) -> RedisBloom<MultiplexedConnection> {
    native_at(conn, &common::unique_key(name), shards)
}

/// The native filter at `key` (another handle on one made by [`native`]).
fn native_at(
    conn: &MultiplexedConnection,
    key: &str,
    shards: u32,
) -> RedisBloom<MultiplexedConnection> {
    RedisBloom::builder(key)
        .layout(Layout::Native)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(shards)
        .build(conn.clone())
        .unwrap()
}

fn counting(
    conn: &MultiplexedConnection,
    name: &str,
    shards: u32,
) -> CountingBloom<MultiplexedConnection> {
    CountingBloom::builder(common::unique_key(name))
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(shards)
        .build(conn.clone())
        .unwrap()
}

fn growing(
    conn: &MultiplexedConnection,
    name: &str,
    shards: u32,
) -> GrowingBloom<MultiplexedConnection> {
    GrowingBloom::builder(common::unique_key(name))
        .expected_items(100)
        .false_positive_rate(0.01)
        .shards(shards)
        .build(conn.clone())
        .unwrap()
}

/// A growing filter's level keys, per part: its counts (a hash) and its segments.
async fn growing_keys(
    conn: &mut MultiplexedConnection,
    bloom: &GrowingBloom<MultiplexedConnection>,
) -> (Vec<String>, Vec<String>) {
    let keys = common::keys_like(conn, &format!("*:redbloom:*{}*:grow:*", bloom.key())).await;
    let segment = |key: &String| {
        key.rsplit_once(":grow:")
            .is_some_and(|(_, rest)| rest.contains(':'))
    };
    keys.into_iter().partition(|key| !segment(key))
}

fn window(
    conn: &MultiplexedConnection,
    name: &str,
    window: Duration,
    shards: u32,
) -> WindowBloom<MultiplexedConnection> {
    WindowBloom::builder(common::unique_key(name), window)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .shards(shards)
        .build(conn.clone())
        .unwrap()
}

/// A window filter's generation keys, named by their epoch (not its record rings, beside
/// them).
async fn generation_keys(
    conn: &mut MultiplexedConnection,
    bloom: &WindowBloom<MultiplexedConnection>,
) -> Vec<String> {
    let keys = common::keys_like(conn, &format!("*:redbloom:*{}*:gen:*", bloom.key())).await;
    keys.into_iter()
        .filter(|k| {
            k.rsplit(':')
                .next()
                .is_some_and(|e| e.parse::<i64>().is_ok())
        })
        .collect()
}

fn items(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("item:{i}")).collect()
}

#[tokio::test]
async fn a_native_filter_whose_bits_are_gone_fails_its_checks() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for shards in [1, 3] {
        let bloom = native(&conn, "lost-native", shards);
        let all = items(300);
        bloom.add_many(&all).await.unwrap();
        let parts = part_keys(&mut conn, &bloom).await;
        del(&mut conn, &parts[0]).await;
        let what = format!("{shards} shard(s)");
        // Every item of the vanished part: one at a time and as a batch.
        let gone: Vec<&String> = {
            let answers = bloom.exists_many(&all).await;
            assert_lost(&what, answers, &parts[0]);
            let mut gone = Vec::new();
            for item in &all {
                match bloom.exists(item).await {
                    Ok(present) => assert!(present, "{what}: {item} answered absent"),
                    Err(err) => {
                        assert_lost(&what, Err::<(), _>(err), &parts[0]);
                        gone.push(item);
                    }
                }
            }
            gone
        };
        assert!(!gone.is_empty(), "{what}: items lived in the deleted part");
        // A fresh handle (nothing learned) says the same.
        let again = native_at(&conn, bloom.key(), shards);
        assert_lost(&what, again.exists(gone[0]).await, &parts[0]);
        // Clearing starts again: absent, no error.
        bloom.clear().await.unwrap();
        assert!(!bloom.exists(gone[0]).await.unwrap(), "{what}: cleared");
    }
}

#[tokio::test]
async fn a_counting_filter_whose_counters_are_gone_fails_checks_and_removals() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for shards in [1, 3] {
        let bloom = counting(&conn, "lost-counting", shards);
        let all = items(300);
        bloom.add_many(&all).await.unwrap();
        let parts = part_keys(&mut conn, &bloom).await;
        del(&mut conn, &parts[0]).await;
        let what = format!("{shards} shard(s)");
        assert_lost(&what, bloom.exists_many(&all).await, &parts[0]);
        assert_lost(&what, bloom.remove_many(&all).await, &parts[0]);
    }
}

/// A growing filter: a segment gone under the counts that name its levels fails checks (one at
/// a time, and as a batch read whole), as do counts gone under a filter of one key's stored
/// parameters.
#[tokio::test]
async fn a_growing_filter_whose_levels_are_gone_fails_its_checks() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for shards in [1, 3] {
        let what = format!("{shards} shard(s)");
        let bloom = growing(&conn, "lost-growing", shards);
        let all = items(1_000);
        bloom.add_many(&all).await.unwrap();
        let (counts, segments) = growing_keys(&mut conn, &bloom).await;
        assert_eq!(counts.len(), shards as usize, "{what}: {counts:?}");
        let levels: usize = redis::cmd("HLEN")
            .arg(&counts[0])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(levels > 1, "{what}: levels made");
        assert!(segments.len() >= shards as usize, "{what}: {segments:?}");
        let gone = &segments[0];
        del(&mut conn, gone).await;
        assert_lost(&what, bloom.exists_many(&all).await, gone);
        let mut lost = 0;
        for item in &all[..200] {
            match bloom.exists(item).await {
                Ok(present) => assert!(present, "{what}: {item} answered absent"),
                Err(err) => {
                    assert_lost(&what, Err::<(), _>(err), gone);
                    lost += 1;
                }
            }
        }
        assert!(lost > 0, "{what}: items lived in the deleted segment");
        bloom.clear().await.unwrap();
        assert!(!bloom.exists(&all[0]).await.unwrap(), "{what}: cleared");
    }
    // Counts and segments gone, the parameters left: a filter of one key lost them all.
    let bloom = growing(&conn, "lost-growing-counts", 1);
    bloom.add_many(&items(300)).await.unwrap();
    let (counts, segments) = growing_keys(&mut conn, &bloom).await;
    for key in segments.iter().chain(&counts) {
        del(&mut conn, key).await;
    }
    assert_lost("counts gone", bloom.exists("item:1").await, &counts[0]);
    assert_lost(
        "counts gone",
        bloom.exists_many(&items(300)).await,
        &counts[0],
    );
    // The near cache's copy is read with the same witness: a new copy of a filter whose
    // segment is gone is not taken for an empty one.
    let bloom = GrowingBloom::builder(common::unique_key("lost-growing-near"))
        .expected_items(100)
        .false_positive_rate(0.01)
        .near_cache(redbloom::NearCache::new(Duration::from_secs(60)))
        .build(conn.clone())
        .unwrap();
    bloom.add_many(&items(300)).await.unwrap();
    let (_, segments) = growing_keys(&mut conn, &bloom).await;
    del(&mut conn, &segments[0]).await;
    assert_lost("near cache", bloom.exists("item:1").await, &segments[0]);
}

/// A window filter: a live generation deleted by hand (its ledger lists it) fails checks, one
/// item at a time (the per-item script) and as a batch (the dense read), for a fresh handle too;
/// a generation that leaves the window by itself does not, nor does a cleared filter.
#[tokio::test]
async fn a_window_filter_whose_generation_is_gone_fails_its_checks() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for shards in [1, 3] {
        let what = format!("{shards} shard(s)");
        let bloom = window(&conn, "lost-window", Duration::from_secs(60), shards);
        let all = items(300);
        bloom.add_many(&all).await.unwrap();
        let generations = generation_keys(&mut conn, &bloom).await;
        assert_eq!(
            generations.len(),
            shards as usize,
            "{what}: {generations:?}"
        );
        del(&mut conn, &generations[0]).await;
        assert_lost(&what, bloom.exists_many(&all).await, &generations[0]);
        let mut gone = Vec::new();
        for item in &all {
            match bloom.exists(item).await {
                Ok(present) => assert!(present, "{what}: {item} answered absent"),
                Err(err) => {
                    assert_lost(&what, Err::<(), _>(err), &generations[0]);
                    gone.push(item);
                }
            }
        }
        assert!(
            !gone.is_empty(),
            "{what}: items lived in the deleted generation"
        );
        let again = WindowBloom::builder(bloom.key(), Duration::from_secs(60))
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .shards(shards)
            .build(conn.clone())
            .unwrap();
        assert_lost(&what, again.exists(gone[0]).await, &generations[0]);
        bloom.clear().await.unwrap();
        assert!(!bloom.exists(gone[0]).await.unwrap(), "{what}: cleared");
        assert!(
            !bloom.exists_many(&all).await.unwrap()[0],
            "{what}: cleared"
        );
    }
    // Generations that leave the window by themselves are not lost: a window of 1 s (over 4
    // generations) forgets an item within 1.34 s.
    let short = window(&conn, "left-window", Duration::from_secs(1), 1);
    short.add("x").await.unwrap();
    let since = std::time::Instant::now();
    while short.exists("x").await.unwrap() {
        assert!(since.elapsed().as_secs() < 10, "x never left the window");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!short.exists_many(&items(300)).await.unwrap()[0]);
    // Nor are generations that go with the filter's TTL (`expire`, shorter than the window).
    let expiring = window(&conn, "expired-window", Duration::from_secs(60), 1);
    expiring.add_many(&items(300)).await.unwrap();
    expiring.expire(Duration::from_secs(2)).await.unwrap();
    let since = std::time::Instant::now();
    while expiring.exists("item:1").await.unwrap() {
        assert!(since.elapsed().as_secs() < 10, "the TTL never ran out");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!expiring.exists_many(&items(300)).await.unwrap()[0]);
}

/// A near cache's copy is read whole: a part gone under the stored parameters (native,
/// counting, a window's listed generation) fails the read that would make the copy, instead of
/// a copy that answers "absent"; an empty filter's copy is read as before.
#[tokio::test]
async fn a_near_cache_copy_of_a_lost_filter_is_not_made() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let near = || NearCache::new(Duration::from_secs(30));
    for shards in [1, 3] {
        let what = format!("{shards} shard(s)");
        let all = items(300);

        let bloom = native(&conn, "lost-near-native", shards);
        let cached = RedisBloom::builder(bloom.key())
            .layout(Layout::Native)
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .shards(shards)
            .near_cache(near())
            .build(conn.clone())
            .unwrap();
        assert!(!cached.exists("item:1").await.unwrap(), "{what}: empty");
        bloom.add_many(&all).await.unwrap();
        let parts = part_keys(&mut conn, &bloom).await;
        del(&mut conn, &parts[0]).await;
        let cached = RedisBloom::builder(bloom.key())
            .layout(Layout::Native)
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .shards(shards)
            .near_cache(near())
            .build(conn.clone())
            .unwrap();
        assert_lost(&what, cached.exists("item:1").await, &parts[0]);

        let counts = counting(&conn, "lost-near-counting", shards);
        counts.add_many(&all).await.unwrap();
        let parts = part_keys(&mut conn, &counts).await;
        del(&mut conn, &parts[0]).await;
        let cached = CountingBloom::builder(counts.key())
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .shards(shards)
            .near_cache(near())
            .build(conn.clone())
            .unwrap();
        assert_lost(&what, cached.exists("item:1").await, &parts[0]);

        let recent = window(&conn, "lost-near-window", Duration::from_secs(60), shards);
        let shared = conn.clone();
        let cached = || {
            WindowBloom::builder(recent.key(), Duration::from_secs(60))
                .expected_items(1_000)
                .false_positive_rate(0.01)
                .shards(shards)
                .near_cache(near())
                .build(shared.clone())
                .unwrap()
        };
        assert!(!cached().exists("item:1").await.unwrap(), "{what}: empty");
        recent.add_many(&all).await.unwrap();
        assert!(cached().exists("item:1").await.unwrap(), "{what}: added");
        let generations = generation_keys(&mut conn, &recent).await;
        del(&mut conn, &generations[0]).await;
        assert_lost(&what, cached().exists("item:1").await, &generations[0]);
    }
}

/// Filters that are empty, not lost: new, parameters stored without items, items in one shard
/// only, cleared; and go-zero's layout, whose missing key is an empty filter.
#[tokio::test]
async fn an_empty_filter_is_not_a_lost_one() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    for shards in [1, 3] {
        let what = format!("{shards} shard(s)");
        let bloom = native(&conn, "empty-native", shards);
        assert!(!bloom.exists("x").await.unwrap(), "{what}: new");
        bloom.check_params().await.unwrap();
        assert!(!bloom.exists("x").await.unwrap(), "{what}: parameters only");
        // One item: one shard written; the others are made with the parameters.
        bloom.add("one").await.unwrap();
        let absent = bloom.exists_many(&items(200)).await.unwrap();
        assert!(absent.iter().filter(|&&p| p).count() < 10, "{what}");
        assert!(bloom.clear().await.unwrap());
        assert!(!bloom.exists("one").await.unwrap(), "{what}: cleared");
        // Cleared by another client after this one stored its parameters: its next write
        // stores them again, and makes the shards it did not write.
        bloom.add("before").await.unwrap();
        let other = native_at(&conn, bloom.key(), shards);
        assert!(other.clear().await.unwrap());
        bloom.add("after").await.unwrap();
        let absent = bloom.exists_many(&items(200)).await.unwrap();
        assert!(
            absent.iter().filter(|&&p| p).count() < 10,
            "{what}: after a clear"
        );

        let counts = counting(&conn, "empty-counting", shards);
        assert!(!counts.exists("x").await.unwrap(), "{what}: new");
        assert!(!counts.remove("x").await.unwrap(), "{what}: new");
        counts.add("one").await.unwrap();
        assert!(counts.remove("one").await.unwrap(), "{what}");
        assert!(!counts.exists_many(&items(200)).await.unwrap()[0], "{what}");

        let grows = growing(&conn, "empty-growing", shards);
        assert!(!grows.exists("x").await.unwrap(), "{what}: new");
        assert!(
            !grows.exists_many(&items(500)).await.unwrap()[0],
            "{what}: new"
        );
        grows.add("one").await.unwrap();
        let absent = grows.exists_many(&items(500)).await.unwrap();
        assert!(absent.iter().filter(|&&p| p).count() < 20, "{what}");
        assert!(grows.clear().await.unwrap());
        assert!(!grows.exists("one").await.unwrap(), "{what}: cleared");
    }
    // go-zero's layout: a Go service may delete its key; it is then empty.
    let mut conn = conn;
    let go = RedisBloom::builder(common::unique_key("lost-gozero"))
        .bits(1 << 16)
        .build(conn.clone())
        .unwrap();
    go.add("x").await.unwrap();
    del(&mut conn, go.key()).await;
    assert!(!go.exists("x").await.unwrap());
}

/// What the check costs: a filter in use answers "absent" from bits it read, some of them set,
/// which prove its key is there; no `EXISTS` is sent. Only when every bit read is clear (a
/// filter nearly empty, or gone) is the key asked for.
#[tokio::test]
async fn a_check_that_sees_a_bit_set_asks_nothing_more() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    for shards in [1, 3] {
        let bloom = native(&conn, "lost-cost", shards);
        // Nearly empty: the absent items' bits are all clear, so the key is asked for.
        bloom.add("only").await.unwrap();
        let before = common::calls(&mut conn, "exists").await;
        assert!(!bloom.exists("absent:0").await.unwrap());
        assert!(
            common::calls(&mut conn, "exists").await > before,
            "{shards}: asked"
        );
        // In use (at its capacity, about half its bits set): an absent item finds all of its
        // 7 bits clear about once in 128 checks; nothing more is asked otherwise.
        let many: Vec<String> = (0..10_000).map(|i| format!("in:{i}")).collect();
        bloom.add_many(&many).await.unwrap();
        let before = common::calls(&mut conn, "exists").await;
        for i in 0..100 {
            bloom.exists(format!("absent:{i}")).await.unwrap();
        }
        let asked = common::calls(&mut conn, "exists").await - before;
        assert!(asked <= 5, "{shards} shard(s): {asked} of 100 checks asked");

        // A growing filter: a word read that is not zero proves its segment is there.
        let grows = growing(&conn, "lost-cost-growing", shards);
        grows.add_many(&many).await.unwrap();
        let before = common::calls(&mut conn, "exists").await;
        for i in 0..100 {
            grows.exists(format!("absent:{i}")).await.unwrap();
        }
        let asked = common::calls(&mut conn, "exists").await - before;
        assert!(
            asked <= 5,
            "growing, {shards} shard(s): {asked} of 100 checks asked"
        );
    }
}
