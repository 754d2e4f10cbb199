//! The dense batch path (one `GETRANGE`, or one bitmap ORed in with `BITOP`) answers and writes
//! exactly what sequential `SETBIT`s/`GETBIT`s do, is really taken, and leaves nothing behind.

mod common;

use redbloom::{Engine, Error, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::Duration;

/// 125,000 bytes: a batch is dense from ceil(125000 / (14 * 64)) = 140 items on for an add,
/// from 70 for a check.
const BITS: u64 = 1_000_000;
/// Dense: 20,000 * 14 * 64 >= 125,000.
const BATCH: usize = 20_000;
/// Items added one by one (not dense) before the batch, and repeated inside it.
const PRE: usize = 400;

fn pre_items() -> Vec<Vec<u8>> {
    (0..PRE).map(|i| format!("pre:{i}").into_bytes()).collect()
}

/// 20,000 items: fresh ones, every 50th one of the `pre_items` (already in the filter), every
/// 10th one a copy of the item 7 places earlier in the batch, plus an empty item, non-UTF-8
/// bytes and a long item, each twice.
fn batch_items() -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
    for i in 0..BATCH {
        let item = match i {
            0 | 5_000 => Vec::new(),
            1 | 12_345 => vec![0xff, 0xfe, 0x00, 0x80],
            2 | 19_998 => vec![0xab; 300],
            _ if i % 10 == 9 => items[i - 7].clone(),
            _ if i % 50 == 4 => format!("pre:{}", i / 50).into_bytes(),
            _ => format!("dense:{i}").into_bytes(),
        };
        items.push(item);
    }
    items
}

async fn filter(
    conn: &MultiplexedConnection,
    name: &str,
    engine: Engine,
) -> RedisBloom<MultiplexedConnection> {
    RedisBloom::new(conn.clone(), common::unique_key(name), BITS)
        .unwrap()
        .with_engine(engine)
}

/// The same, over a key that a Go service may have written (go-zero's layout, no stored
/// parameters): the filter says it is shared with Go.
async fn go_filter(
    conn: &MultiplexedConnection,
    name: &str,
    engine: Engine,
) -> RedisBloom<MultiplexedConnection> {
    RedisBloom::builder(common::unique_key(name))
        .bits(BITS)
        .shared_with_go(true)
        .engine(engine)
        .build(conn.clone())
        .unwrap()
}

/// `calls` per command from `INFO commandstats`.
async fn command_calls(conn: &mut MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// How many times each of `commands` ran between the two snapshots.
fn delta(
    before: &HashMap<String, u64>,
    after: &HashMap<String, u64>,
    commands: &[&str],
) -> HashMap<String, u64> {
    commands
        .iter()
        .map(|&c| {
            let n = |stats: &HashMap<String, u64>| stats.get(c).copied().unwrap_or(0);
            (c.to_owned(), n(after) - n(before))
        })
        .collect()
}

async fn strlen(conn: &mut MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("STRLEN")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

/// Every key on the server whose name mentions the dense path's scratch suffix and `key`.
async fn scratch_keys(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("*:redbloom:*:scratch*")
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        found.extend(keys.into_iter().filter(|k| k.contains(key)));
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

/// The dense path's scratch key beside a key without a hash tag:
/// `{KEY}:redbloom:LEN:KEY:scratch`.
fn scratch_key(key: &str) -> String {
    common::companion(key, "scratch")
}

#[tokio::test]
async fn dense_add_many_equals_sequential_setbits() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let fast = filter(&conn, "dense-add-fast", Engine::Fast).await;
    let reference = filter(&conn, "dense-add-scripts", Engine::Scripts).await;

    for item in pre_items() {
        assert_eq!(
            fast.add(&item).await.unwrap(),
            reference.add(&item).await.unwrap()
        );
    }
    assert_eq!(
        common::key_hex(&mut conn, fast.key()).await,
        common::key_hex(&mut conn, reference.key()).await,
        "single adds agree before the batch"
    );

    let items = batch_items();
    let want = reference.add_many(&items).await.unwrap();
    let got = fast.add_many(&items).await.unwrap();
    assert_eq!(got.len(), BATCH);
    let first_difference = got.iter().zip(&want).position(|(g, w)| g != w);
    assert_eq!(
        first_difference, None,
        "per-item new flags differ from SETBIT's"
    );

    // Not vacuous: pre-added items and repeats are not new, the fresh items are.
    for (i, new) in want.iter().enumerate() {
        if i % 10 == 9 || i % 50 == 4 || [5_000, 12_345, 19_998].contains(&i) {
            assert!(!new, "item {i} was in the filter already");
        }
    }
    assert!(want[0] && want[1] && want[2], "first occurrences are new");
    let fresh = want.iter().filter(|&&n| n).count();
    assert!(fresh > BATCH * 3 / 4, "{fresh} new items");

    let hex = common::key_hex(&mut conn, reference.key()).await;
    assert_eq!(
        common::key_hex(&mut conn, fast.key()).await,
        hex,
        "key bytes"
    );
    assert_eq!(
        strlen(&mut conn, fast.key()).await,
        strlen(&mut conn, reference.key()).await,
        "string length"
    );
    assert_eq!(strlen(&mut conn, fast.key()).await, BITS / 8);

    // The whole batch again: nothing is new, and nothing changes.
    assert!(fast.add_many(&items).await.unwrap().iter().all(|n| !n));
    assert_eq!(common::key_hex(&mut conn, fast.key()).await, hex);
}

#[tokio::test]
async fn dense_add_many_into_a_missing_key_and_a_short_one() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let items = batch_items();

    // Into a missing key: the merge script's GET replies nil.
    let fast = filter(&conn, "dense-missing-fast", Engine::Fast).await;
    let reference = filter(&conn, "dense-missing-scripts", Engine::Scripts).await;
    let got = fast.add_many(&items).await.unwrap();
    assert_eq!(got, reference.add_many(&items).await.unwrap());
    assert!(got[0] && !got[9], "first new, a repeat not");
    assert_eq!(
        common::key_hex(&mut conn, fast.key()).await,
        common::key_hex(&mut conn, reference.key()).await
    );

    // Into a key far shorter than the filter (one item whose bits are all in the first bytes,
    // written directly): BITOP pads the shorter string, as SETBIT grows it.
    let fast = go_filter(&conn, "dense-short-fast", Engine::Fast).await;
    let reference = go_filter(&conn, "dense-short-scripts", Engine::Scripts).await;
    for key in [fast.key(), reference.key()] {
        let () = redis::cmd("SETBIT")
            .arg(key)
            .arg(3)
            .arg(1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(strlen(&mut conn, key).await, 1);
    }
    let small: Vec<Vec<u8>> = items[..1_200].to_vec();
    assert_eq!(
        fast.add_many(&small).await.unwrap(),
        reference.add_many(&small).await.unwrap()
    );
    assert_eq!(
        common::key_hex(&mut conn, fast.key()).await,
        common::key_hex(&mut conn, reference.key()).await
    );
    assert_eq!(
        strlen(&mut conn, fast.key()).await,
        strlen(&mut conn, reference.key()).await
    );
}

#[tokio::test]
async fn dense_exists_many_equals_scripts_and_single_exists() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let fast = filter(&conn, "dense-exists-fast", Engine::Fast).await;
    let reference = filter(&conn, "dense-exists-scripts", Engine::Scripts).await;

    // On a missing key, a dense check finds nothing.
    let items = batch_items();
    assert_eq!(fast.exists_many(&items).await.unwrap(), vec![false; BATCH]);

    // Fill both keys identically with every other item of the batch.
    let added: Vec<&Vec<u8>> = items.iter().step_by(2).collect();
    fast.add_many(&added).await.unwrap();
    reference.add_many(&added).await.unwrap();
    assert_eq!(
        common::key_hex(&mut conn, fast.key()).await,
        common::key_hex(&mut conn, reference.key()).await
    );

    // Probes: the whole batch (half added) and as many never-added items.
    let mut probes = items.clone();
    probes.extend((0..BATCH).map(|i| format!("absent:{i}").into_bytes()));
    let got = fast.exists_many(&probes).await.unwrap();
    let want = reference.exists_many(&probes).await.unwrap();
    assert_eq!(got.len(), probes.len());
    let first_difference = got.iter().zip(&want).position(|(g, w)| g != w);
    assert_eq!(first_difference, None, "dense vs Scripts engine");

    let mut single = Vec::with_capacity(probes.len());
    for probe in &probes {
        single.push(fast.exists(probe).await.unwrap());
    }
    let first_difference = got.iter().zip(&single).position(|(g, s)| g != s);
    assert_eq!(first_difference, None, "dense vs exists() item by item");

    // Not vacuous: every added item is present, most never-added ones are absent.
    for i in (0..BATCH).step_by(2) {
        assert!(got[i], "added item {i} not found");
    }
    let absent = got.iter().filter(|&&p| !p).count();
    assert!(absent > BATCH / 2, "only {absent} absent probes");
}

#[tokio::test]
async fn the_dense_path_is_taken_only_for_large_batches() {
    // It counts the server's commands (INFO commandstats): a server of its own, even with
    // REDIS_URL set, so that no other client's commands are counted.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    let bloom = filter(&conn, "dense-commands", Engine::Fast).await;
    let commands = [
        "bitop",
        "bitfield",
        "bitfield_ro",
        "getrange",
        "setbit",
        "getbit",
    ];
    let items = batch_items();
    let small: Vec<&Vec<u8>> = items[..10].iter().collect();
    // The first write also asks the server whether it may evict the filter
    // (one routing probe and INFO memory); take it before counting.
    bloom.add("warm-up").await.unwrap();

    // A small batch: BITFIELD to add, BITFIELD_RO to check.
    let before = command_calls(&mut conn).await;
    bloom.add_many(&small).await.unwrap();
    let after = command_calls(&mut conn).await;
    let d = delta(&before, &after, &commands);
    assert_eq!(d["bitfield"], 1, "{d:?}");
    assert_eq!(d["bitop"], 0, "{d:?}");

    let before = command_calls(&mut conn).await;
    assert!(bloom.exists_many(&small).await.unwrap().iter().all(|&p| p));
    let after = command_calls(&mut conn).await;
    let d = delta(&before, &after, &commands);
    assert_eq!(d["bitfield_ro"] + d["bitfield"], 1, "{d:?}");
    assert_eq!(d["getrange"], 0, "{d:?}");

    // A batch of 500: whole (two BITOPs in the merge script: the AND that probes whether the
    // batch sets a new bit, then the OR), as its bits at 64 bytes each (128 for a check)
    // outweigh the filter's 125,000 bytes. At 8 bytes a bit it went by BITFIELD (dense from 1,117 items
    // only): batches of 5,000 into a 4 MiB filter 1.5-1.9x slower to add, 3-5x to check.
    let mid: Vec<String> = (0..500).map(|i| format!("mid:{i}")).collect();
    let before = command_calls(&mut conn).await;
    let new = bloom.add_many(&mid).await.unwrap();
    let after = command_calls(&mut conn).await;
    let d = delta(&before, &after, &commands);
    assert_eq!((d["bitop"], d["bitfield"]), (2, 0), "{d:?}");
    assert!(new.iter().filter(|&&n| n).count() >= 490, "{new:?}");
    let before = command_calls(&mut conn).await;
    assert!(bloom.exists_many(&mid).await.unwrap().iter().all(|&p| p));
    let after = command_calls(&mut conn).await;
    let d = delta(&before, &after, &commands);
    assert_eq!(
        (d["getrange"], d["bitfield_ro"] + d["bitfield"]),
        (1, 0),
        "{d:?}"
    );

    // A larger dense batch: one BITOP (the merge's OR; the first dense add, above, also
    // probed with an AND whether its batch set a new bit, and it did, so this one does not
    // probe), no BITFIELD.
    let before = command_calls(&mut conn).await;
    bloom.add_many(&items).await.unwrap();
    let after = command_calls(&mut conn).await;
    let d = delta(&before, &after, &commands);
    assert_eq!(d["bitop"], 1, "{d:?}");
    assert_eq!(d["bitfield"], 0, "{d:?}");
    assert_eq!(d["setbit"], 0, "{d:?}");

    // A dense check: one GETRANGE, no BITFIELD_RO.
    let before = command_calls(&mut conn).await;
    assert!(bloom.exists_many(&items).await.unwrap().iter().all(|&p| p));
    let after = command_calls(&mut conn).await;
    let d = delta(&before, &after, &commands);
    assert_eq!(d["getrange"], 1, "{d:?}");
    assert_eq!(d["bitfield_ro"] + d["bitfield"] + d["getbit"], 0, "{d:?}");

    // The Scripts engine never goes dense, whatever the batch.
    let scripts = filter(&conn, "dense-commands-scripts", Engine::Scripts).await;
    let before = command_calls(&mut conn).await;
    scripts.add_many(&items).await.unwrap();
    scripts.exists_many(&items).await.unwrap();
    let after = command_calls(&mut conn).await;
    let d = delta(&before, &after, &commands);
    assert_eq!(d["bitop"] + d["getrange"], 0, "{d:?}");
    assert!(d["setbit"] >= (BATCH * 14) as u64, "{d:?}");
}

#[tokio::test]
async fn a_dense_merge_keeps_the_ttl() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let bloom = filter(&conn, "dense-ttl", Engine::Fast).await;
    bloom.add("first").await.unwrap();
    assert!(bloom.expire(Duration::from_secs(100)).await.unwrap());

    let items = batch_items();
    let new = bloom.add_many(&items).await.unwrap();
    assert!(new[0], "the batch was written");
    let ttl = common::pttl(&mut conn, bloom.key()).await;
    assert!(
        (99_000..=100_000).contains(&ttl),
        "PTTL {ttl} ms after a dense merge, want 99..=100 s"
    );

    // And a key without a TTL does not get one.
    let persistent = filter(&conn, "dense-no-ttl", Engine::Fast).await;
    persistent.add("first").await.unwrap();
    persistent.add_many(&items).await.unwrap();
    assert_eq!(common::pttl(&mut conn, persistent.key()).await, -1);
}

#[tokio::test]
async fn no_scratch_key_is_left_behind() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let bloom = filter(&conn, "dense-scratch", Engine::Fast).await;
    let items = batch_items();
    bloom.add_many(&items).await.unwrap();
    bloom.add_many(&items[..5_000]).await.unwrap();
    bloom.exists_many(&items).await.unwrap();

    let scratch = scratch_key(bloom.key());
    assert!(
        !common::key_exists(&mut conn, &scratch).await,
        "{scratch} exists"
    );
    assert_eq!(
        scratch_keys(&mut conn, bloom.key()).await,
        Vec::<String>::new()
    );
    // The only key of this filter is its own.
    assert!(common::key_exists(&mut conn, bloom.key()).await);
}

#[tokio::test]
async fn dense_calls_on_a_hash_are_wrong_type_and_leave_it_alone() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("dense-hash");
    let added: i64 = redis::cmd("HSET")
        .arg(&key)
        .arg("field")
        .arg("value")
        .arg("other")
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(added, 2);
    let hash = |mut conn: MultiplexedConnection, key: String| async move {
        let fields: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        (fields, kind, common::pttl(&mut conn, &key).await)
    };
    let want = hash(conn.clone(), key.clone()).await;
    assert_eq!(want.1, "hash");

    let bloom = RedisBloom::new(conn.clone(), &key, BITS).unwrap();
    let items = batch_items();
    for (op, result) in [
        ("add_many", bloom.add_many(&items).await),
        ("exists_many", bloom.exists_many(&items).await),
    ] {
        match result {
            Err(Error::WrongType { key: got, .. }) => assert_eq!(got, key, "{op}"),
            other => panic!("{op}: expected Error::WrongType, got {other:?}"),
        }
    }
    assert_eq!(
        hash(conn.clone(), key.clone()).await,
        want,
        "the hash changed"
    );
    assert!(
        !common::key_exists(&mut conn, &scratch_key(&key)).await,
        "scratch key left"
    );
}

/// A filter over the 4 MiB the dense path reads whole (40,000,000 bits = 5,000,000 bytes): a
/// check of 60,000 items reads it by ranges (`GETRANGE`s of 128 KiB, src/io/ranges.rs; these
/// items touch every range) and answers exactly as `BITFIELD_RO` does 1,000 items at a time (too
/// few to pay for reading the ranges), with no false negative, and items whose bits lie past
/// the first 4 MiB found (a read that stopped at 4 MiB would find them absent). The adds, 1,000
/// at a time, are too few to pay for a merge by ranges and go by `BITFIELD`.
#[tokio::test]
async fn a_check_of_a_filter_over_4_mib_reads_it_by_ranges() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let bits = 40_000_000;
    let fast = RedisBloom::new(conn.clone(), common::unique_key("chunked"), bits).unwrap();
    let added: Vec<String> = (0..30_000).map(|i| format!("chunk-added:{i}")).collect();
    for batch in added.chunks(1_000) {
        fast.add_many(batch).await.unwrap();
    }
    let mut probes = added.clone();
    probes.extend((0..30_000).map(|i| format!("chunk-absent:{i}")));
    // 60,000 items x 14 bits x 128 >= 5,000,000 bytes: read by ranges. 1,000 at a time, one
    // after the other: a batch waits a moment for others to share a read, none comes, and it
    // goes by BITFIELD_RO.
    let dense = fast.exists_many(&probes).await.unwrap();
    let mut by_bitfield = Vec::new();
    for batch in probes.chunks(1_000) {
        by_bitfield.extend(fast.exists_many(batch).await.unwrap());
    }
    assert_eq!(dense, by_bitfield);
    assert!(dense[..30_000].iter().all(|p| *p), "no false negatives");
    // Most added items have a bit past the first 4 MiB: had that not been read (zeros), they
    // would all read as absent.
    let in_second_chunk = added
        .iter()
        .filter(|item| {
            redbloom::gozero_locations(item.as_bytes(), bits)
                .iter()
                .any(|&o| o / 8 >= 4 << 20)
        })
        .count();
    assert!(in_second_chunk > 20_000, "{in_second_chunk}");
    let absent = dense[30_000..].iter().filter(|p| !**p).count();
    assert!(
        absent > 29_900,
        "{absent} of 30,000 absent items read as absent"
    );
}
