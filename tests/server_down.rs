//! A server stopped for longer than the retry budget: a clear error within the timeout, no
//! hang, no panic; for the library and for `redbloom load`.

mod common;

use common::server::RedisServer;
use redbloom::{Error, RedisBloom, Retry};
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

#[tokio::test]
async fn the_library_gives_up_within_its_timeout() {
    let mut server = RedisServer::start().expect("redis-server on PATH");
    let client = redis::Client::open(server.url().as_str()).unwrap();
    let conn = client.get_connection_manager().await.unwrap();
    let bloom = RedisBloom::builder(common::unique_key("down"))
        .bits(1 << 20)
        .retry(Retry::for_duration(Duration::from_secs(1)))
        .timeout(Duration::from_secs(3))
        .build(conn)
        .unwrap();
    assert!(bloom.add("before").await.unwrap());

    server.kill();
    for op in ["add", "exists", "add_many", "info"] {
        let started = Instant::now();
        let result = match op {
            "add" => bloom.add("during").await.map(|_| ()),
            "exists" => bloom.exists("during").await.map(|_| ()),
            "add_many" => bloom.add_many(&["a", "b"]).await.map(|_| ()),
            _ => bloom.info().await.map(|_| ()),
        };
        let elapsed = started.elapsed();
        let err = result.expect_err(op);
        assert!(
            matches!(
                err,
                Error::Connection(_) | Error::Timeout(_) | Error::Deadline(_)
            ),
            "{op}: {err:?}"
        );
        assert!(
            err.is_transient() || matches!(err, Error::Deadline(_)),
            "{op}: {err:?}"
        );
        assert!(
            elapsed <= Duration::from_millis(3_500),
            "{op} took {elapsed:?}"
        );
    }

    // When the server is back, the same filter works again (the ConnectionManager reconnects).
    server.restart().unwrap();
    let mut added = Err(Error::InvalidConfig("not tried".into()));
    for _ in 0..50 {
        added = bloom.add("after").await;
        if added.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(added.is_ok(), "{added:?}");
}

#[tokio::test]
async fn the_cli_exits_2_with_the_acknowledged_count() {
    let mut server = RedisServer::start().expect("redis-server on PATH");
    let key = common::unique_key("down-cli");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..1_000 {
        writeln!(file, "down-item:{i}").unwrap();
    }
    // The server is gone before the load starts its writes: connecting fails at once.
    let url = server.url();
    server.kill();
    let started = Instant::now();
    let out = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args([
            "--url",
            &url,
            "--key",
            &key,
            "--bits",
            "100000",
            "--retry-for",
            "2",
            "--timeout",
            "1",
        ])
        .args(["load", file.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot connect to Redis"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // Killed during the load, the server stays down: the load gives up after its budget and says
    // how many items were acknowledged.
    server.restart().unwrap();
    let mut big = tempfile::NamedTempFile::new().unwrap();
    for i in 0..200_000 {
        writeln!(big, "down-item:{i}").unwrap();
    }
    let load = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args([
            "--url",
            &url,
            "--key",
            &key,
            "--bits",
            "4000000",
            "--retry-for",
            "2",
            "--timeout",
            "1",
        ])
        .args([
            "load",
            big.path().to_str().unwrap(),
            "--batch",
            "100",
            "--pipeline",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.kill();
    let killed = Instant::now();
    let out = load.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        killed.elapsed() < Duration::from_secs(8),
        "gave up after {:?}",
        killed.elapsed()
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let acknowledged: u64 = stderr
        .rsplit('(')
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no acknowledged count in {stderr:?}"));
    assert!(acknowledged > 0 && acknowledged < 200_000, "{stderr}");
    assert!(
        stderr.contains("items acknowledged as added before the error"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
