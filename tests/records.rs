//! The records of exact answers across retries, by the server's clock and bounded (SPEC.md §3,
//! "Names, losses and records"): a record goes once its caller has the reply (its id travels
//! with the next write to its part), every ring slot has a TTL from its start that is never
//! extended, so records hold the writes in flight, never a `noeviction` server full, and are
//! gone within the ring's turn after the last write; a retry whose record is lost fails with
//! `OutcomeUnknown` naming its step, never a wrong answer.

mod common;

use common::server::RedisServer;
use redbloom::{CountingBloom, Error, Layout, RedisBloom, Retry};
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The summed `MEMORY USAGE` of the record keys of the server, and how many records (fields
/// other than a slot's own `e`, `t`, `n`) they hold.
async fn records(conn: &mut MultiplexedConnection) -> (u64, usize) {
    let mut bytes = 0;
    let mut held = 0;
    for key in common::keys_like(conn, "*:once:*").await {
        let usage: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        bytes += usage.unwrap_or(0);
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        held += fields
            .iter()
            .filter(|f| !matches!(f.as_str(), "e" | "t" | "n" | "q"))
            .count();
    }
    (bytes, held)
}

/// Waits until no record key is left, at most `limit`: how long that took.
async fn records_gone(conn: &mut MultiplexedConnection, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if common::keys_like(conn, "*:once:*").await.is_empty() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "records left {limit:?} after the last write: {:?}",
            common::keys_like(conn, "*:once:*").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 64 tasks add single items (every one new) for `run`, while the record keys are sampled
/// every 100 ms: the largest sample (bytes, records) and the items added.
async fn singles(
    bloom: &RedisBloom<redis::aio::ConnectionManager>,
    conn: &mut MultiplexedConnection,
    run: Duration,
) -> ((u64, usize), usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let added = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..64)
        .map(|task| {
            let (bloom, stop, added) = (bloom.clone(), stop.clone(), added.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) && n < 200_000 {
                    let new = bloom.add(format!("single:{task}:{n}")).await.unwrap();
                    assert!(new, "a new item answered seen");
                    n += 1;
                    added.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let mut most = (0, 0);
    while start.elapsed() < run {
        let (bytes, held) = records(conn).await;
        most = (most.0.max(bytes), most.1.max(held));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    (most, added.load(Ordering::Relaxed))
}

/// Under 64 single-item callers the records hold the writes in flight: a few dozen, far under
/// 1 MiB, however long the run; and every ring slot is gone within its TTL (10 slots of the
/// ring's width, 1 s for a retry budget of 5 s) after the last write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_hold_the_writes_in_flight_and_go_by_themselves() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let mut conn = common::connect(&url).await;
    let bloom = RedisBloom::builder("singles")
        .layout(Layout::Native)
        .expected_items(2_000_000)
        .false_positive_rate(0.01)
        .retry(Retry::for_duration(Duration::from_secs(5)))
        .build(common::impatient(&url, Duration::from_secs(2)).await)
        .unwrap();
    let ((bytes, held), added) = singles(&bloom, &mut conn, Duration::from_secs(4)).await;
    assert!(added > 2_000, "only {added} adds");
    assert!(bytes <= 1 << 20, "records took {bytes} bytes");
    // Each caller has one write in flight, and its answered ids travel with its next one.
    assert!(held <= 64 * 3, "{held} records held at once");
    let gone = records_gone(&mut conn, Duration::from_secs(5 + 10)).await;
    assert!(gone <= Duration::from_secs(11), "gone after {gone:?}");
}

/// A server at `maxmemory 50mb` with `noeviction`, 38 MB of it a filter: 64 single-item callers
/// never fill the rest with records, and another application's write goes through at once
/// after the filter's last write (issue 51 point 4: records held it full for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_never_hold_a_noeviction_server_full() {
    let server =
        RedisServer::start_with(&["--maxmemory", "50mb", "--maxmemory-policy", "noeviction"])
            .unwrap();
    let url = server.url();
    let mut conn = common::connect(&url).await;
    let bloom = RedisBloom::builder("full")
        .layout(Layout::Native)
        .bits(38 << 23)
        .hashes(7)
        .retry(Retry::for_duration(Duration::from_secs(5)))
        .build(common::impatient(&url, Duration::from_secs(2)).await)
        .unwrap();
    assert!(bloom.add("first").await.unwrap());
    // The key grown to its whole size (a string grows only to its highest bit written).
    let _: i64 = redis::cmd("SETBIT")
        .arg("full")
        .arg((38u64 << 23) - 1)
        .arg(0)
        .query_async(&mut conn)
        .await
        .unwrap();
    let used = |info: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(used(&info) > 38 << 20, "the filter holds 38 MB");
    let ((bytes, _), added) = singles(&bloom, &mut conn, Duration::from_secs(3)).await;
    assert!(added > 1_000, "only {added} adds");
    assert!(bytes <= 1 << 20, "records took {bytes} bytes");
    let set: redis::RedisResult<()> = redis::cmd("SET")
        .arg("another-application")
        .arg(vec![7u8; 1 << 20])
        .query_async(&mut conn)
        .await;
    assert!(set.is_ok(), "another application's write: {set:?}");
}

/// Every record key is deleted in a loop while 8 tasks load batches under two stalls with
/// short timeouts (issue 51 point 5: a plain load then reported fewer new items, with no
/// error): each call either answers exactly (every item new: each is added once) or fails with
/// `OutcomeUnknown` naming its step; never a guessed answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_is_outcome_unknown_never_a_wrong_answer() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let retry = Retry::for_duration(Duration::from_secs(10))
        .with_delays(Duration::from_millis(50), Duration::from_millis(200));
    let conn = common::impatient(&url, Duration::from_millis(150)).await;
    let plain = RedisBloom::builder("lossy")
        .layout(Layout::Native)
        .expected_items(200_000)
        .false_positive_rate(0.01)
        .retry(retry)
        .build(conn.clone())
        .unwrap();
    let counting = CountingBloom::builder("lossy-counts")
        .expected_items(50_000)
        .false_positive_rate(0.01)
        .retry(retry)
        .build(conn)
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let deleter = tokio::spawn({
        let (url, stop) = (url.clone(), stop.clone());
        async move {
            let mut admin = common::connect(&url).await;
            let mut deleted = 0;
            while !stop.load(Ordering::Relaxed) {
                let rings = common::keys_like(&mut admin, "*:once:*").await;
                if !rings.is_empty() {
                    let _: redis::RedisResult<i64> =
                        redis::cmd("DEL").arg(&rings).query_async(&mut admin).await;
                    deleted += rings.len();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            deleted
        }
    });
    let stalls = tokio::spawn({
        let url = url.clone();
        async move {
            let mut admin = common::connect(&url).await;
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(400)).await;
                let _: () = redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(700)
                    .arg("WRITE")
                    .query_async(&mut admin)
                    .await
                    .unwrap();
            }
        }
    });
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let (plain, counting) = (plain.clone(), counting.clone());
            tokio::spawn(async move {
                let (mut exact, mut unknown) = (0, 0);
                for call in 0..40 {
                    let batch: Vec<String> = (0..50)
                        .map(|i| format!("lossy:{task}:{call}:{i}"))
                        .collect();
                    match plain.add_many(&batch).await {
                        Ok(new) => {
                            assert!(new.iter().all(|&n| n), "a new item answered seen");
                            exact += 1;
                        }
                        Err(Error::OutcomeUnknown { step, .. }) => {
                            assert!(step.starts_with("step "), "{step}");
                            unknown += 1;
                        }
                        Err(err) => panic!("{err}"),
                    }
                    // Counted twice, removed once: found, whatever retries met.
                    // (An add whose outcome is unknown may not have counted: then nothing is
                    // asked of the batch. A remove whose outcome is unknown counted once or not
                    // at all, never twice.)
                    let batch = &batch[..10];
                    let mut counted = 0;
                    for _ in 0..2 {
                        match counting.add_many(batch).await {
                            Ok(_) => counted += 1,
                            Err(Error::OutcomeUnknown { .. }) => {}
                            Err(err) => panic!("{err}"),
                        }
                    }
                    match counting.remove_many(batch).await {
                        Ok(_) | Err(Error::OutcomeUnknown { .. }) => {}
                        Err(err) => panic!("{err}"),
                    }
                    if counted == 2 {
                        let found = counting.exists_many(batch).await.unwrap();
                        assert!(found.iter().all(|&f| f), "added twice, removed once: gone");
                    }
                }
                (exact, unknown)
            })
        })
        .collect();
    let (mut exact, mut unknown) = (0, 0);
    for task in tasks {
        let (e, u) = task.await.unwrap();
        exact += e;
        unknown += u;
    }
    stalls.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let deleted = deleter.await.unwrap();
    assert!(deleted > 0, "no record was deleted");
    assert!(exact > 0, "no call answered ({unknown} unknown)");
    eprintln!("{exact} calls exact, {unknown} outcome unknown, {deleted} ring slots deleted");
}

/// Runs `add` (a write to the filter `key` through `proxy`) with its reply held back: once the
/// key's bytes show it applied, its records are deleted when `lose_record`, and the
/// connection is cut, so that the client retries on a new one. The add's outcome.
async fn reply_lost<F>(
    proxy: &common::proxy::Proxy,
    admin: &mut MultiplexedConnection,
    key: &str,
    lose_record: bool,
    add: F,
) -> redbloom::Result<bool>
where
    F: std::future::Future<Output = redbloom::Result<bool>> + Send + 'static,
{
    let bytes = |mut conn: MultiplexedConnection| {
        let key = key.to_owned();
        async move {
            let b: Vec<u8> = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            b
        }
    };
    let was = bytes(admin.clone()).await;
    proxy.hold();
    let add = tokio::spawn(add);
    let deadline = Instant::now() + Duration::from_secs(5);
    while bytes(admin.clone()).await == was {
        assert!(
            Instant::now() < deadline,
            "the add never reached the server"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if lose_record {
        let rings = common::keys_like(admin, &format!("*{key}:once:*")).await;
        let _: i64 = redis::cmd("DEL")
            .arg(&rings)
            .query_async(admin)
            .await
            .unwrap();
    }
    proxy.cut();
    add.await.unwrap()
}

/// A plain add and a counting add that reach the server and are applied, whose replies are
/// lost (a proxy drops them, then cuts the connection): the retry reads the record back and
/// answers exactly ("new", removed once); with the record deleted before the retry, the retry
/// fails with `OutcomeUnknown` naming its step and applies nothing again (issue 51 point 5:
/// it applied again and answered "seen", or removed twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_reads_its_record_back_or_is_outcome_unknown() {
    let server = RedisServer::start().unwrap();
    let mut admin = common::connect(&server.url()).await;
    let proxy = common::proxy::Proxy::start(server.port()).await;
    // (A retry that finds its whole ring gone asks again until the budget is spent: the first
    // attempt could still be on its way.)
    let retry = Retry::for_duration(Duration::from_secs(3))
        .with_delays(Duration::from_millis(50), Duration::from_millis(100));
    let conn = common::impatient(&proxy.url(), Duration::from_millis(300)).await;
    let plain = RedisBloom::builder("lost-reply")
        .layout(Layout::Native)
        .bits(1 << 16)
        .hashes(5)
        .retry(retry)
        .build(conn.clone())
        .unwrap();
    let counting = CountingBloom::builder("lost-reply-counts")
        .bits(1 << 12)
        .hashes(3)
        .retry(retry)
        .build(conn)
        .unwrap();
    assert!(plain.add("warm").await.unwrap());
    counting.add("warm").await.unwrap();
    for lose_record in [false, true] {
        let item = format!("item-{lose_record}");
        let plain = plain.clone();
        let add = async move { plain.add(item).await };
        let answer = reply_lost(&proxy, &mut admin, "lost-reply", lose_record, add).await;
        match (lose_record, answer) {
            (false, Ok(new)) => assert!(new, "the retry answered seen for the item it added"),
            (true, Err(Error::OutcomeUnknown { key, step })) => {
                assert_eq!(key, "lost-reply");
                assert!(step.starts_with("step ") && step.contains("gone"), "{step}");
            }
            (lose_record, other) => panic!("record lost: {lose_record}, answer {other:?}"),
        }
    }
    // A counting add: applied once, never twice (a remove then leaves the item absent).
    for lose_record in [false, true] {
        let item = format!("counted-{lose_record}");
        let (counter, added) = (counting.clone(), item.clone());
        let add = async move { counter.add(added).await };
        let answer = reply_lost(&proxy, &mut admin, "lost-reply-counts", lose_record, add).await;
        match (lose_record, answer) {
            (false, Ok(new)) => assert!(new, "the retry answered seen for the item it added"),
            (true, Err(Error::OutcomeUnknown { .. })) => {}
            (lose_record, other) => panic!("record lost: {lose_record}, answer {other:?}"),
        }
        assert!(counting.remove(&item).await.unwrap());
        assert!(
            !counting.exists(&item).await.unwrap(),
            "{item}: added once, removed once: still there (counted twice)"
        );
    }
}
