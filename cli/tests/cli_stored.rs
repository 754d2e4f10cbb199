//! Opening a filter from what Redis stores (SPEC.md §3): with `--key` alone, every command of
//! every kind (one key or sharded) reads the stored kind and parameters; flags given must agree
//! (exit 2 naming the flag); a go-zero filter made by Go stores nothing and needs `--bits`.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};

/// The flags that create a filter of each kind (each sharded too), and a field its `info`
/// shows only for that kind.
const KINDS: &[(&str, &[&str], &str)] = &[
    ("plain", &["--bits", "100000"], "bits"),
    (
        "native",
        &["--layout", "native", "--capacity", "1000", "--fpr", "0.01"],
        "bits",
    ),
    (
        "window",
        &[
            "--window",
            "1h",
            "--generations",
            "5",
            "--capacity",
            "1000",
            "--fpr",
            "0.01",
        ],
        "window_seconds",
    ),
    (
        "counting",
        &["--counting", "--capacity", "1000", "--fpr", "0.01"],
        "counters_in_use",
    ),
    (
        "growing",
        &["--growth", "2", "--capacity", "1000", "--fpr", "0.01"],
        "max_levels",
    ),
];

#[tokio::test]
async fn every_kind_opens_with_its_key_alone() {
    let redis = common::redis().await;
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    for (name, flags, field) in KINDS {
        for shards in ["1", "3"] {
            let key = common::unique_key(&format!("stored-{name}-{shards}"));
            let with = |args: &[&str]| {
                let mut all: Vec<&str> = flags.to_vec();
                all.extend(["--shards", shards, "--json"]);
                all.extend(args);
                redbloom(url, &key, &all)
            };
            let alone = |args: &[&str]| {
                let mut all = vec!["--json"];
                all.extend(args);
                redbloom(url, &key, &all)
            };
            let (code, out, err) = run(with(&["add", "a", "b"]));
            assert_eq!((code, out["new"].as_u64()), (0, Some(2)), "{name}: {err}");
            // Every command with the key alone.
            let (code, made, err) = run(with(&["info"]));
            assert_eq!(code, 0, "{name}: {err}");
            let (code, info, err) = run(alone(&["info"]));
            assert_eq!(code, 0, "{name} {shards}: info with --key alone: {err}");
            assert_eq!(info["bits"], made["bits"], "{name}: {info}");
            assert!(!info[field].is_null(), "{name}: {field} in {info}");
            let (code, out, err) = run(alone(&["exists", "a", "b", "c"]));
            assert_eq!(
                (code, out["present"].as_u64()),
                (1, Some(2)),
                "{name}: {err}"
            );
            let (code, out, err) = run(alone(&["add", "c"]));
            assert_eq!((code, out["new"].as_u64()), (0, Some(1)), "{name}: {err}");
            let file = dir.path().join(format!("{name}-{shards}.rbloom"));
            let file = file.to_str().unwrap();
            let (code, out, err) = run(alone(&["export", file]));
            assert_eq!(code, 0, "{name}: export with --key alone: {err}");
            assert!(out["bytes"].as_u64().unwrap() > 0, "{name}: {out}");
            let (code, _, err) = run(alone(&["import", file]));
            assert_eq!(code, 0, "{name}: import with --key alone: {err}");
            let (code, out, err) = run(alone(&["expire", "600"]));
            assert_eq!(
                (code, out["ttl_seconds"].as_u64()),
                (0, Some(600)),
                "{name}: {err}"
            );
            // Flags that agree are taken; flags that differ are refused, naming the flag.
            let (code, _, err) = run(with(&["info"]));
            assert_eq!(code, 0, "{name}: {err}");
            let other_shards = if shards == "1" { "2" } else { "1" };
            assert_fails(
                alone(&["--shards", other_shards, "info"]),
                &["--shards"],
                None,
            );
            let (code, out, err) = run(alone(&["clear"]));
            assert_eq!(
                (code, out["deleted"].as_bool()),
                (0, Some(true)),
                "{name}: {err}"
            );
            // Gone: nothing stored any more, so the size is needed again.
            assert_fails(alone(&["info"]), &["--bits N"], None);
        }
    }
}

#[tokio::test]
async fn kind_flags_that_disagree_with_the_stored_filter_are_refused() {
    let redis = common::redis().await;
    let url = redis.url();
    let key = common::unique_key("stored-window");
    let window = [
        "--window",
        "1h",
        "--capacity",
        "1000",
        "--fpr",
        "0.01",
        "add",
        "x",
    ];
    let (code, _, err) = run(redbloom(url, &key, &window));
    assert_eq!(code, 0, "{err}");
    assert_fails(
        redbloom(url, &key, &["--window", "2h", "info"]),
        &["--window", "leave"],
        None,
    );
    assert_fails(
        redbloom(url, &key, &["--generations", "8", "--window", "1h", "info"]),
        &["--generations"],
        None,
    );
    assert_fails(
        redbloom(url, &key, &["--counting", "info"]),
        &["window", "--counting"],
        None,
    );
    assert_fails(
        redbloom(url, &key, &["--growth", "2", "info"]),
        &["window", "--growth"],
        None,
    );
    let (code, out, err) = run(redbloom(url, &key, &["--window", "1h", "--json", "info"]));
    assert_eq!(
        (code, out["window_seconds"].as_f64()),
        (0, Some(3600.0)),
        "{err}"
    );

    let growing = common::unique_key("stored-growing");
    let flags = [
        "--growth",
        "4",
        "--capacity",
        "100",
        "--fpr",
        "0.01",
        "add",
        "y",
    ];
    let (code, _, err) = run(redbloom(url, &growing, &flags));
    assert_eq!(code, 0, "{err}");
    assert_fails(
        redbloom(url, &growing, &["--growth", "2", "info"]),
        &["--growth 4"],
        None,
    );
    let plain = common::unique_key("stored-plain");
    let (code, _, err) = run(redbloom(url, &plain, &["--bits", "1000", "add", "z"]));
    assert_eq!(code, 0, "{err}");
    assert_fails(
        redbloom(url, &plain, &["--layout", "native", "info"]),
        &["--layout"],
        None,
    );
    assert_fails(
        redbloom(url, &plain, &["--counting", "remove", "z"]),
        &["plain"],
        None,
    );
}

#[tokio::test]
async fn a_go_zero_filter_made_by_go_needs_its_size() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let url = redis.url();
    let key = common::unique_key("stored-go");
    // go-zero's own writes: bits, and no parameters beside them.
    let _: i64 = redis::cmd("SETBIT")
        .arg(&key)
        .arg(7)
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let line = assert_fails(
        redbloom(url, &key, &["info"]),
        &["--bits N", "go-zero"],
        None,
    );
    assert!(line.contains("stores"), "{line}");
    let (code, out, err) = run(redbloom(url, &key, &["--bits", "64", "--json", "info"]));
    assert_eq!((code, out["bits_set"].as_u64()), (0, Some(1)), "{err}");
}

/// A key with no stored parameters that holds nothing, or a value of another type: the line says
/// which, and writes nothing.
#[tokio::test]
async fn a_key_alone_with_nothing_stored_names_what_it_holds() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let url = redis.url();
    let empty = common::unique_key("stored-none");
    assert_fails(
        redbloom(url, &empty, &["add", "a"]),
        &["no filter at", "holds nothing", "--capacity N with --fpr P"],
        None,
    );
    let list = common::unique_key("stored-list");
    let _: i64 = redis::cmd("RPUSH")
        .arg(&list)
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_fails(
        redbloom(url, &list, &["add", "a"]),
        &["holds a list, not a string"],
        None,
    );
    let left = common::keys_like(&mut conn, &format!("*{empty}*")).await;
    assert!(left.is_empty(), "{left:?}");
    let items: Vec<String> = redis::cmd("LRANGE")
        .arg(&list)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(items, ["x"]);
}

/// A key whose braces form no hash tag (`{}x`: Redis hashes it whole) stores its parameters
/// like any other: it opens with its key alone, and another size exits 2.
#[tokio::test]
async fn a_key_without_a_hash_tag_keeps_its_parameters() {
    let redis = common::redis().await;
    let url = redis.url();
    let key = format!("{}:{{}}x", common::unique_key("stored-odd"));
    let sized = |capacity: &str, args: &[&str]| {
        let mut all = vec!["--capacity", capacity, "--fpr", "0.01", "--json"];
        all.extend(args);
        redbloom(url, &key, &all)
    };
    let (code, out, err) = run(sized("1000", &["add", "x"]));
    assert_eq!((code, out["new"].as_u64()), (0, Some(1)), "{err}");
    let (code, out, err) = run(redbloom(url, &key, &["--json", "exists", "x"]));
    assert_eq!((code, out["present"].as_u64()), (0, Some(1)), "{err}");
    assert_fails(
        sized("100000", &["add", "y"]),
        &["created with", "bits="],
        None,
    );
    assert_fails(
        sized("100000", &["exists", "x"]),
        &["created with", "bits="],
        None,
    );
}

/// A filter opened with its full flags (sizes too) that disagree with the stored one: the line
/// names the flags, in the user's words (durations as written, the size flags given), says
/// what the filter was created with, and that leaving the flags out opens it as stored;
/// nothing is written.
#[tokio::test]
async fn sized_flags_that_disagree_name_the_flags() {
    let redis = common::redis().await;
    let url = redis.url();
    let sized = |more: &[&'static str]| {
        let mut all = more.to_vec();
        all.extend(["add", "x"]);
        all
    };
    let window = common::unique_key("sized-window");
    let made = ["--window", "1h30m", "--capacity", "3000", "--fpr", "0.01"];
    let (code, _, err) = run(redbloom(url, &window, &sized(&made)));
    assert_eq!(code, 0, "{err}");
    assert_fails(
        redbloom(
            url,
            &window,
            &sized(&["--window", "2h", "--capacity", "3000", "--fpr", "0.01"]),
        ),
        &[
            "created with --window 1h30m, not --window 2h",
            "leave --window out",
        ],
        None,
    );
    assert_fails(
        redbloom(
            url,
            &window,
            &sized(&["--window", "1h30m", "--capacity", "6000", "--fpr", "0.01"]),
        ),
        &[
            "another size",
            "--capacity 6000 --fpr 0.01 make",
            "leave the size flags out",
        ],
        None,
    );
    let native = common::unique_key("sized-native");
    let made = ["--layout", "native", "--capacity", "1000", "--fpr", "0.01"];
    let (code, _, err) = run(redbloom(url, &native, &sized(&made)));
    assert_eq!(code, 0, "{err}");
    let bigger = ["--layout", "native", "--capacity", "2000", "--fpr", "0.01"];
    assert_fails(
        redbloom(url, &native, &sized(&bigger)),
        &[
            "9586 bits and 7 hashes",
            "--capacity 2000 --fpr 0.01 make 19171 bits",
        ],
        None,
    );
    assert_fails(
        redbloom(
            url,
            &native,
            &sized(&["--counting", "--capacity", "1000", "--fpr", "0.01"]),
        ),
        &["holds a plain filter", "drop --counting"],
        None,
    );
    let growing = common::unique_key("sized-growing");
    let made = ["--growth", "4", "--capacity", "100", "--fpr", "0.01"];
    let (code, _, err) = run(redbloom(url, &growing, &sized(&made)));
    assert_eq!(code, 0, "{err}");
    assert_fails(
        redbloom(
            url,
            &growing,
            &sized(&["--growth", "4", "--capacity", "200", "--fpr", "0.01"]),
        ),
        &["created with --capacity 100, not --capacity 200"],
        None,
    );
    // Nothing was written by the refused commands: each filter holds its one item.
    for key in [&window, &native, &growing] {
        let (code, out, err) = run(redbloom(url, key, &["--json", "info"]));
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            out["estimated_items"].as_f64().map(f64::round),
            Some(1.0),
            "{key}: {out}"
        );
    }
}

/// Numbers and durations as people write them (SPEC.md §3, §4): `--capacity 1e6` is
/// 1,000,000 and `--window 1h30m` 5,400 s, the same filter as the plain numbers make.
#[tokio::test]
async fn numbers_and_durations_as_people_write_them() {
    let redis = common::redis().await;
    let url = redis.url();
    let written = common::unique_key("written-numbers");
    let plain = common::unique_key("plain-numbers");
    let flags = |capacity: &'static str, window: &'static str| {
        vec![
            "--window",
            window,
            "--capacity",
            capacity,
            "--fpr",
            "1e-3",
            "--json",
            "add",
            "x",
        ]
    };
    let (code, _, err) = run(redbloom(url, &written, &flags("1e6", "1h30m")));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(redbloom(url, &plain, &flags("1000000", "5400")));
    assert_eq!(code, 0, "{err}");
    let info = |key: &str| {
        let (code, out, err) = run(redbloom(url, key, &["--json", "info"]));
        assert_eq!(code, 0, "{err}");
        out
    };
    let (a, b) = (info(&written), info(&plain));
    assert_eq!(a["window_seconds"].as_f64(), Some(5400.0), "{a}");
    assert_eq!(
        (&a["bits"], &a["hashes"]),
        (&b["bits"], &b["hashes"]),
        "{a} {b}"
    );
    assert!(
        a["bits"].as_u64().is_some_and(|bits| bits > 1_000_000),
        "{a}"
    );
    assert_fails(
        redbloom(
            url,
            &written,
            &["--capacity", "1e", "--fpr", "0.01", "info"],
        ),
        &["--capacity"],
        None,
    );
}
