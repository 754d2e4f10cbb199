//! Group commit (issue 24): single-item calls from many tasks go to Redis as a few steps of
//! many items, each caller getting its own answer as sequential calls would give it; a caller
//! that gives up waiting is withdrawn, and a leader dropped mid-step hands its lane on.

mod common;

use common::server::RedisServer;
use redbloom::kind::Kind;
use redbloom::{Builder, CountingBloom, Error, GrowingBloom, RedisBloom, WindowBloom};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TASKS: usize = 64;
const PER_TASK: usize = 40;

/// A connection that counts the round trips sent through it (a command, or a pipeline or
/// transaction): the steps a filter sends.
#[derive(Clone)]
struct Counted {
    conn: MultiplexedConnection,
    sent: Arc<AtomicU64>,
}

impl Counted {
    /// A connection to `url` that counts, and its count.
    async fn connect(url: &str) -> (Self, Arc<AtomicU64>) {
        let sent = Arc::new(AtomicU64::new(0));
        let conn = Counted {
            conn: common::connect(url).await,
            sent: sent.clone(),
        };
        (conn, sent)
    }
}

impl ConnectionLike for Counted {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.conn.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.conn.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

/// Every task adds its items one call at a time, all tasks at once; each item is added by two
/// tasks. The "new" answers in all, and the round trips the filter sent for them.
async fn single_adds<K: Kind>(url: &str, builder: Builder<K>) -> (usize, u64)
where
    redbloom::Bloom<Counted, K>: Clone,
{
    let (conn, sent) = Counted::connect(url).await;
    let bloom = builder.build(conn).unwrap();
    // The filter's first write (parameters, eviction check) before the count starts.
    bloom.add("warm-up").await.unwrap();
    let before = sent.load(Ordering::Relaxed);
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let bloom = bloom.clone();
            tokio::spawn(async move {
                let mut new = 0;
                for i in 0..PER_TASK {
                    // Tasks 2n and 2n+1 add the same items.
                    if bloom.add(format!("{}:{i}", task / 2)).await.unwrap() {
                        new += 1;
                    }
                }
                new
            })
        })
        .collect();
    let mut new = 0;
    for task in tasks {
        new += task.await.unwrap();
    }
    let steps = sent.load(Ordering::Relaxed) - before;
    for task in 0..TASKS / 2 {
        for i in 0..PER_TASK {
            assert!(bloom.exists(format!("{task}:{i}")).await.unwrap());
        }
    }
    (new, steps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_calls_from_many_tasks_go_as_few_steps_with_exact_answers() {
    // A server of its own: the test counts its commands.
    let server = RedisServer::start().expect("redis-server on PATH");
    let url = server.url();
    let distinct = TASKS / 2 * PER_TASK;
    let sized = |n: u64| (n, 1e-6);
    for grouped in [true, false] {
        let (items, fpr) = sized(100_000);
        let key = |kind: &str| format!("group:{kind}:{grouped}");
        let runs = [
            (
                "native",
                single_adds(
                    &url,
                    RedisBloom::builder(key("native"))
                        .layout(redbloom::Layout::Native)
                        .expected_items(items)
                        .false_positive_rate(fpr)
                        .group_commit(grouped),
                )
                .await,
            ),
            (
                "go-zero",
                single_adds(
                    &url,
                    RedisBloom::builder(key("gozero"))
                        .expected_items(items)
                        .false_positive_rate(fpr)
                        .group_commit(grouped),
                )
                .await,
            ),
            (
                "window",
                single_adds(
                    &url,
                    WindowBloom::builder(key("window"), Duration::from_secs(3600))
                        .expected_items(items)
                        .false_positive_rate(fpr)
                        .group_commit(grouped),
                )
                .await,
            ),
            (
                "counting",
                single_adds(
                    &url,
                    CountingBloom::builder(key("counting"))
                        .expected_items(items)
                        .false_positive_rate(fpr)
                        .group_commit(grouped),
                )
                .await,
            ),
            (
                "growing",
                single_adds(
                    &url,
                    GrowingBloom::builder(key("growing"))
                        .expected_items(items)
                        .false_positive_rate(fpr)
                        .group_commit(grouped),
                )
                .await,
            ),
        ];
        for (kind, (new, steps)) in runs {
            let calls = (TASKS * PER_TASK) as u64;
            assert_eq!(
                new, distinct,
                "{kind}, grouped {grouped}: each item new once"
            );
            // Grouped, 64 tasks' calls go several items a step (2 or 4 steps in flight).
            match grouped {
                true => assert!(
                    steps * 3 < calls,
                    "{kind}: {steps} round trips for {calls} single adds"
                ),
                false => assert!(
                    steps >= calls,
                    "{kind}, not grouped: {steps} round trips for {calls} single adds"
                ),
            }
        }
    }
}

/// Half of `TASKS * PER_TASK` items added, then each checked alone (one call at a time), then
/// by `TASKS` tasks at once, each checking its share one call at a time: every caller gets the
/// answer the check alone gave, in fewer round trips than calls.
async fn single_checks<K: Kind>(url: &str, builder: Builder<K>, kind: &str)
where
    redbloom::Bloom<Counted, K>: Clone,
{
    let (conn, sent) = Counted::connect(url).await;
    let bloom = builder.build(conn).unwrap();
    let items: Vec<String> = (0..TASKS * PER_TASK).map(|i| format!("c{i}")).collect();
    let added: Vec<&String> = items.iter().step_by(2).collect();
    bloom.add_many(&added).await.unwrap();
    let mut alone = Vec::with_capacity(items.len());
    for item in &items {
        alone.push(bloom.exists(item).await.unwrap());
    }
    assert!(alone.iter().step_by(2).all(|&found| found), "{kind}: lost");
    let before = sent.load(Ordering::Relaxed);
    let tasks: Vec<_> = items
        .chunks(PER_TASK)
        .map(|share| {
            let (bloom, share) = (bloom.clone(), share.to_vec());
            tokio::spawn(async move {
                let mut found = Vec::with_capacity(share.len());
                for item in &share {
                    found.push(bloom.exists(item).await.unwrap());
                }
                found
            })
        })
        .collect();
    let mut grouped = Vec::with_capacity(items.len());
    for task in tasks {
        grouped.extend(task.await.unwrap());
    }
    let steps = sent.load(Ordering::Relaxed) - before;
    assert!(grouped == alone, "{kind}: a grouped check's answer differs");
    let calls = items.len() as u64;
    assert!(
        steps * 3 < calls,
        "{kind}: {steps} round trips for {calls} single checks"
    );
}

/// The kinds whose single checks go by group commit (a growing filter over two levels, a
/// window filter): each caller gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_checks_from_many_tasks_get_their_own_answers() {
    // A server of its own: the test counts its commands.
    let server = RedisServer::start().expect("redis-server on PATH");
    let url = server.url();
    let growing = GrowingBloom::builder("checks:growing")
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .growth(2);
    single_checks(&url, growing, "growing").await;
    let window = WindowBloom::builder("checks:window", Duration::from_secs(3600))
        .expected_items(10_000)
        .false_positive_rate(0.01);
    single_checks(&url, window, "window").await;
}

/// A filter whose calls wait at most `timeout`, on a connection that waits 10 s for a reply.
async fn patient_filter(
    url: &str,
    key: &str,
    timeout: Duration,
) -> RedisBloom<MultiplexedConnection> {
    RedisBloom::builder(key)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .timeout(timeout)
        .build(common::connect(url).await)
        .unwrap()
}

/// A caller waiting behind a step that does not answer (the server stopped) ends by its own
/// deadline, with an error, whatever the step ahead of it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_caller_ends_by_its_own_deadline() {
    // A server of its own: the test stops it.
    let server = RedisServer::start().expect("redis-server on PATH");
    let url = server.url();
    let timeout = Duration::from_millis(400);
    let bloom = Arc::new(patient_filter(&url, "deadline", timeout).await);
    bloom.add("warm-up").await.unwrap();
    server.pause();
    let leader = {
        let bloom = bloom.clone();
        tokio::spawn(async move { bloom.add("leader").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let waited = bloom.add("follower").await;
    let took = started.elapsed();
    server.resume();
    assert!(
        matches!(
            waited,
            Err(Error::Deadline(_) | Error::OutcomeUnknown { .. } | Error::Timeout(_))
        ),
        "{waited:?}"
    );
    assert!(took < timeout + Duration::from_millis(300), "took {took:?}");
    assert!(
        leader.await.unwrap().is_err(),
        "the leader's step met the stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_dropped_mid_step_hands_its_lane_on() {
    let server = RedisServer::start().expect("redis-server on PATH");
    let url = server.url();
    let bloom = Arc::new(patient_filter(&url, "dropped", Duration::from_secs(20)).await);
    bloom.add("warm-up").await.unwrap();
    server.pause();
    let leader = {
        let bloom = bloom.clone();
        tokio::spawn(async move { bloom.add("leader").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let follower = {
        let bloom = bloom.clone();
        tokio::spawn(async move { bloom.add("follower").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    leader.abort();
    server.resume();
    let answer = tokio::time::timeout(Duration::from_secs(10), follower)
        .await
        .expect("the follower's call went on")
        .unwrap();
    assert!(answer.unwrap(), "the follower's own step added its item");
    assert!(bloom.exists("follower").await.unwrap());
    // The lane is free again: a lone call goes at once.
    assert!(bloom.add("after").await.unwrap());
}

/// A step that fails gives its error to every caller in it: 64 tasks' single adds while the
/// server is stopped, on a connection that waits 100 ms for a reply and no retries, all get
/// the step's `Timeout`, none a success or another error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_reaches_every_caller() {
    // A server of its own: the test stops it.
    let server = RedisServer::start().expect("redis-server on PATH");
    let conn = common::impatient(&server.url(), Duration::from_millis(100)).await;
    let bloom = RedisBloom::builder("group-failed")
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(conn)
        .unwrap();
    // The handle's first call learns the server (its eviction policy, the parameters): the
    // calls below go straight to their lane.
    assert!(bloom.add("first").await.unwrap());
    server.pause();
    let calls: Vec<_> = (0..TASKS)
        .map(|i| {
            let bloom = bloom.clone();
            tokio::spawn(async move { bloom.add(format!("item:{i}")).await })
        })
        .collect();
    let answers = futures_util::future::join_all(calls).await;
    server.resume();
    for answer in answers {
        let answer = answer.unwrap();
        assert!(matches!(answer, Err(Error::Timeout(_))), "{answer:?}");
    }
}

/// A lone call goes at once: sequential single adds send one round trip each, grouped or
/// not, and take about as long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_call_is_not_delayed() {
    let redis = common::redis().await;
    let mut took = Vec::new();
    for grouped in [false, true] {
        let sent = Arc::new(AtomicU64::new(0));
        let conn = Counted {
            conn: redis.connection().await,
            sent: sent.clone(),
        };
        let bloom = RedisBloom::builder(common::unique_key("lone"))
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .group_commit(grouped)
            .build(conn)
            .unwrap();
        bloom.add("warm-up").await.unwrap();
        let before = sent.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        for i in 0..200 {
            assert!(bloom.add(format!("lone:{i}")).await.unwrap());
        }
        took.push(started.elapsed());
        assert_eq!(
            sent.load(Ordering::Relaxed) - before,
            200,
            "grouped {grouped}: one round trip per call"
        );
    }
    assert!(
        took[1] < took[0] * 2 + Duration::from_millis(50),
        "200 lone adds: {:?} alone, {:?} grouped",
        took[0],
        took[1]
    );
}
