//! Counting filters (SPEC.md §4 "counting") over a Redis Cluster (3 masters, 3 replicas,
//! started by the test): a filter of one key (with and without a hash tag) and one of 8 shards
//! through every operation — single items, the idempotent insert, removes, small batches,
//! batches of more than `MAX_OFFSETS_PER_COMMAND` counters (several commands per key, or one
//! dense swap per key with its scratch keys in the key's slot), info,
//! reads served by replicas, writes that wait for a replica, expire and clear — with every key
//! the filter makes checked on the nodes themselves.

mod common;

use common::cluster::{calls, cli, reset_stats, RedisCluster};
use redbloom::{CountingBloom, KeyTtl, MAX_OFFSETS_PER_COMMAND};
use redis::cluster_async::ClusterConnection;
use redis::cluster_read_routing::RandomReplicaStrategy;
use std::time::Duration;

/// The items the filters are sized for; the big batch holds as many, so it outweighs the
/// counters and goes the dense way (a swap per key).
const CAPACITY: u64 = 20_000;
const BIG: usize = 20_000;
/// A capacity for which the big batch goes by `BITFIELD` commands: the counters outweigh its
/// counters at 64 bytes each (about 12 MB of counters: past the 8 MiB a swap takes in one
/// key, and 1.5 MB a shard of eight against 1.1 MB for a shard's share of the batch).
const LARGE: u64 = 2_500_000;

fn counting<C>(conn: C, key: &str, shards: u32, capacity: u64) -> CountingBloom<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    CountingBloom::builder(key)
        .expected_items(capacity)
        .false_positive_rate(0.01)
        .shards(shards)
        .build(conn)
        .unwrap()
}

/// A cluster connection whose reads (`BITFIELD_RO`, `GETRANGE`, `PTTL`) go to a random replica
/// of their slot.
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

fn count(flags: &[bool]) -> usize {
    flags.iter().filter(|&&f| f).count()
}

/// Every operation on the counting filter `key` of `shards` shards over `cluster`, sized for
/// `capacity` items ([`CAPACITY`]: the big batch goes dense; [`LARGE`]: by commands).
async fn every_operation(cluster: &RedisCluster, key: &str, shards: u32, capacity: u64) {
    let conn = cluster.connection().await;
    let blocked = counting(conn.clone(), key, shards, capacity);
    let dense = capacity == CAPACITY;
    let keys = u64::from(shards);
    assert_eq!(blocked.shards(), shards);
    let masters = cluster.master_ports();
    let replicas = replica_ports(cluster);
    assert_eq!((masters.len(), replicas.len()), (3, 3));
    // Items per command: a batch of more items takes several commands on a key.
    let per_command = MAX_OFFSETS_PER_COMMAND / blocked.hashes() as usize;
    let commands = BIG.div_ceil(per_command) as u64;
    assert!(
        commands >= 8,
        "{key}: {commands} commands for the big batch"
    );

    // Single items: adds count, removes take them back, the idempotent insert counts once.
    assert!(!blocked.exists("a").await.unwrap(), "{key}");
    assert!(
        !blocked.remove("a").await.unwrap(),
        "{key}: nothing to remove"
    );
    assert!(
        blocked.add("a").await.unwrap(),
        "{key}: the first add is new"
    );
    assert!(!blocked.add("a").await.unwrap(), "{key}: counted twice");
    assert!(blocked.remove("a").await.unwrap(), "{key}");
    assert!(
        blocked.exists("a").await.unwrap(),
        "{key}: added twice, removed once"
    );
    assert!(blocked.add_if_absent("u").await.unwrap(), "{key}");
    assert!(!blocked.add_if_absent("u").await.unwrap(), "{key}");
    assert!(blocked.remove("u").await.unwrap(), "{key}");
    assert!(
        !blocked.exists("u").await.unwrap(),
        "{key}: inserted twice, removed once"
    );

    // Small batches, in order.
    assert_eq!(
        blocked.add_many(&["x", "y", "x"]).await.unwrap(),
        [true, true, false],
        "{key}"
    );
    assert_eq!(
        blocked.remove_many(&["x", "z", "x", "x"]).await.unwrap(),
        [true, false, true, false],
        "{key}: x twice (added twice), then absent"
    );
    assert_eq!(
        blocked.exists_many(&["a", "x", "y", "z"]).await.unwrap(),
        [true, false, true, false],
        "{key}"
    );
    assert_eq!(
        blocked.add_many_if_absent(&["y", "w", "w"]).await.unwrap(),
        [false, true, false],
        "{key}"
    );
    let small = items("small", 40);
    assert_eq!(blocked.add_many(&small).await.unwrap(), [true; 40], "{key}");
    let before = blocked.info().await.unwrap();
    assert_eq!(before.counters_saturated, 0, "{key}");

    // Batches of 20,000 items, 140,000 counters: several commands on every key, or one swap
    // of its counters (scratch keys in its slot, written and renamed in one transaction).
    reset_stats(cluster);
    let big = items("big", BIG);
    let new = count(&blocked.add_many(&big).await.unwrap());
    // About 0.5% are expected to have found all their counters in use already.
    assert!((19_500..=BIG).contains(&new), "{key}: {new} new of {BIG}");
    let increments = calls(&masters, "bitfield");
    if dense {
        assert_eq!(increments, 0, "{key}");
        assert_eq!(calls(&masters, "bitcount"), keys, "{key}: one swap per key");
        assert_eq!(calls(&masters, "rename"), keys, "{key}: one swap per key");
    } else {
        assert!(
            increments >= commands.max(keys),
            "{key}: {increments} BITFIELD for {BIG} items"
        );
    }
    if shards == 1 && !dense {
        // Each command one script with the parameters' check and the counters' presence (a
        // write never makes a lost filter again), its increments in BITFIELD calls of at most
        // 1,000 offsets.
        let scripts = calls(&masters, "evalsha") + calls(&masters, "eval");
        assert_eq!(scripts, commands, "{key}");
        assert_eq!(calls(&masters, "exec"), 0, "{key}");
        assert!(increments >= commands, "{key}");
    }
    assert_eq!(
        count(&blocked.exists_many(&big).await.unwrap()),
        BIG,
        "{key}: every item of the big batch is found"
    );
    let reads = calls(&masters, "bitfield_ro") + calls(&masters, "getrange");
    assert!(reads >= u64::from(shards), "{key}: {reads} reads");
    reset_stats(cluster);
    assert_eq!(
        count(&blocked.add_many_if_absent(&big).await.unwrap()),
        0,
        "{key}: every item is present already"
    );
    let scripts = calls(&masters, "evalsha") + calls(&masters, "eval");
    if dense {
        assert_eq!(scripts, keys, "{key}: one swap per key");
        assert_eq!(calls(&masters, "rename"), 0, "{key}: nothing changed");
    } else {
        assert!(
            scripts >= commands.max(keys),
            "{key}: {scripts} scripts for {BIG} items"
        );
    }
    assert!(count(&blocked.exists_many(&small).await.unwrap()) == small.len());
    let absent = items("absent", 2_000);
    let on_masters = blocked.exists_many(&absent).await.unwrap();
    // (x and z may be false positives now.)
    let few = ["a", "x", "y", "z"];
    let few_on_masters = blocked.exists_many(&few).await.unwrap();
    assert!(few_on_masters[0] && few_on_masters[2], "{key}");
    // About 1% at the capacity.
    assert!(count(&on_masters) < 100, "{key}: {on_masters:?}");

    // Info, over the shards.
    let info = blocked.info().await.unwrap();
    assert_eq!(info.filter.key, key);
    assert_eq!(info.filter.bits, blocked.counters(), "{key}");
    assert_eq!(info.counters_in_use, info.filter.bits_set, "{key}");
    assert!(
        info.counters_in_use > before.counters_in_use + 50_000,
        "{key}: {info:?}"
    );
    assert_eq!(info.counters_saturated, 0, "{key}: {info:?}");
    let estimate = info.filter.estimated_items;
    assert!(
        (18_500.0..=21_500.0).contains(&estimate),
        "{key}: {estimate} items estimated"
    );
    // Two counters a byte; each key's string as long as its last counter in use.
    let most = blocked.counters().div_ceil(2) + u64::from(shards);
    assert!(
        (most - most / 100..=most).contains(&info.filter.bytes),
        "{key}: {} bytes for {} counters",
        info.filter.bytes,
        blocked.counters()
    );
    assert_eq!(info.filter.ttl, KeyTtl::Persistent, "{key}");

    // The keys on the nodes: the counters (at the key itself, or one key per shard, each in
    // its own slot range) and the stored parameters beside the key, nothing else.
    let made = keys_on_masters(cluster, key);
    let params = common::companion(key, "params");
    assert_eq!(made.len(), shards as usize + 1, "{key}: {made:?}");
    assert!(made.iter().any(|(_, k)| *k == params), "{key}: {made:?}");
    for (port, k) in &made {
        assert_eq!(*port, cluster.master_of(k), "{k}");
        assert_eq!(cli(*port, &["type", k]).trim(), "string", "{k}");
    }
    if shards == 1 {
        assert!(made.iter().any(|(_, k)| k == key), "{key}: {made:?}");
        assert!(made.iter().all(|(p, _)| *p == made[0].0), "{key}: {made:?}");
    } else {
        for shard in 0..shards {
            let tail = format!("}}:{key}:shard:{shard}/{shards}");
            assert!(
                made.iter()
                    .any(|(_, k)| k.starts_with("{rb") && k.ends_with(&tail)),
                "{key}: shard {shard}: {made:?}"
            );
        }
        let mut homes: Vec<u16> = made.iter().map(|(port, _)| *port).collect();
        homes.sort_unstable();
        homes.dedup();
        assert_eq!(homes.len(), 3, "{key}: the shards spread over every master");
    }

    // Reads served by replicas, once the writes have replicated: every item found, the same
    // answers and counts as the masters', and no read reaching a master.
    for &port in &masters {
        cluster.wait_replicated(port);
    }
    let reader = counting(replica_reading(cluster).await, key, shards, capacity);
    // (The reader's parameters check, a script, goes to the masters; its first call.)
    assert!(reader.exists("a").await.unwrap(), "{key}");
    reset_stats(cluster);
    assert!(reader.exists("y").await.unwrap(), "{key}");
    for item in big.iter().step_by(500) {
        assert!(reader.exists(item).await.unwrap(), "{key}: {item}");
    }
    assert_eq!(
        reader.exists_many(&few).await.unwrap(),
        few_on_masters,
        "{key}"
    );
    assert_eq!(
        count(&reader.exists_many(&small).await.unwrap()),
        small.len()
    );
    assert_eq!(
        count(&reader.exists_many(&big).await.unwrap()),
        BIG,
        "{key}: the replicas find every item of the big batch"
    );
    assert_eq!(
        reader.exists_many(&absent).await.unwrap(),
        on_masters,
        "{key}: the replicas answer as the masters"
    );
    let read_info = reader.info().await.unwrap();
    assert_eq!(read_info, info, "{key}: the replicas count as the masters");
    let reads = ["bitfield_ro", "getrange", "pttl", "bitfield"];
    let on_masters: u64 = reads.iter().map(|c| calls(&masters, c)).sum();
    let on_replicas: u64 = reads.iter().map(|c| calls(&replicas, c)).sum();
    assert_eq!(on_masters, 0, "{key}: the masters served reads");
    assert!(on_replicas > 40, "{key}: the replicas served {on_replicas}");
    assert!(calls(&replicas, "bitfield_ro") > 40, "{key}");
    assert!(calls(&replicas, "pttl") >= u64::from(shards), "{key}: info");

    // Removed, the big batch is gone: every counter back where it was.
    reset_stats(cluster);
    assert_eq!(
        count(&blocked.remove_many(&big).await.unwrap()),
        BIG,
        "{key}: every added item is present, and removed"
    );
    let scripts = calls(&masters, "evalsha") + calls(&masters, "eval");
    if dense {
        assert_eq!((scripts, calls(&masters, "rename")), (keys, keys), "{key}");
    } else {
        assert!(
            scripts >= commands,
            "{key}: {scripts} scripts for {BIG} items"
        );
    }
    let after = blocked.info().await.unwrap();
    assert_eq!(after.counters_in_use, before.counters_in_use, "{key}");
    assert!(
        count(&blocked.exists_many(&big).await.unwrap()) < 20,
        "{key}"
    );
    assert_eq!(count(&blocked.exists_many(&small).await.unwrap()), 40);

    // Writes that wait for a replica: WAIT goes to the key's master, whose replica confirms.
    let durable = CountingBloom::builder(key)
        .expected_items(capacity)
        .false_positive_rate(0.01)
        .shards(shards)
        .wait_for_replicas(1, Duration::from_secs(5))
        .build(conn.clone())
        .unwrap();
    reset_stats(cluster);
    assert!(durable.add("d").await.unwrap(), "{key}");
    assert!(durable.add_if_absent("e").await.unwrap(), "{key}");
    assert!(durable.remove("d").await.unwrap(), "{key}");
    assert_eq!(durable.add_many(&["f", "g"]).await.unwrap(), [true; 2]);
    assert_eq!(
        durable.remove_many(&["e", "f", "g"]).await.unwrap(),
        [true; 3]
    );
    let waits = calls(&masters, "wait");
    assert!((5..=8).contains(&waits), "{key}: {waits} WAIT");

    // Expire: every key of the filter, the parameters too.
    assert!(
        blocked.expire(Duration::from_secs(30)).await.unwrap(),
        "{key}"
    );
    let ttl = blocked.info().await.unwrap().filter.ttl;
    assert!(
        matches!(ttl, KeyTtl::Expires(t)
            if t > Duration::from_secs(25) && t <= Duration::from_secs(30)),
        "{key}: {ttl:?}"
    );
    let made = keys_on_masters(cluster, key);
    assert_eq!(made.len(), shards as usize + 1, "{key}: {made:?}");
    for (port, k) in &made {
        let pttl = pttl_on(*port, k);
        assert!((1..=30_000).contains(&pttl), "{key}: {k} PTTL {pttl}");
    }
    assert!(blocked.exists("a").await.unwrap(), "{key}");

    // Clear: no key of the filter remains, on any node.
    assert!(blocked.clear().await.unwrap(), "{key}");
    let left = keys_on_masters(cluster, key);
    assert!(left.is_empty(), "{key}: left after clear: {left:?}");
    for &port in &masters {
        cluster.wait_replicated(port);
    }
    for &port in &replicas {
        let left = keys_on(port, key);
        assert!(left.is_empty(), "{key}: left on replica {port}: {left:?}");
    }
    assert!(!blocked.exists("a").await.unwrap(), "{key}");
    assert_eq!(count(&blocked.exists_many(&small).await.unwrap()), 0);
    assert_eq!(blocked.info().await.unwrap().filter.ttl, KeyTtl::Missing);
    assert!(
        !blocked.clear().await.unwrap(),
        "{key}: nothing left to clear"
    );
    assert!(
        blocked.add("a").await.unwrap(),
        "{key}: new again after a clear"
    );
    // Every shard is made again before the parameters are stored (a shard is never merely
    // unwritten: one gone under stored parameters is lost data, SPEC.md §3).
    assert_eq!(
        keys_on_masters(cluster, key).len(),
        shards as usize + 1,
        "{key}: every shard's counters and the parameters again"
    );
    assert!(blocked.clear().await.unwrap());
    assert!(keys_on_masters(cluster, key).is_empty(), "{key}");
}

#[tokio::test]
async fn a_counting_filter_of_one_key_over_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    // A key without a hash tag (its parameters take it whole as their tag) and one with, each
    // with the big batch dense and by commands.
    for capacity in [CAPACITY, LARGE] {
        every_operation(&cluster, "cnt:one", 1, capacity).await;
        every_operation(&cluster, "{tenant:7}:cnt", 1, capacity).await;
    }
}

#[tokio::test]
async fn a_counting_filter_of_eight_shards_over_a_cluster() {
    let cluster = RedisCluster::start().expect("redis-server and redis-cli on PATH");
    every_operation(&cluster, "cnt:sharded", 8, CAPACITY).await;
    every_operation(&cluster, "cnt:sharded", 8, LARGE).await;
}

/// A client's remove after its filter was made again by another client with another size:
/// A (of `shards` shards, sized for 500 items a shard) has checked the stored parameters with
/// its first write; C, of A's parameters, clears the filter; B makes it again sized for twice
/// as many items and adds 5,000 a shard. Then A removes B's items (as an application
/// instance still running the old configuration would remove its own). What A's add, remove
/// and remove_many answer, and how many of its items B still finds.
async fn remove_after_remade(shards: u32) -> (String, String, String, usize, usize) {
    let redis = common::redis().await;
    let key = common::unique_key(&format!("counting-remade-{shards}"));
    let conn = redis.connection().await;
    let sized = |items: u64| {
        CountingBloom::builder(&key)
            .expected_items(items * u64::from(shards))
            .false_positive_rate(0.01)
            .shards(shards)
            .build(conn.clone())
            .unwrap()
    };
    let (a, c, b) = (sized(500), sized(500), sized(1_000));
    assert!(a.add("a").await.unwrap(), "A has checked the parameters");
    assert!(c.clear().await.unwrap(), "C, of A's parameters, clears");
    let items = items("b", 5_000 * shards as usize);
    b.add_many(&items).await.unwrap();
    assert_eq!(count(&b.exists_many(&items).await.unwrap()), items.len());

    let add = format!("{:?}", a.add("x").await.map_err(|e| e.to_string()));
    let remove = format!("{:?}", a.remove(&items[0]).await.map_err(|e| e.to_string()));
    let removes = match a.remove_many(&items).await {
        Ok(removed) => format!("Ok: {} of {} removed", count(&removed), items.len()),
        Err(err) => format!("Err({err})"),
    };
    let found = count(&b.exists_many(&items).await.unwrap());
    b.clear().await.unwrap();
    (add, remove, removes, found, items.len())
}

/// A remove checks the stored parameters as an add does: after the filter was made again with
/// another size (see [`remove_after_remade`]), A's add gets `ParamsMismatch` (its
/// `SET ... NX GET` rides in the add's transaction), and so does A's remove, writing nothing:
/// `lua/counting_remove.lua` checks the parameters in the same step. (Before the fix it was
/// given the counters' key alone and removed at A's positions in B's counters: B then found
/// 1,775 of the 5,000 items it had added. On one server: a filter of one key checks its
/// parameters the same way on a cluster.)
#[tokio::test]
async fn a_remove_after_the_filter_was_made_again_with_other_parameters_is_refused() {
    let (add, remove, removes, found, added) = remove_after_remade(1).await;
    assert!(add.contains("created with"), "A's add: {add}");
    assert!(
        remove.contains("created with") && removes.contains("created with") && found == added,
        "A's remove: {remove}; A's remove_many: {removes}; B finds {found} of the {added} \
         items it added and never removed"
    );
}

/// The same for a sharded filter: a remove checks its parameters (in their own slot) before it
/// touches any shard, not beside the writes as adds do, since a remove cannot be undone and
/// takes other items with it. (Before the fix the check ran at the same time as the removes:
/// B then found 7,228 of its 20,000 items.)
#[tokio::test]
async fn a_sharded_remove_after_the_filter_was_made_again_is_refused_before_it_writes() {
    let (_, remove, removes, found, added) = remove_after_remade(4).await;
    assert!(
        remove.contains("created with") && removes.contains("created with") && found == added,
        "A's remove: {remove}; A's remove_many: {removes}; B finds {found} of the {added} \
         items it added and never removed"
    );
}
