//! A server that may evict a filter's keys is refused (docs/guarantees.md "A server that may
//! evict the filter is refused"): with `maxmemory` set, an `allkeys-*` policy refuses every
//! kind's writes, `expire` and `import`; a `volatile-*` one refuses window filters (their
//! generations carry a TTL), `expire`, and filters that already have a TTL. Reads go on;
//! nothing is written. `accept_eviction(true)` writes anyway, with one WARN event. On a cluster
//! every master that holds a part of the filter is asked.

mod common;

use common::cluster::RedisCluster;
use common::server::RedisServer;
use redbloom::kind::Kind;
use redbloom::{CountingBloom, Error, GrowingBloom, ImportMode, RedisBloom, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Held by the tests that emit the crate's eviction warning. `accepting_the_risk_warns_once`
/// counts it with a subscriber of its own thread (`set_default`); tracing caches, process-wide,
/// whether a callsite is of interest when it is first hit, and while one subscriber is made it
/// asks the hitting thread's: another test's thread, which has none, first to hit the warning
/// while the count runs, caches "never", and the count reads 0 (one CI run did). A callsite
/// cached before the subscriber is made is asked again when it is made; one at a time, no
/// other test hits it meanwhile.
static WARNING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A server of the test's own (it reconfigures it) with `maxmemory 100mb` and `policy`.
async fn server_with(policy: &str) -> (RedisServer, MultiplexedConnection) {
    let server = RedisServer::start_evicting(policy).expect("a private redis-server");
    let conn = common::connect(&server.url()).await;
    (server, conn)
}

#[track_caller]
fn assert_evictable<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, policy: &str) {
    match result {
        Err(err @ Error::Evictable { .. }) => {
            let text = err.to_string();
            assert!(text.contains(policy), "{what}: {text}");
            assert!(text.contains("noeviction"), "{what}: {text}");
            assert!(text.contains("accept_eviction"), "{what}: {text}");
        }
        other => panic!("{what}: expected Error::Evictable, got {other:?}"),
    }
}

async fn dbsize(conn: &mut MultiplexedConnection) -> u64 {
    redis::cmd("DBSIZE").query_async(conn).await.unwrap()
}

/// A builder of any kind, sized alike, with `shards` and `accept_eviction(accept)`, built.
macro_rules! sized {
    ($builder:expr, $conn:expr, $shards:expr, $accept:expr) => {
        $builder
            .expected_items(1000)
            .false_positive_rate(0.01)
            .shards($shards)
            .accept_eviction($accept)
            .build($conn.clone())
            .unwrap()
    };
}

/// Every kind, one key and sharded.
macro_rules! each_kind {
    ($conn:expr, $shards:expr, $name:ident, $accept:expr, $body:block) => {{
        let hour = Duration::from_secs(3600);
        let key = |kind: &str| format!("evict:{kind}:{}", $shards);
        {
            let $name = sized!(RedisBloom::builder(key("plain")), $conn, $shards, $accept);
            $body
        }
        {
            let $name = sized!(
                WindowBloom::builder(key("window"), hour),
                $conn,
                $shards,
                $accept
            );
            $body
        }
        {
            let $name = sized!(
                CountingBloom::builder(key("counting")),
                $conn,
                $shards,
                $accept
            );
            $body
        }
        {
            let $name = sized!(
                GrowingBloom::builder(key("growing")),
                $conn,
                $shards,
                $accept
            );
            $body
        }
    }};
}

#[tokio::test]
async fn an_allkeys_policy_refuses_every_kinds_writes() {
    let _one_at_a_time = WARNING.lock().await;
    let (_server, mut conn) = server_with("allkeys-lru").await;
    let mut file = Vec::new();
    let donor = RedisBloom::builder("donor")
        .expected_items(1000)
        .false_positive_rate(0.01)
        .accept_eviction(true)
        .build(conn.clone())
        .unwrap();
    donor.add("x").await.unwrap();
    donor.export(&mut file).await.unwrap();
    assert!(donor.clear().await.unwrap());
    for shards in [1, 3] {
        each_kind!(conn, shards, bloom, false, {
            let what = format!("{} ({shards} shards)", bloom.key());
            assert_evictable(&what, bloom.add("x").await, "allkeys-lru");
            assert_evictable(&what, bloom.add_many(&["x", "y"]).await, "allkeys-lru");
            assert_evictable(
                &what,
                bloom.expire(Duration::from_secs(60)).await,
                "allkeys-lru",
            );
            // Reads go on.
            assert!(!bloom.exists("x").await.unwrap(), "{what}");
        });
    }
    let plain = RedisBloom::builder("evict:import")
        .expected_items(1000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert_evictable(
        "import",
        plain.import(file.as_slice(), ImportMode::Replace).await,
        "allkeys-lru",
    );
    assert_eq!(dbsize(&mut conn).await, 0, "nothing was written");

    // Accepted: every kind writes.
    for shards in [1, 3] {
        each_kind!(conn, shards, bloom, true, {
            assert!(bloom.add("x").await.unwrap(), "{}", bloom.key());
            assert!(bloom.exists("x").await.unwrap(), "{}", bloom.key());
        });
    }

    // `maxmemory 0` evicts nothing, whatever the policy.
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "0"])
        .query_async(&mut conn)
        .await
        .unwrap();
    each_kind!(conn, 1, bloom, false, {
        bloom.add("y").await.unwrap();
        assert!(bloom.exists("y").await.unwrap(), "{}", bloom.key());
    });
}

#[tokio::test]
async fn a_volatile_policy_refuses_keys_with_a_ttl() {
    let _one_at_a_time = WARNING.lock().await;
    let (_server, conn) = server_with("volatile-lru").await;
    let mut admin = conn.clone();
    let plain = |name: &str| {
        RedisBloom::builder(name)
            .expected_items(1000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap()
    };
    // No TTL: no volatile policy evicts the keys.
    let fixed = plain("fixed");
    assert!(fixed.add("x").await.unwrap());
    // expire would give them one.
    assert_evictable(
        "expire",
        fixed.expire(Duration::from_secs(60)).await,
        "volatile-lru",
    );
    assert_eq!(common::pttl(&mut admin, "fixed").await, -1);
    // A window filter's generations always carry one.
    let window = WindowBloom::builder("window", Duration::from_secs(3600))
        .expected_items(1000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert_evictable("window add", window.add("x").await, "volatile-lru");
    assert!(!window.exists("x").await.unwrap());
    // A filter that got a TTL from a client that accepted the risk: a new client refuses.
    let accepting = RedisBloom::builder("fixed")
        .expected_items(1000)
        .false_positive_rate(0.01)
        .accept_eviction(true)
        .build(conn.clone())
        .unwrap();
    assert!(accepting.expire(Duration::from_secs(600)).await.unwrap());
    assert_evictable(
        "add after expire",
        plain("fixed").add("y").await,
        "volatile-lru",
    );
    assert!(plain("fixed").exists("x").await.unwrap());
}

/// Counts the crate's WARN events that speak of eviction.
#[derive(Clone, Default)]
struct Warnings(Arc<AtomicUsize>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let meta = event.metadata();
        let mut message = Message(String::new());
        event.record(&mut message);
        if meta.target() == "redbloom"
            && *meta.level() == tracing::Level::WARN
            && message.0.contains("evict")
        {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn accepting_the_risk_warns_once() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _one_at_a_time = runtime.block_on(WARNING.lock());
    let warnings = Warnings::default();
    let _default = tracing::subscriber::set_default(warnings.clone());
    runtime.block_on(async {
        let (_server, conn) = server_with("allkeys-lfu").await;
        let bloom = RedisBloom::builder("warned")
            .expected_items(1000)
            .false_positive_rate(0.01)
            .accept_eviction(true)
            .build(conn.clone())
            .unwrap();
        for item in ["a", "b", "c"] {
            assert!(bloom.add(item).await.unwrap());
        }
        assert!(bloom.expire(Duration::from_secs(60)).await.unwrap());
    });
    assert_eq!(warnings.0.load(Ordering::Relaxed), 1);
}

/// On a cluster, the master of each part is asked: one master alone with an `allkeys-*`
/// policy refuses a sharded filter with a part there, and a filter of one key elsewhere writes.
#[tokio::test]
async fn on_a_cluster_every_master_of_the_filter_is_asked() {
    let cluster = RedisCluster::start_without_replicas().expect("a private cluster");
    let conn = cluster.connection().await;
    let sharded = RedisBloom::builder("evict:sharded")
        .expected_items(1000)
        .false_positive_rate(0.01)
        .shards(8)
        .build(conn.clone())
        .unwrap();
    let evicting = cluster.master_of(&sharded_part(&cluster, &sharded));
    for (name, value) in [("maxmemory", "100mb"), ("maxmemory-policy", "allkeys-lru")] {
        common::cluster::cli(evicting, &["CONFIG", "SET", name, value]);
    }
    assert_evictable("sharded", sharded.add("x").await, "allkeys-lru");
    // A filter of one key whose slot is on another master writes.
    let elsewhere = (0..)
        .map(|i| format!("evict:one:{i}"))
        .find(|key| cluster.master_of(key) != evicting)
        .unwrap();
    let one = RedisBloom::builder(elsewhere.as_str())
        .expected_items(1000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(one.add("x").await.unwrap());
}

/// The key of a sharded filter's first part (its shards' names: `{rb0.N}:KEY:shard:0/S`, the
/// first N whose slot, as the cluster computes it, falls in shard 0's share of the slots).
fn sharded_part<C, K: Kind>(cluster: &RedisCluster, bloom: &redbloom::Bloom<C, K>) -> String {
    let shards = bloom.shards();
    (0u64..)
        .map(|n| format!("{{rb0.{n}}}:{}:shard:0/{shards}", bloom.key()))
        .find(|key| u32::from(cluster.slot_of(key)) * shards / 16384 == 0)
        .unwrap()
}
