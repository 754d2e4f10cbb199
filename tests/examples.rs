//! The examples run as part of the suite (`cargo test` builds them; this runs them against the
//! test's Redis and checks they succeed: each asserts its own outcomes).

mod common;

use std::path::PathBuf;
use std::process::Command;

/// The example binary `cargo test` built beside this test's (`target/<profile>/examples/`).
fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().and_then(|d| d.parent()).unwrap();
    let path = profile.join("examples").join(name);
    assert!(
        path.exists(),
        "{} was not built: run the tests with `cargo test`, which builds the examples",
        path.display()
    );
    path
}

fn run(name: &str, url: &str) -> String {
    let out = Command::new(example(name))
        .env("REDIS_URL", url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn dedup_replicas_processes_each_event_once_within_the_window() {
    let redis = common::redis().await;
    let out = run("dedup_replicas", redis.url());
    assert!(out.contains("processed 1000"), "{out}");
    assert!(out.contains("processed 100 again"), "{out}");
}

#[tokio::test]
async fn quickstart_runs() {
    let redis = common::redis().await;
    run("quickstart", redis.url());
}
