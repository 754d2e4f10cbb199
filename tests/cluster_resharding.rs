//! Resharding while loading: the slot of three filters (go-zero, native, and a small one whose
//! adds take the dense path) moves from one master to another, key by key
//! (`CLUSTER SETSLOT ... IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT ... NODE`), while adds keep
//! coming. Between the keys' moves the slot is split: the old master answers `ASK` for a key it
//! no longer holds and `TRYAGAIN` for a call whose keys are on both; afterwards it answers
//! `MOVED`. No call may fail and no acknowledged add may be lost.

mod common;

use common::cluster::{cli, RedisCluster};
use redbloom::{Layout, RedisBloom, Retry};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The filters share one hash tag, so one slot holds their bits and stored parameters.
const TAG: &str = "{reshard}";

/// The items of one batch for `filter`: 200 (`BITFIELD`), or 2,000 for the small filter, so
/// that its adds take the dense path (a transaction over the bits and a scratch key).
fn batch_items(filter: &str, batch: usize) -> Vec<String> {
    let n = if filter.ends_with(":dense") {
        2_000
    } else {
        200
    };
    // The items of 40 batches at most, added again after: a writer that runs longer (a slow
    // machine, a slow migration) keeps the filters as full, so the false-positive check holds.
    let batch = batch % 40;
    (0..n).map(|i| format!("reshard:{batch}:{i}")).collect()
}

/// `ERRORSTAT` counts of the node on `port`, e.g. `errorstat_ASK`.
fn error_count(port: u16, code: &str) -> u64 {
    cli(port, &["info", "errorstats"])
        .lines()
        .find_map(|line| line.strip_prefix(&format!("errorstat_{code}:count=")))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or(0)
}

fn ok(port: u16, args: &[&str]) {
    let reply = cli(port, args);
    assert_eq!(reply.trim(), "OK", "redis-cli -p {port} {args:?}: {reply}");
}

/// Moves `slot` from `source` to `target` key by key, pausing `pause` between steps so that the
/// writers meet every intermediate state; tells every master the new owner at the end.
fn migrate_slot(masters: &[u16], slot: u16, source: u16, target: u16, pause: Duration) {
    let slot = slot.to_string();
    let source_id = cli(source, &["cluster", "myid"]).trim().to_owned();
    let target_id = cli(target, &["cluster", "myid"]).trim().to_owned();
    ok(
        target,
        &["cluster", "setslot", &slot, "importing", &source_id],
    );
    ok(
        source,
        &["cluster", "setslot", &slot, "migrating", &target_id],
    );
    std::thread::sleep(pause);
    loop {
        let key = cli(source, &["cluster", "getkeysinslot", &slot, "1"]);
        let key = key.trim();
        if key.is_empty() {
            break;
        }
        let port = target.to_string();
        ok(
            source,
            &["migrate", "127.0.0.1", &port, "", "0", "5000", "keys", key],
        );
        std::thread::sleep(pause);
    }
    for &port in std::iter::once(&target).chain(masters) {
        ok(port, &["cluster", "setslot", &slot, "node", &target_id]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_carry_on_while_the_slot_moves_and_none_is_lost() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    let client = cluster.client_builder().build().unwrap();
    let conn = client.get_async_connection().await.unwrap();
    let retry = Retry::for_duration(Duration::from_secs(20));
    let builders = [
        RedisBloom::builder(format!("{TAG}:gozero"))
            .bits(1 << 22)
            .retry(retry),
        RedisBloom::builder(format!("{TAG}:native"))
            .layout(Layout::Native)
            .expected_items(200_000)
            .false_positive_rate(0.001)
            .retry(retry),
        // 128 KiB: a batch of 2,000 outweighs it, so it is merged whole.
        RedisBloom::builder(format!("{TAG}:dense"))
            .bits(1 << 20)
            .retry(retry),
    ];
    let filters = builders
        .clone()
        .map(|builder| builder.build(conn.clone()).unwrap());

    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn({
        let filters = filters.clone();
        let stop = stop.clone();
        async move {
            let (mut acked, mut failed) = (Vec::new(), Vec::new());
            let mut slowest = Duration::ZERO;
            let mut batch = 0;
            while !stop.load(Ordering::Relaxed) {
                for filter in &filters {
                    let items = batch_items(filter.key(), batch);
                    let started = Instant::now();
                    let single = filter.add(format!("single:{batch}")).await;
                    let many = filter.add_many(&items).await;
                    slowest = slowest.max(started.elapsed());
                    match (many, single) {
                        (Ok(_), Ok(_)) => {}
                        (many, single) => failed.push(format!(
                            "batch {batch} on {}: {:?} / {:?}",
                            filter.key(),
                            many.err(),
                            single.err()
                        )),
                    }
                }
                acked.push(batch);
                batch += 1;
            }
            (acked, failed, slowest)
        }
    });

    let slot = cluster.slot_of(TAG);
    let source = cluster.master_of(TAG);
    let masters = cluster.master_ports();
    let target = *masters.iter().find(|&&port| port != source).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::task::spawn_blocking(move || {
        migrate_slot(&masters, slot, source, target, Duration::from_millis(150))
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (acked, failed, slowest) = writer.await.unwrap();
    eprintln!(
        "{} batches; slowest pair of calls {slowest:?}; old master: ASK {}, TRYAGAIN {}, MOVED {}; \
         new master: TRYAGAIN {}",
        acked.len(),
        error_count(source, "ASK"),
        error_count(source, "TRYAGAIN"),
        error_count(source, "MOVED"),
        error_count(target, "TRYAGAIN")
    );

    assert!(failed.is_empty(), "calls failed: {failed:#?}");
    assert!(
        acked.len() > 10,
        "only {} batches went through",
        acked.len()
    );
    assert_eq!(cluster.master_of(TAG), target);
    // Beside them, the records of exact answers across retries moved too.
    let keys = cli(
        target,
        &["cluster", "getkeysinslot", &slot.to_string(), "1000"],
    );
    let (records, filters): (Vec<&str>, Vec<&str>) =
        keys.lines().partition(|key| common::is_record(key));
    assert_eq!(
        filters.len(),
        6,
        "the filters' bits and parameters moved: {filters:?}"
    );
    assert!(!records.is_empty(), "the records moved");
    // The writers met the slot split and moved.
    let (ask, moved) = (error_count(source, "ASK"), error_count(source, "MOVED"));
    assert!(ask + moved > 0, "ASK {ask}, MOVED {moved}");

    // Every acknowledged add is there, read through a new connection.
    let conn = cluster.connection().await;
    for builder in builders {
        let filter = builder.build(conn.clone()).unwrap();
        for &batch in &acked {
            let present = filter
                .exists_many(&batch_items(filter.key(), batch))
                .await
                .unwrap();
            assert!(
                present.iter().all(|&p| p),
                "{}: batch {batch}",
                filter.key()
            );
            assert!(filter.exists(format!("single:{batch}")).await.unwrap());
        }
        // Not so full that everything reads present: the check above could not fail then.
        let never: Vec<String> = (0..1_000).map(|i| format!("never:{i}")).collect();
        let false_positives = filter.exists_many(&never).await.unwrap();
        let false_positives = false_positives.iter().filter(|&&p| p).count();
        assert!(false_positives < 20, "{}: {false_positives}", filter.key());
    }
}
