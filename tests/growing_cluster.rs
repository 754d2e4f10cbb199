//! Growing filters (SPEC.md §4 "growing") over a Redis Cluster (3 masters, 3 replicas,
//! started by the test): a filter of one key (with and without a hash tag) and one of 8 shards
//! through every operation — single items, small batches, four clients adding at once across
//! level boundaries (no false negative, each level but the newest filled exactly to its
//! capacity: never two levels for one fill), info, reads served by replicas, writes that wait
//! for a replica, expire (levels made after it inherit it) and clear — with every key the
//! filter makes checked on the nodes themselves.

mod common;

use common::cluster::{calls, cli, reset_stats, RedisCluster};
use futures_util::future::join_all;
use redbloom::{GrowingBloom, KeyTtl};
use redis::cluster_async::ClusterConnection;
use redis::cluster_read_routing::RandomReplicaStrategy;
use std::collections::BTreeMap;
use std::time::Duration;

/// The first level's items (all shards together), and the growth.
const FIRST: u64 = 1_000;
const GROWTH: u64 = 2;
/// Items the four clients add together: five levels of a filter of one key, and of each shard
/// of an 8-shard filter.
const BIG: usize = 20_000;
/// Items per call of each client: level boundaries fall inside calls, and between calls of
/// different clients.
const CHUNK: usize = 250;

fn growing<C>(conn: C, key: &str, shards: u32) -> GrowingBloom<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    GrowingBloom::builder(key)
        .expected_items(FIRST)
        .false_positive_rate(0.01)
        .growth(GROWTH as u32)
        .shards(shards)
        .build(conn)
        .unwrap()
}

/// A cluster connection whose reads (`EVALSHA_RO`, and the plain reads of info and of big
/// checks) go to a random replica of their slot.
async fn replica_reading(cluster: &RedisCluster) -> ClusterConnection {
    cluster
        .client_builder()
        .read_routing_strategy(RandomReplicaStrategy)
        .build()
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn count(flags: &[bool]) -> usize {
    flags.iter().filter(|&&f| f).count()
}

/// The levels a part whose first level holds `first` items needs for `items` new items: the
/// smallest L with Σ_{i<L} first·GROWTH^i ≥ items.
fn levels_for(items: u64, first: u64) -> u64 {
    let (mut levels, mut room, mut capacity) = (0, 0, first);
    while room < items {
        room += capacity;
        capacity *= GROWTH;
        levels += 1;
    }
    levels
}

/// The keys on the node on `port` whose name contains `part`.
fn keys_on(port: u16, part: &str) -> Vec<String> {
    let mut keys: Vec<String> = cli(port, &["keys", "*"])
        .lines()
        .map(str::trim)
        .filter(|k| k.contains(part))
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

/// (port, key) of every key on the masters whose name contains `part`.
fn keys_on_masters(cluster: &RedisCluster, part: &str) -> Vec<(u16, String)> {
    cluster
        .master_ports()
        .into_iter()
        .flat_map(|port| keys_on(port, part).into_iter().map(move |k| (port, k)))
        .collect()
}

fn pttl_on(port: u16, key: &str) -> i64 {
    cli(port, &["pttl", key]).trim().parse().unwrap()
}

/// A level counts hash on the node on `port`: level → new items it took.
fn counts_on(port: u16, counts: &str) -> BTreeMap<u64, u64> {
    let reply = cli(port, &["hgetall", counts]);
    let fields: Vec<u64> = reply.lines().map(|l| l.trim().parse().unwrap()).collect();
    fields.chunks(2).map(|pair| (pair[0], pair[1])).collect()
}

fn replica_ports(cluster: &RedisCluster) -> Vec<u16> {
    let masters = cluster.master_ports();
    cluster
        .nodes
        .iter()
        .map(|n| n.port())
        .filter(|p| !masters.contains(p))
        .collect()
}

/// A part of a filter on a master: its port, its counts hash, and its levels' counts.
type Part = (u16, String, BTreeMap<u64, u64>);

/// The filter's parts on the masters: per counts hash (one per shard), its port, its levels'
/// counts, and its segment found; every key checked to be a counts hash, the string of its
/// levels, or the parameters, and to live on the master of its slot. The total of
/// new items over the parts.
fn parts_on_masters(cluster: &RedisCluster, key: &str, shards: u32) -> (Vec<Part>, u64) {
    let made = keys_on_masters(cluster, key);
    let params = common::companion(key, "params");
    let prefix = |shard: u32| match shards {
        1 => common::companion(key, "grow:"),
        n => format!("}}:{key}:shard:{shard}/{n}:grow:"),
    };
    let mut parts = Vec::new();
    let mut expected = vec![params.clone()];
    let mut total = 0;
    for shard in 0..shards {
        let tail = prefix(shard);
        let counts: Vec<&(u16, String)> = made
            .iter()
            .filter(|(_, k)| {
                let hash = match shards {
                    1 => k.strip_prefix(&tail),
                    _ => k.split_once(&tail).map(|(_, h)| h),
                };
                hash.is_some_and(|h| h.len() == 8 && !h.contains(':'))
            })
            .collect();
        assert_eq!(counts.len(), 1, "{key}: shard {shard}: {made:?}");
        let (port, counts) = counts[0].clone();
        assert_eq!(cli(port, &["type", &counts]).trim(), "hash", "{counts}");
        let taken = counts_on(port, &counts);
        expected.push(counts.clone());
        // The levels' one string: levels share one (a segment) up to 4 MiB, and every filter
        // here is smaller.
        if !taken.is_empty() {
            let segment = format!("{counts}:0");
            assert_eq!(cli(port, &["type", &segment]).trim(), "string", "{segment}");
            expected.push(segment);
        }
        total += taken.values().sum::<u64>();
        parts.push((port, counts, taken));
    }
    let mut names: Vec<&str> = made.iter().map(|(_, k)| k.as_str()).collect();
    names.sort_unstable();
    expected.sort();
    assert_eq!(names, expected, "{key}: the filter's keys and nothing else");
    assert_eq!(
        cli(cluster.master_of(&params), &["type", &params]).trim(),
        "string"
    );
    for (port, k) in &made {
        assert_eq!(
            *port,
            cluster.master_of(k),
            "{k} lives on its slot's master"
        );
    }
    (parts, total)
}

/// Every operation on the growing filter `key` of `shards` shards over `cluster`.
async fn every_operation(cluster: &RedisCluster, key: &str, shards: u32) {
    let conn = cluster.connection().await;
    let frontier = growing(conn.clone(), key, shards);
    assert_eq!(frontier.shards(), shards);
    let first = FIRST.div_ceil(u64::from(shards));
    let masters = cluster.master_ports();
    let replicas = replica_ports(cluster);
    assert_eq!((masters.len(), replicas.len()), (3, 3));

    // Single items and small batches, in order.
    assert!(!frontier.exists("a").await.unwrap(), "{key}");
    assert!(
        frontier.add("a").await.unwrap(),
        "{key}: the first add is new"
    );
    assert!(!frontier.add("a").await.unwrap(), "{key}: present");
    assert!(frontier.exists("a").await.unwrap(), "{key}");
    assert_eq!(
        frontier.add_many(&["x", "y", "x"]).await.unwrap(),
        [true, true, false],
        "{key}"
    );
    assert_eq!(
        frontier.exists_many(&["a", "x", "y", "z"]).await.unwrap(),
        [true, true, true, false],
        "{key}"
    );
    let info = frontier.info().await.unwrap();
    assert_eq!((info.levels, info.items), (1, 3), "{key}: {info:?}");

    // Four clients, each on its own connection, add 5,000 items each in calls of 250, at once:
    // level boundaries fall inside calls and between clients.
    let big = items("big", BIG);
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(growing(cluster.connection().await, key, shards));
    }
    let adds = clients.iter().enumerate().map(|(c, client)| {
        let mine: Vec<&String> = big.iter().skip(c).step_by(4).collect();
        async move {
            let mut new = 0;
            for chunk in mine.chunks(CHUNK) {
                new += count(&client.add_many(chunk).await.unwrap());
            }
            new as u64
        }
    });
    let new: u64 = join_all(adds).await.into_iter().sum();
    // An item is not new only as a false positive of the levels: ≤ 1%.
    assert!((19_700..=BIG as u64).contains(&new), "{key}: {new} new");
    let added = new + 3;
    assert_eq!(
        count(&frontier.exists_many(&big).await.unwrap()),
        BIG,
        "{key}: no false negative"
    );
    for item in big.iter().step_by(997) {
        assert!(frontier.exists(item).await.unwrap(), "{key}: {item}");
    }
    let absent = items("absent", 2_000);
    let on_masters = frontier.exists_many(&absent).await.unwrap();
    assert!(
        count(&on_masters) < 60,
        "{key}: {} false positives",
        count(&on_masters)
    );

    // The keys on the nodes: per part its counts and levels (each but the newest filled exactly
    // to its capacity: no fill made two levels), all in the part's slot; the parameters.
    let (parts, total) = parts_on_masters(cluster, key, shards);
    assert_eq!(total, added, "{key}: every new item counted once");
    let mut most = 0;
    for (_, counts, taken) in &parts {
        let part_items: u64 = taken.values().sum();
        let levels = levels_for(part_items, first);
        assert_eq!(taken.len() as u64, levels, "{counts}: {taken:?}");
        assert!(levels >= 5, "{counts}: {taken:?}");
        for (&level, &n) in taken {
            let capacity = first * GROWTH.pow(level as u32);
            match level + 1 == levels {
                true => assert!((1..=capacity).contains(&n), "{counts}: {taken:?}"),
                false => assert_eq!(n, capacity, "{counts}: level {level}: {taken:?}"),
            }
        }
        most = most.max(levels);
    }
    let mut homes: Vec<u16> = parts.iter().map(|(port, _, _)| *port).collect();
    homes.sort_unstable();
    homes.dedup();
    assert_eq!(
        homes.len(),
        if shards == 1 { 1 } else { 3 },
        "{key}: the shards spread over every master"
    );
    if shards == 1 {
        let params = keys_on_masters(cluster, key)
            .into_iter()
            .find(|(_, k)| *k == common::companion(key, "params"))
            .unwrap();
        assert_eq!(
            params.0, homes[0],
            "{key}: one slot for all of a filter of one key"
        );
    }

    // Info, over the parts.
    let info = frontier.info().await.unwrap();
    assert_eq!(info.filter.key, key);
    assert_eq!(
        (info.levels, info.items),
        (most as u32, added),
        "{key}: {info:?}"
    );
    assert!(info.capacity >= added, "{key}: {info:?}");
    assert!(info.filter.estimated_fpr <= 0.01, "{key}: {info:?}");
    assert_eq!(info.filter.ttl, KeyTtl::Persistent, "{key}");

    // Reads served by replicas, once the writes have replicated: every item found, the same
    // answers and info as the masters', and no read reaching a master.
    for &port in &masters {
        cluster.wait_replicated(port);
    }
    let reader = growing(replica_reading(cluster).await, key, shards);
    // (A sharded reader's parameters check, a script that may write, goes to a master.)
    assert!(reader.exists("a").await.unwrap(), "{key}");
    reset_stats(cluster);
    assert!(reader.exists("y").await.unwrap(), "{key}");
    for item in big.iter().step_by(500) {
        assert!(reader.exists(item).await.unwrap(), "{key}: {item}");
    }
    assert_eq!(
        reader.exists_many(&["a", "x", "y", "z"]).await.unwrap(),
        [true, true, true, false],
        "{key}"
    );
    assert_eq!(
        count(&reader.exists_many(&big).await.unwrap()),
        BIG,
        "{key}: the replicas find every item"
    );
    assert_eq!(
        reader.exists_many(&absent).await.unwrap(),
        on_masters,
        "{key}: the replicas answer as the masters"
    );
    assert_eq!(
        reader.info().await.unwrap(),
        info,
        "{key}: the replicas' info"
    );
    // Whatever commands the reads take (scripts or plain reads), none reached a master.
    let reads = [
        "evalsha_ro",
        "eval_ro",
        "evalsha",
        "eval",
        "getrange",
        "get",
        "exists",
        "hlen",
        "hgetall",
        "bitcount",
        "strlen",
        "pttl",
        "getbit",
        "bitfield_ro",
        "bitfield",
    ];
    let on_masters: u64 = reads.iter().map(|c| calls(&masters, c)).sum();
    let on_replicas: u64 = reads.iter().map(|c| calls(&replicas, c)).sum();
    assert_eq!(on_masters, 0, "{key}: the masters served reads");
    assert!(on_replicas > 40, "{key}: the replicas served {on_replicas}");
    assert!(
        calls(&replicas, "hgetall") >= u64::from(shards),
        "{key}: info"
    );

    // Writes that wait for a replica: WAIT goes to the key's master, whose replica confirms.
    let durable = GrowingBloom::builder(key)
        .expected_items(FIRST)
        .false_positive_rate(0.01)
        .growth(GROWTH as u32)
        .shards(shards)
        .wait_for_replicas(1, Duration::from_secs(5))
        .build(conn.clone())
        .unwrap();
    reset_stats(cluster);
    // (Items that are no false positive of the filter as loaded: a fixed outcome.)
    assert!(durable.add("durable:d").await.unwrap(), "{key}");
    assert_eq!(
        durable.add_many(&["durable:f", "durable:g"]).await.unwrap(),
        [true; 2]
    );
    let waits = calls(&masters, "wait");
    assert!((2..=3).contains(&waits), "{key}: {waits} WAIT");
    assert_eq!(calls(&replicas, "wait"), 0, "{key}");

    // Expire: every key of the filter, the parameters too, and the levels made after it.
    assert!(frontier.expire(Duration::from_secs(30)).await.unwrap());
    let more = items("more", 15_000);
    assert!(count(&frontier.add_many(&more).await.unwrap()) > 14_700);
    let grown = frontier.info().await.unwrap();
    assert!(grown.levels > info.levels, "{key}: {grown:?}");
    assert!(
        matches!(grown.filter.ttl, KeyTtl::Expires(t)
            if t > Duration::from_secs(25) && t <= Duration::from_secs(30)),
        "{key}: {:?}",
        grown.filter.ttl
    );
    let made = keys_on_masters(cluster, key);
    // Per part its counts and the one string of its levels, and the parameters.
    assert_eq!(made.len(), parts.len() * 2 + 1, "{key}: {made:?}");
    for (port, k) in &made {
        let pttl = pttl_on(*port, k);
        assert!((1..=30_000).contains(&pttl), "{key}: {k} PTTL {pttl}");
    }
    let (_, total) = parts_on_masters(cluster, key, shards);
    assert_eq!(total, grown.items, "{key}");

    // Clear: no key of the filter remains, on any node.
    assert!(frontier.clear().await.unwrap(), "{key}");
    let left = keys_on_masters(cluster, key);
    assert!(left.is_empty(), "{key}: left after clear: {left:?}");
    for &port in &masters {
        cluster.wait_replicated(port);
    }
    for &port in &replicas {
        let left = keys_on(port, key);
        assert!(left.is_empty(), "{key}: left on replica {port}: {left:?}");
    }
    assert!(!frontier.exists("a").await.unwrap(), "{key}");
    assert_eq!(
        count(&frontier.exists_many(&big).await.unwrap()),
        0,
        "{key}"
    );
    let info = frontier.info().await.unwrap();
    assert_eq!(
        (info.levels, info.items, info.filter.ttl),
        (0, 0, KeyTtl::Missing),
        "{key}"
    );
    assert!(
        !frontier.clear().await.unwrap(),
        "{key}: nothing left to clear"
    );
    assert!(frontier.add("a").await.unwrap(), "{key}: new again");
    assert_eq!(
        keys_on_masters(cluster, key).len(),
        3,
        "{key}: a part's counts and first level, and the parameters"
    );
    assert!(frontier.clear().await.unwrap());
    assert!(keys_on_masters(cluster, key).is_empty(), "{key}");
}

#[tokio::test]
async fn a_growing_filter_of_one_key_over_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    // A key without a hash tag (its levels and parameters take it whole as their tag) and one
    // with.
    every_operation(&cluster, "grw:one", 1).await;
    every_operation(&cluster, "{tenant:7}:grw", 1).await;
}

#[tokio::test]
async fn a_growing_filter_of_eight_shards_over_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    every_operation(&cluster, "grw:sharded", 8).await;
}
