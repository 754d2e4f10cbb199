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
    for (key, kind) in [(&userdb, "hash"), (&queue, "list")] {
        for args in [
            &["--bits", "64", "clear"][..],
            &["--bits", "64", "expire", "1"],
            &["--bits", "64", "add", "x"],
            &[
                "--capacity",
                "100",
                "--fpr",
                "0.01",
                "--layout",
                "native",
                "clear",
            ],
        ] {
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
    let params = format!("{{{key}}}:redbloom:params");
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
