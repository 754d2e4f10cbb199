//! Connections that heal (README "In your own code"): the README's first example's connection, a
//! `ConnectionManager` with a retry budget, keeps working across a restart of Redis; a
//! `MultiplexedConnection`, which never reconnects, fails once its budget is spent with
//! `Error::Closed`: not transient, naming the fix.

mod common;

use common::server::RedisServer;
use redbloom::{redis, Error, RedisBloom, Retry};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the README's first example opens its connection and sets its retries, line for line
/// (`the_readme_opens_the_connection_tested_here`): the filter of
/// `the_readme_connection_keeps_working_across_a_restart` is opened so.
const README_LINES: [&str; 2] = [
    "let conn = client.get_connection_manager().await?;",
    ".retry(Retry::for_duration(Duration::from_secs(30)))",
];

#[test]
fn the_readme_opens_the_connection_tested_here() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let section = readme
        .split_once("\n## In your own code\n")
        .expect("the README has a section \"## In your own code\"")
        .1;
    let block = section
        .split_once("```rust")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("a Rust block in \"In your own code\"")
        .0;
    for line in README_LINES {
        assert!(
            block.lines().any(|l| l.trim() == line),
            "the README's first example no longer has `{line}`: test its connection here"
        );
    }
    assert!(
        !block.contains("get_multiplexed_async_connection"),
        "{block}"
    );
}

/// The item a writer adds `n`-th.
fn item(n: u64) -> String {
    format!("event-{n}")
}

/// Waits until `count` reaches `target`, for at most 30 s.
async fn wait_for(count: &AtomicU64, target: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while count.load(Ordering::SeqCst) < target {
        assert!(
            Instant::now() < deadline,
            "{what}: only {} adds in 30 s",
            count.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A writer adds one item after another before, during and after a `kill -9` and restart of
/// the server (on its port, from an AOF fsync'd at every write): no call fails, every add
/// says "new" (a write whose reply the kill lost reads its record back), and every item
/// acknowledged is found after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_connection_keeps_working_across_a_restart() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("a private redis-server");
    let client = redis::Client::open(server.url()).unwrap();
    // As the README opens it (README_LINES).
    let conn = client.get_connection_manager().await.unwrap();
    let seen = RedisBloom::builder(common::unique_key("heal"))
        .expected_items(1_000_000)
        .false_positive_rate(1e-4)
        .retry(Retry::for_duration(Duration::from_secs(30)))
        .build(conn)
        .unwrap();

    let added = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn({
        let (seen, added, stop) = (seen.clone(), Arc::clone(&added), Arc::clone(&stop));
        async move {
            let mut news = 0;
            while !stop.load(Ordering::SeqCst) {
                let n = added.load(Ordering::SeqCst);
                news += u64::from(seen.add(item(n)).await?);
                added.store(n + 1, Ordering::SeqCst);
            }
            Ok::<_, Error>(news)
        }
    });

    wait_for(&added, 100, "before the restart").await;
    let restarted = Instant::now();
    tokio::task::block_in_place(|| server.restart()).expect("the server starts again");
    let at_restart = added.load(Ordering::SeqCst);
    wait_for(&added, at_restart + 100, "after the restart").await;
    stop.store(true, Ordering::SeqCst);
    let news = writer
        .await
        .unwrap()
        .unwrap_or_else(|err| panic!("an add failed across the restart: {err} [{err:?}]"));
    let added = added.load(Ordering::SeqCst);
    eprintln!(
        "{added} adds, {at_restart} before the restart; {} ms from the kill to 100 adds after",
        restarted.elapsed().as_millis()
    );
    assert_eq!(news, added, "every add of a new item says new");

    let items: Vec<String> = (0..added).map(item).collect();
    let found = seen.exists_many(&items).await.unwrap();
    let lost: Vec<&String> = items
        .iter()
        .zip(&found)
        .filter(|(_, f)| !**f)
        .map(|(i, _)| i)
        .collect();
    assert!(lost.is_empty(), "acknowledged adds lost: {lost:?}");
}

/// A `MultiplexedConnection` whose server restarted is closed for good: with a retry budget,
/// every call fails once the budget is spent with `Error::Closed`, not transient, naming
/// `ConnectionManager`; with none (one try, which cannot tell) with `Error::Connection`. The
/// server is back all along: a new connection works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiplexed_connection_is_closed_for_good_after_a_restart() {
    let mut server = RedisServer::start().expect("a private redis-server");
    let client = redis::Client::open(server.url()).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    let key = common::unique_key("closed");
    let budget = Duration::from_secs(1);
    let filter = |conn, retry| {
        RedisBloom::builder(key.as_str())
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .retry(retry)
            .build(conn)
            .unwrap()
    };
    let seen = filter(conn.clone(), Retry::for_duration(budget));
    assert!(seen.add("before").await.unwrap());

    tokio::task::block_in_place(|| server.restart()).expect("the server starts again");
    for op in ["add", "exists", "add_many"] {
        let started = Instant::now();
        let result = match op {
            "add" => seen.add("after").await.map(drop),
            "exists" => seen.exists("before").await.map(drop),
            _ => seen.add_many(&["a", "b"]).await.map(drop),
        };
        let elapsed = started.elapsed();
        let err = result.expect_err(op);
        assert!(matches!(err, Error::Closed(_)), "{op}: {err:?}");
        assert!(!err.is_transient(), "{op}: {err:?}");
        let message = err.to_string();
        assert!(message.contains("does not reconnect"), "{op}: {message}");
        assert!(message.contains("ConnectionManager"), "{op}: {message}");
        let source = std::error::Error::source(&err).expect("the connection's error");
        let source = source
            .downcast_ref::<redis::RedisError>()
            .expect("a RedisError");
        assert!(source.is_connection_dropped(), "{op}: {source:?}");
        // Tries at 0, 50, 150, 350 and 750 ms; the next would start past the budget.
        assert!(
            elapsed >= Duration::from_millis(700) && elapsed < budget + Duration::from_secs(2),
            "{op} took {elapsed:?}"
        );
    }

    let once = filter(conn, Retry::none());
    let err = once
        .add("after")
        .await
        .expect_err("the connection is closed");
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    assert!(err.is_transient(), "one try cannot tell: {err:?}");

    let fresh = client.get_multiplexed_async_connection().await.unwrap();
    assert!(filter(fresh, Retry::none()).add("after").await.unwrap());
}
