//! A replica that has never synced holds nothing (SPEC.md §3, "Replicas"): `check` of a file
//! and `exists` on it exit 2 with one line naming the replica's state, never "present 0",
//! for every kind, one key and sharded. A replica that has synced answers as its master; a
//! master without the filter still answers "absent".

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use common::server::RedisServer;
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

/// Each kind's flags (with the size), and its name in messages.
const KINDS: [(&str, &[&str]); 5] = [
    ("go-zero", &[]),
    ("native", &["--layout", "native"]),
    ("counting", &["--counting"]),
    ("window", &["--window", "1h"]),
    ("growing", &["--growth", "2"]),
];

/// A replica's state as `ROLE` gives it (`None` for a master).
async fn replica_state(conn: &mut MultiplexedConnection) -> Option<String> {
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(conn).await.unwrap();
    let text = |at: usize| {
        role.get(at)
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
    };
    (text(0).as_deref() == Some("slave"))
        .then(|| text(3))
        .flatten()
}

/// A replica of `master_port`, once `ROLE` gives it a state `done` takes (within 20 s).
async fn replica_of(master_port: &str, done: impl Fn(&str) -> bool) -> RedisServer {
    let args = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
    ];
    let replica = RedisServer::start_with(&[&args[..], &[master_port]].concat())
        .expect("redis-server on PATH");
    let mut conn = common::connect(&replica.url()).await;
    let started = Instant::now();
    loop {
        let state = replica_state(&mut conn).await;
        if state.as_deref().is_some_and(&done) {
            return replica;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the replica stays {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A file of the items `item:0` to `item:999`.
fn items_file(dir: &tempfile::TempDir) -> String {
    let file = dir.path().join("items.txt");
    let items: String = (0..1000).map(|i| format!("item:{i}\n")).collect();
    std::fs::write(&file, items).unwrap();
    file.to_str().unwrap().to_owned()
}

/// `flags`, the size and `--shards`, then `args`.
fn args<'a>(flags: &[&'a str], shards: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let size = ["--capacity", "1000", "--fpr", "0.01", "--shards", shards];
    [flags, &size[..], &["--json"], args].concat()
}

#[tokio::test]
async fn checks_on_a_replica_that_never_synced_exit_2_naming_its_state() {
    // A master where nothing listens (a loopback port bound by the test, never listening, so
    // that no server started meanwhile takes it): the replica stays in `connect` (or, for a
    // moment, `connecting`).
    let nobody = tokio::net::TcpSocket::new_v4().unwrap();
    nobody.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = nobody.local_addr().unwrap().port().to_string();
    let replica = replica_of(&port, |state| state != "connected").await;
    let url = replica.url();
    let dir = tempfile::tempdir().unwrap();
    let file = items_file(&dir);
    for shards in ["1", "3"] {
        for (kind, flags) in KINDS {
            let key = common::unique_key(&format!("cli-unsynced-{kind}"));
            for command in [&["check", &file][..], &["exists", "item:1", "item:2"]] {
                let line = assert_fails(
                    redbloom(&url, &key, &args(flags, shards, command)),
                    &[
                        &key,
                        "replica",
                        "has not synced",
                        "connect",
                        "cannot say absent",
                    ],
                    None,
                );
                assert!(!line.contains("present"), "{kind}, {shards}: {line}");
            }
        }
    }
}

#[tokio::test]
async fn a_synced_replica_and_a_master_answer_as_before() {
    let master = RedisServer::start().expect("redis-server on PATH");
    let replica = replica_of(&master.port().to_string(), |state| state == "connected").await;
    let mut on_master = common::connect(&master.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = items_file(&dir);
    for shards in ["1", "3"] {
        for (kind, flags) in KINDS {
            let what = format!("{kind}, {shards} shard(s)");
            let key = common::unique_key(&format!("cli-synced-{kind}"));
            let (code, out, err) = run(redbloom(
                &master.url(),
                &key,
                &args(flags, shards, &["load", &file]),
            ));
            assert_eq!(
                (code, out["items"].as_u64()),
                (0, Some(1000)),
                "{what}: {err}"
            );
            let acked: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(10_000)
                .query_async(&mut on_master)
                .await
                .unwrap();
            assert_eq!(acked, 1, "{what}: the replica has the filter");
            let on_replica = |command: &[&str]| {
                run(redbloom(
                    &replica.url(),
                    &key,
                    &args(flags, shards, command),
                ))
            };
            let (code, out, err) = on_replica(&["check", &file]);
            assert_eq!(
                (code, out["present"].as_u64()),
                (0, Some(1000)),
                "{what}: {err}"
            );
            let (code, out, err) = on_replica(&["exists", "item:1", "item:2"]);
            assert_eq!(
                (code, out["present"].as_u64()),
                (0, Some(2)),
                "{what}: {err}"
            );
            // Items never added: absent (one at a time, so that a false positive of 1% fails
            // one check at most).
            let absent = (0..5)
                .filter(|i| on_replica(&["exists", &format!("never:{i}")]).0 == 1)
                .count();
            assert!(absent >= 4, "{what}: {absent} of 5 absent");

            // A filter nobody made: absent on the synced replica and on the master, no error.
            let missing = common::unique_key(&format!("cli-missing-{kind}"));
            for url in [replica.url(), master.url()] {
                let (code, out, err) = run(redbloom(
                    &url,
                    &missing,
                    &args(flags, shards, &["check", &file]),
                ));
                assert_eq!(
                    (code, out["present"].as_u64()),
                    (0, Some(0)),
                    "{what}: {err}"
                );
                let (code, out, err) = run(redbloom(
                    &url,
                    &missing,
                    &args(flags, shards, &["exists", "item:1"]),
                ));
                assert_eq!(
                    (code, out["absent"].as_u64()),
                    (1, Some(1)),
                    "{what}: {err}"
                );
            }
        }
    }
}
