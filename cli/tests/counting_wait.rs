//! The durability option on counting filters (SPEC.md §4 "counting"): built with
//! `wait_for_replicas`, every write (add, add_if_absent, remove, and their batches, small, of
//! several commands per key and dense, for a filter of one key and a sharded one) succeeds only once a
//! replica has it, and fails with `Error::NotReplicated` when none confirms in time, quickly.
//! The CLI's `--wait-replicas` with `--counting` too.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::server::RedisServer;
use redbloom::{CountingBloom, Error};
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

/// The items the filters are sized for: a batch of as many outweighs the counters and goes
/// the dense way (one swap per key).
const CAPACITY: u64 = 20_000;
/// A capacity whose counters outweigh such a batch: it goes by `BITFIELD` commands.
const LARGE: u64 = 400_000;

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

fn counting(
    conn: MultiplexedConnection,
    key: &str,
    (shards, capacity): (u32, u64),
    wait: Option<Duration>,
) -> CountingBloom<MultiplexedConnection> {
    let builder = CountingBloom::builder(key)
        .expected_items(capacity)
        .false_positive_rate(0.01)
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
async fn counting_writes_wait_for_a_replica() {
    let (primary, replica) = primary_and_replica().await;
    let mut admin = connection(&primary.url()).await;
    for (shards, capacity) in [(1, CAPACITY), (4, CAPACITY), (1, LARGE), (4, LARGE)] {
        let key = common::unique_key(&format!("counting-durable-{shards}-{capacity}"));
        let size = (shards, capacity);
        let blocked = counting(
            connection(&primary.url()).await,
            &key,
            size,
            Some(Duration::from_secs(5)),
        );
        // Reads from the replica, never waiting: what they find, the replica had when the
        // write returned.
        let on_replica = counting(connection(&replica.url()).await, &key, size, None);
        let waits = common::calls(&mut admin, "wait").await;

        assert!(blocked.add("d").await.unwrap(), "{key}");
        assert!(on_replica.exists("d").await.unwrap(), "{key}: add");
        assert_eq!(
            common::calls(&mut admin, "wait").await,
            waits + 1,
            "{key}: add"
        );
        assert!(blocked.add_if_absent("e").await.unwrap(), "{key}");
        assert!(
            on_replica.exists("e").await.unwrap(),
            "{key}: add_if_absent"
        );
        assert_eq!(common::calls(&mut admin, "wait").await, waits + 2, "{key}");
        assert!(!blocked.add_if_absent("e").await.unwrap(), "{key}");
        assert!(blocked.remove("d").await.unwrap(), "{key}");
        assert!(!on_replica.exists("d").await.unwrap(), "{key}: remove");
        assert_eq!(common::calls(&mut admin, "wait").await, waits + 4, "{key}");

        // Small batches: one WAIT per shard they touched.
        let small = items("small", 50);
        let before = common::calls(&mut admin, "wait").await;
        assert_eq!(blocked.add_many(&small).await.unwrap(), [true; 50], "{key}");
        assert_eq!(count(&on_replica.exists_many(&small).await.unwrap()), 50);
        let after = common::calls(&mut admin, "wait").await;
        assert_eq!(after - before, u64::from(shards), "{key}: add_many");
        let absent = items("absent", 50);
        assert_eq!(
            count(&blocked.add_many_if_absent(&absent).await.unwrap()),
            50
        );
        assert_eq!(count(&on_replica.exists_many(&absent).await.unwrap()), 50);
        assert_eq!(blocked.remove_many(&absent).await.unwrap(), [true; 50]);
        assert_eq!(count(&on_replica.exists_many(&absent).await.unwrap()), 0);
        assert_eq!(
            common::calls(&mut admin, "wait").await - after,
            2 * u64::from(shards),
            "{key}: add_many_if_absent, remove_many"
        );

        // 20,000 items, 140,000 counters: several commands on every key (or one swap of its
        // counters), then one WAIT per key, and everything on the replica.
        let big = items("big", 20_000);
        let (before, increments, swaps) = (
            common::calls(&mut admin, "wait").await,
            common::calls(&mut admin, "bitfield").await,
            common::calls(&mut admin, "rename").await,
        );
        assert!(count(&blocked.add_many(&big).await.unwrap()) > 19_500);
        if capacity == CAPACITY {
            assert_eq!(
                common::calls(&mut admin, "rename").await - swaps,
                u64::from(shards),
                "{key}: one swap per key"
            );
        } else {
            assert!(
                common::calls(&mut admin, "bitfield").await >= increments + 9,
                "{key}: several commands"
            );
        }
        assert_eq!(
            common::calls(&mut admin, "wait").await - before,
            u64::from(shards),
            "{key}: one WAIT per key after all its commands"
        );
        assert_eq!(
            count(&on_replica.exists_many(&big).await.unwrap()),
            big.len(),
            "{key}: acknowledged means on the replica"
        );
        assert_eq!(count(&blocked.add_many_if_absent(&big).await.unwrap()), 0);
        assert_eq!(
            on_replica.info().await.unwrap(),
            blocked.info().await.unwrap(),
            "{key}"
        );
        assert_eq!(
            count(&blocked.remove_many(&big).await.unwrap()),
            big.len(),
            "{key}"
        );
        assert!(
            count(&on_replica.exists_many(&big).await.unwrap()) < 20,
            "{key}: removed on the replica too"
        );
        // Clear and expire do not wait; they work with the option.
        assert!(blocked.expire(Duration::from_secs(100)).await.unwrap());
        assert!(blocked.clear().await.unwrap());
    }
}

#[tokio::test]
async fn counting_writes_fail_when_no_replica_confirms() {
    let primary = RedisServer::start().expect("redis-server on PATH");
    for shards in [1, 4] {
        let key = common::unique_key(&format!("counting-not-durable-{shards}"));
        let blocked = counting(
            connection(&primary.url()).await,
            &key,
            (shards, CAPACITY),
            Some(Duration::from_millis(200)),
        );
        // Within about one WAIT timeout (200 ms) of the writes themselves: 2 s for one item or
        // a few, 5 s for 20,000 (several commands per key, the scripts' work on the server).
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
        not_replicated("add", blocked.add("d").await.map(|n| vec![n]), started);
        let started = now();
        let result = blocked.add_if_absent("e").await.map(|n| vec![n]);
        not_replicated("add_if_absent", result, started);
        let started = now();
        not_replicated(
            "remove",
            blocked.remove("d").await.map(|n| vec![n]),
            started,
        );
        let small = items("small", 50);
        let started = now();
        not_replicated("add_many", blocked.add_many(&small).await, started);
        let started = now();
        let result = blocked.add_many_if_absent(&small).await;
        not_replicated("add_many_if_absent", result, started);
        let big = items("big", 20_000);
        let started = now();
        not_replicated("big add_many", blocked.add_many(&big).await, started);
        let started = now();
        not_replicated("big remove_many", blocked.remove_many(&big).await, started);

        // The writes are on the primary; reads do not wait.
        assert!(!blocked.exists("d").await.unwrap(), "{key}: added, removed");
        assert!(blocked.exists("e").await.unwrap(), "{key}");
        assert_eq!(count(&blocked.exists_many(&small).await.unwrap()), 50);
        assert!(count(&blocked.exists_many(&big).await.unwrap()) < 20);
        assert!(blocked.info().await.unwrap().counters_in_use > 0);
        assert!(blocked.clear().await.unwrap());
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The CLI's `--wait-replicas` with `--counting`: confirmed with a replica (add, load, remove,
/// unload), one line naming how many confirmed without, within about `--timeout`.
#[tokio::test]
async fn the_cli_waits_for_replicas_with_a_counting_filter() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, items("line", 20_000).join("\n")).unwrap();
    let file = file.to_str().unwrap();
    let size = ["--counting", "--capacity", "20000", "--fpr", "0.01"];
    // `--timeout` is also the WAIT timeout: 5 s with a replica (which, on a loaded machine,
    // may take more than a second to apply a batch of 20,000 removes), 1 s without.
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
    for shards in ["1", "4"] {
        let key = common::unique_key(&format!("cli-counting-durable-{shards}"));
        let on = |url: &str, wait: Option<&'static str>, verb: &[&str]| {
            run(redbloom(url, &key, &strs(&args(shards, wait, verb))))
        };
        let (code, json, err) = on(&primary.url(), Some("5"), &["add", "a", "b"]);
        assert_eq!((code, json["new"].as_u64()), (0, Some(2)), "{err}");
        let (code, json, err) = on(&primary.url(), Some("5"), &["load", file]);
        assert_eq!((code, json["items"].as_u64()), (0, Some(20_000)), "{err}");
        let (code, json, err) = on(&replica.url(), None, &["check", file]);
        assert_eq!(
            (code, json["present"].as_u64()),
            (0, Some(20_000)),
            "{key}: on the replica: {err}"
        );
        let (code, json, err) = on(&primary.url(), Some("5"), &["remove", "a"]);
        assert_eq!((code, json["removed"].as_u64()), (0, Some(1)), "{err}");
        let (code, json, err) = on(&primary.url(), Some("5"), &["unload", file]);
        assert_eq!((code, json["removed"].as_u64()), (0, Some(20_000)), "{err}");
        let (code, json, err) = on(&replica.url(), None, &["exists", "a", "b"]);
        assert_eq!(
            (code, json["present"].as_u64()),
            (1, Some(1)),
            "{key}: on the replica: {err}"
        );
    }

    drop(replica);
    let lone = RedisServer::start().expect("redis-server on PATH");
    for shards in ["1", "4"] {
        let key = common::unique_key(&format!("cli-counting-not-durable-{shards}"));
        let verbs: [&[&str]; 4] = [
            &["add", "lonely"],
            &["load", file],
            &["remove", "lonely"],
            &["unload", file],
        ];
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
