//! `redbloom load -` from a slow producer: lines reach the filter within a second or so, not
//! when a whole batch has been read, and SIGINT or SIGTERM stops the run with the usual
//! summary of what was acknowledged, a line on stderr and exit status 130 or 143.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use redbloom::RedisBloom;
use redis::aio::MultiplexedConnection;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

const BITS: u64 = 1_000_000;

/// `redbloom --bits 1000000 --json load -`, its standard input a pipe the test holds.
fn spawn_load(url: &str, key: &str) -> (Child, ChildStdin) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args(["--url", url, "--key", key, "--bits", "1000000", "--json"])
        .args(["load", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin)
}

/// Exit status, stdout and stderr, waiting at most 30 s.
fn finish(mut child: Child) -> (Option<i32>, String, String) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("redbloom did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stdout, stderr)
}

/// How many of `items` the filter holds.
async fn present(conn: &MultiplexedConnection, key: &str, items: &[String]) -> usize {
    let bloom = RedisBloom::new(conn.clone(), key, BITS).unwrap();
    let flags = bloom.exists_many(items).await.unwrap();
    flags.iter().filter(|&&flag| flag).count()
}

/// Waits up to `within` for every one of `items` to be in the filter; returns how long it took.
async fn wait_present(
    conn: &MultiplexedConnection,
    key: &str,
    items: &[String],
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let found = present(conn, key, items).await;
        if found == items.len() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{found} of {} lines written {:?} ago are in the filter",
            items.len(),
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn write_lines(stdin: &mut ChildStdin, items: &[String]) {
    for item in items {
        writeln!(stdin, "{item}").unwrap();
    }
    stdin.flush().unwrap();
}

fn items(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test]
async fn lines_from_a_slow_pipe_reach_the_filter_promptly() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let key = common::unique_key("cli-slow-pipe");
    let (child, mut stdin) = spawn_load(redis.url(), &key);
    let first = items("slow", 0..3);
    write_lines(&mut stdin, &first);
    // stdin stays open: the batch is far from full (the default batch is thousands of items).
    let took = wait_present(&conn, &key, &first, Duration::from_secs(2)).await;
    println!("3 lines in the filter {took:?} after they were written");

    let second = items("slow", 3..5);
    write_lines(&mut stdin, &second);
    wait_present(&conn, &key, &second, Duration::from_secs(2)).await;
    drop(stdin);
    let (code, stdout, stderr) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&out["items"], &out["new"]),
        (&5.into(), &5.into()),
        "{out}"
    );
    assert!(out.get("interrupted").is_none(), "{out}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// Loads slowly, sends `signal` with lines still arriving, and checks the summary against the
/// filter.
async fn interrupted_load(signal: libc::c_int, name: &str, status: i32) {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let key = common::unique_key(&format!("cli-{name}"));
    let (child, mut stdin) = spawn_load(redis.url(), &key);
    let acknowledged = items(name, 0..20);
    for chunk in acknowledged.chunks(5) {
        write_lines(&mut stdin, chunk);
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_present(&conn, &key, &acknowledged, Duration::from_secs(5)).await;
    // More lines, just before the signal: in a batch not yet sent, or in flight.
    let late = items(name, 20..30);
    write_lines(&mut stdin, &late);
    // SAFETY: a signal to our own child, which has not been waited for.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let (code, stdout, stderr) = finish(child);
    drop(stdin);

    assert_eq!(code, Some(status), "{name}: {stdout} {stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["interrupted"], name, "{out}");
    assert!(out["seconds"].as_f64().is_some(), "{out}");
    let reported = out["items"].as_u64().unwrap() as usize;
    assert_eq!(out["new"].as_u64(), Some(reported as u64), "{out}");
    let all: Vec<String> = acknowledged.iter().chain(&late).cloned().collect();
    let found = present(&conn, &key, &all).await;
    assert!(reported >= acknowledged.len(), "{out}");
    assert_eq!(
        reported, found,
        "the summary counts what the filter holds: {out}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(
        stderr.starts_with("redbloom: interrupted by ") && stderr.contains(name),
        "{stderr:?}"
    );
    assert!(
        stderr.contains(&format!("{reported} items acknowledged as added")),
        "{stderr:?}"
    );
}

#[tokio::test]
async fn sigint_stops_a_load_with_its_summary_and_status_130() {
    interrupted_load(libc::SIGINT, "SIGINT", 130).await;
}

#[tokio::test]
async fn sigterm_stops_a_load_with_its_summary_and_status_143() {
    interrupted_load(libc::SIGTERM, "SIGTERM", 143).await;
}

/// A `load` into a filter past 4 MiB with exact answers (the default) passes over the key once
/// per batch (its ranges' records are its own): batches of up to 64 MiB of items, so that
/// 400,000 short lines into a 24 MB filter go as one batch, one pass of its 183 ranges of 128
/// KiB. At 16 MiB a batch held about 220,000 such lines: two passes (1M items into 120 MB took
/// 6.8 s against 2.5 s, 10M 50.6 s against 16.9 s).
#[tokio::test]
async fn a_recorded_load_into_a_large_filter_takes_64_mib_of_items_per_pass() {
    let server = common::server::RedisServer::start().unwrap();
    let url = server.url();
    let lines: String = (0..400_000).map(|i| format!("item:{i}\n")).collect();
    let file = std::env::temp_dir().join(format!("redbloom-pass-{}.txt", std::process::id()));
    std::fs::write(&file, lines).unwrap();
    let out = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args(["--url", &url, "--key", "wide", "--layout", "native"])
        .args(["--capacity", "20000000", "--fpr", "0.01", "--json", "load"])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["new"], 400_000, "{summary}");
    // Each range merged is one SETRANGE (scripts' commands count in INFO commandstats), and
    // one more grows the key to its size before a pass.
    let merged = common::calls(&mut common::connect(&url).await, "setrange").await;
    assert!(
        (183..=184).contains(&merged),
        "{merged} SETRANGEs: not one pass over the key's 183 ranges"
    );
}
