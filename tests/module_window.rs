//! Windows over module filters (SPEC.md §7): G module filters, one per generation of the
//! server's clock, against a private `redis-server` with RedisBloom loaded
//! (tests/common/module.rs), with real time and short windows: the boundaries of the
//! guarantee, "new" exactly once across generations, each generation's expiry from its
//! creation, lost generations, mismatches, info, clear, expire, shards and snapshots.

mod common;

use common::keys_like;
use common::module::{redis_with_bloom, redis_without_bloom};
use redbloom::{
    Error, ImportMode, KeyTtl, ModuleBloom, SectionHeader, SnapshotError, SnapshotReader,
};
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const W: Duration = Duration::from_secs(2);
const G: u32 = 4;

fn windowed(key: &str) -> redbloom::Builder<redbloom::kind::Module> {
    ModuleBloom::builder(key)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .window(W)
        .generations(G)
}

/// The epoch of the server's time `ms` (W over G generations).
fn epoch(ms: u64) -> u64 {
    ms * u64::from(G - 1) / W.as_millis() as u64
}

/// Waits (bounded) until the server's clock enters the next generation.
async fn next_generation(conn: &mut MultiplexedConnection) {
    let start = epoch(common::server_ms(conn).await);
    for _ in 0..200 {
        if epoch(common::server_ms(conn).await) > start {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server's clock did not reach the next generation in 2 s");
}

async fn generations(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    keys_like(conn, &format!("{}*", common::companion(key, "gen:"))).await
}

async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

#[tokio::test]
async fn add_exists_info_clear_expire() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-basics");
    let mut conn = redis.connection().await;
    let recent = &windowed(&key).build(conn.clone()).unwrap();
    assert_eq!((recent.window(), recent.generations()), (Some(W), Some(G)));
    // Within one generation (of 667 ms): an add again in the next one adds the item to it too,
    // and `info` counts it twice.
    let (answers, many, found, counted) = common::within_one_epoch(
        conn.clone(),
        epoch,
        || async move {
            let answers = [
                recent.exists("a").await.unwrap(),
                recent.add("a").await.unwrap(),
                recent.add("a").await.unwrap(),
                recent.exists("a").await.unwrap(),
            ];
            let many = recent.add_many(&["b", "a", "b", "c"]).await.unwrap();
            let found = recent.exists_many(&["a", "b", "c", "d"]).await.unwrap();
            (answers, many, found, recent.info().await.unwrap().items)
        },
        || async move {
            recent.clear().await.unwrap();
        },
    )
    .await;
    assert_eq!(
        answers,
        [false, true, false, true],
        "absent, new, not new, present"
    );
    assert_eq!(
        many,
        [true, false, false, true],
        "a repeated item is new at its first occurrence only"
    );
    assert_eq!(found, [true, true, true, false]);
    assert_eq!(counted, 3);
    // Each generation is a module filter with its expiry from the step that made it.
    let made = generations(&mut conn, &key).await;
    assert!(!made.is_empty());
    for generation in &made {
        let kind: String = redis::cmd("TYPE")
            .arg(generation)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(kind, "MBbloom--", "{generation}");
        let left = pttl(&mut conn, generation).await;
        assert!(
            left > 0 && left <= (W * G / (G - 1)).as_millis() as i64,
            "{generation}: {left}"
        );
    }
    assert!(
        !common::key_exists(&mut conn, &key).await,
        "the bare key stays free"
    );
    let info = recent.info().await.unwrap();
    assert!(info.capacity >= 10_000 && info.bytes > 0, "{info:?}");
    assert!(
        matches!(info.ttl, KeyTtl::Expires(ttl) if ttl <= W * G / (G - 1)),
        "the parameters expire with the newest generation: {:?}",
        info.ttl
    );

    assert!(recent.expire(Duration::from_secs(100)).await.unwrap());
    let info = recent.info().await.unwrap();
    assert!(matches!(info.ttl, KeyTtl::Expires(t) if t > Duration::from_secs(90)));
    for generation in &made {
        let left = pttl(&mut conn, generation).await;
        assert!(left > 0 && left <= 100_000, "{generation}: {left}");
    }
    assert!(recent.clear().await.unwrap());
    assert!(keys_like(&mut conn, &format!("{{{key}}}:*"))
        .await
        .is_empty());
    assert!(!recent.exists("a").await.unwrap());
    assert!(!recent.clear().await.unwrap(), "nothing left to clear");
    assert!(recent.add("a").await.unwrap(), "new again after a clear");
    recent.clear().await.unwrap();
}

/// Every item is found until W after its add, and absent from W·G/(G-1) on, by the server's
/// clock; for single adds and batches made at several moments.
#[tokio::test]
async fn items_live_exactly_as_long_as_the_window_says() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-bounds");
    let mut conn = redis.connection().await;
    let recent = windowed(&key).build(conn.clone()).unwrap();
    let forget_ms = (W.as_millis() as u64) * u64::from(G) / u64::from(G - 1);
    // (server time before the add, after it, items)
    let mut added: Vec<(u64, u64, Vec<String>)> = Vec::new();
    for round in 0..6 {
        let items: Vec<String> = (0..50).map(|i| format!("{round}-{i}")).collect();
        let before = common::server_ms(&mut conn).await;
        if round % 2 == 0 {
            assert!(recent.add_many(&items).await.unwrap().iter().all(|&n| n));
        } else {
            for item in &items {
                assert!(recent.add(item).await.unwrap());
            }
        }
        let after = common::server_ms(&mut conn).await;
        added.push((before, after, items));
        tokio::time::sleep(Duration::from_millis(230)).await;
    }
    let (mut early_checks, mut late_checks) = (0, 0);
    let deadline = added.last().unwrap().1 + forget_ms + 300;
    loop {
        for (before, after, items) in &added {
            let start = common::server_ms(&mut conn).await;
            let mut found = recent.exists_many(items).await.unwrap();
            found.push(recent.exists(&items[7]).await.unwrap());
            let end = common::server_ms(&mut conn).await;
            if end < before + W.as_millis() as u64 {
                early_checks += 1;
                assert!(
                    found.iter().all(|&f| f),
                    "an item added at {before}..{after} was missing at {start}..{end}, \
                     within the window"
                );
            }
            if start >= after + forget_ms {
                late_checks += 1;
                assert!(
                    found.iter().all(|&f| !f),
                    "an item added at {before}..{after} was still found at {start}, past \
                     W·G/(G-1)"
                );
            }
        }
        if common::server_ms(&mut conn).await > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(
        early_checks > 20 && late_checks > 5,
        "{early_checks} {late_checks}"
    );
    // And the generations went away by themselves.
    for _ in 0..100 {
        if generations(&mut conn, &key).await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "expired generations linger: {:?}",
        generations(&mut conn, &key).await
    );
}

/// An item added in one generation is not new in the next one (it is only in an older
/// generation then), for single adds and batches; the new generation is made with its own
/// expiry.
#[tokio::test]
async fn new_exactly_once_across_generations() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-once");
    let mut conn = redis.connection().await;
    let recent = windowed(&key).build(conn.clone()).unwrap();
    next_generation(&mut conn).await;
    assert!(recent.add("x").await.unwrap());
    assert_eq!(recent.add_many(&["y", "z"]).await.unwrap(), [true, true]);
    assert_eq!(generations(&mut conn, &key).await.len(), 1);
    next_generation(&mut conn).await;
    assert!(
        !recent.add("x").await.unwrap(),
        "x is in an older generation"
    );
    assert_eq!(
        recent.add_many(&["y", "w", "w", "z"]).await.unwrap(),
        [false, true, false, false]
    );
    let made = generations(&mut conn, &key).await;
    assert_eq!(made.len(), 2, "{made:?}");
    for generation in &made {
        assert!(pttl(&mut conn, generation).await > 0, "{generation}");
    }
    // The newest generation holds the items added again: BF.EXISTS sees them there.
    let newest = made
        .iter()
        .max_by_key(|k| k.rsplit(':').next().unwrap().parse::<i64>().unwrap())
        .unwrap();
    let found: Vec<i64> = redis::cmd("BF.MEXISTS")
        .arg(newest)
        .arg(&["x", "y", "z", "w"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(found, [1, 1, 1, 1]);
}

/// Concurrent adds of one item from several clients: exactly one is new.
#[tokio::test]
async fn concurrent_adds_say_new_once() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-concurrent");
    let mut handles = Vec::new();
    for _ in 0..4 {
        let conn = redis.connection().await;
        let recent = windowed(&key).build(conn).unwrap();
        handles.push(tokio::spawn(async move {
            let items: Vec<String> = (0..200).map(|i| format!("item-{i}")).collect();
            recent.add_many(&items).await.unwrap()
        }));
    }
    let mut news = vec![0; 200];
    for handle in handles {
        for (i, new) in handle.await.unwrap().into_iter().enumerate() {
            news[i] += usize::from(new);
        }
    }
    assert!(news.iter().all(|&n| n == 1), "{news:?}");
}

/// A live generation deleted by hand is lost data, not "absent".
#[tokio::test]
async fn a_deleted_live_generation_is_lost() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-lost");
    let mut conn = redis.connection().await;
    let recent = windowed(&key).build(conn.clone()).unwrap();
    recent.add("a").await.unwrap();
    let made = generations(&mut conn, &key).await;
    assert_eq!(made.len(), 1);
    let _: i64 = redis::cmd("DEL")
        .arg(&made[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = recent.exists("a").await.unwrap_err();
    assert!(
        matches!(&err, Error::Lost { key: lost, .. } if *lost == made[0]),
        "{err}"
    );
    let err = recent.exists_many(&["a", "b"]).await.unwrap_err();
    assert!(matches!(err, Error::Lost { .. }), "{err}");
    recent.clear().await.unwrap();
}

/// The epoch of the server's time `ms` over `generations` generations of the window W.
fn epoch_over(ms: u64, generations: u32) -> u64 {
    ms * u64::from(generations - 1) / W.as_millis() as u64
}

/// Waits (bounded: 5 s) until the server's clock reaches epoch `at` over `generations`.
async fn until_epoch(conn: &mut MultiplexedConnection, generations: u32, at: u64) {
    for _ in 0..500 {
        if epoch_over(common::server_ms(conn).await, generations) >= at {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server's clock did not reach epoch {at} in 5 s");
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

async fn export(bloom: &ModuleBloom<MultiplexedConnection>) -> Vec<u8> {
    let mut file = Vec::new();
    let moved = bloom.export(&mut file).await.unwrap();
    assert_eq!(moved.file_bytes, file.len() as u64);
    file
}

/// A file's sections that begin a dump (iterator 1): each generation's header chunk.
async fn dump_headers(file: &[u8]) -> Vec<SectionHeader> {
    let (mut reader, _) = SnapshotReader::open(file).await.unwrap();
    let mut heads = Vec::new();
    while let Some(section) = reader.next_section().await.unwrap() {
        while reader.next_chunk().await.unwrap().is_some() {}
        if section.meta.ends_with(":1") {
            heads.push(section);
        }
    }
    heads
}

/// A window of 2 generations (W = 2 s each) exported from one server while both hold items,
/// imported into another (over a windowed filter that held other items, and under another
/// key): the same answers for the items of both generations and for 2,000 never added, each
/// generation expiring when it does on the first server, no ledger, no staging key left. Once
/// the older generation has left the window, an import restores only the newer (and deletes
/// the generation the file lacks); once both have, the file is refused.
#[tokio::test]
async fn round_trip_between_two_servers() {
    const TWO: u32 = 2;
    let (a, b) = (redis_with_bloom(), redis_with_bloom());
    let key = common::unique_key("module-window-snap");
    let (mut conn_a, mut conn_b) = (a.connection().await, b.connection().await);
    let two = |key: &str| windowed(key).generations(TWO);
    let source = two(&key).build(conn_a.clone()).unwrap();
    let target = two(&key).build(conn_b.clone()).unwrap();
    let (old, new) = (items("old", 200), items("new", 200));
    let (other, absent) = (items("other", 200), items("absent", 2_000));
    let e0 = epoch_over(common::server_ms(&mut conn_a).await, TWO) + 1;
    until_epoch(&mut conn_a, TWO, e0).await;
    source.add_many(&old).await.unwrap();
    target.add_many(&other[..100]).await.unwrap();
    until_epoch(&mut conn_a, TWO, e0 + 1).await;
    source.add_many(&new).await.unwrap();
    target.add_many(&other[100..]).await.unwrap();
    let file = export(&source).await;
    let heads = dump_headers(&file).await;
    let metas: Vec<&str> = heads.iter().map(|h| h.meta.as_str()).collect();
    assert_eq!(
        metas,
        [format!("{}:1", e0 + 1), format!("{e0}:1")],
        "newest first"
    );
    assert!(heads.iter().all(|h| h.ttl_ms.is_some()), "{heads:?}");
    let expected = source.exists_many(&absent).await.unwrap();
    let expected_other = source.exists_many(&other).await.unwrap();
    let made_a = generations(&mut conn_a, &key).await;
    assert_eq!(made_a.len(), 2, "{made_a:?}");

    let copy_key = format!("{key}:copy");
    let copy = two(&copy_key).build(conn_b.clone()).unwrap();
    for (into, into_key) in [(&target, &key), (&copy, &copy_key)] {
        let moved = into.import(&file[..], ImportMode::Replace).await.unwrap();
        assert_eq!(moved.file_bytes, file.len() as u64);
        assert!(into.exists_many(&old).await.unwrap().iter().all(|&f| f));
        assert!(into.exists_many(&new).await.unwrap().iter().all(|&f| f));
        assert_eq!(into.exists_many(&absent).await.unwrap(), expected);
        // The items the filter held before are gone with the generations replaced.
        assert_eq!(into.exists_many(&other).await.unwrap(), expected_other);
        // Each generation expires when it does on the first server.
        for generation in &made_a {
            let there = generation.replacen(
                &common::companion(&key, ""),
                &common::companion(into_key, ""),
                1,
            );
            let (ttl_a, ttl_b) = (
                pttl(&mut conn_a, generation).await,
                pttl(&mut conn_b, &there).await,
            );
            assert!(ttl_a > 0 && (ttl_a - ttl_b).abs() < 300, "{ttl_a} {ttl_b}");
        }
        assert_eq!(generations(&mut conn_b, into_key).await.len(), 2);
        let ledger = keys_like(
            &mut conn_b,
            &format!("{}*", common::companion(into_key, "made:")),
        )
        .await;
        assert!(
            ledger.is_empty(),
            "an import's generations are not listed: {ledger:?}"
        );
        let staging = keys_like(&mut conn_b, &format!("*{into_key}*import*")).await;
        assert!(staging.is_empty(), "{staging:?}");
    }
    // The imported filter is this client's: it adds, and says "seen" for the file's items.
    assert!(!target.add(&new[0]).await.unwrap());
    assert!(target.add("after").await.unwrap());

    // The older generation has left the window: only the newer one is restored.
    until_epoch(&mut conn_a, TWO, e0 + 2).await;
    let later_key = format!("{key}:later");
    let later = two(&later_key).build(conn_b.clone()).unwrap();
    // It held items in a generation the file lacks: that generation is deleted.
    later.add_many(&other).await.unwrap();
    later.import(&file[..], ImportMode::Replace).await.unwrap();
    let restored = generations(&mut conn_b, &later_key).await;
    assert_eq!(restored.len(), 1, "{restored:?}");
    assert!(
        restored[0].ends_with(&format!(":{}", e0 + 1)),
        "{restored:?}"
    );
    assert!(pttl(&mut conn_b, &restored[0]).await > 0);
    assert!(later.exists_many(&new).await.unwrap().iter().all(|&f| f));
    for forgotten in [&old, &other] {
        let found = later.exists_many(forgotten).await.unwrap();
        let found = found.iter().filter(|&&f| f).count();
        assert!(found <= 2, "{found} of {:?}… found", forgotten[0]);
    }

    // Both have: the file is refused, nothing written.
    until_epoch(&mut conn_a, TWO, e0 + 3).await;
    let gone_key = format!("{key}:gone");
    let gone = two(&gone_key).build(conn_b.clone()).unwrap();
    let err = gone
        .import(&file[..], ImportMode::Replace)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Snapshot(SnapshotError::Expired { .. })),
        "{err}"
    );
    assert!(keys_like(&mut conn_b, &format!("*{gone_key}*"))
        .await
        .is_empty());
}

/// A sharded window's snapshot: every shard's generations back, each expiring.
#[tokio::test]
async fn sharded_round_trip() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-snap-shards");
    let mut conn = redis.connection().await;
    let source = windowed(&key).shards(3).build(conn.clone()).unwrap();
    let added = items("in", 300);
    source.add_many(&added).await.unwrap();
    let file = export(&source).await;
    let copy_key = format!("{key}:copy");
    let copy = windowed(&copy_key).shards(3).build(conn.clone()).unwrap();
    copy.import(&file[..], ImportMode::Replace).await.unwrap();
    assert!(copy.exists_many(&added).await.unwrap().iter().all(|&f| f));
    let absent = items("out", 1_000);
    assert_eq!(
        copy.exists_many(&absent).await.unwrap(),
        source.exists_many(&absent).await.unwrap()
    );
    let made = keys_like(&mut conn, &format!("*:redbloom:*{copy_key}*:gen:*")).await;
    assert!(made.len() >= 3, "{made:?}");
    for generation in &made {
        assert!(pttl(&mut conn, generation).await > 0, "{generation}");
    }
}

/// A merge, a file of another window, a file of a module filter without a window into a
/// windowed one and the reverse, and a file into a key whose filter has another window: each
/// refused, nothing written.
#[tokio::test]
async fn snapshot_mismatches_and_merges_are_refused() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let source = windowed(&common::unique_key("module-window-snap-src"))
        .build(conn.clone())
        .unwrap();
    source.add_many(&items("in", 100)).await.unwrap();
    let file = export(&source).await;
    let flat_key = common::unique_key("module-window-snap-flat");
    let flat = ModuleBloom::builder(flat_key.clone())
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    flat.add("f").await.unwrap();
    let flat_file = export(&flat).await;
    let key = common::unique_key("module-window-snap-into");
    let target = windowed(&key).build(conn.clone()).unwrap();
    target.add("old").await.unwrap();
    // The file's parameters, but the filter at the key has another window.
    let taken = common::unique_key("module-window-snap-taken");
    let three = windowed(&taken).window(Duration::from_secs(3));
    three.build(conn.clone()).unwrap().add("x").await.unwrap();
    let same = windowed(&taken).build(conn.clone()).unwrap();
    let before = common::keyspace(&mut conn).await;

    let err = target.import(&file[..], ImportMode::Merge).await;
    assert!(matches!(err, Err(Error::InvalidConfig(_))), "{err:?}");
    for other in [
        windowed(&key).window(Duration::from_secs(3)),
        windowed(&key).generations(5),
    ] {
        let other = other.build(conn.clone()).unwrap();
        let err = other.import(&file[..], ImportMode::Replace).await;
        assert!(matches!(err, Err(Error::FileMismatch { .. })), "{err:?}");
    }
    let err = target.import(&flat_file[..], ImportMode::Replace).await;
    assert!(matches!(err, Err(Error::FileMismatch { .. })), "{err:?}");
    let err = flat.import(&file[..], ImportMode::Replace).await;
    assert!(matches!(err, Err(Error::FileMismatch { .. })), "{err:?}");
    let err = same.import(&file[..], ImportMode::Replace).await;
    assert!(matches!(err, Err(Error::ParamsMismatch { .. })), "{err:?}");
    assert_eq!(common::keyspace(&mut conn).await, before);
}

/// Other parameters, a filter without a window, a window over a filter without one: refused,
/// nothing written.
#[tokio::test]
async fn mismatches_are_refused() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-mismatch");
    let mut conn = redis.connection().await;
    let recent = windowed(&key).build(conn.clone()).unwrap();
    recent.add("a").await.unwrap();
    let before = keys_like(&mut conn, &format!("{{{key}}}:*")).await;
    let others = [
        windowed(&key).window(Duration::from_secs(3)),
        windowed(&key).generations(5),
        windowed(&key).expected_items(20_000),
        ModuleBloom::builder(key.clone())
            .expected_items(10_000)
            .false_positive_rate(0.01),
    ];
    for other in others {
        let other = other.build(conn.clone()).unwrap();
        let err = other.add("b").await.unwrap_err();
        assert!(matches!(err, Error::ParamsMismatch { .. }), "{err}");
        let err = other.exists("a").await.unwrap_err();
        assert!(matches!(err, Error::ParamsMismatch { .. }), "{err}");
    }
    assert_eq!(keys_like(&mut conn, &format!("{{{key}}}:*")).await, before);
    assert!(!common::key_exists(&mut conn, &key).await);

    // A module filter without a window at the key (another client's): a window is refused.
    let plain = common::unique_key("module-window-over-plain");
    let _: bool = redis::cmd("BF.ADD")
        .arg(&plain)
        .arg("a")
        .query_async(&mut conn)
        .await
        .unwrap();
    let over = windowed(&plain).build(conn.clone()).unwrap();
    let err = over.add("b").await.unwrap_err();
    assert!(matches!(err, Error::ParamsMismatch { .. }), "{err}");
    assert!(generations(&mut conn, &plain).await.is_empty());
    assert!(windowed(&key).generations(1).build(conn.clone()).is_err());
    assert!(ModuleBloom::builder("k")
        .expected_items(10)
        .false_positive_rate(0.01)
        .generations(4)
        .validate()
        .is_err());
}

/// A windowed filter over shards: answers as one, every generation expiring.
#[tokio::test]
async fn sharded_windows() {
    let redis = redis_with_bloom();
    let key = common::unique_key("module-window-shards");
    let mut conn = redis.connection().await;
    let recent = &windowed(&key).shards(3).build(conn.clone()).unwrap();
    let items = &(0..300).map(|i| format!("s-{i}")).collect::<Vec<_>>();
    // Within one generation (of 667 ms): an add again in the next one adds the item to it too,
    // and `info` counts it twice.
    let (first, again, found, counted) = common::within_one_epoch(
        conn.clone(),
        epoch,
        || async move {
            let first = recent.add_many(items).await.unwrap();
            let again = recent.add_many(items).await.unwrap();
            let found = recent.exists_many(items).await.unwrap();
            (first, again, found, recent.info().await.unwrap().items)
        },
        || async move {
            recent.clear().await.unwrap();
        },
    )
    .await;
    assert!(first.iter().all(|&n| n));
    assert!(again.iter().all(|&n| !n));
    assert!(found.iter().all(|&f| f));
    assert_eq!(counted, 300);
    let made = keys_like(&mut conn, "*:redbloom:*:gen:*")
        .await
        .into_iter()
        .filter(|k| k.contains(&key))
        .collect::<Vec<_>>();
    assert!(made.len() >= 3, "{made:?}");
    for generation in &made {
        assert!(pttl(&mut conn, generation).await > 0, "{generation}");
    }
    assert!(recent.clear().await.unwrap());
    assert!(!recent.exists_many(items).await.unwrap().iter().any(|&f| f));
}

/// Adds of distinct items from 8 tasks, 60 calls of 20 items each, into a windowed filter
/// (a window of a minute: no item leaves it) while the server is stopped twice for 700 ms
/// with commands in flight (their replies time out, and the retry meets the first attempt's
/// effect): how many were answered new, of 9,600.
async fn new_under_stalls(exact: bool) -> usize {
    let redis = redis_with_bloom();
    let url = redis.private_server_url().unwrap();
    let bloom = ModuleBloom::builder("stalled")
        .expected_items(200_000)
        .false_positive_rate(1e-6)
        .window(Duration::from_secs(60))
        .retry(common::fault_retry())
        .exact_retries(exact)
        .build(common::impatient(&url, Duration::from_millis(150)).await)
        .unwrap();
    let (tasks, calls, per_call) = (8, 60, 20);
    let progress = Arc::new(AtomicUsize::new(0));
    let running: Vec<_> = (0..tasks)
        .map(|task| {
            let (bloom, progress) = (bloom.clone(), progress.clone());
            tokio::spawn(async move {
                let mut new = 0;
                for call in 0..calls {
                    let items: Vec<String> = (0..per_call)
                        .map(|i| format!("exact:{task}:{call}:{i}"))
                        .collect();
                    let answers = bloom.add_many(&items).await.expect("add under stalls");
                    new += answers.iter().filter(|&&n| n).count();
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                new
            })
        })
        .collect();
    let mut redis = redis;
    let server = redis.private_server().unwrap();
    let total = tasks * calls;
    for at in [total / 4, total / 2] {
        while progress.load(Ordering::Relaxed) < at {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        server.pause();
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.resume();
    }
    let mut got = 0;
    for task in running {
        got += task.await.unwrap();
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_means_new_across_retries() {
    assert_eq!(new_under_stalls(true).await, 8 * 60 * 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_exact_answers_a_retried_add_says_seen() {
    let got = new_under_stalls(false).await;
    assert!(
        got < 8 * 60 * 20,
        "the stalls reached no command in flight: {got}"
    );
}

/// A server without the module: every verb of a windowed filter names the commands it lacks,
/// and nothing is written.
#[tokio::test]
async fn a_server_without_the_module_is_missing_commands() {
    let redis = redis_without_bloom();
    let key = common::unique_key("module-window-no-module");
    let mut conn = redis.connection().await;
    let recent = windowed(&key).build(conn.clone()).unwrap();
    let missing = |err: Error| matches!(err, Error::MissingCommands { .. });
    assert!(missing(recent.add("a").await.unwrap_err()));
    assert!(missing(recent.add_many(&["a", "b"]).await.unwrap_err()));
    assert!(missing(recent.exists("a").await.unwrap_err()));
    assert!(missing(recent.info().await.unwrap_err()));
    assert!(missing(recent.clear().await.unwrap_err()));
    assert!(keys_like(&mut conn, "*").await.is_empty());
}

/// A server whose `volatile-*` policy may evict keys with a TTL refuses a windowed filter's
/// writes (its generations carry one), as a window filter's; a module filter without a
/// window writes. `accept_eviction(true)` writes anyway.
#[tokio::test]
async fn a_volatile_policy_refuses_windowed_writes() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    for (name, value) in [("maxmemory", "100mb"), ("maxmemory-policy", "volatile-lru")] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let key = common::unique_key("module-window-evict");
    let recent = windowed(&key).build(conn.clone()).unwrap();
    let err = recent.add("a").await.unwrap_err();
    assert!(matches!(err, Error::Evictable { .. }), "{err}");
    assert!(
        keys_like(&mut conn, "*").await.is_empty(),
        "nothing written"
    );
    let plain = ModuleBloom::builder(common::unique_key("module-no-window-evict"))
        .expected_items(100)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(plain.add("a").await.unwrap());
    let accepted = windowed(&key)
        .accept_eviction(true)
        .build(conn.clone())
        .unwrap();
    assert!(accepted.add("a").await.unwrap());
}

/// A user whose ACL refuses the `BF.*` commands: each verb's error names the command, and
/// nothing is written.
#[tokio::test]
async fn an_acl_without_bf_commands_is_refused_naming_them() {
    let redis = redis_with_bloom();
    let mut admin = redis.connection().await;
    let () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "nobf",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-bf.madd",
            "-bf.mexists",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = redis.url().replace("redis://", "redis://nobf:pw@");
    let conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = common::unique_key("module-window-acl");
    let recent = windowed(&key).build(conn).unwrap();
    let err = recent.add("a").await.unwrap_err();
    assert!(
        matches!(&err, Error::NoPermission(inner) if inner.to_string().contains("'BF.MADD'")),
        "{err}"
    );
    let err = recent.exists("a").await.unwrap_err();
    assert!(
        matches!(&err, Error::NoPermission(inner) if inner.to_string().contains("'BF.MEXISTS'")),
        "{err}"
    );
    assert!(
        keys_like(&mut admin, "*").await.is_empty(),
        "nothing written"
    );
}
