//! A replica that has never synced holds nothing (SPEC.md §3, "Replicas"): a check it answers
//! from nothing of the filter fails with `Error::ReplicaNotSynced` naming the replica's state,
//! never "absent". Every kind (go-zero's layout, the native one, counting, window, growing),
//! one key and sharded, single checks and batches (a big one takes the dense path), and the
//! near cache's copy. A replica that has synced answers as its master does, and a master with
//! no such filter still answers "absent".
//!
//! The unsynced replica is a replica of a loopback port where nothing listens (bound by the
//! test, never listening): it stays in `connect` (or, for a moment, `connecting`) for as long
//! as the test runs.

mod common;

use common::server::RedisServer;
use redbloom::kind::Kind;
use redbloom::{
    Bloom, Builder, CountingBloom, Error, GrowingBloom, Layout, NearCache, RedisBloom, WindowBloom,
};
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

/// The states `ROLE` gives a replica whose master does not answer.
const NOT_SYNCED: [&str; 3] = ["connect", "connecting", "handshake"];

/// `ROLE` of the server on `conn`: its role, and a replica's state.
async fn role(conn: &mut MultiplexedConnection) -> (String, Option<String>) {
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(conn).await.unwrap();
    let text = |at: usize| {
        role.get(at)
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
    };
    (text(0).unwrap_or_default(), text(3))
}

/// Polls `ROLE` on `conn` until `done` holds of it (within 20 s).
async fn await_role(conn: &mut MultiplexedConnection, done: impl Fn(&str, Option<&str>) -> bool) {
    let started = Instant::now();
    loop {
        let (role, state) = role(conn).await;
        if done(&role, state.as_deref()) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "ROLE stays {role} {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback port where nothing listens, kept so (bound, never listening: a connection to it
/// is refused) while the socket lives: no server started meanwhile can take it.
fn port_where_nothing_listens() -> (tokio::net::TcpSocket, String) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port().to_string();
    (socket, port)
}

/// A replica of a loopback port where nothing listens (kept so by the socket returned), and a
/// connection to it once `ROLE` says it is a replica that has not synced.
async fn unsynced_replica() -> (RedisServer, MultiplexedConnection, tokio::net::TcpSocket) {
    let (nobody, port) = port_where_nothing_listens();
    let args = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
    ];
    let replica = RedisServer::start_with(&[&args[..], &[port.as_str()]].concat())
        .expect("redis-server on PATH");
    let mut conn = common::connect(&replica.url()).await;
    await_role(&mut conn, |role, state| {
        role == "slave" && state.is_some_and(|s| NOT_SYNCED.contains(&s))
    })
    .await;
    (replica, conn, nobody)
}

/// A replica of `master`, and a connection to it once it has synced.
async fn synced_replica(master: &RedisServer) -> (RedisServer, MultiplexedConnection) {
    let port = master.port().to_string();
    let args = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
    ];
    let replica = RedisServer::start_with(&[&args[..], &[port.as_str()]].concat())
        .expect("redis-server on PATH");
    let mut conn = common::connect(&replica.url()).await;
    await_role(&mut conn, |role, state| {
        role == "slave" && state == Some("connected")
    })
    .await;
    (replica, conn)
}

fn items(from: usize, to: usize) -> Vec<String> {
    (from..to).map(|i| format!("item:{i}")).collect()
}

/// Something a test does with one kind's filter, built from its builder.
trait Scenario {
    async fn run<K: Kind>(&self, what: &str, builder: Builder<K>);
}

/// `builder` sized as every filter here, of `shards` shards, with a near cache when `near`.
fn shaped<K: Kind>(builder: Builder<K>, shards: u32, near: bool) -> Builder<K> {
    let builder = builder
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(shards);
    match near {
        true => builder.near_cache(NearCache::new(Duration::from_secs(30))),
        false => builder,
    }
}

/// `scenario` on the filter `key` of `shards` shards of every kind (the plain one in go-zero's
/// layout and in the native one), each without and with a near cache.
async fn each_kind(key: &str, shards: u32, scenario: &impl Scenario) {
    for near in [false, true] {
        let what = |kind: &str| format!("{kind}, {shards} shard(s), near cache {near}");
        let gozero = RedisBloom::builder(format!("{key}:gozero"));
        scenario
            .run(&what("go-zero"), shaped(gozero, shards, near))
            .await;
        let native = RedisBloom::builder(format!("{key}:native")).layout(Layout::Native);
        scenario
            .run(&what("native"), shaped(native, shards, near))
            .await;
        let counting = CountingBloom::builder(format!("{key}:counting"));
        scenario
            .run(&what("counting"), shaped(counting, shards, near))
            .await;
        let window = WindowBloom::builder(format!("{key}:window"), Duration::from_secs(3600));
        scenario
            .run(&what("window"), shaped(window, shards, near))
            .await;
        let growing = GrowingBloom::builder(format!("{key}:growing"));
        scenario
            .run(&what("growing"), shaped(growing, shards, near))
            .await;
    }
}

#[track_caller]
fn assert_not_synced<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, key: &str) {
    match result {
        Err(err @ Error::ReplicaNotSynced { .. }) => {
            let Error::ReplicaNotSynced { key: got, state } = &err else {
                unreachable!()
            };
            assert_eq!(got, key, "{what}: {err}");
            assert!(NOT_SYNCED.contains(&state.as_str()), "{what}: {err}");
            let text = err.to_string();
            assert!(
                text.contains("replica") && text.contains(state.as_str()),
                "{what}: {text}"
            );
        }
        other => panic!("{what}: expected Error::ReplicaNotSynced for {key}, got {other:?}"),
    }
}

/// Every check of a filter on the unsynced replica fails, naming its state: a single item, a
/// small batch, a batch big enough for the dense path, and a single item again (nothing
/// learned makes a later check answer "absent").
struct Fails(MultiplexedConnection);

impl Scenario for Fails {
    async fn run<K: Kind>(&self, what: &str, builder: Builder<K>) {
        let bloom: Bloom<MultiplexedConnection, K> = builder.build(self.0.clone()).unwrap();
        let key = bloom.key().to_owned();
        assert_not_synced(what, bloom.exists("item:1").await, &key);
        assert_not_synced(what, bloom.exists_many(&items(0, 50)).await, &key);
        let big = bloom.bulk_check_batch_size().clamp(1_000, 20_000);
        assert_not_synced(what, bloom.exists_many(&items(0, big)).await, &key);
        assert_not_synced(what, bloom.exists("item:2").await, &key);
    }
}

/// Adds the items `0..200` to a filter.
struct Adds(MultiplexedConnection);

impl Scenario for Adds {
    async fn run<K: Kind>(&self, what: &str, builder: Builder<K>) {
        let bloom: Bloom<MultiplexedConnection, K> = builder.build(self.0.clone()).unwrap();
        let added = bloom.add_many(&items(0, 200)).await;
        assert!(added.is_ok(), "{what}: {added:?}");
    }
}

/// A filter answers: present for the items `0..200` when `added` (else for none), absent for
/// others (but a few false positives), by single checks and batches small and big.
struct Answers {
    conn: MultiplexedConnection,
    added: bool,
}

impl Scenario for Answers {
    async fn run<K: Kind>(&self, what: &str, builder: Builder<K>) {
        let bloom: Bloom<MultiplexedConnection, K> = builder.build(self.conn.clone()).unwrap();
        let added = self.added;
        assert_eq!(bloom.exists("item:1").await.unwrap(), added, "{what}");
        assert!(!bloom.exists("other:1").await.unwrap(), "{what}");
        let found = bloom.exists_many(&items(150, 250)).await.unwrap();
        let others = found[50..].iter().filter(|&&f| f).count();
        assert!(
            found[..50].iter().all(|&f| f == added) && others <= 5,
            "{what}: {found:?}"
        );
        let big = bloom.bulk_check_batch_size().clamp(1_000, 20_000);
        let found = bloom.exists_many(&items(0, big)).await.unwrap();
        assert!(found[..200].iter().all(|&f| f == added), "{what}");
    }
}

#[tokio::test]
async fn a_replica_that_never_synced_fails_every_check() {
    let (_replica, mut conn, _nobody) = unsynced_replica().await;
    for shards in [1, 3] {
        let key = common::unique_key("unsynced");
        each_kind(&key, shards, &Fails(conn.clone())).await;
    }
    // Still not synced: the errors were the replica's, not a moment of its start.
    let (role, state) = role(&mut conn).await;
    assert_eq!(role, "slave");
    assert!(
        NOT_SYNCED.contains(&state.as_deref().unwrap_or("")),
        "{state:?}"
    );
}

#[tokio::test]
async fn a_synced_replica_and_a_master_answer_as_before() {
    let master = RedisServer::start().expect("redis-server on PATH");
    let mut on_master = common::connect(&master.url()).await;
    let (_replica, on_replica) = synced_replica(&master).await;
    for shards in [1, 3] {
        let key = common::unique_key("synced");
        each_kind(&key, shards, &Adds(on_master.clone())).await;
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(10_000)
            .query_async(&mut on_master)
            .await
            .unwrap();
        assert_eq!(acked, 1, "the replica has the filters");
        let synced = |added, conn: &MultiplexedConnection| Answers {
            conn: conn.clone(),
            added,
        };
        // The synced replica: the filters added on the master, and filters nobody made.
        each_kind(&key, shards, &synced(true, &on_replica)).await;
        let missing = common::unique_key("missing");
        each_kind(&missing, shards, &synced(false, &on_replica)).await;
        // The master: a filter nobody made is empty, no error.
        each_kind(&missing, shards, &synced(false, &on_master)).await;
    }
}

/// What the question costs: only a check that found nothing of a filter (a filter nobody made)
/// asks the server's `ROLE`; one of a filter that is there, even nearly empty (its absent
/// items' bits all clear), never does.
struct Asks {
    conn: MultiplexedConnection,
    /// Whether the filter is made (one item added) first.
    made: bool,
}

impl Scenario for Asks {
    async fn run<K: Kind>(&self, what: &str, builder: Builder<K>) {
        let bloom: Bloom<MultiplexedConnection, K> = builder.build(self.conn.clone()).unwrap();
        if self.made {
            bloom.add("only").await.unwrap();
        }
        let mut conn = self.conn.clone();
        let checks = async {
            for i in 0..20 {
                assert!(
                    !bloom.exists(format!("absent:{i}")).await.unwrap(),
                    "{what}"
                );
            }
            let found = bloom.exists_many(&items(0, 100)).await.unwrap();
            assert!(found.iter().all(|&f| !f), "{what}");
        };
        let ((), asked) = common::calls_during(&mut conn, "role", checks).await;
        match self.made {
            true => assert_eq!(asked, 0, "{what}: a filter that is there asks nothing"),
            false => assert!(asked > 0, "{what}: nothing of the filter is asked about"),
        }
    }
}

#[tokio::test]
async fn only_a_check_that_found_nothing_asks_the_role() {
    // A server of its own: the test reads its command statistics.
    let master = RedisServer::start().expect("redis-server on PATH");
    let conn = common::connect(&master.url()).await;
    for shards in [1, 3] {
        let made = Asks {
            conn: conn.clone(),
            made: true,
        };
        each_kind(&common::unique_key("asks-made"), shards, &made).await;
        let missing = Asks {
            conn: conn.clone(),
            made: false,
        };
        each_kind(&common::unique_key("asks-missing"), shards, &missing).await;
    }
}

/// A user the ACL refuses `ROLE` (the filters' lists in docs/security.md grant `INFO`, not
/// `ROLE`) is told the same from `INFO replication`: the link is down.
#[tokio::test]
async fn without_role_the_replica_is_known_by_its_info() {
    let (replica, mut conn, _nobody) = unsynced_replica().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">pw", "~*", "+@all", "-role"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let url = replica.url().replace("redis://", "redis://app:pw@");
    let app = common::connect(&url).await;
    let refused: redis::RedisResult<redis::Value> =
        redis::cmd("ROLE").query_async(&mut app.clone()).await;
    assert!(refused.is_err(), "ROLE refused: {refused:?}");
    let key = common::unique_key("unsynced-no-role");
    for shards in [1, 3] {
        let bloom = RedisBloom::builder(format!("{key}:{shards}"))
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .shards(shards)
            .build(app.clone())
            .unwrap();
        match bloom.exists("item:1").await {
            Err(Error::ReplicaNotSynced { key, state }) => {
                assert_eq!((key.as_str(), state.as_str()), (bloom.key(), "link down"));
            }
            other => panic!("{shards} shard(s): expected Error::ReplicaNotSynced, got {other:?}"),
        }
    }
}
