//! `SCRIPT FLUSH` and `FLUSHALL` from another client while 8 tasks keep adding and checking:
//! no operation fails, a flushed filter is empty, and items added after the last flush stay.

mod common;

use common::server::RedisServer;
use redbloom::{Engine, KeyTtl, RedisBloom};
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const TASKS: usize = 8;
const BATCH: usize = 500;
/// Rounds per task while only `SCRIPT FLUSH` runs.
const ROUNDS: usize = 4;
/// How many `FLUSHALL`s land in the middle of the second phase.
const MID_RUN_FLUSHALLS: usize = 2;
/// Batches each task adds after the last mid-run `FLUSHALL` before it stops.
const SURVIVING_BATCHES: usize = 2;

type Bloom = RedisBloom<MultiplexedConnection>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lua_engine_survives_flushes_mid_run() {
    flushes_mid_run(Engine::Scripts, 2_000_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_bitfield_engine_survives_flushes_mid_run() {
    flushes_mid_run(Engine::Fast, 2_000_000).await;
}

/// A filter small enough (50 KB) that every batch of 500 takes the dense path (a `MULTI` with
/// `GET`, `SET`, `EVAL`, `DEL`, and a whole `GETRANGE` read to check).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_dense_path_survives_flushes_mid_run() {
    flushes_mid_run(Engine::Fast, 400_000).await;
}

fn items(phase: &str, task: usize, round: usize) -> Vec<String> {
    (0..BATCH)
        .map(|i| format!("{phase}:task{task}:round{round}:item{i}"))
        .collect()
}

/// A connection that waits up to 10 s for a reply: the point here is flushes, not slow replies
/// on a loaded machine (redis-rs gives up after 500 ms by default).
async fn patient_connection(url: &str) -> MultiplexedConnection {
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

async fn cmd(conn: &mut MultiplexedConnection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    let () = cmd
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("{args:?}: {err}"));
}

/// How many `NOSCRIPT` errors the server has answered (`INFO errorstats`), or `None` before
/// Redis 6.2, which does not count them.
async fn noscript_errors(conn: &mut MultiplexedConnection) -> Option<u64> {
    let info: String = redis::cmd("INFO")
        .arg("everything")
        .query_async(conn)
        .await
        .unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
    };
    let version: Vec<u32> = field("redis_version:")?
        .split('.')
        .map(|part| part.parse().unwrap_or(0))
        .collect();
    if version[..] < [6, 2][..] {
        return None;
    }
    let count = field("errorstat_NOSCRIPT:count=").map_or(0, |n| n.parse().unwrap());
    Some(count)
}

/// One round of a task: a batch with `add_many`, the batch checked with `exists_many`, and one
/// item through the single-item `add` and `exists` (each engine's other scripts or commands).
/// Returns whether the batch and the single item were found right after being added.
async fn round(bloom: &Bloom, batch: &[String]) -> bool {
    let ctx = &batch[0];
    bloom
        .add_many(batch)
        .await
        .unwrap_or_else(|err| panic!("add_many of {ctx}..: {err:?}"));
    let single = format!("{ctx}:single");
    bloom
        .add(&single)
        .await
        .unwrap_or_else(|err| panic!("add of {single}: {err:?}"));
    let found = bloom
        .exists_many(batch)
        .await
        .unwrap_or_else(|err| panic!("exists_many of {ctx}..: {err:?}"));
    let single_found = bloom
        .exists(&single)
        .await
        .unwrap_or_else(|err| panic!("exists of {single}: {err:?}"));
    found.iter().all(|f| *f) && single_found
}

/// The answers of `exists_many` for `items`, 1,000 per call (one call for all would hold the
/// server longer than the client's response timeout with the Lua engine).
async fn exists_all(bloom: &Bloom, items: &[String]) -> Vec<bool> {
    let mut found = Vec::with_capacity(items.len());
    for chunk in items.chunks(1_000) {
        found.extend(bloom.exists_many(chunk).await.unwrap());
    }
    found
}

/// Runs `SCRIPT FLUSH` back to back until `stop`; returns how many ran.
async fn flush_scripts_until(mut conn: MultiplexedConnection, stop: Arc<AtomicBool>) -> usize {
    let mut flushes = 0;
    while !stop.load(SeqCst) {
        cmd(&mut conn, &["SCRIPT", "FLUSH"]).await;
        flushes += 1;
    }
    flushes
}

async fn flushes_mid_run(engine: Engine, bits: u64) {
    // FLUSHALL wipes the whole server: always a server of our own, even with REDIS_URL set.
    let server = RedisServer::start()
        .expect("this test flushes the whole server: it needs redis-server on PATH");
    let url = server.url();
    let mut admin = patient_connection(&url).await;
    let key = common::unique_key("flush-mid-run");
    let bloom = RedisBloom::new(patient_connection(&url).await, &key, bits)
        .unwrap()
        .with_engine(engine);
    let noscript_before = noscript_errors(&mut admin).await;

    // Phase 1: SCRIPT FLUSH back to back while every task adds and checks.
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = tokio::spawn(flush_scripts_until(
        patient_connection(&url).await,
        Arc::clone(&stop),
    ));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let bloom = bloom.clone();
        tasks.push(tokio::spawn(async move {
            for r in 0..ROUNDS {
                let batch = items("p1", task, r);
                assert!(
                    round(&bloom, &batch).await,
                    "{}..: an item added during SCRIPT FLUSH is missing",
                    batch[0]
                );
            }
        }));
    }
    for task in tasks {
        task.await
            .expect("an adding task failed during SCRIPT FLUSH");
    }
    stop.store(true, SeqCst);
    let flushes = flusher.await.unwrap();
    assert!(
        flushes >= 10,
        "only {flushes} SCRIPT FLUSHes ran during the adds"
    );
    let phase1: Vec<String> = (0..TASKS)
        .flat_map(|task| (0..ROUNDS).flat_map(move |r| items("p1", task, r)))
        .collect();
    assert!(
        exists_all(&bloom, &phase1).await.iter().all(|f| *f),
        "an item of phase 1 is missing after the flushes"
    );
    if let (Engine::Scripts, Some(before)) = (engine, noscript_before) {
        // The flushes really hit the engine: the server answered its EVALSHAs with NOSCRIPT,
        // many times, and each time the engine recovered.
        let hits = noscript_errors(&mut admin).await.unwrap() - before;
        assert!(
            hits > 4,
            "only {hits} NOSCRIPT replies: the flushes never caught the engine without its scripts"
        );
    }

    // Phase 2: FLUSHALL (and SCRIPT FLUSH) in the middle of the adds. No call fails; a batch
    // begun after the last FLUSHALL returned survives to the end.
    let started = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let batches = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = {
        let (started, done, batches, stop) = (
            Arc::clone(&started),
            Arc::clone(&done),
            Arc::clone(&batches),
            Arc::clone(&stop),
        );
        let mut conn = patient_connection(&url).await;
        tokio::spawn(async move {
            for n in 0..MID_RUN_FLUSHALLS {
                // Let a few batches land between FLUSHALLs, flushing scripts meanwhile.
                let target = batches.load(SeqCst) + TASKS;
                while batches.load(SeqCst) < target {
                    cmd(&mut conn, &["SCRIPT", "FLUSH"]).await;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                started.fetch_add(1, SeqCst);
                cmd(&mut conn, &["FLUSHALL"]).await;
                done.store(n + 1, SeqCst);
            }
            while !stop.load(SeqCst) {
                cmd(&mut conn, &["SCRIPT", "FLUSH"]).await;
            }
        })
    };
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let bloom = bloom.clone();
        let (started, done, batches) = (
            Arc::clone(&started),
            Arc::clone(&done),
            Arc::clone(&batches),
        );
        tasks.push(tokio::spawn(async move {
            let mut survivors = Vec::new();
            let mut r = 0;
            while survivors.len() < SURVIVING_BATCHES * BATCH {
                let batch = items("p2", task, r);
                let done_before = done.load(SeqCst);
                let found = round(&bloom, &batch).await;
                // Unless a FLUSHALL was in flight or began meanwhile, the batch is all there.
                if started.load(SeqCst) == done_before {
                    assert!(found, "{}..: missing right after its add", batch[0]);
                }
                if done_before == MID_RUN_FLUSHALLS {
                    survivors.extend(batch);
                }
                batches.fetch_add(1, SeqCst);
                r += 1;
            }
            survivors
        }));
    }
    let mut survivors = Vec::new();
    for task in tasks {
        let task = tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("the adding tasks did not finish within 20 s");
        survivors.extend(task.expect("an adding task failed during FLUSHALL"));
    }
    stop.store(true, SeqCst);
    flusher.await.unwrap();
    assert_eq!(done.load(SeqCst), MID_RUN_FLUSHALLS);
    assert_eq!(survivors.len(), TASKS * SURVIVING_BATCHES * BATCH);
    let found = exists_all(&bloom, &survivors).await;
    let missing = found.iter().filter(|f| !**f).count();
    assert_eq!(
        missing, 0,
        "{missing} items added after the last FLUSHALL are missing"
    );

    // Phase 3: a FLUSHALL with nothing running empties the filter.
    cmd(&mut admin, &["FLUSHALL"]).await;
    let info = bloom.info().await.unwrap();
    assert_eq!(info.ttl, KeyTtl::Missing, "the key is gone after FLUSHALL");
    assert_eq!((info.bits_set, info.bytes), (0, 0));
    let earlier: Vec<String> = phase1.iter().chain(&survivors).cloned().collect();
    let found = exists_all(&bloom, &earlier).await;
    assert!(
        found.iter().all(|f| !*f),
        "an item from before FLUSHALL is still found"
    );
    assert!(!bloom.exists(&earlier[0]).await.unwrap());

    // Adding works again, under SCRIPT FLUSH, and everything added after the last FLUSHALL is
    // present at the end.
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = tokio::spawn(flush_scripts_until(
        patient_connection(&url).await,
        Arc::clone(&stop),
    ));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let bloom = bloom.clone();
        tasks.push(tokio::spawn(async move {
            let batch = items("p3", task, 0);
            let new = bloom.add_many(&batch).await.unwrap();
            assert!(
                new.iter().filter(|n| **n).count() > BATCH - 5,
                "items added to an emptied filter are new"
            );
            assert!(round(&bloom, &items("p3", task, 1)).await);
        }));
    }
    for task in tasks {
        task.await.expect("an adding task failed after FLUSHALL");
    }
    stop.store(true, SeqCst);
    flusher.await.unwrap();
    let after: Vec<String> = (0..TASKS)
        .flat_map(|task| (0..2).flat_map(move |r| items("p3", task, r)))
        .collect();
    assert!(
        exists_all(&bloom, &after).await.iter().all(|f| *f),
        "an item added after the last FLUSHALL is missing"
    );
    assert_eq!(bloom.info().await.unwrap().ttl, KeyTtl::Persistent);
}
