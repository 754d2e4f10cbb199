//! The near cache (SPEC.md §6) against real redis-servers: cached lookups send no command; a
//! change by another client reaches the copy within the refresh interval, with tracking and
//! without, for every kind; the copy keeps answering while Redis is down and recovers after;
//! a copy over its budget is refused; a window filter's copy forgets by itself; this handle's
//! adds are in its copy at once.

mod common;

use common::cluster::{cli, RedisCluster};
use redbloom::kind::{Counting, Growing, Plain, Window};
use redbloom::redis;
use redbloom::redis::aio::{ConnectionLike, MultiplexedConnection};
use redbloom::{Builder, CountingBloom, Error, GrowingBloom, NearCache, RedisBloom, WindowBloom};
use std::time::{Duration, Instant};

/// Commands the server has processed so far (the `INFO` that asks counts too).
async fn commands(conn: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_commands_processed in INFO stats")
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// A builder of any kind.
#[derive(Clone)]
enum AnyBuilder {
    Plain(Builder<Plain>),
    Counting(Builder<Counting>),
    Window(Builder<Window>),
    Growing(Builder<Growing>),
}

impl AnyBuilder {
    fn near_cache(self, cache: NearCache) -> Self {
        match self {
            AnyBuilder::Plain(b) => AnyBuilder::Plain(b.near_cache(cache)),
            AnyBuilder::Counting(b) => AnyBuilder::Counting(b.near_cache(cache)),
            AnyBuilder::Window(b) => AnyBuilder::Window(b.near_cache(cache)),
            AnyBuilder::Growing(b) => AnyBuilder::Growing(b.near_cache(cache)),
        }
    }
}

/// Every kind, with and without shards, as a (name, builder) pair.
fn kinds(key: &str) -> Vec<(&'static str, AnyBuilder)> {
    let plain = || {
        RedisBloom::builder(key)
            .expected_items(10_000)
            .false_positive_rate(0.001)
    };
    let counting = || {
        CountingBloom::builder(key)
            .expected_items(10_000)
            .false_positive_rate(0.001)
    };
    let window = || {
        WindowBloom::builder(key, Duration::from_secs(3600))
            .expected_items(10_000)
            .false_positive_rate(0.001)
    };
    let growing = || {
        GrowingBloom::builder(key)
            .expected_items(10_000)
            .false_positive_rate(0.001)
    };
    vec![
        ("plain go-zero", AnyBuilder::Plain(plain())),
        (
            "plain native, 3 shards",
            AnyBuilder::Plain(plain().layout(redbloom::Layout::Native).shards(3)),
        ),
        ("counting", AnyBuilder::Counting(counting())),
        (
            "counting, 2 shards",
            AnyBuilder::Counting(counting().shards(2)),
        ),
        ("window", AnyBuilder::Window(window())),
        ("window, 2 shards", AnyBuilder::Window(window().shards(2))),
        ("growing", AnyBuilder::Growing(growing().growth(2))),
        (
            "growing, 2 shards",
            AnyBuilder::Growing(growing().growth(2).shards(2)),
        ),
    ]
}

/// One filter of any kind, with the calls the tests need.
enum Any<C> {
    Plain(RedisBloom<C>),
    Counting(CountingBloom<C>),
    Window(WindowBloom<C>),
    Growing(GrowingBloom<C>),
}

impl<C: ConnectionLike + Clone + Send + Sync> Any<C> {
    fn build(builder: AnyBuilder, conn: C) -> redbloom::Result<Self> {
        Ok(match builder {
            AnyBuilder::Plain(b) => Any::Plain(b.build(conn)?),
            AnyBuilder::Counting(b) => Any::Counting(b.build(conn)?),
            AnyBuilder::Window(b) => Any::Window(b.build(conn)?),
            AnyBuilder::Growing(b) => Any::Growing(b.build(conn)?),
        })
    }

    async fn add_many(&self, items: &[String]) {
        match self {
            Any::Plain(f) => drop(f.add_many(items).await.unwrap()),
            Any::Counting(f) => drop(f.add_many(items).await.unwrap()),
            Any::Window(f) => drop(f.add_many(items).await.unwrap()),
            Any::Growing(f) => drop(f.add_many(items).await.unwrap()),
        }
    }

    async fn exists(&self, item: &str) -> redbloom::Result<bool> {
        match self {
            Any::Plain(f) => f.exists(item).await,
            Any::Counting(f) => f.exists(item).await,
            Any::Window(f) => f.exists(item).await,
            Any::Growing(f) => f.exists(item).await,
        }
    }

    async fn exists_many(&self, items: &[String]) -> Vec<bool> {
        match self {
            Any::Plain(f) => f.exists_many(items).await,
            Any::Counting(f) => f.exists_many(items).await,
            Any::Window(f) => f.exists_many(items).await,
            Any::Growing(f) => f.exists_many(items).await,
        }
        .unwrap()
    }

    async fn clear(&self) {
        match self {
            Any::Plain(f) => drop(f.clear().await.unwrap()),
            Any::Counting(f) => drop(f.clear().await.unwrap()),
            Any::Window(f) => drop(f.clear().await.unwrap()),
            Any::Growing(f) => drop(f.clear().await.unwrap()),
        }
    }

    fn stats(&self) -> redbloom::NearCacheStats {
        match self {
            Any::Plain(f) => f.near_cache_stats(),
            Any::Counting(f) => f.near_cache_stats(),
            Any::Window(f) => f.near_cache_stats(),
            Any::Growing(f) => f.near_cache_stats(),
        }
        .expect("a near cache")
    }
}

fn client(url: &str) -> redis::Client {
    redis::Client::open(url).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_lookups_send_no_command_to_redis() {
    let redis = common::redis().await;
    let mut probe = redis.connection().await;
    for (name, builder) in kinds(&common::unique_key("near:quiet")) {
        let writer = Any::build(builder.clone(), redis.connection().await).unwrap();
        let added = items("in-", 500);
        let absent = items("out-", 500);
        writer.add_many(&added).await;
        let cache = NearCache::new(Duration::from_secs(30)).tracking(client(redis.url()));
        let reader = Any::build(builder.near_cache(cache), redis.connection().await).unwrap();
        // The first lookup reads the copy.
        assert!(reader.exists(&added[0]).await.unwrap(), "{name}");
        assert_eq!(reader.stats().refreshes, 1, "{name}");
        assert!(reader.stats().tracking, "{name}: tracking on");
        let idle = {
            let a = commands(&mut probe).await;
            commands(&mut probe).await - a
        };
        let before = commands(&mut probe).await;
        for item in &added {
            assert!(reader.exists(item).await.unwrap(), "{name}: {item} added");
        }
        let found = reader.exists_many(&absent).await;
        let after = commands(&mut probe).await;
        assert_eq!(
            after - before,
            idle,
            "{name}: 1,000 cached lookups sent {} commands",
            after - before - idle
        );
        let false_positives = found.iter().filter(|&&f| f).count();
        assert!(false_positives <= 5, "{name}: {false_positives} of 500");
        let stats = reader.stats();
        assert_eq!(stats.hits, 1 + 500 + 500, "{name}: {stats:?}");
        assert_eq!((stats.misses, stats.refreshes), (0, 1), "{name}: {stats:?}");
        assert!(stats.bytes > 0 && !stats.stale, "{name}: {stats:?}");
        writer.clear().await;
    }
}

/// How stale a copy is after a change acknowledged at the start: the latest moment, counted
/// from then, at which a call of `exists` began and still answered `!want` (calls go every
/// millisecond until one answers `want`; `Duration::ZERO` when the first does). A copy is
/// stamped with the moment its read began (SPEC.md §6), so what a read takes, or a late turn
/// of the scheduler on a loaded machine, is not staleness: a call that begins more than the
/// interval after the change must answer `want`.
async fn stale_for(exists: impl AsyncFn() -> bool, want: bool, limit: Duration) -> Duration {
    let start = Instant::now();
    let mut stale = Duration::ZERO;
    loop {
        let began = start.elapsed();
        if exists().await == want {
            return stale;
        }
        stale = began;
        assert!(start.elapsed() < limit, "not {want} after {limit:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_by_another_client_reaches_the_copy_within_the_interval() {
    let redis = common::redis().await;
    let interval = Duration::from_millis(300);
    // The bound: the interval, plus the time an invalidation takes to arrive when tracked.
    let bound = interval + Duration::from_millis(150);
    for tracked in [true, false] {
        for (name, builder) in kinds(&common::unique_key("near:fresh")) {
            let writer = Any::build(builder.clone(), redis.connection().await).unwrap();
            writer.add_many(&items("base-", 100)).await;
            let mut cache = NearCache::new(interval);
            if tracked {
                cache = cache.tracking(client(redis.url()));
            }
            let reader = Any::build(builder.near_cache(cache), redis.connection().await).unwrap();
            let mut worst = Duration::ZERO;
            for trial in 0..6 {
                let item = format!("new-{trial}");
                assert!(
                    !reader.exists(&item).await.unwrap(),
                    "{name}: {item} before"
                );
                // Let the copy age a random part of the interval.
                tokio::time::sleep(Duration::from_millis(37 * trial)).await;
                writer.add_many(std::slice::from_ref(&item)).await;
                let took = stale_for(
                    async || reader.exists(&item).await.unwrap(),
                    true,
                    Duration::from_secs(5),
                )
                .await;
                worst = worst.max(took);
            }
            writer.clear().await;
            let took = stale_for(
                async || reader.exists("base-1").await.unwrap(),
                false,
                Duration::from_secs(5),
            )
            .await;
            worst = worst.max(took);
            println!(
                "{name} (tracking {tracked}): worst {worst:?}, {:?}",
                reader.stats()
            );
            assert!(
                worst <= bound,
                "{name} (tracking {tracked}): {worst:?} > {bound:?}"
            );
            if tracked {
                assert!(reader.stats().invalidations > 0, "{name}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remove_by_another_client_reaches_the_copy_within_the_interval() {
    let redis = common::redis().await;
    let interval = Duration::from_millis(300);
    let bound = interval + Duration::from_millis(150);
    for tracked in [true, false] {
        let key = common::unique_key("near:remove");
        let builder = CountingBloom::builder(&key)
            .expected_items(10_000)
            .false_positive_rate(0.001);
        let writer = builder.clone().build(redis.connection().await).unwrap();
        let mut cache = NearCache::new(interval);
        if tracked {
            cache = cache.tracking(client(redis.url()));
        }
        let reader = builder
            .near_cache(cache)
            .build(redis.connection().await)
            .unwrap();
        let blocked = items("blocked-", 8);
        writer.add_many(&blocked).await.unwrap();
        let mut worst = Duration::ZERO;
        for (trial, item) in blocked.iter().enumerate() {
            assert!(reader.exists(item).await.unwrap());
            tokio::time::sleep(Duration::from_millis(41 * trial as u64)).await;
            assert!(writer.remove(item).await.unwrap());
            worst = worst.max(
                stale_for(
                    async || reader.exists(item).await.unwrap(),
                    false,
                    Duration::from_secs(5),
                )
                .await,
            );
        }
        println!("remove (tracking {tracked}): worst {worst:?}");
        assert!(worst <= bound, "tracking {tracked}: {worst:?} > {bound:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_copy_answers_while_redis_is_down_and_recovers() {
    let mut redis = common::redis().await;
    let Some(url) = redis.private_server_url() else {
        panic!("this test kills its server: run it without REDIS_URL");
    };
    let key = common::unique_key("near:down");
    let builder = Builder::new(&key)
        .expected_items(10_000)
        .false_positive_rate(0.001);
    let interval = Duration::from_millis(200);
    let manager = redis::aio::ConnectionManager::new_with_config(
        client(&url),
        redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(300)))
            .set_response_timeout(Some(Duration::from_millis(300)))
            .set_number_of_retries(1),
    )
    .await
    .unwrap();
    let reader = builder
        .clone()
        .near_cache(NearCache::new(interval).tracking(client(&url)))
        .build(manager)
        .unwrap();
    let writer = builder.build(redis.connection().await).unwrap();
    let added = items("kept-", 100);
    writer.add_many(&added).await.unwrap();
    assert!(reader.exists(&added[0]).await.unwrap());
    assert!(reader.near_cache_stats().unwrap().tracking);

    redis.private_server().unwrap().kill();
    tokio::time::sleep(interval * 2).await;
    for item in &added {
        assert!(reader.exists(item).await.unwrap(), "{item} from the copy");
    }
    let stats = reader.near_cache_stats().unwrap();
    assert!(stats.stale, "staleness reported: {stats:?}");
    assert!(stats.stale_hits >= 100 && !stats.tracking, "{stats:?}");

    // Back, empty (the server keeps nothing): the copy catches up within the interval.
    redis.private_server().unwrap().restart().unwrap();
    let writer = Builder::new(&key)
        .expected_items(10_000)
        .false_positive_rate(0.001)
        .build(redis.connection().await)
        .unwrap();
    writer.add("after").await.unwrap();
    let start = Instant::now();
    loop {
        let after = reader.exists("after").await;
        let kept = reader.exists(&added[0]).await;
        if matches!((after, kept), (Ok(true), Ok(false))) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no recovery: {:?}",
            reader.near_cache_stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = reader.near_cache_stats().unwrap();
    assert!(!stats.stale, "{stats:?}");
    assert!(
        stats.failed_refreshes >= 1 && stats.refreshes >= 2,
        "{stats:?}"
    );
}

#[tokio::test]
async fn a_copy_over_the_budget_is_refused() {
    let redis = common::redis().await;
    for (name, builder) in kinds("near:budget") {
        let cache = NearCache::new(Duration::from_secs(1)).budget(1_000);
        let err = Any::build(builder.near_cache(cache), redis.connection().await)
            .err()
            .unwrap_or_else(|| panic!("{name}: built over budget"));
        match &err {
            Error::NearCacheBudget { bytes, budget, .. } => {
                assert!(*bytes > 1_000 && *budget == 1_000, "{name}: {err}");
                assert!(err.to_string().contains("budget of 1000 bytes"), "{err}");
            }
            other => panic!("{name}: {other}"),
        }
    }
}

#[tokio::test]
async fn a_growing_filter_that_outgrows_the_budget_answers_from_redis() {
    let redis = common::redis().await;
    let key = common::unique_key("near:outgrown");
    let builder = GrowingBloom::builder(&key)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .growth(2);
    let writer = builder.clone().build(redis.connection().await).unwrap();
    let reader = builder
        .near_cache(NearCache::new(Duration::from_millis(50)).budget(4_000))
        .build(redis.connection().await)
        .unwrap();
    assert!(!reader.exists("x").await.unwrap());
    assert_eq!(reader.near_cache_stats().unwrap().refreshes, 1);
    let added = items("g-", 5_000);
    writer.add_many(&added).await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    let found = reader.exists_many(&added).await.unwrap();
    assert!(found.iter().all(|&f| f), "every item found, from Redis");
    let stats = reader.near_cache_stats().unwrap();
    assert!(stats.over_budget && stats.bytes == 0, "{stats:?}");
    assert!(stats.misses >= 5_000, "{stats:?}");
}

#[tokio::test]
async fn a_window_copy_forgets_by_itself() {
    let redis = common::redis().await;
    let key = common::unique_key("near:window");
    // Two generations of 2 s: an item is found for 2 s at least and forgotten by 4 s.
    let window = Duration::from_secs(2);
    let builder = WindowBloom::builder(&key, window)
        .expected_items(1_000)
        .false_positive_rate(0.001)
        .generations(2);
    let writer = builder.clone().build(redis.connection().await).unwrap();
    let reader = builder
        .near_cache(NearCache::new(Duration::from_secs(60)))
        .build(redis.connection().await)
        .unwrap();
    writer.add("w").await.unwrap();
    let added = Instant::now();
    assert!(reader.exists("w").await.unwrap());
    while added.elapsed() < window - Duration::from_millis(100) {
        assert!(reader.exists("w").await.unwrap(), "found until the window");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep((window * 2 + Duration::from_millis(100)).saturating_sub(added.elapsed()))
        .await;
    assert!(!reader.exists("w").await.unwrap(), "forgotten by W·G/(G-1)");
    let stats = reader.near_cache_stats().unwrap();
    assert_eq!(
        (stats.refreshes, stats.misses),
        (1, 0),
        "no new read: {stats:?}"
    );
}

#[tokio::test]
async fn this_handles_adds_are_in_its_copy_at_once() {
    let redis = common::redis().await;
    for (name, builder) in kinds(&common::unique_key("near:own")) {
        let cache = NearCache::new(Duration::from_secs(60));
        let filter = Any::build(builder.near_cache(cache), redis.connection().await).unwrap();
        assert!(!filter.exists("mine").await.unwrap(), "{name}");
        filter.add_many(&["mine".to_owned()]).await;
        assert!(filter.exists("mine").await.unwrap(), "{name}: at once");
        assert_eq!(filter.stats().refreshes, 1, "{name}: from the copy");
        filter.clear().await;
        assert!(!filter.exists("mine").await.unwrap(), "{name}: cleared");
    }
}

/// `total_commands_processed` summed over the cluster's nodes.
fn cluster_commands(ports: &[u16]) -> u64 {
    ports
        .iter()
        .map(|&port| {
            cli(port, &["info", "stats"])
                .lines()
                .find_map(|line| line.strip_prefix("total_commands_processed:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .expect("total_commands_processed")
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_copy_is_read_every_interval_and_answers_alone() {
    let cluster = RedisCluster::start_without_replicas().expect("a cluster");
    let ports = cluster.master_ports();
    let interval = Duration::from_millis(300);
    let bound = interval + Duration::from_millis(150);
    for (name, builder) in kinds(&common::unique_key("near:cluster")) {
        let writer = Any::build(builder.clone(), cluster.connection().await).unwrap();
        let added = items("in-", 200);
        writer.add_many(&added).await;
        // A tracking client given a cluster node: refused there (one node sees its own keys).
        let cache = NearCache::new(interval).tracking(client(&cluster.urls()[0]));
        let reader = Any::build(builder.near_cache(cache), cluster.connection().await).unwrap();
        assert!(reader.exists(&added[0]).await.unwrap(), "{name}");
        assert!(!reader.stats().tracking, "{name}: no tracking on a cluster");
        let idle = {
            let a = cluster_commands(&ports);
            cluster_commands(&ports) - a
        };
        let before = cluster_commands(&ports);
        let found = reader.exists_many(&added).await;
        let after = cluster_commands(&ports);
        assert!(found.iter().all(|&f| f), "{name}");
        assert_eq!(after - before, idle, "{name}: cached lookups sent commands");
        let mut worst = Duration::ZERO;
        for trial in 0..4 {
            let item = format!("new-{trial}");
            assert!(
                !reader.exists(&item).await.unwrap(),
                "{name}: {item} before"
            );
            writer.add_many(std::slice::from_ref(&item)).await;
            worst = worst.max(
                stale_for(
                    async || reader.exists(&item).await.unwrap(),
                    true,
                    Duration::from_secs(5),
                )
                .await,
            );
        }
        println!("{name} on a cluster: worst {worst:?}, {:?}", reader.stats());
        assert!(worst <= bound, "{name}: {worst:?} > {bound:?}");
        writer.clear().await;
    }
}
