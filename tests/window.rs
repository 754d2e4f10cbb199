//! Window filters (SPEC.md §4 "window") against a real Redis, with real time and short windows:
//! the boundaries of the guarantee, new within the window, concurrent clients across
//! generation changes, the false-positive rate under steady traffic, persistence and
//! mismatches.

mod common;

use common::keys_like;
use common::server::RedisServer;
use redbloom::{Error, KeyTtl, RedisBloom, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

const W: Duration = Duration::from_secs(2);
const G: u32 = 4;

fn window(
    conn: MultiplexedConnection,
    key: &str,
    items: u64,
) -> WindowBloom<MultiplexedConnection> {
    WindowBloom::builder(key, W)
        .generations(G)
        .expected_items(items)
        .false_positive_rate(0.01)
        .build(conn)
        .unwrap()
}

#[tokio::test]
async fn add_exists_info_clear_expire() {
    let redis = common::redis().await;
    let key = common::unique_key("window-basics");
    let mut conn = redis.connection().await;
    let recent = window(conn.clone(), &key, 1000);
    assert_eq!((recent.window(), recent.generations()), (W, G));
    assert!(!recent.exists("a").await.unwrap());
    assert!(recent.add("a").await.unwrap(), "first add is new");
    assert!(!recent.add("a").await.unwrap(), "second add is not");
    assert!(recent.exists("a").await.unwrap());
    assert_eq!(
        recent.add_many(&["b", "a", "b", "c"]).await.unwrap(),
        [true, false, false, true],
        "a repeated item is new at its first occurrence only"
    );
    assert_eq!(
        recent.exists_many(&["a", "b", "c", "d"]).await.unwrap(),
        [true, true, true, false]
    );
    let info = recent.info().await.unwrap();
    assert_eq!((info.window, info.generations), (W, G));
    assert!(!info.parts.is_empty() && info.parts.len() <= G as usize);
    assert!(info.filter.bits_set > 0);
    // The parameters expire with the newest generation (SPEC.md §3).
    assert!(
        matches!(info.filter.ttl, KeyTtl::Expires(t) if t <= W * G / (G - 1)),
        "{:?}",
        info.filter.ttl
    );
    for part in &info.parts {
        let KeyTtl::Expires(ttl) = part.ttl else {
            panic!("every generation expires by itself: {part:?}");
        };
        assert!(ttl <= W * G / (G - 1), "{ttl:?}");
    }
    // Every key the filter made is in the key's slot group, named after it.
    let made = keys_like(&mut conn, &format!("{{{key}}}:*")).await;
    assert!(
        made.iter().any(|k| *k == common::companion(&key, "params")),
        "{made:?}"
    );
    assert!(made.iter().all(|k| k.contains(":redbloom:")), "{made:?}");
    assert!(
        !common::key_exists(&mut conn, &key).await,
        "the bare key stays free"
    );

    assert!(recent.expire(Duration::from_secs(100)).await.unwrap());
    let info = recent.info().await.unwrap();
    assert!(matches!(info.filter.ttl, KeyTtl::Expires(t) if t > Duration::from_secs(90)));
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
    let redis = common::redis().await;
    let key = common::unique_key("window-bounds");
    let mut conn = redis.connection().await;
    let recent = window(conn.clone(), &key, 10_000);
    let forget_ms = (W.as_millis() as u64) * u64::from(G) / u64::from(G - 1);
    // (server time before the add, after it, items)
    let mut added: Vec<(u64, u64, Vec<String>)> = Vec::new();
    for round in 0..6 {
        let items: Vec<String> = (0..100).map(|i| format!("{round}-{i}")).collect();
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
            // A single check agrees with the batch.
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
    tokio::time::sleep(Duration::from_millis(200)).await;
    let gens = keys_like(&mut conn, &format!("{}*", common::companion(&key, "gen:"))).await;
    assert!(gens.is_empty(), "expired generations linger: {gens:?}");
}

/// Four clients (each its own connection) add shared and own items every 50 ms for three
/// seconds, across several generation changes: of concurrent adds of one item exactly one is
/// new, and every item added within the last 1.5 s (< W) is found by every client.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_across_generation_changes() {
    let redis = common::redis().await;
    let key = common::unique_key("window-concurrent");
    let clients = 4;
    let mut tasks = Vec::new();
    for client in 0..clients {
        let conn = redis.connection().await;
        let recent = window(conn.clone(), &key, 20_000);
        let mut clock = conn;
        tasks.push(tokio::spawn(async move {
            let mut shared_new = Vec::new();
            let mut history: Vec<(u64, Vec<String>)> = Vec::new();
            for round in 0..60 {
                let mut items: Vec<String> =
                    (0..20).map(|i| format!("shared-{round}-{i}")).collect();
                items.extend((0..10).map(|i| format!("own-{client}-{round}-{i}")));
                let before = common::server_ms(&mut clock).await;
                let new = recent.add_many(&items).await.unwrap();
                shared_new.push(new[..20].to_vec());
                assert!(
                    new[20..].iter().filter(|&&n| !n).count() <= 1,
                    "own items are new (allowing a rare false positive): {new:?}"
                );
                history.push((before, items));
                let now = common::server_ms(&mut clock).await;
                for (at, items) in history.iter().filter(|(at, _)| now < at + 1500) {
                    let found = recent.exists_many(items).await.unwrap();
                    assert!(
                        found.iter().all(|&f| f),
                        "client {client}: items added at {at} missing at {now}"
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            shared_new
        }));
    }
    let mut per_client = Vec::new();
    for task in tasks {
        per_client.push(task.await.unwrap());
    }
    // Rounds run at slightly different times per client, but a shared item's adds all fall
    // within a few hundred ms, well inside the window: exactly one of them is new.
    for round in 0..60 {
        for i in 0..20 {
            let news = per_client.iter().filter(|c| c[round][i]).count();
            assert_eq!(news, 1, "shared-{round}-{i} was new for {news} clients");
        }
    }
    let recent = window(redis.connection().await, &key, 20_000);
    recent.clear().await.unwrap();
}

/// N items per window of steady traffic over several windows: a check's false-positive rate
/// stays at or below P (tolerance: 30% over P, for sampling noise on 20,000 probes).
#[tokio::test]
async fn false_positive_rate_under_steady_traffic() {
    let redis = common::redis().await;
    let key = common::unique_key("window-fpr");
    let n = 4_000u64;
    let p = 0.01;
    let recent = WindowBloom::builder(&key, W)
        .generations(G)
        .expected_items(n)
        .false_positive_rate(p)
        .build(redis.connection().await)
        .unwrap();
    // n items per W: batches of n/20 every W/20, for three windows.
    let start = tokio::time::Instant::now();
    let mut next = 0u64;
    for tick in 0..60u32 {
        let items: Vec<String> = (0..n / 20)
            .map(|_| {
                next += 1;
                format!("present-{next}")
            })
            .collect();
        recent.add_many(&items).await.unwrap();
        tokio::time::sleep_until(start + W / 20 * (tick + 1)).await;
    }
    let probes: Vec<String> = (0..20_000).map(|i| format!("absent-{i}")).collect();
    let positives = recent
        .exists_many(&probes)
        .await
        .unwrap()
        .into_iter()
        .filter(|&f| f)
        .count();
    let rate = positives as f64 / probes.len() as f64;
    eprintln!("steady traffic: false-positive rate {rate} (target {p})");
    assert!(rate <= p * 1.3, "false-positive rate {rate} above {p}");
    recent.clear().await.unwrap();
}

/// A restart from the AOF keeps the generations and their absolute expiries; a client with
/// another window, number of generations or capacity is refused and writes nothing.
#[tokio::test]
async fn restart_keeps_generations_and_mismatches_write_nothing() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("redis-server");
    let url = server.url();
    let connect = || async {
        redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    };
    let mut conn = connect().await;
    let key = "window-restart";
    let recent = WindowBloom::builder(key, Duration::from_secs(600))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    let items: Vec<String> = (0..50).map(|i| format!("item-{i}")).collect();
    recent.add_many(&items).await.unwrap();
    let gens = keys_like(&mut conn, &format!("{}*", common::companion(key, "gen:"))).await;
    assert_eq!(gens.len(), 1, "{gens:?}");
    let expire_at: i64 = redis::cmd("PEXPIRETIME")
        .arg(&gens[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(expire_at > 0);

    server.kill();
    server.restart().expect("restart");
    let mut conn = connect().await;
    let after: i64 = redis::cmd("PEXPIRETIME")
        .arg(&gens[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(after, expire_at, "the absolute expiry survives the restart");
    let recent = WindowBloom::builder(key, Duration::from_secs(600))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(recent.exists_many(&items).await.unwrap().iter().all(|&f| f));

    let dump = |conn: MultiplexedConnection| async move {
        let mut conn = conn;
        let mut all = Vec::new();
        for key in keys_like(&mut conn, "*").await {
            let bytes: Vec<u8> = redis::cmd("DUMP")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            all.push((key, bytes));
        }
        all
    };
    let before = dump(conn.clone()).await;
    let others = [
        WindowBloom::builder(key, Duration::from_secs(300)),
        WindowBloom::builder(key, Duration::from_secs(600)).generations(5),
        WindowBloom::builder(key, Duration::from_secs(600)).shards(2),
    ];
    for other in others {
        let other = other
            .expected_items(1000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        assert!(matches!(
            other.add("x").await,
            Err(Error::ParamsMismatch { .. })
        ));
        assert!(matches!(
            other.exists("x").await,
            Err(Error::ParamsMismatch { .. })
        ));
        assert!(matches!(
            other.clear().await,
            Err(Error::ParamsMismatch { .. })
        ));
    }
    let capacity = WindowBloom::builder(key, Duration::from_secs(600))
        .expected_items(2000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(matches!(
        capacity.add_many(&["x", "y"]).await,
        Err(Error::ParamsMismatch { .. })
    ));
    assert!(matches!(
        capacity.expire(Duration::from_secs(5)).await,
        Err(Error::ParamsMismatch { .. })
    ));
    // A plain filter at the same name is another kind.
    let plain = RedisBloom::builder(key)
        .layout(redbloom::Layout::Native)
        .expected_items(1000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(matches!(
        plain.add("x").await,
        Err(Error::ParamsMismatch { .. })
    ));
    assert_eq!(
        dump(conn.clone()).await,
        before,
        "a refused client wrote nothing"
    );

    // And a window over a plain go-zero filter's key is refused, the filter untouched.
    let gozero = RedisBloom::new(conn.clone(), "plain-gozero", 1000).unwrap();
    gozero.add("x").await.unwrap();
    let bytes = common::key_hex(&mut conn, "plain-gozero").await;
    let over = WindowBloom::builder("plain-gozero", Duration::from_secs(60))
        .expected_items(10)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(matches!(
        over.add("y").await,
        Err(Error::ParamsMismatch { .. })
    ));
    assert!(matches!(
        over.clear().await,
        Err(Error::ParamsMismatch { .. })
    ));
    assert_eq!(common::key_hex(&mut conn, "plain-gozero").await, bytes);
    assert!(keys_like(
        &mut conn,
        &format!("{}*", common::companion("plain-gozero", "gen:"))
    )
    .await
    .is_empty());
}

/// A sharded window filter: every item found, answers in input order, info over the shards,
/// and a clear that leaves no key behind.
#[tokio::test]
async fn sharded_windows() {
    let redis = common::redis().await;
    let key = common::unique_key("window-sharded");
    let mut conn = redis.connection().await;
    let recent = WindowBloom::builder(&key, Duration::from_secs(60))
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(4)
        .build(conn.clone())
        .unwrap();
    let items: Vec<String> = (0..2000).map(|i| format!("s-{i}")).collect();
    assert!(recent.add_many(&items).await.unwrap().iter().all(|&n| n));
    assert!(recent.add_many(&items).await.unwrap().iter().all(|&n| !n));
    let mut mixed = items[..10].to_vec();
    mixed.push("never".into());
    let found = recent.exists_many(&mixed).await.unwrap();
    assert_eq!(&found[..10], [true; 10]);
    assert!(recent.exists(&items[1999]).await.unwrap());
    let info = recent.info().await.unwrap();
    assert!(info.filter.estimated_items > 1900.0 && info.filter.estimated_items < 2100.0);
    let gens = keys_like(&mut conn, &format!("*:redbloom:*{key}:shard:*:gen:*")).await;
    assert_eq!(gens.len(), 4, "one generation per shard: {gens:?}");
    assert!(recent.clear().await.unwrap());
    assert!(keys_like(&mut conn, &format!("*{key}*")).await.is_empty());
}

/// Large batches take the dense path (bitmaps instead of a script per item): within one
/// generation, the same "new" flags, answers and bits as small batches through the script.
#[tokio::test]
async fn dense_batches_match_small_batches() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let (dense_key, small_key) = (
        common::unique_key("window-dense"),
        common::unique_key("window-small"),
    );
    // Generations of 20 minutes: both filters load within one, unless a boundary falls inside
    // the rounds, which then run again from the first.
    let build = |key: &str| {
        WindowBloom::builder(key, Duration::from_secs(3600))
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap()
    };
    let (dense, small) = (&build(&dense_key), &build(&small_key));
    let first: Vec<String> = (0..6_000).map(|i| format!("x{}", i % 5_000)).collect();
    let second: Vec<String> = (2_500..12_000).map(|i| format!("x{i}")).collect();
    let bitops = common::calls(&mut conn, "bitop").await;
    let rounds: [&[String]; 2] = [&first, &second];
    let runs = common::big_and_small_rounds(&conn, (dense, small), &rounds, 10).await;
    for (round, (big, bit_by_bit)) in runs.iter().enumerate() {
        assert!(big == bit_by_bit, "round {round}: new flags differ");
        let expected = [5_000, 12_000 - 5_000][round];
        let new = big.iter().filter(|&&n| n).count();
        assert!(
            new <= expected && new * 100 >= expected * 99,
            "{new} of {expected}"
        );
    }
    assert!(
        common::calls(&mut conn, "bitop").await >= bitops + 2,
        "the big batches were dense"
    );
    let getranges = common::calls(&mut conn, "getrange").await;
    let probes: Vec<String> = (0..20_000).map(|i| format!("x{i}")).collect();
    let big = dense.exists_many(&probes).await.unwrap();
    assert!(
        common::calls(&mut conn, "getrange").await > getranges,
        "the big check was dense"
    );
    let mut one_by_one = Vec::new();
    for chunk in probes.chunks(10) {
        one_by_one.extend(small.exists_many(chunk).await.unwrap());
    }
    assert!(big == one_by_one, "the dense check differs from small ones");
    assert!(big[..12_000].iter().all(|&f| f));
    // The same bits, generation by generation.
    let gens = |key: String| {
        let mut conn = conn.clone();
        async move {
            let mut all = Vec::new();
            let pattern = format!("{}*", common::companion(&key, "gen:"));
            for gen in keys_like(&mut conn, &pattern).await {
                let bytes: Vec<u8> = redis::cmd("GET")
                    .arg(&gen)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                all.push((gen.rsplit(':').next().unwrap().to_owned(), bytes));
            }
            all
        }
    };
    let (d, s) = (gens(dense_key.clone()).await, gens(small_key.clone()).await);
    assert!(!d.is_empty() && d == s, "the generations' bytes differ");
    assert!(
        keys_like(&mut conn, &common::companion(&dense_key, "scratch"))
            .await
            .is_empty()
    );
    let info = dense.info().await.unwrap();
    assert!(
        info.parts
            .iter()
            .all(|p| matches!(p.ttl, KeyTtl::Expires(_))),
        "{info:?}"
    );
    dense.clear().await.unwrap();
    small.clear().await.unwrap();
}

/// A dense add after a generation change: items found only in an older generation are not
/// new, and they are in the current generation afterwards.
#[tokio::test]
async fn dense_adds_see_older_generations() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("window-dense-older");
    let recent = window(conn.clone(), &key, 10_000);
    let old: Vec<String> = (0..5_000).map(|i| format!("old{i}")).collect();
    let mut both: Vec<String> = (0..5_000).map(|i| format!("young{i}")).collect();
    both.extend(old.iter().cloned());
    let bitops = common::calls(&mut conn, "bitop").await;
    assert!(recent.add_many(&old).await.unwrap().iter().all(|&n| n));
    tokio::time::sleep(W / (G - 1) + Duration::from_millis(50)).await;
    let new = recent.add_many(&both).await.unwrap();
    assert!(
        common::calls(&mut conn, "bitop").await >= bitops + 2,
        "both adds were dense"
    );
    assert!(
        new[5_000..].iter().all(|&n| !n),
        "old items were in an older generation"
    );
    let young = new[..5_000].iter().filter(|&&n| n).count();
    assert!(young >= 4_990, "{young} of 5000 young items new");
    let gens = keys_like(&mut conn, &format!("{}*", common::companion(&key, "gen:"))).await;
    assert_eq!(gens.len(), 2, "{gens:?}");
    // The newest generation alone holds the old items now: the older one's expiry does not
    // take them.
    let newest = gens
        .iter()
        .max_by_key(|g| g.rsplit(':').next().unwrap().parse::<i64>().unwrap())
        .unwrap();
    let bytes: Vec<u8> = redis::cmd("GET")
        .arg(newest)
        .query_async(&mut conn)
        .await
        .unwrap();
    let k = recent.hashes();
    let bits = recent.bits();
    for item in &old[..100] {
        let found = redbloom::native_locations(item.as_bytes(), bits, k).all(|o| {
            bytes
                .get((o / 8) as usize)
                .is_some_and(|b| b & (0x80 >> (o % 8)) != 0)
        });
        assert!(found, "{item} missing from the newest generation");
    }
    recent.clear().await.unwrap();
}

/// Steps of the per-item scripts (batches too small for the dense path): the add and the check
/// call Redis a few times per step, not per item (`lua/window_find.lua`), in calls of at most
/// 1,000 offsets. Their answers match one call per item across those calls' boundaries: an item
/// found only in an older generation is not new, an item twice in one batch is new at most
/// once, and a check finds what either way added.
#[tokio::test]
async fn script_steps_match_one_call_per_item() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    // (false-positive rate, capacity, batch): k = 8 with four BITFIELD calls in the add's
    // step; k = 2 with a first-bit read of two calls in the check's.
    for (fpr, capacity, size) in [(0.01, 100_000, 500_usize), (0.4, 1_000_000, 1_500)] {
        // A round must fit in one generation (W / (G - 1)): a machine too slow for it gets a
        // window twice as long for the next round, a few times at most.
        let mut window = W;
        'round: for round in 0.. {
            assert!(
                round < 6,
                "no round fit in a generation of a {window:?} window"
            );
            let window_ms = window.as_millis() as u64;
            let epoch = |ms: u64| ms * u64::from(G - 1) / window_ms;
            let build = |key: &str| {
                WindowBloom::builder(key, window)
                    .generations(G)
                    .expected_items(capacity)
                    .false_positive_rate(fpr)
                    .build(conn.clone())
                    .unwrap()
            };
            let (batched_key, single_key) = (
                common::unique_key("window-steps-batched"),
                common::unique_key("window-steps-single"),
            );
            let (batched, single) = (build(&batched_key), build(&single_key));
            let scripts = common::calls(&mut conn, "evalsha").await;
            let old: Vec<String> = (0..size.div_ceil(3)).map(|i| format!("old{i}")).collect();
            for chunk in old.chunks(100) {
                batched.add_many(chunk).await.unwrap();
                single.add_many(chunk).await.unwrap();
            }
            // The next generation: the old items are in an older one only.
            let start = epoch(common::server_ms(&mut conn).await);
            while epoch(common::server_ms(&mut conn).await) == start {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Old items, young ones, and young ones again, mixed.
            let batch: Vec<String> = (0..size)
                .map(|i| match i % 3 {
                    0 => format!("old{}", i / 3),
                    1 => format!("young{}", i / 3),
                    _ => format!("young{}", i / 6),
                })
                .collect();
            let at_once = batched.add_many(&batch).await.unwrap();
            let mut one_by_one = Vec::new();
            for item in &batch {
                one_by_one.push(single.add(item).await.unwrap());
            }
            let probes: Vec<String> = (0..size)
                .map(|i| match i % 2 {
                    0 => batch[i].clone(),
                    _ => format!("absent{i}"),
                })
                .collect();
            let found_at_once = batched.exists_many(&probes).await.unwrap();
            let mut found_one_by_one = Vec::new();
            for item in &probes {
                found_one_by_one.push(single.exists(item).await.unwrap());
            }
            let moved = epoch(common::server_ms(&mut conn).await) != start + 1;
            batched.clear().await.unwrap();
            single.clear().await.unwrap();
            if moved {
                // A generation began during the round: the two filters' items are split
                // differently over generations. Start over, with a longer window.
                window *= 2;
                continue 'round;
            }
            assert!(
                common::calls(&mut conn, "evalsha").await > scripts,
                "the batches went by the scripts"
            );
            assert_eq!(at_once, one_by_one, "fpr {fpr}: the add's answers differ");
            assert_eq!(
                found_at_once, found_one_by_one,
                "fpr {fpr}: the check's differ"
            );
            for (i, new) in at_once.iter().enumerate() {
                if i % 3 != 1 {
                    assert!(!new, "fpr {fpr}: {} (item {i}) was not new", batch[i]);
                }
            }
            let young = (0..size).filter(|i| i % 3 == 1 && at_once[*i]).count();
            assert!(young * 2 >= size / 3, "fpr {fpr}: {young} young items new");
            assert!(found_at_once.iter().step_by(2).all(|&f| f), "fpr {fpr}");
            break;
        }
    }
}

/// Checks read the newest generation first (a plain `BITFIELD_RO`) while most of the items
/// checked lately were there, sending the script only the items not found in it; a part whose
/// reads find too few goes by the script alone and reads first again every [`SAMPLE`]th check.
/// The answers are the script's either way: items in the newest generation, in an older one,
/// and in none.
#[tokio::test]
async fn checks_read_the_newest_generation_first_while_it_holds_most() {
    /// The library's `window::newest::SAMPLE`.
    const SAMPLE: usize = 32;
    // Its own server: the test counts the commands it serves.
    let server = RedisServer::start().expect("redis-server on PATH");
    let mut admin = common::connect(&server.url()).await;
    let conn = common::connect(&server.url()).await;
    let filter = |key: &str, window: Duration, generations: u32| {
        WindowBloom::builder(key, window)
            .generations(generations)
            .expected_items(10_000)
            .false_positive_rate(1e-6)
            .build(conn.clone())
            .unwrap()
    };
    let calls = |admin: &MultiplexedConnection| {
        let mut admin = admin.clone();
        async move {
            (
                common::calls(&mut admin, "bitfield_ro").await,
                common::calls(&mut admin, "evalsha_ro").await,
            )
        }
    };
    let recent = filter("newest", Duration::from_secs(3600), 4);
    let present: Vec<String> = (0..100).map(|i| format!("p-{i}")).collect();
    let absent: Vec<String> = (0..100).map(|i| format!("a-{i}")).collect();
    recent.add_many(&present).await.unwrap();
    // A new part goes by the script, and reads first at its SAMPLEth check.
    for item in &present[..SAMPLE] {
        assert!(recent.exists(item).await.unwrap());
    }
    let before = calls(&admin).await;
    for item in &present {
        assert!(recent.exists(item).await.unwrap(), "{item}");
    }
    let after = calls(&admin).await;
    assert_eq!(
        after.0 - before.0,
        100,
        "every check read the newest generation"
    );
    assert_eq!(after.1, before.1, "and needed no script");
    // Half found (one command: 10 items of 20 bits in 4 generations): the other half go to
    // the script, and the part keeps reading first.
    let mixed: Vec<&String> = present[..5].iter().chain(&absent[..5]).collect();
    let found = recent.exists_many(&mixed).await.unwrap();
    assert!(found[..5].iter().all(|&f| f) && found[5..].iter().all(|&f| !f));
    let mixed_calls = calls(&admin).await;
    assert_eq!(mixed_calls.1 - after.1, 1, "one script for the 5 not found");
    // (The scripts' own BITFIELD_RO calls count too: from here on, scripts are counted.)
    // Checks of absent items: each goes to the script; the first read found none, so the
    // part goes by the script alone, reading first every SAMPLEth check.
    for item in &absent[50..] {
        assert!(!recent.exists(item).await.unwrap(), "{item}");
    }
    let absent_calls = calls(&admin).await;
    assert_eq!(
        absent_calls.1 - mixed_calls.1,
        50,
        "each absent item by the script"
    );
    // Present items again: by the script until a check reads first and finds its item,
    // then by reads alone.
    for item in &present[..SAMPLE + 8] {
        assert!(recent.exists(item).await.unwrap(), "{item}");
    }
    let again = calls(&admin).await;
    let scripts = (again.1 - absent_calls.1) as usize;
    assert!(
        (1..=SAMPLE).contains(&scripts),
        "{scripts} of {} checks by the script",
        SAMPLE + 8
    );
    for item in &present[SAMPLE + 8..SAMPLE + 24] {
        assert!(recent.exists(item).await.unwrap(), "{item}");
    }
    assert_eq!(calls(&admin).await.1, again.1, "reading first again");

    // An item in an older generation: not in the newest, found by the script.
    let short = filter("older", Duration::from_secs(2), 2);
    short.add("old").await.unwrap();
    let generations = format!("{}*", common::companion("older", "gen:"));
    let made = keys_like(&mut admin, &generations).await;
    let started = std::time::Instant::now();
    while keys_like(&mut admin, &generations).await == made {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no new generation"
        );
        short.add("meanwhile").await.unwrap();
    }
    // Reading first (items of the newest generation: the last checks need no script), then
    // the old item: not found by the read, found by the script.
    let fresh: Vec<String> = (0..SAMPLE).map(|i| format!("fresh-{i}")).collect();
    short.add_many(&fresh).await.unwrap();
    for item in &fresh {
        assert!(short.exists(item).await.unwrap());
    }
    let before = calls(&admin).await;
    assert!(short.exists(&fresh[0]).await.unwrap());
    let on = calls(&admin).await;
    assert_eq!((on.0 - before.0, on.1 - before.1), (1, 0), "reading first");
    assert!(
        short.exists("old").await.unwrap(),
        "the older generation's item"
    );
    assert_eq!(calls(&admin).await.1 - on.1, 1, "by the script");
}

/// A batch goes whole once its bits times 256 bytes reach the live generations' bytes (the
/// per-item scripts cost about 1.4 µs a bit of an add, 0.35 µs of a check, a whole pass a few
/// ns a byte): 1,000 items into four generations of 138 KB, adds and checks alike, answering
/// as batches of 10 do. At 32 bytes a bit such batches went by the scripts (from about 2,150
/// items here): into generations of 3.7 MB, batches of 10,000 to 20,000 1.5-4.3x slower. On a
/// server of its own: the test counts the server's `BITOP`s and `GETRANGE`s.
#[tokio::test]
async fn mid_sized_batches_go_whole() {
    let server = RedisServer::start().expect("redis-server on PATH");
    let conn = common::connect(&server.url()).await;
    let (key, small_key) = (
        common::unique_key("window-whole"),
        common::unique_key("window-whole-small"),
    );
    let build = |key: &str| {
        WindowBloom::builder(key, Duration::from_secs(3600))
            .expected_items(100_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap()
    };
    let (whole, small) = (&build(&key), &build(&small_key));
    let batch: &Vec<String> = &(0..1_000).map(|i| format!("w{i}")).collect();
    let counted = &conn;
    let ((added, merged), (found, read), small_added) = common::within_one_epoch(
        conn.clone(),
        common::generation_at(whole.window(), whole.generations()),
        || async move {
            let mut conn = counted.clone();
            let added = common::calls_during(&mut conn, "bitop", whole.add_many(batch)).await;
            let found = common::calls_during(&mut conn, "getrange", whole.exists_many(batch)).await;
            let mut small_added = Vec::new();
            for chunk in batch.chunks(10) {
                small_added.extend(small.add_many(chunk).await.unwrap());
            }
            (added, found, small_added)
        },
        || async move {
            whole.clear().await.unwrap();
            small.clear().await.unwrap();
        },
    )
    .await;
    let (added, found) = (added.unwrap(), found.unwrap());
    assert!(merged > 0, "the add of 1,000 went whole: {merged} BITOPs");
    assert!(read > 0, "the check of 1,000 went whole: {read} GETRANGEs");
    assert!(added == small_added, "new flags differ from batches of 10");
    assert!(added.iter().filter(|&&n| n).count() >= 990, "new");
    assert!(found.iter().all(|&f| f), "an added item not found");
}

/// A generation is made whole, at its full size, by the step that creates it (issue 54): grown
/// from an empty string by the items' bits, Redis kept up to twice its length allocated
/// (`MEMORY USAGE` 1,572,952 bytes for a 786,432-byte generation after three single adds).
#[tokio::test]
async fn a_generation_takes_its_size_once() {
    let redis = common::redis().await;
    let key = common::unique_key("window-made-whole");
    let mut conn = redis.connection().await;
    for shards in [1, 3] {
        let recent = WindowBloom::builder(format!("{key}-{shards}"), Duration::from_secs(3600))
            .expected_items(500_000)
            .false_positive_rate(0.01)
            .shards(shards)
            .build(conn.clone())
            .unwrap();
        for item in ["a", "b", "c"] {
            assert!(recent.add(item).await.unwrap());
        }
        let part_bytes = recent.bits().div_ceil(8 * u64::from(shards));
        let pattern = format!("*{key}-{shards}*:gen:*");
        let generations: Vec<String> = keys_like(&mut conn, &pattern)
            .await
            .into_iter()
            .filter(|k| !common::is_record(k))
            .collect();
        assert!(!generations.is_empty(), "{pattern}");
        for generation in generations {
            let len: u64 = redis::cmd("STRLEN")
                .arg(&generation)
                .query_async(&mut conn)
                .await
                .unwrap();
            let used: u64 = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&generation)
                .arg("SAMPLES")
                .arg(0)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert!(
                len.abs_diff(part_bytes) <= 8,
                "{generation}: {len} of {part_bytes}"
            );
            // (The allocator's size classes are at most a quarter apart.)
            assert!(
                used < len + len / 4 + 256,
                "{generation}: {used} bytes for {len}"
            );
        }
    }
}
