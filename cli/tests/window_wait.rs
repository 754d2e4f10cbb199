//! The durability option on window filters (SPEC.md §4 "window"): built with
//! `wait_for_replicas`, every write (a single add, a batch through the per-item script, a batch
//! through the dense path, for a filter of one key and a sharded one) succeeds only once a
//! replica has it, and fails with `Error::NotReplicated` when none confirms in time. The CLI's
//! `--wait-replicas` too.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use common::cli::redbloom;
use common::server::RedisServer;
use kinds::wait::{
    self, assert_cli_not_replicated, assert_not_replicated, primary_and_replica, WaitCli,
};
use kinds::{items, lines_file, path_of};
use redbloom::kind::Window;
use redbloom::{Builder, Error, WindowBloom};
use std::time::{Duration, Instant};

const W: Duration = Duration::from_secs(60);
const CAPACITY: u64 = 10_000;

/// A window filter of [`W`] for [`CAPACITY`] items per window, of `shards` shards.
fn window(key: &str, shards: u32) -> Builder<Window> {
    WindowBloom::builder(key, W)
        .expected_items(CAPACITY)
        .false_positive_rate(0.01)
        .shards(shards)
}

#[tokio::test]
async fn window_writes_wait_for_a_replica() {
    let (primary, replica) = primary_and_replica().await;
    let mut admin = common::connect(&primary.url()).await;
    for shards in [1, 4] {
        let key = common::unique_key(&format!("window-durable-{shards}"));
        let filter = window(&key, shards);
        let (recent, on_replica) = wait::on_primary_and_replica(&primary, &replica, filter).await;
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

        // Small enough for the per-item script in every shard (its bits times 256 bytes under
        // the generations' bytes).
        let small = items("small", 8);
        assert_eq!(recent.add_many(&small).await.unwrap(), [true; 8], "{key}");
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
        wait::assert_on_the_replica(&key, &on_replica, &big).await;
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
    let mut admin = common::connect(&primary.url()).await;
    for shards in [1, 4] {
        let key = common::unique_key(&format!("window-not-durable-{shards}"));
        let wait = Some(Duration::from_millis(200));
        let recent = wait::filter(&primary.url(), window(&key, shards), wait).await;

        let started = Instant::now();
        assert_not_replicated(&key, "add", recent.add("lonely").await);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{key}: {:?}",
            started.elapsed()
        );
        let small = items("small", 50);
        assert_not_replicated(&key, "small add_many", recent.add_many(&small).await);
        let bitops = common::calls(&mut admin, "bitop").await;
        let big = items("big", 20_000);
        let started = Instant::now();
        assert_not_replicated(&key, "dense add_many", recent.add_many(&big).await);
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

/// The CLI's `--wait-replicas` with `--window`: confirmed with a replica, one line naming how
/// many confirmed without.
#[tokio::test]
async fn the_cli_waits_for_replicas_with_a_window() {
    let file = lines_file(20_000);
    let file = path_of(&file);
    let size = ["--window", "60s", "--capacity", "10000", "--fpr", "0.01"];

    let (primary, replica) = primary_and_replica().await;
    let (on, to) = (primary.url(), replica.url());
    for shards in ["1", "4"] {
        let cli = WaitCli::new(&size, shards, &format!("cli-window-durable-{shards}"));
        cli.answers(&on, "1", &["add", "a"], "new", 1);
        cli.answers(&on, "1", &["load", file], "items", 20_000);
        cli.replica_answers(&to, &["check", file], 0, "present", 20_000);
    }

    drop(replica);
    let lone = RedisServer::start().expect("redis-server on PATH");
    // (A sharded filter: the_cli_fails_fast_without_a_replica_on_a_sharded_window.)
    let verbs: [&[&str]; 2] = [&["add", "lonely"], &["load", file]];
    let limit = Duration::from_secs(8);
    wait::the_cli_fails_without_a_replica(&lone, "window", &size, &["1"], &verbs, limit);
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
    let recent = window(&common::unique_key("window-sharded-wait"), 4)
        .wait_for_replicas(1, wait)
        // Too few replicas is retried within the budget (one round of WAITs per retry): a
        // short one, so that one round per retry shows (4 WAITs a round would take 2 s).
        .retry(redbloom::Retry::for_duration(Duration::from_secs(1)))
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
    let file = lines_file(1_000);
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
            path_of(&file),
        ];
        let key = common::unique_key("cli-sharded-not-durable");
        let what = format!("{kind:?}: a load over 4 shards");
        let cmd = redbloom(&lone.url(), &key, &args);
        assert_cli_not_replicated(cmd, &what, Duration::from_secs(5));
    }
}

/// A dense add whose `WAIT` fails goes again with it: still "new" for what it added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dense_add_retried_for_its_wait_answers_new() {
    let key = common::unique_key("window-wait-retried");
    kinds::wait::dense_add_retried_for_its_wait(window(&key, 1)).await;
}
