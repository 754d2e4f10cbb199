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
    run_with(name, url, &[])
}

fn run_with(name: &str, url: &str, args: &[&str]) -> String {
    let out = Command::new(example(name))
        .args(args)
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

/// Every example answers `--help` with its usage (status 0), without touching Redis.
#[test]
fn every_example_answers_help() {
    for name in ["quickstart", "dedup_replicas", "crawler", "blacklist"] {
        let out = Command::new(example(name)).arg("--help").output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} --help: {stdout}");
        assert!(
            stdout.starts_with(&format!("usage: {name}")),
            "{name}: {stdout}"
        );
        assert!(stdout.contains("REDIS_URL"), "{name}: {stdout}");
    }
    let out = Command::new(example("quickstart"))
        .arg("extra")
        .output()
        .unwrap();
    assert!(!out.status.success(), "quickstart takes no arguments");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unexpected argument \"extra\""), "{stderr}");
}

#[tokio::test]
async fn dedup_replicas_processes_each_event_once_within_the_window() {
    let redis = common::redis().await;
    let out = run("dedup_replicas", redis.url());
    assert!(out.contains("processed 1000"), "{out}");
    assert!(out.contains("processed 100 again"), "{out}");
}

/// The blacklist's self-test: its requests and answers on one instance, then three instances
/// with near caches, where a block and an unblock by one reach the others within the interval
/// (the example asserts both; a shorter interval given by `--near-cache` too).
#[tokio::test]
async fn blacklist_checks_itself_and_its_near_caches() {
    let redis = common::redis().await;
    for args in [&[][..], &["--near-cache", "300ms"][..]] {
        let key = common::unique_key("blacklist-example");
        let out = run_with("blacklist", redis.url(), &[args, &["--key", &key]].concat());
        assert!(out.contains("ok: blocked twice, unblocked once"), "{out}");
        assert!(
            out.contains("ok: a block and an unblock by one instance reached the others"),
            "{out}"
        );
    }
}

#[tokio::test]
async fn quickstart_runs() {
    let redis = common::redis().await;
    run("quickstart", redis.url());
}

/// The number after `before` in `text` (up to the next character that is not a digit).
fn number_after(text: &str, before: &str) -> u64 {
    let start = text
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} in {text}"))
        + before.len();
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number after {before:?} in {text}"))
}

/// The crawler's growing filter, from its first level of 10,000 URLs (the default) to as many
/// levels as the synthetic frontier's 140,000 distinct URLs need (10,000 + 20,000 + 40,000 +
/// 80,000), with no URL crawled twice and each crawl counted once; and from a first level of
/// 100 for a file of URLs, each of which is crawled once but for false positives.
#[tokio::test]
async fn crawler_grows_its_filter_and_crawls_no_url_twice() {
    let redis = common::redis().await;
    let out = run("crawler", redis.url());
    assert!(out.contains("a first level for 10000 URLs"), "{out}");
    assert_eq!(number_after(&out, "crawled twice: "), 0, "{out}");
    let crawled = number_after(&out, "crawled ");
    let distinct = number_after(&out, "distinct URLs ");
    assert_eq!(crawled + number_after(&out, "skipped "), 200_000, "{out}");
    // Skipped new URLs are false positives: at most about 1e-4 of them.
    assert!(crawled <= distinct && distinct - crawled <= 30, "{out}");
    assert_eq!(number_after(&out, "filter info: "), 4, "levels: {out}");
    assert!(number_after(&out, "level(s) of at most ") > 4, "{out}");
    assert_eq!(
        number_after(&out, " items in a capacity of "),
        150_000,
        "{out}"
    );
    assert!(out.contains(&format!(", {crawled} items in")), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("urls.txt");
    let urls: String = (0..3_000)
        .map(|i| format!("https://example.test/page/{}\n", i % 1_000))
        .collect();
    std::fs::write(&file, urls).unwrap();
    let out = run_with(
        "crawler",
        redis.url(),
        &["--capacity", "100", file.to_str().unwrap()],
    );
    assert!(out.contains("frontier: 3000 URLs"), "{out}");
    assert_eq!(number_after(&out, "crawled twice: "), 0, "{out}");
    let crawled = number_after(&out, "crawled ");
    assert!((995..=1_000).contains(&crawled), "{out}");
    // 100 + 200 + 400 < 1,000 ≤ 1,500.
    assert_eq!(number_after(&out, "filter info: "), 4, "levels: {out}");
}

/// The throwaway server (tests and examples share it): a port another server already listens
/// on is refused, not mistaken for its own. Two tests handed the same free port once both
/// "started" one server, and the first to finish killed the other's (a CI run lost its server
/// mid-test that way).
#[test]
fn a_throwaway_server_never_claims_another_servers_port() {
    let first = common::server::RedisServer::start().expect("redis-server starts");
    let second = common::server::RedisServer::start_on(first.port(), &["--save", ""]);
    assert!(
        second.is_err(),
        "a second server on port {} was taken for started",
        first.port()
    );
    let third = common::server::RedisServer::start().expect("redis-server starts");
    assert_ne!(third.port(), first.port());
}
