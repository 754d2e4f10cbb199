//! The durability option on counting filters (SPEC.md §4 "counting"): built with
//! `wait_for_replicas`, every write (add, add_if_absent, remove, and their batches, small, of
//! several commands per key and dense, for a filter of one key and a sharded one) succeeds only once a
//! replica has it, and fails with `Error::NotReplicated` when none confirms in time, quickly.
//! The CLI's `--wait-replicas` with `--counting` too.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use common::server::RedisServer;
use kinds::wait::{self, assert_not_replicated_quickly, primary_and_replica, WaitCli};
use kinds::{count, items, lines_file, path_of};
use redbloom::kind::Counting;
use redbloom::{Builder, CountingBloom};
use std::time::Duration;

/// The items the filters are sized for: a batch of as many outweighs the counters and goes
/// the dense way (one swap per key).
const CAPACITY: u64 = 20_000;
/// A capacity whose counters outweigh such a batch at 64 bytes a counter (about 12 MB: past
/// the 8 MiB a swap takes in one key, and over a shard's share of the batch): it goes by
/// `BITFIELD` commands.
const LARGE: u64 = 2_500_000;

/// A counting filter for `capacity` items, of `shards` shards.
fn counting(key: &str, (shards, capacity): (u32, u64)) -> Builder<Counting> {
    CountingBloom::builder(key)
        .expected_items(capacity)
        .false_positive_rate(0.01)
        .shards(shards)
}

#[tokio::test]
async fn counting_writes_wait_for_a_replica() {
    let (primary, replica) = primary_and_replica().await;
    let mut admin = common::connect(&primary.url()).await;
    for (shards, capacity) in [(1, CAPACITY), (4, CAPACITY), (1, LARGE), (4, LARGE)] {
        let key = common::unique_key(&format!("counting-durable-{shards}-{capacity}"));
        let filter = counting(&key, (shards, capacity));
        let (blocked, on_replica) = wait::on_primary_and_replica(&primary, &replica, filter).await;
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
        wait::assert_on_the_replica(&key, &on_replica, &big).await;
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
    let mut admin = common::connect(&primary.url()).await;
    for shards in [1, 4] {
        let key = common::unique_key(&format!("counting-not-durable-{shards}"));
        let filter = counting(&key, (shards, CAPACITY));
        let wait = Some(Duration::from_millis(200));
        let blocked = wait::filter(&primary.url(), filter, wait).await;
        // Within about one WAIT timeout (200 ms) of the writes themselves.
        let small = items("small", 50);
        let big = items("big", 20_000);
        let key = key.as_str();
        assert_not_replicated_quickly(key, "add", blocked.add("d")).await;
        assert_not_replicated_quickly(key, "add_if_absent", blocked.add_if_absent("e")).await;
        assert_not_replicated_quickly(key, "remove", blocked.remove("d")).await;
        assert_not_replicated_quickly(key, "add_many", blocked.add_many(&small)).await;
        let write = blocked.add_many_if_absent(&small);
        assert_not_replicated_quickly(key, "add_many_if_absent", write).await;
        assert_not_replicated_quickly(key, "big add_many", blocked.add_many(&big)).await;
        let waits = common::calls(&mut admin, "wait").await;
        let write = blocked.remove_many(&big);
        assert_not_replicated_quickly(key, "big remove_many", write).await;
        // Every shard's swap went (below), and one `WAIT` for all: the first to fail stands
        // for the other shards', which would each hold the connection for their timeout.
        let waits = common::calls(&mut admin, "wait").await - waits;
        assert_eq!(waits, 1, "{key}: WAITs for one write of {shards} shards");

        // The writes are on the primary; reads do not wait.
        assert!(!blocked.exists("d").await.unwrap(), "{key}: added, removed");
        assert!(blocked.exists("e").await.unwrap(), "{key}");
        assert_eq!(count(&blocked.exists_many(&small).await.unwrap()), 50);
        assert!(count(&blocked.exists_many(&big).await.unwrap()) < 20);
        assert!(blocked.info().await.unwrap().counters_in_use > 0);
        assert!(blocked.clear().await.unwrap());
    }
}

/// The CLI's `--wait-replicas` with `--counting`: confirmed with a replica (add, load, remove,
/// unload), one line naming how many confirmed without, within about `--timeout`.
#[tokio::test]
async fn the_cli_waits_for_replicas_with_a_counting_filter() {
    let file = lines_file(20_000);
    let file = path_of(&file);
    let size = ["--counting", "--capacity", "20000", "--fpr", "0.01"];
    // `--timeout` is also the WAIT timeout: 5 s with a replica (which, on a loaded machine,
    // may take more than a second to apply a batch of 20,000 removes), 1 s without.
    let (primary, replica) = primary_and_replica().await;
    let (on, to) = (primary.url(), replica.url());
    for shards in ["1", "4"] {
        let cli = WaitCli::new(&size, shards, &format!("cli-counting-durable-{shards}"));
        cli.answers(&on, "5", &["add", "a", "b"], "new", 2);
        cli.answers(&on, "5", &["load", file], "items", 20_000);
        cli.replica_answers(&to, &["check", file], 0, "present", 20_000);
        cli.answers(&on, "5", &["remove", "a"], "removed", 1);
        cli.answers(&on, "5", &["unload", file], "removed", 20_000);
        cli.replica_answers(&to, &["exists", "a", "b"], 1, "present", 1);
    }

    drop(replica);
    let lone = RedisServer::start().expect("redis-server on PATH");
    let verbs: [&[&str]; 4] = [
        &["add", "lonely"],
        &["load", file],
        &["remove", "lonely"],
        &["unload", file],
    ];
    let limit = Duration::from_secs(5);
    wait::the_cli_fails_without_a_replica(&lone, "counting", &size, &["1", "4"], &verbs, limit);
    drop(primary);
}

/// A dense write whose `WAIT` fails is retried with it: while the replica is stopped, the
/// `WAIT` behind a dense remove outlasts the connection's response timeout (a transient
/// error), and the remove goes again until the replica is back. The swap it made is read back
/// from its record every time, never applied again: each items' counts go down once (each
/// retry applying the batch again would take them down once more, to nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dense_write_retried_for_its_wait_applies_once() {
    let (primary, replica) = primary_and_replica().await;
    let key = common::unique_key("counting-wait-retried");
    let filter = counting(&key, (1, CAPACITY));
    let bloom = wait::filter(&primary.url(), filter.clone(), Some(Duration::from_secs(5))).await;
    let batch = items("twice", CAPACITY as usize / 2);
    for _ in 0..2 {
        bloom.add_many(&batch).await.unwrap();
    }
    let impatient = wait::impatient_waiting(&primary, filter).await;
    let (removed, _replica) =
        wait::with_replica_stopped(replica, impatient.remove_many(&batch)).await;
    let removed = removed.unwrap();
    assert!(removed.iter().all(|&r| r), "each removed once");
    let present = bloom.exists_many(&batch).await.unwrap();
    let gone = present.iter().filter(|&&p| !p).count();
    assert_eq!(gone, 0, "added twice, removed once: {gone} gone");
    assert!(bloom.remove_many(&batch).await.unwrap().iter().all(|&r| r));
    assert!(bloom.exists_many(&batch).await.unwrap().iter().all(|&p| !p));
}
