//! `kill -9` of redis-server (appendonly yes, appendfsync always) in the middle of a `redbloom
//! load`, restarted a second later: the load completes and every item is present.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::server::RedisServer;
use redbloom::RedisBloom;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every acknowledged write on disk before the reply: nothing acknowledged is lost to `kill -9`.
const AOF_ALWAYS: [&str; 6] = [
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];

#[tokio::test]
async fn a_load_rides_out_a_crash_and_restart() {
    let server = RedisServer::start_with(&AOF_ALWAYS).expect("redis-server on PATH");
    rides_out(server, Duration::from_secs(1)).await;
}

/// The CLI's default retry budget (no `--retry-for`) covers an outage of more than 5 s.
/// (`appendfsync always`: with `everysec`, a `kill -9` loses up to a second of acknowledged
/// writes, as Redis documents.)
#[tokio::test]
async fn the_default_budget_rides_out_five_seconds() {
    let server = RedisServer::start_with(&AOF_ALWAYS).expect("redis-server on PATH");
    rides_out(server, Duration::from_millis(5_500)).await;
}

/// Kills `server` once a load has written something, restarts it after `outage`, and checks
/// the load completes with every item present.
async fn rides_out(mut server: RedisServer, outage: Duration) {
    let key = common::unique_key("crash");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let items: Vec<String> = (0..60_000).map(|i| format!("crash-item:{i}")).collect();
    for item in &items {
        writeln!(file, "{item}").unwrap();
    }
    // Small batches by BITFIELD with an fsync per write: the load takes seconds, so the crash
    // lands in its middle.
    let mut load = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args([
            "--url",
            &server.url(),
            "--key",
            &key,
            "--bits",
            "4000000",
            "--json",
        ])
        .args([
            "load",
            file.path().to_str().unwrap(),
            "--batch",
            "100",
            "--pipeline",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Wait until the load has written something, then crash the server.
    let url = server.url();
    let client = redis::Client::open(url.as_str()).unwrap();
    let started = Instant::now();
    loop {
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let len: u64 = redis::cmd("STRLEN")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        if len > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the load never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill();
    tokio::time::sleep(outage).await;
    assert!(
        load.try_wait().unwrap().is_none(),
        "the load gave up during a {outage:?} outage"
    );
    server.restart().unwrap();

    let out = load.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "load failed: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["items"], 60_000, "{report}");

    // Every item is there: what was acknowledged before the crash came back from the AOF, the
    // rest was retried after the restart.
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    let bloom = RedisBloom::new(conn, &key, 4_000_000).unwrap();
    let mut missing = 0;
    for batch in items.chunks(5_000) {
        missing += bloom
            .exists_many(batch)
            .await
            .unwrap()
            .iter()
            .filter(|p| !**p)
            .count();
    }
    assert_eq!(missing, 0, "items lost across the crash");
}
