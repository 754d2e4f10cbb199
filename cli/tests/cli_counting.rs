//! Counting filters through the CLI (SPEC.md §4 "counting"): `remove` and `unload` and their
//! JSON, `info`'s counters, `add --if-absent`, refusals, and processes adding and removing at
//! once.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use std::process::{Command, Stdio};

const COUNTING: &[&str] = &["--counting", "--capacity", "100000", "--fpr", "0.001"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = COUNTING.to_vec();
    all.extend_from_slice(extra);
    all
}

#[tokio::test]
async fn remove_unload_and_info() {
    let redis = common::redis().await;
    let url = redis.url();
    let key = common::unique_key("cli-counting");
    let (code, json, _) = run(redbloom(
        url,
        &key,
        &args(&["--json", "add", "a", "b", "a"]),
    ));
    assert_eq!((code, json["new"].as_u64()), (0, Some(2)));
    let (code, json, _) = run(redbloom(
        url,
        &key,
        &args(&["--json", "remove", "a", "a", "a", "never"]),
    ));
    assert_eq!(
        (code, json["items"].as_u64(), json["removed"].as_u64()),
        (0, Some(4), Some(2)),
        "a twice (added twice), then absent; never absent"
    );
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "exists", "a", "b"])));
    assert_eq!((code, json["present"].as_u64()), (1, Some(1)));
    let (code, info, _) = run(redbloom(url, &key, &args(&["--json", "info"])));
    assert_eq!(code, 0);
    let in_use = info["counters_in_use"].as_u64().unwrap();
    assert!((1..=10).contains(&in_use), "{info}");
    assert_eq!(info["counters_saturated"].as_u64(), Some(0));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    let lines: String = (0..5_000).map(|i| format!("line{i}\n")).collect();
    std::fs::write(&file, lines).unwrap();
    let path = file.to_str().unwrap();
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "load", path])));
    assert_eq!((code, json["items"].as_u64()), (0, Some(5_000)));
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "unload", path])));
    assert_eq!(
        (code, json["items"].as_u64(), json["removed"].as_u64()),
        (0, Some(5_000), Some(5_000))
    );
    assert!(json["seconds"].as_f64().is_some());
    let (_, json, _) = run(redbloom(url, &key, &args(&["--json", "check", path])));
    assert!(json["present"].as_u64().unwrap() < 10, "unloaded: {json}");
    let (_, info, _) = run(redbloom(url, &key, &args(&["--json", "info"])));
    assert_eq!(
        info["counters_in_use"].as_u64(),
        Some(in_use),
        "back to b alone"
    );

    // Refusals: one line, exit 2, nothing written.
    let mut conn = redis.connection().await;
    let before = common::key_hex(&mut conn, &key).await;
    assert_fails(
        redbloom(
            url,
            &key,
            &["--capacity", "100000", "--fpr", "0.001", "remove", "b"],
        ),
        &["--counting"],
        None,
    );
    assert_fails(
        redbloom(
            url,
            &key,
            &["--capacity", "100000", "--fpr", "0.001", "unload", path],
        ),
        &["--counting"],
        None,
    );
    let other = [
        "--counting",
        "--capacity",
        "5000",
        "--fpr",
        "0.001",
        "remove",
        "b",
    ];
    assert_fails(redbloom(url, &key, &other), &["created with"], None);
    let plain = [
        "--layout",
        "native",
        "--capacity",
        "100000",
        "--fpr",
        "0.001",
        "add",
        "x",
    ];
    assert_fails(
        redbloom(url, &key, &plain),
        &["holds a counting filter"],
        None,
    );
    assert_fails(
        redbloom(url, &key, &args(&["--window", "1h", "add", "x"])),
        &["--window"],
        None,
    );
    assert_fails(
        redbloom(url, &key, &args(&["--layout", "gozero", "add", "x"])),
        &["native"],
        None,
    );
    assert_eq!(common::key_hex(&mut conn, &key).await, before);
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "clear"])));
    assert_eq!((code, json["deleted"].as_bool()), (0, Some(true)));
}

/// Four processes at once, each loading its own lines and the shared ones, then unloading its
/// own: every shared line is still found (each was added four times and never removed), and
/// every own line is gone but for false positives.
/// `add --if-absent` (docs/guide.md's blacklist advice): each item is added only if it tests
/// absent, so an item blocked twice is unblocked by one `remove`; "new" counts the items added.
/// Other kinds refuse it with one line naming the flag and the kind, and write nothing.
#[tokio::test]
async fn add_if_absent_counts_an_item_once() {
    let redis = common::redis().await;
    let url = redis.url();
    let key = common::unique_key("cli-counting-if-absent");
    let (code, json, err) = run(redbloom(
        url,
        &key,
        &args(&["--json", "add", "--if-absent", "a", "b", "a"]),
    ));
    assert_eq!(
        (code, json["items"].as_u64(), json["new"].as_u64()),
        (0, Some(3), Some(2)),
        "a and b added, a again not: {err}"
    );
    // Opened by its key alone too; the text says the counts as add's does.
    let out = redbloom(url, &key, &["add", "--if-absent", "a", "c"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.trim(), "2 items, 1 new", "{out:?}");
    // a was counted once: one remove lifts it (a plain add twice would need two).
    let (code, json, _) = run(redbloom(url, &key, &["--json", "remove", "a"]));
    assert_eq!((code, json["removed"].as_u64()), (0, Some(1)));
    let (code, json, _) = run(redbloom(url, &key, &["--json", "exists", "a", "b", "c"]));
    assert_eq!(
        (code, json["present"].as_u64(), json["absent"].as_u64()),
        (1, Some(2), Some(1)),
        "{json}"
    );

    let mut conn = redis.connection().await;
    for flags in [
        &["--bits", "1024"][..],
        &["--growth", "2", "--capacity", "1000", "--fpr", "0.01"],
        &["--window", "1h", "--capacity", "1000", "--fpr", "0.01"],
    ] {
        let other = common::unique_key("cli-if-absent-other");
        let argv = [flags, &["add", "--if-absent", "x"]].concat();
        let line = assert_fails(
            redbloom(url, &other, &argv),
            &["--if-absent", "--counting"],
            None,
        );
        assert!(!line.contains("invalid value"), "{line}");
        let left = common::keys_like(&mut conn, &format!("*{other}*")).await;
        assert!(left.is_empty(), "{flags:?}: nothing written: {left:?}");
    }
}

#[tokio::test]
async fn processes_adding_and_removing_at_once_lose_nothing() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let key = common::unique_key("cli-counting-processes");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, lines: Vec<String>| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    };
    let shared = write(
        "shared.txt",
        (0..3_000).map(|i| format!("shared{i}")).collect(),
    );
    let own: Vec<_> = (0..4)
        .map(|p| {
            write(
                &format!("own{p}.txt"),
                (0..3_000).map(|i| format!("own{p}-{i}")).collect(),
            )
        })
        .collect();
    let spawn = |command: &str, file: &std::path::Path| {
        Command::new(assert_cmd::cargo::cargo_bin!("redbloom"))
            .env_remove("REDIS_URL")
            .args(["--url", &url, "--key", &key])
            .args(args(&["--json", command, "--batch", "500"]))
            .arg(file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let wait = |children: Vec<std::process::Child>| {
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    // Loads of own and shared lines, all at once.
    let mut children: Vec<_> = own.iter().map(|f| spawn("load", f)).collect();
    children.extend((0..4).map(|_| spawn("load", &shared)));
    wait(children);
    // Unloads of own lines at once, while shared lines are checked.
    let children: Vec<_> = own.iter().map(|f| spawn("unload", f)).collect();
    wait(children);
    let mut check = redbloom(&url, &key, &args(&["--json", "check"]));
    check.arg(&shared);
    let (code, json, err) = run(check);
    assert_eq!((code, json["absent"].as_u64()), (0, Some(0)), "{err}");
    for file in &own {
        let mut check = redbloom(&url, &key, &args(&["--json", "check"]));
        check.arg(file);
        let (_, json, _) = run(check);
        assert!(
            json["present"].as_u64().unwrap() < 30,
            "own lines unloaded: {json}"
        );
    }
    run(redbloom(&url, &key, &args(&["clear"])));
}
