//! What the core's shape promises: cloning a filter is one reference count; a public call has
//! one deadline however many steps and shards it takes; what a filter learns about the server
//! (here: that its ACL refuses the dense merge) is learned once per filter, not once per shard.

mod common;

use common::server::RedisServer;
use redbloom::{Error, Layout, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn cloning_a_filter_is_one_reference_count() {
    // A handle is one pointer: a clone copies no key names, no shard list.
    assert_eq!(
        std::mem::size_of::<RedisBloom<MultiplexedConnection>>(),
        std::mem::size_of::<usize>()
    );
    assert_eq!(
        std::mem::size_of::<RedisBloom<redis::aio::ConnectionManager>>(),
        std::mem::size_of::<usize>()
    );
}

async fn connect(url: &str) -> MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// A server that stalls: another client keeps it in `DEBUG SLEEP 0.8` back to back, so every
/// command of ours waits up to 0.8 s.
struct Stall {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Stall {
    async fn start(url: &str) -> Stall {
        let mut conn = connect(url).await;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            while !flag.load(Ordering::Relaxed) {
                let _: redis::RedisResult<()> = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg("0.8")
                    .query_async(&mut conn)
                    .await;
            }
        });
        // The first sleep has begun.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Stall { stop, task }
    }

    async fn end(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
    }
}

#[tokio::test]
async fn one_deadline_bounds_a_whole_sharded_call() {
    let server = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--enable-debug-command",
        "yes",
    ])
    .expect("redis-server on PATH");
    let url = server.url();
    let timeout = Duration::from_secs(1);
    // A fresh client for each call, so that each takes its steps: the parameters check, the
    // parameters guard beside the shards' writes, the shards.
    let filter = |conn: MultiplexedConnection| {
        RedisBloom::builder("stalled")
            .layout(Layout::Native)
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .shards(4)
            .timeout(timeout)
            .build(conn)
            .unwrap()
    };
    let items: Vec<String> = (0..200).map(|i| format!("item:{i}")).collect();
    for op in ["add", "add_many", "clear"] {
        let bloom = filter(connect(&url).await);
        let stall = Stall::start(&url).await;
        let started = Instant::now();
        let outcome = match op {
            "add" => bloom.add("x").await.map(drop),
            "add_many" => bloom.add_many(&items).await.map(drop),
            _ => bloom.clear().await.map(drop),
        };
        let took = started.elapsed();
        stall.end().await;
        assert!(
            took < timeout + Duration::from_millis(400),
            "{op} took {took:?}, over its {timeout:?} deadline ({outcome:?})"
        );
        assert!(
            matches!(outcome, Ok(()) | Err(Error::Deadline(_))),
            "{op}: {outcome:?}"
        );
    }
}

/// How many times the ACL has refused `BITOP` (the `count`s of `ACL LOG`'s entries for it;
/// Redis 7.0's `INFO` has no counter of refusals).
async fn denials(admin: &mut MultiplexedConnection) -> u64 {
    let entries: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(admin)
        .await
        .unwrap();
    entries
        .iter()
        .filter(|entry| entry.get("object") == Some(&redis::Value::BulkString(b"bitop".to_vec())))
        .map(|entry| match entry.get("count") {
            Some(redis::Value::Int(n)) => *n as u64,
            other => panic!("ACL LOG count: {other:?}"),
        })
        .sum()
}

/// The bits set in `key`.
async fn bitcount(admin: &mut MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("BITCOUNT")
        .arg(key)
        .query_async(admin)
        .await
        .unwrap()
}

#[tokio::test]
async fn what_the_server_refuses_is_learned_once_per_filter() {
    let server = RedisServer::start().expect("redis-server on PATH");
    let mut admin = connect(&server.url()).await;
    // Which of 2 shards each item goes to: add it alone to a probe filter and see which shard
    // key changed.
    let probe = RedisBloom::builder("probe")
        .bits(1 << 16)
        .shards(2)
        .build(admin.clone())
        .unwrap();
    let mut counts = std::collections::HashMap::new();
    let mut by_shard: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for i in 0..400 {
        let item = format!("item:{i}");
        probe.add(&item).await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*:probe:shard:*")
            .query_async(&mut admin)
            .await
            .unwrap();
        for key in keys {
            let now = bitcount(&mut admin, &key).await;
            if counts.insert(key.clone(), now) != Some(now) {
                by_shard[key_index(&key)].push(item.clone());
            }
        }
    }
    assert!(
        by_shard.iter().all(|items| items.len() >= 40),
        "{by_shard:?}"
    );

    // A user whose ACL refuses BITOP: the dense merge fails, adds go by BITFIELD.
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "nobitop", "on", ">pw", "~*", "+@all", "-bitop"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://nobitop:pw@127.0.0.1:{}", server.port());
    let bloom = RedisBloom::builder("learned")
        .bits(1 << 14)
        .shards(2)
        .build(connect(&url).await)
        .unwrap();
    let before = denials(&mut admin).await;
    // A batch to shard 0 only, large enough for the dense path: refused once, then BITFIELD.
    let new = bloom.add_many(&by_shard[0][..40]).await.unwrap();
    assert!(new.iter().all(|&n| n));
    assert_eq!(
        denials(&mut admin).await - before,
        1,
        "the first merge is refused"
    );
    // Then shard 1: the filter knows already.
    let new = bloom.add_many(&by_shard[1][..40]).await.unwrap();
    assert!(new.iter().all(|&n| n));
    assert_eq!(
        denials(&mut admin).await - before,
        1,
        "a refusal learned on one shard holds for the others"
    );
    let all: Vec<&String> = by_shard.iter().flat_map(|s| &s[..40]).collect();
    assert!(bloom.exists_many(&all).await.unwrap().iter().all(|&p| p));
}

/// Shard `I` of `{rbI.N}:KEY:shard:I/S`.
fn key_index(key: &str) -> usize {
    let tail = key.rsplit(":shard:").next().unwrap();
    tail.split('/').next().unwrap().parse().unwrap()
}
