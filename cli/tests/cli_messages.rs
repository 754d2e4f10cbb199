//! Messages that name the command line's flags, and say what a key holds (issue 53, point 5):
//! - `remove` on a growing filter says a growing filter cannot remove items, not "give
//!   --counting";
//! - `--url` at a node of a Redis Cluster says so, and to use `--cluster`;
//! - the library's refusals name the flags (`--shared-with-go`, `--accept-eviction`,
//!   `--capacity`), never its calls (`shared_with_go(true)`, `accept_eviction(true)`,
//!   `max_levels`);
//! - `clear` of a key that holds nothing succeeds and writes nothing;
//! - a wrong type names what the key holds and what the filter keeps there;
//! - a RedisBloom key opened as another kind says to add `--module`;
//! - `--capacity 1e16` names the value and the most items that fit.
//!
//! One RedisBloom server for all but the cluster's case.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use common::cluster::RedisCluster;
use redis::aio::MultiplexedConnection;
use serde_json::json;
use std::time::{Duration, Instant};

/// No line may name a library call (stored parameters such as `max_levels=21` may show).
const LIBRARY_CALLS: [&str; 7] = [
    "(true)",
    "shared_with_go",
    "accept_eviction",
    "raise max_levels",
    "Builder::",
    "Bloom::",
    "ConnectionManager",
];

/// Asserts the failure (see `assert_fails`) and that it names no library call.
fn fails(cmd: assert_cmd::Command, words: &[&str]) -> String {
    let line = assert_fails(cmd, words, None);
    for call in LIBRARY_CALLS {
        assert!(!line.contains(call), "{call} in {line}");
    }
    line
}

async fn type_of(conn: &mut MultiplexedConnection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(conn).await.unwrap()
}

async fn config_set(conn: &mut MultiplexedConnection, name: &str, value: &str) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn messages_name_the_flags_and_what_a_key_holds() {
    let redis = common::module::redis_with_bloom();
    let url = redis.url();
    let mut conn = redis.connection().await;

    // A growing filter cannot remove: opened as stored, no flag is to blame.
    let growing = common::unique_key("msg-growing");
    let sized = ["--growth", "2", "--capacity", "100", "--fpr", "0.01"];
    let (code, _, err) = run(redbloom(
        url,
        &growing,
        &[&sized[..], &["add", "a"]].concat(),
    ));
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, "a\n").unwrap();
    for args in [&["remove", "a"][..], &["unload", file.to_str().unwrap()]] {
        let line = fails(
            redbloom(url, &growing, args),
            &[
                "is a growing filter",
                "cannot remove items",
                "only a counting filter",
            ],
        );
        assert!(!line.contains("give --counting"), "{line}");
        assert!(!line.contains("size flags"), "{line}");
    }
    // With --counting: the kind differs, and the line says to drop the flag.
    let line = fails(
        redbloom(url, &growing, &["--counting", "remove", "a"]),
        &["holds a growing filter", "drop --counting"],
    );
    assert!(!line.contains("give --counting"), "{line}");
    // Made by the flags: the kind's flag is named, not --counting to add.
    let line = fails(
        redbloom(url, &growing, &[&sized[..], &["remove", "a"]].concat()),
        &["growing filter (--growth) cannot remove items"],
    );
    assert!(!line.contains("give --counting"), "{line}");

    // Clearing a key that holds nothing: a success that says so and writes nothing.
    let nothing = common::unique_key("msg-nothing");
    let (code, out, err) = run(redbloom(url, &nothing, &["--json", "clear"]));
    assert_eq!((code, out), (0, json!({"deleted": false})), "{err}");
    let text = redbloom(url, &nothing, &["clear"]).output().unwrap();
    assert_eq!(text.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&text.stdout).trim(),
        "key did not exist"
    );
    let left = common::keys_like(&mut conn, &format!("*{nothing}*")).await;
    assert!(left.is_empty(), "clear wrote {left:?}");

    // A string where a module filter goes: what it holds, what the filter keeps there.
    let string = common::unique_key("msg-mstr");
    common::set_bytes(&mut conn, &string, b"not a filter").await;
    let module = ["--module", "--capacity", "100", "--fpr", "0.01"];
    let line = fails(
        redbloom(url, &string, &[&module[..], &["add", "x"]].concat()),
        &[
            "holds a string",
            "where the filter keeps a bloom filter of the server's module",
        ],
    );
    assert!(!line.contains("not a string"), "{line}");
    // A string where a growing filter's counts (a hash) go.
    let counts = common::keys_like(&mut conn, &common::companion(&growing, "grow:*")).await;
    let counts = counts
        .iter()
        .find(|k| !k.ends_with(":0"))
        .expect("the counts");
    let _: () = redis::cmd("SET")
        .arg(counts)
        .arg("a string")
        .query_async(&mut conn)
        .await
        .unwrap();
    fails(
        redbloom(url, &growing, &["add", "b"]),
        &[counts, "holds a string, where the filter keeps a hash"],
    );
    // A hash where a filter's bits go.
    let hash = common::unique_key("msg-hash");
    let _: () = redis::cmd("HSET")
        .arg(&hash)
        .arg("f")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();
    fails(
        redbloom(url, &hash, &["--bits", "64", "add", "x"]),
        &["holds a hash, where the filter keeps a string"],
    );

    // A RedisBloom filter opened as another kind: say so, and to add --module.
    let bf = common::unique_key("msg-bf");
    let _: bool = redis::cmd("BF.ADD")
        .arg(&bf)
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    for args in [
        &["--bits", "64", "info"][..],
        &["--capacity", "100", "--fpr", "0.01", "add", "y"],
    ] {
        fails(
            redbloom(url, &bf, args),
            &["RedisBloom", "BF.*", "add --module"],
        );
    }
    assert_eq!(type_of(&mut conn, &bf).await, "MBbloom--");

    // --capacity past what fits: the value and the most items that fit, for every kind; the
    // module's server is not asked for petabytes (a server that cannot allocate aborts).
    let big = common::unique_key("msg-big");
    for kind in [
        &[][..],
        &["--counting"],
        &["--window", "1h"],
        &["--module"],
        &["--growth", "2"],
    ] {
        let args = [kind, &["--capacity", "1e16", "--fpr", "0.01", "add", "x"]].concat();
        let line = fails(
            redbloom(url, &big, &args),
            &["10000000000000000 items", "at most"],
        );
        assert!(!line.contains("expected 1 or more"), "{kind:?}: {line}");
    }
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    // Past u64: not a number of items at all.
    fails(
        redbloom(
            url,
            &big,
            &["--capacity", "1e20", "--fpr", "0.01", "add", "x"],
        ),
        &["'--capacity <N>'"],
    );

    // A string without stored parameters: --shared-with-go, not shared_with_go(true).
    let foreign = common::unique_key("msg-foreign");
    common::set_bytes(&mut conn, &foreign, b"abc").await;
    fails(
        redbloom(url, &foreign, &["--bits", "64", "add", "x"]),
        &["holds a string of 3 bytes", "say so with --shared-with-go"],
    );

    // A growing filter that is full: the flags that give room, not max_levels.
    let full = common::unique_key("msg-full");
    let items: Vec<String> = (0..100).map(|i| format!("i{i}")).collect();
    let mut args = vec!["--growth", "1", "--capacity", "2", "--fpr", "0.5", "add"];
    args.extend(items.iter().map(String::as_str));
    fails(
        redbloom(url, &full, &args),
        &[
            "is full",
            "items of the call went in",
            "--capacity",
            "--growth",
        ],
    );

    // A server that may evict: --accept-eviction, not accept_eviction(true). Last: it changes
    // the server's configuration.
    config_set(&mut conn, "maxmemory", "100mb").await;
    config_set(&mut conn, "maxmemory-policy", "allkeys-lru").await;
    let evicts = common::unique_key("msg-evicts");
    fails(
        redbloom(url, &evicts, &["--bits", "64", "add", "x"]),
        &["may evict", "allkeys-lru", "--accept-eviction"],
    );
    config_set(&mut conn, "maxmemory-policy", "noeviction").await;
    config_set(&mut conn, "maxmemory", "0").await;
}

/// `--url` naming a node of a Redis Cluster: refused at once, naming `--cluster`; past an ACL
/// that hides the cluster (no `INFO`), the node's `MOVED` says the same.
#[tokio::test]
async fn a_cluster_node_at_url_says_to_use_cluster() {
    let cluster = RedisCluster::start_without_replicas().expect("redis-server and redis-cli");
    let node = &cluster.nodes[0];
    let started = Instant::now();
    fails(
        redbloom(&node.url(), "k", &["--bits", "64", "info"]),
        &[
            "is a node of a Redis Cluster",
            "with --cluster instead of --url",
        ],
    );
    assert!(started.elapsed() < Duration::from_secs(5), "not retried");

    // A key on another node, by a user the ACL refuses INFO.
    let mut conn = redis::Client::open(node.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let other = (0..100)
        .map(|i| format!("k{i}"))
        .find(|key| common::cluster::cli(node.port(), &["get", key]).contains("MOVED"))
        .expect("a key of another node");
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("noinfo")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .arg("-info")
        .query_async(&mut conn)
        .await
        .unwrap();
    let url = format!("redis://noinfo:pw@127.0.0.1:{}", node.port());
    fails(
        redbloom(
            &url,
            &other,
            &["--bits", "64", "--retry-for", "0", "add", "x"],
        ),
        &[
            "MOVED",
            "node of a Redis Cluster",
            "--cluster instead of --url",
        ],
    );
}
