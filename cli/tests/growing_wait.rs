//! The durability option on growing filters (SPEC.md §4 "growing"): built with
//! `wait_for_replicas`, every write (add, and batches small and of several levels, for a filter
//! of one key and a sharded one) succeeds only once a replica has it (one `WAIT` per key
//! written, after all its writes), and fails with `Error::NotReplicated` when none confirms in
//! time, quickly. The CLI's `--wait-replicas` with `--growth` too.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use common::server::RedisServer;
use kinds::wait::{self, assert_not_replicated_quickly, primary_and_replica, WaitCli};
use kinds::{count, items, lines_file, path_of};
use redbloom::kind::Growing;
use redbloom::{Builder, GrowingBloom};
use std::time::Duration;

/// The first level's items (all shards together): the big batch makes several levels.
const FIRST: u64 = 1_000;

/// A growing filter whose first level holds [`FIRST`] items, of `shards` shards.
fn growing(key: &str, shards: u32) -> Builder<Growing> {
    GrowingBloom::builder(key)
        .expected_items(FIRST)
        .false_positive_rate(0.01)
        .growth(2)
        .shards(shards)
}

#[tokio::test]
async fn growing_writes_wait_for_a_replica() {
    let (primary, replica) = primary_and_replica().await;
    let mut admin = common::connect(&primary.url()).await;
    for shards in [1, 4] {
        let key = common::unique_key(&format!("growing-durable-{shards}"));
        let filter = growing(&key, shards);
        let (frontier, on_replica) = wait::on_primary_and_replica(&primary, &replica, filter).await;
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
        wait::assert_on_the_replica(&key, &on_replica, &big).await;
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
        let wait = Some(Duration::from_millis(200));
        let frontier = wait::filter(&primary.url(), growing(&key, shards), wait).await;
        // Within about one WAIT timeout (200 ms) of the writes themselves.
        let small = items("small", 50);
        let big = items("big", 20_000);
        let key = key.as_str();
        assert_not_replicated_quickly(key, "add", frontier.add("d")).await;
        assert_not_replicated_quickly(key, "add_many", frontier.add_many(&small)).await;
        assert_not_replicated_quickly(key, "big add_many", frontier.add_many(&big)).await;

        // The writes are on the primary; reads do not wait.
        assert!(frontier.exists("d").await.unwrap(), "{key}");
        assert_eq!(count(&frontier.exists_many(&small).await.unwrap()), 50);
        assert_eq!(count(&frontier.exists_many(&big).await.unwrap()), big.len());
        let info = frontier.info().await.unwrap();
        assert!(info.levels >= 5 && info.items > 19_700, "{key}: {info:?}");
        assert!(frontier.clear().await.unwrap());
    }
}

/// The CLI's `--wait-replicas` with `--growth`: confirmed with a replica (add, load), one line
/// naming how many confirmed without, within about `--timeout`.
#[tokio::test]
async fn the_cli_waits_for_replicas_with_a_growing_filter() {
    let file = lines_file(20_000);
    let file = path_of(&file);
    let size = ["--growth", "2", "--capacity", "1000", "--fpr", "0.01"];
    // `--timeout` is also the WAIT timeout: 5 s with a replica, 1 s without.
    let (primary, replica) = primary_and_replica().await;
    let (on, to) = (primary.url(), replica.url());
    let mut admin = common::connect(&on).await;
    for shards in ["1", "4"] {
        let cli = WaitCli::new(&size, shards, &format!("cli-growing-durable-{shards}"));
        let key = &cli.key;
        let waits = common::calls(&mut admin, "wait").await;
        cli.answers(&on, "5", &["add", "a", "b"], "new", 2);
        assert!(
            common::calls(&mut admin, "wait").await > waits,
            "{key}: add waited"
        );
        cli.answers(&on, "5", &["load", file], "items", 20_000);
        cli.replica_answers(&to, &["check", file], 0, "present", 20_000);
        cli.replica_answers(&to, &["exists", "a", "b"], 0, "present", 2);
        let (code, info, err) = cli.run(&to, None, &["info"]);
        assert_eq!(code, 0, "{err}");
        assert!(info["levels"].as_u64().unwrap() >= 5, "{key}: {info}");
        let (code, primary_info, _) = cli.run(&on, None, &["info"]);
        assert_eq!((code, &primary_info), (0, &info), "{key}");
    }

    drop(replica);
    let lone = RedisServer::start().expect("redis-server on PATH");
    let verbs: [&[&str]; 2] = [&["add", "lonely"], &["load", file]];
    let limit = Duration::from_secs(5);
    wait::the_cli_fails_without_a_replica(&lone, "growing", &size, &["1", "4"], &verbs, limit);
    drop(primary);
}
