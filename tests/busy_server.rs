//! `BUSY` is a passing state (docs/guarantees.md "Retries"): while another client's script runs
//! past the server's `busy-reply-threshold`, a filter of every kind, retried within its budget,
//! waits it out and succeeds; without a retry budget the call fails with an error naming `BUSY`.

mod common;

use common::busy::hold_busy;
use common::server::RedisServer;
use redbloom::{CountingBloom, Error, GrowingBloom, RedisBloom, Retry, WindowBloom};
use std::time::{Duration, Instant};

#[tokio::test]
async fn every_kind_waits_out_another_clients_long_script() {
    // This test makes its server busy: a server of its own, even with REDIS_URL set.
    let server = RedisServer::start_busy_soon().expect("a private redis-server");
    let url = server.url();
    let conn = common::connect(&url).await;
    let retry = Retry::for_duration(Duration::from_secs(20));
    let key = common::unique_key("busy");
    let plain = RedisBloom::builder(format!("{key}:plain"))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .retry(retry)
        .build(conn.clone())
        .unwrap();
    let native = RedisBloom::builder(format!("{key}:native"))
        .layout(redbloom::Layout::Native)
        .expected_items(1000)
        .false_positive_rate(0.01)
        .shards(2)
        .retry(retry)
        .build(conn.clone())
        .unwrap();
    let window = WindowBloom::builder(format!("{key}:window"), Duration::from_secs(3600))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .retry(retry)
        .build(conn.clone())
        .unwrap();
    let counting = CountingBloom::builder(format!("{key}:counting"))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .retry(retry)
        .build(conn.clone())
        .unwrap();
    let growing = GrowingBloom::builder(format!("{key}:growing"))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .retry(retry)
        .build(conn.clone())
        .unwrap();
    let impatient = RedisBloom::builder(format!("{key}:impatient"))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();

    let length = Duration::from_millis(1500);
    let script = hold_busy(&url, length).await;
    let busy_since = Instant::now();

    // No budget: a typed error at once, naming what the server said.
    let err = impatient
        .add("x")
        .await
        .expect_err("BUSY without a retry budget");
    assert!(
        matches!(err, Error::Redis(_)) && err.is_transient(),
        "{err:?}"
    );
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert!(source.unwrap_or_default().contains("BUSY"), "{err:?}");

    // With a budget: every kind's first write (its parameters check, then the add) waits.
    let (a, b, c, d, e) = tokio::join!(
        plain.add("x"),
        native.add_many(&["x", "y"]),
        window.add("x"),
        counting.add("x"),
        growing.add("x"),
    );
    assert!(a.expect("plain"), "plain: new");
    assert_eq!(b.expect("native, 2 shards"), [true, true]);
    assert!(c.expect("window"), "window: new");
    assert!(d.expect("counting"), "counting: new");
    assert!(e.expect("growing"), "growing: new");
    assert!(
        script.is_finished() || busy_since.elapsed() >= length / 2,
        "the adds waited for the script"
    );
    script.await.unwrap();
    assert!(plain.exists("x").await.unwrap() && growing.exists("x").await.unwrap());
}
