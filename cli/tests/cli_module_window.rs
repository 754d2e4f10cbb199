//! Windows over module filters through the CLI (SPEC.md §7, `--module --window DURATION
//! [--generations G]`), against a private server with RedisBloom (tests/common/module.rs): the
//! verbs and `info`'s fields, each generation expiring from its creation, clients whose clocks
//! are off by minutes (libfaketime: only the server's clock counts), and mismatches that write
//! nothing.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, faketime, redbloom, run};
use common::keys_like;
use common::module::redis_with_bloom;
use std::process::Command;
use std::time::Duration;

const WINDOW: &[&str] = &[
    "--module",
    "--window",
    "2s",
    "--capacity",
    "10000",
    "--fpr",
    "0.01",
];

/// Another window over the same module filters' sizes.
const OTHER_WINDOW: &[&str] = &[
    "--module",
    "--window",
    "3s",
    "--capacity",
    "10000",
    "--fpr",
    "0.01",
];

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
    let redis = redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-module-window");
    let (code, json, err) = run(redbloom(
        url,
        &key,
        &args(&["--json", "add", "a", "b", "a"]),
    ));
    assert_eq!(
        (code, json["items"].as_u64(), json["new"].as_u64()),
        (0, Some(3), Some(2)),
        "{err}"
    );
    let generations = keys_like(&mut conn, &format!("{}*", common::companion(&key, "gen:"))).await;
    assert_eq!(generations.len(), 1, "{generations:?}");
    let pttl: i64 = redis::cmd("PTTL")
        .arg(&generations[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(pttl > 0 && pttl <= 2_667, "{pttl}");
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "exists", "a", "z"])));
    assert_eq!((code, json["present"].as_u64()), (1, Some(1)));
    // Opened as Redis stores it, with --module alone.
    let (code, json, _) = run(redbloom(url, &key, &["--module", "--json", "exists", "b"]));
    assert_eq!((code, json["present"].as_u64()), (0, Some(1)));
    let (code, info, _) = run(redbloom(url, &key, &args(&["--json", "info"])));
    assert_eq!(code, 0);
    assert_eq!(info["window_seconds"].as_f64(), Some(2.0));
    assert_eq!(info["generations"].as_u64(), Some(4));
    assert_eq!(info["items"].as_u64(), Some(2), "{info}");
    let out = redbloom(url, &key, &args(&["info"])).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("module filter (window 2 s over 4 generations"),
        "{text}"
    );
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "expire", "60"])));
    assert_eq!((code, json["ttl_seconds"].as_u64()), (0, Some(60)));
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "clear"])));
    assert_eq!((code, json["deleted"].as_bool()), (0, Some(true)));
    assert!(keys_like(&mut conn, &format!("{{{key}}}:*"))
        .await
        .is_empty());
}

/// Flags that disagree with the stored filter: one line naming the flag, exit 2, nothing
/// written.
#[tokio::test]
async fn mismatches_write_nothing() {
    let redis = redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-module-window-mismatch");
    assert_eq!(run(redbloom(url, &key, &args(&["add", "a"]))).0, 0);
    let before = keys_like(&mut conn, &format!("{{{key}}}:*")).await;
    let other_window = [OTHER_WINDOW, &["add", "b"]].concat();
    assert_fails(redbloom(url, &key, &other_window), &["--window 2s"], None);
    assert_fails(
        redbloom(url, &key, &args(&["--generations", "5", "add", "b"])),
        &["--generations 4"],
        None,
    );
    let no_window = [
        "--module",
        "--capacity",
        "10000",
        "--fpr",
        "0.01",
        "add",
        "b",
    ];
    assert_fails(redbloom(url, &key, &no_window), &["--window 2s"], None);
    assert_fails(
        redbloom(url, &key, &["--module", "--window", "3s", "exists", "a"]),
        &["--window 2s"],
        None,
    );
    assert_eq!(keys_like(&mut conn, &format!("{{{key}}}:*")).await, before);

    // A module filter without a window: --window is refused.
    let plain = common::unique_key("cli-module-no-window");
    let no_window = [
        "--module",
        "--capacity",
        "10000",
        "--fpr",
        "0.01",
        "add",
        "a",
    ];
    assert_eq!(run(redbloom(url, &plain, &no_window)).0, 0);
    assert_fails(
        redbloom(url, &plain, &args(&["add", "b"])),
        &["without --window"],
        None,
    );
    assert!(keys_like(
        &mut conn,
        &format!("{}*", common::companion(&plain, "gen:"))
    )
    .await
    .is_empty());
}

/// Clients whose clocks are ten minutes behind and seven ahead get exactly the answers of one
/// whose clock is right: the generations follow the server's clock.
#[tokio::test]
async fn skewed_client_clocks_agree() {
    let redis = redis_with_bloom();
    let url = redis.url();
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

    let key = common::unique_key("cli-module-window-clocks");
    let items: Vec<String> = (0..50).map(|i| format!("item-{i}")).collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    let (code, json, err) = run(skewed(
        url,
        &key,
        "-10m",
        &[&["--json", "add"], &items[..]].concat(),
    ));
    assert_eq!((code, json["new"].as_u64()), (0, Some(50)), "{err}");
    let mut conn = redis.connection().await;
    let generations = keys_like(&mut conn, &format!("{}*", common::companion(&key, "gen:"))).await;
    assert_eq!(
        generations.len(),
        1,
        "one generation, the server's: {generations:?}"
    );
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
    // And everyone has forgotten them by W·G/(G-1) = 2.67 s after the last add.
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

/// `export FILE` from one server and `import FILE` into another (over a windowed filter that
/// held other items): the copy finds the file's items and no longer the others, each
/// generation expiring when it does on the first server, with no ledger. `import --merge`, a
/// file of another window, and a file of a module filter without a window (and the reverse):
/// one line each, exit 2, nothing written.
#[tokio::test]
async fn export_and_import_between_two_servers() {
    let (a, b) = (redis_with_bloom(), redis_with_bloom());
    let (url_a, url_b) = (a.url().to_owned(), b.url().to_owned());
    let (mut conn_a, mut conn_b) = (a.connection().await, b.connection().await);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("window.rbloom");
    let file = file.to_str().unwrap();
    let key = common::unique_key("cli-module-window-snap");
    assert_eq!(run(redbloom(&url_a, &key, &args(&["add", "a", "b"]))).0, 0);
    assert_eq!(run(redbloom(&url_b, &key, &args(&["add", "old"]))).0, 0);
    let (code, json, err) = run(redbloom(&url_a, &key, &args(&["--json", "export", file])));
    assert_eq!(code, 0, "{err}");
    let size = std::fs::metadata(file).unwrap().len();
    assert_eq!(json["bytes"].as_u64(), Some(size));

    let (code, json, err) = run(redbloom(&url_b, &key, &args(&["--json", "import", file])));
    assert_eq!((code, json["bytes"].as_u64()), (0, Some(size)), "{err}");
    let (code, json, _) = run(redbloom(
        &url_b,
        &key,
        &args(&["--json", "exists", "a", "b", "old"]),
    ));
    assert_eq!((code, json["present"].as_u64()), (1, Some(2)), "{json}");
    let made = keys_like(
        &mut conn_a,
        &format!("{}*", common::companion(&key, "gen:")),
    )
    .await;
    assert_eq!(
        keys_like(
            &mut conn_b,
            &format!("{}*", common::companion(&key, "gen:"))
        )
        .await,
        made
    );
    for generation in &made {
        let (there, here) = (
            common::pttl(&mut conn_a, generation).await,
            common::pttl(&mut conn_b, generation).await,
        );
        assert!(there > 0 && (there - here).abs() < 300, "{there} {here}");
    }
    assert!(keys_like(
        &mut conn_b,
        &format!("{}*", common::companion(&key, "made:"))
    )
    .await
    .is_empty());

    let flat_file = dir.path().join("flat.rbloom");
    let flat_file = flat_file.to_str().unwrap();
    let flat = ["--module", "--capacity", "10000", "--fpr", "0.01"];
    let flat_key = common::unique_key("cli-module-window-snap-flat");
    let with = |extra: &[&'static str]| [&flat[..], extra].concat();
    assert_eq!(run(redbloom(&url_b, &flat_key, &with(&["add", "f"]))).0, 0);
    let export_flat = [with(&["export"]), vec![flat_file]].concat();
    assert_eq!(run(redbloom(&url_b, &flat_key, &export_flat)).0, 0);
    let before = keys_like(&mut conn_b, "*").await;
    let three = [OTHER_WINDOW, &["import", file]].concat();
    let cases: Vec<(&str, Vec<&str>, &[&str])> = vec![
        (&key, args(&["import", "--merge", file]), &["merge"]),
        (&key, three, &["window_ms=2000"]),
        (&key, args(&["import", flat_file]), &["without --window"]),
        (
            &flat_key,
            [with(&["import"]), vec![file]].concat(),
            &["window_ms"],
        ),
    ];
    for (at, argv, words) in cases {
        assert_fails(redbloom(&url_b, at, &argv), words, None);
        assert_eq!(keys_like(&mut conn_b, "*").await, before, "{argv:?}");
    }
}
