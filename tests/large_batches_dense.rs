//! Large batches on filters too large to move whole (over 4 MiB) go by ranges of the key: the
//! same bytes and the same answers as per-item commands (adds and checks, up to a filter over
//! 64 MiB), the TTL kept, a key of another type refused untouched, no bit lost to concurrent
//! writers, and an ACL that refuses the merge falls back to `BITFIELD` with the same result.

mod common;

use common::server::RedisServer;
use redbloom::{Error, Layout, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::Duration;

/// 4.5 MiB: past the whole merge's limit of 4 MiB.
const BITS: u64 = (1 << 25) + (1 << 22);
/// Small ranges, so that the key is 144 of them and most items span several.
const RANGE: u64 = 32 << 10;
/// go-zero items in a batch that merges by ranges by itself (14 offsets each, 32 bytes of the
/// key per offset: 6.3 MB against the key's 4.7 MB).
const BATCH: usize = 14_000;

/// The batch: fresh items, every 10th a copy of the item 7 places before, every 50th an item
/// added before the batch, an empty item and non-UTF-8 bytes.
fn batch_items(n: usize, tag: &str) -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = Vec::with_capacity(n);
    for i in 0..n {
        let item = match i {
            0 | 5_000 => Vec::new(),
            1 | 12_345 => vec![0xff, 0xfe, 0x00, 0x80],
            _ if i % 10 == 9 => items[i - 7].clone(),
            _ if i % 50 == 4 => format!("pre:{}", i / 50).into_bytes(),
            _ => format!("{tag}:{i}").into_bytes(),
        };
        items.push(item);
    }
    items
}

fn pre_items() -> Vec<Vec<u8>> {
    (0..1_000)
        .map(|i| format!("pre:{i}").into_bytes())
        .collect()
}

/// A connection to `url` that waits 10 s for a reply (redis-rs: 500 ms), for a debug build on
/// a busy machine.
async fn connect(url: &str) -> MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// Adds `items` 500 at a time: `BITFIELD` commands, never the dense path.
async fn add_per_item(bloom: &RedisBloom<MultiplexedConnection>, items: &[Vec<u8>]) -> Vec<bool> {
    let mut new = Vec::with_capacity(items.len());
    for chunk in items.chunks(500) {
        new.extend(bloom.add_many(chunk).await.unwrap());
    }
    new
}

/// Checks `items` 500 at a time: `BITFIELD_RO` commands.
async fn exists_per_item(
    bloom: &RedisBloom<MultiplexedConnection>,
    items: &[Vec<u8>],
) -> Vec<bool> {
    let mut present = Vec::with_capacity(items.len());
    for chunk in items.chunks(500) {
        present.extend(bloom.exists_many(chunk).await.unwrap());
    }
    present
}

/// Calls per command since the last `CONFIG RESETSTAT`.
async fn command_calls(conn: &mut MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    ["bitfield", "bitfield_ro", "setrange", "getrange", "eval"]
        .into_iter()
        .map(|c| (c.to_owned(), common::commandstats_calls(&info, c)))
        .collect()
}

async fn reset_stats(conn: &mut MultiplexedConnection) {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .unwrap();
}

async fn bytes_of(conn: &mut MultiplexedConnection, key: &str) -> Vec<u8> {
    let bytes: Option<Vec<u8>> = redis::cmd("GET").arg(key).query_async(conn).await.unwrap();
    bytes.unwrap_or_default()
}

/// Keys of this server whose names hold `part`.
async fn keys_like(conn: &mut MultiplexedConnection, part: &str) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{part}*"))
        .query_async(conn)
        .await
        .unwrap();
    keys
}

fn filter(
    conn: &MultiplexedConnection,
    key: &str,
    layout: Layout,
    range: u64,
) -> RedisBloom<MultiplexedConnection> {
    let builder = RedisBloom::builder(key)
        .layout(layout)
        .bits(BITS)
        .merge_chunk_bytes(range);
    match layout {
        Layout::Native => builder.hashes(7),
        _ => builder,
    }
    .build(conn.clone())
    .unwrap()
}

#[tokio::test]
async fn a_merge_by_ranges_writes_the_bytes_and_answers_of_per_item_adds() {
    // A private server: the test reads its command statistics.
    let server = RedisServer::start().expect("redis-server on PATH");
    let mut conn = connect(&server.url()).await;
    for (layout, range, n) in [
        (Layout::GoZero, RANGE, BATCH),
        (Layout::Native, RANGE, 2 * BATCH),
        (Layout::GoZero, 1 << 20, BATCH),
    ] {
        let what = format!("{layout:?}, ranges of {range} bytes");
        let reference = filter(&conn, &format!("ref:{layout:?}:{range}"), layout, range);
        let ranged = filter(&conn, &format!("ranged:{layout:?}:{range}"), layout, range);
        let pre = pre_items();
        assert_eq!(
            add_per_item(&ranged, &pre).await,
            add_per_item(&reference, &pre).await
        );
        assert!(
            n / 50 <= pre.len(),
            "the batch repeats only items of pre_items()"
        );

        let items = batch_items(n, "fresh");
        let want = add_per_item(&reference, &items).await;
        reset_stats(&mut conn).await;
        let got = ranged.add_many(&items).await.unwrap();
        let calls = command_calls(&mut conn).await;
        assert_eq!(calls["bitfield"], 0, "{what}: no BITFIELD ({calls:?})");
        assert!(
            calls["setrange"] > 0,
            "{what}: merged by ranges ({calls:?})"
        );

        let first_difference = got.iter().zip(&want).position(|(g, w)| g != w);
        assert_eq!(first_difference, None, "{what}: new answers differ");
        assert_eq!(got.len(), n);
        // Not vacuous: repeats and items added before are not new, fresh items are.
        for (i, new) in want.iter().enumerate() {
            if i % 10 == 9 || i % 50 == 4 || [5_000, 12_345].contains(&i) {
                assert!(!new, "{what}: item {i} was in the filter already");
            }
        }
        assert!(want[0] && want[1] && want[2], "{what}");
        let bytes = bytes_of(&mut conn, reference.key()).await;
        assert!(
            bytes == bytes_of(&mut conn, ranged.key()).await,
            "{what}: bytes"
        );
        assert!(bytes.len() as u64 > BITS / 8 - 100, "{what}");

        // The batch again, with a few new ones: only those are new, the rest change nothing.
        let mut again = items.clone();
        again.extend((0..100).map(|i| format!("late:{i}").into_bytes()));
        let want = add_per_item(&reference, &again).await;
        assert_eq!(ranged.add_many(&again).await.unwrap(), want, "{what}");
        assert_eq!(want.iter().filter(|&&n| n).count(), 100, "{what}");
        assert!(
            bytes_of(&mut conn, reference.key()).await == bytes_of(&mut conn, ranged.key()).await
        );
        // Both scratch keys gone.
        assert_eq!(keys_like(&mut conn, ":redbloom:*:scratch").await.len(), 0);

        // Checks of the batch and as many absent items: by ranges, as per-item checks answer.
        let mut probes = again.clone();
        probes.extend((0..n).map(|i| format!("absent:{i}").into_bytes()));
        let want = exists_per_item(&reference, &probes).await;
        reset_stats(&mut conn).await;
        assert!(
            ranged.exists_many(&probes).await.unwrap() == want,
            "{what}: checks"
        );
        let calls = command_calls(&mut conn).await;
        assert!(
            calls["bitfield_ro"] == 0 && calls["getrange"] > 0,
            "{what}: {calls:?}"
        );
    }
}

#[tokio::test]
async fn a_merge_by_ranges_into_a_missing_key_writes_what_setbits_would() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for (layout, n) in [(Layout::GoZero, BATCH), (Layout::Native, 2 * BATCH)] {
        let reference = filter(&conn, &common::unique_key("missing-ref"), layout, RANGE);
        let ranged = filter(&conn, &common::unique_key("missing"), layout, RANGE);
        // Items whose highest bit is below the last range: the string is only as long as
        // SETBIT makes it.
        let items: Vec<Vec<u8>> = (0..200_000)
            .map(|i| format!("low:{i}").into_bytes())
            .filter(|item| {
                let offsets = match layout {
                    Layout::GoZero => redbloom::gozero_locations(item, BITS).to_vec(),
                    _ => redbloom::native_locations(item, BITS, 7).collect(),
                };
                offsets.iter().all(|&o| o < BITS - 3 * 8 * RANGE)
            })
            .take(n)
            .collect();
        assert_eq!(items.len(), n);
        let want = add_per_item(&reference, &items).await;
        assert_eq!(ranged.add_many(&items).await.unwrap(), want, "{layout:?}");
        let bytes = bytes_of(&mut conn, reference.key()).await;
        assert!((bytes.len() as u64) < BITS / 8 - 2 * RANGE);
        assert!(
            bytes == bytes_of(&mut conn, ranged.key()).await,
            "{layout:?}"
        );
    }
}

#[tokio::test]
async fn a_sharded_filter_merges_each_shard_by_ranges() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let sharded = |key: String| {
        RedisBloom::builder(key)
            .bits(2 * BITS)
            .shards(2)
            .merge_chunk_bytes(RANGE)
            .build(conn.clone())
            .unwrap()
    };
    let reference = sharded(common::unique_key("sharded-ref"));
    let ranged = sharded(common::unique_key("sharded"));
    let pre = pre_items();
    add_per_item(&reference, &pre).await;
    add_per_item(&ranged, &pre).await;
    let items = batch_items(2 * BATCH, "sharded");
    let want = add_per_item(&reference, &items).await;
    assert_eq!(ranged.add_many(&items).await.unwrap(), want);
    assert!(ranged.exists_many(&items).await.unwrap().iter().all(|&p| p));
    let (a, b) = (
        reference.info().await.unwrap(),
        ranged.info().await.unwrap(),
    );
    assert_eq!((a.bits_set, a.bytes), (b.bits_set, b.bytes));
}

#[tokio::test]
async fn a_merge_by_ranges_keeps_the_ttl() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let bloom = filter(
        &conn,
        &common::unique_key("ranged-ttl"),
        Layout::GoZero,
        RANGE,
    );
    bloom.add("first").await.unwrap();
    assert!(bloom.expire(Duration::from_secs(100)).await.unwrap());
    let items = batch_items(BATCH, "ttl");
    assert!(bloom.add_many(&items).await.unwrap()[0]);
    let ttl = common::pttl(&mut conn, bloom.key()).await;
    assert!((95_000..=100_000).contains(&ttl), "PTTL {ttl} ms");

    let persistent = filter(
        &conn,
        &common::unique_key("ranged-no-ttl"),
        Layout::GoZero,
        RANGE,
    );
    persistent.add("first").await.unwrap();
    persistent.add_many(&items).await.unwrap();
    assert_eq!(common::pttl(&mut conn, persistent.key()).await, -1);
}

#[tokio::test]
async fn a_key_of_another_type_is_wrong_type_and_left_alone() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("ranged-hash");
    let () = redis::cmd("HSET")
        .arg(&key)
        .arg("field")
        .arg("value")
        .query_async::<i64>(&mut conn)
        .await
        .map(drop)
        .unwrap();
    let bloom = filter(&conn, &key, Layout::GoZero, RANGE);
    match bloom.add_many(&batch_items(BATCH, "hash")).await {
        Err(Error::WrongType {
            key: got, found, ..
        }) => {
            assert_eq!((got.as_str(), found.as_str()), (key.as_str(), "hash"));
        }
        other => panic!("expected Error::WrongType, got {other:?}"),
    }
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(fields, HashMap::from([("field".into(), "value".into())]));
    assert_eq!(
        keys_like(&mut conn, &common::companion(&key, "scratch"))
            .await
            .len(),
        0
    );
}

#[tokio::test]
async fn concurrent_merges_by_ranges_lose_no_bit() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("ranged-concurrent");
    let sets: Vec<Vec<Vec<u8>>> = (0..4)
        .map(|t| {
            (0..2 * BATCH)
                .map(|i| format!("w{t}:{i}").into_bytes())
                .collect()
        })
        .collect();
    // Four handles (four queues: merges that really run at once) on one connection, each
    // loading its own items in batches of 20,000 that each merge by ranges, and one per-item
    // writer.
    let writers = sets.iter().cloned().map(|items| {
        let bloom = filter(&conn, &key, Layout::GoZero, RANGE);
        tokio::spawn(async move {
            for batch in items.chunks(BATCH) {
                let new = bloom.add_many(batch).await.unwrap();
                assert!(new.iter().filter(|&&n| n).count() > batch.len() - 10);
            }
        })
    });
    let per_item = {
        let bloom = filter(&conn, &key, Layout::GoZero, RANGE);
        tokio::spawn(async move {
            for i in 0..1_000 {
                bloom.add(format!("single:{i}")).await.unwrap();
            }
        })
    };
    for writer in writers {
        writer.await.unwrap();
    }
    per_item.await.unwrap();

    let bloom = filter(&conn, &key, Layout::GoZero, RANGE);
    let mut all: Vec<Vec<u8>> = sets.concat();
    all.extend((0..1_000).map(|i| format!("single:{i}").into_bytes()));
    assert!(
        exists_per_item(&bloom, &all).await.iter().all(|&p| p),
        "a bit was lost"
    );
    // The same bytes as one writer adding everything item by item.
    let reference = filter(
        &conn,
        &common::unique_key("ranged-concurrent-ref"),
        Layout::GoZero,
        RANGE,
    );
    add_per_item(&reference, &all).await;
    assert!(bytes_of(&mut conn, &key).await == bytes_of(&mut conn, reference.key()).await);
}

#[tokio::test]
async fn concurrent_batches_of_one_handle_are_new_once() {
    // A private server: the test reads its command statistics.
    let server = RedisServer::start().expect("redis-server on PATH");
    let mut conn = connect(&server.url()).await;
    let bloom = filter(&conn, "ranged-once", Layout::GoZero, RANGE);
    // Four batches at once on one handle, each holding half of the items, each item in two
    // batches: a merge gathers them (or they take turns), as if one after the other.
    let items: Vec<Vec<u8>> = (0..2 * BATCH)
        .map(|i| format!("once:{i}").into_bytes())
        .collect();
    let batches: Vec<Vec<Vec<u8>>> = (0..4)
        .map(|b| {
            let start = b * BATCH / 2;
            items
                .iter()
                .cycle()
                .skip(start)
                .take(BATCH)
                .cloned()
                .collect()
        })
        .collect();
    // The first write also probes the route and asks INFO memory (the eviction check):
    // take it before the statistics are reset. Hashes are fixed, so this item's bits are too.
    bloom.add("warm-up").await.unwrap();
    reset_stats(&mut conn).await;
    let calls = batches.iter().map(|batch| bloom.add_many(batch));
    let answers = futures_util::future::try_join_all(calls).await.unwrap();
    let calls = command_calls(&mut conn).await;
    assert!(calls["bitfield"] == 0 && calls["setrange"] > 0, "{calls:?}");
    let mut new_counts: HashMap<&[u8], usize> = HashMap::new();
    for (batch, answer) in batches.iter().zip(&answers) {
        for (item, new) in batch.iter().zip(answer) {
            *new_counts.entry(item).or_default() += usize::from(*new);
        }
    }
    let distinct = new_counts.len();
    let once = new_counts.values().filter(|&&n| n == 1).count();
    assert_eq!(once, distinct, "every item new exactly once");
}

/// A private server with an ACL user `limited` under `rules`, and a connection as that user.
async fn acl_user(rules: &[&str]) -> (RedisServer, MultiplexedConnection, MultiplexedConnection) {
    let server = RedisServer::start().expect("redis-server on PATH");
    let mut admin = connect(&server.url()).await;
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("limited")
        .arg("reset")
        .arg("on")
        .arg(">limited-pw")
        .arg(rules)
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://limited:limited-pw@127.0.0.1:{}", server.port());
    let user = connect(&url).await;
    (server, admin, user)
}

#[tokio::test]
async fn an_acl_that_refuses_the_merge_falls_back_to_bitfield_with_the_same_bytes() {
    for (what, rules) in [
        ("no sidecar keys", &["~bf:*", "+@all"][..]),
        (
            "no SETRANGE",
            &["~bf:*", "~{bf:*}:redbloom:*", "+@all", "-setrange"][..],
        ),
        (
            "no BITOP",
            &["~bf:*", "~{bf:*}:redbloom:*", "+@all", "-bitop"][..],
        ),
    ] {
        // Without and with exact answers (a retry budget): the recorded merge by ranges falls
        // back the same way, to recorded BITFIELDs.
        for exact in [false, true] {
            let (_server, mut admin, user) = acl_user(rules).await;
            let reference = filter(&admin, "bf:reference", Layout::GoZero, RANGE);
            let limited = RedisBloom::builder("bf:limited")
                .bits(BITS)
                .merge_chunk_bytes(RANGE)
                .retry(redbloom::Retry::for_duration(Duration::from_secs(5)))
                .exact_retries(exact)
                .build(user.clone())
                .unwrap();
            let what = format!("{what}, exact answers {exact}");
            let items = batch_items(BATCH, "acl");
            let want = add_per_item(&reference, &items).await;
            reset_stats(&mut admin).await;
            let got = limited.add_many(&items).await.unwrap();
            assert_eq!(got, want, "{what}: new answers");
            let calls = command_calls(&mut admin).await;
            assert!(calls["bitfield"] > 0, "{what}: fell back ({calls:?})");
            assert_eq!(calls["setrange"], 0, "{what}: nothing merged ({calls:?})");
            let bytes = bytes_of(&mut admin, reference.key()).await;
            assert!(
                bytes == bytes_of(&mut admin, limited.key()).await,
                "{what}: bytes"
            );
            // Learned once: the next batch goes by BITFIELD at once.
            reset_stats(&mut admin).await;
            limited.add_many(&items).await.unwrap();
            assert_eq!(command_calls(&mut admin).await["eval"], 0, "{what}");
            assert_eq!(keys_like(&mut admin, ":redbloom:*:scratch").await.len(), 0);
        }
    }
}

#[tokio::test]
async fn checks_of_a_filter_over_64_mib_read_the_ranges_they_need() {
    // A private server: 72 MiB of bits, and the test reads its command statistics.
    let server = RedisServer::start().expect("redis-server on PATH");
    let mut conn = connect(&server.url()).await;
    let bits: u64 = (1 << 29) + (1 << 26);
    let bloom = RedisBloom::builder("big-check")
        .bits(bits)
        .merge_chunk_bytes(256 << 10)
        .build(conn.clone())
        .unwrap();
    // The filter's bytes made here (what SETBITs of the items' offsets leave) and set whole.
    let added: Vec<Vec<u8>> = (0..50_000)
        .map(|i| format!("big:{i}").into_bytes())
        .collect();
    let mut bytes = vec![0u8; (bits / 8) as usize];
    let test = |bytes: &[u8], o: u64| bytes[(o / 8) as usize] & (0x80 >> (o & 7)) != 0;
    for item in &added {
        for o in redbloom::gozero_locations(item, bits) {
            bytes[(o / 8) as usize] |= 0x80 >> (o & 7);
        }
    }
    common::set_bytes(&mut conn, "big-check", &bytes).await;
    let mut probes = added.clone();
    probes.extend((0..50_000).map(|i| format!("never:{i}").into_bytes()));
    let want: Vec<bool> = probes
        .iter()
        .map(|item| {
            redbloom::gozero_locations(item, bits)
                .iter()
                .all(|&o| test(&bytes, o))
        })
        .collect();
    drop(bytes);

    reset_stats(&mut conn).await;
    let by_ranges = bloom.exists_many(&probes).await.unwrap();
    let calls = command_calls(&mut conn).await;
    assert_eq!(calls["bitfield_ro"], 0, "{calls:?}");
    // 256 KiB per read, at most one per range of the key.
    assert!((1..=288).contains(&calls["getrange"]), "{calls:?}");
    assert!(by_ranges == want, "answers differ from the bits'");
    assert!(by_ranges[..50_000].iter().all(|&p| p), "false negatives");
    assert!(by_ranges[50_000..].iter().filter(|&&p| p).count() < 10);
    // And as per-item checks answer them, on a sample.
    let sample: Vec<Vec<u8>> = probes.iter().step_by(25).cloned().collect();
    let per_item = exists_per_item(&bloom, &sample).await;
    let sampled: Vec<bool> = by_ranges.iter().step_by(25).copied().collect();
    assert_eq!(per_item, sampled);
}
