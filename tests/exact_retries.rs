//! Exact answers across retries (SPEC.md §3, issue 23 points 1 and 2) against a private server
//! stopped (SIGSTOP) with commands in flight: each in-flight command times out, is retried, and
//! is applied twice by the server once it resumes (the first attempt, then the retry). With a
//! record of each step, a retried add still answers "new" for the items it added, and a
//! counting write counts once; without one (`exact_retries(false)`), both break, which shows
//! the harness reaches the fault.

mod common;

use common::server::RedisServer;
use redbloom::kind::Kind;
use redbloom::{Builder, CountingBloom, GrowingBloom, ModuleBloom, RedisBloom, Retry, WindowBloom};
use redis::aio::ConnectionManager;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Writers, and items per call of each.
#[derive(Clone, Copy)]
struct Shape {
    tasks: usize,
    calls: usize,
    per_call: usize,
}

/// Many small calls: each goes by per-item commands.
const SMALL: Shape = Shape {
    tasks: 8,
    calls: 60,
    per_call: 20,
};

impl Shape {
    fn items(self) -> usize {
        self.tasks * self.calls * self.per_call
    }
}

fn retrying<K: Kind>(builder: Builder<K>) -> Builder<K> {
    builder.retry(common::fault_retry())
}

fn items(shape: Shape, task: usize, call: usize) -> Vec<String> {
    (0..shape.per_call)
        .map(|i| format!("exact:{task}:{call}:{i}"))
        .collect()
}

/// Runs `op` on every task's calls at once while the server is stopped twice for 700 ms with
/// commands in flight (once a quarter of the calls are done, and once half are); the number of
/// `true` answers. A call that would start once a stall is due waits until the server is
/// stopped, and then goes into it: every stall meets calls in flight, however fast the calls
/// before it ran (a few large calls could otherwise all finish before the stall began).
async fn under_stalls<F, Fut>(server: &RedisServer, shape: Shape, op: F) -> usize
where
    F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Vec<bool>> + Send,
{
    let op = Arc::new(op);
    let progress = Arc::new(AtomicUsize::new(0));
    let total = shape.tasks * shape.calls;
    let stalls = [total / 4, total / 2];
    let (begun, stopped) = tokio::sync::watch::channel(0usize);
    let tasks: Vec<_> = (0..shape.tasks)
        .map(|task| {
            let (op, progress, mut stopped) = (op.clone(), progress.clone(), stopped.clone());
            tokio::spawn(async move {
                let mut yes = 0;
                for call in 0..shape.calls {
                    let done = progress.load(Ordering::Relaxed);
                    let due = stalls.iter().filter(|&&at| done >= at).count();
                    stopped.wait_for(|&begun| begun >= due).await.unwrap();
                    yes += op(items(shape, task, call))
                        .await
                        .iter()
                        .filter(|&&b| b)
                        .count();
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                yes
            })
        })
        .collect();
    for (n, at) in stalls.into_iter().enumerate() {
        while progress.load(Ordering::Relaxed) < at {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        server.pause();
        let paused_at = progress.load(Ordering::Relaxed);
        begun.send_replace(n + 1);
        tokio::time::sleep(Duration::from_millis(700)).await;
        server.resume();
        assert!(paused_at < total, "the calls were done before the stall");
    }
    let mut yes = 0;
    for task in tasks {
        yes += task.await.expect("a writer panicked");
    }
    yes
}

/// Every task's items, each call's as one batch, on a server that never stops: what `op`
/// answers `true` for.
async fn clean<F, Fut>(shape: Shape, op: F) -> usize
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Vec<bool>>,
{
    let mut yes = 0;
    for task in 0..shape.tasks {
        for call in 0..shape.calls {
            yes += op(items(shape, task, call))
                .await
                .iter()
                .filter(|&&b| b)
                .count();
        }
    }
    yes
}

/// Every task's items added under stalls to a filter of `kind`, and the same added cleanly to
/// another: the items answered new by each, and the server's `BITOP`s (the dense paths') for
/// each load (clean, stalled).
async fn new_under_stalls<K: Kind>(
    kind: fn(&str) -> Builder<K>,
    shape: Shape,
    exact: bool,
) -> (usize, usize, (u64, u64)) {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let build = |key: &str| {
        let (builder, url) = (retrying(kind(key)).exact_retries(exact), url.clone());
        async move {
            builder
                .build(common::impatient(&url, Duration::from_millis(150)).await)
                .unwrap()
        }
    };
    let reference = build("reference").await;
    let want = clean(shape, |batch| {
        let reference = reference.clone();
        async move { reference.add_many(&batch).await.unwrap() }
    })
    .await;
    let clean_bitops = calls(&url, "bitop").await;
    // The reference's answers are themselves checked: the same load without records (other
    // commands or scripts) answers the same on a server that never stops. Patient: a reply
    // that timed out on a loaded machine would be retried unrecorded, "new" turned "seen".
    let unrecorded = retrying(kind("unrecorded"))
        .exact_retries(false)
        .build(common::impatient(&url, Duration::from_secs(10)).await)
        .unwrap();
    let plain = clean(shape, |batch| {
        let unrecorded = unrecorded.clone();
        async move { unrecorded.add_many(&batch).await.unwrap() }
    })
    .await;
    assert!(
        want == plain && want > 0,
        "new items: {want} recorded, {plain} unrecorded"
    );
    let before = calls(&url, "bitop").await;
    let bloom = build("stalled").await;
    let got = under_stalls(&server, shape, move |batch| {
        let bloom = bloom.clone();
        async move { bloom.add_many(&batch).await.expect("add_many under stalls") }
    })
    .await;
    let bitops = calls(&url, "bitop").await - before;
    (got, want, (clean_bitops, bitops))
}

fn native(key: &str) -> Builder<redbloom::kind::Plain> {
    RedisBloom::builder(key)
        .layout(redbloom::Layout::Native)
        .expected_items(100_000)
        .false_positive_rate(0.01)
}

fn gozero(key: &str) -> Builder<redbloom::kind::Plain> {
    RedisBloom::builder(key)
        .expected_items(100_000)
        .false_positive_rate(0.01)
        .engine(redbloom::Engine::Scripts)
}

fn window(key: &str) -> Builder<redbloom::kind::Window> {
    WindowBloom::builder(key, Duration::from_secs(3600))
        .expected_items(100_000)
        .false_positive_rate(0.01)
}

fn growing(key: &str) -> Builder<redbloom::kind::Growing> {
    // Levels of 2,000 items and more: the load makes three under the stalls. A rate low enough
    // that a false positive (which depends on the order items arrive in) is unlikely.
    GrowingBloom::builder(key)
        .expected_items(2_000)
        .false_positive_rate(1e-6)
}

fn counting_kind(key: &str) -> Builder<redbloom::kind::Counting> {
    CountingBloom::builder(key)
        .expected_items(100_000)
        .false_positive_rate(0.01)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_means_new_across_retries() {
    let (got, want, _) = new_under_stalls(native, SMALL, true).await;
    assert_eq!(
        got, want,
        "items answered new under stalls, against a clean load"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_means_new_across_retries_gozero_scripts() {
    let (got, want, _) = new_under_stalls(gozero, SMALL, true).await;
    assert_eq!(got, want, "go-zero layout, scripts engine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_means_new_across_retries_window() {
    let (got, want, _) = new_under_stalls(window, SMALL, true).await;
    assert_eq!(got, want, "window");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_means_new_across_retries_growing() {
    let (got, want, _) = new_under_stalls(growing, SMALL, true).await;
    assert_eq!(got, want, "growing (levels made under stalls)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_means_new_across_retries_counting_adds() {
    let (got, want, _) = new_under_stalls(counting_kind, SMALL, true).await;
    assert_eq!(got, want, "counting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_exact_answers_a_retried_add_says_seen() {
    let (got, want, _) = new_under_stalls(native, SMALL, false).await;
    assert!(
        got < want,
        "the stalls reached no command in flight: {got} new of {want}"
    );
}

async fn counting(
    kind: fn(&str) -> Builder<redbloom::kind::Counting>,
    url: &str,
    key: &str,
    exact: bool,
) -> CountingBloom<ConnectionManager> {
    retrying(kind(key))
        .exact_retries(exact)
        .build(common::impatient(url, Duration::from_millis(150)).await)
        .unwrap()
}

/// Every item added twice; then each removed once under stalls, and the same done cleanly to
/// another filter: how many items are still present, whether the two filters' counters are
/// the same bytes (increments and decrements commute: only a write applied twice or not at all
/// makes them differ), and how many swaps the server ran (`RENAME`).
async fn counts_under_stalls(
    kind: fn(&str) -> Builder<redbloom::kind::Counting>,
    shape: Shape,
    exact: bool,
) -> (usize, bool, u64) {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let filter = counting(kind, &url, "counted", exact).await;
    let reference = counting(kind, &url, "reference", exact).await;
    for _ in 0..2 {
        for filter in [&filter, &reference] {
            clean(shape, |batch| {
                let filter = filter.clone();
                async move { filter.add_many(&batch).await.unwrap() }
            })
            .await;
        }
    }
    clean(shape, |batch| {
        let reference = reference.clone();
        async move { reference.remove_many(&batch).await.unwrap() }
    })
    .await;
    let removing = filter.clone();
    under_stalls(&server, shape, move |batch| {
        let filter = removing.clone();
        async move {
            filter
                .remove_many(&batch)
                .await
                .expect("remove under stalls")
        }
    })
    .await;
    let present = clean(shape, |batch| {
        let filter = filter.clone();
        async move { filter.exists_many(&batch).await.unwrap() }
    })
    .await;
    let mut conn = common::connect(&url).await;
    let mut bytes = Vec::new();
    for key in ["counted", "reference"] {
        let counters: Vec<u8> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        bytes.push(counters);
    }
    (present, bytes[0] == bytes[1], calls(&url, "rename").await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counting_writes_count_once_across_retries() {
    let (present, same, _) = counts_under_stalls(counting_kind, SMALL, true).await;
    assert_eq!(present, SMALL.items(), "added twice, removed once");
    assert!(same, "the counters differ from a clean run's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_exact_answers_a_retried_remove_counts_twice() {
    let (present, _, _) = counts_under_stalls(counting_kind, SMALL, false).await;
    assert!(
        present < SMALL.items(),
        "the stalls reached no remove in flight"
    );
}

/// Few large calls, on filters small enough that each goes by the kind's dense path (the plain
/// filter's merge, a counting filter's swap, a growing filter's merge; counted by the commands
/// only those run).
const DENSE: Shape = Shape {
    tasks: 4,
    calls: 3,
    per_call: 2_000,
};

/// 72 KB: a call's 2,000 items of 20 bits outweigh it. A rate low enough that a false positive,
/// which depends on the order items arrive in, is unlikely.
fn small_native(key: &str) -> Builder<redbloom::kind::Plain> {
    native(key).expected_items(20_000).false_positive_rate(1e-6)
}

/// 110 KB of counters: a call's 2,000 items of 7 counters outweigh them.
fn small_counting(key: &str) -> Builder<redbloom::kind::Counting> {
    counting_kind(key).expected_items(23_000)
}

fn small_growing(key: &str) -> Builder<redbloom::kind::Growing> {
    // Levels of 2,000 items and more at a rate low enough that a false positive, which depends
    // on the order items arrive in, is unlikely.
    GrowingBloom::builder(key)
        .expected_items(2_000)
        .false_positive_rate(1e-6)
}

/// Calls of `command` (from `INFO commandstats`, scripts' own calls included).
async fn calls(url: &str, command: &str) -> u64 {
    common::calls(&mut common::connect(url).await, command).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_writes_answer_exactly_across_retries() {
    for (kind, (got, want, bitops)) in [
        (
            "growing",
            new_under_stalls(small_growing, DENSE, true).await,
        ),
        ("native", new_under_stalls(small_native, DENSE, true).await),
    ] {
        assert!(bitops.1 > 0, "{kind}: the dense path was not taken");
        assert_eq!(got, want, "{kind}: new under stalls, against a clean load");
    }
}

/// Calls large enough for a merge by ranges of a key over 4 MiB, each alone.
const BY_RANGES: Shape = Shape {
    tasks: 4,
    calls: 4,
    per_call: 12_000,
};

/// 4.8 MB (13 bits per item): over the 4 MiB of a whole-key merge, in ranges of 4 KiB (small
/// enough that a stall finds hundreds in the server's socket, applied when it resumes); a
/// call's 12,000 items pay for a pass over it by themselves.
fn large_native(key: &str) -> Builder<redbloom::kind::Plain> {
    native(key)
        .expected_items(2_000_000)
        .false_positive_rate(1e-4)
        .merge_chunk_bytes(4 << 10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merges_by_ranges_answer_exactly_across_retries() {
    let (got, want, (clean, stalled)) = new_under_stalls(large_native, BY_RANGES, true).await;
    assert!(clean > 0, "the merge by ranges was not taken");
    assert_eq!(got, want, "new under stalls, against a clean load");
    // Each range of each call applied once: a retry sends only the ranges whose replies it
    // has not seen, and those the server applied answer from their records.
    assert_eq!(
        stalled, clean,
        "ranges merged under stalls, against a clean load"
    );
}

/// A recorded batch goes by ranges once its bits outweigh the ranges at the recorded scripts'
/// cost per bit, not the bare command's: 8,000 native items (56,000 bits) into 4.8 MB in
/// ranges of 128 KiB (all 37 touched) pay for the pass against recorded `BITFIELD` scripts
/// (about 1.3 µs a bit), not against bare `BITFIELD` (0.3-0.65 µs). Priced as bare, such
/// batches went by the scripts (1.2-1.8x slower for the CLI's batches into a 120 MB filter,
/// each script holding the server 13-21 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_batch_that_outweighs_its_ranges_merges_by_ranges() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let bloom = retrying(native("wide"))
        .expected_items(4_000_000)
        .exact_retries(true)
        .build(common::impatient(&url, Duration::from_secs(10)).await)
        .unwrap();
    let batch: Vec<String> = (0..8_000).map(|i| format!("wide:{i}")).collect();
    let bitops = calls(&url, "bitop").await;
    let new = bloom.add_many(&batch).await.unwrap();
    let merged = calls(&url, "bitop").await - bitops;
    assert!(merged > 0, "the batch went by recorded BITFIELD scripts");
    assert!(
        new.iter().all(|&n| n),
        "items of an empty filter answered seen"
    );
    assert!(bloom.exists_many(&batch).await.unwrap().iter().all(|&p| p));
    // Again: nothing new, and the answers still the batch's own.
    assert!(bloom.add_many(&batch).await.unwrap().iter().all(|&n| !n));
    // The batch's bits and no others (56,000 offsets, a few of them shared).
    let set = bloom.info().await.unwrap().bits_set;
    assert!((55_000..=56_000).contains(&set), "{set} bits set");
}

/// Window generations of 5.5 MB (over the 4 MiB of the whole-generation dense add), in ranges
/// of 4 KiB; a call's 50,000 items pay for ranges over the 4 live generations by themselves.
fn large_window(key: &str) -> Builder<redbloom::kind::Window> {
    WindowBloom::builder(key, Duration::from_secs(3600))
        .expected_items(4_000_000)
        .false_positive_rate(0.01)
        .merge_chunk_bytes(4 << 10)
}

const WINDOW_RANGES: Shape = Shape {
    tasks: 4,
    calls: 2,
    per_call: 50_000,
};

/// A window filter's add by ranges (generations past 4 MiB) under stalls answers as a clean
/// one's, and applies each range once: a retried range answers from its record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_add_by_ranges_answers_exactly_across_retries() {
    let (got, want, (clean, stalled)) = new_under_stalls(large_window, WINDOW_RANGES, true).await;
    assert!(clean > 0, "the add by ranges was not taken");
    assert_eq!(got, want, "new under stalls, against a clean load");
    assert_eq!(
        stalled, clean,
        "ranges merged under stalls, against a clean load"
    );
}

/// A window of 12 s in 7 generations (a generation every 2 s), small enough that a call of
/// [`DENSE`] goes by its dense add; sized for twice the items one generation gets, so that a
/// false positive (which depends on the order items arrive in) is unlikely.
fn small_window(key: &str) -> Builder<redbloom::kind::Window> {
    WindowBloom::builder(key, Duration::from_secs(12))
        .generations(7)
        .expected_items(40_000)
        .false_positive_rate(1e-6)
}

/// The server's current window generation for [`small_window`] (one every 2 s).
async fn generation(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    (secs * 1_000 + micros / 1_000) / 2_000
}

/// Waits (by the server's clock) for the next window generation of [`small_window`].
async fn next_generation(conn: &mut redis::aio::MultiplexedConnection) {
    let now = generation(conn).await;
    while generation(conn).await == now {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The window generations of `key` (not the records' ring, the companions of their prefix).
async fn generations(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<String> {
    let pattern = format!("{}*", common::companion(key, "gen:"));
    let keys = common::keys_like(conn, &pattern).await;
    keys.into_iter().filter(|k| !k.contains(":once:")).collect()
}

/// Half of every call's items of `shape`, added before the calls (into an older generation).
fn earlier(shape: Shape) -> Vec<String> {
    let calls = (0..shape.tasks).flat_map(|task| (0..shape.calls).map(move |call| (task, call)));
    calls
        .flat_map(|(task, call)| items(shape, task, call).into_iter().step_by(2))
        .collect()
}

/// A window filter's dense add under stalls answers as a clean one's, with half of every
/// call's items added a generation earlier: "new" counts what the older generations hold, on
/// the first attempt and from a retry's record alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_filters_dense_add_answers_exactly_across_retries() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let mut admin = common::connect(&url).await;
    let build = |key: &str| {
        let (builder, url) = (retrying(small_window(key)), url.clone());
        async move {
            builder
                .build(common::impatient(&url, Duration::from_millis(150)).await)
                .unwrap()
        }
    };
    let (reference, bloom) = (build("reference").await, build("stalled").await);
    for filter in [&reference, &bloom] {
        let added = filter.add_many(&earlier(DENSE)).await.unwrap();
        assert_eq!(added.len(), DENSE.items() / 2);
    }
    next_generation(&mut admin).await;
    let want = clean(DENSE, |batch| {
        let reference = reference.clone();
        async move { reference.add_many(&batch).await.unwrap() }
    })
    .await;
    assert_eq!(want, DENSE.items() / 2, "the earlier half is not new");
    let got = under_stalls(&server, DENSE, move |batch| {
        let bloom = bloom.clone();
        async move { bloom.add_many(&batch).await.expect("add_many under stalls") }
    })
    .await;
    assert_eq!(got, want, "new under stalls, against a clean load");
    assert!(
        calls(&url, "bitop").await > 0,
        "the dense path was not taken"
    );
    let generations = generations(&mut admin, "stalled").await;
    assert!(generations.len() >= 2, "one generation: {generations:?}");
}

/// A retried dense add of a window filter whose first attempt was applied, and an older
/// generation that held some of its items gone before the retry: the record cannot tell which
/// items were new, so the retry fails with `OutcomeUnknown`, and adds nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_retry_that_misses_an_older_generation_is_outcome_unknown() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let mut admin = common::connect(&url).await;
    let bloom = small_window("vanish")
        .retry(
            Retry::for_duration(Duration::from_secs(10))
                .with_delays(Duration::from_millis(1500), Duration::from_millis(1500)),
        )
        .build(common::impatient(&url, Duration::from_millis(150)).await)
        .unwrap();
    let older = earlier(DENSE);
    bloom.add_many(&older).await.unwrap();
    // (One, or two if the clock crossed a generation meanwhile.)
    let older_generations = generations(&mut admin, "vanish").await;
    next_generation(&mut admin).await;
    // The add's first attempt waits in the stopped server past its reply timeout; once the
    // server resumes it is applied (its record made: its BITOP counted), and the older
    // generation goes before the retry comes.
    let merges = calls(&url, "bitop").await;
    server.pause();
    let add = tokio::spawn({
        let (bloom, batch) = (bloom.clone(), items(DENSE, 0, 0));
        async move { bloom.add_many(&batch).await }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    server.resume();
    let pause_ends = std::time::Instant::now();
    while calls(&url, "bitop").await == merges {
        assert!(
            pause_ends.elapsed() < Duration::from_secs(1),
            "the first attempt never ran"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _: () = redis::cmd("DEL")
        .arg(&older_generations)
        .query_async(&mut admin)
        .await
        .unwrap();
    let outcome = add.await.unwrap();
    assert!(
        matches!(outcome, Err(redbloom::Error::OutcomeUnknown { ref key, .. }) if key == "vanish"),
        "{outcome:?}"
    );
    let generations = generations(&mut admin, "vanish").await;
    assert_eq!(generations.len(), 1, "{generations:?}");
    let present = bloom.exists_many(&items(DENSE, 0, 0)).await.unwrap();
    assert!(
        present.iter().all(|&p| p),
        "the first attempt's items are there"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_counting_writes_count_once_across_retries() {
    let (present, same, swaps) = counts_under_stalls(small_counting, DENSE, true).await;
    assert!(swaps > 0, "the dense swap was not taken");
    assert_eq!(present, DENSE.items(), "added twice, removed once");
    assert!(same, "the counters differ from a clean run's");
}

#[tokio::test]
async fn records_stay_beside_the_filter_and_go_with_clear() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("records");
    let client = redis::Client::open(redis.url()).unwrap();
    let bloom = retrying(RedisBloom::builder(&key))
        .bits(1 << 16)
        .build(client.get_connection_manager().await.unwrap())
        .unwrap();
    bloom.add("a").await.unwrap();
    bloom.add_many(&["b", "c"]).await.unwrap();
    let rings =
        common::keys_like(&mut conn, &format!("{}*", common::companion(&key, "once:"))).await;
    assert!(
        !rings.is_empty() && rings.len() <= 10,
        "one ring of at most 10 slots: {rings:?}"
    );
    // Each slot has a TTL from its start, the ring's turn (10 slots of 3 s for a budget of
    // 20 s): records go by themselves, whatever the server's memory policy.
    for ring in &rings {
        let ttl = common::pttl(&mut conn, ring).await;
        assert!((1..=30_000).contains(&ttl), "{ring}: PTTL {ttl}");
    }
    // A filter given a TTL gives its records a shorter one, never a longer one.
    assert!(bloom.expire(Duration::from_secs(60)).await.unwrap());
    for ring in &rings {
        let ttl = common::pttl(&mut conn, ring).await;
        assert!((1..=30_000).contains(&ttl), "{ring}: PTTL {ttl}, extended");
    }
    assert!(bloom.expire(Duration::from_secs(5)).await.unwrap());
    for ring in &rings {
        let ttl = common::pttl(&mut conn, ring).await;
        assert!(
            (1..=5_000).contains(&ttl),
            "{ring}: PTTL {ttl}, not the filter's"
        );
    }
    assert!(bloom.clear().await.unwrap());
    let left = common::keys_like(&mut conn, &format!("{{{key}}}:redbloom:*")).await;
    assert_eq!(
        left,
        Vec::<String>::new(),
        "clear leaves nothing beside the filter"
    );

    // Without retries nothing is recorded: nothing to read back.
    let once = RedisBloom::builder(&key)
        .bits(1 << 16)
        .build(redis.connection().await)
        .unwrap();
    once.add("a").await.unwrap();
    let rings =
        common::keys_like(&mut conn, &format!("{}*", common::companion(&key, "once:"))).await;
    assert_eq!(rings, Vec::<String>::new());
}

/// Holds the server's writes back for 5 s (`CLIENT PAUSE … WRITE`) and starts `counting`'s
/// remove of "first", whose first attempt then waits on the paused server.
async fn remove_while_paused(
    admin: &mut redis::aio::MultiplexedConnection,
    counting: &CountingBloom<ConnectionManager>,
) -> tokio::task::JoinHandle<redbloom::Result<bool>> {
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(5000)
        .arg("WRITE")
        .query_async::<()>(admin)
        .await
        .unwrap();
    let counting = counting.clone();
    tokio::spawn(async move { counting.remove("first").await })
}

/// A write whose first attempt never ran (its connection killed while the server held writes
/// back) is retried after its ring was lost: its record could be gone, so it fails with
/// `OutcomeUnknown` naming the step and writes nothing, rather than apply twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_its_record_could_be_gone_applies_nothing() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let mut admin = common::connect(&url).await;
    let counting = retrying(CountingBloom::builder("lost-record"))
        .bits(1 << 12)
        .retry(
            Retry::for_duration(Duration::from_secs(5))
                .with_delays(Duration::from_millis(300), Duration::from_millis(300)),
        )
        .build(common::impatient(&url, Duration::from_millis(150)).await)
        .unwrap();
    counting.add("first").await.unwrap();
    let remove = remove_while_paused(&mut admin, &counting).await;
    // The remove's first attempt waits on the paused server; its connection is killed with the
    // command unread.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(killed >= 1);
    // Every slot of its ring is lost (deleted) before writes resume.
    let rings = common::keys_like(
        &mut admin,
        &format!("{}*", common::companion("lost-record", "once:")),
    )
    .await;
    assert!(!rings.is_empty(), "the first add made its ring");
    let mut later = redis::pipe();
    later.cmd("CLIENT").arg("UNPAUSE").ignore();
    later.cmd("DEL").arg(&rings).ignore();
    later.query_async::<()>(&mut admin).await.unwrap();
    let outcome = remove.await.unwrap();
    assert!(
        matches!(outcome, Err(redbloom::Error::OutcomeUnknown { ref key, ref step })
            if key == "lost-record" && step.starts_with("step ") && step.contains("gone")),
        "{outcome:?}"
    );
    assert!(
        counting.exists("first").await.unwrap(),
        "the remove was not applied"
    );
}

/// The server's time in milliseconds.
async fn server_ms(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs * 1_000 + micros / 1_000
}

/// A counting remove whose first attempt never runs (its connection killed while the server
/// held writes back), after a quiet spell of its filter: another client's write, held back
/// with it, starts the ring's slot of that epoch after the remove was sent. What the remove
/// answers once writes resume, and whether "first" is still found. With `evicting`, the
/// server may evict keys with a TTL (`volatile-lru`, never reached): the ring's slots have one.
async fn retry_after_a_quiet_spell(evicting: bool) -> (redbloom::Result<bool>, bool) {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let mut admin = common::connect(&url).await;
    if evicting {
        let mut config = redis::pipe();
        config
            .cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg("1gb")
            .ignore();
        config
            .cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("volatile-lru")
            .ignore();
        config.query_async::<()>(&mut admin).await.unwrap();
    }
    let counting = |conn| {
        CountingBloom::builder("quiet")
            .bits(1 << 12)
            // A ring of 1 s epochs.
            .retry(
                Retry::for_duration(Duration::from_secs(5))
                    .with_delays(Duration::from_millis(300), Duration::from_millis(300)),
            )
            .build(conn)
            .unwrap()
    };
    let remover = counting(common::impatient(&url, Duration::from_millis(150)).await);
    let other = counting(
        ConnectionManager::new(redis::Client::open(url.as_str()).unwrap())
            .await
            .unwrap(),
    );
    remover.add("first").await.unwrap();
    other.add("warm").await.unwrap();
    // Three quiet epochs, then the start of one: the remove and the other write are sent in
    // the same epoch, which no recorded write began before them.
    let made = server_ms(&mut admin).await / 1_000;
    let epoch = loop {
        let now = server_ms(&mut admin).await;
        // Past the epoch's first 300 ms: the client's lower bound of the server's time when
        // it sent the remove (a few milliseconds low) falls in the same epoch.
        if now / 1_000 >= made + 3 && (300..400).contains(&(now % 1_000)) {
            break now / 1_000;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let remove = remove_while_paused(&mut admin, &remover).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ADDR")
        .arg(remover_addr(&mut admin).await)
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(killed, 1, "the remove's connection");
    let add = tokio::spawn({
        let other = other.clone();
        async move { other.add("second").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = server_ms(&mut admin).await;
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async::<()>(&mut admin)
        .await
        .unwrap();
    assert!(add.await.unwrap().unwrap(), "the other write");
    assert_eq!(before / 1_000, epoch, "the harness kept to one epoch");
    let outcome = remove.await.unwrap();
    (outcome, other.exists("first").await.unwrap())
}

/// The address of the one client blocked by `CLIENT PAUSE` (the remove's first attempt).
async fn remover_addr(admin: &mut redis::aio::MultiplexedConnection) -> String {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(admin)
        .await
        .unwrap();
    let blocked: Vec<&str> = list
        .lines()
        .filter(|line| {
            line.split(' ')
                .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')))
        })
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("addr=")))
        .collect();
    assert_eq!(blocked.len(), 1, "{list}");
    blocked[0].to_owned()
}

/// A retry whose first attempt never ran, in a ring whose slot of that epoch another write
/// started after the sending: that slot's start proved no recorded write of the epoch came
/// before it, and the server evicts no key with a TTL, so the retry applies (once) instead of
/// waiting for the lost attempt until its budget is spent (seen in CI as `OutcomeUnknown`:
/// "the ring slot of its first attempt started after it was sent").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_quiet_spell_applies_once() {
    let (outcome, first) = retry_after_a_quiet_spell(false).await;
    assert!(matches!(outcome, Ok(true)), "{outcome:?}");
    assert!(!first, "removed once");
}

/// The same on a server that may evict keys with a TTL: the slot could have held the record
/// and been evicted and made again, so the outcome is unknown and nothing is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_quiet_spell_on_an_evicting_server_is_unknown() {
    let (outcome, first) = retry_after_a_quiet_spell(true).await;
    assert!(
        matches!(outcome, Err(redbloom::Error::OutcomeUnknown { ref step, .. })
            if step.contains("started after it was sent")),
        "{outcome:?}"
    );
    assert!(first, "the remove was not applied");
}

/// Every key of the records of exact answers beside `key` (its ring), with each one's fields
/// and values in order (not `DUMP`: a hash's table may iterate in another order after reads).
async fn records(conn: &mut ConnectionManager, key: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in common::keys_like(conn, &format!("*:redbloom:*{key}*:once:*")).await {
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(&name)
            .query_async(conn)
            .await
            .unwrap();
        fields.sort();
        out.push((name, format!("{fields:?}").into_bytes()));
    }
    out
}

/// Adds of items a filter already holds (one by one, grouped, and as a batch) leave its records
/// as they were: a step that only sets bits and added nothing is not recorded (a retry of it
/// applies it again and answers "seen" as the first did), so adds of duplicates write no
/// record (SPEC.md §4: an add of a present item writes nothing). A step with a new item is
/// recorded (the check can fail).
async fn duplicates_write_no_record<K: Kind>(url: &str, kind: fn(&str) -> Builder<K>, name: &str) {
    let key = common::unique_key(name);
    let mut conn = common::impatient(url, Duration::from_secs(10)).await;
    let bloom = retrying(kind(&key))
        .build(conn.clone())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let items: Vec<String> = (0..60).map(|i| format!("dup:{i}")).collect();
    let (singles, batch) = items.split_at(30);
    for item in singles {
        assert!(bloom.add(item).await.unwrap(), "{name}: {item} is new");
    }
    assert_eq!(
        bloom.add_many(batch).await.unwrap(),
        vec![true; 30],
        "{name}"
    );
    let before = records(&mut conn, &key).await;
    assert!(
        !before.is_empty(),
        "{name}: the new items' steps were recorded"
    );

    for item in &items {
        assert!(!bloom.add(item).await.unwrap(), "{name}: {item} again");
    }
    let grouped: Vec<_> = items
        .iter()
        .map(|item| {
            let bloom = bloom.clone();
            let item = item.clone();
            tokio::spawn(async move { bloom.add(&item).await.unwrap() })
        })
        .collect();
    for task in grouped {
        assert!(!task.await.unwrap(), "{name}: no item is new again");
    }
    assert_eq!(
        bloom.add_many(&items).await.unwrap(),
        vec![false; 60],
        "{name}"
    );
    assert_eq!(
        records(&mut conn, &key).await,
        before,
        "{name}: adds of present items wrote records"
    );

    let mut mixed = items.clone();
    mixed.push("dup:new".into());
    let answers = bloom.add_many(&mixed).await.unwrap();
    assert_eq!(answers.iter().filter(|&&new| new).count(), 1, "{name}");
    assert_ne!(
        records(&mut conn, &key).await,
        before,
        "{name}: a step with a new item is recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_of_present_items_write_no_record() {
    let redis = common::redis().await;
    let url = redis.url();
    duplicates_write_no_record(url, native, "dup-native").await;
    duplicates_write_no_record(url, gozero, "dup-gozero-scripts").await;
    duplicates_write_no_record(
        url,
        |key| {
            RedisBloom::builder(key)
                .expected_items(100_000)
                .false_positive_rate(0.01)
        },
        "dup-gozero",
    )
    .await;
    duplicates_write_no_record(url, window, "dup-window").await;
    duplicates_write_no_record(url, growing, "dup-growing").await;
    // The server's own Bloom filters (BF.MADD), flat and in a window.
    let module = common::module::redis_with_bloom();
    let url = module.url();
    duplicates_write_no_record(url, module_kind, "dup-module").await;
    duplicates_write_no_record(
        url,
        |key| module_kind(key).window(Duration::from_secs(3600)),
        "dup-module-window",
    )
    .await;
}

/// The server's AOF size in bytes (`INFO persistence`), once nothing waits in its AOF buffer
/// and two reads 50 ms apart agree: a server may write the AOF after it replies (with
/// `appendfsync everysec`, Redis postpones the write for up to 2 s while a background fsync is
/// slow, as on a loaded machine; Valkey 9 did now and then).
async fn aof_size(url: &str) -> u64 {
    let conn = common::connect(url).await;
    let read = || {
        let mut conn = conn.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(&mut conn)
                .await
                .unwrap();
            let field = |name: &str| {
                info.lines()
                    .find_map(|line| line.strip_prefix(name))
                    .and_then(|value| value.trim().parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("{name} in INFO persistence"))
            };
            (field("aof_current_size:"), field("aof_buffer_length:"))
        }
    };
    let mut last = read().await;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = read().await;
        if now == last && now.1 == 0 {
            return now.0;
        }
        last = now;
    }
    panic!("the AOF kept growing for 5 s: {last:?} (size, buffer)");
}

/// A batch added again, whole, by a dense path (`path`: the command only that path runs), with
/// exact answers across retries and without, writes nothing: no byte reaches the AOF (nor, so,
/// the replicas), no record, every item "seen", from a new handle (a file loaded again by
/// another process) and from the same handle once a dense add found nothing new (a plain
/// filter's dense add that follows one with new items goes without its probe); the same batch
/// with one new item writes and answers it new (the check can fail).
async fn dense_repeats_write_nothing<K: Kind>(
    url: &str,
    kind: fn(&str) -> Builder<K>,
    (path, items): (&str, usize),
    name: &str,
) {
    for exact in [true, false] {
        let key = common::unique_key(name);
        let name = &format!("{name}, exact answers {exact}");
        let mut conn = common::impatient(url, Duration::from_secs(10)).await;
        let handle = || {
            retrying(kind(&key))
                .exact_retries(exact)
                .build(conn.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let (bloom, again) = (handle(), handle());
        let batch: Vec<String> = (0..items).map(|i| format!("{name}:{i}")).collect();
        let taken = calls(url, path).await;
        let answers = bloom.add_many(&batch).await.unwrap();
        assert!(answers.iter().all(|&new| new), "{name}: every item new");
        assert!(
            calls(url, path).await > taken,
            "{name}: the dense path ({path}) was not taken"
        );
        for (bloom, which) in [(&again, "a new handle"), (&bloom, "the same handle")] {
            for round in 0..2 {
                let before = (aof_size(url).await, records(&mut conn, &key).await);
                let answers = bloom.add_many(&batch).await.unwrap();
                assert_eq!(answers, vec![false; items], "{name}: again");
                if round == 1 || which == "a new handle" {
                    assert_eq!(
                        aof_size(url).await,
                        before.0,
                        "{name}: adding present items again from {which} reached the AOF"
                    );
                    let after = records(&mut conn, &key).await;
                    assert_eq!(after, before.1, "{name}: records ({which})");
                }
            }
        }
        let written = aof_size(url).await;
        let mut mixed = batch.clone();
        mixed.push(format!("{name}:new"));
        let answers = again.add_many(&mixed).await.unwrap();
        assert_eq!(
            answers.iter().filter(|&&new| new).count(),
            1,
            "{name}: one new item among present ones"
        );
        assert!(answers[items], "{name}: the new item");
        assert!(
            aof_size(url).await > written,
            "{name}: the new item's write"
        );
        assert!(bloom.exists(&mixed[items]).await.unwrap(), "{name}: found");
    }
}

/// A file loaded again costs the server no write (SPEC.md §4: an add of present items writes
/// nothing): the dense adds of plain and window filters, whole and by ranges, find that a batch
/// sets no new bit before they write (their scratch keys kept out of the AOF and the replicas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_adds_of_present_items_write_nothing() {
    let aof = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--auto-aof-rewrite-percentage",
        "0",
    ];
    let server = RedisServer::start_with(&aof).expect("redis-server with an AOF");
    let url = server.url();
    // A replica, which must end with the same keys and bytes: the scratch keys' commands that
    // stay on the primary leave nothing there that the replica lacks, nor the reverse.
    let port = server.port().to_string();
    let replica = RedisServer::start_with(&["--save", "", "--replicaof", "127.0.0.1", &port])
        .expect("a replica");
    let mut on_replica = common::connect(&replica.url()).await;
    let synced = async {
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut on_replica)
                .await
                .unwrap();
            if info.contains("master_link_status:up") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), synced)
        .await
        .expect("the replica synced");
    let whole = ("bitop", DENSE.per_call);
    dense_repeats_write_nothing(&url, small_native, whole, "repeat-native").await;
    let small_gozero = |key: &str| {
        RedisBloom::builder(key)
            .expected_items(20_000)
            .false_positive_rate(1e-6)
    };
    dense_repeats_write_nothing(&url, small_gozero, whole, "repeat-gozero").await;
    let hour_window = |key: &str| {
        WindowBloom::builder(key, Duration::from_secs(3600))
            .expected_items(40_000)
            .false_positive_rate(1e-6)
    };
    dense_repeats_write_nothing(&url, hour_window, whole, "repeat-window").await;
    let ranges = ("setrange", BY_RANGES.per_call);
    dense_repeats_write_nothing(&url, large_native, ranges, "repeat-ranges").await;
    let window_ranges = ("setrange", WINDOW_RANGES.per_call);
    dense_repeats_write_nothing(&url, large_window, window_ranges, "repeat-window-ranges").await;
    let mut primary = common::connect(&url).await;
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query_async(&mut primary)
        .await
        .unwrap();
    assert_eq!(acked, 1, "the replica acknowledged every write");
    let keys = common::dumps(&mut primary, "*").await;
    assert!(keys.len() > 10, "{} keys", keys.len());
    let there = common::dumps(&mut on_replica, "*").await;
    let names =
        |keys: &[(String, Vec<u8>)]| keys.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&keys),
        names(&there),
        "the replica holds other keys than the primary"
    );
    for ((name, here), (_, replica)) in keys.iter().zip(&there) {
        // A ring slot's hash table may iterate in another order on each side: its fields.
        if name.contains(":once:") {
            let fields = |conn: &mut redis::aio::MultiplexedConnection| {
                let name = name.clone();
                let mut conn = conn.clone();
                async move {
                    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
                        .arg(&name)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    fields.sort();
                    fields
                }
            };
            assert_eq!(
                fields(&mut primary).await,
                fields(&mut on_replica).await,
                "{name}"
            );
        } else {
            assert!(
                here == replica,
                "the replica holds other bytes than the primary in {name}"
            );
        }
    }
}

fn module_kind(key: &str) -> Builder<redbloom::kind::Module> {
    ModuleBloom::builder(key)
        .expected_items(100_000)
        .false_positive_rate(0.01)
}

/// A counting filter's add-if-absent of present items and remove of absent ones write nothing,
/// records included (a retry of such a step applies it again, once, as a fresh call); a step
/// that removes an item, and every plain add (an increment, never idempotent), is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counting_steps_that_change_nothing_write_no_record() {
    let redis = common::redis().await;
    let key = common::unique_key("dup-counting");
    let mut conn = common::impatient(redis.url(), Duration::from_secs(10)).await;
    let bloom = retrying(counting_kind(&key)).build(conn.clone()).unwrap();
    let present: Vec<String> = (0..30).map(|i| format!("in:{i}")).collect();
    let absent: Vec<String> = (0..30).map(|i| format!("out:{i}")).collect();
    assert_eq!(
        bloom.add_many_if_absent(&present).await.unwrap(),
        vec![true; 30]
    );
    let before = records(&mut conn, &key).await;
    assert!(!before.is_empty(), "the adds were recorded");

    for item in &present {
        assert!(!bloom.add_if_absent(item).await.unwrap(), "{item} is there");
    }
    assert_eq!(
        bloom.add_many_if_absent(&present).await.unwrap(),
        vec![false; 30]
    );
    for item in &absent {
        assert!(!bloom.remove(item).await.unwrap(), "{item} is not there");
    }
    assert_eq!(bloom.remove_many(&absent).await.unwrap(), vec![false; 30]);
    assert_eq!(
        records(&mut conn, &key).await,
        before,
        "steps that changed nothing wrote records"
    );

    assert!(bloom.remove(&present[0]).await.unwrap());
    let after_remove = records(&mut conn, &key).await;
    assert_ne!(after_remove, before, "a remove is recorded");
    assert!(
        !bloom.add(&present[1]).await.unwrap(),
        "counted twice, not new"
    );
    assert_ne!(
        records(&mut conn, &key).await,
        after_remove,
        "an increment is recorded, new or not"
    );
}
