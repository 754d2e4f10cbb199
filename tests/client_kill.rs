//! `CLIENT KILL` of the filter's connection mid-run: with a reconnecting connection and a retry
//! policy nothing fails and nothing is lost; without them the failure is a typed connection
//! error, never a hang or a panic.

mod common;

use redbloom::{Error, RedisBloom, Retry};
use std::time::Duration;

async fn kill_normal_clients(admin: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(admin)
        .await
        .unwrap()
}

#[tokio::test]
async fn retries_carry_a_filter_across_killed_connections() {
    let redis = common::redis().await;
    assert!(
        redis.private_server_url().is_some(),
        "CLIENT KILL needs a private server"
    );
    let mut admin = redis.connection().await;
    let client = redis::Client::open(redis.url()).unwrap();
    let bloom = RedisBloom::builder(common::unique_key("killed"))
        .bits(1 << 22)
        .retry(Retry::for_duration(Duration::from_secs(5)))
        .build(client.get_connection_manager().await.unwrap())
        .unwrap();

    let writer = {
        let bloom = bloom.clone();
        tokio::spawn(async move {
            for round in 0..40 {
                let batch: Vec<String> = (0..200).map(|i| format!("kill:{round}:{i}")).collect();
                bloom
                    .add_many(&batch)
                    .await
                    .expect("add_many across a CLIENT KILL");
                assert!(bloom
                    .exists(&batch[0])
                    .await
                    .expect("exists across a CLIENT KILL"));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    // Several kills, spaced out, while the writer runs. (Killing every connection every few ms
    // would also kill each reconnected connection while it waits for its retry: no client
    // survives that, and no operator does it.)
    let mut killed = 0;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        if writer.is_finished() {
            break;
        }
        killed += kill_normal_clients(&mut admin).await;
    }
    writer.await.unwrap();
    assert!(killed >= 2, "only {killed} connections were killed");

    let all: Vec<String> = (0..40)
        .flat_map(|round| (0..200).map(move |i| format!("kill:{round}:{i}")))
        .collect();
    let found = bloom.exists_many(&all).await.unwrap();
    assert!(found.iter().all(|p| *p), "an acknowledged add was lost");
}

#[tokio::test]
async fn without_retries_a_killed_connection_is_a_typed_error() {
    let redis = common::redis().await;
    let mut admin = redis.connection().await;
    let conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let bloom = RedisBloom::new(conn, common::unique_key("killed-once"), 1 << 20).unwrap();
    assert!(bloom.add("before").await.unwrap());
    assert!(kill_normal_clients(&mut admin).await >= 1);
    let err = bloom
        .add("after")
        .await
        .expect_err("the connection is gone");
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    assert!(err.is_transient());
}
