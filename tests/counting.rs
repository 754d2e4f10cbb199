//! Counting filters (SPEC.md §4 "counting") against a real Redis: add, remove and the
//! idempotent insert; a removal of an absent item changes no byte; saturated counters stay;
//! a model-based property test against a multiset; concurrent clients; mismatches.

mod common;

use proptest::prelude::*;
use redbloom::{CountingBloom, Error, KeyTtl, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::Duration;

fn counting(conn: MultiplexedConnection, key: &str) -> CountingBloom<MultiplexedConnection> {
    CountingBloom::builder(key)
        .expected_items(1_000)
        .false_positive_rate(0.001)
        .build(conn)
        .unwrap()
}

async fn bytes(conn: &mut MultiplexedConnection, key: &str) -> Vec<u8> {
    redis::cmd("GET")
        .arg(key)
        .query_async::<Option<Vec<u8>>>(conn)
        .await
        .unwrap()
        .unwrap_or_default()
}

#[tokio::test]
async fn add_remove_and_the_idempotent_insert() {
    let redis = common::redis().await;
    let key = common::unique_key("counting-basics");
    let mut conn = redis.connection().await;
    let blocked = counting(conn.clone(), &key);
    assert!(!blocked.exists("a").await.unwrap());
    assert!(!blocked.remove("a").await.unwrap(), "nothing to remove");
    assert!(blocked.add("a").await.unwrap(), "new");
    assert!(!blocked.add("a").await.unwrap(), "counted twice, not new");
    assert!(blocked.remove("a").await.unwrap());
    assert!(
        blocked.exists("a").await.unwrap(),
        "added twice, removed once"
    );
    assert!(blocked.remove("a").await.unwrap());
    assert!(
        !blocked.exists("a").await.unwrap(),
        "added twice, removed twice"
    );
    assert!(bytes(&mut conn, &key).await.iter().all(|&b| b == 0));

    // The idempotent insert counts once however often it is called.
    assert!(blocked.add_if_absent("u").await.unwrap());
    assert!(!blocked.add_if_absent("u").await.unwrap());
    assert!(blocked.remove("u").await.unwrap());
    assert!(
        !blocked.exists("u").await.unwrap(),
        "blocked twice, unblocked once"
    );

    // Batches, in order.
    assert_eq!(
        blocked.add_many(&["x", "y", "x"]).await.unwrap(),
        [true, true, false]
    );
    assert_eq!(
        blocked.remove_many(&["x", "z", "x", "x"]).await.unwrap(),
        [true, false, true, false]
    );
    assert_eq!(
        blocked.exists_many(&["x", "y", "z"]).await.unwrap(),
        [false, true, false]
    );
    assert_eq!(
        blocked.add_many_if_absent(&["y", "w", "w"]).await.unwrap(),
        [false, true, false]
    );
    let info = blocked.info().await.unwrap();
    assert_eq!(info.filter.bits, blocked.counters());
    assert_eq!(info.counters_in_use, info.filter.bits_set);
    assert!(info.counters_in_use > 0 && info.counters_in_use <= 2 * 10);
    assert_eq!(info.counters_saturated, 0);
    assert_eq!(info.filter.ttl, KeyTtl::Persistent);
    assert!(blocked.expire(Duration::from_secs(60)).await.unwrap());
    assert!(blocked.clear().await.unwrap());
    assert!(!common::key_exists(&mut conn, &key).await);
}

/// Removing items never added (and testing absent) changes no byte of the filter.
#[tokio::test]
async fn removing_an_absent_item_changes_nothing() {
    let redis = common::redis().await;
    let key = common::unique_key("counting-absent");
    let mut conn = redis.connection().await;
    let blocked = counting(conn.clone(), &key);
    let present: Vec<String> = (0..300).map(|i| format!("p{i}")).collect();
    blocked.add_many(&present).await.unwrap();
    let before = bytes(&mut conn, &key).await;
    let absent: Vec<String> = (0..2_000).map(|i| format!("never{i}")).collect();
    let found = blocked.exists_many(&absent).await.unwrap();
    let truly_absent: Vec<&String> = absent
        .iter()
        .zip(&found)
        .filter(|(_, &f)| !f)
        .map(|(a, _)| a)
        .collect();
    assert!(truly_absent.len() > 1_900);
    let removed = blocked.remove_many(&truly_absent).await.unwrap();
    assert!(removed.iter().all(|&r| !r));
    for item in truly_absent.iter().take(50) {
        assert!(!blocked.remove(item).await.unwrap());
    }
    assert_eq!(bytes(&mut conn, &key).await, before, "no byte changed");
    blocked.clear().await.unwrap();
}

/// A counter at 15 stays at 15 through adds and removes: an item added 20 times and removed
/// 20 times is still found (its counters saturated, and may hold more than they show).
#[tokio::test]
async fn saturated_counters_are_never_decremented() {
    let redis = common::redis().await;
    let key = common::unique_key("counting-saturated");
    let mut conn = redis.connection().await;
    let blocked = counting(conn.clone(), &key);
    for _ in 0..20 {
        blocked.add("hot").await.unwrap();
    }
    let info = blocked.info().await.unwrap();
    assert_eq!(info.counters_saturated, u64::from(blocked.hashes()));
    let saturated = bytes(&mut conn, &key).await;
    for _ in 0..20 {
        assert!(blocked.remove("hot").await.unwrap());
    }
    assert!(blocked.exists("hot").await.unwrap());
    assert_eq!(bytes(&mut conn, &key).await, saturated, "15 stays 15");
    assert_eq!(
        blocked.info().await.unwrap().counters_saturated,
        u64::from(blocked.hashes())
    );
    blocked.clear().await.unwrap();
}

#[derive(Debug, Clone)]
enum Step {
    Add(u8),
    AddIfAbsent(u8),
    Remove(u8),
}

fn step() -> impl Strategy<Value = Step> {
    // A small universe, so that items collide and repeat.
    prop_oneof![
        (0u8..24).prop_map(Step::Add),
        (0u8..24).prop_map(Step::AddIfAbsent),
        (0u8..24).prop_map(Step::Remove),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random sequences of adds, idempotent inserts and removes of added items, in batches,
    /// against a multiset: never a false negative for an item added more often than removed.
    #[test]
    fn never_a_false_negative_against_a_multiset(steps in prop::collection::vec(step(), 1..120)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let redis = common::redis().await;
            let key = common::unique_key("counting-model");
            // Small enough that the items' counters overlap.
            let blocked = CountingBloom::builder(&key)
                .bits(200)
                .hashes(4)
                .build(redis.connection().await)
                .unwrap();
            let mut model: HashMap<u8, u32> = HashMap::new();
            for chunk in steps.chunks(5) {
                for step in chunk {
                    match *step {
                        Step::Add(i) => {
                            blocked.add(format!("i{i}")).await.unwrap();
                            *model.entry(i).or_default() += 1;
                        }
                        Step::AddIfAbsent(i) => {
                            let added = blocked.add_if_absent(format!("i{i}")).await.unwrap();
                            let count = model.entry(i).or_default();
                            // Present in the model means present in the filter: never added.
                            if *count > 0 {
                                prop_assert!(!added, "i{} is in the model", i);
                            }
                            if added {
                                *count += 1;
                            }
                        }
                        // Only items the model holds are removed (the documented rule).
                        Step::Remove(i) => {
                            if model.get(&i).copied().unwrap_or(0) > 0 {
                                let removed = blocked.remove(format!("i{i}")).await.unwrap();
                                prop_assert!(removed, "i{} is in the model", i);
                                *model.get_mut(&i).unwrap() -= 1;
                            }
                        }
                    }
                }
                let held: Vec<u8> = model.iter().filter(|(_, &n)| n > 0).map(|(&i, _)| i).collect();
                let names: Vec<String> = held.iter().map(|i| format!("i{i}")).collect();
                let found = blocked.exists_many(&names).await.unwrap();
                for (name, found) in names.iter().zip(found) {
                    prop_assert!(found, "false negative for {}", name);
                }
            }
            blocked.clear().await.unwrap();
            Ok(())
        })?;
    }
}

/// Eight clients (each its own connection) add and remove disjoint and shared items at once:
/// no false negative for what each holds, and the idempotent insert of one item by all of them
/// succeeds exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_lose_nothing_and_count_once() {
    let redis = common::redis().await;
    let key = common::unique_key("counting-concurrent");
    let mut tasks = Vec::new();
    for client in 0..8 {
        let blocked = counting(redis.connection().await, &key);
        tasks.push(tokio::spawn(async move {
            let own: Vec<String> = (0..200).map(|i| format!("own{client}-{i}")).collect();
            let shared: Vec<String> = (0..50).map(|i| format!("shared{i}")).collect();
            let mut once = 0;
            for round in 0..5 {
                blocked.add_many(&own).await.unwrap();
                blocked.add_many(&shared).await.unwrap();
                once += blocked
                    .add_many_if_absent(&[format!("once{round}")])
                    .await
                    .unwrap()
                    .iter()
                    .filter(|&&a| a)
                    .count();
                // Remove what this client added in this round, keeping one count of each.
                if round > 0 {
                    blocked.remove_many(&own).await.unwrap();
                    blocked.remove_many(&shared).await.unwrap();
                }
                let found = blocked.exists_many(&own).await.unwrap();
                assert!(
                    found.iter().all(|&f| f),
                    "client {client}: own item missing"
                );
                let found = blocked.exists_many(&shared).await.unwrap();
                assert!(
                    found.iter().all(|&f| f),
                    "client {client}: shared item missing"
                );
            }
            once
        }));
    }
    let mut once = 0;
    for task in tasks {
        once += task.await.unwrap();
    }
    assert_eq!(once, 5, "each once{{round}} inserted by exactly one client");
    counting(redis.connection().await, &key)
        .clear()
        .await
        .unwrap();
}

/// Another kind or size at the same key is refused and writes nothing; a sharded counting
/// filter works and clears every shard.
#[tokio::test]
async fn mismatches_and_shards() {
    let redis = common::redis().await;
    let key = common::unique_key("counting-mismatch");
    let mut conn = redis.connection().await;
    let blocked = counting(conn.clone(), &key);
    blocked.add("a").await.unwrap();
    let before = bytes(&mut conn, &key).await;
    let bigger = CountingBloom::builder(&key)
        .expected_items(2_000)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    for result in [
        bigger.add("b").await,
        bigger.remove("a").await,
        bigger.add_if_absent("b").await,
    ] {
        assert!(
            matches!(result, Err(Error::ParamsMismatch { .. })),
            "{result:?}"
        );
    }
    let plain = RedisBloom::builder(&key)
        .layout(redbloom::Layout::Native)
        .expected_items(1_000)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    assert!(matches!(
        plain.add("b").await,
        Err(Error::ParamsMismatch { .. })
    ));
    assert_eq!(bytes(&mut conn, &key).await, before);
    blocked.clear().await.unwrap();

    let sharded = CountingBloom::builder(&key)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(4)
        .build(conn.clone())
        .unwrap();
    let items: Vec<String> = (0..1_000).map(|i| format!("s{i}")).collect();
    assert!(
        sharded
            .add_many(&items)
            .await
            .unwrap()
            .iter()
            .filter(|&&n| n)
            .count()
            > 990
    );
    assert!(sharded
        .exists_many(&items)
        .await
        .unwrap()
        .iter()
        .all(|&f| f));
    assert!(sharded
        .remove_many(&items)
        .await
        .unwrap()
        .iter()
        .all(|&r| r));
    let info = sharded.info().await.unwrap();
    assert_eq!(info.counters_in_use, 0);
    assert!(sharded.clear().await.unwrap());
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{key}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// A check that outweighs the counters reads them whole and tests them here: the same answers
/// as small checks by `BITFIELD_RO` (Redis's nibble order), for present, removed and absent
/// items.
#[tokio::test]
async fn whole_reads_answer_as_bitfield_does() {
    let redis = common::redis().await;
    let key = common::unique_key("counting-dense-check");
    let mut conn = redis.connection().await;
    let blocked = counting(conn.clone(), &key);
    let items: Vec<String> = (0..600).map(|i| format!("d{i}")).collect();
    blocked.add_many(&items).await.unwrap();
    blocked.remove_many(&items[..200]).await.unwrap();
    let probes: Vec<String> = (0..3_000).map(|i| format!("d{i}")).collect();
    let getranges = |conn: &mut MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut conn)
                .await
                .unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("cmdstat_getrange:calls="))
                .and_then(|rest| rest.split(',').next())
                .map_or(0u64, |n| n.parse().unwrap())
        }
    };
    let before = getranges(&mut conn).await;
    let whole = blocked.exists_many(&probes).await.unwrap();
    assert!(
        getranges(&mut conn).await > before,
        "the big check read the counters whole"
    );
    let mut small = Vec::new();
    for chunk in probes.chunks(5) {
        small.extend(blocked.exists_many(chunk).await.unwrap());
    }
    assert!(whole == small, "whole reads and BITFIELD_RO disagree");
    assert!(whole[200..600].iter().all(|&f| f));
    assert!(whole[..200].iter().filter(|&&f| f).count() < 5);
    blocked.clear().await.unwrap();
}

/// The sum of every counter of a key's bytes (two 4-bit counters a byte).
fn counter_sum(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .map(|b| u64::from(b >> 4) + u64::from(b & 0x0f))
        .sum()
}

/// Batches that outweigh the counters go dense (read whole, changed here, swapped back in one
/// step): the same answers and the same bytes as the same items one at a time by `BITFIELD`,
/// through adds, idempotent inserts and removes with repeated items and saturated counters;
/// the filter's TTL kept; no scratch key left; another filter's parameters refused with
/// nothing written.
#[tokio::test]
async fn dense_batches_match_items_one_at_a_time() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let (dense_key, single_key) = (
        common::unique_key("counting-dense"),
        common::unique_key("counting-single"),
    );
    let dense = counting(conn.clone(), &dense_key);
    let single = counting(conn.clone(), &single_key);
    let item = |i: usize| format!("i{}", (i * 7919) % 900);
    // (op, first, len, repeat): items first.. first+len, each `repeat` times in a row.
    let steps: [(&str, usize, usize, usize); 9] = [
        ("add", 0, 400, 1),
        ("add", 200, 400, 2),
        ("add_if_absent", 0, 900, 1),
        ("remove", 0, 300, 1),
        ("add", 700, 100, 20),
        ("remove", 650, 250, 3),
        ("add_if_absent", 100, 600, 2),
        ("remove", 0, 900, 2),
        ("remove", 0, 900, 1),
    ];
    for (step, &(op, first, len, repeat)) in steps.iter().enumerate() {
        let batch: Vec<String> = (first..first + len)
            .flat_map(|i| std::iter::repeat_n(item(i), repeat))
            .collect();
        if step == 4 {
            assert!(dense.expire(Duration::from_secs(900)).await.unwrap());
        }
        let swaps =
            common::calls(&mut conn, "rename").await + common::calls(&mut conn, "bitcount").await;
        let whole = match op {
            "add" => dense.add_many(&batch).await.unwrap(),
            "add_if_absent" => dense.add_many_if_absent(&batch).await.unwrap(),
            _ => dense.remove_many(&batch).await.unwrap(),
        };
        assert!(
            common::calls(&mut conn, "rename").await + common::calls(&mut conn, "bitcount").await
                > swaps,
            "step {step}: the batch went dense"
        );
        let mut one_by_one = Vec::new();
        for item in &batch {
            one_by_one.push(match op {
                "add" => single.add(item).await.unwrap(),
                "add_if_absent" => single.add_if_absent(item).await.unwrap(),
                _ => single.remove(item).await.unwrap(),
            });
        }
        assert!(whole == one_by_one, "step {step} ({op}): answers differ");
        assert_eq!(
            bytes(&mut conn, &dense_key).await,
            bytes(&mut conn, &single_key).await,
            "step {step} ({op}): counters differ"
        );
    }
    let info = dense.info().await.unwrap();
    assert!(info.counters_saturated > 0, "step 4 saturated counters");
    let ttl = info.filter.ttl.as_secs().unwrap();
    assert!((890..=900).contains(&ttl), "the TTL kept: {ttl}");
    let scratch: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{dense_key}*swap*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(scratch.is_empty(), "{scratch:?}");

    // Another size at the key: refused, nothing written.
    let before = bytes(&mut conn, &dense_key).await;
    let other = CountingBloom::builder(&dense_key)
        .expected_items(2_000)
        .false_positive_rate(0.001)
        .build(conn.clone())
        .unwrap();
    let batch: Vec<String> = (0..3_000).map(|i| format!("x{i}")).collect();
    for result in [
        other.add_many(&batch).await,
        other.remove_many(&batch).await,
    ] {
        assert!(
            matches!(result, Err(Error::ParamsMismatch { .. })),
            "{result:?}"
        );
    }
    assert_eq!(bytes(&mut conn, &dense_key).await, before);
    dense.clear().await.unwrap();
    single.clear().await.unwrap();
}

/// Dense batches of four clients at once (each its own connection), while a fifth adds items
/// one at a time: a swap that finds the counters changed since its read writes nothing and
/// tries again, so no increment is lost — the counters sum to k per item added — and removing
/// every item at once leaves every counter at 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_dense_batches_lose_no_increment() {
    let redis = common::redis().await;
    let key = common::unique_key("counting-dense-race");
    let mut conn = redis.connection().await;
    let build = |conn| {
        CountingBloom::builder(&key)
            .expected_items(30_000)
            .false_positive_rate(0.01)
            .build(conn)
            .unwrap()
    };
    let k = u64::from(build(conn.clone()).hashes());
    let (bitcounts, renames) = (
        common::calls(&mut conn, "bitcount").await,
        common::calls(&mut conn, "rename").await,
    );
    let run = |remove: bool| {
        let mut tasks = Vec::new();
        for client in 0..5 {
            let (build, redis) = (&build, &redis);
            let filter = async move { build(redis.connection().await) };
            tasks.push(async move {
                let filter = filter.await;
                for round in 0..6 {
                    // 3,000 items of 7 counters outweigh the filter's 144 KB: dense.
                    let batch: Vec<String> = (0..3_000)
                        .map(|i| format!("c{client}-{round}-{i}"))
                        .collect();
                    let answers = match (client, remove) {
                        (4, false) => {
                            // One at a time (by BITFIELD), changing the counters under the
                            // others' swaps.
                            let mut answers = Vec::new();
                            for item in &batch[..300] {
                                answers.push(filter.add(item).await.unwrap());
                            }
                            answers
                        }
                        (4, true) => {
                            let mut answers = Vec::new();
                            for item in &batch[..300] {
                                answers.push(filter.remove(item).await.unwrap());
                            }
                            assert!(answers.iter().all(|&a| a), "client 4 removes");
                            answers
                        }
                        (_, false) => filter.add_many(&batch).await.unwrap(),
                        (_, true) => {
                            let removed = filter.remove_many(&batch).await.unwrap();
                            assert!(removed.iter().all(|&r| r), "client {client} removes");
                            removed
                        }
                    };
                    assert!(!answers.is_empty());
                }
            });
        }
        futures_util::future::join_all(tasks)
    };
    run(false).await;
    let added = 4 * 6 * 3_000 + 6 * 300;
    let info = build(conn.clone()).info().await.unwrap();
    assert_eq!(info.counters_saturated, 0, "{info:?}");
    assert_eq!(
        counter_sum(&bytes(&mut conn, &key).await),
        added * k,
        "an increment was lost or doubled"
    );
    run(true).await;
    assert_eq!(counter_sum(&bytes(&mut conn, &key).await), 0);
    let swaps = common::calls(&mut conn, "rename").await - renames;
    let tries = common::calls(&mut conn, "bitcount").await - bitcounts;
    // Swaps happened, and some found the counters changed (those batches tried again, and
    // after three such tries went by BITFIELD).
    eprintln!("{tries} swaps tried, {swaps} done");
    assert!(
        swaps > 0 && tries > swaps,
        "{tries} swaps tried, {swaps} done"
    );
    build(conn.clone()).clear().await.unwrap();
}

/// Concurrent loaders of one counting filter (each its own handle and connection, as separate
/// processes would be) take turns for their dense swaps: none falls back to `BITFIELD`, where
/// each one's failed swaps used to make the others' fail in turn (four loads of 1M items: one
/// 0.4 s, the others 8-13 s, where all four take about 1.4 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_loaders_take_turns_and_never_fall_back() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let url = server.url();
    let key = &common::unique_key("counting-loaders");
    let url = &url;
    let loaders = (0..4).map(|loader| async move {
        let filter = CountingBloom::builder(key)
            .expected_items(20_000)
            .false_positive_rate(0.01)
            .build(common::connect(url).await)
            .unwrap();
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
    // One `BITFIELD` without operations per handle routes its eviction check (`INFO`); a batch
    // by `BITFIELD` would send several more.
    let bitfields = common::calls(&mut conn, "bitfield").await;
    assert!(
        bitfields <= 4,
        "a batch went by BITFIELD: {bitfields} calls"
    );
    assert!(
        common::calls(&mut conn, "rename").await > 0,
        "swapped dense"
    );
    for (loader, filter) in filters.iter().enumerate() {
        let batch: Vec<String> = (0..10_000).map(|i| format!("l{loader}-3-{i}")).collect();
        let found = filter.exists_many(&batch).await.unwrap();
        assert!(
            found.iter().all(|&f| f),
            "loader {loader}: an item is missing"
        );
    }
}

/// One handle's batches by `BITFIELD` (too small to swap), one after another, while the same
/// handle swaps a large batch, as a load's last, partial batch beside the one before it: the
/// swap waits for the small batch in flight and the next waits for the swap (they share the
/// handle's turn), so the swap never meets counters changed by its own handle and never falls
/// back. Without the turn its three swaps failed while the small batches' `BITFIELD`s went on,
/// and it went by `BITFIELD` too (a `load` of 200,000 items into 4.8 MB of counters: 1.4-1.6 s,
/// 0.23 s swapped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_beside_a_smaller_batch_of_the_same_handle_never_fails() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    let key = common::unique_key("counting-beside");
    let filter = CountingBloom::builder(&key)
        .expected_items(1_000_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    for round in 0..3 {
        let big: Vec<String> = (0..100_000).map(|i| format!("big{round}-{i}")).collect();
        let small: Vec<String> = (0..40_000).map(|i| format!("small{round}-{i}")).collect();
        let (tries, swaps) = (
            common::calls(&mut conn, "bitcount").await,
            common::calls(&mut conn, "rename").await,
        );
        let done = std::sync::atomic::AtomicBool::new(false);
        let swapped = async {
            let new = filter.add_many(&big).await.unwrap();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            new
        };
        // Batches of 100 (by BITFIELD) until the swap is done, 400 at most.
        let beside = async {
            let mut sent = 0;
            for chunk in small.chunks(100) {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                filter.add_many(chunk).await.unwrap();
                sent += chunk.len();
            }
            sent
        };
        let (big_new, sent) = tokio::join!(swapped, beside);
        let tries = common::calls(&mut conn, "bitcount").await - tries;
        let swaps = common::calls(&mut conn, "rename").await - swaps;
        assert!(
            sent > 0,
            "round {round}: no small batch went beside the swap"
        );
        assert_eq!(
            (tries, swaps),
            (1, 1),
            "round {round}: swaps tried and done for one batch ({sent} small items beside)"
        );
        assert!(big_new.iter().filter(|&&n| n).count() >= 99_000);
        assert!(filter
            .exists_many(&small[..sent])
            .await
            .unwrap()
            .iter()
            .all(|&f| f));
    }
    let all: Vec<String> = (0..100_000).map(|i| format!("big2-{i}")).collect();
    assert!(filter.exists_many(&all).await.unwrap().iter().all(|&f| f));
}

/// A batch swaps once its counters times 64 bytes reach the key's bytes (128 for a check,
/// which reads the counters whole): 2,000 items into 479 KB of counters, answering as batches
/// of 10 do. At 8 bytes a counter such batches went by `BITFIELD` (from about 8,500 items
/// here): batches of 20,000 into 4.8 MB 3.3-3.8x slower to load, 5x to check.
#[tokio::test]
async fn mid_sized_batches_swap_and_read_whole() {
    // A server of its own: the test reads its command statistics.
    let server = common::server::RedisServer::start().expect("redis-server on PATH");
    let mut conn = common::connect(&server.url()).await;
    let build = |key: &str| {
        CountingBloom::builder(key)
            .expected_items(100_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap()
    };
    let (whole, small) = (
        build(&common::unique_key("counting-mid")),
        build(&common::unique_key("counting-mid-small")),
    );
    let batch: Vec<String> = (0..2_000).map(|i| format!("m{}", i % 1_900)).collect();
    let (added, renames) = common::calls_during(&mut conn, "rename", whole.add_many(&batch)).await;
    assert_eq!(renames, 1, "the batch of 2,000 swapped");
    let (found, getranges) =
        common::calls_during(&mut conn, "getrange", whole.exists_many(&batch)).await;
    assert!(getranges > 0, "the check of 2,000 read the counters whole");
    let (added, found) = (added.unwrap(), found.unwrap());
    let mut small_added = Vec::new();
    for chunk in batch.chunks(10) {
        small_added.extend(small.add_many(chunk).await.unwrap());
    }
    assert!(added == small_added, "answers differ from batches of 10");
    assert!(added[1_900..].iter().all(|&n| !n), "repeated items new");
    assert!(found.iter().all(|&f| f), "an added item not found");
}
