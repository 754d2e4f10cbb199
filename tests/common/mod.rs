//! A real Redis for the integration tests, found in this order:
//! 1. `REDIS_URL`, when set (tests then use unique keys and never flush the whole server);
//! 2. a private `redis-server` from `PATH` on a free loopback port, one per test;
//! 3. a testcontainers Redis, when a Docker daemon answers;
//! 4. otherwise the test fails, saying how to get a Redis. No test is ever skipped.
#![allow(dead_code)]

pub mod busy;
pub mod cli;
pub mod cluster;
pub mod gozero;
pub mod markdown;
pub mod module;
pub mod proxy;
pub mod sentinel;
pub mod server;

use redis::aio::MultiplexedConnection;
use server::RedisServer;
use std::sync::atomic::{AtomicU64, Ordering};
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage};

/// A Redis to test against; a private server or container lives as long as this value.
pub struct TestRedis {
    url: String,
    private: Option<RedisServer>,
    _container: Option<ContainerAsync<GenericImage>>,
}

impl TestRedis {
    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The private server, for tests that inject faults; `None` with `REDIS_URL` or Docker.
    pub fn private_server(&mut self) -> Option<&mut RedisServer> {
        self.private.as_mut()
    }

    /// The private server's URL, when the tests run one (not with `REDIS_URL` or Docker).
    pub fn private_server_url(&self) -> Option<String> {
        self.private.as_ref().map(RedisServer::url)
    }

    /// A new multiplexed connection. Its response timeout is 10 s, not redis-rs's 500 ms: big
    /// reference batches through go-zero's scripts take a few hundred ms, more on a loaded CI
    /// machine; and so is its connection timeout (a connection timed out once with a CI run and
    /// tests beside each other). Tests of timeouts make their own connections.
    pub async fn connection(&self) -> MultiplexedConnection {
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(std::time::Duration::from_secs(10)))
            .set_connection_timeout(Some(std::time::Duration::from_secs(10)));
        redis::Client::open(self.url.as_str())
            .expect("valid URL")
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|err| panic!("cannot connect to {}: {err}", self.url))
    }
}

/// Provides a real Redis (see the module docs), or panics saying how to get one.
pub async fn redis() -> TestRedis {
    if let Ok(url) = std::env::var("REDIS_URL") {
        if !url.is_empty() {
            return TestRedis {
                url,
                private: None,
                _container: None,
            };
        }
    }
    let local_err = match RedisServer::start() {
        Ok(server) => {
            return TestRedis {
                url: server.url(),
                private: Some(server),
                _container: None,
            }
        }
        Err(err) => err,
    };
    let container = GenericImage::new("redis", "7-alpine")
        .with_exposed_port(6379.tcp())
        .with_wait_for(WaitFor::message_on_stdout("Ready to accept connections"))
        .start()
        .await;
    match container {
        Ok(container) => {
            let port = container
                .get_host_port_ipv4(6379)
                .await
                .expect("mapped port");
            TestRedis {
                url: format!("redis://127.0.0.1:{port}"),
                private: None,
                _container: Some(container),
            }
        }
        Err(docker_err) => panic!(
            "no Redis to test against: REDIS_URL is not set, redis-server could not be started \
             ({local_err}), and Docker did not answer ({docker_err}). Install redis-server \
             (apt-get install redis-server), start Docker, or set REDIS_URL=redis://HOST:PORT"
        ),
    }
}

/// A key no other test (or test run against a shared `REDIS_URL`) uses.
pub fn unique_key(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("redbloom-test:{name}:{}:{nanos}:{n}", std::process::id())
}

/// The name of the companion `name` of the filter key `key` (its stored parameters `params`,
/// window generations `gen:HASH:EPOCH`, records `once:W.I`, ...), as `keys::sidecar` makes it:
/// `{TAG}:redbloom:LEN:KEY:NAME`, `TAG` being `key`'s hash tag, or `key` itself when it has
/// none, and `LEN` the length of `key` in bytes. `companion(key, "gen:")` is the start of the
/// names of `key`'s generations (a `KEYS` pattern with `*` after it).
///
/// # Panics
/// For a key without a hash tag that cannot be one (empty, or holding a `}`): redbloom names
/// its companions after a tag of its slot, which the tests do not compute.
pub fn companion(key: &str, name: &str) -> String {
    let tag = key
        .find('{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.find('}').map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty());
    let tag = match tag {
        Some(tag) => tag,
        None if !key.is_empty() && !key.contains('}') => key,
        None => panic!(
            "common::companion({key:?}, {name:?}): a key without a hash tag that cannot be one \
             (empty, or holding a '}}') has its companions under a tag of its slot; use a key \
             with a tag or without '}}'"
        ),
    };
    format!("{{{tag}}}:redbloom:{}:{key}:{name}", key.len())
}

/// The filter key and the companion name (`KEY`, `NAME`) of the companion key `full`
/// (`{TAG}:redbloom:LEN:KEY:NAME`, see [`companion`]); `None` for any other key.
pub fn companion_of(full: &str) -> Option<(&str, &str)> {
    let close = full.strip_prefix('{')?.find('}')? + 1;
    let rest = full[close + 1..].strip_prefix(":redbloom:")?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let key = rest.get(..len)?;
    let name = rest.get(len..)?.strip_prefix(':')?;
    Some((key, name))
}

/// Whether `name` is a record of exact answers across retries: a companion `once:*` of a
/// filter's key, a shard's, a window filter's generations or a growing filter's levels.
pub fn is_record(name: &str) -> bool {
    companion_of(name).is_some_and(|(_, name)| name.starts_with("once:"))
}

/// The hex of the bytes Redis holds at `key` (`GET`), empty for a missing key.
pub async fn key_hex(conn: &mut MultiplexedConnection, key: &str) -> String {
    let bytes: Option<Vec<u8>> = redis::cmd("GET").arg(key).query_async(conn).await.unwrap();
    bytes
        .unwrap_or_default()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `key` exists.
pub async fn key_exists(conn: &mut MultiplexedConnection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    n == 1
}

/// Calls of `command` the server has served since its statistics were last reset (`INFO
/// commandstats`; the commands scripts run count too).
pub async fn calls(conn: &mut MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    commandstats_calls(&info, command)
}

/// What `call` gives, and the calls of `command` the server served while it ran ([`calls`]
/// before and after: on a server of the test's own, no other client's commands count).
pub async fn calls_during<T>(
    conn: &mut MultiplexedConnection,
    command: &str,
    call: impl std::future::Future<Output = T>,
) -> (T, u64) {
    let before = calls(conn, command).await;
    let outcome = call.await;
    (outcome, calls(conn, command).await - before)
}

/// The server's clock in ms (`TIME`).
pub async fn server_ms(conn: &mut MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs * 1000 + micros / 1000
}

/// Runs `scenario` until a run of it falls within one epoch (`epoch` of the server's clock in
/// ms), `reset` before each run after the first; the outcome of that run. A window filter's
/// generations begin at the epochs' boundaries: a run across one splits the items over two
/// generations, and runs again from the start (every round of it, so that each round finds
/// what the rounds before it left).
pub async fn within_one_epoch<T, Run, Reset>(
    mut conn: MultiplexedConnection,
    epoch: impl Fn(u64) -> u64,
    mut scenario: impl FnMut() -> Run,
    mut reset: impl FnMut() -> Reset,
) -> T
where
    Run: std::future::Future<Output = T>,
    Reset: std::future::Future<Output = ()>,
{
    for run in 0..50 {
        if run > 0 {
            reset().await;
        }
        let before = epoch(server_ms(&mut conn).await);
        let outcome = scenario().await;
        if epoch(server_ms(&mut conn).await) == before {
            return outcome;
        }
    }
    panic!("50 runs of the scenario each crossed an epoch's boundary: it takes too long");
}

/// The generation a window filter of `window` over `generations` generations is in at the
/// server's time `ms` (the epoch [`within_one_epoch`] takes): one begins every
/// `window / (generations - 1)`.
pub fn generation_at(window: std::time::Duration, generations: u32) -> impl Fn(u64) -> u64 {
    let window = window.as_millis() as u64;
    move |ms| ms * u64::from(generations - 1) / window
}

/// Round after round, `big`'s `add_many` of each batch of `rounds` and `small`'s of the same
/// batch in chunks of `chunk`, every round within one generation of `big`'s (both filters
/// cleared and every round again when a boundary falls inside): per round, the two answers.
pub async fn big_and_small_rounds(
    conn: &MultiplexedConnection,
    (big, small): (
        &redbloom::WindowBloom<MultiplexedConnection>,
        &redbloom::WindowBloom<MultiplexedConnection>,
    ),
    rounds: &[&[String]],
    chunk: usize,
) -> Vec<(Vec<bool>, Vec<bool>)> {
    within_one_epoch(
        conn.clone(),
        generation_at(big.window(), big.generations()),
        || async move {
            let mut runs = Vec::new();
            for &batch in rounds {
                let whole = big.add_many(batch).await.unwrap();
                let mut chunked = Vec::new();
                for part in batch.chunks(chunk) {
                    chunked.extend(small.add_many(part).await.unwrap());
                }
                runs.push((whole, chunked));
            }
            runs
        },
        || async move {
            big.clear().await.unwrap();
            small.clear().await.unwrap();
        },
    )
    .await
}

/// The calls of `command` in an `INFO commandstats` reply (0 when it has none).
pub fn commandstats_calls(info: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The keys matching `pattern` (`KEYS`), sorted.
pub async fn keys_like<C: redis::aio::ConnectionLike + Send>(
    conn: &mut C,
    pattern: &str,
) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(conn)
        .await
        .unwrap();
    keys.sort();
    keys
}

/// Every key matching `pattern` (`KEYS`), sorted, with its `DUMP`: what any write to them
/// changes.
pub async fn dumps<C: redis::aio::ConnectionLike + Send>(
    conn: &mut C,
    pattern: &str,
) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in keys_like(conn, pattern).await {
        let bytes: Vec<u8> = redis::cmd("DUMP")
            .arg(&name)
            .query_async(conn)
            .await
            .unwrap();
        out.push((name, bytes));
    }
    out
}

/// The key's `PTTL`: milliseconds, -1 without a TTL, -2 when missing.
pub async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

/// `SET key bytes`: a filter written by another program (go-zero, say).
pub async fn set_bytes(conn: &mut MultiplexedConnection, key: &str, bytes: &[u8]) {
    let () = redis::cmd("SET")
        .arg(key)
        .arg(bytes)
        .query_async(conn)
        .await
        .unwrap();
}

/// The retry policy of the fault tests: 20 s from a step's first attempt, waiting 20 ms, then
/// twice as long each time, at most 200 ms, so that a resumed or restarted server is met soon.
pub fn fault_retry() -> redbloom::Retry {
    redbloom::Retry::for_duration(std::time::Duration::from_secs(20)).with_delays(
        std::time::Duration::from_millis(20),
        std::time::Duration::from_millis(200),
    )
}

/// A reconnecting connection whose commands time out after `timeout` (and connecting too),
/// so that a stopped or restarting server makes the commands in flight time out and be
/// retried: for fault tests.
pub async fn impatient(url: &str, timeout: std::time::Duration) -> redis::aio::ConnectionManager {
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_response_timeout(Some(timeout))
        .set_connection_timeout(Some(timeout.max(std::time::Duration::from_millis(300))));
    redis::Client::open(url)
        .unwrap()
        .get_connection_manager_with_config(config)
        .await
        .unwrap()
}

/// A multiplexed connection to `url` with 10 s response and connection timeouts (as
/// [`TestRedis::connection`]), for tests that start their own [`RedisServer`]s.
pub async fn connect(url: &str) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(std::time::Duration::from_secs(10)))
        .set_connection_timeout(Some(std::time::Duration::from_secs(10)));
    redis::Client::open(url)
        .expect("valid URL")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap_or_else(|err| panic!("cannot connect to {url}: {err}"))
}

/// Every key of a private server (`SCAN`) with its `DUMP` (the value's exact bytes and type)
/// and whether it has a TTL: two of these compare equal when a step wrote nothing.
pub async fn keyspace(
    conn: &mut MultiplexedConnection,
) -> std::collections::BTreeMap<String, (Vec<u8>, bool)> {
    let mut keys: Vec<String> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut out = std::collections::BTreeMap::new();
    for key in keys {
        let dump: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        if let Some(dump) = dump {
            let ttl = pttl(conn, &key).await;
            out.insert(key, (dump, ttl > 0));
        }
    }
    out
}

/// The staging keys an import of a plain, counting or module filter leaves while it runs
/// (the companions `import:*` of a filter's key or of a shard's, [`companion`]), with their
/// `PTTL`.
pub async fn staging_keys(conn: &mut MultiplexedConnection) -> Vec<(String, i64)> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*:redbloom:*:import:*")
        .query_async(conn)
        .await
        .unwrap();
    let mut out = Vec::new();
    let staging =
        |key: &String| companion_of(key).is_some_and(|(_, name)| name.starts_with("import:"));
    for key in keys.into_iter().filter(staging) {
        let ttl = pttl(conn, &key).await;
        out.push((key, ttl));
    }
    out
}

/// The keys whose value or TTL presence differs between two [`keyspace`]s (sorted, each once).
pub fn changed_keys(
    before: &std::collections::BTreeMap<String, (Vec<u8>, bool)>,
    after: &std::collections::BTreeMap<String, (Vec<u8>, bool)>,
) -> Vec<String> {
    let all: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    all.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect()
}
