//! Growing filters (SPEC.md §4 "growing") against real redis-servers: a million items from a
//! first level of a thousand at the promised false-positive rate, concurrent clients across
//! level boundaries, a kill -9 mid-growth with an AOF, mismatches, wrong types, clear, expire
//! and a full filter, and sharded filters whose shards grow by themselves.
//!
//! The level structure is checked from the keys themselves: the counts hash
//! `{KEY}:redbloom:LEN:KEY:grow:HASH` (field i = new items level i took) and the strings that
//! hold the levels, `{KEY}:redbloom:LEN:KEY:grow:HASH:S` (levels share a string, a segment, up
//! to 4 MiB: [`GrowingBloom::levels`] says where each level lies). Level i of a part holds
//! `first·F^i` new items, `first` being `ceil(N / shards)`; a level is made by the first new
//! item past the newest level's capacity, so a part that took `items` new items has the fewest
//! levels L with `Σ_{i<L} first·F^i ≥ items`.

mod common;

use common::keys_like;
use common::server::RedisServer;
use redbloom::{Error, GrowingBloom, KeyTtl, RedisBloom, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

type Conn = MultiplexedConnection;

fn growing(conn: Conn, key: &str, first: u64, fpr: f64, growth: u32) -> GrowingBloom<Conn> {
    GrowingBloom::builder(key)
        .expected_items(first)
        .false_positive_rate(fpr)
        .growth(growth)
        .build(conn)
        .unwrap()
}

/// Level i's capacity in a part whose first level holds `first`.
fn level_capacity(first: u64, growth: u64, level: usize) -> u64 {
    first * growth.pow(level as u32)
}

/// The new items the first `levels` levels take together.
fn capacity_of(levels: usize, first: u64, growth: u64) -> u64 {
    (0..levels).map(|i| level_capacity(first, growth, i)).sum()
}

/// The levels a part that took `items` new items has: the fewest L with
/// `Σ_{i<L} first·growth^i ≥ items` (no level at all before the first new item).
fn predicted_levels(items: u64, first: u64, growth: u64) -> usize {
    let mut levels = 0;
    while capacity_of(levels, first, growth) < items {
        levels += 1;
    }
    levels
}

/// Every key matching `pattern`, with its `DUMP` and whether it has a TTL: a snapshot that
/// any write changes.
async fn snapshot(conn: &mut Conn, pattern: &str) -> Vec<(String, Vec<u8>, bool)> {
    let mut all = Vec::new();
    for key in keys_like(conn, pattern).await {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let ttl = common::pttl(conn, &key).await;
        all.push((key, dump, ttl >= 0));
    }
    all
}

/// Whether `key` is a counts hash (the companion `grow:HASH` of a filter's key or a shard's, no
/// level number after it).
fn is_counts_key(key: &str) -> bool {
    common::companion_of(key)
        .and_then(|(_, name)| name.strip_prefix("grow:"))
        .is_some_and(|hash| !hash.contains(':'))
}

/// The counts keys among the keys matching `pattern`.
async fn counts_keys(conn: &mut Conn, pattern: &str) -> Vec<String> {
    let mut counts: Vec<String> = keys_like(conn, pattern)
        .await
        .into_iter()
        .filter(|k| is_counts_key(k))
        .collect();
    counts.sort();
    counts
}

/// The one counts key of the one-key filter `key`.
async fn counts_key(conn: &mut Conn, key: &str) -> String {
    let counts = counts_keys(conn, &format!("{}*", common::companion(key, "grow:"))).await;
    assert_eq!(counts.len(), 1, "one counts hash for {key}: {counts:?}");
    counts.into_iter().next().unwrap()
}

/// The name of the counts key of the one-key filter `key` after the key's own (`grow:HASH`):
/// it depends on the parameters only, so that a filter of the same parameters at another key
/// `other` keeps its counts at `common::companion(other, NAME)`.
async fn counts_name(conn: &mut Conn, key: &str) -> String {
    let counts = counts_key(conn, key).await;
    counts
        .strip_prefix(&common::companion(key, ""))
        .unwrap_or_else(|| panic!("{counts} is a companion of {key}"))
        .to_owned()
}

/// The counts hash at `counts`, level by level: its fields must be exactly 0..L-1.
async fn read_counts(conn: &mut Conn, counts: &str) -> Vec<u64> {
    let map: HashMap<u64, u64> = redis::cmd("HGETALL")
        .arg(counts)
        .query_async(conn)
        .await
        .unwrap();
    let levels = map.len() as u64;
    (0..levels)
        .map(|i| {
            *map.get(&i).unwrap_or_else(|| {
                panic!("{counts}: the fields are not 0..{}: {map:?}", levels - 1)
            })
        })
        .collect()
}

/// Checks a part's levels from its keys alone and returns its counts: every level below the
/// newest took exactly its capacity (no level made before the one below was full, none made
/// twice for one fill), the newest took at least one item (it was made for one) and at most
/// its capacity, and the strings that exist are exactly the segments of levels 0..L-1 (a
/// filter at 1% whose first level takes `first`).
async fn assert_consistent(conn: &mut Conn, counts: &str, first: u64, growth: u64) -> Vec<u64> {
    let taken = read_counts(conn, counts).await;
    let levels = taken.len();
    assert!(levels > 0, "{counts}: no level");
    for (i, &n) in taken.iter().enumerate() {
        let cap = level_capacity(first, growth, i);
        if i + 1 < levels {
            assert_eq!(
                n, cap,
                "{counts}: level {i} below the newest took {n} items, not its capacity {cap} \
                 (all: {taken:?})"
            );
        } else {
            assert!(
                (1..=cap).contains(&n),
                "{counts}: the newest level {i} took {n} items, outside 1..={cap} (all: {taken:?})"
            );
        }
    }
    // A dense add's transient keys (its scratch keys and its lease, each with a TTL, deleted
    // when it is done) are left by a writer killed mid-merge: not segments.
    let strings: Vec<String> = keys_like(conn, &format!("{counts}:*"))
        .await
        .into_iter()
        .filter(|key| !key.ends_with(":lease") && !key.contains(":scratch:"))
        .collect();
    let shapes = growing(conn.clone(), "shapes", first, 0.01, growth as u32).levels();
    let mut want: Vec<String> = shapes[..levels]
        .iter()
        .map(|level| format!("{counts}:{}", level.segment))
        .collect();
    want.sort();
    want.dedup();
    assert_eq!(
        strings, want,
        "{counts}: the segment strings are those of the levels in the counts hash"
    );
    taken
}

/// A deterministic shuffle (xorshift64), so that a failure can be replayed.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// The bound P on a check's false-positive rate is the sum of the levels' rates
/// `P·(1−r)·r^i` over infinitely many levels; with L levels made (the newest not full) the
/// rate is designed to be at most `Σ_{i<L} P·(1−r)·r^i = P·(1−r^L) < P`, so P is not
/// reached. On 1,000,000 probes the binomial standard deviation at 0.01 is
/// `sqrt(0.01·0.99/10^6) ≈ 0.0001`, 1% of P: a 10% margin is ten deviations, which chance
/// alone never crosses (and the items are fixed, so the outcome is the same every run).
const FPR_MARGIN_1M: f64 = 1.1;

/// Capacity 1,000, P = 0.01, growth 2, a million distinct items: every one found, the rate
/// measured on a million others at or below P, the levels those the items made, and the new
/// items counted exactly as the adds reported them.
#[tokio::test]
async fn a_million_items_from_a_first_level_of_a_thousand() {
    const N: u64 = 1_000_000;
    const P: f64 = 0.01;
    const BATCH: usize = 50_000;
    let redis = common::redis().await;
    let key = common::unique_key("grow-million");
    let mut conn = redis.connection().await;
    let bloom = growing(conn.clone(), &key, 1_000, P, 2);
    let items: Vec<String> = (0..N).map(|i| format!("million:{i}")).collect();

    let started = Instant::now();
    let mut news = 0u64;
    for batch in items.chunks(BATCH) {
        let new = bloom.add_many(batch).await.unwrap();
        assert_eq!(new.len(), batch.len(), "one answer per item");
        news += new.iter().filter(|&&n| n).count() as u64;
    }
    let add_time = started.elapsed();

    let started = Instant::now();
    let mut missing = Vec::new();
    for (b, batch) in items.chunks(BATCH).enumerate() {
        let found = bloom.exists_many(batch).await.unwrap();
        assert_eq!(found.len(), batch.len(), "one answer per item");
        missing.extend(
            found
                .iter()
                .enumerate()
                .filter(|(_, &f)| !f)
                .map(|(i, _)| &items[b * BATCH + i]),
        );
    }
    let check_time = started.elapsed();
    assert!(
        missing.is_empty(),
        "{} added items are not found (false negatives), first {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );

    let started = Instant::now();
    let absent: Vec<String> = (0..N).map(|i| format!("absent:{i}")).collect();
    let mut false_positives = 0u64;
    for batch in absent.chunks(BATCH) {
        let found = bloom.exists_many(batch).await.unwrap();
        false_positives += found.iter().filter(|&&f| f).count() as u64;
    }
    let probe_time = started.elapsed();
    let measured = false_positives as f64 / N as f64;

    let info = bloom.info().await.unwrap();
    let levels = predicted_levels(info.items, 1_000, 2);
    let bound: f64 = (0..info.levels)
        .map(|i| redbloom::growing_level_fpr(P, bloom.tightening(), i))
        .sum();
    println!(
        "1M items: add {add_time:?}, check {check_time:?}, 1M absent probes {probe_time:?}; \
         {} new, {} levels, capacity {}; measured false-positive rate {measured:.5} \
         (bound of the levels made {bound:.5}, info's estimate {:.5}, P {P})",
        info.items, info.levels, info.capacity, info.filter.estimated_fpr
    );
    assert_eq!(
        info.items, news,
        "info's items are the adds' `true` answers"
    );
    assert!(
        news >= (N as f64 * (1.0 - P * FPR_MARGIN_1M)) as u64 && news <= N,
        "{news} of {N} distinct items reported new: more than P of them found present"
    );
    assert_eq!(
        info.levels as usize, levels,
        "{} new items from a first level of 1,000 doubling make {levels} levels",
        info.items
    );
    assert_eq!(info.capacity, capacity_of(levels, 1_000, 2));
    assert!(info.items <= info.capacity, "{info:?}");
    assert_eq!(info.max_levels, bloom.max_levels());
    assert!(
        measured <= P * FPR_MARGIN_1M,
        "false-positive rate {measured} on {N} absent items is above P = {P} (margin \
         {FPR_MARGIN_1M})"
    );
    // Finer: the rate is the made levels' (their sum bounds it) and info's estimate from the
    // bits set, each within five standard deviations of the binomial count (a deterministic
    // outcome: the items and their hashes are fixed).
    let sigma = (measured * (1.0 - measured) / N as f64).sqrt();
    assert!(
        measured <= bound + 5.0 * sigma,
        "false-positive rate {measured} above the sum {bound} of the levels' rates"
    );
    assert!(
        (measured - info.filter.estimated_fpr).abs() <= 5.0 * sigma,
        "false-positive rate {measured}, info estimates {}",
        info.filter.estimated_fpr
    );
    assert!(
        measured > 0.0,
        "no false positive at all on {N} probes: the probes test nothing"
    );
    let counts = counts_key(&mut conn, &key).await;
    let taken = assert_consistent(&mut conn, &counts, 1_000, 2).await;
    assert_eq!(taken.iter().sum::<u64>(), info.items);
    bloom.clear().await.unwrap();
}

/// Sixteen clients, each with its own connection and handle, add overlapping shared items
/// and their own, in single adds, small batches and batches of 64 or more (the bulk add that
/// merges unless the counts changed meanwhile), from a first level of 500 across four
/// level boundaries. No item is reported new twice, the news add up to the items counted,
/// every item is found, every level below the newest took exactly its capacity (no level
/// made twice for one fill), and the filter has the levels one client adding the same items
/// makes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_fill_across_level_boundaries() {
    const CLIENTS: usize = 16;
    const SHARED: usize = 4_000;
    const SHARED_PER_CLIENT: usize = 1_000;
    const OWN: usize = 250;
    const FIRST: u64 = 500;
    const P: f64 = 0.01;
    let redis = common::redis().await;
    let key = common::unique_key("grow-concurrent");
    let mut conn = redis.connection().await;
    let start = Arc::new(Barrier::new(CLIENTS));
    let (bitop_before, bitfield_before) = (
        common::calls(&mut conn, "bitop").await,
        common::calls(&mut conn, "bitfield").await,
    );
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let bloom = growing(redis.connection().await, &key, FIRST, P, 2);
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            // Each shared item is in the ranges of four clients.
            let mut items: Vec<String> = (0..SHARED_PER_CLIENT)
                .map(|j| format!("shared:{}", (client * 250 + j) % SHARED))
                .chain((0..OWN).map(|j| format!("own:{client}:{j}")))
                .collect();
            shuffle(&mut items, client as u64 + 1);
            start.wait().await;
            let mut answers = Vec::with_capacity(items.len());
            let mut at = 0;
            let mut round = 0;
            while at < items.len() {
                // Single adds and small batches (one script an item) and, now and then, a
                // batch of 64 or more (read, applied here, merged unless the counts changed).
                let size = [1, 7, 1, 16, 3, 1, 12, 80, 1, 5, 130][round % 11].min(items.len() - at);
                let batch = &items[at..at + size];
                let new = match size {
                    1 => vec![bloom.add(&batch[0]).await.unwrap()],
                    _ => bloom.add_many(batch).await.unwrap(),
                };
                assert_eq!(new.len(), size);
                answers.extend(batch.iter().cloned().zip(new));
                at += size;
                round += 1;
            }
            answers
        }));
    }
    let mut news: BTreeMap<String, u32> = BTreeMap::new();
    for task in tasks {
        for (item, new) in task.await.unwrap() {
            *news.entry(item).or_default() += u32::from(new);
        }
    }
    let elapsed = started.elapsed();
    // Both ways of adding ran: merges (BITOP) and scripts (BITFIELD SET).
    let merges = common::calls(&mut conn, "bitop").await - bitop_before;
    let script_sets = common::calls(&mut conn, "bitfield").await - bitfield_before;
    assert!(
        merges > 0 && script_sets > 0,
        "merges {merges}, script writes {script_sets}"
    );
    let distinct: Vec<String> = news.keys().cloned().collect();
    assert_eq!(distinct.len(), SHARED + CLIENTS * OWN);
    let twice: Vec<_> = news.iter().filter(|(_, &n)| n > 1).collect();
    assert!(
        twice.is_empty(),
        "items reported new by more than one client: {twice:?}"
    );
    let total_news: u64 = news.values().map(|&n| u64::from(n)).sum();
    let never_new = distinct.len() as u64 - total_news;
    let info = bloom_info(&redis, &key, FIRST, P).await;
    assert_eq!(
        info.items, total_news,
        "the items counted are the adds' `true` answers over all clients"
    );
    assert!(
        (never_new as f64) <= 2.0 * P * distinct.len() as f64,
        "{never_new} of {} items were found present at their first add: far more than P",
        distinct.len()
    );
    let reader = growing(redis.connection().await, &key, FIRST, P, 2);
    let found = reader.exists_many(&distinct).await.unwrap();
    let missing: Vec<_> = distinct
        .iter()
        .zip(&found)
        .filter(|(_, &f)| !f)
        .map(|(i, _)| i)
        .collect();
    assert!(missing.is_empty(), "false negatives: {missing:?}");
    // And in batches of two (a read per level, not the levels read whole).
    for pair in distinct.chunks(2) {
        assert_eq!(
            reader.exists_many(pair).await.unwrap(),
            vec![true; pair.len()],
            "false negative among {pair:?}"
        );
    }
    let levels = predicted_levels(info.items, FIRST, 2);
    assert_eq!(info.levels as usize, levels, "{info:?}");
    assert!(
        levels >= 5,
        "the clients crossed four level boundaries: {levels} levels"
    );
    let counts = counts_key(&mut conn, &key).await;
    let taken = assert_consistent(&mut conn, &counts, FIRST, 2).await;
    assert_eq!(taken.iter().sum::<u64>(), info.items);

    // One client adding the same distinct items, in another order, to a fresh filter.
    let alone_key = common::unique_key("grow-concurrent-alone");
    let alone = growing(redis.connection().await, &alone_key, FIRST, P, 2);
    for batch in distinct.chunks(100) {
        alone.add_many(batch).await.unwrap();
    }
    let alone_info = alone.info().await.unwrap();
    println!(
        "16 clients: {} distinct items in {elapsed:?} ({merges} merges); {} new, {} levels; \
         one client: {} new, {} levels",
        distinct.len(),
        info.items,
        info.levels,
        alone_info.items,
        alone_info.levels
    );
    assert_eq!(
        alone_info.levels, info.levels,
        "one client makes as many levels"
    );
    // Both counts are the distinct items less those found present by a false positive at
    // their first add (about P·items at most), which depends on the order.
    let tolerance = (2.0 * P * distinct.len() as f64) as u64;
    assert!(
        alone_info.items.abs_diff(info.items) <= tolerance,
        "items {} (16 clients) and {} (one client) differ by more than {tolerance}",
        info.items,
        alone_info.items
    );
    reader.clear().await.unwrap();
    alone.clear().await.unwrap();
}

async fn bloom_info(
    redis: &common::TestRedis,
    key: &str,
    first: u64,
    fpr: f64,
) -> redbloom::GrowingInfo {
    growing(redis.connection().await, key, first, fpr, 2)
        .info()
        .await
        .unwrap()
}

/// A connection to `url` with a 10 s response timeout (an AOF fsync'd at every write is slow
/// on a busy machine), retried while the server starts or loads its AOF.
async fn connect(url: &str) -> Conn {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection_with_config(&config)
            .await;
        if let Ok(mut conn) = conn {
            let ready: redis::RedisResult<i64> = redis::cmd("EXISTS")
                .arg("ready")
                .query_async(&mut conn)
                .await;
            if ready.is_ok() {
                return conn;
            }
        }
        assert!(Instant::now() < deadline, "{url} not ready after 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client adds batches across level boundaries on a server with an AOF fsync'd at every
/// write; the server is killed -9 mid-way and restarted, three times at growing sizes. After
/// each restart the counts hash is consistent with the level strings (every level below the
/// newest took exactly its capacity), it lost no acknowledged new item (and holds at most the
/// batch in flight more), every item of an acknowledged add is found, and the filter keeps
/// growing (one more level, still no false negative).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_growth_with_aof() {
    const FIRST: u64 = 200;
    const P: f64 = 0.01;
    const BATCH: usize = 100;
    const BATCHES: usize = 2_000;
    // Batches acknowledged before each kill: about 600, 2,100 and 5,600 items, past the
    // first level boundaries (200, 600, 1,400, 3,000 and 6,200 items).
    const KILL_AFTER: [usize; 3] = [9, 30, 80];
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("redis-server");
    let url = server.url();
    let key = "grow-kill";
    // Batches of 100 (the bulk add: read, applied here, merged) and of 40 (one script an
    // item), in turn.
    let batch = |b: usize| -> Vec<String> {
        let size = if b.is_multiple_of(2) { BATCH } else { 40 };
        (0..size).map(|i| format!("kill:{b}:{i}")).collect()
    };

    // Batches acknowledged so far (the writer of each round starts again at the first batch
    // not acknowledged), and the new items counted before the round began.
    let mut acked = 0;
    let mut stored = 0u64;
    let mut counts = String::new();
    let mut taken = Vec::new();
    for kill_after in KILL_AFTER {
        let bloom = growing(connect(&url).await, key, FIRST, P, 2);
        let round_acked = Arc::new(AtomicUsize::new(acked));
        let round_news = Arc::new(AtomicU64::new(0));
        let writer = {
            let (round_acked, round_news) = (Arc::clone(&round_acked), Arc::clone(&round_news));
            tokio::spawn(async move {
                for b in acked..BATCHES {
                    let new = bloom.add_many(&batch(b)).await?;
                    round_news
                        .fetch_add(new.iter().filter(|&&n| n).count() as u64, Ordering::SeqCst);
                    round_acked.store(b + 1, Ordering::SeqCst);
                }
                Ok::<_, Error>(())
            })
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while round_acked.load(Ordering::SeqCst) < kill_after {
            assert!(
                Instant::now() < deadline,
                "only {} batches acknowledged in 30 s",
                round_acked.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        server.kill();
        let outcome = tokio::time::timeout(Duration::from_secs(30), writer)
            .await
            .expect("the writer stops after the kill")
            .unwrap();
        match outcome {
            Err(Error::Connection(_) | Error::Timeout(_)) => {}
            other => panic!("the writer was still writing at the kill: {other:?}"),
        }
        acked = round_acked.load(Ordering::SeqCst);
        let news = round_news.load(Ordering::SeqCst);
        assert!(acked < BATCHES, "the kill came mid-way");
        server.restart().expect("restart");

        let mut conn = connect(&url).await;
        counts = counts_key(&mut conn, key).await;
        taken = assert_consistent(&mut conn, &counts, FIRST, 2).await;
        let now: u64 = taken.iter().sum();
        println!(
            "killed after {acked} acknowledged batches ({} new items acknowledged); after the \
             restart: {} levels, counts {taken:?}",
            stored + news,
            taken.len()
        );
        // The acknowledged news are all counted; at most the batch in flight at the kill more.
        assert!(
            (stored + news..=stored + news + BATCH as u64).contains(&now),
            "the counts hold {now} new items; before this round {stored}, and its acknowledged \
             adds made {news}"
        );
        assert_eq!(
            taken.len(),
            predicted_levels(now, FIRST, 2),
            "{now} items make {} levels",
            predicted_levels(now, FIRST, 2)
        );
        stored = now;
        let bloom = growing(conn.clone(), key, FIRST, P, 2);
        let acked_items: Vec<String> = (0..acked).flat_map(batch).collect();
        let found = bloom.exists_many(&acked_items).await.unwrap();
        let lost: Vec<_> = acked_items
            .iter()
            .zip(&found)
            .filter(|(_, &f)| !f)
            .map(|(i, _)| i)
            .collect();
        assert!(
            lost.is_empty(),
            "{} acknowledged items lost: {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
    }
    assert!(
        taken.len() >= 5,
        "the kills came across several levels: {taken:?}"
    );

    // It keeps growing: enough new items to fill the newest level and make one more (1,000
    // past the full levels, of the 6,400 or more the next level takes).
    let mut conn = connect(&url).await;
    let bloom = growing(conn.clone(), key, FIRST, P, 2);
    let levels_before = taken.len();
    let more = capacity_of(levels_before, FIRST, 2) - stored + 1_000;
    let after: Vec<String> = (0..more).map(|i| format!("after:{i}")).collect();
    let mut news = 0u64;
    for chunk in after.chunks(1_000) {
        news += bloom
            .add_many(chunk)
            .await
            .unwrap()
            .iter()
            .filter(|&&n| n)
            .count() as u64;
    }
    let info = bloom.info().await.unwrap();
    assert_eq!(info.items, stored + news);
    assert_eq!(
        info.levels as usize,
        levels_before + 1,
        "one more level after the restarts"
    );
    let taken = assert_consistent(&mut conn, &counts, FIRST, 2).await;
    assert_eq!(taken.iter().sum::<u64>(), info.items);
    let everything: Vec<String> = (0..acked).flat_map(batch).chain(after).collect();
    let found = bloom.exists_many(&everything).await.unwrap();
    assert_eq!(
        found.iter().filter(|&&f| !f).count(),
        0,
        "false negatives after growing on"
    );
}

fn assert_mismatch(what: &str, key: &str, outcome: Result<impl std::fmt::Debug, Error>) {
    match outcome {
        Err(Error::ParamsMismatch { key: got, .. }) => assert_eq!(got, key, "{what}"),
        other => panic!("{what}: expected ParamsMismatch, got {other:?}"),
    }
}

fn assert_wrong_type(what: &str, outcome: Result<impl std::fmt::Debug, Error>) {
    match outcome {
        Err(Error::WrongType { .. }) => {}
        other => panic!("{what}: expected WrongType, got {other:?}"),
    }
}

/// Other parameters at a growing filter's key, a plain filter's key (go-zero's bits, with and
/// without stored parameters) opened as growing, and a key of another type at the counts
/// key: each refused with its typed error and nothing written. `clear` removes every key;
/// `expire` sets a TTL on every key, and on a level made afterwards. With two levels of
/// 10 and 20, the 31st new item is refused as `Full` and nothing is written, while an add of
/// an item present still answers `false`.
#[tokio::test]
async fn mismatch_wrong_type_clear_expire_info_and_full() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;

    // Other parameters at the same key.
    let key = common::unique_key("grow-mismatch");
    let pattern = format!("*{key}*");
    let bloom = growing(conn.clone(), &key, 100, 0.01, 2);
    let items: Vec<String> = (0..250).map(|i| format!("m:{i}")).collect();
    bloom.add_many(&items).await.unwrap();
    assert_eq!(bloom.info().await.unwrap().levels, 2);
    let before = snapshot(&mut conn, &pattern).await;
    assert_eq!(
        before.len(),
        3,
        "params, counts, one string for both levels: {before:?}"
    );
    let builder = || {
        GrowingBloom::builder(&key)
            .expected_items(100)
            .false_positive_rate(0.01)
    };
    let others: Vec<(&str, GrowingBloom<Conn>)> = vec![
        ("growth 3", builder().growth(3).build(conn.clone()).unwrap()),
        (
            "capacity 200",
            GrowingBloom::builder(&key)
                .expected_items(200)
                .false_positive_rate(0.01)
                .growth(2)
                .build(conn.clone())
                .unwrap(),
        ),
        (
            "fpr 0.02",
            GrowingBloom::builder(&key)
                .expected_items(100)
                .false_positive_rate(0.02)
                .growth(2)
                .build(conn.clone())
                .unwrap(),
        ),
        (
            "tightening 0.9",
            builder()
                .growth(2)
                .tightening(0.9)
                .build(conn.clone())
                .unwrap(),
        ),
        (
            "max_levels 5",
            builder()
                .growth(2)
                .max_levels(5)
                .build(conn.clone())
                .unwrap(),
        ),
        (
            "2 shards",
            builder().growth(2).shards(2).build(conn.clone()).unwrap(),
        ),
    ];
    for (what, other) in &others {
        assert_mismatch(what, &key, other.add("new-item").await);
        assert_mismatch(what, &key, other.add_many(&["x", "m:1"]).await);
        assert_mismatch(what, &key, other.exists("m:1").await);
        assert_mismatch(what, &key, other.exists_many(&["m:1", "x"]).await);
        assert_mismatch(what, &key, other.clear().await);
        assert_mismatch(what, &key, other.expire(Duration::from_secs(5)).await);
    }
    match others[0].1.add("x").await {
        Err(Error::ParamsMismatch {
            stored, requested, ..
        }) => {
            assert!(
                stored.contains("kind=growing") && stored.contains("growth=2"),
                "{stored}"
            );
            assert!(requested.contains("growth=3"), "{requested}");
        }
        other => panic!("{other:?}"),
    }
    let plain = RedisBloom::builder(&key)
        .layout(redbloom::Layout::Native)
        .expected_items(100)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert_mismatch("a plain native filter", &key, plain.add("x").await);
    let window = WindowBloom::builder(&key, Duration::from_secs(60))
        .expected_items(100)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert_mismatch("a window filter", &key, window.add("x").await);
    assert_eq!(
        snapshot(&mut conn, &pattern).await,
        before,
        "a refused client wrote nothing"
    );
    assert!(
        bloom.exists_many(&items).await.unwrap().iter().all(|&f| f),
        "the filter still answers"
    );

    // A plain go-zero filter's key (with redbloom's stored parameters), opened as growing.
    let plain_key = common::unique_key("grow-over-plain");
    let gozero = RedisBloom::new(conn.clone(), plain_key.as_str(), 1_000).unwrap();
    gozero.add_many(&["a", "b", "c"]).await.unwrap();
    let plain_before = snapshot(&mut conn, &format!("*{plain_key}*")).await;
    assert!(common::key_exists(&mut conn, &plain_key).await);
    let over = growing(conn.clone(), &plain_key, 100, 0.01, 2);
    assert_mismatch("growing over go-zero", &plain_key, over.add("x").await);
    assert_mismatch("growing over go-zero", &plain_key, over.exists("a").await);
    assert_mismatch("growing over go-zero", &plain_key, over.clear().await);
    assert_eq!(
        snapshot(&mut conn, &format!("*{plain_key}*")).await,
        plain_before,
        "the plain filter is untouched"
    );
    // go-zero's own bits, no parameters stored at all.
    let bare_key = common::unique_key("grow-over-gozero-bits");
    common::set_bytes(&mut conn, &bare_key, &common::gozero::HELLO_WORLD_64_BITS).await;
    let over = growing(conn.clone(), &bare_key, 100, 0.01, 2);
    match over.add("x").await {
        Err(Error::ParamsMismatch { stored, .. }) => {
            assert!(stored.starts_with("no parameters"), "{stored}")
        }
        other => panic!("growing over go-zero bits: {other:?}"),
    }
    assert_mismatch(
        "growing over go-zero bits",
        &bare_key,
        over.add_many(&["x", "y"]).await,
    );
    assert_mismatch(
        "growing over go-zero bits",
        &bare_key,
        over.exists("x").await,
    );
    assert_mismatch(
        "growing over go-zero bits",
        &bare_key,
        over.expire(Duration::from_secs(5)).await,
    );
    assert_eq!(
        keys_like(&mut conn, &format!("*{bare_key}*")).await,
        std::slice::from_ref(&bare_key),
        "nothing made beside go-zero's bits"
    );
    let hex: String = common::gozero::HELLO_WORLD_64_BITS
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(common::key_hex(&mut conn, &bare_key).await, hex);
    assert_eq!(common::pttl(&mut conn, &bare_key).await, -1);

    // A list at the counts key. The counts' name depends on the parameters only: learn it
    // from a filter of the same parameters at another key.
    let counts_name = counts_name(&mut conn, &key).await;
    let typed_key = common::unique_key("grow-wrong-type");
    let typed_counts = common::companion(&typed_key, &counts_name);
    let () = redis::cmd("RPUSH")
        .arg(&typed_counts)
        .arg("not")
        .arg("a hash")
        .query_async(&mut conn)
        .await
        .unwrap();
    let typed_before = snapshot(&mut conn, &format!("*{typed_key}*")).await;
    let typed = growing(conn.clone(), &typed_key, 100, 0.01, 2);
    assert_wrong_type("add", typed.add("x").await);
    assert_wrong_type("add_many", typed.add_many(&["x", "y"]).await);
    assert_wrong_type("exists", typed.exists("x").await);
    assert_wrong_type("exists_many", typed.exists_many(&["x", "y"]).await);
    assert_wrong_type("info", typed.info().await);
    assert_wrong_type("clear", typed.clear().await);
    assert_wrong_type("expire", typed.expire(Duration::from_secs(5)).await);
    assert_eq!(
        snapshot(&mut conn, &format!("*{typed_key}*")).await,
        typed_before,
        "the list is untouched and nothing was made beside it"
    );

    // clear removes every key; a second clear finds nothing.
    assert!(bloom.clear().await.unwrap());
    assert!(
        keys_like(&mut conn, &pattern).await.is_empty(),
        "{:?}",
        keys_like(&mut conn, &pattern).await
    );
    assert!(!bloom.clear().await.unwrap(), "nothing left to clear");
    assert!(!bloom.exists("m:1").await.unwrap());
    assert_eq!(bloom.info().await.unwrap().levels, 0);

    // expire: every key, and a level made afterwards.
    let ttl_key = common::unique_key("grow-expire");
    let ttl_pattern = format!("*{ttl_key}*");
    let expiring = growing(conn.clone(), &ttl_key, 10, 0.01, 2);
    let first: Vec<String> = (0..5).map(|i| format!("t:{i}")).collect();
    expiring.add_many(&first).await.unwrap();
    assert!(expiring.expire(Duration::from_secs(100)).await.unwrap());
    let keys = keys_like(&mut conn, &ttl_pattern).await;
    assert_eq!(
        keys.len(),
        3,
        "params, counts, the segment of level 0: {keys:?}"
    );
    for k in &keys {
        let ttl = common::pttl(&mut conn, k).await;
        assert!((90_000..=100_000).contains(&ttl), "{k}: PTTL {ttl}");
    }
    // Levels made after the expire by small batches (one script an item) and by a batch of
    // 200 (read, applied here, merged: BITOP replaces its destination's TTL).
    let later: Vec<String> = (5..60).map(|i| format!("t:{i}")).collect();
    expiring.add_many(&later).await.unwrap();
    let levels_small = expiring.info().await.unwrap().levels;
    assert!(
        levels_small >= 3,
        "levels made after the expire: {levels_small}"
    );
    let bulk: Vec<String> = (60..260).map(|i| format!("t:{i}")).collect();
    expiring.add_many(&bulk).await.unwrap();
    let info = expiring.info().await.unwrap();
    assert!(
        info.levels > levels_small,
        "levels made after the expire by a batch of 200: {info:?}"
    );
    assert!(
        matches!(info.filter.ttl, KeyTtl::Expires(t) if t > Duration::from_secs(90)),
        "{:?}",
        info.filter.ttl
    );
    // Levels under 4 MiB share one string (tests/growing_dense.rs makes new segments after an
    // expire).
    let keys = keys_like(&mut conn, &ttl_pattern).await;
    assert_eq!(keys.len(), 3, "params, counts, one segment: {keys:?}");
    for k in &keys {
        let ttl = common::pttl(&mut conn, k).await;
        assert!(
            (90_000..=100_000).contains(&ttl),
            "{k}: PTTL {ttl}, a level made after the expire keeps the filter's TTL"
        );
    }
    assert!(expiring.clear().await.unwrap());

    // Full: two levels, of 10 and 20 new items.
    let full_key = common::unique_key("grow-full");
    let full_pattern = format!("*{full_key}*");
    let full = GrowingBloom::builder(&full_key)
        .expected_items(10)
        .false_positive_rate(0.01)
        .growth(2)
        .max_levels(2)
        .build(conn.clone())
        .unwrap();
    assert_eq!((full.max_levels(), full.max_capacity()), (2, 30));
    let mut added = Vec::new();
    let mut i = 0;
    while added.len() < 30 {
        let item = format!("f:{i}");
        if full.add(&item).await.unwrap() {
            added.push(item);
        }
        i += 1;
        assert!(i < 100, "30 new items out of 100 distinct");
    }
    let info = full.info().await.unwrap();
    assert_eq!((info.levels, info.capacity, info.items), (2, 30, 30));
    let fresh = loop {
        let item = format!("f:{i}");
        i += 1;
        if !full.exists(&item).await.unwrap() {
            break item;
        }
    };
    let counts = counts_key(&mut conn, &full_key).await;
    let full_before = snapshot(&mut conn, &full_pattern).await;
    let counts_before = read_counts(&mut conn, &counts).await;
    assert_eq!(counts_before, [10, 20]);
    match full.add(&fresh).await {
        Err(err @ Error::FilterFull { .. }) => {
            let Error::FilterFull {
                ref key,
                added,
                ref reason,
            } = err
            else {
                unreachable!()
            };
            assert_eq!((key.as_str(), added), (full_key.as_str(), 0));
            assert!(
                reason.contains("2 levels") && reason.contains("30 items"),
                "{err}"
            );
        }
        other => panic!("a new item past the last level: {other:?}"),
    }
    // The item before the refused one went in (it was there already).
    assert!(matches!(
        full.add_many(&[added[0].as_str(), fresh.as_str()]).await,
        Err(Error::FilterFull { added: 1, .. })
    ));
    assert_eq!(
        snapshot(&mut conn, &full_pattern).await,
        full_before,
        "a full filter writes nothing for a new item"
    );
    assert_eq!(read_counts(&mut conn, &counts).await, counts_before);
    assert!(!full.exists(&fresh).await.unwrap());
    assert!(!full.add(&added[0]).await.unwrap(), "present: Ok(false)");
    assert_eq!(
        full.add_many(&[&added[1], &added[29]]).await.unwrap(),
        [false, false]
    );
    assert_eq!(snapshot(&mut conn, &full_pattern).await, full_before);
    full.clear().await.unwrap();

    // Full in one batch of 100 distinct items (the dense add): the items before the one past
    // the last level were added, that one and the rest not.
    let batch: Vec<String> = (0..100).map(|i| format!("fb:{i}")).collect();
    let went_in = match full.add_many(&batch).await {
        Err(Error::FilterFull { added, reason, .. }) if reason.contains("2 levels") => added,
        other => panic!("100 new items into 30 places: {other:?}"),
    };
    let info = full.info().await.unwrap();
    assert_eq!((info.levels, info.items), (2, 30), "{info:?}");
    assert_eq!(read_counts(&mut conn, &counts).await, [10, 20]);
    let found = full.exists_many(&batch).await.unwrap();
    let first_absent = found.iter().position(|&f| !f).expect("not all 100 fit");
    assert!(
        found[..first_absent].iter().all(|&f| f) && first_absent >= 30,
        "the items before the first refused one are found: {found:?}"
    );
    assert_eq!(
        went_in as usize, first_absent,
        "the error counts the items that went in"
    );
    let after_full = snapshot(&mut conn, &full_pattern).await;
    assert!(matches!(
        full.add_many(&batch[first_absent..]).await,
        Err(Error::FilterFull { added: 0, .. })
    ));
    assert_eq!(
        full.add_many(&batch[..first_absent]).await.unwrap(),
        vec![false; first_absent],
        "present items are Ok(false) in a full filter"
    );
    assert_eq!(snapshot(&mut conn, &full_pattern).await, after_full);
    full.clear().await.unwrap();
}

/// The bulk paths (a batch of 100 to add is read, applied here and merged; a batch to check
/// is answered from the levels read whole) refuse what the per-item scripts refuse: other
/// parameters at the key, a plain filter's key, go-zero's bits without parameters, and a key
/// of another type at the counts key; each with its typed error, and nothing written (no
/// scratch key left either).
#[tokio::test]
async fn bulk_batches_refuse_mismatches_and_wrong_types() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let hundred: Vec<String> = (0..100).map(|i| format!("b:{i}")).collect();

    let key = common::unique_key("grow-bulk-mismatch");
    let pattern = format!("*{key}*");
    let bloom = growing(conn.clone(), &key, 100, 0.01, 2);
    bloom.add_many(&hundred).await.unwrap();
    let before = snapshot(&mut conn, &pattern).await;
    let others = [
        ("growth 3", growing(conn.clone(), &key, 100, 0.01, 3)),
        ("capacity 200", growing(conn.clone(), &key, 200, 0.01, 2)),
        ("fpr 0.02", growing(conn.clone(), &key, 100, 0.02, 2)),
    ];
    for (what, other) in &others {
        assert_mismatch(what, &key, other.add_many(&hundred).await);
        assert_mismatch(what, &key, other.exists_many(&hundred).await);
    }
    assert_eq!(snapshot(&mut conn, &pattern).await, before);

    let plain_key = common::unique_key("grow-bulk-over-plain");
    let gozero = RedisBloom::new(conn.clone(), plain_key.as_str(), 1_000).unwrap();
    gozero.add_many(&["a", "b", "c"]).await.unwrap();
    let plain_before = snapshot(&mut conn, &format!("*{plain_key}*")).await;
    let over = growing(conn.clone(), &plain_key, 100, 0.01, 2);
    assert_mismatch(
        "over a plain filter",
        &plain_key,
        over.add_many(&hundred).await,
    );
    assert_mismatch(
        "over a plain filter",
        &plain_key,
        over.exists_many(&hundred).await,
    );
    assert_eq!(
        snapshot(&mut conn, &format!("*{plain_key}*")).await,
        plain_before
    );

    let bare_key = common::unique_key("grow-bulk-over-bits");
    common::set_bytes(&mut conn, &bare_key, &common::gozero::HELLO_WORLD_64_BITS).await;
    let over = growing(conn.clone(), &bare_key, 100, 0.01, 2);
    assert_mismatch(
        "over go-zero bits",
        &bare_key,
        over.add_many(&hundred).await,
    );
    assert_mismatch(
        "over go-zero bits",
        &bare_key,
        over.exists_many(&hundred).await,
    );
    assert_eq!(
        keys_like(&mut conn, &format!("*{bare_key}*")).await,
        std::slice::from_ref(&bare_key)
    );

    let counts_name = counts_name(&mut conn, &key).await;
    let typed_key = common::unique_key("grow-bulk-wrong-type");
    let () = redis::cmd("RPUSH")
        .arg(common::companion(&typed_key, &counts_name))
        .arg("not a hash")
        .query_async(&mut conn)
        .await
        .unwrap();
    let typed_before = snapshot(&mut conn, &format!("*{typed_key}*")).await;
    let typed = growing(conn.clone(), &typed_key, 100, 0.01, 2);
    assert_wrong_type("add_many of 100", typed.add_many(&hundred).await);
    assert_wrong_type("exists_many of 100", typed.exists_many(&hundred).await);
    assert_eq!(
        snapshot(&mut conn, &format!("*{typed_key}*")).await,
        typed_before
    );
    bloom.clear().await.unwrap();
}

/// `info` from a client with other parameters is a mismatch, as every other verb's (SPEC.md
/// §4: "a client that opens it ... with other parameters gets a mismatch error"), not an
/// empty filter: the plain kind's `info` checks the stored parameters too.
#[tokio::test]
async fn info_with_other_parameters_is_a_mismatch() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let key = common::unique_key("grow-info-mismatch");
    let bloom = growing(conn.clone(), &key, 100, 0.01, 2);
    bloom.add("x").await.unwrap();
    assert_eq!(bloom.info().await.unwrap().levels, 1);
    let other = growing(conn.clone(), &key, 100, 0.01, 3);
    assert_mismatch("add with growth 3", &key, other.add("y").await);
    assert_mismatch("info with growth 3", &key, other.info().await);
    bloom.clear().await.unwrap();
}

/// A level string that holds another type: the add is refused as `WrongType` and, as that
/// error promises, nothing is changed (no parameters stored, no counts hash made).
#[tokio::test]
async fn wrong_type_at_a_level_key_changes_nothing() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    // Learn the counts' name (it depends on the parameters only) at another key.
    let probe_key = common::unique_key("grow-level-probe");
    let probe = growing(conn.clone(), &probe_key, 100, 0.01, 2);
    probe.add("x").await.unwrap();
    let counts_name = counts_name(&mut conn, &probe_key).await;
    probe.clear().await.unwrap();

    let key = common::unique_key("grow-level-wrong-type");
    let level0 = common::companion(&key, &format!("{counts_name}:0"));
    let () = redis::cmd("RPUSH")
        .arg(&level0)
        .arg("not a string")
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = snapshot(&mut conn, &format!("*{key}*")).await;
    let bloom = growing(conn.clone(), &key, 100, 0.01, 2);
    let hundred: Vec<String> = (0..100).map(|i| format!("b:{i}")).collect();
    assert_wrong_type(
        "a batch of 100 over a list at level 0",
        bloom.add_many(&hundred).await,
    );
    assert_eq!(snapshot(&mut conn, &format!("*{key}*")).await, before);
    assert_wrong_type("add over a list at level 0", bloom.add("x").await);
    assert_eq!(
        keys_like(&mut conn, &format!("*{key}*")).await,
        std::slice::from_ref(&level0),
        "a refused add made keys"
    );
    assert_eq!(snapshot(&mut conn, &format!("*{key}*")).await, before);
}

/// Four shards from a first level of 1,000 (250 a shard): each shard grows by itself, every
/// level below its newest took exactly its capacity, and its levels are those its own items
/// make; 20,000 items (in small batches, then bulk ones) are all found, the rate on 100,000
/// others is below P, and `clear` leaves no key. `info` adds the shards up as
/// `GrowingInfo`'s docs say (items, bits set, bytes; capacity and bits of the levels made)
/// and reports the most levels any shard has: checked with the shards all at 5 levels, and
/// (last) on another filter whose shards have different numbers of levels.
#[tokio::test]
async fn sharded_growing_filters() {
    const SHARDS: u32 = 4;
    const FIRST: u64 = 250; // ceil(1,000 / 4)
    const P: f64 = 0.01;
    let redis = common::redis().await;
    let key = common::unique_key("grow-sharded");
    let mut conn = redis.connection().await;
    let bloom = GrowingBloom::builder(&key)
        .expected_items(1_000)
        .false_positive_rate(P)
        .growth(2)
        .shards(SHARDS)
        .build(conn.clone())
        .unwrap();
    assert_eq!(bloom.shards(), SHARDS);
    assert_eq!(
        bloom.max_capacity(),
        (0..bloom.max_levels() as usize)
            .map(|i| level_capacity(FIRST, 2, i))
            .sum::<u64>()
            * u64::from(SHARDS)
    );
    let started = Instant::now();
    let items: Vec<String> = (0..20_000).map(|i| format!("sharded:{i}")).collect();
    let shard_pattern = format!("*:{key}:shard:*");

    // Each shard's counts, by shard.
    async fn shards(conn: &mut Conn, pattern: &str) -> Vec<(String, Vec<u64>)> {
        let mut out = Vec::new();
        for counts in counts_keys(conn, pattern).await {
            let taken = assert_consistent(conn, &counts, FIRST, 2).await;
            out.push((counts, taken));
        }
        out
    }
    // What info promises, from the keys themselves.
    async fn assert_info_adds_up(
        conn: &mut Conn,
        bloom: &GrowingBloom<Conn>,
        parts: &[(String, Vec<u64>)],
    ) {
        let info = bloom.info().await.unwrap();
        let most = parts.iter().map(|(_, t)| t.len()).max().unwrap_or(0);
        let items: u64 = parts.iter().map(|(_, t)| t.iter().sum::<u64>()).sum();
        let capacity: u64 = parts
            .iter()
            .map(|(_, t)| capacity_of(t.len(), FIRST, 2))
            .sum();
        // Level i's size in a shard, as the crate sizes it, each meeting its share of P.
        let shapes = bloom.levels();
        for (i, level) in shapes.iter().enumerate() {
            let rate = redbloom::growing_level_fpr(P, bloom.tightening(), i as u32);
            assert_eq!(level.capacity, level_capacity(FIRST, 2, i));
            assert!(level.false_positive_rate <= rate, "{level:?} over {rate}");
        }
        let bits: u64 = parts
            .iter()
            .map(|(_, t)| shapes[..t.len()].iter().map(|l| l.bits).sum::<u64>())
            .sum();
        let (mut bits_set, mut bytes) = (0u64, 0u64);
        for (counts, taken) in parts {
            // The segments' bits set and bytes: every level's, since no level is left empty.
            let mut segments: Vec<u32> = shapes[..taken.len()].iter().map(|l| l.segment).collect();
            segments.dedup();
            for segment in segments {
                let string = format!("{counts}:{segment}");
                let set: u64 = redis::cmd("BITCOUNT")
                    .arg(&string)
                    .query_async(conn)
                    .await
                    .unwrap();
                let len: u64 = redis::cmd("STRLEN")
                    .arg(&string)
                    .query_async(conn)
                    .await
                    .unwrap();
                bits_set += set;
                bytes += len;
            }
        }
        let per_shard: Vec<usize> = parts.iter().map(|(_, t)| t.len()).collect();
        assert_eq!(
            info.levels as usize, most,
            "levels: the most any shard has ({per_shard:?})"
        );
        assert_eq!(info.items, items, "items: the shards' counts added up");
        assert_eq!(info.filter.estimated_items, items as f64);
        assert_eq!(
            (info.filter.bits_set, info.filter.bytes),
            (bits_set, bytes),
            "bits set and bytes: every shard's levels added up"
        );
        assert_eq!(
            (info.capacity, info.filter.bits),
            (capacity, bits),
            "capacity and bits: the levels made, all shards together (levels per shard \
             {per_shard:?}, info {info:?})"
        );
        assert!(info.items <= info.capacity);
    }

    // Small batches first (one script an item), then batches of 2,000 (about 500 a shard:
    // the bulk add).
    for batch in items[..1_000].chunks(25) {
        bloom.add_many(batch).await.unwrap();
    }
    for batch in items[1_000..].chunks(2_000) {
        bloom.add_many(batch).await.unwrap();
    }
    let parts = shards(&mut conn, &shard_pattern).await;
    assert_eq!(parts.len(), SHARDS as usize, "one counts hash a shard");
    for (counts, taken) in &parts {
        let n: u64 = taken.iter().sum();
        assert!(
            (4_000..6_000).contains(&n),
            "{counts}: {n} of 20,000 items in one of four shards"
        );
        assert_eq!(
            taken.len(),
            predicted_levels(n, FIRST, 2),
            "{counts}: a shard's levels are those its own {n} items make"
        );
    }
    assert_info_adds_up(&mut conn, &bloom, &parts).await;
    let found = bloom.exists_many(&items).await.unwrap();
    assert_eq!(
        found.iter().filter(|&&f| !f).count(),
        0,
        "false negatives in a sharded growing filter"
    );
    // The answers come back in input order: mixed present and absent.
    let mixed = ["sharded:7", "never:1", "sharded:19999", "never:2"];
    let answers = bloom.exists_many(&mixed).await.unwrap();
    assert_eq!((answers[0], answers[2]), (true, true));
    let absent: Vec<String> = (0..100_000)
        .map(|i| format!("sharded-absent:{i}"))
        .collect();
    let positives = bloom
        .exists_many(&absent)
        .await
        .unwrap()
        .iter()
        .filter(|&&f| f)
        .count();
    let rate = positives as f64 / absent.len() as f64;
    println!(
        "4 shards, 20,000 items in {:?}: levels per shard {:?}, false-positive rate {rate:.5}",
        started.elapsed(),
        parts.iter().map(|(_, t)| t.len()).collect::<Vec<_>>()
    );
    // σ on 100,000 probes at 0.01 is 0.0003: P·1.2 is more than six σ above P.
    assert!(rate <= P * 1.2, "false-positive rate {rate} above P = {P}");

    assert!(bloom.clear().await.unwrap());
    assert!(
        keys_like(&mut conn, &format!("*{key}*")).await.is_empty(),
        "{:?}",
        keys_like(&mut conn, &format!("*{key}*")).await
    );

    // Shards at different numbers of levels: another filter, fed 25 items at a time until
    // they are (the first boundary is at 250 items a shard).
    let key = common::unique_key("grow-sharded-uneven");
    let shard_pattern = format!("*:{key}:shard:*");
    let bloom = GrowingBloom::builder(&key)
        .expected_items(1_000)
        .false_positive_rate(P)
        .growth(2)
        .shards(SHARDS)
        .build(conn.clone())
        .unwrap();
    let mut added = 0;
    let uneven = loop {
        bloom.add_many(&items[added..added + 25]).await.unwrap();
        added += 25;
        let parts = shards(&mut conn, &shard_pattern).await;
        let levels: HashSet<usize> = parts.iter().map(|(_, t)| t.len()).collect();
        if levels.len() > 1 {
            break parts;
        }
        assert!(
            added < 2_000,
            "the shards never had different levels: {parts:?}"
        );
    };
    assert_eq!(uneven.len(), SHARDS as usize, "{uneven:?}");
    assert_info_adds_up(&mut conn, &bloom, &uneven).await;
    assert!(bloom.clear().await.unwrap());
}

/// Whether a write touched any key `watcher` WATCHes: `EXEC` of an empty transaction is nil
/// then (Redis marks a key touched only when a command changes it: a `BITFIELD SET` of bits
/// already 1 is no write, and is not propagated to replicas or the AOF either).
async fn touched(watcher: &mut Conn) -> bool {
    let () = redis::cmd("MULTI").query_async(watcher).await.unwrap();
    let () = redis::cmd("PING").query_async(watcher).await.unwrap();
    let reply: Option<Vec<String>> = redis::cmd("EXEC").query_async(watcher).await.unwrap();
    reply.is_none()
}

/// Watches every key of the filter `key` (its records of exact answers included).
async fn watch_filter(watcher: &mut Conn, conn: &mut Conn, key: &str) -> Vec<String> {
    let keys = keys_like(conn, &format!("*{key}*")).await;
    let () = redis::cmd("WATCH")
        .arg(&keys)
        .query_async(watcher)
        .await
        .unwrap();
    keys
}

/// SPEC.md §4: "an add that is already present in any level writes nothing": items in lower
/// levels and in the newest (whose add sets their bits again, changing none), added again one
/// by one, by concurrent single calls (group commit's steps) and as a batch, touch no key of
/// the filter, with exact answers on (no record either); a new item does (the check can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_present_items_again_writes_nothing() {
    let redis = common::redis().await;
    let key = common::unique_key("grow-again");
    let mut conn = redis.connection().await;
    let mut watcher = redis.connection().await;
    // A rate low enough that no false positive makes one of the 250 (or the last) not new.
    let bloom = GrowingBloom::builder(&key)
        .expected_items(100)
        .false_positive_rate(1e-6)
        .growth(2)
        .retry(common::fault_retry())
        .build(conn.clone())
        .unwrap();
    let bloom = Arc::new(bloom);
    let items: Vec<String> = (0..250).map(|i| format!("again:{i}")).collect();
    for item in &items {
        assert!(bloom.add(item).await.unwrap(), "{item} is new");
    }
    let counts = counts_key(&mut conn, &key).await;
    assert_eq!(read_counts(&mut conn, &counts).await, vec![100, 150]);

    let keys = watch_filter(&mut watcher, &mut conn, &key).await;
    assert!(
        keys.iter().any(|k| common::is_record(k)),
        "the new items' steps were recorded: {keys:?}"
    );
    let before = snapshot(&mut conn, &format!("*{key}*")).await;
    for item in &items {
        assert!(!bloom.add(item).await.unwrap(), "{item} again");
    }
    let tasks: Vec<_> = items
        .iter()
        .cloned()
        .map(|item| {
            let bloom = Arc::clone(&bloom);
            tokio::spawn(async move { bloom.add(&item).await.unwrap() })
        })
        .collect();
    for task in tasks {
        assert!(!task.await.unwrap(), "no item is new again");
    }
    assert!(bloom
        .add_many(&items)
        .await
        .unwrap()
        .iter()
        .all(|&new| !new));
    assert!(
        !touched(&mut watcher).await,
        "adding present items again wrote into {keys:?}"
    );
    let after = snapshot(&mut conn, &format!("*{key}*")).await;
    assert_eq!(before, after, "the same keys and bytes");

    watch_filter(&mut watcher, &mut conn, &key).await;
    assert!(bloom.add("again:new").await.unwrap());
    assert!(touched(&mut watcher).await, "a new item writes");
}
