//! The durability option on window filters (SPEC.md §4 "window"): built with
//! `wait_for_replicas`, every write (a single add, a batch through the per-item script, a batch
//! through the dense path, for a filter of one key and a sharded one) succeeds only once a
//! replica has it, and fails with `Error::NotReplicated` when none confirms in time. The CLI's
//! `--wait-replicas` too.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::server::RedisServer;
use redbloom::{Error, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

const W: Duration = Duration::from_secs(60);
const CAPACITY: u64 = 10_000;

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

fn window(
    conn: MultiplexedConnection,
    key: &str,
    shards: u32,
    wait: Option<Duration>,
) -> WindowBloom<MultiplexedConnection> {
    let builder = WindowBloom::builder(key, W)
        .expected_items(CAPACITY)
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
async fn window_writes_wait_for_a_replica() {
    let (primary, replica) = primary_and_replica().await;
    let mut admin = connection(&primary.url()).await;
    for shards in [1, 4] {
        let key = common::unique_key(&format!("window-durable-{shards}"));
        let recent = window(
            connection(&primary.url()).await,
            &key,
            shards,
            Some(Duration::from_secs(5)),
        );
        // Reads from the replica, never waiting: what they find, the replica had when the
        // write returned.
        let on_replica = window(connection(&replica.url()).await, &key, shards, None);
        let (waits, bitops) = (
            common::calls(&mut admin, "wait").await,
            common::calls(&mut admin, "bitop").await,
        );

        assert!(recent.add("durable-1").await.unwrap(), "{key}");
        assert!(on_replica.exists("durable-1").await.unwrap(), "{key}");
        assert_eq!(
            common::calls(&mut admin, "wait").await,
            waits + 1,
            "{key}: add"
        );

        let small = items("small", 50);
        assert_eq!(recent.add_many(&small).await.unwrap(), [true; 50], "{key}");
        assert!(
            on_replica
                .exists_many(&small)
                .await
                .unwrap()
                .iter()
                .all(|&p| p),
            "{key}"
        );
        let after_small = common::calls(&mut admin, "wait").await;
        assert!(
            after_small > waits + 1,
            "{key}: the small batch waited (once per shard it touched)"
        );
        assert_eq!(
            common::calls(&mut admin, "bitop").await,
            bitops,
            "{key}: not dense"
        );

        // Twice the capacity: the dense path in every shard.
        let big = items("big", 20_000);
        let new = recent.add_many(&big).await.unwrap();
        assert!(new.iter().filter(|&&n| n).count() >= 19_000, "{key}");
        assert!(
            common::calls(&mut admin, "bitop").await >= bitops + u64::from(shards),
            "{key}: the big batch was dense"
        );
        assert!(
            common::calls(&mut admin, "wait").await >= after_small + u64::from(shards),
            "{key}: the dense add waited in every shard"
        );
        assert!(
            on_replica
                .exists_many(&big)
                .await
                .unwrap()
                .iter()
                .all(|&p| p),
            "{key}: acknowledged means on the replica"
        );
        assert_eq!(
            on_replica.info().await.unwrap().filter.bits_set,
            recent.info().await.unwrap().filter.bits_set,
            "{key}"
        );
        // Clear and expire do not wait; they work with the option.
        assert!(recent.expire(Duration::from_secs(100)).await.unwrap());
        assert!(recent.clear().await.unwrap());
    }
}

#[tokio::test]
async fn window_writes_fail_when_no_replica_confirms() {
    let primary = RedisServer::start().expect("redis-server on PATH");
    let mut admin = connection(&primary.url()).await;
    for shards in [1, 4] {
        let key = common::unique_key(&format!("window-not-durable-{shards}"));
        let recent = window(
            connection(&primary.url()).await,
            &key,
            shards,
            Some(Duration::from_millis(200)),
        );
        let not_replicated = |what: &str, result: redbloom::Result<Vec<bool>>| match result {
            Err(Error::NotReplicated {
                acked: 0,
                wanted: 1,
            }) => {}
            other => panic!("{key}: {what}: expected NotReplicated, got {other:?}"),
        };

        let started = Instant::now();
        not_replicated("add", recent.add("lonely").await.map(|n| vec![n]));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{key}: {:?}",
            started.elapsed()
        );
        let small = items("small", 50);
        not_replicated("small add_many", recent.add_many(&small).await);
        let bitops = common::calls(&mut admin, "bitop").await;
        let big = items("big", 20_000);
        let started = Instant::now();
        not_replicated("dense add_many", recent.add_many(&big).await);
        assert!(
            common::calls(&mut admin, "bitop").await >= bitops + u64::from(shards),
            "{key}: the big batch was dense"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{key}: {:?}",
            started.elapsed()
        );

        // The writes are on the primary; reads do not wait.
        assert!(recent.exists("lonely").await.unwrap(), "{key}");
        assert!(recent.exists_many(&small).await.unwrap().iter().all(|&p| p));
        assert!(recent.exists_many(&big).await.unwrap().iter().all(|&p| p));
        assert!(recent.info().await.unwrap().filter.bits_set > 0);
        assert!(recent.clear().await.unwrap());
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The CLI's `--wait-replicas` with `--window`: confirmed with a replica, one line naming how
/// many confirmed without.
#[tokio::test]
async fn the_cli_waits_for_replicas_with_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, items("line", 20_000).join("\n")).unwrap();
    let file = file.to_str().unwrap();
    let size = [
        "--window",
        "60s",
        "--capacity",
        "10000",
        "--fpr",
        "0.01",
        "--wait-replicas",
        "1",
        "--timeout",
        "1",
    ];
    let args = |shards: &'static str, verb: &[&str]| -> Vec<String> {
        let mut all: Vec<&str> = size.to_vec();
        all.extend(["--shards", shards, "--json"]);
        all.extend_from_slice(verb);
        all.into_iter().map(str::to_owned).collect()
    };

    let (primary, replica) = primary_and_replica().await;
    for shards in ["1", "4"] {
        let key = common::unique_key(&format!("cli-window-durable-{shards}"));
        let (code, json, err) = run(redbloom(
            &primary.url(),
            &key,
            &strs(&args(shards, &["add", "a"])),
        ));
        assert_eq!((code, json["new"].as_u64()), (0, Some(1)), "{err}");
        let (code, json, err) = run(redbloom(
            &primary.url(),
            &key,
            &strs(&args(shards, &["load", file])),
        ));
        assert_eq!((code, json["items"].as_u64()), (0, Some(20_000)), "{err}");
        let check = ["--window", "60s", "--capacity", "10000", "--fpr", "0.01"];
        let mut check = check.to_vec();
        check.extend(["--shards", shards, "--json", "check", file]);
        let (code, json, err) = run(redbloom(&replica.url(), &key, &check));
        assert_eq!(
            (code, json["present"].as_u64()),
            (0, Some(20_000)),
            "{key}: on the replica: {err}"
        );
    }

    drop(replica);
    let lone = RedisServer::start().expect("redis-server on PATH");
    // (A sharded filter: the_cli_fails_fast_without_a_replica_on_a_sharded_window.)
    for shards in ["1"] {
        let key = common::unique_key(&format!("cli-window-not-durable-{shards}"));
        for verb in [&["add", "lonely"][..], &["load", file]] {
            let started = Instant::now();
            let stderr = common::cli::assert_fails(
                redbloom(&lone.url(), &key, &strs(&args(shards, verb))),
                &["0 of 1", "replicas confirmed"],
                None,
            );
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(8),
                "{verb:?} took {took:?}: {stderr}"
            );
        }
    }
    drop(primary);
}

/// A sharded filter's write waits for the replicas of every shard it touched, one `WAIT` per
/// shard. A server runs a client's commands in order and holds the rest while its `WAIT`
/// blocks, so `WAIT`s sent at once would answer one after another, the k-th after k times the
/// WAIT timeout, and the later ones would outlast the response timeout and be retried as
/// timeouts for the whole retry budget. They go one at a time, and the first `NotReplicated`
/// ends the call: it fails after about one WAIT timeout. (Before the fix: after the retry
/// budget, 9.6 s here; the CLI with 4 shards took 31.6 s.)
#[tokio::test]
async fn a_sharded_window_write_without_a_replica_fails_as_not_replicated() {
    let primary = RedisServer::start().expect("redis-server on PATH");
    let wait = Duration::from_millis(500);
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(2 * wait));
    let conn = redis::Client::open(primary.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    let recent = WindowBloom::builder(common::unique_key("window-sharded-wait"), W)
        .expected_items(CAPACITY)
        .false_positive_rate(0.01)
        .shards(4)
        .wait_for_replicas(1, wait)
        .retry(redbloom::Retry::for_duration(Duration::from_secs(10)))
        .build(conn)
        .unwrap();
    let started = Instant::now();
    let result = recent.add_many(&items("spread", 100)).await;
    let took = started.elapsed();
    assert!(
        matches!(
            result,
            Err(Error::NotReplicated {
                acked: 0,
                wanted: 1
            })
        ),
        "{result:?}"
    );
    assert!(
        took < Duration::from_secs(4),
        "100 items over 4 shards without a replica, WAIT timeout {wait:?}: NotReplicated only \
         after {took:?} (the later shards' WAITs timed out on the connection and were retried)"
    );
}

/// The CLI's `--wait-replicas` on a sharded filter without a replica fails within about
/// `--timeout` with the "0 of 1" line, for a window filter and a plain one alike (see
/// [`a_sharded_window_write_without_a_replica_fails_as_not_replicated`]).
#[test]
fn the_cli_fails_fast_without_a_replica_on_a_sharded_window() {
    let lone = RedisServer::start().expect("redis-server on PATH");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, items("line", 1_000).join("\n")).unwrap();
    for kind in [["--window", "60s"], ["--layout", "native"]] {
        let args = [
            kind[0],
            kind[1],
            "--capacity",
            "10000",
            "--fpr",
            "0.01",
            "--wait-replicas",
            "1",
            "--timeout",
            "1",
            "--shards",
            "4",
            "load",
            file.to_str().unwrap(),
        ];
        let key = common::unique_key("cli-sharded-not-durable");
        let started = Instant::now();
        let stderr = common::cli::assert_fails(
            redbloom(&lone.url(), &key, &args),
            &["0 of 1", "replicas confirmed"],
            None,
        );
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "{kind:?}: a load over 4 shards took {took:?} to fail: {stderr}"
        );
    }
}
