//! Window filters (SPEC.md §4 "window") over a Redis Cluster (3 masters, 3 replicas, started
//! by the test): a filter of one key (with and without a hash tag) and one of 8 shards through
//! every operation — single items, small batches, a batch big enough for the dense path (a
//! `MULTI` per slot group), info, reads served by replicas, expire and clear — with every key
//! the filter makes checked on the nodes themselves.

mod common;

use common::cluster::{calls, cli, reset_stats, RedisCluster};
use redbloom::{KeyTtl, WindowBloom};
use redis::cluster_async::ClusterConnection;
use redis::cluster_read_routing::RandomReplicaStrategy;
use std::time::Duration;

const W: Duration = Duration::from_secs(60);
const G: u32 = 4;
/// The most items in any one window the filters are sized for; the big batch holds twice as
/// many.
const CAPACITY: u64 = 10_000;
const BIG: usize = 20_000;

fn window<C>(conn: C, key: &str, shards: u32) -> WindowBloom<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    WindowBloom::builder(key, W)
        .generations(G)
        .expected_items(CAPACITY)
        .false_positive_rate(0.01)
        .shards(shards)
        .build(conn)
        .unwrap()
}

/// A cluster connection whose reads (`EVALSHA_RO`, `EVAL_RO`, `GETRANGE`, `PTTL`) go to a
/// random replica of their slot.
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

fn replica_ports(cluster: &RedisCluster) -> Vec<u16> {
    let masters = cluster.master_ports();
    cluster
        .nodes
        .iter()
        .map(|n| n.port())
        .filter(|p| !masters.contains(p))
        .collect()
}

/// The filter's name in its keys: the prefix of a one-key filter's companions, or the name
/// inside every shard's keys.
fn name_in_keys(key: &str, shards: u32) -> String {
    match shards {
        1 => common::companion(key, ""),
        _ => key.to_owned(),
    }
}

/// Every operation on the window filter `key` of `shards` shards over `cluster`.
async fn every_operation(cluster: &RedisCluster, key: &str, shards: u32) {
    let conn = cluster.connection().await;
    let recent = window(conn.clone(), key, shards);
    assert_eq!(recent.shards(), shards);
    let masters = cluster.master_ports();
    let replicas = replica_ports(cluster);
    assert_eq!((masters.len(), replicas.len()), (3, 3));
    let name = name_in_keys(key, shards);

    // Single items and small batches (the per-item scripts).
    assert!(!recent.exists("a").await.unwrap(), "{key}");
    assert!(
        recent.add("a").await.unwrap(),
        "{key}: the first add is new"
    );
    assert!(!recent.add("a").await.unwrap(), "{key}: the second is not");
    assert!(recent.exists("a").await.unwrap(), "{key}");
    assert_eq!(
        recent.add_many(&["b", "a", "b", "c"]).await.unwrap(),
        [true, false, false, true],
        "{key}: a repeated item is new at its first occurrence only"
    );
    assert_eq!(
        recent.exists_many(&["a", "b", "c", "d"]).await.unwrap(),
        [true, true, true, false],
        "{key}"
    );
    let small = items("small", 40);
    assert_eq!(recent.add_many(&small).await.unwrap(), [true; 40], "{key}");

    // A batch twice the capacity: the dense path (a bitmap merged in one MULTI per slot
    // group, then bitmaps read back for the check).
    reset_stats(cluster);
    let big = items("big", BIG);
    let new = recent.add_many(&big).await.unwrap();
    let new = new.iter().filter(|&&n| n).count();
    // About 465 of them are expected to be false positives of the items before them (all
    // their bits set already), at 20,000 items in a generation sized for 10,000.
    assert!((19_000..=BIG).contains(&new), "{key}: {new} new of {BIG}");
    assert!(
        calls(&masters, "bitop") >= u64::from(shards),
        "{key}: the big batch took the dense path in every slot group"
    );
    assert!(
        recent.exists_many(&big).await.unwrap().iter().all(|&p| p),
        "{key}: every item of the big batch is found"
    );
    assert!(
        calls(&masters, "getrange") >= u64::from(shards),
        "{key}: the big check was dense"
    );
    assert!(recent.exists_many(&small).await.unwrap().iter().all(|&p| p));
    let absent = items("absent", 2_000);
    let on_masters = recent.exists_many(&absent).await.unwrap();
    let positives = on_masters.iter().filter(|&&p| p).count();
    // About 12% at twice the capacity.
    assert!(
        positives < 400,
        "{key}: {positives} false positives of 2000"
    );

    // Info, over the shards.
    let info = recent.info().await.unwrap();
    assert_eq!((info.window, info.generations), (W, G), "{key}");
    assert_eq!(info.filter.key, key);
    assert!(
        (1..=2).contains(&info.parts.len()),
        "{key}: one generation, or two when one began during the test: {info:?}"
    );
    let estimate = info.filter.estimated_items;
    assert!(
        (18_000.0..=22_500.0).contains(&estimate),
        "{key}: {estimate} items estimated"
    );
    // The parameters of a filter of one key expire with its newest generation; a sharded
    // filter's, in a slot of their own, do not.
    match shards {
        1 => assert!(
            matches!(info.filter.ttl, KeyTtl::Expires(ttl) if ttl <= W * G / (G - 1)),
            "{key}: {:?}",
            info.filter.ttl
        ),
        _ => assert_eq!(info.filter.ttl, KeyTtl::Persistent, "{key}"),
    }
    for part in &info.parts {
        match part.ttl {
            KeyTtl::Expires(ttl) => assert!(ttl <= W * G / (G - 1), "{key}: {ttl:?}"),
            other => panic!("{key}: every generation expires by itself: {other:?}"),
        }
    }

    // The keys on the nodes: the stored parameters beside the key, the generations (each
    // expiring by itself) in the filter's slot group or its shards', no scratch key left.
    let made = keys_on_masters(cluster, &name);
    let params = common::companion(key, "params");
    assert!(made.iter().any(|(_, k)| *k == params), "{key}: {made:?}");
    // Which companion `k` is: its name after the key's (`scratch`, `made:HASH`, ...).
    let named =
        |k: &str, what: &str| common::companion_of(k).is_some_and(|(_, n)| n.starts_with(what));
    assert!(
        made.iter().all(|(_, k)| !named(k, "scratch")),
        "{key}: {made:?}"
    );
    let gens: Vec<&(u16, String)> = made.iter().filter(|(_, k)| k.contains(":gen:")).collect();
    // Beside each part's generations, their ledger (lost data is an error), expiring with them.
    let ledgers: Vec<&(u16, String)> = made.iter().filter(|(_, k)| named(k, "made:")).collect();
    assert_eq!(ledgers.len(), shards as usize, "{key}: {made:?}");
    assert_eq!(
        gens.len() + ledgers.len() + 1,
        made.len(),
        "{key}: {made:?}"
    );
    for (port, gen) in gens.iter().chain(&ledgers) {
        let pttl = pttl_on(*port, gen);
        assert!((1..=80_000).contains(&pttl), "{key}: {gen} PTTL {pttl}");
        assert_eq!(*port, cluster.master_of(gen), "{gen}");
    }
    if shards == 1 {
        assert!(
            gens.iter().all(|(_, k)| k.starts_with(&name)),
            "{key}: {made:?}"
        );
        let homes: Vec<u16> = made.iter().map(|(port, _)| *port).collect();
        assert!(homes.iter().all(|&p| p == homes[0]), "{key}: {made:?}");
        let bare = keys_on_masters(cluster, key);
        assert!(
            bare.iter().all(|(_, k)| k != key),
            "{key}: the bare key stays free"
        );
    } else {
        for shard in 0..shards {
            let tail = format!(":{key}:shard:{shard}/{shards}:gen:");
            assert!(
                gens.iter()
                    .any(|(_, k)| k.starts_with("{rb") && k.contains(&tail)),
                "{key}: shard {shard} holds a generation: {made:?}"
            );
        }
        let mut homes: Vec<u16> = gens.iter().map(|(port, _)| *port).collect();
        homes.sort_unstable();
        homes.dedup();
        assert_eq!(homes.len(), 3, "{key}: the shards spread over every master");
    }

    // Reads served by replicas, once the writes have replicated: every item found, the same
    // answers as the masters', and no read reaching a master.
    for &port in &masters {
        cluster.wait_replicated(port);
    }
    let reader = window(replica_reading(cluster).await, key, shards);
    reset_stats(cluster);
    assert!(reader.exists("a").await.unwrap(), "{key}");
    for item in big.iter().step_by(500) {
        assert!(reader.exists(item).await.unwrap(), "{key}: {item}");
    }
    assert_eq!(
        reader.exists_many(&["a", "b", "c", "d"]).await.unwrap(),
        [true, true, true, false],
        "{key}"
    );
    assert!(reader.exists_many(&small).await.unwrap().iter().all(|&p| p));
    assert!(
        reader.exists_many(&big).await.unwrap().iter().all(|&p| p),
        "{key}: the replicas find every item of the big batch"
    );
    assert_eq!(
        reader.exists_many(&absent).await.unwrap(),
        on_masters,
        "{key}: the replicas answer as the masters"
    );
    let read_info = reader.info().await.unwrap();
    assert_eq!(read_info.parts.len(), info.parts.len(), "{key}");
    assert_eq!(read_info.filter.bits_set, info.filter.bits_set, "{key}");
    // (Checks read the newest generation first with BITFIELD_RO: the scripts' own count too.)
    let reads = ["evalsha_ro", "eval_ro", "getrange", "bitfield_ro"];
    let on_masters: u64 = reads.iter().map(|c| calls(&masters, c)).sum();
    let on_replicas: u64 = reads.iter().map(|c| calls(&replicas, c)).sum();
    assert_eq!(on_masters, 0, "{key}: the masters served reads");
    assert!(on_replicas > 40, "{key}: the replicas served {on_replicas}");
    assert!(calls(&replicas, "getrange") > 0, "{key}: dense reads too");

    // Added again, nothing is new (last: in a generation begun since, this copies the items
    // into it, which info would count twice).
    assert!(recent.add_many(&big).await.unwrap().iter().all(|&n| !n));

    // Expire: the parameters and every generation by then.
    assert!(
        recent.expire(Duration::from_secs(30)).await.unwrap(),
        "{key}"
    );
    let info = recent.info().await.unwrap();
    assert!(
        matches!(info.filter.ttl, KeyTtl::Expires(t)
            if t > Duration::from_secs(25) && t <= Duration::from_secs(30)),
        "{key}: {:?}",
        info.filter.ttl
    );
    assert!(
        info.parts
            .iter()
            .all(|p| matches!(p.ttl, KeyTtl::Expires(t) if t <= Duration::from_secs(30))),
        "{key}: {info:?}"
    );
    let made = keys_on_masters(cluster, &name);
    assert!(!made.is_empty());
    for (port, k) in &made {
        let pttl = pttl_on(*port, k);
        assert!((1..=30_000).contains(&pttl), "{key}: {k} PTTL {pttl}");
    }
    assert!(recent.exists_many(&big).await.unwrap().iter().all(|&p| p));

    // Clear: no key of the filter remains, on any node.
    assert!(recent.clear().await.unwrap(), "{key}");
    let left = keys_on_masters(cluster, &name);
    assert!(left.is_empty(), "{key}: left after clear: {left:?}");
    for &port in &masters {
        cluster.wait_replicated(port);
    }
    for &port in &replicas {
        let left = keys_on(port, &name);
        assert!(left.is_empty(), "{key}: left on replica {port}: {left:?}");
    }
    assert!(!recent.exists("a").await.unwrap(), "{key}");
    assert!(
        recent.exists_many(&big).await.unwrap().iter().all(|&p| !p),
        "{key}"
    );
    assert!(
        !recent.clear().await.unwrap(),
        "{key}: nothing left to clear"
    );
    assert!(
        recent.add("a").await.unwrap(),
        "{key}: new again after a clear"
    );
    assert!(recent.clear().await.unwrap());
    assert!(keys_on_masters(cluster, &name).is_empty(), "{key}");
}

#[tokio::test]
async fn a_window_filter_of_one_key_over_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    // A key without a hash tag (its sidecar keys take it whole as their tag) and one with.
    every_operation(&cluster, "win:one", 1).await;
    every_operation(&cluster, "{tenant:7}:win", 1).await;
}

#[tokio::test]
async fn a_window_filter_of_eight_shards_over_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    every_operation(&cluster, "win:sharded", 8).await;
}
