//! Exact answers across retries through the CLI (issue 23 points 1 and 2): a server stopped
//! with a batch in flight, which the server applies once it resumes, and the CLI's retry after
//! its reply timed out. The counting repro of the issue keeps every count; a `load`'s `new`
//! equals a clean load's. `--inexact-retries` shows the harness reaches the fault.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::server::RedisServer;
use std::io::Write;
use std::time::Duration;

fn lines(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix}:{i}\n")).collect()
}

/// Runs `args` with `input` on stdin: a first line, then (while the server is stopped for
/// 3 s) the rest, so that the batch holding it goes out to a stopped server; the JSON reply.
fn stalled(server: &RedisServer, key: &str, args: &[&str], input: &str) -> serde_json::Value {
    let mut child = common::cli::spawn(&server.url(), key, args);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"first\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    server.pause();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    std::thread::sleep(Duration::from_secs(3));
    server.resume();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

fn counting_unload(inexact: bool) -> u64 {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("r.txt");
    std::fs::write(&all, lines("r", 10_000)).unwrap();
    // 4.8 MB of counters: the unload's batch goes by BITFIELD (it swaps from 10,700 items).
    let mut flags = vec![
        "--counting",
        "--capacity",
        "1000000",
        "--fpr",
        "0.01",
        "--json",
        "--timeout",
        "1",
    ];
    if inexact {
        flags.push("--inexact-retries");
    }
    for _ in 0..2 {
        let args = [&flags[..], &["load", all.to_str().unwrap()]].concat();
        let (code, _, stderr) = run(redbloom(&server.url(), "c", &args));
        assert_eq!(code, 0, "{stderr}");
    }
    let removed = lines("r", 5_000);
    stalled(
        &server,
        "c",
        &[&flags[..], &["unload", "-"]].concat(),
        &removed,
    );
    let some = dir.path().join("rm.txt");
    std::fs::write(&some, &removed).unwrap();
    let args = [&flags[..], &["check", some.to_str().unwrap()]].concat();
    let (_, json, stderr) = run(redbloom(&server.url(), "c", &args));
    json["present"]
        .as_u64()
        .unwrap_or_else(|| panic!("{json}: {stderr}"))
}

#[test]
fn an_unload_retried_across_a_stall_removes_once() {
    assert_eq!(
        counting_unload(false),
        5_000,
        "added twice, removed once: still present"
    );
}

#[test]
fn with_inexact_retries_the_stalled_unload_removes_twice() {
    assert!(counting_unload(true) < 5_000);
}

/// A load of 1,000 new items under a stall, and the same loaded cleanly: (new, unknown) of the
/// stalled load, and the clean load's new.
fn load_new(inexact: bool) -> (u64, u64, u64) {
    let server = RedisServer::start().unwrap();
    let flags = || {
        let mut flags = vec![
            "--layout",
            "native",
            "--capacity",
            "1000000",
            "--fpr",
            "0.01",
            "--json",
            "--timeout",
            "1",
        ];
        if inexact {
            flags.push("--inexact-retries");
        }
        flags
    };
    let items = lines("n", 1_000);
    let stalled = stalled(
        &server,
        "stalled",
        &[&flags()[..], &["load", "-"]].concat(),
        &items,
    );
    let mut child = common::cli::spawn(
        &server.url(),
        "clean",
        &[&flags()[..], &["load", "-"]].concat(),
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"first\n").unwrap();
    stdin.write_all(items.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let clean: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(clean["unknown"].as_u64(), Some(0), "{clean}");
    (
        stalled["new"].as_u64().unwrap(),
        stalled["unknown"].as_u64().unwrap(),
        clean["new"].as_u64().unwrap(),
    )
}

/// A load goes bare (no records: `Bloom::load_many`), and stays honest: a batch retried after
/// its lost attempt was applied answers "seen" for items that attempt added, and the load
/// says how many such answers could not be known. new <= clean <= new + unknown.
#[test]
fn a_load_retried_across_a_stall_says_how_many_answers_are_unknown() {
    for inexact in [false, true] {
        let (new, unknown, clean) = load_new(inexact);
        assert!(
            new < clean,
            "the stall met no applied batch: {new} new of {clean}"
        );
        assert!(
            clean <= new + unknown,
            "{new} new and {unknown} unknown, {clean} new in a clean load"
        );
    }
}
