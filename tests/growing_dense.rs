//! The growing filter's dense paths (SPEC.md §4 "growing") against a real Redis: a batch added
//! dense (the levels read whole, the batch's bits merged by a compare-and-set on the counts)
//! answers and leaves the bytes and counts as the same items added by the per-item script;
//! dense checks answer as per-item checks; dense adds racing other clients lose no item and
//! fill each level exactly to its capacity; a level made by a dense add keeps the filter's TTL.

mod common;

use redbloom::GrowingBloom;
use redis::aio::MultiplexedConnection;
use std::collections::BTreeMap;
use std::time::Duration;

fn growing(
    conn: MultiplexedConnection,
    key: &str,
    capacity: u64,
) -> GrowingBloom<MultiplexedConnection> {
    GrowingBloom::builder(key)
        .expected_items(capacity)
        .false_positive_rate(0.01)
        .growth(2)
        .build(conn)
        .unwrap()
}

/// Every key of the filter at `key` (its name holds the key), with its bytes or, for the
/// counts hash, its fields.
async fn state(conn: &mut MultiplexedConnection, key: &str) -> BTreeMap<String, String> {
    let names: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{key}*"))
        .query_async(conn)
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for name in names {
        let kind: String = redis::cmd("TYPE")
            .arg(&name)
            .query_async(conn)
            .await
            .unwrap();
        let value = match kind.as_str() {
            "hash" => {
                let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
                    .arg(&name)
                    .query_async(conn)
                    .await
                    .unwrap();
                format!("{fields:?}")
            }
            _ => {
                let bytes: Vec<u8> = redis::cmd("GET")
                    .arg(&name)
                    .query_async(conn)
                    .await
                    .unwrap();
                format!("{bytes:?}")
            }
        };
        // The same layout under another key (of another length): compare by the name's tail.
        let name = name.replace(
            &format!(":redbloom:{}:{key}:", key.len()),
            ":redbloom:LEN:KEY:",
        );
        out.insert(name.replace(key, "KEY"), value);
    }
    out
}

/// Batches of 3,000 items, with repeats and items added before, into a filter whose first
/// level takes 500: dense (one merge per batch, `BITOP` counted), and the same items in
/// batches of 10 by the per-item script: the same answers, the same bytes in every level, the
/// same counts; the dense checks answer as the per-item checks.
#[tokio::test]
async fn dense_adds_match_the_per_item_script() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let (dense_key, script_key) = (
        common::unique_key("grow-dense"),
        common::unique_key("grow-script"),
    );
    let dense = growing(conn.clone(), &dense_key, 500);
    let script = growing(conn.clone(), &script_key, 500);
    let mut added = std::collections::HashSet::new();
    for round in 0..4 {
        let batch: Vec<String> = (0..3_000)
            .map(|i| format!("u{}", (round * 2_000 + i * 7) % 9_000))
            .collect();
        added.extend(batch.iter().cloned());
        let (whole, merges) =
            common::calls_during(&mut conn, "bitop", dense.add_many(&batch)).await;
        assert!(merges > 0, "round {round}: the batch was merged");
        let whole = whole.unwrap();
        let mut small = Vec::new();
        for chunk in batch.chunks(10) {
            small.extend(script.add_many(chunk).await.unwrap());
        }
        assert!(whole == small, "round {round}: answers differ");
        assert_eq!(
            state(&mut conn, &dense_key).await,
            state(&mut conn, &script_key).await,
            "round {round}: keys differ"
        );
    }
    let info = dense.info().await.unwrap();
    assert!(info.levels >= 4, "{info:?}");
    let probes: Vec<String> = (0..20_000).map(|i| format!("u{i}")).collect();
    let whole = dense.exists_many(&probes).await.unwrap();
    let mut small = Vec::new();
    for chunk in probes.chunks(10) {
        small.extend(dense.exists_many(chunk).await.unwrap());
    }
    assert!(whole == small, "dense and per-item checks differ");
    for (probe, found) in probes.iter().zip(&whole) {
        assert!(
            *found || !added.contains(probe),
            "a false negative: {probe}"
        );
    }
    assert_eq!(added.len(), 6_000, "distinct items");
    dense.clear().await.unwrap();
    script.clear().await.unwrap();
}

/// Four clients (each its own connection) add dense batches of their own items at once while
/// a fifth adds items one at a time: a merge that finds the counts changed writes nothing and
/// tries again, so no item is lost, the counts add up to the new answers, and every level but
/// the newest holds exactly its capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_dense_adds_lose_nothing_and_fill_levels_exactly() {
    let redis = common::redis().await;
    let key = common::unique_key("grow-race");
    let redis = &redis;
    let key = &key;
    let tasks = (0..5).map(|client| async move {
        let filter = growing(redis.connection().await, key, 1_000);
        let mut new = 0;
        for round in 0..5 {
            let batch: Vec<String> = (0..2_000)
                .map(|i| format!("c{client}-{round}-{i}"))
                .collect();
            let answers = match client {
                4 => {
                    let mut answers = Vec::new();
                    for item in &batch[..200] {
                        answers.push(filter.add(item).await.unwrap());
                    }
                    answers
                }
                _ => filter.add_many(&batch).await.unwrap(),
            };
            new += answers.iter().filter(|&&n| n).count() as u64;
            let found = filter.exists_many(&batch[..answers.len()]).await.unwrap();
            assert!(
                found.iter().all(|&f| f),
                "client {client}: an item is missing"
            );
        }
        new
    });
    let new: u64 = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .sum();
    let mut conn = redis.connection().await;
    let filter = growing(conn.clone(), key, 1_000);
    let info = filter.info().await.unwrap();
    assert_eq!(
        info.items, new,
        "the counts add up to the new answers: {info:?}"
    );
    let counts_key: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", common::companion(key, "grow:")))
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut hashes = Vec::new();
    for name in &counts_key {
        let kind: String = redis::cmd("TYPE")
            .arg(name)
            .query_async(&mut conn)
            .await
            .unwrap();
        if kind == "hash" {
            hashes.push(name.clone());
        }
    }
    assert_eq!(hashes.len(), 1, "{counts_key:?}");
    let counts_key = &hashes[0];
    let counts: BTreeMap<u32, u64> = redis::cmd("HGETALL")
        .arg(counts_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let newest = *counts.keys().max().unwrap();
    for (&level, &count) in &counts {
        if level < newest {
            assert_eq!(
                count,
                1_000 << level,
                "level {level} holds its capacity: {counts:?}"
            );
        }
    }
    filter.clear().await.unwrap();
}

/// A filter given a TTL: the segment a dense add merges into keeps it, with the levels the add
/// makes there (`BITOP` replaces its destination, TTL included).
#[tokio::test]
async fn dense_adds_keep_the_ttl() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("grow-ttl");
    let filter = growing(conn.clone(), &key, 500);
    let first: Vec<String> = (0..400).map(|i| format!("a{i}")).collect();
    filter.add_many(&first).await.unwrap();
    assert!(filter.expire(Duration::from_secs(600)).await.unwrap());
    let more: Vec<String> = (0..5_000).map(|i| format!("b{i}")).collect();
    filter.add_many(&more).await.unwrap();
    assert!(filter.info().await.unwrap().levels >= 3);
    let names: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{key}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(names.len(), 3, "params, counts, one segment: {names:?}");
    for name in names {
        let ttl = common::pttl(&mut conn, &name).await;
        assert!((590_000..=600_000).contains(&ttl), "{name}: {ttl} ms");
    }
    filter.clear().await.unwrap();
}

/// A level that starts a new string (segment: levels share one up to 4 MiB) after an
/// `expire` takes the filter's TTL, whether the per-item script or a dense merge makes it.
#[tokio::test]
async fn new_segments_made_after_an_expire_keep_its_ttl() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for (path, batch) in [("the per-item script", 1usize), ("a dense merge", 1_000)] {
        let key = common::unique_key("grow-segment-ttl");
        let filter = GrowingBloom::builder(&key)
            .expected_items(350_000)
            .false_positive_rate(1e-6)
            .growth(2)
            .build(conn.clone())
            .unwrap();
        let levels = filter.levels();
        assert_eq!((levels[0].segment, levels[1].segment), (0, 1), "{levels:?}");
        assert!(levels[1].bits / 8 <= 4 << 20, "{levels:?}");
        // Fill level 0 to within 50 items of its capacity, dense.
        let capacity = levels[0].capacity;
        let mut next = 0u64;
        let mut taken = 0u64;
        while taken + 50 < capacity {
            let want = (capacity - 50 - taken).min(100_000);
            let items: Vec<String> = (next..next + want).map(|i| format!("s{i}")).collect();
            next += want;
            taken += filter
                .add_many(&items)
                .await
                .unwrap()
                .iter()
                .filter(|&&new| new)
                .count() as u64;
        }
        assert_eq!(filter.info().await.unwrap().levels, 1);
        assert!(filter.expire(Duration::from_secs(600)).await.unwrap());
        let segment1: String = {
            let names: Vec<String> = redis::cmd("KEYS")
                .arg(format!("*:redbloom:*{key}*:grow:*:0"))
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(names.len(), 1, "{names:?}");
            format!("{}1", names[0].strip_suffix('0').unwrap())
        };
        while filter.info().await.unwrap().levels < 2 {
            let items: Vec<String> = (next..next + batch as u64)
                .map(|i| format!("s{i}"))
                .collect();
            next += batch as u64;
            filter.add_many(&items).await.unwrap();
        }
        let ttl = common::pttl(&mut conn, &segment1).await;
        assert!(
            (590_000..=600_000).contains(&ttl),
            "{path}: {segment1}: {ttl} ms"
        );
        filter.clear().await.unwrap();
    }
}

/// Concurrent loaders of one growing filter (each its own handle and connection, as separate
/// processes would be) take turns for their dense merges: none falls back to the per-item
/// script (`EVALSHA` of the add script), where each one's failed merges used to make the
/// others' fail in turn (two loads of 1M items: 22 s and 43 s instead of 0.4 s each).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_loaders_take_turns_and_never_fall_back() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let url = server.url();
    let key = &common::unique_key("grow-loaders");
    let url = &url;
    let loaders = (0..4).map(|loader| async move {
        let filter = growing(common::connect(url).await, key, 2_000);
        for round in 0..4 {
            let batch: Vec<String> = (0..10_000)
                .map(|i| format!("l{loader}-{round}-{i}"))
                .collect();
            filter.add_many(&batch).await.unwrap();
        }
        filter
    });
    let filters = futures_util::future::join_all(loaders).await;
    let mut conn = common::connect(url).await;
    assert_eq!(
        common::calls(&mut conn, "evalsha").await,
        0,
        "a batch went by the per-item script"
    );
    assert!(common::calls(&mut conn, "bitop").await > 0, "merged dense");
    for (loader, filter) in filters.iter().enumerate() {
        let batch: Vec<String> = (0..10_000).map(|i| format!("l{loader}-3-{i}")).collect();
        let found = filter.exists_many(&batch).await.unwrap();
        assert!(
            found.iter().all(|&f| f),
            "loader {loader}: an item is missing"
        );
    }
}

/// A level past 4 MiB (alone in a segment of its own size) still takes batches by the dense
/// merge, up to 16 MiB: its batches used to go by the per-item script, about 85 µs of server
/// time per item at nine levels (a 4,000,000-item `load` of a filter whose ninth level is
/// 6.2 MB: 147 s, against 8 s merged).
#[tokio::test]
async fn a_level_past_4_mib_is_merged_dense() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    let key = common::unique_key("grow-big-level");
    let filter = growing(conn.clone(), &key, 3_000_000);
    let first = &filter.levels()[0];
    let bytes = first.bits / 8;
    assert!(
        first.segment == 0 && bytes > 4 << 20 && bytes <= 16 << 20,
        "the first level is past 4 MiB and within 16: {first:?}"
    );
    let mut added = Vec::new();
    for round in 0..3 {
        // Each batch: 20,000 new items and 1,000 of the batch before.
        let batch: Vec<String> = (round * 20_000 - round.min(1) * 1_000..(round + 1) * 20_000)
            .map(|i| format!("big{i}"))
            .collect();
        let answers = filter.add_many(&batch).await.unwrap();
        let new = answers.iter().filter(|&&new| new).count();
        assert!(
            (19_990..=20_000).contains(&new),
            "round {round}: {new} new of {}",
            batch.len()
        );
        if round > 0 {
            assert!(
                !answers[..1_000].iter().any(|&new| new),
                "round {round}: seen again"
            );
        }
        added.extend(batch);
    }
    assert_eq!(
        common::calls(&mut conn, "evalsha").await,
        0,
        "a batch went by the per-item script"
    );
    assert!(common::calls(&mut conn, "bitop").await >= 3, "merged dense");
    let found = filter.exists_many(&added).await.unwrap();
    assert!(found.iter().all(|&f| f), "an item is missing");
    let info = filter.info().await.unwrap();
    assert_eq!(info.levels, 1, "{info:?}");
    assert!(first.dense, "GrowingLevel::dense says so: {first:?}");
}

/// A level past 16 MiB takes its batches item by item, as `GrowingLevel::dense` says (the CLI's
/// `load` prints a note from it); two shards make each shard's level small enough to merge.
#[tokio::test]
async fn a_level_past_16_mib_goes_item_by_item_as_its_level_says() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    let build = |key: &str, shards: u32| {
        GrowingBloom::builder(key)
            .expected_items(10_000_000)
            .false_positive_rate(0.01)
            .growth(2)
            .shards(shards)
            .build(conn.clone())
            .unwrap()
    };
    let (one, two) = (
        build(&common::unique_key("grow-huge"), 1),
        build(&common::unique_key("grow-huge-sharded"), 2),
    );
    let levels = (one.levels(), two.levels());
    assert!(levels.0[0].bits / 8 > 16 << 20, "{:?}", levels.0[0]);
    assert!(!levels.0[0].dense && levels.1[0].dense, "{levels:?}");
    let batch: Vec<String> = (0..20_000).map(|i| format!("huge{i}")).collect();
    let (added, bitops) = common::calls_during(&mut conn, "bitop", one.add_many(&batch)).await;
    assert_eq!(bitops, 0, "past 16 MiB, merged");
    assert!(added.unwrap().iter().all(|&new| new));
    let (added, bitops) = common::calls_during(&mut conn, "bitop", two.add_many(&batch)).await;
    assert!(bitops > 0, "two shards of 13 MB, not merged");
    assert!(added.unwrap().iter().all(|&new| new));
}

/// A batch goes dense only when the levels it reads whole are at most 4 KiB per item: a
/// batch of 256 into a first level of a few MB goes by the per-item script (it used to be
/// merged: the level read whole and written back for 256 items, 14,943 items/s against 143,925
/// item by item from four tasks; of 64, 3,838 against 113,832), one of 1,000 is merged.
#[tokio::test]
async fn a_small_batch_into_large_levels_goes_item_by_item() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    let key = common::unique_key("grow-small-batch");
    let filter = growing(conn.clone(), &key, 2_000_000);
    let bytes = filter.levels()[0].bits / 8;
    assert!(
        bytes > 256 * 4096 && bytes <= 1_000 * 4096,
        "a first level between 1 and 4 MiB: {bytes} bytes"
    );
    let small: Vec<String> = (0..256).map(|i| format!("small{i}")).collect();
    let answers = filter.add_many(&small).await.unwrap();
    assert!(answers.iter().all(|&new| new), "all new");
    assert_eq!(common::calls(&mut conn, "bitop").await, 0, "merged");
    assert_eq!(common::calls(&mut conn, "getrange").await, 0, "read whole");
    assert!(
        common::calls(&mut conn, "evalsha").await > 0,
        "item by item"
    );
    let large: Vec<String> = (0..1_000).map(|i| format!("large{i}")).collect();
    let mut again = small[..10].to_vec();
    again.extend(large.iter().cloned());
    let answers = filter.add_many(&again).await.unwrap();
    assert!(!answers[..10].iter().any(|&new| new), "seen again");
    assert!(answers[10..].iter().all(|&new| new), "new");
    assert!(common::calls(&mut conn, "bitop").await > 0, "merged");
    let found = filter.exists_many(&again).await.unwrap();
    assert!(found.iter().all(|&f| f), "an item is missing");
    assert_eq!(filter.info().await.unwrap().items, 1_256);
}

/// A check of a batch reads a large level whole once the words its items would read by
/// `BITFIELD_RO` outweigh the level: 256 bytes of level a word (a word read costs the server
/// about 0.4 µs, a byte read whole about 1.5 ns here). Priced at 8 bytes a bit, a level of
/// 26.5 MB was read word by word by batches of 100,000: 1.8-2x slower. Smaller batches still
/// read words; both answer as checks of 100 items do.
#[tokio::test]
async fn a_check_reads_a_large_level_whole_once_its_words_outweigh_it() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    let key = common::unique_key("grow-check-whole");
    let filter = growing(conn.clone(), &key, 3_000_000);
    let first = &filter.levels()[0];
    let bytes = first.bits / 8;
    assert!(bytes > 4 << 20, "the first level is past 4 MiB: {first:?}");
    let added: Vec<String> = (0..20_000).map(|i| format!("in{i}")).collect();
    filter.add_many(&added).await.unwrap();
    // The batch size from which the level is read whole.
    let whole = (bytes / (u64::from(first.words_per_item) * 256)) as usize;
    let hashes = u64::from(first.words_per_item * first.bits_per_word);
    assert!(
        (whole * 2) as u64 * hashes * 8 < bytes,
        "twice that many items' bits at 8 bytes each stay under the level"
    );
    for (size, read_whole) in [(whole / 2, false), (whole * 2, true)] {
        // Half of the batch added, half not.
        let batch: Vec<String> = (0..size)
            .map(|i| match i % 2 {
                0 => format!("in{}", i / 2 % 20_000),
                _ => format!("out{i}"),
            })
            .collect();
        let (getranges, words) = (
            common::calls(&mut conn, "getrange").await,
            common::calls(&mut conn, "bitfield_ro").await,
        );
        let found = filter.exists_many(&batch).await.unwrap();
        let getranges = common::calls(&mut conn, "getrange").await - getranges;
        let words = common::calls(&mut conn, "bitfield_ro").await - words;
        match read_whole {
            true => assert!(
                getranges > 0 && words == 0,
                "{size} items: read whole ({getranges} GETRANGEs, {words} BITFIELD_ROs)"
            ),
            false => assert!(
                getranges == 0 && words > 0,
                "{size} items: read by words ({getranges} GETRANGEs, {words} BITFIELD_ROs)"
            ),
        }
        let mut small = Vec::with_capacity(size);
        for chunk in batch.chunks(100) {
            small.extend(filter.exists_many(chunk).await.unwrap());
        }
        assert!(
            found == small,
            "{size} items: answers differ from checks of 100"
        );
        assert!(
            found.iter().step_by(2).all(|&f| f),
            "an added item is missing"
        );
        let absent = found.iter().skip(1).step_by(2).filter(|&&f| !f).count();
        assert!(
            absent * 100 >= size / 2 * 95,
            "{absent} of {} absent",
            size / 2
        );
    }
}
