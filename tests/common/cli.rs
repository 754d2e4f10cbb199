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
