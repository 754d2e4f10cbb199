//! A server stopped for longer than the retry budget: a clear error within the timeout, no
//! hang, no panic; for the library and for `redbloom load`. A server that starts within the
//! budget is waited for, by the first connection too.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
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
    // The server is gone before the load starts its writes: connecting gives up after its
    // retry budget.
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

/// A port nothing listens on (yet).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn cli(target: &[&str], key: &str, retry_for: &str) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("redbloom"));
    cmd.env_remove("REDIS_URL")
        .args(target)
        .args(["--key", key, "--bits", "1000", "--json", "--timeout", "1"])
        .args(["--retry-for", retry_for, "add", "early", "bird"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// A server that starts 1.5 s after the command: the first connection is retried within
/// `--retry-for` as a lost one would be, for `--url` and `--cluster`; with `--retry-for 0` the
/// command fails at once.
#[tokio::test]
async fn the_cli_waits_for_a_server_that_starts_within_retry_for() {
    for cluster in [false, true] {
        let port = free_port();
        let url = format!("redis://127.0.0.1:{port}");
        let target = match cluster {
            false => ["--url", url.as_str()],
            true => ["--cluster", url.as_str()],
        };
        let key = common::unique_key("late-server");

        let started = Instant::now();
        let out = cli(&target, &key, "0").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("cannot connect to"), "{stderr}");
        assert!(stderr.contains("Connection refused"), "{stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );

        let started = Instant::now();
        let child = cli(&target, &key, "30").spawn().unwrap();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let cluster_args = ["--cluster-enabled", "yes"];
        let extra = [
            &["--save", "", "--appendonly", "no"][..],
            if cluster { &cluster_args[..] } else { &[] },
        ]
        .concat();
        let _server = RedisServer::start_on(port, &extra).expect("redis-server on PATH");
        if cluster {
            // A one-node cluster holding every slot.
            let client = redis::Client::open(url.as_str()).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(0)
                .arg(16383)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "cluster: {cluster}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            r#"{"items":2,"new":2}"#
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1_500) && took < Duration::from_secs(15),
            "{took:?}"
        );
    }
}

/// Another client's script past the server's `busy-reply-threshold`: `BUSY` is retried within
/// `--retry-for` like any passing fault; with `--retry-for 0` the command exits 2 naming it.
#[tokio::test]
async fn the_cli_waits_out_a_busy_server() {
    // This test makes its server busy: a server of its own, even with REDIS_URL set.
    let server = RedisServer::start_busy_soon().expect("redis-server on PATH");
    let url = server.url();
    let target = ["--url", url.as_str()];
    let key = common::unique_key("busy");

    let script = common::busy::hold_busy(&url, Duration::from_millis(3_000)).await;
    let out = cli(&target, &key, "0").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("BUSY"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let out = cli(&target, &key, "30").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"items":2,"new":2}"#
    );
    script.await.unwrap();
}

/// On a terminal the CLI says at once that it waits for a server that is down (its address,
/// the cause, how long it will wait), then gives the one-line error at the end; `--json` and
/// pipes stay quiet until that error. The terminal is `script`'s (util-linux).
#[test]
fn on_a_terminal_the_cli_says_at_once_that_it_waits() {
    let port = free_port();
    let bin = assert_cmd::cargo::cargo_bin("redbloom");
    let args =
        format!("--url redis://127.0.0.1:{port} --key waiting --bits 1000 --retry-for 2 add x");
    // `script -qfec CMD /dev/null`: CMD on a new terminal, its output on script's stdout as it
    // comes, script's exit status CMD's.
    let on_terminal = |extra: &str| {
        let mut child = Command::new("script")
            .args([
                "-qfec",
                &format!("{} {extra} {args}", bin.display()),
                "/dev/null",
            ])
            .env_remove("REDIS_URL")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("script (util-linux) runs");
        let started = Instant::now();
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        let first = lines.next().map(Result::unwrap).unwrap_or_default();
        let first_at = started.elapsed();
        let rest: Vec<String> = lines.map(Result::unwrap).collect();
        (child.wait().unwrap().code(), first, first_at, rest)
    };

    let (code, first, first_at, rest) = on_terminal("");
    assert_eq!(code, Some(2));
    assert!(
        first.contains(&format!("cannot connect to Redis at 127.0.0.1:{port}"))
            && first.contains("Connection refused")
            && first.contains("waiting for it, at most 2 s (--retry-for"),
        "{first}"
    );
    assert!(first_at < Duration::from_secs(1), "told after {first_at:?}");
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert!(rest[0].contains("still failing after"), "{rest:?}");

    let (code, first, _, rest) = on_terminal("--json");
    assert_eq!(code, Some(2));
    assert!(
        first.contains("still failing after") && rest.is_empty(),
        "{first} {rest:?}"
    );

    let out = Command::new(&bin)
        .args(args.split(' '))
        .env_remove("REDIS_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("still failing after"), "{stderr}");
}
