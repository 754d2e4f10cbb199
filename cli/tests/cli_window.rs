//! Window filters through the CLI (SPEC.md §4 "window"): the verbs and `info`'s fields,
//! clients whose clocks are off by minutes (libfaketime), processes adding at once across
//! generation changes, and mismatches that write nothing.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, faketime, redbloom, run};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WINDOW: &[&str] = &["--window", "2s", "--capacity", "100000", "--fpr", "0.01"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = WINDOW.to_vec();
    all.extend_from_slice(extra);
    all
}

/// `redbloom` whose own clock is `offset` off (libfaketime syntax: "-10m", "+7m").
fn skewed(url: &str, key: &str, offset: &str, extra: &[&str]) -> assert_cmd::Command {
    let mut cmd = redbloom(url, key, &args(extra));
    cmd.env("LD_PRELOAD", faketime())
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    cmd
}

#[tokio::test]
async fn verbs_and_info() {
    let redis = common::redis().await;
    let url = redis.url();
    let key = common::unique_key("cli-window");
    let (code, json, _) = run(redbloom(
        url,
        &key,
        &args(&["--json", "add", "a", "b", "a"]),
    ));
    assert_eq!(
        (code, json["items"].as_u64(), json["new"].as_u64()),
        (0, Some(3), Some(2))
    );
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "exists", "a", "z"])));
    assert_eq!((code, json["present"].as_u64()), (1, Some(1)));
    let (code, info, _) = run(redbloom(url, &key, &args(&["--json", "info"])));
    assert_eq!(code, 0);
    assert_eq!(info["window_seconds"].as_f64(), Some(2.0));
    assert_eq!(info["generations"].as_u64(), Some(4));
    let parts = info["parts"].as_array().expect("parts");
    assert_eq!(parts.len(), 1, "{info}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start = parts[0]["start"].as_f64().unwrap();
    assert!((now - start).abs() < 5.0, "{start} vs {now}");
    assert!(parts[0]["bits_set"].as_u64().unwrap() > 0);
    assert!(
        matches!(parts[0]["ttl_seconds"].as_i64(), Some(0..=3)),
        "{info}"
    );
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "expire", "60"])));
    assert_eq!((code, json["ttl_seconds"].as_u64()), (0, Some(60)));
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "clear"])));
    assert_eq!((code, json["deleted"].as_bool()), (0, Some(true)));

    // Wrong flags: one line, exit 2.
    let mut conn = redis.connection().await;
    run(redbloom(url, &key, &args(&["add", "a"])));
    let other = [
        "--window",
        "3s",
        "--capacity",
        "100000",
        "--fpr",
        "0.01",
        "add",
        "x",
    ];
    assert_fails(
        redbloom(url, &key, &other),
        &["created with", "window_ms=2000"],
        None,
    );
    let other = [
        "--window",
        "2s",
        "--generations",
        "5",
        "--capacity",
        "100000",
        "--fpr",
        "0.01",
    ];
    assert_fails(
        redbloom(url, &key, &[&other[..], &["clear"]].concat()),
        &["generations=4"],
        None,
    );
    assert_fails(
        redbloom(
            url,
            &key,
            &["--capacity", "100000", "--fpr", "0.01", "add", "x"],
        ),
        &["holds a window filter", "leave the size flags out"],
        None,
    );
    assert!(common::key_exists(&mut conn, &common::companion(&key, "params")).await);
    assert_fails(
        redbloom(url, &key, &["--window", "2s", "--bits", "1000", "add", "x"]),
        &["--capacity"],
        None,
    );
    assert_fails(
        redbloom(
            url,
            &key,
            &[
                "--window",
                "0",
                "--capacity",
                "9",
                "--fpr",
                "0.1",
                "add",
                "x",
            ],
        ),
        &["duration"],
        None,
    );
    assert_fails(
        redbloom(
            url,
            &key,
            &["--generations", "3", "--bits", "64", "add", "x"],
        ),
        &["--window"],
        None,
    );
    assert_fails(
        redbloom(url, &key, &args(&["--layout", "gozero", "add", "x"])),
        &["native"],
        None,
    );
    run(redbloom(url, &key, &args(&["clear"])));
}

/// Clients whose clocks are ten minutes behind and seven ahead get exactly the answers of one
/// whose clock is right: the generations follow the server's clock.
#[tokio::test]
async fn skewed_client_clocks_agree() {
    let redis = common::redis().await;
    let url = redis.url();
    // libfaketime works here: `date` under it is ten minutes behind.
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let out = Command::new("date")
        .arg("+%s")
        .env("LD_PRELOAD", faketime())
        .env("FAKETIME", "-10m")
        .output()
        .unwrap();
    let faked: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(
        (real - 600 - faked).abs() < 5,
        "libfaketime has no effect: {faked} vs {real}"
    );

    let key = common::unique_key("cli-window-clocks");
    let items: Vec<String> = (0..50).map(|i| format!("item-{i}")).collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    let (code, json, err) = run(skewed(
        url,
        &key,
        "-10m",
        &[&["--json", "add"], &items[..]].concat(),
    ));
    assert_eq!((code, json["new"].as_u64()), (0, Some(50)), "{err}");
    // Everyone finds them at once, and "new" agrees.
    for (name, offset) in [
        ("right", None),
        ("behind", Some("-10m")),
        ("ahead", Some("+7m")),
    ] {
        let check = &[&["--json", "exists"], &items[..]].concat();
        let cmd = match offset {
            None => redbloom(url, &key, &args(check)),
            Some(offset) => skewed(url, &key, offset, check),
        };
        let (code, json, err) = run(cmd);
        assert_eq!(
            (code, json["present"].as_u64()),
            (0, Some(50)),
            "{name}: {err}"
        );
        let again = match offset {
            None => redbloom(url, &key, &args(&["--json", "add", "item-0"])),
            Some(offset) => skewed(url, &key, offset, &["--json", "add", "item-0"]),
        };
        assert_eq!(run(again).1["new"].as_u64(), Some(0), "{name}");
    }
    // And everyone has forgotten them by W·G/(G-1) = 2.67 s later.
    std::thread::sleep(Duration::from_millis(2_900));
    for (name, offset) in [
        ("right", None),
        ("behind", Some("-10m")),
        ("ahead", Some("+7m")),
    ] {
        let check = &[&["--json", "exists"], &items[..]].concat();
        let cmd = match offset {
            None => redbloom(url, &key, &args(check)),
            Some(offset) => skewed(url, &key, offset, check),
        };
        let (code, json, _) = run(cmd);
        assert_eq!((code, json["present"].as_u64()), (1, Some(0)), "{name}");
    }
}

/// Four processes load the same lines at once, in rounds 300 ms apart across generation
/// changes (W = 2 s, G = 4: a new generation every 667 ms): every line is new for exactly one
/// process, and the lines of the last two rounds are all found after each round.
#[tokio::test]
async fn processes_adding_at_once_count_each_item_once() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let key = common::unique_key("cli-window-processes");
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut files = Vec::new();
    for round in 0..6 {
        let path = dir.path().join(format!("round{round}.txt"));
        let lines: String = (0..3000)
            .map(|i| format!("round{round}-line{i}\n"))
            .collect();
        std::fs::write(&path, lines).unwrap();
        let children: Vec<Child> = (0..4)
            .map(|_| {
                Command::new(assert_cmd::cargo::cargo_bin!("redbloom"))
                    .env_remove("REDIS_URL")
                    .args(["--url", &url, "--key", &key])
                    .args(args(&["--json", "load"]))
                    .arg(&path)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut new = 0;
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            new += json["new"].as_u64().unwrap();
        }
        assert_eq!(
            new, 3000,
            "round {round}: each line new for exactly one process"
        );
        files.push(path);
        for path in files.iter().rev().take(2) {
            let mut cmd = redbloom(&url, &key, &args(&["--json", "check"]));
            cmd.arg(path);
            let (code, json, err) = run(cmd);
            assert_eq!((code, json["absent"].as_u64()), (0, Some(0)), "{err}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        started.elapsed() > Duration::from_millis(1400),
        "the rounds spanned at least two generation changes"
    );
    run(redbloom(&url, &key, &args(&["clear"])));
}
