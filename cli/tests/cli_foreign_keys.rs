//! The CLI never changes a key that is not its filter's: `clear`, `expire` and `add` on a key of
//! another type, of other parameters, or on a filter's companion key exit 2 with one clean line
//! and leave the key exactly as it was.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use redis::aio::MultiplexedConnection;
use serde_json::json;

async fn hash_fields(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn clear_expire_and_add_refuse_keys_of_other_types() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let mut conn = redis.connection().await;
    let userdb = common::unique_key("userdb");
    let queue = common::unique_key("queue");
    let _: i64 = redis::cmd("HSET")
        .arg(&userdb)
        .arg(&["name", "ada"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg(&queue)
        .arg(&["a", "b"])
        .query_async(&mut conn)
        .await
        .unwrap();
    // Every kind, writing and reading: the key's type is named, as for a plain filter.
    let sized = ["--capacity", "100", "--fpr", "0.01"];
    let mut cases: Vec<Vec<&str>> = vec![
        vec!["--bits", "64", "clear"],
        vec!["--bits", "64", "expire", "1"],
        vec!["--bits", "64", "add", "x"],
        [&sized[..], &["--layout", "native", "clear"]].concat(),
    ];
    for kind in [&["--window", "1h"][..], &["--growth", "2"], &["--counting"]] {
        for verb in ["add", "exists"] {
            cases.push([kind, &sized, &[verb, "x"]].concat());
        }
    }
    for (key, kind) in [(&userdb, "hash"), (&queue, "list")] {
        for args in &cases {
            let line = assert_fails(redbloom(&url, key, args), &[key, kind], None);
            for internal in ["Pipeline", "Index", "script", "WRONGTYPE Operation"] {
                assert!(!line.contains(internal), "{args:?}: {line}");
            }
        }
    }
    assert_eq!(hash_fields(&mut conn, &userdb).await, ["name", "ada"]);
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg(&queue)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(list, ["a", "b"]);
    assert_eq!(common::pttl(&mut conn, &userdb).await, -1);
    assert_eq!(common::pttl(&mut conn, &queue).await, -1);
}

#[tokio::test]
async fn clear_and_expire_refuse_another_size_and_zero_seconds() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let mut conn = redis.connection().await;
    let key = common::unique_key("sized");
    let (code, out, err) = run(redbloom(
        &url,
        &key,
        &["--bits", "1000", "--json", "add", "a"],
    ));
    assert_eq!((code, out), (0, json!({"items": 1, "new": 1})), "{err}");
    let before = common::key_hex(&mut conn, &key).await;

    assert_fails(
        redbloom(&url, &key, &["--bits", "5", "clear"]),
        &["bits=1000"],
        None,
    );
    assert_fails(
        redbloom(&url, &key, &["--bits", "5", "expire", "10"]),
        &["bits=1000"],
        None,
    );
    assert_fails(
        redbloom(&url, &key, &["--bits", "1000", "expire", "0"]),
        &["0"],
        None,
    );
    assert_eq!(common::key_hex(&mut conn, &key).await, before);
    assert_eq!(common::pttl(&mut conn, &key).await, -1);

    // A filter's companion key is not a filter.
    let params = common::companion(&key, "params");
    let stored = common::key_hex(&mut conn, &params).await;
    assert!(!stored.is_empty());
    assert_fails(
        redbloom(&url, &params, &["--bits", "1000", "add", "x"]),
        &["companion"],
        None,
    );
    assert_fails(
        redbloom(&url, &params, &["--bits", "1000", "clear"]),
        &["companion"],
        None,
    );
    assert_eq!(common::key_hex(&mut conn, &params).await, stored);

    let (code, out, err) = run(redbloom(&url, &key, &["--bits", "1000", "--json", "clear"]));
    assert_eq!((code, out), (0, json!({"deleted": true})), "{err}");
}

/// `SET user:name "hello world"`: the CLI reads it as a go-zero filter, but `add`, `load`,
/// `clear`, `expire` and `import` exit 2 naming `--shared-with-go`, the value as it was; with
/// the switch it is written as a go-zero filter shared with Go.
#[tokio::test]
async fn a_string_that_is_not_a_filter_is_only_read() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let mut conn = redis.connection().await;
    let key = common::unique_key("user:name");
    common::set_bytes(&mut conn, &key, b"hello world").await;
    let size = ["--capacity", "100000", "--fpr", "0.001", "--json"];
    let with = |args: &[&str]| {
        let all: Vec<&str> = size.iter().chain(args).copied().collect();
        redbloom(&url, &key, &all)
    };
    let (code, out, err) = run(with(&["exists", "x"]));
    assert_eq!((code, out["absent"].as_u64()), (1, Some(1)), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let items = dir.path().join("items.txt");
    std::fs::write(&items, "a\nb\n").unwrap();
    let items = items.to_str().unwrap();
    let snapshot = dir.path().join("donor.rbf");
    let donor = common::unique_key("donor");
    for args in [&["add", "z"][..], &["export", snapshot.to_str().unwrap()]] {
        let all: Vec<&str> = size.iter().chain(args).copied().collect();
        let (code, _, err) = run(redbloom(&url, &donor, &all));
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    for args in [
        &["add", "x"][..],
        &["load", items],
        &["clear"],
        &["expire", "60"],
        &["import", snapshot.to_str().unwrap()],
    ] {
        let line = assert_fails(with(args), &[&key, "--shared-with-go"], None);
        assert!(line.contains("no stored parameters"), "{args:?}: {line}");
    }
    assert_eq!(
        common::key_hex(&mut conn, &key).await,
        "68656c6c6f20776f726c64"
    );
    assert_eq!(common::pttl(&mut conn, &key).await, -1);

    let (code, out, err) = run(with(&["--shared-with-go", "add", "x"]));
    assert_eq!((code, out["new"].as_u64()), (0, Some(1)), "{err}");
    // The switch is for go-zero filters only.
    assert_fails(
        with(&["--shared-with-go", "--counting", "add", "x"]),
        &["--shared-with-go"],
        None,
    );
}
