//! Killing a master process mid-load: its replica takes over, and the client carries on with no
//! false negative for any add acknowledged after the failover.

mod common;

use common::cluster::{cli, RedisCluster};
use redbloom::{Error, RedisBloom, Retry};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Items per batch.
const BATCH: usize = 500;

/// One batch's items; names are distinct across batches.
fn batch_items(batch: usize) -> Vec<String> {
    (0..BATCH)
        .map(|i| format!("failover:{batch}:{i}"))
        .collect()
}

/// An acknowledged batch: when its `add_many` began and when it returned `Ok`.
struct Acked {
    batch: usize,
    started: Instant,
    acked: Instant,
}

/// A batch whose `add_many` returned an error (after the filter's retry budget, or at once for
/// an error it does not retry).
struct Failed {
    batch: usize,
    at: Instant,
    transient: bool,
    error: String,
}

/// `err` and its sources, with the `RedisError`'s kind and code when there is one.
fn describe(err: &Error) -> String {
    let mut out = format!("{err} [{err:?}]");
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(&format!(" <- {cause}"));
        if let Some(redis) = cause.downcast_ref::<redis::RedisError>() {
            out.push_str(&format!(
                " (kind {:?}, code {:?}, retry method {:?})",
                redis.kind(),
                redis.code(),
                redis.retry_method()
            ));
        }
        source = cause.source();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_master_fails_over_and_no_acknowledged_add_is_lost_after() {
    let test_start = Instant::now();
    let mut cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    // redis-rs's cluster defaults suit a failover poorly: no response timeout at all, and 16
    // retries whose waits (after CLUSTERDOWN, TRYAGAIN, a slot with no connection) are at least
    // 1.28 s. The harness's client bounds connecting, each reply and the whole request (it then
    // fails with a timeout, which the filter retries), with short waits between redis-rs's own
    // retries, so that the filter's `Retry` (30 s) is what carries a call through the
    // failover. redis-rs's retries run out before the failover is over (MOVED to the dead
    // master, then CLUSTERDOWN, for 2 to 5 s): it then returns its last error as is.
    let client = cluster.client_builder().build().unwrap();
    let conn = client.get_async_connection().await.unwrap();
    let bloom = RedisBloom::builder("failover:seen")
        .shards(8)
        .expected_items(200_000)
        .false_positive_rate(0.01)
        .retry(Retry::for_duration(Duration::from_secs(30)))
        .build(conn)
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writing_started = Instant::now();
    let writer = tokio::spawn({
        let bloom = bloom.clone();
        let stop = stop.clone();
        async move {
            let mut acked = Vec::new();
            let mut failed = Vec::new();
            let mut batch = 0;
            while !stop.load(Ordering::Relaxed) {
                let items = batch_items(batch);
                let started = Instant::now();
                match bloom.add_many(&items).await {
                    Ok(_) => acked.push(Acked {
                        batch,
                        started,
                        acked: Instant::now(),
                    }),
                    Err(err) => failed.push(Failed {
                        batch,
                        at: Instant::now(),
                        transient: err.is_transient(),
                        error: describe(&err),
                    }),
                }
                batch += 1;
            }
            (acked, failed)
        }
    });

    tokio::time::sleep(Duration::from_secs(1)).await;
    let masters = tokio::task::block_in_place(|| cluster.master_ports());
    assert_eq!(masters.len(), 3, "masters before the kill: {masters:?}");
    let victim = masters[0];
    let replica = tokio::task::block_in_place(|| cluster.replica_of(victim))
        .unwrap_or_else(|| panic!("no node reports being the replica of master {victim}"));
    let index = cluster
        .nodes
        .iter()
        .position(|n| n.port() == victim)
        .unwrap();
    tokio::task::block_in_place(|| cluster.nodes[index].kill());
    let killed_at = Instant::now();

    // cluster-node-timeout is 2 s: the replica should be promoted within a few seconds.
    let failover_at = loop {
        let role = tokio::task::block_in_place(|| cli(replica, &["role"]));
        if role.starts_with("master") {
            break Instant::now();
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(30),
            "replica {replica} of killed master {victim} not promoted after 30 s: {role:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let (acked, failed) = tokio::time::timeout(Duration::from_secs(40), writer)
        .await
        .expect("the writer did not stop within 40 s")
        .unwrap();
    let writing_ended = Instant::now();

    let ms = |from: Instant, to: Instant| to.saturating_duration_since(from).as_millis();
    for f in &failed {
        eprintln!(
            "batch {} failed {} ms after the kill (transient: {}): {}",
            f.batch,
            ms(killed_at, f.at),
            f.transient,
            f.error
        );
    }

    // The cluster is whole again: every live node says ok, with 3 masters.
    tokio::task::block_in_place(|| cluster.wait_until_ok(Duration::from_secs(15)))
        .expect("cluster_state:ok on every live node after the failover");

    // Every batch acknowledged after the failover is wholly present. The one batch that was in
    // flight at the kill (begun before it) is left out of the assertion: a part of it that the
    // old master acknowledged just before dying may not have reached the replica.
    let mut after = 0;
    let mut in_flight_missing = 0;
    let mut missing_after = Vec::new();
    let mut lost_before = 0;
    let mut batches_lost_before = 0;
    let mut first_ack_after_failover = None;
    for a in &acked {
        let items = batch_items(a.batch);
        let found = bloom
            .exists_many(&items)
            .await
            .unwrap_or_else(|err| panic!("checking batch {}: {}", a.batch, describe(&err)));
        let missing = found.iter().filter(|&&p| !p).count();
        if a.acked > failover_at && first_ack_after_failover.is_none() {
            first_ack_after_failover = Some(a.acked);
        }
        if a.acked <= failover_at {
            // Acknowledged before the failover. Replication is asynchronous: a write the killed
            // master acknowledged but had not yet streamed to its replica is gone. Counted, not
            // asserted.
            lost_before += missing;
            batches_lost_before += usize::from(missing > 0);
        } else if a.started <= killed_at {
            in_flight_missing += missing;
        } else {
            after += 1;
            if missing > 0 {
                missing_after.push((a.batch, missing, ms(failover_at, a.acked)));
            }
        }
    }

    let before = acked.iter().filter(|a| a.acked <= failover_at).count();
    let longest_stall = acked
        .windows(2)
        .map(|w| ms(w[0].acked, w[1].acked))
        .max()
        .unwrap_or_default();
    eprintln!(
        "cluster up in {} ms; master {victim} killed {} ms into writing; replica {replica} \
         promoted {} ms after the kill; first ack {:?} ms after the promotion; longest gap \
         between acks {longest_stall} ms; writing for {} ms in all",
        ms(test_start, writing_started),
        ms(writing_started, killed_at),
        ms(killed_at, failover_at),
        first_ack_after_failover.map(|t| ms(failover_at, t)),
        ms(writing_started, writing_ended),
    );
    eprintln!(
        "{} batches acknowledged: {before} before the failover ({lost_before} items lost, in \
         {batches_lost_before} batches), {after} begun after the kill and acknowledged after \
         the failover ({} with false negatives); missing from the batch in flight at the kill: \
         {in_flight_missing}; {} batches failed",
        acked.len(),
        missing_after.len(),
        failed.len()
    );

    assert!(
        failed.is_empty(),
        "{} add_many calls failed despite a 30 s retry budget (first: {})",
        failed.len(),
        failed[0].error
    );
    assert!(
        missing_after.is_empty(),
        "false negatives in batches acknowledged after the failover (batch, missing, ms after \
         the failover): {missing_after:?}"
    );
    assert!(
        after >= 10,
        "only {after} batches acknowledged after the failover"
    );
    assert!(
        test_start.elapsed() < Duration::from_secs(45),
        "{:?}",
        test_start.elapsed()
    );
}
