//! The durability option: with `wait_for_replicas`, a write succeeds only once replicas have it,
//! and fails with `Error::NotReplicated` when they do not confirm in time.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use common::server::RedisServer;
use kinds::wait::{assert_cli_not_replicated, primary_and_replica};
use redbloom::{Error, RedisBloom};
use std::time::{Duration, Instant};

async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test]
async fn writes_wait_for_a_replica() {
    let (primary, replica) = primary_and_replica().await;
    let key = common::unique_key("durable");
    let bloom = RedisBloom::builder(&key)
        .bits(1 << 20)
        .wait_for_replicas(1, Duration::from_secs(5))
        .build(connection(&primary.url()).await)
        .unwrap();
    assert!(bloom.add("durable-1").await.unwrap());
    let items: Vec<String> = (0..5_000).map(|i| format!("durable-batch:{i}")).collect();
    bloom.add_many(&items).await.unwrap();

    // Acknowledged means on the replica: a filter read there finds everything at once.
    let on_replica = RedisBloom::new(connection(&replica.url()).await, &key, 1 << 20).unwrap();
    assert!(on_replica.exists("durable-1").await.unwrap());
    assert!(on_replica
        .exists_many(&items)
        .await
        .unwrap()
        .iter()
        .all(|p| *p));
}

#[tokio::test]
async fn writes_fail_when_no_replica_confirms() {
    let primary = RedisServer::start().expect("redis-server on PATH");
    let bloom = RedisBloom::builder(common::unique_key("not-durable"))
        .bits(1 << 20)
        .wait_for_replicas(1, Duration::from_millis(200))
        .build(connection(&primary.url()).await)
        .unwrap();
    let started = Instant::now();
    let err = bloom.add("lonely").await.expect_err("no replica");
    assert!(
        matches!(
            err,
            Error::NotReplicated {
                acked: 0,
                wanted: 1
            }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        err.to_string(),
        "only 0 of 1 replicas confirmed the write in time"
    );
    // The write itself is on the primary; reads do not wait.
    assert!(bloom.exists("lonely").await.unwrap());
}

/// On a cluster, a write waits for the replicas of its own key's master only: another master
/// without a replica does not fail it, and its own master without one does.
#[tokio::test]
async fn on_a_cluster_a_write_waits_for_its_own_masters_replica() {
    let mut cluster = common::cluster::RedisCluster::start().expect("redis-server on PATH");
    let conn = cluster.connection().await;
    let key = "wait:cluster";
    let home = cluster.master_of(key);
    let elsewhere = *cluster
        .master_ports()
        .iter()
        .find(|&&port| port != home)
        .unwrap();
    let mut kill_replica_of = |master: u16| {
        let replica = cluster
            .replica_of(master)
            .expect("every master has a replica");
        cluster.kill(replica);
    };
    let bloom = RedisBloom::builder(key)
        .bits(1 << 16)
        .wait_for_replicas(1, Duration::from_millis(500))
        .build(conn)
        .unwrap();
    assert!(bloom.add("before").await.unwrap());

    kill_replica_of(elsewhere);
    assert!(bloom.add("other master bare").await.unwrap());
    assert!(bloom.add_many(&["a", "b", "c"]).await.unwrap()[0]);

    kill_replica_of(home);
    match bloom.add("own master bare").await {
        Err(Error::NotReplicated {
            acked: 0,
            wanted: 1,
        }) => {}
        other => panic!("expected NotReplicated, got {other:?}"),
    }
}

/// The CLI's `--wait-replicas` against a lone server: the write fails within about the WAIT
/// timeout (`--timeout`) with the typed error naming how many replicas confirmed, not a client
/// timeout retried for `--retry-for` (the connection's reply timeout outlasts WAIT's).
#[test]
fn the_cli_fails_fast_naming_how_many_replicas_confirmed() {
    let primary = RedisServer::start().expect("redis-server on PATH");
    let key = common::unique_key("cli-not-durable");
    for command in [&["add", "lonely"][..], &["load", "-"]] {
        let mut cmd = common::cli::redbloom(
            &primary.url(),
            &key,
            &[
                &["--bits", "1024", "--wait-replicas", "1", "--timeout", "1"],
                command,
            ]
            .concat(),
        );
        cmd.write_stdin("one\ntwo\n");
        let stderr =
            assert_cli_not_replicated(cmd, &format!("{command:?}"), Duration::from_secs(5));
        assert!(!stderr.contains("timed out"), "{stderr}");
    }
}

/// A dense add whose `WAIT` fails goes again with it: still "new" for what it added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dense_add_retried_for_its_wait_answers_new() {
    let key = common::unique_key("plain-wait-retried");
    let plain = RedisBloom::builder(&key)
        .layout(redbloom::Layout::Native)
        .expected_items(20_000)
        .false_positive_rate(0.01);
    kinds::wait::dense_add_retried_for_its_wait(plain).await;
}

/// An add whose `WAIT` found too few replicas is retried within the budget (the replica stopped
/// for 1.5 s, then back) and answers as its first write did: "new", for every kind (a growing
/// filter's retry wrote under new records and answered "seen" for its own item, found by the
/// soak).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_retried_for_its_replicas_stays_new() {
    use redbloom::{CountingBloom, GrowingBloom, Layout, RedisBloom, Retry, WindowBloom};
    let (primary, replica) = primary_and_replica().await;
    let conn = redis::Client::open(primary.url())
        .unwrap()
        .get_connection_manager()
        .await
        .unwrap();
    let retry = Retry::for_duration(Duration::from_secs(30));
    let wait = Duration::from_millis(200);
    let key = common::unique_key("retried-for-replicas");
    let growing = GrowingBloom::builder(format!("{key}:g"))
        .expected_items(1000)
        .false_positive_rate(0.001)
        .retry(retry)
        .wait_for_replicas(1, wait)
        .build(conn.clone())
        .unwrap();
    let plain = RedisBloom::builder(format!("{key}:p"))
        .layout(Layout::Native)
        .expected_items(1000)
        .false_positive_rate(0.001)
        .retry(retry)
        .wait_for_replicas(1, wait)
        .build(conn.clone())
        .unwrap();
    let counting = CountingBloom::builder(format!("{key}:c"))
        .expected_items(1000)
        .false_positive_rate(0.001)
        .retry(retry)
        .wait_for_replicas(1, wait)
        .build(conn.clone())
        .unwrap();
    let window = WindowBloom::builder(format!("{key}:w"), Duration::from_secs(3600))
        .expected_items(1000)
        .false_positive_rate(0.001)
        .retry(retry)
        .wait_for_replicas(1, wait)
        .build(conn.clone())
        .unwrap();
    for kind in 0..4 {
        let add = |item: &'static str| {
            let (g, p, c, w) = (
                growing.clone(),
                plain.clone(),
                counting.clone(),
                window.clone(),
            );
            async move {
                match kind {
                    0 => g.add(item).await,
                    1 => p.add(item).await,
                    2 => c.add(item).await,
                    _ => w.add(item).await,
                }
            }
        };
        assert!(add("warm").await.unwrap(), "kind {kind}");
        replica.pause();
        let call = tokio::spawn(add("fresh"));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        replica.resume();
        let answer = call.await.unwrap();
        assert!(matches!(answer, Ok(true)), "kind {kind}: {answer:?}");
    }
}
