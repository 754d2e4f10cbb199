//! The `WAIT` tests' shared runs: a primary and a replica in sync with it (started by the
//! test), a filter on each, the checks of a write no replica confirmed (the library's
//! `Error::NotReplicated`, the CLI's one line naming how many confirmed, each within about the
//! WAIT timeout), and the CLI's arguments with `--wait-replicas`. `wait_replicas.rs` (the plain
//! filter), `counting_wait.rs`, `window_wait.rs` and `growing_wait.rs` use them.

use crate::common::{self, cli::redbloom, server::RedisServer};
use assert_cmd::Command;
use redbloom::kind::Kind;
use redbloom::{Bloom, Builder, Error};
use redis::aio::MultiplexedConnection;
use serde_json::Value;
use std::future::Future;
use std::time::{Duration, Instant};

/// A primary and a replica in sync with it.
pub async fn primary_and_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start().expect("redis-server on PATH");
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
        &port,
    ])
    .unwrap();
    let mut conn = common::connect(&replica.url()).await;
    let started = Instant::now();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .unwrap();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the replica never synced: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (primary, replica)
}

/// The filter of `builder` on the server at `url`, whose writes wait for one replica up to
/// `wait` (`None`: they do not wait). Its connection's replies may take 10 s: several `WAIT`s
/// of a sharded filter's write queue behind each other on it (redis-rs's default response
/// timeout is 500 ms).
pub async fn filter<K: Kind>(
    url: &str,
    builder: Builder<K>,
    wait: Option<Duration>,
) -> Bloom<MultiplexedConnection, K> {
    match wait {
        Some(timeout) => builder.wait_for_replicas(1, timeout),
        None => builder,
    }
    .build(common::connect(url).await)
    .unwrap()
}

/// The filter of `builder` on `primary`, its writes waiting up to 5 s for the replica, and the
/// same filter on `replica`, read there and never waiting: what its reads find, the replica
/// had when the write returned.
pub async fn on_primary_and_replica<K: Kind>(
    primary: &RedisServer,
    replica: &RedisServer,
    builder: Builder<K>,
) -> (
    Bloom<MultiplexedConnection, K>,
    Bloom<MultiplexedConnection, K>,
) {
    let waiting = filter(
        &primary.url(),
        builder.clone(),
        Some(Duration::from_secs(5)),
    )
    .await;
    (waiting, filter(&replica.url(), builder, None).await)
}

/// The filter of `builder` on `primary`, its writes waiting up to 5 s for the replica on a
/// connection whose replies time out after 300 ms (a `WAIT` longer than that is a transient
/// error, and the write goes again with it), retried for up to 20 s.
pub async fn impatient_waiting<K: Kind>(
    primary: &RedisServer,
    builder: Builder<K>,
) -> Bloom<redis::aio::ConnectionManager, K> {
    builder
        .retry(common::fault_retry())
        .wait_for_replicas(1, Duration::from_secs(5))
        .build(common::impatient(&primary.url(), Duration::from_millis(300)).await)
        .unwrap()
}

/// Runs `write` while `replica` is stopped (SIGSTOP) for its first 1.5 s: its `WAIT`s time out
/// on the client until the replica is back. The write's outcome, and the replica (running).
pub async fn with_replica_stopped<T, F: Future<Output = T>>(
    replica: RedisServer,
    write: F,
) -> (T, RedisServer) {
    replica.pause();
    let resume = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        replica.resume();
        replica
    });
    let outcome = write.await;
    (outcome, resume.await.unwrap())
}

/// A dense add of 10,000 items, under [`with_replica_stopped`], into the filter of `builder`
/// (sized so that such a batch takes its dense path, which records its reply): its answers are
/// read back from its record at every retry, so the items it added are still "new" (an
/// attempt applied again would find their bits set and answer "seen").
pub async fn dense_add_retried_for_its_wait<K: Kind>(builder: Builder<K>) {
    let (primary, replica) = primary_and_replica().await;
    let bloom = filter(
        &primary.url(),
        builder.clone(),
        Some(Duration::from_secs(5)),
    )
    .await;
    bloom.add("first").await.unwrap();
    let impatient = impatient_waiting(&primary, builder).await;
    let batch = super::items("dense", 10_000);
    let (answers, _replica) = with_replica_stopped(replica, impatient.add_many(&batch)).await;
    let answers = answers.unwrap();
    let new = super::count(&answers);
    assert!(new > 9_900, "{new} of 10,000 new");
    assert_eq!(
        super::count(&bloom.exists_many(&batch).await.unwrap()),
        10_000
    );
}

/// Asserts that the filter `on_replica` (read on the replica) finds every one of `items` the
/// primary acknowledged.
pub async fn assert_on_the_replica<K: Kind>(
    key: &str,
    on_replica: &Bloom<MultiplexedConnection, K>,
    items: &[String],
) {
    assert_eq!(
        super::count(&on_replica.exists_many(items).await.unwrap()),
        items.len(),
        "{key}: acknowledged means on the replica"
    );
}

/// Asserts `result` is `Error::NotReplicated`: none of the one replica wanted confirmed.
#[track_caller]
pub fn assert_not_replicated<T: std::fmt::Debug>(
    key: &str,
    what: &str,
    result: redbloom::Result<T>,
) {
    match result {
        Err(Error::NotReplicated {
            acked: 0,
            wanted: 1,
        }) => {}
        other => panic!("{key}: {what}: expected NotReplicated, got {other:?}"),
    }
}

/// Asserts the write `write` fails as [`assert_not_replicated`], within about one WAIT timeout
/// (200 ms) of the write itself: 2 s for one item or a few, 5 s for 20,000 (a `what` starting
/// with "big": several commands per key, the scripts' work on the server).
pub async fn assert_not_replicated_quickly<T: std::fmt::Debug>(
    key: &str,
    what: &str,
    write: impl Future<Output = redbloom::Result<T>>,
) {
    let started = Instant::now();
    let result = write.await;
    assert_not_replicated(key, what, result);
    let took = started.elapsed();
    let limit = Duration::from_secs(if what.starts_with("big") { 5 } else { 2 });
    assert!(took < limit, "{key}: {what} took {took:?}");
}

/// The CLI on a filter: `redbloom --url URL --key KEY`, the filter's `size` flags,
/// `--wait-replicas 1 --timeout T` when it waits, `--shards`, `--json`, then a verb.
pub struct WaitCli<'a> {
    /// The flags of the filter's kind and size.
    pub size: &'a [&'a str],
    pub shards: &'a str,
    pub key: String,
}

impl<'a> WaitCli<'a> {
    /// The CLI on a new filter of `size` and `shards`, whose key names `what`.
    pub fn new(size: &'a [&'a str], shards: &'a str, what: &str) -> Self {
        let key = common::unique_key(what);
        WaitCli { size, shards, key }
    }

    /// The command running `verb` on the server at `url`, waiting for one replica up to `wait`
    /// seconds (`--timeout`, also the WAIT timeout) when it is `Some`.
    pub fn command(&self, url: &str, wait: Option<&str>, verb: &[&str]) -> Command {
        let mut args: Vec<&str> = self.size.to_vec();
        if let Some(timeout) = wait {
            args.extend(["--wait-replicas", "1", "--timeout", timeout]);
        }
        args.extend(["--shards", self.shards, "--json"]);
        args.extend_from_slice(verb);
        redbloom(url, &self.key, &args)
    }

    /// Runs [`command`](Self::command): (exit status, JSON answer, stderr).
    pub fn run(&self, url: &str, wait: Option<&str>, verb: &[&str]) -> (i32, Value, String) {
        common::cli::run(self.command(url, wait, verb))
    }

    /// Runs `verb` on the primary at `url`, waiting up to `wait` seconds for a replica, and
    /// asserts it succeeds with `value` in its answer's `field`.
    #[track_caller]
    pub fn answers(&self, url: &str, wait: &str, verb: &[&str], field: &str, value: u64) {
        let (code, json, err) = self.run(url, Some(wait), verb);
        assert_eq!((code, json[field].as_u64()), (0, Some(value)), "{err}");
    }

    /// Runs `verb` on the replica at `url` (a read: no waiting) and asserts its exit status is
    /// `code` with `value` in its answer's `field`.
    #[track_caller]
    pub fn replica_answers(&self, url: &str, verb: &[&str], code: i32, field: &str, value: u64) {
        let (status, json, err) = self.run(url, None, verb);
        let key = &self.key;
        assert_eq!(
            (status, json[field].as_u64()),
            (code, Some(value)),
            "{key}: on the replica: {err}"
        );
    }
}

/// Asserts `cmd` (given `--retry-for 1`) fails within `limit` with one line naming how many
/// replicas confirmed (none of one: "0 of 1"); `what` names it in the message. The line.
#[track_caller]
pub fn assert_cli_not_replicated(mut cmd: Command, what: &str, limit: Duration) -> String {
    // Too few replicas is retried for --retry-for (a replica resyncing confirms soon): a
    // short budget, for a server that has none.
    cmd.args(["--retry-for", "1"]);
    let started = Instant::now();
    let stderr = common::cli::assert_fails(cmd, &["0 of 1", "replicas confirmed"], None);
    let took = started.elapsed();
    assert!(took < limit, "{what} took {took:?}: {stderr}");
    stderr
}

/// Against a lone server (no replica), each of `verbs` on a new filter of `size`, of each of
/// `shards`, with `--wait-replicas 1 --timeout 1` fails within `limit` naming how many
/// replicas confirmed; `name` names the kind in the keys.
pub fn the_cli_fails_without_a_replica(
    lone: &RedisServer,
    name: &str,
    size: &[&str],
    shards: &[&str],
    verbs: &[&[&str]],
    limit: Duration,
) {
    for shards in shards {
        let cli = WaitCli::new(size, shards, &format!("cli-{name}-not-durable-{shards}"));
        for verb in verbs {
            let cmd = cli.command(&lone.url(), Some("1"), verb);
            assert_cli_not_replicated(cmd, &format!("{shards} shard(s): {verb:?}"), limit);
        }
    }
}
