//! Chaos (issue 23): writers of every kind while the server is killed (`kill -9`, then started
//! again from its AOF, `appendfsync always`), stopped with commands in flight (SIGSTOP) and has
//! its clients' connections killed (`CLIENT KILL`), in turns, until the writers are done. Every
//! acknowledged item is found after; "new" answers equal a clean load's; a counting filter's
//! items added twice and removed once are each still counted once, and removed once more leave
//! every counter at zero. Each restart mends the AOF first, as `redis-check-aof --fix` does: a
//! kill mid-append can leave a transaction's head that Redis 7.0 would run two starts later
//! (`a_transaction_cut_short_by_a_kill_is_never_run`, at the end).

mod common;

use common::server::RedisServer;
use redbloom::kind::Kind;
use redbloom::{Bloom, Builder, CountingBloom, GrowingBloom, RedisBloom, WindowBloom};
use redis::aio::ConnectionManager;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TASKS: usize = 4;
const CALLS: usize = 30;
const PER_CALL: usize = 40;

fn durable() -> RedisServer {
    RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])
    .unwrap()
}

async fn filter<K: Kind>(builder: Builder<K>, url: &str) -> Bloom<ConnectionManager, K> {
    builder
        .retry(common::fault_retry())
        .build(common::impatient(url, Duration::from_millis(300)).await)
        .unwrap()
}

fn items(task: usize, call: usize) -> Vec<String> {
    (0..PER_CALL)
        .map(|i| format!("chaos:{task}:{call}:{i}"))
        .collect()
}

fn all_items() -> impl Iterator<Item = Vec<String>> {
    (0..TASKS).flat_map(|task| (0..CALLS).map(move |call| items(task, call)))
}

/// Runs `tasks` (each a future giving a count, and adding to `progress` after each call of the
/// `total` they make) while faults hit the server in turns as the calls progress (one after
/// each eighth of them, six in all, so every fault meets calls in flight): CLIENT KILL of every
/// normal client, SIGSTOP for 600 ms, kill -9 and a start from the AOF. The sum of the tasks'
/// counts, and how many faults of each kind hit them.
async fn under_chaos<Fut>(
    server: &mut RedisServer,
    (progress, total): (&AtomicUsize, usize),
    tasks: Vec<Fut>,
) -> (usize, [usize; 3])
where
    Fut: Future<Output = usize> + Send + 'static,
{
    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
    let mut faults = [0; 3];
    for turn in 0..6 {
        while progress.load(Ordering::Relaxed) < (turn + 1) * total / 8 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        match turn % 3 {
            0 => {
                let url = server.url();
                let mut admin = common::connect(&url).await;
                let killed: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .arg("SKIPME")
                    .arg("yes")
                    .query_async(&mut admin)
                    .await
                    .unwrap();
                assert!(killed > 0, "no client to kill");
            }
            1 => {
                server.pause();
                tokio::time::sleep(Duration::from_millis(600)).await;
                server.resume();
            }
            _ => tokio::task::block_in_place(|| server.restart().unwrap()),
        }
        assert!(
            progress.load(Ordering::Relaxed) < total,
            "the calls were done"
        );
        faults[turn % 3] += 1;
    }
    let mut sum = 0;
    for handle in handles {
        sum += handle.await.expect("a writer panicked");
    }
    (sum, faults)
}

/// Adds every task's items under chaos to a filter of `kind`, and cleanly to another: the
/// "new" answers of each; then asserts every item is found.
async fn adds<K: Kind>(kind: fn(&str) -> Builder<K>) {
    let mut server = durable();
    let url = server.url();
    let clean = filter(kind("clean"), &url).await;
    let mut want = 0;
    for batch in all_items() {
        want += clean
            .add_many(&batch)
            .await
            .unwrap()
            .iter()
            .filter(|&&n| n)
            .count();
    }
    let stormy = filter(kind("stormy"), &url).await;
    let progress = Arc::new(AtomicUsize::new(0));
    let tasks = (0..TASKS)
        .map(|task| {
            let (stormy, progress) = (stormy.clone(), progress.clone());
            async move {
                let mut new = 0;
                for call in 0..CALLS {
                    let answers = stormy.add_many(&items(task, call)).await;
                    let answers = answers.expect("an add under chaos");
                    new += answers.iter().filter(|&&n| n).count();
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                new
            }
        })
        .collect();
    let (got, faults) = under_chaos(&mut server, (&progress, TASKS * CALLS), tasks).await;
    assert_eq!(
        got, want,
        "new under chaos ({faults:?}), against a clean load"
    );
    for batch in all_items() {
        let present = stormy.exists_many(&batch).await.unwrap();
        assert!(present.iter().all(|&p| p), "an acknowledged item is gone");
    }
}

/// Sized so that a false positive, whose place depends on the order items arrive in, is
/// unlikely: "new" then does not depend on it.
fn native(key: &str) -> Builder<redbloom::kind::Plain> {
    RedisBloom::builder(key)
        .layout(redbloom::Layout::Native)
        .expected_items(100_000)
        .false_positive_rate(1e-4)
}

fn window(key: &str) -> Builder<redbloom::kind::Window> {
    WindowBloom::builder(key, Duration::from_secs(3600))
        .expected_items(100_000)
        .false_positive_rate(1e-4)
}

fn growing(key: &str) -> Builder<redbloom::kind::Growing> {
    GrowingBloom::builder(key)
        .expected_items(1_000)
        .false_positive_rate(1e-6)
}

fn counting(key: &str) -> Builder<redbloom::kind::Counting> {
    CountingBloom::builder(key)
        .expected_items(100_000)
        .false_positive_rate(1e-4)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_filter_keeps_every_item_and_answer() {
    adds(native).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_filter_keeps_every_item_and_answer() {
    adds(window).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_growing_filter_keeps_every_item_and_answer() {
    adds(growing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counting_filter_keeps_every_count() {
    let mut server = durable();
    let url = server.url();
    let bloom = filter(counting("counted"), &url).await;
    // Every item added twice, by four writers under chaos; new answers as a clean load's.
    let progress = Arc::new(AtomicUsize::new(0));
    let tasks = (0..TASKS)
        .map(|task| {
            let (bloom, progress) = (bloom.clone(), progress.clone());
            async move {
                let mut new = 0;
                for _ in 0..2 {
                    for call in 0..CALLS {
                        let answers = bloom.add_many(&items(task, call)).await;
                        new += answers
                            .expect("an add under chaos")
                            .iter()
                            .filter(|&&n| n)
                            .count();
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                }
                new
            }
        })
        .collect();
    let (new, faults) = under_chaos(&mut server, (&progress, 2 * TASKS * CALLS), tasks).await;
    assert_eq!(
        new,
        TASKS * CALLS * PER_CALL,
        "each item new once ({faults:?})"
    );
    // Each removed once, by two writers under chaos.
    let progress = Arc::new(AtomicUsize::new(0));
    let tasks = (0..2)
        .map(|half| {
            let (bloom, progress) = (bloom.clone(), progress.clone());
            async move {
                let mut removed = 0;
                for task in (0..TASKS).filter(|task| task % 2 == half) {
                    for call in 0..CALLS {
                        let answers = bloom.remove_many(&items(task, call)).await;
                        removed += answers
                            .expect("a remove under chaos")
                            .iter()
                            .filter(|&&r| r)
                            .count();
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                }
                removed
            }
        })
        .collect();
    let (removed, faults) = under_chaos(&mut server, (&progress, TASKS * CALLS), tasks).await;
    assert_eq!(
        removed,
        TASKS * CALLS * PER_CALL,
        "each removed once ({faults:?})"
    );
    for batch in all_items() {
        let present = bloom.exists_many(&batch).await.unwrap();
        assert!(
            present.iter().all(|&p| p),
            "added twice, removed once: gone ({faults:?})"
        );
        bloom.remove_many(&batch).await.unwrap();
    }
    let mut conn = common::connect(&url).await;
    let left: u64 = redis::cmd("BITCOUNT")
        .arg("counted")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        left, 0,
        "counter bits left after every item was removed twice"
    );
}

/// What the fault tests rely on from the harness (`RedisServer::restart`): a transaction that a
/// kill cut short in the AOF is never run. Written as a crash leaves it (`MULTI`, a whole
/// command, half of the next), then a script's two writes (a transaction of their own), and
/// a second restart: Redis 7.0 loads the torn head at the first restart (it cuts inside the
/// block) and runs it with the script's transaction at the second; the harness cuts it off.
#[tokio::test]
async fn a_transaction_cut_short_by_a_kill_is_never_run() {
    let mut server = durable();
    let mut conn = common::connect(&server.url()).await;
    let _: () = redis::cmd("SET")
        .arg("before")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    server.kill();
    let dir = server.dir().join("appendonlydir");
    let manifest = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap();
    let incr = manifest
        .lines()
        .rev()
        .find(|line| line.ends_with("type i"))
        .and_then(|line| line.split(' ').nth(1))
        .expect("an incr file");
    let torn = "*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$5\r\nghost\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\nx";
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join(incr))
        .unwrap();
    std::io::Write::write_all(&mut file, torn.as_bytes()).unwrap();
    drop(file);
    server.restart().unwrap();
    let mut conn = common::connect(&server.url()).await;
    let _: () = redis::cmd("EVAL")
        .arg("redis.call('set', 'after', 1) redis.call('set', 'after2', 1)")
        .arg(0)
        .query_async(&mut conn)
        .await
        .unwrap();
    server.restart().unwrap();
    let mut conn = common::connect(&server.url()).await;
    let values: Vec<Option<i64>> = redis::cmd("MGET")
        .arg(&["before", "after", "after2", "ghost"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        values,
        [Some(1), Some(1), Some(1), None],
        "acknowledged writes kept, the torn transaction never run"
    );
}
