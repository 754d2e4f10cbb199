//! Frictions of the command line (issue 53), through the binary against a private server with
//! RedisBloom (tests/common/module.rs), one server for the tests that run at once:
//! - `import FILE` takes the kind and every parameter from the file, for every kind; flags given
//!   must agree, else one line naming the flag, the file's value and the given one, nothing
//!   written (SPEC.md §3);
//! - a module filter another client made opens with `--module` and its key alone, and flags
//!   given are checked against what the server reports (SPEC.md §7);
//! - `info` says when a window's generations expire, each growing level's `k`, rates as people
//!   read them, and what a filter that does not exist yet will take.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use common::module::redis_with_bloom;
use common::TestRedis;
use redis::aio::MultiplexedConnection;
use redis::Value;
use serde_json::Value as Json;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The server with the module that the tests running at once share; the last one to finish
/// stops it.
fn server() -> Arc<TestRedis> {
    static SHARED: Mutex<Weak<TestRedis>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(redis) = shared.upgrade() {
        return redis;
    }
    let redis = Arc::new(redis_with_bloom());
    *shared = Arc::downgrade(&redis);
    redis
}

/// The flags with `extra` after them.
fn with<'a>(flags: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    [flags, extra].concat()
}

/// Runs and expects exit status 0 and one JSON line; returns it.
fn ok_json(cmd: assert_cmd::Command) -> Json {
    let shown = format!("{cmd:?}");
    let (code, json, stderr) = run(cmd);
    assert_eq!(code, 0, "{shown}: {stderr}");
    json
}

/// Runs and expects exit status 0; returns standard output's one line.
fn ok_text(mut cmd: assert_cmd::Command) -> String {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{cmd:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The keys whose names hold `key` (the filter's own and its companions').
async fn keys_of(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    common::keys_like(conn, &format!("*{key}*")).await
}

async fn raw(conn: &mut MultiplexedConnection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(conn).await.unwrap()
}

/// Every kind (the plain filter in both layouts and sharded, window, counting, growing,
/// module): a file made by `export` imports under another key with no flag at all, and the
/// copy answers for every item by its key alone; flags that agree are taken; each flag that
/// disagrees is refused with one line naming it, the file's value and the given one, and
/// writes nothing (the key stays empty).
#[tokio::test]
async fn import_takes_the_kind_and_every_parameter_from_the_file() {
    let redis = server();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let dir = tempfile::tempdir().unwrap();
    let native = ["--layout", "native", "--capacity", "1000", "--fpr", "0.01"];
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(Vec<&'a str>, Vec<&'a str>)>);
    let cases: Vec<Case> = vec![
        (
            "gozero",
            vec!["--bits", "4096"],
            vec![(vec!["--bits", "8192"], vec!["4096 bits", "--bits 8192"])],
        ),
        (
            "native",
            native.to_vec(),
            vec![
                (
                    vec!["--layout", "gozero"],
                    vec!["--layout native, not --layout gozero"],
                ),
                (
                    vec!["--capacity", "200000", "--fpr", "0.01"],
                    vec![
                        "9586 bits and 7 hashes",
                        "--capacity 200000 --fpr 0.01 make",
                    ],
                ),
                (
                    vec!["--counting"],
                    vec!["file holds a plain filter", "--counting"],
                ),
            ],
        ),
        (
            "sharded",
            with(&native, &["--shards", "3"]),
            vec![(vec!["--shards", "2"], vec!["--shards 3, not --shards 2"])],
        ),
        (
            "window",
            vec!["--window", "1h", "--capacity", "1000", "--fpr", "0.01"],
            vec![
                (vec!["--window", "2h"], vec!["--window 1h, not --window 2h"]),
                (
                    vec!["--window", "1h", "--generations", "8"],
                    vec!["--generations 4, not --generations 8"],
                ),
            ],
        ),
        (
            "counting",
            vec!["--counting", "--capacity", "1000", "--fpr", "0.01"],
            vec![
                (
                    vec!["--counting", "--bits", "5000"],
                    vec!["9586 bits", "--bits 5000 make 5000 bits"],
                ),
                (
                    vec!["--growth", "2"],
                    vec!["file holds a counting filter", "--growth"],
                ),
            ],
        ),
        (
            "growing",
            vec!["--growth", "2", "--capacity", "1000", "--fpr", "0.01"],
            vec![
                (vec!["--growth", "3"], vec!["--growth 2, not --growth 3"]),
                (
                    vec!["--growth", "2", "--capacity", "200000", "--fpr", "0.01"],
                    vec!["--capacity 1000, not --capacity 200000"],
                ),
            ],
        ),
        (
            "module",
            vec!["--module", "--capacity", "1000", "--fpr", "0.01"],
            vec![
                (
                    vec!["--module", "--capacity", "1000", "--fpr", "0.02"],
                    vec!["--fpr 0.01, not --fpr 0.02"],
                ),
                (
                    vec!["--module", "--growth", "4"],
                    vec!["--growth default, not --growth 4"],
                ),
            ],
        ),
    ];
    let items = ["a", "b", "c", "d"];
    for (name, flags, refused) in cases {
        let source = common::unique_key(&format!("frictions-{name}"));
        ok_json(redbloom(
            url,
            &source,
            &with(&flags, &[&["add"][..], &items].concat()),
        ));
        let file = dir.path().join(format!("{name}.rbloom"));
        let file = file.to_str().unwrap();
        ok_json(redbloom(url, &source, &["--json", "export", file]));

        // Taken whole from the file: no flag at all.
        let copy = common::unique_key(&format!("frictions-{name}-copy"));
        let json = ok_json(redbloom(url, &copy, &["--json", "import", file]));
        assert_eq!(json["key"], copy.as_str(), "{name}: {json}");
        let json = ok_json(redbloom(
            url,
            &copy,
            &[&["--json", "exists"][..], &items].concat(),
        ));
        assert_eq!(json["present"].as_u64(), Some(4), "{name}: {json}");
        // From standard input too, and with every flag given that agrees.
        let agreed = common::unique_key(&format!("frictions-{name}-agreed"));
        let mut cmd = redbloom(url, &agreed, &with(&flags, &["--json", "import", "-"]));
        cmd.pipe_stdin(file).unwrap();
        ok_json(cmd);
        let json = ok_json(redbloom(url, &agreed, &["--json", "exists", "d"]));
        assert_eq!(json["present"].as_u64(), Some(1), "{name}: {json}");

        // Each flag that disagrees: one line naming it, nothing written.
        for (other, words) in refused {
            let target = common::unique_key(&format!("frictions-{name}-refused"));
            let argv = with(&other, &["import", file]);
            let words: Vec<&str> =
                [&["cannot import", "nothing was imported"][..], &words].concat();
            assert_fails(redbloom(url, &target, &argv), &words, None);
            let written = keys_of(&mut conn, &target).await;
            assert!(written.is_empty(), "{name} {other:?}: wrote {written:?}");
        }
    }
}

/// A module filter made with raw `BF.RESERVE` (no parameters stored) opens with `--module` and
/// its key alone, its capacity and error rate as the server reports them (`BF.INFO`, the dump
/// header); flags given must agree with them: a capacity, rate or expansion that does not is
/// one line naming both values, and nothing is added. Where the server reports no rate (an ACL
/// without `BF.SCANDUMP`), `--fpr` is taken with a note that it cannot be checked.
#[tokio::test]
async fn a_module_filter_made_elsewhere_opens_with_its_key_alone() {
    let redis = server();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("frictions-bf-reserve");
    raw(&mut conn, &["BF.RESERVE", &key, "0.01", "50000"]).await;
    raw(&mut conn, &["BF.ADD", &key, "raw"]).await;

    let info = ok_json(redbloom(url, &key, &["--module", "--json", "info"]));
    assert_eq!(
        (
            info["capacity"].as_u64(),
            info["estimated_fpr"].as_f64(),
            info["expansion"].as_u64(),
            info["exists"].as_bool()
        ),
        (Some(50_000), Some(0.01), Some(2), Some(true)),
        "{info}"
    );
    let json = ok_json(redbloom(
        url,
        &key,
        &["--module", "--json", "exists", "raw"],
    ));
    assert_eq!(json["present"].as_u64(), Some(1), "{json}");
    let json = ok_json(redbloom(url, &key, &["--module", "--json", "add", "cli"]));
    assert_eq!(json["new"].as_u64(), Some(1), "{json}");
    let flags = ["--module", "--capacity", "50000", "--fpr", "0.01"];
    let json = ok_json(redbloom(
        url,
        &key,
        &with(&flags, &["--json", "add", "agreed"]),
    ));
    assert_eq!(json["new"].as_u64(), Some(1), "{json}");

    let refused: [(&[&str], &[&str]); 3] = [
        (
            &["--capacity", "40000", "--fpr", "0.01"],
            &["--capacity 40000", "capacity 50000"],
        ),
        (
            &["--capacity", "50000", "--fpr", "0.2"],
            &["--fpr 0.2", "error rate 0.01"],
        ),
        (&["--growth", "4"], &["--growth 4", "expansion=2"]),
    ];
    for (flags, words) in refused {
        let argv = [&["--module"][..], flags, &["add", "refused"]].concat();
        assert_fails(redbloom(url, &key, &argv), words, None);
        assert_eq!(
            raw(&mut conn, &["BF.EXISTS", &key, "refused"]).await,
            Value::Int(0),
            "{flags:?}"
        );
    }

    // Grown past its first sub-filter (100, then 300 and 900): the first capacity still opens.
    let grown = common::unique_key("frictions-bf-grown");
    raw(
        &mut conn,
        &["BF.RESERVE", &grown, "0.001", "100", "EXPANSION", "3"],
    )
    .await;
    let mut add = redis::cmd("BF.MADD");
    add.arg(&grown);
    for i in 0..600 {
        add.arg(format!("item{i}"));
    }
    let _: Value = add.query_async(&mut conn).await.unwrap();
    let flags = [
        "--module",
        "--capacity",
        "100",
        "--fpr",
        "0.001",
        "--growth",
        "3",
    ];
    let json = ok_json(redbloom(
        url,
        &grown,
        &with(&flags, &["--json", "exists", "item7"]),
    ));
    assert_eq!(json["present"].as_u64(), Some(1), "{json}");
    let argv = [
        "--module",
        "--capacity",
        "1300",
        "--fpr",
        "0.001",
        "add",
        "x",
    ];
    assert_fails(redbloom(url, &grown, &argv), &["capacity 100"], None);
    // Non-scaling: --growth disagrees.
    let fixed = common::unique_key("frictions-bf-fixed");
    raw(
        &mut conn,
        &["BF.RESERVE", &fixed, "0.01", "100", "NONSCALING"],
    )
    .await;
    let json = ok_json(redbloom(url, &fixed, &["--module", "--json", "add", "x"]));
    assert_eq!(json["new"].as_u64(), Some(1), "{json}");
    assert_fails(
        redbloom(url, &fixed, &["--module", "--growth", "2", "add", "y"]),
        &["does not scale", "--growth 2"],
        None,
    );

    // An ACL user without BF.SCANDUMP: the rate is nowhere to be read.
    raw(
        &mut conn,
        &[
            "ACL",
            "SETUSER",
            "nodump",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-bf.scandump",
        ],
    )
    .await;
    let limited = url.replacen("redis://", "redis://nodump:pw@", 1);
    assert_fails(
        redbloom(&limited, &key, &["--module", "exists", "raw"]),
        &["reports no error rate", "--fpr"],
        None,
    );
    let out = redbloom(
        &limited,
        &key,
        &with(
            &flags[..1],
            &["--capacity", "50000", "--fpr", "0.2", "exists", "raw"],
        ),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("--fpr 0.2 cannot be checked"), "{stderr}");
}

/// `info`: a window filter says what expires and when (its generations, as they leave the
/// window), never "no TTL" alone; a growing filter gives each level's `k`; rates print as
/// people read them (never `0.000e0`, a rate far below 1e-16 is not 0); and a key that does
/// not exist yet, given the size flags, previews what the filter will take (bits, k, bytes,
/// per shard or level) and says it does not exist yet, its JSON with `"exists": false` and
/// `"planned_bytes"`.
#[tokio::test]
async fn info_says_what_expires_each_level_and_what_a_new_filter_takes() {
    let redis = server();
    let url = redis.url();

    // A sharded window: its parameters have no TTL, its generations expire.
    let window = common::unique_key("frictions-window");
    let flags = [
        "--window",
        "1h",
        "--capacity",
        "1000",
        "--fpr",
        "0.01",
        "--shards",
        "2",
    ];
    ok_json(redbloom(
        url,
        &window,
        &with(&flags, &["--json", "add", "a", "b", "c"]),
    ));
    let text = ok_text(redbloom(url, &window, &["info"]));
    assert!(
        text.contains("generations expire as they leave the window: the live one in"),
        "{text}"
    );
    assert!(text.contains("found for at least 3600 s"), "{text}");
    assert!(!text.contains("e0"), "no 0.000e0: {text}");
    let info = ok_json(redbloom(url, &window, &["--json", "info"]));
    let fpr = info["estimated_fpr"].as_f64().unwrap();
    assert!(fpr > 0.0 && fpr < 1e-15, "tiny, not rounded to 0: {info}");
    assert_eq!(info["exists"], true, "{info}");
    assert_eq!(
        info["parts"][0]["ttl_seconds"].as_i64().map(|t| t > 3_600),
        Some(true)
    );

    // A growing filter of several levels: each one's k.
    let growing = common::unique_key("frictions-growing");
    let dir = tempfile::tempdir().unwrap();
    let items = dir.path().join("items.txt");
    std::fs::write(
        &items,
        (0..200).map(|i| format!("i{i}\n")).collect::<String>(),
    )
    .unwrap();
    let flags = ["--growth", "2", "--capacity", "10", "--fpr", "0.01"];
    ok_json(redbloom(
        url,
        &growing,
        &with(&flags, &["--json", "load", items.to_str().unwrap()]),
    ));
    let info = ok_json(redbloom(url, &growing, &["--json", "info"]));
    let levels = info["levels"].as_u64().unwrap();
    let sizes = info["level_sizes"].as_array().unwrap();
    assert!(levels >= 4, "{info}");
    assert_eq!(sizes.len() as u64, levels, "{info}");
    for (i, level) in sizes.iter().enumerate() {
        assert_eq!(level["level"].as_u64(), Some(i as u64), "{info}");
        assert!(level["k"].as_u64().unwrap() > 0, "{info}");
        assert!(level["bits"].as_u64().unwrap() > 0, "{info}");
    }
    let capacities: u64 = sizes.iter().map(|l| l["capacity"].as_u64().unwrap()).sum();
    assert_eq!(Some(capacities), info["capacity"].as_u64(), "{info}");
    let text = ok_text(redbloom(url, &growing, &["info"]));
    assert!(
        text.contains("in each level)") || text.contains("by level)"),
        "{text}"
    );
    assert!(text.contains(&format!("in {levels} of ")), "{text}");

    // Rates as people read them.
    let plain = common::unique_key("frictions-rate");
    let flags = ["--bits", "64"];
    ok_json(redbloom(
        url,
        &plain,
        &with(&flags, &["--json", "add", "hello", "world"]),
    ));
    let text = ok_text(redbloom(url, &plain, &with(&flags, &["info"])));
    // (22/64)^14 = 3.22e-7.
    assert!(
        text.contains("current false-positive rate 3.22e-7"),
        "{text}"
    );

    // Keys that do not exist yet, given the size flags: what the filter will take.
    let missing = common::unique_key("frictions-missing");
    let cases: [(&[&str], &[&str], u64); 5] = [
        (
            &["--capacity", "1000", "--fpr", "0.01", "--shards", "3"],
            &["over 3 shards of 3670 bits (459 bytes) each", "k = 14"],
            3 * 459,
        ),
        (&["--bits", "64"], &["64 bits (8 bytes), k = 14"], 8),
        (
            &["--counting", "--bits", "1000", "--shards", "2"],
            &["500 counters (250 bytes) each", "4 bits a counter, k = 7"],
            500,
        ),
        (
            &["--window", "1h", "--capacity", "1000", "--fpr", "0.01"],
            &[
                "each generation up to 11023 bits",
                "up to 4 generations live",
            ],
            4 * 1_378,
        ),
        (
            &["--growth", "2", "--capacity", "1000", "--fpr", "0.01"],
            &["its first level takes 14144 bits (1.8 kB), k = 8, for 1000 items"],
            1_768,
        ),
    ];
    for (flags, words, bytes) in cases {
        let text = ok_text(redbloom(url, &missing, &with(flags, &["info"])));
        assert!(text.contains("does not exist yet"), "{flags:?}: {text}");
        assert!(!text.contains(" 0 bits"), "{flags:?}: {text}");
        for word in words {
            assert!(text.contains(word), "{flags:?}: {word:?} in {text}");
        }
        let info = ok_json(redbloom(url, &missing, &with(flags, &["--json", "info"])));
        assert_eq!(info["exists"], false, "{flags:?}: {info}");
        assert_eq!(
            info["planned_bytes"].as_u64(),
            Some(bytes),
            "{flags:?}: {info}"
        );
        assert!(info["bits"].as_u64().unwrap() > 0, "{flags:?}: {info}");
        assert!(info["k"].as_u64().unwrap() > 0, "{flags:?}: {info}");
        assert_eq!(info["ttl_seconds"], Json::Null, "{flags:?}: {info}");
    }
    let text = ok_text(redbloom(
        url,
        &missing,
        &["--module", "--capacity", "1000", "--fpr", "0.01", "info"],
    ));
    assert!(
        text.contains("does not exist yet") && text.contains("BF.RESERVE will make it"),
        "{text}"
    );
}
