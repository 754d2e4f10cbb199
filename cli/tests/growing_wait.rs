//! The durability option on growing filters (SPEC.md §4 "growing"): built with
//! `wait_for_replicas`, every write (add, and batches small and of several levels, for a filter
//! of one key and a sharded one) succeeds only once a replica has it (one `WAIT` per key
//! written, after all its writes), and fails with `Error::NotReplicated` when none confirms in
//! time, quickly. The CLI's `--wait-replicas` with `--growth` too.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::server::RedisServer;
use redbloom::{Error, GrowingBloom};
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

/// The first level's items (all shards together): the big batch makes several levels.
const FIRST: u64 = 1_000;

/// A connection whose replies may take 10 s: several `WAIT`s of a sharded filter's write queue
/// behind each other on it (redis-rs's default response timeout is 500 ms).
async fn connection(url: &str) -> MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

fn growing(
    conn: MultiplexedConnection,
    key: &str,
    shards: u32,
    wait: Option<Duration>,
) -> GrowingBloom<MultiplexedConnection> {
    let builder = GrowingBloom::builder(key)
        .expected_items(FIRST)
        .false_positive_rate(0.01)
        .growth(2)
        .shards(shards);
    match wait {
        Some(timeout) => builder.wait_for_replicas(1, timeout),
        None => builder,
    }
    .build(conn)
    .unwrap()
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn count(flags: &[bool]) -> usize {
    flags.iter().filter(|&&f| f).count()
}

/// A primary and a replica in sync with it.
async fn primary_and_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start().expect("redis-server on PATH");
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
        &port,
    ])
    .unwrap();
    let mut conn = connection(&replica.url()).await;
    let started = Instant::now();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .unwrap();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the replica never synced: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (primary, replica)
}

#[tokio::test]
async fn growing_writes_wait_for_a_replica() {
    let (primary, replica) = primary_and_replica().await;
    let mut admin = connection(&primary.url()).await;
    for shards in [1, 4] {
        let key = common::unique_key(&format!("growing-durable-{shards}"));
        let frontier = growing(
            connection(&primary.url()).await,
            &key,
            shards,
            Some(Duration::from_secs(5)),
        );
        // Reads from the replica, never waiting: what they find, the replica had when the
        // write returned.
        let on_replica = growing(connection(&replica.url()).await, &key, shards, None);
        let waits = common::calls(&mut admin, "wait").await;

        assert!(!on_replica.exists("d").await.unwrap(), "{key}: new");
        assert!(frontier.add("d").await.unwrap(), "{key}");
        assert!(on_replica.exists("d").await.unwrap(), "{key}: add");
        assert_eq!(
            common::calls(&mut admin, "wait").await,
            waits + 1,
            "{key}: add"
        );
        assert!(!frontier.add("d").await.unwrap(), "{key}: present");
        assert_eq!(common::calls(&mut admin, "wait").await, waits + 2, "{key}");

        // A small batch: one WAIT per shard it touched.
        let small = items("small", 50);
        let before = common::calls(&mut admin, "wait").await;
        assert_eq!(
            frontier.add_many(&small).await.unwrap(),
            [true; 50],
            "{key}"
        );
        assert_eq!(count(&on_replica.exists_many(&small).await.unwrap()), 50);
        let after = common::calls(&mut admin, "wait").await;
        assert_eq!(after - before, u64::from(shards), "{key}: add_many");

        // 20,000 items: five levels a shard (added dense, or by several scripts), then one
        // WAIT per shard after all of it, and everything on the replica.
        let big = items("big", 20_000);
        let before = common::calls(&mut admin, "wait").await;
        let new = count(&frontier.add_many(&big).await.unwrap());
        assert!(new > 19_700, "{key}: {new} new");
        assert_eq!(
            common::calls(&mut admin, "wait").await - before,
            u64::from(shards),
            "{key}: one WAIT per key after all its writes"
        );
        assert_eq!(
            count(&on_replica.exists_many(&big).await.unwrap()),
            big.len(),
            "{key}: acknowledged means on the replica"
        );
        for item in big.iter().step_by(1_000) {
            assert!(on_replica.exists(item).await.unwrap(), "{key}: {item}");
        }
        let info = frontier.info().await.unwrap();
        assert!(info.levels >= 5, "{key}: {info:?}");
        assert_eq!(info.items, new as u64 + 51, "{key}: {info:?}");
        assert_eq!(on_replica.info().await.unwrap(), info, "{key}");

        // Items present write nothing, and still wait (the call is a write).
        let before = common::calls(&mut admin, "wait").await;
        assert_eq!(count(&frontier.add_many(&big).await.unwrap()), 0, "{key}");
        assert_eq!(
            common::calls(&mut admin, "wait").await - before,
            u64::from(shards),
            "{key}"
        );
        assert_eq!(
            frontier.info().await.unwrap(),
            info,
            "{key}: nothing written"
        );

        // Clear and expire do not wait; they work with the option.
        let before = common::calls(&mut admin, "wait").await;
        assert!(frontier.expire(Duration::from_secs(100)).await.unwrap());
        assert!(frontier.clear().await.unwrap());
        assert_eq!(common::calls(&mut admin, "wait").await, before, "{key}");
    }
}

#[tokio::test]
async fn growing_writes_fail_when_no_replica_confirms() {
    let primary = RedisServer::start().expect("redis-server on PATH");
    for shards in [1, 4] {
        let key = common::unique_key(&format!("growing-not-durable-{shards}"));
        let frontier = growing(
            connection(&primary.url()).await,
            &key,
            shards,
            Some(Duration::from_millis(200)),
        );
        // Within about one WAIT timeout (200 ms) of the writes themselves: 2 s for one item or
        // a few, 5 s for 20,000 (several scripts per key, the scripts' work on the server).
        let not_replicated = |what: &str, result: redbloom::Result<Vec<bool>>, started: Instant| {
            match result {
                Err(Error::NotReplicated {
                    acked: 0,
                    wanted: 1,
                }) => {}
                other => panic!("{key}: {what}: expected NotReplicated, got {other:?}"),
            }
            let took = started.elapsed();
            let limit = Duration::from_secs(if what.starts_with("big") { 5 } else { 2 });
            assert!(took < limit, "{key}: {what} took {took:?}");
        };

        let now = Instant::now;
        let started = now();
        not_replicated("add", frontier.add("d").await.map(|n| vec![n]), started);
        let small = items("small", 50);
        let started = now();
        not_replicated("add_many", frontier.add_many(&small).await, started);
        let big = items("big", 20_000);
        let started = now();
        not_replicated("big add_many", frontier.add_many(&big).await, started);

        // The writes are on the primary; reads do not wait.
        assert!(frontier.exists("d").await.unwrap(), "{key}");
        assert_eq!(count(&frontier.exists_many(&small).await.unwrap()), 50);
        assert_eq!(count(&frontier.exists_many(&big).await.unwrap()), big.len());
        let info = frontier.info().await.unwrap();
        assert!(info.levels >= 5 && info.items > 19_700, "{key}: {info:?}");
        assert!(frontier.clear().await.unwrap());
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The CLI's `--wait-replicas` with `--growth`: confirmed with a replica (add, load), one line
/// naming how many confirmed without, within about `--timeout`.
#[tokio::test]
async fn the_cli_waits_for_replicas_with_a_growing_filter() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, items("line", 20_000).join("\n")).unwrap();
    let file = file.to_str().unwrap();
    let size = ["--growth", "2", "--capacity", "1000", "--fpr", "0.01"];
    // `--timeout` is also the WAIT timeout: 5 s with a replica, 1 s without.
    let args = |shards: &'static str, wait: Option<&'static str>, verb: &[&str]| -> Vec<String> {
        let mut all: Vec<&str> = size.to_vec();
        if let Some(timeout) = wait {
            all.extend(["--wait-replicas", "1", "--timeout", timeout]);
        }
        all.extend(["--shards", shards, "--json"]);
        all.extend_from_slice(verb);
        all.into_iter().map(str::to_owned).collect()
    };

    let (primary, replica) = primary_and_replica().await;
    let mut admin = connection(&primary.url()).await;
    for shards in ["1", "4"] {
        let key = common::unique_key(&format!("cli-growing-durable-{shards}"));
        let on = |url: &str, wait: Option<&'static str>, verb: &[&str]| {
            run(redbloom(url, &key, &strs(&args(shards, wait, verb))))
        };
        let waits = common::calls(&mut admin, "wait").await;
        let (code, json, err) = on(&primary.url(), Some("5"), &["add", "a", "b"]);
        assert_eq!((code, json["new"].as_u64()), (0, Some(2)), "{err}");
        assert!(
            common::calls(&mut admin, "wait").await > waits,
            "{key}: add waited"
        );
        let (code, json, err) = on(&primary.url(), Some("5"), &["load", file]);
        assert_eq!((code, json["items"].as_u64()), (0, Some(20_000)), "{err}");
        let (code, json, err) = on(&replica.url(), None, &["check", file]);
        assert_eq!(
            (code, json["present"].as_u64()),
            (0, Some(20_000)),
            "{key}: on the replica: {err}"
        );
        let (code, json, err) = on(&replica.url(), None, &["exists", "a", "b"]);
        assert_eq!(
            (code, json["present"].as_u64()),
            (0, Some(2)),
            "{key}: on the replica: {err}"
        );
        let (code, info, err) = on(&replica.url(), None, &["info"]);
        assert_eq!(code, 0, "{err}");
        assert!(info["levels"].as_u64().unwrap() >= 5, "{key}: {info}");
        let (code, primary_info, _) = on(&primary.url(), None, &["info"]);
        assert_eq!((code, &primary_info), (0, &info), "{key}");
    }

    drop(replica);
    let lone = RedisServer::start().expect("redis-server on PATH");
    for shards in ["1", "4"] {
        let key = common::unique_key(&format!("cli-growing-not-durable-{shards}"));
        let verbs: [&[&str]; 2] = [&["add", "lonely"], &["load", file]];
        for verb in verbs {
            let started = Instant::now();
            let stderr = common::cli::assert_fails(
                redbloom(&lone.url(), &key, &strs(&args(shards, Some("1"), verb))),
                &["0 of 1", "replicas confirmed"],
                None,
            );
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(5),
                "{shards} shard(s): {verb:?} took {took:?}: {stderr}"
            );
        }
    }
    drop(primary);
}
