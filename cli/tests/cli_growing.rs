//! Growing filters through the CLI (SPEC.md §4 "growing", §3): `--growth F` with every verb
//! (add, exists, load, check, info, clear, expire, bench) against a real server, the levels a
//! load makes (as many as the capacities `N·F^i` need, checked on the server's keys too),
//! refused flags, and a filter opened with other parameters: exit 2 naming the mismatch, and
//! nothing written.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use redis::aio::MultiplexedConnection;
use std::collections::BTreeMap;
use std::path::Path;

/// The first level's items, the growth and the rate of most tests here.
const FIRST: u64 = 1_000;
const GROWTH: u64 = 2;
const GROWING: &[&str] = &["--growth", "2", "--capacity", "1000", "--fpr", "0.01"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = GROWING.to_vec();
    all.extend_from_slice(extra);
    all
}

/// The levels a filter whose first level holds `first` items, each next one `growth` times
/// more, needs for `items` new items: the smallest L with Σ_{i<L} first·growth^i ≥ items.
fn levels_for(items: u64, first: u64, growth: u64) -> u64 {
    let (mut levels, mut room, mut capacity) = (0, 0, first);
    while room < items {
        room += capacity;
        capacity *= growth;
        levels += 1;
    }
    levels
}

/// The capacities of the first `levels` levels, all together.
fn capacity_of(levels: u64, first: u64, growth: u64) -> u64 {
    (0..levels).map(|i| first * growth.pow(i as u32)).sum()
}

/// `lines` lines `{prefix}{i}` in a file of `dir`.
fn lines_file(dir: &Path, prefix: &str, lines: u64) -> String {
    let path = dir.join(format!("{prefix}.txt"));
    let text: String = (0..lines).map(|i| format!("{prefix}{i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Every key on the server whose name contains `key`, with its `DUMP` and `PTTL` (a record
/// slot's: whether it has one): what a refused command must leave exactly as it was.
async fn snapshot(conn: &mut MultiplexedConnection, key: &str) -> BTreeMap<String, (Vec<u8>, i64)> {
    let mut all = BTreeMap::new();
    for name in keys_with(conn, key).await {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&name)
            .query_async(conn)
            .await
            .unwrap();
        let pttl = common::pttl(conn, &name).await;
        // A record slot's TTL runs from its start (never extended): whether it has one.
        let pttl = match common::is_record(&name) {
            true => pttl.signum(),
            false => pttl,
        };
        all.insert(name, (dump, pttl));
    }
    all
}

/// The names of every key on the server that contain `key` (`SCAN`), sorted.
async fn keys_with(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("*{key}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        names.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    names.sort();
    names.dedup();
    names
}

/// The levels' counts of the filter of one key `key` (`{KEY}:redbloom:LEN:KEY:grow:HASH`, a hash of
/// level → new items it took), read from the server, and that hash's name; every other key
/// of the filter checked to be a level of it or its parameters.
async fn counts_of(conn: &mut MultiplexedConnection, key: &str) -> (String, BTreeMap<u64, u64>) {
    let names = keys_with(conn, key).await;
    let prefix = common::companion(key, "grow:");
    let counts: Vec<&String> = names
        .iter()
        .filter(|n| n.strip_prefix(&prefix).is_some_and(|h| !h.contains(':')))
        .collect();
    assert_eq!(counts.len(), 1, "one counts hash: {names:?}");
    let counts = counts[0].clone();
    let kind: String = redis::cmd("TYPE")
        .arg(&counts)
        .query_async(conn)
        .await
        .unwrap();
    assert_eq!(kind, "hash", "{counts}");
    let levels: BTreeMap<u64, u64> = redis::cmd("HGETALL")
        .arg(&counts)
        .query_async(conn)
        .await
        .unwrap();
    // Levels share one string (segment 0) up to 4 MiB: every filter here is smaller.
    let mut expected: Vec<String> = [
        format!("{counts}:0"),
        counts.clone(),
        common::companion(key, "params"),
    ]
    .into();
    expected.sort();
    // Beside them, the records of exact answers across retries (the load's steps).
    let (records, names): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|name| name.starts_with(&common::companion(&counts, "once:")));
    assert!(!records.is_empty(), "the load's steps were recorded");
    assert_eq!(
        names, expected,
        "the filter's keys: counts, the one segment of its levels, params"
    );
    for level in expected.iter().filter(|n| **n != counts) {
        let kind: String = redis::cmd("TYPE")
            .arg(level)
            .query_async(conn)
            .await
            .unwrap();
        assert_eq!(kind, "string", "{level}");
    }
    (counts, levels)
}

/// A load of 20,000 lines into a filter whose first level holds 1,000 makes the levels the
/// capacities need, counts every new line once, finds every line, and a second load writes
/// nothing; add, exists, expire (new levels inherit the TTL), clear, and info's fields.
#[tokio::test]
async fn load_grows_the_levels_the_capacities_need() {
    let redis = common::redis().await;
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-growing");
    let cli = |extra: &[&str]| run(redbloom(url, &key, &args(extra)));

    // A new filter: info says no level yet, of at most `max_levels`.
    let (code, info, err) = cli(&["--json", "info"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (
            info["levels"].as_u64(),
            info["items"].as_u64(),
            info["capacity"].as_u64(),
            info["ttl_seconds"].is_null()
        ),
        (Some(0), Some(0), Some(0), true),
        "{info}"
    );
    let most = info["max_levels"].as_u64().unwrap();
    let library = redbloom::GrowingBloom::builder(&key)
        .expected_items(FIRST)
        .false_positive_rate(0.01)
        .growth(GROWTH as u32)
        .build(conn.clone())
        .unwrap();
    assert_eq!(most, u64::from(library.max_levels()), "{info}");
    assert!((10..=32).contains(&most), "{info}");

    // Single items.
    let (code, json, err) = cli(&["--json", "add", "x", "y", "x"]);
    assert_eq!(
        (code, json["items"].as_u64(), json["new"].as_u64()),
        (0, Some(3), Some(2)),
        "{err}"
    );
    let (code, json, _) = cli(&["--json", "exists", "x", "y", "z"]);
    assert_eq!(
        (code, json["present"].as_u64(), json["absent"].as_u64()),
        (1, Some(2), Some(1)),
        "exit 1 when one is absent"
    );
    let (code, json, _) = cli(&["--json", "exists", "x", "y"]);
    assert_eq!((code, json["present"].as_u64()), (0, Some(2)));
    let out = redbloom(url, &key, &args(&["exists", "x"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let (_, levels) = counts_of(&mut conn, &key).await;
    assert_eq!(levels, BTreeMap::from([(0, 2)]), "one level, two items");

    // 20,000 lines: levels of 1,000, 2,000, 4,000, ... each filled before the next is made.
    let dir = tempfile::tempdir().unwrap();
    let file = lines_file(dir.path(), "line", 20_000);
    let (code, load, err) = cli(&["--json", "load", &file]);
    assert_eq!((code, load["items"].as_u64()), (0, Some(20_000)), "{err}");
    assert!(load["seconds"].as_f64().is_some(), "{load}");
    let new = load["new"].as_u64().unwrap();
    // A line is not new only when it is a false positive of the levels before it: ≤ 1%.
    assert!((19_700..=20_000).contains(&new), "{load}");
    let items = new + 2;
    let levels = levels_for(items, FIRST, GROWTH);
    assert_eq!(
        levels, 5,
        "1,000 + 2,000 + 4,000 + 8,000 < {items} ≤ 31,000"
    );
    let (code, info, err) = cli(&["--json", "info"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(info["key"].as_str(), Some(key.as_str()), "{info}");
    assert_eq!(info["levels"].as_u64(), Some(levels), "{info}");
    assert_eq!(
        info["items"].as_u64(),
        Some(items),
        "the load's new, and x and y"
    );
    assert_eq!(
        info["capacity"].as_u64(),
        Some(capacity_of(levels, FIRST, GROWTH)),
        "{info}"
    );
    assert_eq!(info["max_levels"].as_u64(), Some(most), "{info}");
    assert_eq!(info["ttl_seconds"].as_i64(), Some(-1), "{info}");
    let fpr = info["estimated_fpr"].as_f64().unwrap();
    assert!(fpr > 0.0 && fpr <= 0.01, "at or below --fpr: {info}");
    let (bits, set, bytes) = (
        info["bits"].as_u64().unwrap(),
        info["bits_set"].as_u64().unwrap(),
        info["bytes"].as_u64().unwrap(),
    );
    assert!(
        set > 0 && set < bits && bytes <= bits.div_ceil(8) + levels,
        "{info}"
    );

    // On the server: one level key per level, each level but the newest filled to its
    // capacity, the counts adding up to the items.
    let (counts, taken) = counts_of(&mut conn, &key).await;
    assert_eq!(taken.len() as u64, levels, "{counts}: {taken:?}");
    for (&level, &n) in &taken {
        let capacity = FIRST * GROWTH.pow(level as u32);
        match level + 1 == levels {
            true => assert!((1..=capacity).contains(&n), "{counts}: {taken:?}"),
            false => assert_eq!(n, capacity, "{counts}: level {level} full: {taken:?}"),
        }
    }
    assert_eq!(taken.values().sum::<u64>(), items, "{taken:?}");

    // Every line present; other lines found at about the rate asked for at most.
    let (code, check, err) = cli(&["--json", "check", &file]);
    assert_eq!(
        (code, check["present"].as_u64(), check["absent"].as_u64()),
        (0, Some(20_000), Some(0)),
        "{err}"
    );
    let others = lines_file(dir.path(), "other", 20_000);
    let (code, check, err) = cli(&["--json", "check", &others]);
    assert_eq!((code, check["items"].as_u64()), (0, Some(20_000)), "{err}");
    let false_positives = check["present"].as_u64().unwrap();
    assert!(false_positives <= 300, "{check}");

    // Loaded again: present in some level, so nothing written, no capacity used (the steps'
    // records of their answers aside).
    let filter = |mut keys: BTreeMap<String, (Vec<u8>, i64)>| {
        keys.retain(|name, _| !common::is_record(name));
        keys
    };
    let before = filter(snapshot(&mut conn, &key).await);
    let (code, again, err) = cli(&["--json", "load", &file]);
    assert_eq!(
        (code, again["items"].as_u64(), again["new"].as_u64()),
        (0, Some(20_000), Some(0)),
        "{err}"
    );
    assert_eq!(
        filter(snapshot(&mut conn, &key).await),
        before,
        "a second load wrote"
    );

    // Expire: every key; levels made after it keep it.
    let (code, json, err) = cli(&["--json", "expire", "60"]);
    assert_eq!((code, json["ttl_seconds"].as_i64()), (0, Some(60)), "{err}");
    let more = lines_file(dir.path(), "more", 20_000);
    let (code, load, err) = cli(&["--json", "load", &more]);
    assert_eq!(code, 0, "{err}");
    let items = items + load["new"].as_u64().unwrap();
    let grown = levels_for(items, FIRST, GROWTH);
    assert_eq!(grown, 6, "{items} items");
    let (_, taken) = counts_of(&mut conn, &key).await;
    assert_eq!(taken.len() as u64, grown, "{taken:?}");
    for name in keys_with(&mut conn, &key).await {
        let pttl = common::pttl(&mut conn, &name).await;
        assert!((1..=60_000).contains(&pttl), "{name}: PTTL {pttl}");
    }
    let (_, info, _) = cli(&["--json", "info"]);
    assert_eq!(
        (info["levels"].as_u64(), info["items"].as_u64()),
        (Some(grown), Some(items)),
        "{info}"
    );
    let ttl = info["ttl_seconds"].as_i64().unwrap();
    assert!((50..=60).contains(&ttl), "{info}");

    // The text form says the levels too.
    let out = redbloom(url, &key, &args(&["info"])).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{grown} of {most} levels"))
            && text.contains(&format!("{items} of")),
        "{text}"
    );

    // Clear: nothing left; a second clear finds nothing.
    let (code, json, err) = cli(&["--json", "clear"]);
    assert_eq!((code, json["deleted"].as_bool()), (0, Some(true)), "{err}");
    let left = keys_with(&mut conn, &key).await;
    assert!(left.is_empty(), "left after clear: {left:?}");
    let (code, json, _) = cli(&["--json", "clear"]);
    assert_eq!((code, json["deleted"].as_bool()), (0, Some(false)));
    let (_, info, _) = cli(&["--json", "info"]);
    assert_eq!(
        (info["levels"].as_u64(), info["items"].as_u64()),
        (Some(0), Some(0)),
        "{info}"
    );
    assert!(info["ttl_seconds"].is_null(), "{info}");
    let (code, json, _) = cli(&["--json", "exists", "x"]);
    assert_eq!((code, json["absent"].as_u64()), (1, Some(1)), "cleared");
}

/// A filter of 4 shards: each shard grows by itself (its first level a quarter of
/// `--capacity`), its levels as its own items need; every line found.
#[tokio::test]
async fn a_sharded_filter_grows_each_shard() {
    let redis = common::redis().await;
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-growing-sharded");
    let sharded = args(&["--shards", "4", "--json"]);
    let cli = |extra: &[&str]| run(redbloom(url, &key, &[&sharded[..], extra].concat()));
    let dir = tempfile::tempdir().unwrap();
    let file = lines_file(dir.path(), "line", 20_000);
    let (code, load, err) = cli(&["load", &file]);
    assert_eq!((code, load["items"].as_u64()), (0, Some(20_000)), "{err}");
    let new = load["new"].as_u64().unwrap();
    assert!((19_700..=20_000).contains(&new), "{load}");
    let (code, check, err) = cli(&["check", &file]);
    assert_eq!(
        (code, check["present"].as_u64()),
        (0, Some(20_000)),
        "{err}"
    );

    // Each shard's counts (in its own slot group) as its own items need.
    let names = keys_with(&mut conn, &key).await;
    let mut most = 0;
    let mut items = 0;
    for shard in 0..4 {
        let tail = format!(":{key}:shard:{shard}/4:grow:");
        let counts: Vec<&String> = names
            .iter()
            .filter(|n| {
                n.starts_with("{rb") && n.split_once(&tail).is_some_and(|(_, h)| !h.contains(':'))
            })
            .collect();
        assert_eq!(counts.len(), 1, "shard {shard}: {names:?}");
        let taken: BTreeMap<u64, u64> = redis::cmd("HGETALL")
            .arg(counts[0])
            .query_async(&mut conn)
            .await
            .unwrap();
        let shard_items: u64 = taken.values().sum();
        let levels = levels_for(shard_items, FIRST / 4, GROWTH);
        assert_eq!(taken.len() as u64, levels, "shard {shard}: {taken:?}");
        assert!(
            (3_000..=7_000).contains(&shard_items),
            "shard {shard}: {taken:?}"
        );
        // The levels' one string (levels share one up to 4 MiB).
        let segment = format!("{}:0", counts[0]);
        assert!(names.contains(&segment), "{segment}: {names:?}");
        most = most.max(levels);
        items += shard_items;
    }
    // Four shards' counts and levels, and the parameters at the key's own slot: nothing else.
    assert!(
        names.contains(&common::companion(&key, "params")),
        "{names:?}"
    );
    assert!(!names.contains(&key), "no bare key: {names:?}");
    let shard_keys = names.iter().filter(|n| n.starts_with("{rb")).count();
    assert_eq!(names.len(), shard_keys + 1, "{names:?}");
    assert_eq!(items, new, "every new line counted once, in one shard");
    let (code, info, err) = cli(&["info"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (info["levels"].as_u64(), info["items"].as_u64()),
        (Some(most), Some(new)),
        "{info}"
    );
    assert!(info["estimated_fpr"].as_f64().unwrap() <= 0.01, "{info}");

    let (code, json, err) = cli(&["expire", "120"]);
    assert_eq!(
        (code, json["ttl_seconds"].as_i64()),
        (0, Some(120)),
        "{err}"
    );
    for name in keys_with(&mut conn, &key).await {
        let pttl = common::pttl(&mut conn, &name).await;
        assert!((1..=120_000).contains(&pttl), "{name}: PTTL {pttl}");
    }
    let (code, json, err) = cli(&["clear"]);
    assert_eq!((code, json["deleted"].as_bool()), (0, Some(true)), "{err}");
    let left = keys_with(&mut conn, &key).await;
    assert!(left.is_empty(), "left after clear: {left:?}");
}

/// `bench` on a growing filter: its adds grow the filter, each item counted once, and its
/// checks find them.
#[tokio::test]
async fn bench_grows_the_filter() {
    let redis = common::redis().await;
    let url = redis.url();
    let key = common::unique_key("cli-growing-bench");
    let cli = |extra: &[&str]| run(redbloom(url, &key, &args(extra)));
    let (code, bench, err) = cli(&[
        "--json",
        "bench",
        "--op",
        "add",
        "--items",
        "5000",
        "--concurrency",
        "4",
        "--batch",
        "10",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (bench["op"].as_str(), bench["items"].as_u64()),
        (Some("add"), Some(5_000)),
        "{bench}"
    );
    let (_, info, _) = cli(&["--json", "info"]);
    let items = info["items"].as_u64().unwrap();
    assert!((4_950..=5_000).contains(&items), "{info}");
    assert_eq!(
        info["levels"].as_u64(),
        Some(levels_for(items, FIRST, GROWTH)),
        "{info}"
    );
    let (code, bench, err) = cli(&[
        "--json",
        "bench",
        "--op",
        "exists",
        "--items",
        "5000",
        "--concurrency",
        "4",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(bench["items"].as_u64(), Some(5_000), "{bench}");
    let (code, json, err) = cli(&["--json", "exists", "bench:0", "bench:2500", "bench:4999"]);
    assert_eq!((code, json["present"].as_u64()), (0, Some(3)), "{err}");
    let (_, after, _) = cli(&["--json", "info"]);
    assert_eq!(after["items"].as_u64(), Some(items), "checks add nothing");
    let (code, _, err) = cli(&["clear"]);
    assert_eq!(code, 0, "{err}");
}

/// A load whose batches will go item by item (the newest level past what a batch merges
/// whole) says so on standard error, naming enough shards, and loads all the same; a filter
/// whose levels merge, or one sharded enough, loads without a word.
#[tokio::test]
async fn a_load_into_a_level_too_large_to_merge_says_so() {
    let redis = common::redis().await;
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let file = lines_file(dir.path(), "big", 100);
    for (capacity, shards, noted) in [
        ("10000000", "1", true),
        ("10000000", "2", false),
        ("1000000", "1", false),
    ] {
        let key = common::unique_key("cli-growing-note");
        let flags = [
            "--growth",
            "2",
            "--capacity",
            capacity,
            "--fpr",
            "0.001",
            "--shards",
            shards,
        ];
        let cli = |extra: &[&str]| {
            let mut all = flags.to_vec();
            all.extend_from_slice(extra);
            run(redbloom(url, &key, &all))
        };
        let (code, loaded, err) = cli(&["--json", "load", &file]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(loaded["new"].as_u64(), Some(100), "{loaded}");
        let note = "note: level 0 of this filter takes 26.5 MB a shard, past the 16 MiB a batch \
                    merges whole: this load adds item by item, about ten times slower; a filter \
                    made with --shards 2 keeps its levels small enough";
        match noted {
            true => assert_eq!(err.trim(), note, "{capacity} items, {shards} shard(s)"),
            false => assert!(err.trim().is_empty(), "{capacity}, {shards}: {err}"),
        }
        let (code, _, err) = cli(&["clear"]);
        assert_eq!(code, 0, "{err}");
    }
}

/// Refused flags: exit 2, one line naming the cause, nothing written.
#[tokio::test]
async fn bad_flags_exit_2_naming_the_cause() {
    let redis = common::redis().await;
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-growing-flags");
    let dir = tempfile::tempdir().unwrap();
    let file = lines_file(dir.path(), "line", 10);
    let size = ["--capacity", "1000", "--fpr", "0.01"];
    let cases: &[(&[&str], &[&str])] = &[
        (&["--growth", "0"], &["--growth", "0"]),
        (&["--growth", "-1"], &["--growth", "-1"]),
        (&["--growth", "1.5"], &["--growth", "1.5"]),
        (&["--growth", "two"], &["--growth", "two"]),
        (
            &["--growth", "2", "--window", "1h"],
            &["--growth", "--window"],
        ),
        (
            &["--growth", "2", "--counting"],
            &["--growth", "--counting"],
        ),
        (
            &["--growth", "2", "--layout", "gozero"],
            &["--growth", "gozero"],
        ),
    ];
    for verb in [&["add", "a"][..], &["load", &file], &["info"], &["clear"]] {
        for (flags, words) in cases {
            let cmd = redbloom(url, &key, &[&size[..], flags, verb].concat());
            assert_fails(cmd, words, None);
        }
        // Sized in bits, or not fully.
        let bits = [&["--growth", "2", "--bits", "10000"][..], verb].concat();
        assert_fails(redbloom(url, &key, &bits), &["--growth", "--bits"], None);
        let no_fpr = [&["--growth", "2", "--capacity", "1000"][..], verb].concat();
        assert_fails(redbloom(url, &key, &no_fpr), &["--fpr"], None);
        let no_capacity = [&["--growth", "2", "--fpr", "0.01"][..], verb].concat();
        assert_fails(redbloom(url, &key, &no_capacity), &["--capacity"], None);
    }
    // Counting verbs.
    assert_fails(
        redbloom(url, &key, &args(&["remove", "a"])),
        &["--counting"],
        None,
    );
    let left = keys_with(&mut conn, &key).await;
    assert!(left.is_empty(), "refused commands wrote {left:?}");
}

/// Opening a growing filter with another growth, capacity, rate or shard count, or as another
/// kind, and a plain filter as a growing one: exit 2 naming both parameter sets, nothing
/// written (every key's bytes and TTL as they were).
#[tokio::test]
async fn other_parameters_are_a_mismatch_and_write_nothing() {
    let redis = common::redis().await;
    let url = redis.url();
    let mut conn = redis.connection().await;
    let dir = tempfile::tempdir().unwrap();
    let file = lines_file(dir.path(), "line", 3_000);
    let verbs: [&[&str]; 9] = [
        &["add", "new-item"],
        &["exists", "line7"],
        &["load", &file],
        &["check", &file],
        &["clear"],
        &["expire", "30"],
        &[
            "bench",
            "--op",
            "add",
            "--items",
            "10",
            "--concurrency",
            "1",
        ],
        &[
            "bench",
            "--op",
            "exists",
            "--items",
            "10",
            "--concurrency",
            "1",
        ],
        &["add", "line7"],
    ];

    for shards in ["1", "4"] {
        let key = common::unique_key(&format!("cli-growing-mismatch-{shards}"));
        let ours = args(&["--shards", shards]);
        let mut load = redbloom(url, &key, &ours);
        load.args(["--json", "load", &file]);
        let (code, json, err) = run(load);
        assert_eq!((code, json["items"].as_u64()), (0, Some(3_000)), "{err}");
        let before = snapshot(&mut conn, &key).await;
        assert!(before.len() >= 3, "{before:?}");

        let others: [(Vec<&str>, &[&str]); 6] = [
            (
                vec!["--growth", "3", "--capacity", "1000", "--fpr", "0.01"],
                &[
                    "created with --growth 2, not --growth 3",
                    "leave --growth out",
                ],
            ),
            (
                vec!["--growth", "2", "--capacity", "2000", "--fpr", "0.01"],
                &["created with --capacity 1000, not --capacity 2000"],
            ),
            (
                vec!["--growth", "2", "--capacity", "1000", "--fpr", "0.02"],
                &["created with --fpr 0.01, not --fpr 0.02"],
            ),
            (
                vec!["--growth", "1", "--capacity", "1000", "--fpr", "0.01"],
                &["created with --growth 2, not --growth 1"],
            ),
            (
                vec!["--counting", "--capacity", "1000", "--fpr", "0.01"],
                &["holds a growing filter", "drop --counting"],
            ),
            (
                vec!["--window", "1h", "--capacity", "1000", "--fpr", "0.01"],
                &["holds a growing filter", "drop --window"],
            ),
        ];
        for (flags, words) in &others {
            for verb in verbs {
                let all = [&flags[..], &["--shards", shards], verb].concat();
                let stderr = assert_fails(redbloom(url, &key, &all), words, None);
                assert!(!stderr.contains("internal error"), "{stderr}");
            }
        }
        // Another shard count.
        let other = match shards {
            "1" => "4",
            _ => "1",
        };
        for verb in verbs {
            let all = [GROWING, &["--shards", other], verb].concat();
            let words = format!("created with --shards {shards}, not --shards {other}");
            assert_fails(redbloom(url, &key, &all), &[words.as_str()], None);
        }
        // A plain filter of the same size (the native layout and the default go-zero one).
        for layout in ["native", "gozero"] {
            let plain = [
                &["--capacity", "1000", "--fpr", "0.01", "--layout", layout][..],
                &["--shards", shards, "add", "x"],
            ]
            .concat();
            assert_fails(
                redbloom(url, &key, &plain),
                &["holds a growing filter"],
                None,
            );
        }
        assert_eq!(
            snapshot(&mut conn, &key).await,
            before,
            "{shards} shard(s): a refused command wrote"
        );
        let (code, json, err) = run(redbloom(
            url,
            &key,
            &[&ours[..], &["--json", "check", &file]].concat(),
        ));
        assert_eq!((code, json["present"].as_u64()), (0, Some(3_000)), "{err}");
        let (code, _, err) = run(redbloom(url, &key, &[&ours[..], &["clear"]].concat()));
        assert_eq!(code, 0, "{err}");
    }

    // A plain filter's key (either layout) opened as a growing filter: refused, unchanged.
    for layout in ["native", "gozero"] {
        let key = common::unique_key(&format!("cli-growing-over-plain-{layout}"));
        let plain = ["--capacity", "1000", "--fpr", "0.01", "--layout", layout];
        let (code, _, err) = run(redbloom(
            url,
            &key,
            &[&plain[..], &["add", "a", "b"]].concat(),
        ));
        assert_eq!(code, 0, "{err}");
        let before = snapshot(&mut conn, &key).await;
        for verb in verbs {
            let words = ["holds a plain filter", "drop --growth"];
            assert_fails(redbloom(url, &key, &args(verb)), &words, None);
        }
        assert_eq!(snapshot(&mut conn, &key).await, before, "{layout}: wrote");
        let (code, json, err) = run(redbloom(
            url,
            &key,
            &[&plain[..], &["--json", "exists", "a", "b"]].concat(),
        ));
        assert_eq!((code, json["present"].as_u64()), (0, Some(2)), "{err}");
    }
}

/// `info` opened with other parameters is a mismatch too (SPEC.md §4: a client with other
/// parameters gets a mismatch error), as it is for a sharded growing filter and for every
/// other kind, and not a description of an empty filter.
#[tokio::test]
async fn info_with_other_parameters_is_a_mismatch() {
    let redis = common::redis().await;
    let url = redis.url();
    for shards in ["4", "1"] {
        let key = common::unique_key(&format!("cli-growing-info-mismatch-{shards}"));
        let ours = args(&["--shards", shards]);
        let (code, _, err) = run(redbloom(
            url,
            &key,
            &[&ours[..], &["add", "a", "b"]].concat(),
        ));
        assert_eq!(code, 0, "{err}");
        let others: [(&[&str], &str); 3] = [
            (
                &["--growth", "3", "--capacity", "1000", "--fpr", "0.01"],
                "created with --growth 2",
            ),
            (
                &["--growth", "2", "--capacity", "2000", "--fpr", "0.01"],
                "created with --capacity 1000",
            ),
            (
                &["--layout", "native", "--capacity", "1000", "--fpr", "0.01"],
                "holds a growing filter",
            ),
        ];
        for (flags, words) in others {
            let all = [flags, &["--shards", shards, "--json", "info"]].concat();
            assert_fails(redbloom(url, &key, &all), &[words], None);
        }
        let (code, _, err) = run(redbloom(url, &key, &[&ours[..], &["clear"]].concat()));
        assert_eq!(code, 0, "{err}");
    }
}
