//! Module filters through the CLI (SPEC.md §7, `--module`): the verbs and their JSON against a
//! private server with RedisBloom (tests/common/module.rs), interop both ways with raw `BF.*`
//! commands, mismatches, shards, and each refusal (one line, exit 2, nothing written).

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use common::module::{redis_with_bloom, redis_without_bloom};
use redis::aio::MultiplexedConnection;
use redis::Value;

const MODULE: &[&str] = &["--module", "--capacity", "10000", "--fpr", "0.001"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = MODULE.to_vec();
    all.extend_from_slice(extra);
    all
}

async fn raw(conn: &mut MultiplexedConnection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(conn).await.unwrap()
}

/// `BF.INFO key`'s integer `field` (-1 for nil).
async fn bf_info(conn: &mut MultiplexedConnection, key: &str, field: &str) -> i64 {
    let reply: Vec<Value> = redis::cmd("BF.INFO")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    reply
        .chunks(2)
        .find(|pair| redis::from_redis_value::<String>(pair[0].clone()).unwrap() == field)
        .map(|pair| match pair[1] {
            Value::Int(n) => n,
            _ => -1,
        })
        .unwrap()
}

#[tokio::test]
async fn verbs_and_their_json() {
    let redis = redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-module");
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
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "add", "a", "c"])));
    assert_eq!(
        (code, json["new"].as_u64()),
        (0, Some(1)),
        "new exactly once"
    );
    let (code, json, _) = run(redbloom(
        url,
        &key,
        &args(&["--json", "exists", "a", "nope"]),
    ));
    assert_eq!(
        (code, json["present"].as_u64(), json["absent"].as_u64()),
        (1, Some(1), Some(1))
    );
    assert_eq!(
        raw(&mut conn, &["TYPE", &key]).await,
        Value::SimpleString("MBbloom--".into())
    );
    assert_eq!(bf_info(&mut conn, &key, "Capacity").await, 10_000);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    let lines: String = (0..5_000).map(|i| format!("line{i}\n")).collect();
    std::fs::write(&file, lines).unwrap();
    let path = file.to_str().unwrap();
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "load", path])));
    assert_eq!(
        (code, json["items"].as_u64(), json["new"].as_u64()),
        (0, Some(5_000), Some(5_000))
    );
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "check", path])));
    assert_eq!((code, json["present"].as_u64()), (0, Some(5_000)));
    // Opened with its key alone: the parameters stored beside it.
    let (code, info, err) = run(redbloom(url, &key, &["--json", "info"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(info["capacity"].as_u64(), Some(10_000), "{info}");
    assert_eq!(info["items"].as_u64(), Some(5_003), "{info}");
    assert_eq!(info["expansion"].as_u64(), Some(2), "{info}");
    assert_eq!(info["filters"].as_u64(), Some(1), "{info}");
    assert_eq!(info["ttl_seconds"].as_i64(), Some(-1), "{info}");
    assert!(
        info.get("bits").is_none(),
        "the module reports no bits: {info}"
    );
    let (code, text) = {
        let out = redbloom(url, &key, &args(&["info"])).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(code, Some(0));
    assert!(
        text.contains("module filter, 5003 items of capacity 10000"),
        "{text}"
    );

    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "expire", "100"])));
    assert_eq!((code, json["ttl_seconds"].as_u64()), (0, Some(100)));
    let ttl: i64 = redis::cmd("TTL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((90..=100).contains(&ttl), "{ttl}");
    let (code, json, _) = run(redbloom(url, &key, &args(&["--json", "clear"])));
    assert_eq!((code, json["deleted"].as_bool()), (0, Some(true)));
    assert!(common::keys_like(&mut conn, &format!("*{key}*"))
        .await
        .is_empty());

    let (code, json, err) = run(redbloom(
        url,
        &key,
        &args(&[
            "--json",
            "bench",
            "--op",
            "add",
            "--items",
            "2000",
            "--concurrency",
            "16",
        ]),
    ));
    assert_eq!((code, json["items"].as_u64()), (0, Some(2_000)), "{err}");
    assert_eq!(
        bf_info(&mut conn, &key, "Number of items inserted").await,
        2_000
    );
}

#[tokio::test]
async fn interop_with_raw_commands_and_mismatches() {
    let redis = redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;
    // A filter redis-cli made: read and written with flags that agree.
    let key = common::unique_key("cli-module-raw");
    raw(
        &mut conn,
        &["BF.RESERVE", &key, "0.01", "1000", "EXPANSION", "4"],
    )
    .await;
    raw(&mut conn, &["BF.ADD", &key, "raw"]).await;
    // It stores no parameters: with its key alone, one line pointing to --module and its size.
    assert_fails(
        redbloom(url, &key, &["exists", "raw"]),
        &[
            "module filter",
            "--module",
            "--capacity N --fpr P",
            "BF.INFO",
        ],
        None,
    );
    let flags = [
        "--module",
        "--capacity",
        "1000",
        "--fpr",
        "0.01",
        "--growth",
        "4",
    ];
    let with = |extra: &[&'static str]| {
        let mut all = flags.to_vec();
        all.extend_from_slice(extra);
        all
    };
    let (code, json, err) = run(redbloom(url, &key, &with(&["--json", "exists", "raw"])));
    assert_eq!((code, json["present"].as_u64()), (0, Some(1)), "{err}");
    let (code, json, _) = run(redbloom(url, &key, &with(&["--json", "add", "raw", "cli"])));
    assert_eq!((code, json["new"].as_u64()), (0, Some(1)));
    assert_eq!(
        raw(&mut conn, &["BF.EXISTS", &key, "cli"]).await,
        Value::Int(1)
    );
    // Another expansion: one line, exit 2, nothing written.
    let other = [
        "--module",
        "--capacity",
        "1000",
        "--fpr",
        "0.01",
        "--growth",
        "2",
    ];
    let mut add = other.to_vec();
    add.extend(["add", "x"]);
    let line = assert_fails(redbloom(url, &key, &add), &[], None);
    assert!(line.contains("expansion=4"), "{line}");
    assert_eq!(
        raw(&mut conn, &["BF.EXISTS", &key, "x"]).await,
        Value::Int(0)
    );
    // A filter the CLI made, with another capacity: the stored parameters differ.
    let ours = common::unique_key("cli-module-ours");
    let (code, _, _) = run(redbloom(url, &ours, &args(&["add", "a"])));
    assert_eq!(code, 0);
    let line = assert_fails(
        redbloom(
            url,
            &ours,
            &[
                "--module",
                "--capacity",
                "5000",
                "--fpr",
                "0.001",
                "add",
                "b",
            ],
        ),
        &[],
        None,
    );
    assert!(line.contains("--capacity"), "{line}");
    assert_eq!(
        raw(&mut conn, &["BF.EXISTS", &ours, "b"]).await,
        Value::Int(0)
    );
    let line = assert_fails(
        redbloom(url, &ours, &["--growth", "3", "--module", "info"]),
        &[],
        None,
    );
    assert!(line.contains("--growth"), "{line}");
    // Sharded: N module keys, and the shard count is stored.
    let sharded = common::unique_key("cli-module-shards");
    let items: Vec<String> = (0..30).map(|i| format!("item{i}")).collect();
    let mut add: Vec<&str> = args(&["--shards", "3", "--json", "add", "item0"]);
    add.extend(items.iter().map(String::as_str));
    let (code, json, err) = run(redbloom(url, &sharded, &add));
    assert_eq!((code, json["new"].as_u64()), (0, Some(30)), "{err}");
    let shards = common::keys_like(&mut conn, &format!("*{sharded}:shard:?/3")).await;
    assert_eq!(shards.len(), 3, "{shards:?}");
    for shard in &shards {
        assert_eq!(bf_info(&mut conn, shard, "Capacity").await, 3_334);
    }
    let (code, info, _) = run(redbloom(url, &sharded, &["--json", "info"]));
    assert_eq!((code, info["items"].as_u64()), (0, Some(30)), "{info}");
    assert_fails(
        redbloom(url, &sharded, &args(&["--shards", "2", "add", "z"])),
        &[],
        None,
    );
}

#[tokio::test]
async fn refusals_are_one_line_and_write_nothing() {
    let redis = redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-module-refused");
    let refused: [(&[&str], &str); 5] = [
        (&["--counting", "add", "a"], "--counting"),
        (&["--layout", "native", "add", "a"], "--layout"),
        (&["--shared-with-go", "add", "a"], "--shared-with-go"),
        (
            &[
                "bench",
                "--op",
                "exists",
                "--items",
                "10",
                "--concurrency",
                "1",
                "--near-cache",
                "1s",
            ],
            "--near-cache",
        ),
        (&["import", "--merge", "-"], "not items"),
    ];
    for (extra, words) in refused {
        let line = assert_fails(redbloom(url, &key, &args(extra)), &[], None);
        assert!(line.contains(words), "{extra:?}: {line}");
    }
    let line = assert_fails(
        redbloom(url, &key, &["--module", "--bits", "1000", "add", "a"]),
        &[],
        None,
    );
    assert!(line.contains("--capacity N --fpr P"), "{line}");
    assert!(
        common::keys_like(&mut conn, "*").await.is_empty(),
        "nothing written"
    );

    // A server without the module: the BF.* commands named, and the alternative.
    let plain = redis_without_bloom();
    let mut plain_conn = plain.connection().await;
    for verb in [&["add", "a"][..], &["exists", "a"], &["info"], &["clear"]] {
        let line = assert_fails(redbloom(plain.url(), &key, &args(verb)), &[], None);
        assert!(
            line.contains("BF.MADD") && line.contains("drop --module"),
            "{verb:?}: {line}"
        );
    }
    assert!(
        common::keys_like(&mut plain_conn, "*").await.is_empty(),
        "nothing written"
    );
}

#[tokio::test]
async fn an_acl_without_bf_commands_is_one_line_naming_them() {
    let redis = redis_with_bloom();
    let mut admin = redis.connection().await;
    raw(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "nobf",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-bf.madd",
            "-bf.mexists",
        ],
    )
    .await;
    let url = redis.url().replace("redis://", "redis://nobf:pw@");
    let key = common::unique_key("cli-module-acl");
    let line = assert_fails(redbloom(&url, &key, &args(&["add", "a"])), &[], Some("pw@"));
    assert!(line.contains("this user may not run BF.MADD"), "{line}");
    let line = assert_fails(
        redbloom(&url, &key, &args(&["exists", "a"])),
        &[],
        Some("pw@"),
    );
    assert!(line.contains("this user may not run BF.MEXISTS"), "{line}");
    assert!(
        common::keys_like(&mut admin, "*").await.is_empty(),
        "nothing written"
    );
}

#[tokio::test]
async fn sharded_load_check_and_bench() {
    let redis = redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-module-load");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    let lines: String = (0..12_000).map(|i| format!("row{i}\n")).collect();
    std::fs::write(&file, lines).unwrap();
    let path = file.to_str().unwrap();
    // Room enough that no false positive makes an item seen.
    let sharded = |extra: &[&'static str]| {
        let mut all = vec!["--module", "--capacity", "100000", "--fpr", "0.001"];
        all.extend(["--shards", "4", "--json"]);
        all.extend_from_slice(extra);
        all
    };
    let mut load = sharded(&["load"]);
    load.push(path);
    let (code, json, err) = run(redbloom(url, &key, &load));
    assert_eq!((code, json["new"].as_u64()), (0, Some(12_000)), "{err}");
    let mut check = sharded(&["check"]);
    check.push(path);
    let (code, json, _) = run(redbloom(url, &key, &check));
    assert_eq!((code, json["present"].as_u64()), (0, Some(12_000)));
    let (code, json, _) = run(redbloom(url, &key, &load));
    assert_eq!(
        (code, json["new"].as_u64()),
        (0, Some(0)),
        "loaded twice: nothing new"
    );
    let shards = common::keys_like(&mut conn, &format!("*{key}:shard:?/4")).await;
    assert_eq!(shards.len(), 4, "{shards:?}");
    for op in ["add", "exists"] {
        let bench = sharded(&["bench", "--op", op, "--items", "3000", "--concurrency", "8"]);
        let (code, json, err) = run(redbloom(url, &key, &bench));
        assert_eq!(
            (code, json["items"].as_u64()),
            (0, Some(3_000)),
            "{op}: {err}"
        );
        assert!(json["items_per_sec"].as_f64().unwrap() > 0.0);
    }
    let (code, info, _) = run(redbloom(url, &key, &["--json", "info"]));
    assert_eq!((code, info["items"].as_u64()), (0, Some(15_000)), "{info}");
}

#[tokio::test]
async fn a_full_nonscaling_filter_is_one_line_with_the_count() {
    let redis = redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-module-full");
    raw(&mut conn, &["BF.RESERVE", &key, "0.001", "5", "NONSCALING"]).await;
    let line = assert_fails(
        redbloom(
            url,
            &key,
            &[
                "--module",
                "--capacity",
                "5",
                "--fpr",
                "0.001",
                "add",
                "a",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
            ],
        ),
        &[],
        None,
    );
    assert!(
        line.contains("is full") && line.contains("5 items of the call went in"),
        "{line}"
    );
    assert_eq!(
        bf_info(&mut conn, &key, "Number of items inserted").await,
        5
    );
}
