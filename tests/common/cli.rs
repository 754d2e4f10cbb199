//! Running the `redbloom` binary in tests.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;

/// `redbloom --url URL --key KEY ARGS...`, with `REDIS_URL` cleared.
pub fn redbloom(url: &str, key: &str, args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("redbloom").unwrap();
    cmd.env_remove("REDIS_URL")
        .args(["--url", url, "--key", key])
        .args(args);
    cmd
}

/// `redbloom --cluster SEEDS --key KEY ARGS...`, with `REDIS_URL` cleared.
pub fn redbloom_cluster(seeds: &str, key: &str, args: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("redbloom").unwrap();
    cmd.env_remove("REDIS_URL")
        .args(["--cluster", seeds, "--key", key])
        .args(args);
    cmd
}

/// Runs and returns (exit status, stdout parsed as one JSON line, stderr).
pub fn run(mut cmd: Command) -> (i32, Value, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.lines().count() <= 1,
        "one line of output: {stdout:?}"
    );
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts a failure: status 2, nothing on stdout, one line on stderr that starts with
/// `redbloom: `, contains every one of `words` (case-insensitive), no panic, and never `secret`
/// (a password) anywhere. Returns the line.
pub fn assert_fails(mut cmd: Command, words: &[&str], secret: Option<&str>) -> String {
    let hide = |text: String| match secret {
        Some(secret) => text.replace(secret, "<password>"),
        None => text,
    };
    let shown = hide(format!("{cmd:?}"));
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if let Some(secret) = secret {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{shown}: the password shows: {:?} {:?}",
            hide(stdout.clone()),
            hide(stderr.clone())
        );
    }
    assert_eq!(out.status.code(), Some(2), "{shown}: {stderr}");
    assert!(stdout.is_empty(), "{shown}: nothing on stdout: {stdout:?}");
    assert_eq!(stderr.lines().count(), 1, "{shown}: one line: {stderr:?}");
    assert!(stderr.starts_with("redbloom: "), "{shown}: {stderr:?}");
    assert!(!stderr.contains("panicked"), "{shown}: {stderr:?}");
    let lower = stderr.to_lowercase();
    for word in words {
        assert!(
            lower.contains(&word.to_lowercase()),
            "{shown}: {word:?} in {stderr:?}"
        );
    }
    stderr
}

/// The libfaketime library, or a failure saying how to install it (never a skip).
pub fn faketime() -> &'static str {
    const PATHS: [&str; 2] = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    ];
    PATHS
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or_else(|| {
            panic!("libfaketime not found in {PATHS:?}: apt-get install faketime (.ci/run does)")
        })
}

/// `cmd` with its own clock `offset` off (libfaketime syntax: "-10m", "+7m", "+365d"); its
/// monotonic clock left true.
pub fn with_clock_off(cmd: &mut Command, offset: &str) {
    cmd.env("LD_PRELOAD", faketime())
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
}

/// `redbloom --url URL --key KEY ARGS...` as a running child with its three pipes, with
/// `REDIS_URL` cleared.
pub fn spawn(url: &str, key: &str, args: &[&str]) -> std::process::Child {
    use std::process::Stdio;
    std::process::Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args(["--url", url, "--key", key])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}
